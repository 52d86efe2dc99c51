//! Errors of the core. Each names the file and what was being done.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::problem::Problem;

/// A registry that fails strict validation: where, and every rule it breaks.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid registry {}: {}{}", path.display(), first_problem(problems), more_problems(problems))]
pub struct InvalidRegistry {
    pub path: PathBuf,
    /// At least one; the first is the one reported in one-line messages.
    pub problems: Vec<Problem>,
}

fn first_problem(problems: &[Problem]) -> String {
    problems.first().map(ToString::to_string).unwrap_or_else(|| "unknown problem".into())
}

fn more_problems(problems: &[Problem]) -> String {
    match problems.len() {
        0 | 1 => String::new(),
        n => format!(" (and {} more problem(s); run `leasectl doctor`)", n - 1),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The lock was not free within the bound.
    #[error("registry lock {} still held after {:.1}s{}", lock_path.display(), waited.as_secs_f64(), holder_text(*holder_pid, holder_command.as_deref()))]
    LockTimeout { lock_path: PathBuf, waited: Duration, holder_pid: Option<u32>, holder_command: Option<String> },
    #[error("cannot {action} {}: {source}", path.display())]
    Io { action: String, path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Invalid(#[from] InvalidRegistry),
    /// A liveness-tracked owner could not be proven alive or dead: fail closed.
    #[error("cannot tell whether the owner of tracked lease {lease_id} (pid {pid}) is alive: {why}")]
    LivenessUnknown { lease_id: String, pid: u64, why: String },
    /// An operator action named a lease or session that is not in the registry.
    #[error("{0}")]
    NotFound(String),
    /// A live owner's lease, refused without an explicit override.
    #[error("{0}")]
    LiveOwner(String),
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
}

fn holder_text(holder_pid: Option<u32>, command: Option<&str>) -> String {
    match (holder_pid, command) {
        (Some(pid), Some(command)) => format!(" (held by pid {pid} ({command}))"),
        (Some(pid), None) => format!(" (held by pid {pid})"),
        (None, _) => " (holder pid not found in /proc/locks)".into(),
    }
}

impl Error {
    pub fn io(action: impl Into<String>, path: &Path, source: std::io::Error) -> Error {
        Error::Io { action: action.into(), path: path.to_path_buf(), source }
    }
}

// io::Error is not Clone; a copy keeps its kind and text, which is all a report shows.
impl Clone for Error {
    fn clone(&self) -> Error {
        match self {
            Error::LockTimeout { lock_path, waited, holder_pid, holder_command } => Error::LockTimeout {
                lock_path: lock_path.clone(),
                waited: *waited,
                holder_pid: *holder_pid,
                holder_command: holder_command.clone(),
            },
            Error::Io { action, path, source } => Error::Io {
                action: action.clone(),
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Invalid(i) => Error::Invalid(i.clone()),
            Error::LivenessUnknown { lease_id, pid, why } => {
                Error::LivenessUnknown { lease_id: lease_id.clone(), pid: *pid, why: why.clone() }
            }
            Error::NotFound(s) => Error::NotFound(s.clone()),
            Error::LiveOwner(s) => Error::LiveOwner(s.clone()),
            Error::Refused(s) => Error::Refused(s.clone()),
            Error::Unavailable(s) => Error::Unavailable(s.clone()),
            Error::Unsupported(s) => Error::Unsupported(s.clone()),
        }
    }
}

/// A value leasectl was given or read that it cannot use (an option, a profile name,
/// a line of /proc/stat), with what is wrong in words an operator can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unusable(pub String);

impl From<Unusable> for String {
    fn from(u: Unusable) -> String {
        u.0
    }
}
