//! The lease core: the registry protocol Hermes speaks, the fence, and the
//! operator's actions. No terminal code here; the CLI and the console call it.

pub mod admin;
pub mod audit;
pub mod backend;
pub mod changes;
pub mod config;
pub mod context;
pub mod entry;
pub mod error;
#[cfg(feature = "etcd")]
pub mod etcd;
pub mod fence;
pub mod file_watch;
pub mod human;
pub mod ids;
pub mod journal;
pub mod liveness;
pub mod location;
pub mod lock;
pub mod lookup;
pub mod owner;
pub mod paths;
pub mod pidfds;
pub mod pyjson;
mod recent;
pub mod refusal;
pub mod repair;
mod reparse;
pub mod safe_file;
pub mod store;

pub use admin::{
    DoctorReport, LeaseView, PruneOptions, RemoteLease, Removal, Target, doctor, force_release, prune, snapshot,
};
pub use backend::{Change, LeaseStore, Listing, RemoteListing, StoreOptions, WatchScope, open, watch};
pub use entry::{Entry, Problem, Rule};
pub use error::{Error, InvalidRegistry};
pub use fence::{AcquireRequest, Grant, Released, RemoteGrant, acquire, release, transfer};
pub use liveness::{Liveness, Prober};
pub use location::{EtcdLocation, Location};
pub use paths::Registry;
pub use refusal::{Reason, Refusal};

/// Default bound on waiting for the registry lock.
pub const DEFAULT_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Wall-clock time as epoch seconds, like Python's `time.time()`.
pub fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}
