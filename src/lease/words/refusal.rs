//! Refusals: the reason code is the contract, the message is for a person.

use std::path::Path;

use crate::lease::error::Error;
use crate::lease::format::entry::Entry;

/// Why an acquire was refused. Clients retry a capacity refusal later; they never
/// retry an ownership refusal the same way; "cannot tell" is neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    SessionNotOwned,
    MaxConcurrentSessions,
    SessionCoordinationUnavailable,
}

impl Reason {
    pub fn code(self) -> &'static str {
        match self {
            Reason::SessionNotOwned => "SESSION_NOT_OWNED",
            Reason::MaxConcurrentSessions => "MAX_CONCURRENT_SESSIONS",
            Reason::SessionCoordinationUnavailable => "SESSION_COORDINATION_UNAVAILABLE",
        }
    }

    /// The CLI's exit code for this refusal.
    pub fn exit_code(self) -> i32 {
        match self {
            Reason::SessionNotOwned => 3,
            Reason::MaxConcurrentSessions => 4,
            Reason::SessionCoordinationUnavailable => 5,
        }
    }

    /// What an operator can do about it, when the holder is not known (see [`Refusal::advice`]).
    pub fn advice(self) -> &'static str {
        match self {
            Reason::SessionNotOwned => {
                "Attach through the owning surface or close the session there. If the owner is gone \
                 but its pid lives on (a leaked lease), `leasectl ls` shows its lease to force-release."
            }
            Reason::MaxConcurrentSessions => {
                "Retry when another session finishes, or raise max_concurrent_sessions. `leasectl ls` shows \
                 the holders, if a slot is held by a leaked lease."
            }
            Reason::SessionCoordinationUnavailable => {
                "Run `leasectl doctor` to see what is wrong with the registry or its lock, fix it, and retry."
            }
        }
    }
}

/// A refused acquire.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub reason: Reason,
    pub message: String,
    /// The entry that blocked it (for capacity: the oldest holder).
    pub holder: Option<Box<Entry>>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.message)
    }
}

impl Refusal {
    /// Whose words the message repeats, for a reader who runs another release: Hermes
    /// 0.21's for an owned session (0.22 puts a plain sentence first, then a `Details:`
    /// line), 0.21's and 0.22's for capacity (0.19 names no holders), 0.22's for a deleted
    /// profile; a registry leasectl cannot use is told in leasectl's own.
    pub fn words(&self) -> &'static str {
        match self.reason {
            Reason::SessionNotOwned => "Hermes 0.21",
            Reason::MaxConcurrentSessions => "Hermes 0.21 and 0.22",
            Reason::SessionCoordinationUnavailable
                if self.message.starts_with(crate::lease::home::profiles::NO_PROFILE_HOME) =>
            {
                "Hermes 0.22"
            }
            Reason::SessionCoordinationUnavailable => "leasectl",
        }
    }

    /// What an operator can do about it, each command one that runs as printed: the
    /// holder is a live owner (that is why it was refused), so taking its lease is
    /// `force-release ID --live`, on the operator's word.
    pub fn advice(&self) -> String {
        let holder = self.holder.as_ref().map(|h| h.lease_id().to_owned()).filter(|id| !id.is_empty());
        match (self.reason, holder) {
            (Reason::SessionNotOwned, Some(id)) => format!(
                "Attach through the owning surface or close the session there. If the owner is gone \
                 but its pid lives on (a leaked lease), remove it deliberately: {}.",
                super::hint::command(&["force-release", &id, "--live"])
            ),
            (Reason::MaxConcurrentSessions, Some(id)) => format!(
                "Retry when another session finishes, or raise max_concurrent_sessions. A slot held by a leaked \
                 lease is freed deliberately: `leasectl ls` shows the holders; the oldest is {}.",
                super::hint::command(&["force-release", &id, "--live"])
            ),
            (Reason::SessionCoordinationUnavailable, _)
                if self.message.starts_with(crate::lease::home::profiles::NO_PROFILE_HOME) =>
            {
                format!(
                    "Create the profile with Hermes (`hermes profile create NAME`), or claim the session in a \
                     live profile: {} lists them. leasectl never brings a deleted profile back.",
                    super::hint::command(&["--all-profiles", "ls"])
                )
            }
            (reason, _) => reason.advice().to_owned(),
        }
    }
}

