//! What an operator names to act on: one lease, or every lease of a session.

/// Which leases an operator names for force-release.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Target {
    Lease(String),
    Session(String),
}

impl Target {
    /// True when `entry` is one of the leases named.
    pub fn names(&self, entry: &crate::lease::format::entry::Entry) -> bool {
        match self {
            Target::Lease(id) => entry.lease_id() == id,
            Target::Session(s) => entry.session_id() == s,
        }
    }
}
