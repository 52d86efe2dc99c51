//! A leasectl run inside a container (a pid namespace that is not the host's) sees only
//! that namespace's processes: owners outside it look dead or recycled from here. Said
//! once before `ls`, `doctor` and `prune` of this host's registries, with the command to
//! run on the host instead; prune also names what it removes that may be such an owner's.

use super::args::Command;
use super::hints::Hints;
use crate::lease::owners::namespaces;
use crate::lease::{LeaseView, Liveness, Location};

/// Before `ls`, `doctor` and `prune` of this host's registries: the note, on stderr.
pub(super) fn say_notice(command: &Command, on_hosts: bool, locations: &[Location], hints: &Hints) {
    let looks = matches!(command, Command::Ls(_) | Command::Doctor(_) | Command::Prune(_));
    if looks
        && !on_hosts
        && locations.iter().all(|l| l.registry().is_some())
        && let Some(note) = notice(hints)
    {
        say_err!("leasectl: {note}");
    }
}

/// The note, when this leasectl runs in a pid namespace that is not the host's.
fn notice(hints: &Hints) -> Option<String> {
    let ns = namespaces::inside_a_container()?;
    Some(format!(
        "note: this leasectl runs in a pid namespace that is not the host's (pid:[{ns}]): owners outside it are \
         invisible here and look dead or recycled (one that started before this namespace did is kept, as \
         unknown). Run it on the host to see every owner: `{}` (the home as the host mounts it).",
        hints.command(None, &["ls"])
    ))
}

/// Of the leases a prune inside a container removes, those whose owner may run outside
/// it: any owner not proven dead from the host. Said after the removal's lines.
pub(super) fn prune_note(removed: &[LeaseView]) -> Option<String> {
    namespaces::inside_a_container()?;
    let outside: Vec<String> = removed
        .iter()
        .filter(|v| matches!(v.liveness, Liveness::Dead(_) | Liveness::Recycled { .. }))
        .map(|v| {
            format!(
                "{} (session {}, pid {})",
                super::output::short_id(v.entry.lease_id()),
                crate::lease::words::human::escape(v.entry.session_id()),
                v.entry.pid()
            )
        })
        .collect();
    (!outside.is_empty()).then(|| {
        format!(
            "  note: seen from inside a container; the owners of {} may run outside it, where this leasectl cannot \
             look: {}. Prune on the host to be sure.",
            crate::lease::words::human::plural(outside.len(), "lease", "leases"),
            outside.join(", ")
        )
    })
}
