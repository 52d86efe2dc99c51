//! `release`: an owner gives its lease back, named by id or a prefix of it.

use super::hints::Hints;
use super::{EXIT_OK, EXIT_USAGE, Failure, fail, print_json, usage};
use crate::lease::{self, LeaseStore, LeaseView, Location, OwnerRelease, StoreOptions, home::paths};

/// The other registries of the selected one's home (the root and every profile): where a
/// lease id not found in the selected one is looked for. None on etcd (no `root`).
pub(super) fn other_registries(root: Option<&std::path::Path>, selected: &[Location]) -> Vec<Location> {
    let Some(root) = root else { return vec![] };
    paths::all_registries(root)
        .into_iter()
        .map(Location::File)
        .filter(|l| !selected.iter().any(|s| s.describe() == l.describe()))
        .collect()
}

/// What a typed lease id names.
pub(super) enum Named {
    /// One lease of the selected registry: its whole id.
    Id(String),
    /// No lease, here or in any other registry.
    Nowhere,
}

/// Resolve a typed lease id (whole, or a unique prefix of 4+ characters) in `store`; if
/// it is not there, say which other registry has it, with the command to use there.
pub(super) fn name_lease(
    store: &mut dyn LeaseStore,
    typed: &str,
    elsewhere: &[Location],
    action: &str,
    options: &[String],
    hints: &Hints,
) -> Result<Named, Failure> {
    use lease::address::lookup::{Lookup, lookup};
    let Ok(views) = store.read().leases else {
        // An unreadable registry: the action itself reports why.
        return Ok(Named::Id(typed.to_owned()));
    };
    match lookup(&views, typed) {
        Lookup::Found(id) => return Ok(Named::Id(id)),
        Lookup::Ambiguous(candidates) => return Err(ambiguous(typed, store.location(), &candidates)),
        Lookup::Missing => {}
    }
    if typed.chars().count() < lease::address::lookup::MIN_PREFIX
        && views.iter().any(|v| v.entry.lease_id().starts_with(typed))
    {
        return Err(usage(format!(
            "lease id {typed} is too short: a prefix needs at least {} characters",
            lease::address::lookup::MIN_PREFIX
        )));
    }
    let mut found = Vec::new();
    for location in elsewhere {
        let Ok(mut other) = lease::open(location, StoreOptions::default()) else { continue };
        let Ok(views) = other.read().leases else { continue };
        let id = match lookup(&views, typed) {
            Lookup::Found(id) => id,
            Lookup::Ambiguous(_) => typed.to_owned(),
            Lookup::Missing => continue,
        };
        let profile = location.registry().filter(|r| r.home != paths::root_of(&r.home)).map(|r| r.profile.as_str());
        let place = profile.map(|p| format!("profile {p}")).unwrap_or_else(|| "the root".into());
        // Every option the operator gave comes along: a dry run stays a dry run when pasted.
        let mut words: Vec<&str> = vec![action, &id];
        words.extend(options.iter().map(String::as_str));
        found.push(format!("found in {place}: `{}`", hints.command(Some(profile), &words)));
    }
    if found.is_empty() {
        return Ok(Named::Nowhere);
    }
    let here = store.location();
    Err(fail(format!("no lease {typed} in {} ({}); {}", here.name(), here.describe(), found.join("; "))))
}

/// A prefix that names several leases: list them, exit 2 (the operator must type more).
/// Printed here, one line per candidate, each field escaped: the message is multi-line.
pub(super) fn ambiguous(typed: &str, location: &Location, candidates: &[lease::LeaseView]) -> Failure {
    use crate::lease::words::human::escape;
    say_err!(
        "leasectl: lease id {} is ambiguous in {} ({}): {} leases start with it; type more of it:",
        escape(typed),
        escape(location.name()),
        escape(&location.describe()),
        candidates.len()
    );
    for v in candidates {
        say_err!(
            "  {}  session {}  pid {}  {}",
            escape(v.entry.lease_id()),
            escape(v.entry.session_id()),
            v.entry.pid(),
            v.liveness.name()
        );
    }
    Failure { code: EXIT_USAGE, message: String::new() }
}

