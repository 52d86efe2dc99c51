//! The event log's source: what changed between two successive snapshots of
//! one registry. Linear in the number of leases (one hash map by lease id).

use std::collections::HashMap;

use super::event::{LeaseRow, RegistrySnapshot};
use super::state::{LogLevel, RegistryState};
use crate::lease::Liveness;

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
        if let Err(e) = &new.leases {
            out.push(change(LogLevel::Warn, format!("registry is invalid: {e}")));
        }
        return out;
    }
    if old.cap != new.cap.cap {
        let show = |c: Option<u64>| c.map(|c| c.to_string()).unwrap_or_else(|| "none".into());
        out.push(change(LogLevel::Change, format!("cap changed: {} -> {}", show(old.cap), show(new.cap.cap))));
    }
    let leases = match (&old.error, &new.leases) {
        (None, Err(e)) => {
            out.push(change(LogLevel::Warn, format!("registry became invalid: {e}")));
            return out;
        }
        (Some(_), Err(e)) => {
            if old.error.as_ref() != Some(e) {
                out.push(change(LogLevel::Warn, format!("registry still invalid: {e}")));
            }
            return out;
        }
        (Some(_), Ok(l)) => {
            out.push(change(LogLevel::Info, "registry is valid again".into()));
            l
        }
        (None, Ok(l)) => l,
    };
    let before: HashMap<&str, &LeaseRow> = old.leases.iter().map(|l| (l.entry.lease_id(), l)).collect();
    let after: HashMap<&str, &LeaseRow> = leases.iter().map(|l| (l.entry.lease_id(), l)).collect();
    for l in leases {
        match before.get(l.entry.lease_id()) {
            None => out.push(change(LogLevel::Change, format!("acquired: {}", who(l)))),
            Some(prev) => {
                if prev.entry.session_id() != l.entry.session_id() {
                    out.push(change(
                        LogLevel::Change,
                        format!("moved: lease from session {} to {}", prev.entry.session_id(), who(l)),
                    ));
                }
                match (&prev.liveness, &l.liveness) {
                    (Liveness::Alive, Liveness::Dead(_)) => {
                        out.push(change(LogLevel::Warn, format!("owner died: {}", who(l))))
                    }
                    (Liveness::Alive, Liveness::Recycled { .. }) => {
                        out.push(change(LogLevel::Warn, format!("pid recycled: {}", who(l))))
                    }
                    _ => {}
                }
            }
        }
    }
    for l in &old.leases {
        if !after.contains_key(l.entry.lease_id()) {
            let verb = if l.liveness == Liveness::Alive { "released" } else { "pruned" };
            let mut c = change(LogLevel::Change, format!("{verb}: {}", who(l)));
            c.gone = Some(l.entry.lease_id().to_owned());
            out.push(c);
        }
    }
    out
}
