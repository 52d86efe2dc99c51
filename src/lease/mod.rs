//! The lease core: the registry protocol Hermes speaks, the fence, and the
//! operator's actions. No terminal code here; the CLI and the console call it.
//!
//! Every backend shares the files at this level (the entry format, liveness, the types
//! in `view` and `grant`, the [`LeaseStore`] interface in `backend`); the
//! registry-file backend is in `file/`, etcd's in `etcd/`, and they import only what
//! is shared. This file is the one place that picks a backend: [`open`] and [`watch`].

pub mod address;
pub(crate) mod audited;
pub mod backend;
pub mod changes;
pub(crate) mod clock;
pub(crate) mod doctor;
pub(crate) mod error;
#[cfg(feature = "etcd")]
pub mod etcd;
pub(crate) mod failpoint;
pub mod file;
pub mod format;
pub(crate) mod grant;
pub mod home;
pub(crate) mod memory;
pub mod owners;
pub(crate) mod ssh;
pub(crate) mod stop;
pub(crate) mod view;
pub mod words;

use std::path::PathBuf;
use std::sync::Arc;

pub use address::etcd_access::EtcdAccessGiven;
pub use address::location::{EtcdLocation, Location, SshLocation};
pub use backend::{
    Change, Ending, FileVersion, LeaseStore, Listing, OwnerRelease, RemoteChange, RemoteListing, StoreOptions, Waiter,
    WatchScope,
};
pub use clock::now;
pub use doctor::report::DoctorReport;
pub use error::{Error, HostFault, InvalidRegistry};
pub use format::entry::Entry;
pub use format::problem::{Problem, Rule};
pub use grant::{AcquireRequest, Grant, Released, RemoteGrant};
pub use home::lock::DEFAULT_LOCK_TIMEOUT;
pub use home::paths::Registry;
pub use owners::liveness::{Liveness, Prober};
pub use view::{ForceOptions, LeaseView, PruneOptions, RemoteLease, Removal, Target};
pub use words::refusal::{Reason, Refusal};

/// The store for a location. Opening never does I/O: an unreachable etcd shows on first use.
pub fn open(location: &Location, options: StoreOptions) -> Result<Box<dyn LeaseStore>, Error> {
    match location {
        Location::File(registry) => {
            let mut store = file::FileStore::new(registry.clone(), options.lock_timeout);
            store.idle_threshold = options.idle_threshold;
            Ok(Box::new(store))
        }
        #[cfg(feature = "etcd")]
        Location::Etcd(at) => Ok(Box::new(etcd::store::EtcdStore::new(at, options.ttl))),
        Location::Ssh(at) => Ok(Box::new(ssh::store::SshStore::new(at))),
        #[cfg(not(feature = "etcd"))]
        Location::Etcd(_) => Err(Error::Unsupported(
            "this leasectl was built without the etcd backend: rebuild it with `cargo build --release --features \
             etcd` (needs protoc)"
                .into(),
        )),
    }
}

/// This build has the etcd backend (its options, help and man page show it).
pub const HAS_ETCD: bool = cfg!(feature = "etcd");

/// Keep how to reach etcd for the process, before etcd is reached; true when it asks for
/// TLS. A build without the etcd backend never reaches etcd: nothing to keep.
pub fn use_etcd_access(given: &EtcdAccessGiven) -> Result<bool, String> {
    #[cfg(feature = "etcd")]
    {
        etcd::access::set(given.read()?);
        Ok(etcd::access::tls())
    }
    // The options are read alike in every build; without the backend they are never given.
    #[cfg(not(feature = "etcd"))]
    {
        given.read().map(|_| false)
    }
}

/// Start the change feed for every location in scope, and return once its registry files
/// are watched: every change made after it returns is reported. `on_change` is called
/// from watcher threads. Registry files are watched with notify, etcd prefixes with etcd's
/// watch. `on_change` returns false once nobody listens: the watchers then stop.
pub fn watch(scope: &WatchScope, on_change: Arc<dyn Fn(Change) -> bool + Send + Sync>) -> Result<(), Error> {
    watch_arming(scope, on_change)?.wait();
    Ok(())
}

/// How long [`Arming::wait`] waits at most: arming takes about a second at 100,000
/// profiles; a filesystem slower than that still gets its feed, armed later.
const ARMING_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A change feed whose registry files are being watched, on a thread of its own.
#[must_use = "changes made before the feed is armed may go unreported: wait, or re-read once armed"]
pub struct Arming(Option<std::sync::mpsc::Receiver<()>>);

impl Arming {
    /// Return once every registry file in scope is watched (or after [`ARMING_WAIT`]).
    pub fn wait(self) {
        if let Some(armed) = self.0 {
            let _ = armed.recv_timeout(ARMING_WAIT);
        }
    }
}