pub(super) fn release(
    store: &mut dyn LeaseStore,
    typed: &str,
    owner_pid: Option<u64>,
    as_json: bool,
    elsewhere: &[Location],
    hints: &Hints,
) -> Result<i32, Failure> {
    let mut options: Vec<String> =
        owner_pid.map(|p| ["--owner-pid".to_owned(), p.to_string()]).into_iter().flatten().collect();
    if as_json {
        options.push("--json".into());
    }
    // A whole lease id (what a script passes) goes straight to the store: the lease is
    // found, judged and removed from one read, under the lock. A prefix is looked up first.
    let whole = lease::address::ids::is_lease_id(typed);
    let lease_id = &if whole {
        typed.to_owned()
    } else {
        match name_lease(store, typed, elsewhere, "release", &options, hints)? {
            Named::Id(id) => id,
            // A typo or a prefix that matches nothing was never a lease: not "already gone".
            Named::Nowhere => {
                return Err(fail(format!(
                    "no lease matches {}: not a whole lease id (32 hex digits) nor the prefix of one in {}",
                    lease::words::human::escape(typed),
                    store.location().describe()
                )));
            }
        }
    };
    // --owner-pid is honoured only for a process the caller could signal (the same user,
    // or root): naming a stranger's pid must not take a live stranger's lease.
    let refused_pid = owner_pid.filter(|p| !lease::owners::owner::could_signal(*p));
    let owner_pid = owner_pid.filter(|p| lease::owners::owner::could_signal(*p));
    let foreign = |v: &LeaseView, acting_for| {
        lease::view::foreign_live_owner(std::slice::from_ref(v), lease_id, acting_for).is_some()
    };
    let (r, view) = match store.release_unless(lease_id, &|v| foreign(v, owner_pid))? {
        OwnerRelease::Refused(v) => return Err(foreign_owner(lease_id, &v, refused_pid)),
        OwnerRelease::Done { released, view } => (released, view),
    };
    if !r.removed && whole {
        // Not here: if another registry of the home has it, say where (an error); a
        // whole lease id gone everywhere is fine, the owner's release is idempotent.
        name_lease(store, typed, elsewhere, "release", &options, hints)?;
    }
    // A release on behalf of another live process (one --owner-pid let through) is on
    // record like a force-release: the same rule, without the pid the caller acts for.
    let on_behalf = view.filter(|v| owner_pid.is_some() && foreign(v, None));
    if r.removed
        && let Some(view) = on_behalf
    {
        let removal = lease::Removal { removed: vec![view], live_owner: true, ..lease::Removal::default() };
        report_audit(lease::home::audit::removal(
            "release-for-owner",
            store.location(),
            &lease::home::audit::Actor::this_command(),
            &removal,
        ));
    }
    if as_json {
        print_json(&super::json::released(lease_id, &r));
    } else if r.removed {
        say!("released lease {lease_id}");
    } else {
        say!("lease {lease_id} was already gone; nothing to do");
    }
    Ok(EXIT_OK)
}

/// Why a plain release refused `view`: its owner is alive and not the caller's.
fn foreign_owner(lease_id: &str, view: &LeaseView, refused_pid: Option<u64>) -> Failure {
    let pid = view.entry.pid();
    let act_for = if lease::owners::owner::could_signal(pid) {
        format!("pass --owner-pid {pid} if you act for it; ")
    } else if refused_pid == Some(pid) {
        format!("--owner-pid {pid} is not honoured: that process belongs to another user; ")
    } else {
        String::new()
    };
    fail(format!(
        "lease {lease_id} belongs to pid {pid}, which is alive and is neither this process nor one of its \
             ancestors: release is the owner's ({act_for}to take a live owner's lease use {})",
        lease::words::hint::command(&["force-release", lease_id, "--live"])
    ))
}

/// Say what the audit could not record (the action stands either way): a release on
/// another owner's behalf, which the store does not know to be one.
fn report_audit(failures: Vec<String>) {
    for f in failures {
        say_err!("leasectl: warning: audit: {f}");
    }
}
