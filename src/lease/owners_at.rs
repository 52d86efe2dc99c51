//! Who owns each lease, looked up where the owners run: on this machine by pid, or for
//! a registry on another host (`--host`) as that host's leasectl named them.

use std::collections::HashMap;

use super::Location;
use super::owner::{OwnerInfo, owner_infos};

/// Who owns each lease of `listing`, looked up where the owners run: here, or for a
/// registry on another host (`--host`), as that host's leasectl named them.
pub fn owners_of_listing(listing: &super::Listing) -> HashMap<u64, OwnerInfo> {
    let pids: Vec<u64> = listing.leases.iter().flatten().map(|v| v.entry.pid()).collect();
    owners_at(&listing.location, &pids)
}

/// The owners of `pids` at `location`: here, or as another host's leasectl last named them.
pub fn owners_at(location: &Location, pids: &[u64]) -> HashMap<u64, OwnerInfo> {
    match location {
        Location::Ssh(at) => super::ssh::link::Link::to(&at.host).owners(&at.profile),
        _ => owner_infos(pids),
    }
}
