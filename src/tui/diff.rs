//! The event log's source: what changed between two successive snapshots of one
//! registry, in the log's words. The lease diff itself is `lease::changes::diff`, the
//! one `ls -w` and `events` use too; here only the registry's own changes (cap,
//! validity) are added.

use super::event::LogLevel;
use super::event::{LeaseRow, RegistrySnapshot};
use super::state::RegistryState;
use crate::lease::Liveness;
use crate::lease::changes::{self, EventKind, Judged};

/// One log-worthy change.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub level: LogLevel,
    pub text: String,
    /// The lease id, when the change is a lease gone (released or pruned).
    pub gone: Option<String>,
}

fn change(level: LogLevel, text: String) -> Change {
    Change { level, text, gone: None }
}

fn who(l: &LeaseRow) -> String {
    format!(
        "session {} ({}, pid {}, lease {})",
        l.entry.session_id(),
        l.entry.surface().unwrap_or("-"),
        l.entry.pid(),
        l.entry.lease_id().chars().take(8).collect::<String>()
    )
}

/// Differences from `old` (what is on screen) to `new` (just read). Nothing on the first load.
pub fn diff(old: &RegistryState, new: &RegistrySnapshot) -> Vec<Change> {
    let mut out = Vec::new();
    if !old.loaded {
        // A host's session still being opened at the start is no news (the banner says
        // CONNECTING); one that cannot be reached is.
        if let Some(e) = new.leases.as_ref().err().filter(|e| !matches!(e, crate::lease::Error::Connecting { .. })) {
            let (invalid, _) = crate::lease::changes::unreadable_names(&old.location, Some(e));
            out.push(change(LogLevel::Warn, format!("{invalid}: {e}")));
        }
        return out;
    }
    out.extend(cap_change(old, new));
    out.extend(line_changes(old, new));
    out.extend(member_changes(old, new));
    // etcd not answering is not an invalid registry: said in its own words.
    let (invalid, _) = crate::lease::changes::unreadable_names(&old.location, new.leases.as_ref().err());
    let (_, valid) = crate::lease::changes::unreadable_names(&old.location, old.error());
    let valid = format!("{valid}: {}", crate::lease::changes::again_words(&old.location, old.error()));
    let leases = match (old.error(), &new.leases) {
        (None, Err(e)) => {
            out.push(change(LogLevel::Warn, format!("{invalid}: {e}")));
            return out;
        }
        (Some(_), Err(e)) => {
            if old.error() != Some(e) {
                out.push(change(LogLevel::Warn, format!("{invalid} (still): {e}")));
            }
            return out;
        }
        // Never read before (a host's session was being opened): what it holds was there
        // already; nobody acquired it now.
        (Some(e), Ok(_)) if !old.ever_read => {
            // Answering at last after connecting at the start: no news either.
            if !matches!(e, crate::lease::Error::Connecting { .. }) {
                out.push(change(LogLevel::Info, valid));
            }
            return out;
        }
        (Some(_), Ok(l)) => {
            out.push(change(LogLevel::Info, valid));
            l
        }
        (None, Ok(l)) => l,
    };
    // The one diff every follower uses, and its event names (as `events` and `ls -w`
    // print them).
    let mut found = changes::diff(&old.leases, leases);
    // Gone in the one write of an acquire, its owner dead now: the fence pruned it.
    for c in found.iter_mut().filter(|c| c.kind == EventKind::Released) {
        if new.pruned_by_acquire.iter().any(|id| id == c.lease.entry.lease_id()) {
            c.kind = EventKind::Pruned;
        }
    }
    // On etcd, leases coming and going are the watch's to say (each once, named as they
    // ended); a reading adds only what the watch cannot see: owners dying on this host.
    if old.location.is_remote() {
        found.retain(|c| matches!(c.kind, EventKind::OwnerDied | EventKind::OwnerRecycled | EventKind::OwnerAlive));
    }
    // In the order things happened: the leases an acquire pruned (it pruned them before it
    // granted), then acquisitions and changes, then the leases released.
    found.sort_by_key(|c| match c.kind {
        EventKind::Pruned => 0,
        EventKind::Released => 2,
        _ => 1,
    });
    for c in found {
        let l = c.lease;
        match c.kind {
            EventKind::Acquired => out.push(change(LogLevel::Change, format!("{}: {}", c.kind.name(), who(l)))),
            EventKind::Updated => {
                if let Some(prev) = c.previous.filter(|p| p.entry.session_id() != l.entry.session_id()) {
                    out.push(change(
                        LogLevel::Change,
                        format!(
                            "{}: lease moved from session {} to {}",
                            c.kind.name(),
                            prev.entry.session_id(),
                            who(l)
                        ),
                    ));
                }
            }
            EventKind::OwnerDied => out.push(change(LogLevel::Warn, format!("{}: {}", c.kind.name(), who(l)))),
            EventKind::OwnerRecycled => out.push(change(LogLevel::Warn, format!("{}: {}", c.kind.name(), who(l)))),
            EventKind::Released | EventKind::Pruned => out.push(gone_line(c.kind, l, new)),
            EventKind::OwnerAlive | EventKind::Present => {}
        }
    }
    out
}

