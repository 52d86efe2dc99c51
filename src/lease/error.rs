//! Errors of the core. Each names the file and what was being done.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::address::target::Target;
use super::format::problem::Problem;

/// A registry that fails strict validation: where, and every rule it breaks.
#[derive(Debug, Clone, PartialEq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("{} {}: {}{}", what(problems), path.display(), first_problem(problems), more_problems(problems))]
pub struct InvalidRegistry {
    pub path: PathBuf,
    /// At least one; the first is the one reported in one-line messages.
    pub problems: Vec<Problem>,
}

/// "invalid registry", unless the bytes could not be read at all: then nothing says the
/// content is wrong, and the fix (owner, mode, disk) differs.
fn what(problems: &[Problem]) -> &'static str {
    match problems.first() {
        Some(p) if p.rule == super::format::problem::Rule::CannotRead => "cannot read registry",
        _ => "invalid registry",
    }
}

fn first_problem(problems: &[Problem]) -> String {
    problems.first().map(ToString::to_string).unwrap_or_else(|| "unknown problem".into())
}

fn more_problems(problems: &[Problem]) -> String {
    match problems.len() {
        0 | 1 => String::new(),
        2 => " (and 1 more problem; run `leasectl doctor`)".into(),
        n => format!(" (and {} more problems; run `leasectl doctor`)", n - 1),
    }
}

/// The shortest prefix that names a lease: shorter ones match too much to be safe.
pub(crate) const MIN_PREFIX: usize = 4;

/// What to add to "no lease TYPED": a typed id too short to be a prefix is why.
pub(crate) fn too_short(typed: &str) -> String {
    match typed.chars().count() {
        n if n < MIN_PREFIX => {
            format!("; a prefix names a lease from {MIN_PREFIX} characters on ({typed:?} has {n}; `ls` shows 8)")
        }
        _ => String::new(),
    }
}

impl Error {
    /// The error as said after its registry's path was named already (`root (PATH): ...`,
    /// a table under PATH): an invalid registry's path is not said twice.
    pub fn beside_path(&self) -> String {
        match self {
            Error::Invalid(i) => {
                format!("{}: {}{}", what(&i.problems), first_problem(&i.problems), more_problems(&i.problems))
            }
            other => other.to_string(),
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The lock was not free within the bound.
    #[error("registry lock {} still held after {:.1}s{}", lock_path.display(), waited.as_secs_f64(), holder_text(*holder_pid, holder_command.as_deref()))]
    LockTimeout { lock_path: PathBuf, waited: Duration, holder_pid: Option<u32>, holder_command: Option<String> },
    /// Shared, so an error can be kept and shown twice (io::Error is not Clone).
    #[error("cannot {action} {}: {source}", path.display())]
    Io { action: String, path: PathBuf, source: Arc<std::io::Error> },
    #[error("{0}")]
    Invalid(#[from] InvalidRegistry),
    /// A liveness-tracked owner could not be proven alive or dead: fail closed.
    #[error("cannot tell whether the owner of tracked lease {lease_id} (pid {pid}) is alive: {why}")]
    LivenessUnknown { lease_id: String, pid: u64, why: String },
    /// An operator action named a lease or session that is not in the registry.
    #[error("{0}")]
    NotFound(Missing),
    /// A live owner's lease, refused without an explicit override.
    #[error("{0}")]
    LiveOwner(LiveOwners),
    /// A stop that may not or cannot end an owner from here (nothing was signalled).
    #[error("{0}")]
    CannotStop(super::stop::CannotStop),
    /// Anything else the caller asked for that cannot be done, said plainly.
    #[error("{0}")]
    Refused(String),
    /// The backend (etcd) did not answer, or answered something that cannot be trusted:
    /// nothing is proven, so nothing is granted or removed.
    #[error("{0}")]
    Unavailable(String),
    /// What this backend or build cannot do at all (doctor on etcd, etcd in a build without it).
    #[error("{0}")]
    Unsupported(String),
    /// Another host (`--host`) could not be reached, or its session ended; or it answered
    /// that it cannot serve (no such home, another protocol): nothing there is known now,
    /// so nothing is acted on.
    #[error("host {host} {}: {why}", fault.words())]
    Unreachable { host: String, why: String, fault: HostFault },
    /// Its session is being opened and has not answered yet (the console reads on).
    #[error("host {host}: connecting (no answer yet)")]
    Connecting { host: String },
}

impl Error {
    /// Another host gave no answer (down, refusing, junk) or has not yet: nothing is known
    /// of its registries, which are not invalid for it.
    pub fn unanswered(&self) -> bool {
        matches!(self, Error::Unreachable { .. } | Error::Connecting { .. })
    }
}

/// Why another host gives no listings, in the words an operator acts on: nothing
/// answered, the login was refused, something that is not leasectl answered (a motd, a
/// shell's echo), or leasectl answered that it cannot serve (no such home, another
/// protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostFault {
    Unreachable,
    LoginRefused,
    Junk,
    CannotServe,
}

impl HostFault {
    /// Said after the host's name.
    pub fn words(self) -> &'static str {
        match self {
            HostFault::Unreachable => "is unreachable",
            HostFault::LoginRefused => "refused the login (permission denied)",
            HostFault::Junk => "answered junk on its output (not leasectl's protocol)",
            HostFault::CannotServe => "answered",
        }
    }

    /// The host was reached: trying again soon will not change the answer.
    pub fn reached(self) -> bool {
        !matches!(self, HostFault::Unreachable)
    }

    /// A banner's title for it.
    pub fn title(self) -> &'static str {
        match self {
            HostFault::Unreachable => "HOST UNREACHABLE",
            HostFault::LoginRefused => "LOGIN REFUSED",
            HostFault::Junk => "JUNK ON ITS OUTPUT",
            HostFault::CannotServe => "HOST CANNOT SERVE",
        }
    }
}

