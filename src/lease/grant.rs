//! An owner's side of the fence, whatever the backend: what it asks for, what it is
//! granted, and what its release did.

use std::time::Duration;

use serde_json::{Map, Value};

use super::format::entry::Entry;

/// What an owner asks for.
#[derive(Debug, Clone)]
pub struct AcquireRequest {
    pub session_id: String,
    pub surface: Option<String>,
    /// Written as the entry's `metadata`; `live_session_id` is half of writer identity.
    pub metadata: Map<String, Value>,
    /// The owner process (Hermes uses its own pid).
    pub owner_pid: u64,
    /// `None`: no cap.
    pub cap: Option<u64>,
    pub track_liveness: bool,
    pub lock_timeout: Duration,
}

#[cfg(test)]
impl AcquireRequest {
    /// A lease on `session` for this process (the test's), tracked, with no cap.
    pub(crate) fn for_this_process(session: &str) -> AcquireRequest {
        AcquireRequest {
            session_id: session.into(),
            surface: Some("cli".into()),
            metadata: Map::new(),
            owner_pid: u64::from(std::process::id()),
            cap: None,
            track_liveness: true,
            lock_timeout: Duration::from_secs(5),
        }
    }
}

/// A granted lease.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    pub lease_id: String,
    /// False for an empty session id: nothing to fence, nothing written.
    pub recorded: bool,
    pub entry: Option<Entry>,
    /// The lease id this grant replaced when the same writer re-acquired.
    pub replaced: Option<String>,
    /// Dead or recycled owners removed on the way.
    pub pruned: Vec<Entry>,
    /// Set on etcd: the lease there, which the owner renews and releases.
    pub remote: Option<RemoteGrant>,
}

/// A grant's etcd side: where it is written and how it lives.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteGrant {
    /// The owner's host: half of its identity (pids mean nothing across hosts).
    pub host: String,
    pub session_key: String,
    pub etcd_lease_id: i64,
    /// The TTL etcd granted: the lease ends this long after the last renewal.
    pub ttl: Duration,
    /// When the grant was asked for: the lease cannot end before `granted_at + ttl`.
    pub granted_at: std::time::Instant,
    /// The revision of the winning transaction; strictly increases from grant to grant.
    pub fencing_token: i64,
    pub slot: Option<u64>,
}

impl Grant {
    /// The fencing token, where the backend gives one (etcd).
    pub fn fencing_token(&self) -> Option<i64> {
        self.remote.as_ref().map(|r| r.fencing_token)
    }
}

/// What a release did.
#[derive(Debug, Clone, PartialEq)]
pub struct Released {
    /// False when the lease was already gone (a no-op, never an error).
    pub removed: bool,
    pub pruned: Vec<Entry>,
    /// The id of the lease removed (a registry file's release; a writer's re-acquire may
    /// have replaced the grant's id); None when nothing was removed, and on etcd.
    pub lease_id: Option<String>,
}