/// A lease gone, in the one vocabulary (`lease::home::remover`): the audit file's word (the
/// worker looked), the fence's, its owner's.
fn gone_line(kind: EventKind, l: &LeaseRow, new: &RegistrySnapshot) -> Change {
    let id = l.entry.lease_id();
    let fenced = new.pruned_by_acquire.iter().any(|p| p == id);
    let by = match new.removed_by.iter().find(|(gone, _)| gone == id) {
        Some((_, by)) => by.clone(),
        None => crate::lease::home::remover::remover(kind == EventKind::Released, id, &[], fenced),
    };
    let detail = by.detail().map(|d| format!(" — {d}")).unwrap_or_default();
    let mut gone = change(LogLevel::Change, format!("{}: {}{detail}", by.event(), who(l)));
    gone.gone = Some(id.to_owned());
    gone
}

/// The leases of a profile created since the console started, each acquired since.
pub fn acquired_in_new(new: &RegistrySnapshot) -> Vec<Change> {
    let leases = new.leases.as_ref().map(Vec::as_slice).unwrap_or_default();
    leases.iter().map(|l| change(LogLevel::Change, format!("{}: {}", EventKind::Acquired.name(), who(l)))).collect()
}

/// Members that stopped answering, and those that answer again.
fn member_changes(old: &RegistryState, new: &RegistrySnapshot) -> Vec<Change> {
    let was = |m: &str| old.not_answering().iter().any(|(o, _)| o == m);
    let is = |m: &str| new.not_answering.iter().any(|(n, _)| n == m);
    let stopped = new.not_answering.iter().filter(|(m, _)| !was(m));
    let mut out: Vec<Change> =
        stopped.map(|(m, why)| change(LogLevel::Warn, format!("member not answering: {m} ({why})"))).collect();
    let back = old.not_answering().iter().filter(|(m, _)| !is(m));
    out.extend(back.map(|(m, _)| change(LogLevel::Change, format!("member answers again: {m}"))));
    out
}

/// Who joined the line and who left it (served, or gave up), by their place's key.
fn line_changes(old: &RegistryState, new: &RegistrySnapshot) -> Vec<Change> {
    if new.leases.is_err() {
        return vec![];
    }
    let who = |w: &crate::lease::Waiter| {
        let cap = w.cap.map(|c| format!(", --max {c}")).unwrap_or_default();
        format!("session {} (pid {} on {}, {}{cap})", w.session_id, w.pid, w.host, w.surface.as_deref().unwrap_or("-"))
    };
    let joined = new.waiting.iter().filter(|w| !old.waiting().iter().any(|o| o.key == w.key));
    let left = old.waiting().iter().filter(|o| !new.waiting.iter().any(|w| w.key == o.key));
    let mut out: Vec<Change> = joined.map(|w| change(LogLevel::Change, format!("waiting: {}", who(w)))).collect();
    let leases = new.leases.as_deref().unwrap_or_default();
    let served = |w: &crate::lease::Waiter| {
        leases.iter().any(|l| l.entry.session_id() == w.session_id && l.entry.pid() == w.pid)
    };
    out.extend(left.map(|w| {
        let how = if served(w) { "served from the line" } else { "left the line" };
        change(LogLevel::Change, format!("{how}: {}", who(w)))
    }));
    out
}

/// The cap changed, when both readings say what it is.
fn cap_change(old: &RegistryState, new: &RegistrySnapshot) -> Option<Change> {
    // On etcd the cap is what the holders asked: none holding says nothing of it.
    // Nor does a host that does not answer (--host).
    let unanswered =
        matches!(new.leases, Err(crate::lease::Error::Unreachable { .. } | crate::lease::Error::Connecting { .. }));
    // Nor was a host's cap known before its first listing: read now, not changed now.
    let never_answered = !old.ever_read
        && matches!(
            old.error(),
            Some(crate::lease::Error::Unreachable { .. } | crate::lease::Error::Connecting { .. })
        );
    let cap_unknown = (old.location.is_remote() && new.cap.cap.is_none()) || unanswered || never_answered;
    let show = |c: Option<u64>| c.map(|c| c.to_string()).unwrap_or_else(|| "none".into());
    (old.cap != new.cap.cap && !cap_unknown)
        .then(|| change(LogLevel::Change, format!("cap-changed: {} -> {}", show(old.cap), show(new.cap.cap))))
}

impl Judged for LeaseRow {
    fn entry(&self) -> &crate::lease::Entry {
        &self.entry
    }
    fn liveness(&self) -> &Liveness {
        &self.liveness
    }
}
