//! What an operator names to act on: one lease, or every lease of a session.

/// Which leases an operator names for force-release.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Target {
    Lease(String),
    Session(String),
}
