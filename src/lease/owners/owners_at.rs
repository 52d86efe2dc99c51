//! Who owns each lease, looked up where the owners run: on this machine by pid, or for
//! a registry on another host (`--host`) as that host's leasectl named them; and what
//! such a registry's state.db says of its sessions, read there.

use std::collections::HashMap;

use crate::lease::Location;
use crate::lease::owners::owner::{OwnerInfo, owner_infos};

/// Who owns each lease of `listing`, looked up where the owners run: here, or for a
/// registry on another host (`--host`), as that host's leasectl named them.
pub fn owners_of_listing(listing: &crate::lease::Listing) -> HashMap<u64, OwnerInfo> {
    let pids: Vec<u64> = listing.leases.iter().flatten().map(|v| v.entry.pid()).collect();
    owners_at(&listing.location, &pids)
}

/// The owners of `pids` at `location`: here, or as another host's leasectl last named them.
pub fn owners_at(location: &Location, pids: &[u64]) -> HashMap<u64, OwnerInfo> {
    match location {
        Location::Ssh(at) => crate::lease::ssh::link::Link::to(&at.host).owners(&at.profile),
        _ => owner_infos(pids),
    }
}

/// For a registry on another host: what its state.db said of the leased sessions and the
/// idle threshold its home sets (None: a registry here, read here; or nothing said).
pub fn remote_sessions(location: &Location) -> Option<(crate::lease::home::context::Contexts, std::time::Duration)> {
    let Location::Ssh(at) = location else { return None };
    let said = crate::lease::ssh::link::Link::to(&at.host).sessions(&at.profile)?;
    Some((
        said.contexts,
        std::time::Duration::try_from_secs_f64(said.idle_secs).unwrap_or(crate::lease::home::context::DEFAULT_IDLE),
    ))
}