/// The command that frees a live owner's lease on the operator's word, as a hint.
pub fn force_release_hint(lease_id: &str) -> String {
    super::hint::command(&["force-release", lease_id, "--live"])
}

/// Hermes' `format_refusal_stderr`: reason line, then the message.
pub fn refusal_stderr(r: &Refusal) -> String {
    format!("hermes-refusal-reason: {}\n{}", r.reason.code(), r.message)
}

/// Hermes' `summarize_holders`: `desktop x4, cli, oldest 3h00m ago`. Ages are written as
/// everywhere else in leasectl (`42s`, `5m`, `3h12m`, `2d04h`), not in Hermes' minutes.
pub fn summarize_holders(entries: &[Entry], now: f64) -> String {
    if entries.is_empty() {
        return String::new();
    }
    let mut counts: Vec<(String, usize)> = Vec::new();
    for e in entries {
        let surface = e.surface().filter(|s| !s.is_empty()).unwrap_or("unknown").to_owned();
        match counts.iter_mut().find(|(s, _)| *s == surface) {
            Some((_, n)) => *n += 1,
            None => counts.push((surface, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut held =
        counts.iter().map(|(s, n)| if *n > 1 { format!("{s} x{n}") } else { s.clone() }).collect::<Vec<_>>().join(", ");
    let oldest = entries.iter().filter_map(Entry::started_at).filter(|t| *t != 0.0).reduce(f64::min);
    if let Some(t) = oldest {
        held.push_str(&format!(", oldest {} ago", super::human::duration(now - t)));
    }
    held
}

/// Hermes' `session_already_owned_message`.
pub fn not_owned_message(session_id: &str, holder: &Entry, now: f64) -> String {
    not_owned_message_with(session_id, holder, "", "", now)
}

/// [`not_owned_message`] with more about the holder after its pid and after its age
/// (the etcd backend names the host and the lease's TTL).
pub fn not_owned_message_with(session_id: &str, holder: &Entry, after_pid: &str, after_age: &str, now: f64) -> String {
    let surface = holder.surface().filter(|s| !s.is_empty()).unwrap_or("another surface");
    let age = match holder.started_at().filter(|t| *t != 0.0) {
        Some(t) => format!(", lease age {}", super::human::duration(now - t)),
        None => String::new(),
    };
    format!(
        "Session {session_id} already has a live owner ({surface}, pid {}{after_pid}{age}{after_age}). \
         Its turn activity is unknown; an open lease does not mean a turn is running. \
         Attach through a compatible owner, or close the session in its owning surface \
         before resuming here. Do not delete a live owner's lease to force a takeover.",
        holder.pid()
    )
}

/// The holder a capacity refusal names: the one that started first.
pub fn oldest_holder(entries: &[Entry]) -> Option<&Entry> {
    entries.iter().min_by(|a, b| a.started_at().unwrap_or(f64::MAX).total_cmp(&b.started_at().unwrap_or(f64::MAX)))
}

/// Hermes' `active_session_limit_message`.
pub fn capacity_message(active: usize, cap: u64, entries: &[Entry], now: f64) -> String {
    let held = summarize_holders(entries, now);
    let detail = if held.is_empty() { String::new() } else { format!(" Held by: {held}.") };
    format!("Hermes is at the active session limit ({active}/{cap}).{detail} Try again when another session finishes.")
}

/// Why coordination failed, precisely, and that nothing was changed.
pub fn unavailable_message(path: &Path, err: &Error) -> String {
    // The error's own words, whole (ls and doctor say the same); the path said once.
    let said = err.to_string();
    let at = if said.contains(&path.display().to_string()) { String::new() } else { format!(" at {}", path.display()) };
    format!(
        "leasectl could not use the active-session registry{at}, so it cannot prove this \
         session has no other live owner: {said}. The registry was left as it was. \
         Fix the problem (`leasectl doctor` says what it is) and try again."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_written_as_everywhere_else() {
        let raw = serde_json::json!({"lease_id": "ab", "session_id": "S", "pid": 42, "surface": "cli",
            "process_start_time": null, "started_at": 100.0, "updated_at": 100.0});
        let holder = Entry::from_value(0, raw, &std::collections::HashSet::<String>::new()).expect("an entry");
        let message = not_owned_message("S", &holder, 100.0 + 42.0);
        assert!(message.contains("lease age 42s"), "{message}");
        assert!(summarize_holders(&[holder], 100.0 + 2.0 * 86_400.0).ends_with("oldest 2d00h ago"));
    }
}