/// What an action named that is not there, and where it looked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Missing {
    pub target: Target,
    /// Only a live lease would do (a transfer).
    pub live_only: bool,
    /// Where it looked, as a phrase: `in /path/active_sessions.json`, `under etcd ...`.
    pub place: String,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let live = if self.live_only { "live " } else { "" };
        match &self.target {
            Target::Lease(id) => write!(f, "no {live}lease {id} {}{}", self.place, too_short(id)),
            Target::Session(s) => write!(f, "no {live}lease holds session {s} {}", self.place),
            Target::Stopped(ids) => {
                write!(f, "none of the stopped owner's {} leases is {live}left {}", ids.len(), self.place)
            }
        }
    }
}

/// Leases whose owners may be alive, which an action would take without an override.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LiveOwners {
    pub action: Guarded,
    /// Each lease described for a person (lease id, session, pid, verdict).
    pub described: Vec<String>,
}

/// The action a live owner's lease stopped, and where.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Guarded {
    /// A force-release in a registry file.
    Release,
    /// A force-release on etcd, where a renewed lease is a live owner.
    ReleaseRenewed,
    /// A repair of this registry, which would lose them.
    Repair { path: PathBuf },
}

impl std::fmt::Display for LiveOwners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = self.described.join("; ");
        match &self.action {
            Guarded::Release => write!(
                f,
                "refusing to release a live owner's lease: {who}. A live owner keeps writing to its session; \
                 removing its lease lets a second writer in."
            ),
            Guarded::ReleaseRenewed => write!(
                f,
                "refusing to release a live owner's lease: {who}. Its etcd lease is being renewed (or its TTL has \
                 not run out), so the owner may keep writing to its session; removing it lets a second writer in."
            ),
            Guarded::Repair { path } => write!(
                f,
                "refusing to repair {}: it would lose leases whose owners may be alive ({who}). A live owner keeps \
                 writing its session; losing its lease lets a second writer in. Pass --force to repair anyway.",
                path.display()
            ),
        }
    }
}

fn holder_text(holder_pid: Option<u32>, command: Option<&str>) -> String {
    match (holder_pid, command) {
        (Some(pid), Some(command)) => format!(" (held by pid {pid} ({command}))"),
        (Some(pid), None) => format!(" (held by pid {pid})"),
        (None, _) => " (holder pid not found in /proc/locks)".into(),
    }
}

/// Two errors are the same when they say the same: the console compares a registry's
/// error with the last one to log only a change (io::Error has no equality of its own).
impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Error {
    pub fn io(action: impl Into<String>, path: &Path, source: std::io::Error) -> Error {
        Error::Io { action: action.into(), path: path.to_path_buf(), source: Arc::new(source) }
    }
}
