//! Errors of the core. Each names the file and what was being done.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::entry::Problem;

/// A registry that fails strict validation: where, and every rule it breaks.
#[derive(Debug, Clone, PartialEq)]
pub struct InvalidRegistry {
    pub path: PathBuf,
    /// At least one; the first is the one reported in one-line messages.
    pub problems: Vec<Problem>,
}

impl std::fmt::Display for InvalidRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid registry {}: ", self.path.display())?;
        match self.problems.first() {
            Some(p) => write!(f, "{p}")?,
            None => write!(f, "unknown problem")?,
        }
        if self.problems.len() > 1 {
            write!(f, " (and {} more problem(s); run `leasectl doctor`)", self.problems.len() - 1)?;
        }
        Ok(())
    }
}

#[derive(Debug)]
pub enum Error {
    /// The lock was not free within the bound.
    LockTimeout {
        lock_path: PathBuf,
        waited: Duration,
        holder_pid: Option<u32>,
    },
    Io {
        action: String,
        path: PathBuf,
        source: std::io::Error,
    },
    Invalid(InvalidRegistry),
    /// A liveness-tracked owner could not be proven alive or dead: fail closed.
    LivenessUnknown {
        lease_id: String,
        pid: u64,
        why: String,
    },
    /// An operator action named a lease or session that is not in the registry.
    NotFound(String),
    /// A live owner's lease, refused without an explicit override.
    LiveOwner(String),
    /// Anything else the caller asked for that cannot be done, said plainly.
    Refused(String),
}

impl Error {
    pub fn io(action: impl Into<String>, path: &Path, source: std::io::Error) -> Error {
        Error::Io { action: action.into(), path: path.to_path_buf(), source }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::LockTimeout { lock_path, waited, holder_pid } => {
                write!(f, "registry lock {} still held after {:.1}s", lock_path.display(), waited.as_secs_f64())?;
                match holder_pid {
                    Some(pid) => write!(f, " (held by pid {pid})"),
                    None => write!(f, " (holder pid not found in /proc/locks)"),
                }
            }
            Error::Io { action, path, source } => write!(f, "cannot {action} {}: {source}", path.display()),
            Error::Invalid(inv) => write!(f, "{inv}"),
            Error::LivenessUnknown { lease_id, pid, why } => {
                write!(f, "cannot tell whether the owner of tracked lease {lease_id} (pid {pid}) is alive: {why}")
            }
            Error::NotFound(what) | Error::LiveOwner(what) | Error::Refused(what) => {
                write!(f, "{what}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

// io::Error is not Clone; a copy keeps its kind and text, which is all a report shows.
impl Clone for Error {
    fn clone(&self) -> Error {
        match self {
            Error::LockTimeout { lock_path, waited, holder_pid } => {
                Error::LockTimeout { lock_path: lock_path.clone(), waited: *waited, holder_pid: *holder_pid }
            }
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
        }
    }
}

impl From<InvalidRegistry> for Error {
    fn from(inv: InvalidRegistry) -> Error {
        Error::Invalid(inv)
    }
}