/// [`watch`] without waiting for its files to be watched: for a caller that reads first
/// and re-reads what changed once [`Arming::wait`] returns (the console, which must not
/// wait a second at 100,000 profiles before its first screen).
pub fn watch_arming(scope: &WatchScope, on_change: Arc<dyn Fn(Change) -> bool + Send + Sync>) -> Result<Arming, Error> {
    let mut arming = Arming(None);
    let homes: Vec<PathBuf> = scope.locations.iter().filter_map(Location::registry).map(|r| r.home.clone()).collect();
    if !homes.is_empty() || scope.discover_root.is_some() {
        let files = file::watch::FileWatch {
            root: scope.discover_root.clone().or_else(|| homes.first().cloned()).unwrap_or_default(),
            discover: scope.discover_root.is_some(),
            homes,
        };
        let report = Arc::clone(&on_change);
        let armed = file::watch::spawn(files, scope.debounce, move |paths, replaced| {
            replaced.into_iter().all(|(p, n)| report(Change::Replaced(p, n))) && report(Change::Files(paths))
        })
        .map_err(|e| Error::Refused(format!("cannot watch the registries: {e}")))?;
        arming = Arming(Some(armed));
    }
    // Another host's leasectl watches its own home and sends each changed listing: a
    // re-read here takes it from what was sent.
    let mut hosts: Vec<&address::host_spec::HostSpec> = scope.locations.iter().filter_map(Location::host).collect();
    hosts.sort_by(|a, b| a.name.cmp(&b.name));
    hosts.dedup();
    for host in hosts {
        let report = Arc::clone(&on_change);
        let link = ssh::link::Link::to(host);
        link.subscribe(Arc::new(move || {
            report(Change::Files(vec![]));
        }));
    }
    for location in &scope.locations {
        if let Location::Etcd(_at) = location {
            #[cfg(feature = "etcd")]
            {
                let report = Arc::clone(&on_change);
                etcd::watch::spawn(EtcdLocation::clone(_at), scope.debounce, move |changes| {
                    report(Change::Remote(changes))
                });
            }
        }
    }
    Ok(arming)
}

// What the CLI and the console need of other hosts, through the core: each host's one
// session (`ssh/`) is this file's to reach, as every backend is.

/// Who owns each lease of `listing`, looked up where the owners run: here, or for a
/// registry on another host (`--host`), as that host's leasectl named them.
pub fn owners_of_listing(listing: &Listing) -> std::collections::HashMap<u64, owners::owner::OwnerInfo> {
    owners_at(&listing.location, &distinct_pids(listing.leases.iter().flatten()))
}

/// Each owner's pid once (see [`owners::distinct_pids`]).
pub fn distinct_pids<'a>(views: impl Iterator<Item = &'a LeaseView>) -> Vec<u64> {
    owners::distinct_pids(views.map(LeaseView::pid_here))
}

/// The owners of `pids` at `location`: here, or as another host's leasectl last named them.
pub fn owners_at(location: &Location, pids: &[u64]) -> std::collections::HashMap<u64, owners::owner::OwnerInfo> {
    match location {
        Location::Ssh(at) => ssh::link::Link::to(&at.host).owners(&at.profile),
        _ => owners::owner::owner_infos(pids),
    }
}

/// For a registry on another host: what its state.db said of the leased sessions and the
/// idle threshold its home sets (None: a registry here, read here; or nothing said).
pub fn remote_sessions(location: &Location) -> Option<(home::context::Contexts, std::time::Duration)> {
    let Location::Ssh(at) = location else { return None };
    let said = ssh::link::Link::to(&at.host).sessions(&at.profile)?;
    let idle = std::time::Duration::try_from_secs_f64(said.idle_secs).unwrap_or(home::context::DEFAULT_IDLE);
    Some((said.contexts, idle))
}

/// The registries `host` has: every profile's (`every`), or the one its home names.
pub fn host_registries(host: &address::host_spec::HostSpec, every: bool) -> Result<Vec<String>, Error> {
    let link = ssh::link::Link::to(host);
    match every {
        true => link.profiles(),
        false => link.default_profile().map(|p| vec![p]),
    }
}

/// The hosts reached in this process that run another leasectl of the same protocol,
/// each in words with the command that puts this build there.
pub fn version_skews() -> Vec<String> {
    ssh::link::skews().iter().map(ssh::link::Skew::words).collect()
}

/// `leasectl --host SPEC install`, quoted for a shell: what puts this build on `host`.
pub fn install_line(host: &address::host_spec::HostSpec) -> String {
    ssh::link::install_line(host)
}

/// Every registry the hosts of `locations` have reported so far.
pub fn known_registries(locations: &[Location]) -> Vec<Location> {
    ssh::link::known_registries(locations)
}

/// Try every host among `locations` that is down again now, instead of after its pause:
/// the names of those tried.
pub fn retry_hosts_now(locations: &[Location]) -> Vec<String> {
    let mut hosts: Vec<&address::host_spec::HostSpec> = locations.iter().filter_map(Location::host).collect();
    hosts.sort_by(|a, b| a.name.cmp(&b.name));
    hosts.dedup();
    hosts.into_iter().filter(|h| ssh::link::Link::to(h).retry_now()).map(|h| h.name.clone()).collect()
}

/// Wait until `host` has sent its first listings (or `deadline` passes, or it is down).
pub fn wait_for_first_listings(host: &address::host_spec::HostSpec, deadline: std::time::Instant) {
    ssh::link::Link::to(host).wait_fed(deadline);
}
