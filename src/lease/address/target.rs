//! What an operator names to act on: one lease, or every lease of a session.

/// Which leases an operator names for force-release.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Target {
    Lease(String),
    Session(String),
    /// The leases of an owner a stop has ended, removed together (one write) as a stop's
    /// doing: on etcd marked `stopped`, in the audit file a `stop`.
    Stopped(Vec<String>),
}

impl Target {
    /// For a log line: `lease 1a2b3c4d`, `session S`, `2 leases of a stopped owner`.
    pub fn short(&self) -> String {
        match self {
            Target::Lease(id) => format!("lease {}", id.chars().take(8).collect::<String>()),
            Target::Session(s) => format!("session {s}"),
            Target::Stopped(ids) => {
                format!("{} of a stopped owner", crate::lease::words::human::plural(ids.len(), "lease", "leases"))
            }
        }
    }

    /// True when `entry` is one of the leases named.
    pub fn names(&self, entry: &crate::lease::format::entry::Entry) -> bool {
        match self {
            Target::Lease(id) => entry.lease_id() == id,
            Target::Session(s) => entry.session_id() == s,
            Target::Stopped(ids) => ids.iter().any(|id| id == entry.lease_id()),
        }
    }
}
