//! One interface over where leases live. The CLI and the console call only this:
//! [`open`] gives a [`LeaseStore`] for a [`Location`] (a registry file, or etcd in a
//! build with the `etcd` feature), and [`watch`] its change feed. This file is the one
//! place outside `etcd/` that knows a second backend exists.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::admin::{self, DoctorReport, LeaseView, PruneOptions, Removal, Target};
use super::config::{CapSetting, read_cap};
use super::entry::Entry;
use super::error::Error;
use super::fence::{self, AcquireRequest, Grant, Released};
use super::liveness::{Prober, ProcState};
use super::location::Location;
use super::paths::Registry;
use super::refusal::{Reason, Refusal};
use super::repair::{self, RepairReport};
use super::{file_watch, store};

/// Everything read from one location at one moment.
#[derive(Debug, Clone)]
pub struct Listing {
    pub location: Location,
    /// False when the registry file does not exist yet (etcd: always true).
    pub exists: bool,
    /// The registry file's modification time (epoch seconds), when it exists.
    pub modified: Option<f64>,
    pub cap: CapSetting,
    /// The leases in the order stored, or why they could not be read.
    pub leases: Result<Vec<LeaseView>, Error>,
    /// etcd's view of the prefix: revision, slots in use, keys that are not entries.
    pub remote: Option<RemoteListing>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RemoteListing {
    pub revision: i64,
    /// Used slots: index and the session key holding it.
    pub slots: Vec<(u64, String)>,
    /// Why each bad key is not an entry (shown, never trusted).
    pub bad: Vec<String>,
}

/// A running renewal of a grant (etcd's keep-alive). Stopping it lets the lease end by its TTL.
pub trait Renewal: Send {
    fn stop(self: Box<Self>);
}

/// Called once, from another thread, when a held lease is lost: why.
pub type OnLost = Box<dyn FnOnce(String) + Send>;

/// What the CLI and the console do with leases, whatever the backend.
pub trait LeaseStore: Send {
    fn location(&self) -> &Location;
    /// The cap configured at this location (a file's `config.yaml`; etcd has none: `--max` only).
    fn cap_setting(&self) -> CapSetting;
    /// Read every lease now and judge its owner. Never locks, never writes.
    fn read(&mut self) -> Listing;
    /// Judge again what the last read found, cheaply (files: no read; etcd: fresh TTLs).
    fn rejudge(&mut self) -> Listing;
    /// Whether [`LeaseStore::rejudge`] could find anything other than the last listing
    /// did (files: whether an owner process started, ended or changed; etcd: always).
    fn rejudge_needed(&mut self) -> bool {
        true
    }
    /// The fence. Every failure to coordinate is a refusal, never a grant.
    fn acquire(&mut self, req: &AcquireRequest) -> Result<Grant, Refusal>;
    /// The owner's release by lease id; a lease already gone is fine.
    fn release(&mut self, lease_id: &str) -> Result<Released, Error>;
    /// The release of a grant this process holds (at the end of `hold` / `run`).
    fn release_grant(&mut self, grant: &Grant) -> Result<Released, Error>;
    /// The operator's release. A live owner's lease only with `allow_live`.
    fn force_release(&mut self, target: &Target, allow_live: bool, dry_run: bool) -> Result<Removal, Error>;
    /// Remove dead and recycled owners' leases (etcd: those of owners on this host).
    fn prune(&mut self, opts: PruneOptions) -> Result<Removal, Error>;
    /// Everything `doctor` checks; only a registry file has a doctor.
    fn doctor(&mut self) -> Result<DoctorReport, Error>;
    /// `doctor --repair`; only a registry file can be repaired.
    fn repair(&mut self, opts: repair::RepairOptions) -> Result<RepairReport, Error>;
    /// Keep a grant alive while its holder runs. `None`: nothing needs renewing (a
    /// registry file lease lasts as long as its owner process).
    fn keep_alive(&self, grant: &Grant, on_lost: OnLost) -> Result<Option<Box<dyn Renewal>>, Error>;
    /// What to do about a refusal here.
    fn advice(&self, reason: Reason) -> String {
        reason.advice().to_owned()
    }
}

/// How to open a store: the lock bound (files) and the lease TTL (etcd).
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    pub lock_timeout: Duration,
    pub ttl: Duration,
    /// The idle threshold for leak suspects, when given on the command line (else each
    /// home's config, else the default).
    pub idle_threshold: Option<Duration>,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            lock_timeout: super::DEFAULT_LOCK_TIMEOUT,
            ttl: super::location::DEFAULT_TTL,
            idle_threshold: None,
        }
    }
}

/// The store for a location. Opening never does I/O: an unreachable etcd shows on first use.
pub fn open(location: &Location, options: StoreOptions) -> Result<Box<dyn LeaseStore>, Error> {
    match location {
        Location::File(registry) => {
            let mut store = FileStore::new(registry.clone(), options.lock_timeout);
            store.idle_threshold = options.idle_threshold;
            Ok(Box::new(store))
        }
        #[cfg(feature = "etcd")]
        Location::Etcd(at) => Ok(Box::new(super::etcd::store::EtcdStore::new(at, options.ttl))),
        #[cfg(not(feature = "etcd"))]
        Location::Etcd(_) => Err(Error::Unsupported(
            "this leasectl was built without the etcd backend: rebuild it with `cargo build --release --features \
             etcd` (needs protoc)"
                .into(),
        )),
    }
}

/// What changed, as the change feed reports it (bursts already gathered).
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Paths under a watched home changed (a registry, a config, a new profile).
    Files(Vec<PathBuf>),
    /// A registry was replaced this many times in one burst: a reader that reads once
    /// per burst saw only the last of those versions. Sent before its `Files`.
    Replaced(PathBuf, usize),
    /// Something changed under an etcd prefix (or its watch broke and was re-made).
    Remote,
}

/// What to watch: these locations, and (files) new profiles under `discover_root`.
#[derive(Debug, Clone)]
pub struct WatchScope {
    pub locations: Vec<Location>,
    /// The root whose `profiles/` are watched for new profiles, if any.
    pub discover_root: Option<PathBuf>,
    /// How long a burst of changes is gathered before it is reported.
    pub debounce: Duration,
}

/// Start the change feed for every location in scope: `on_change` is called from
/// watcher threads. Registry files are watched with notify, etcd prefixes with etcd's watch.
/// `on_change` returns false once nobody listens: the watchers then stop.
pub fn watch(scope: &WatchScope, on_change: Arc<dyn Fn(Change) -> bool + Send + Sync>) -> Result<(), Error> {
    let homes: Vec<PathBuf> = scope.locations.iter().filter_map(Location::registry).map(|r| r.home.clone()).collect();
    if !homes.is_empty() || scope.discover_root.is_some() {
        let files = file_watch::FileWatch {
            root: scope.discover_root.clone().or_else(|| homes.first().cloned()).unwrap_or_default(),
            discover: scope.discover_root.is_some(),
            homes,
        };
        let report = Arc::clone(&on_change);
        file_watch::spawn(files, scope.debounce, move |paths, replaced| {
            replaced.into_iter().all(|(p, n)| report(Change::Replaced(p, n))) && report(Change::Files(paths))
        })
        .map_err(|e| Error::Refused(format!("cannot watch the registries: {e}")))?;
    }
    for location in &scope.locations {
        if let Location::Etcd(_at) = location {
            #[cfg(feature = "etcd")]
            {
                let report = Arc::clone(&on_change);
                super::etcd::watch::spawn(_at.clone(), scope.debounce, move || report(Change::Remote));
            }
        }
    }
    Ok(())
}

/// A Hermes registry file under flock.
pub struct FileStore {
    location: Location,
    registry: Registry,
    lock_timeout: Duration,
    /// For doctor's leak suspects: see [`StoreOptions::idle_threshold`].
    pub idle_threshold: Option<Duration>,
    /// What the last read found (shared with every listing made from it), for `rejudge`.
    last: Option<FileRead>,
    /// What /proc said of each owner (distinct pids) when the last listing was made.
    owner_states: Vec<(u64, ProcState)>,
}

struct FileRead {
    exists: bool,
    modified: Option<f64>,
    cap: CapSetting,
    entries: Result<Arc<Vec<Entry>>, Error>,
}

/// Watches a registry file for one lease; reports once when it is gone.
struct LeaseWatch {
    /// Dropped by `stop`: the thread's wait ends at once (not at its next look).
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How often a held lease is looked for. A read takes no lock and costs a stat when the
/// file did not change (the parse is remembered).
const LEASE_WATCH_EVERY: Duration = Duration::from_millis(250);

impl LeaseWatch {
    /// Watch for `held`, or the entry its writer replaced it with (a re-acquire by the
    /// same writer is not a loss).
    fn start(path: PathBuf, held: Entry, on_lost: OnLost) -> LeaseWatch {
        use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
        let (stop, stopping) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopping.recv_timeout(LEASE_WATCH_EVERY) {
                // An unreadable or invalid file says nothing either way: look again later.
                let gone = match store::read(&path) {
                    Ok(file) => fence::held_by_writer(&file.entries, &held).is_none(),
                    Err(_) => false,
                };
                if gone && matches!(stopping.try_recv(), Err(TryRecvError::Empty)) {
                    let at = jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M:%S UTC");
                    on_lost(format!(
                        "lease {} is no longer in {} (force-released or removed by hand, seen at {at})",
                        held.lease_id(),
                        path.display()
                    ));
                    return;
                }
            }
        });
        LeaseWatch { stop: Some(stop), thread: Some(thread) }
    }
}

impl Renewal for LeaseWatch {
    fn stop(mut self: Box<Self>) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl FileStore {
    pub fn new(registry: Registry, lock_timeout: Duration) -> FileStore {
        FileStore {
            location: Location::File(registry.clone()),
            registry,
            lock_timeout,
            idle_threshold: None,
            last: None,
            owner_states: Vec::new(),
        }
    }

    /// The distinct owner pids of what the last read found.
    fn owner_pids(&self) -> Vec<u64> {
        let mut pids: Vec<u64> = match self.last.as_ref().map(|r| &r.entries) {
            Some(Ok(entries)) => entries.iter().map(Entry::pid).collect(),
            _ => Vec::new(),
        };
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    fn states(pids: &[u64], prober: &mut Prober) -> Vec<(u64, ProcState)> {
        pids.iter().map(|pid| (*pid, prober.state(*pid))).collect()
    }

    /// A listing of `read`, and what /proc said of each owner meanwhile.
    fn listing(&mut self, read: FileRead) -> Listing {
        let mut prober = Prober::new();
        let listing = Listing {
            location: self.location.clone(),
            exists: read.exists,
            modified: read.modified,
            cap: read.cap.clone(),
            leases: read
                .entries
                .as_ref()
                .map_err(Clone::clone)
                .map(|entries| entries.iter().map(|e| LeaseView::local(e.clone(), prober.judge(e))).collect()),
            remote: None,
        };
        self.last = Some(read);
        self.owner_states = Self::states(&self.owner_pids(), &mut prober);
        listing
    }
}

impl LeaseStore for FileStore {
    fn location(&self) -> &Location {
        &self.location
    }

    fn cap_setting(&self) -> CapSetting {
        read_cap(&self.registry.config_path())
    }

    fn read(&mut self) -> Listing {
        let path = self.registry.path();
        let entries = store::read(&path).map(|f| Arc::new(f.entries));
        let modified = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_secs_f64());
        let read = FileRead {
            exists: modified.is_some() || path.exists(),
            modified,
            cap: read_cap(&self.registry.config_path()),
            entries,
        };
        self.listing(read)
    }

    fn rejudge(&mut self) -> Listing {
        match self.last.take() {
            Some(read) => self.listing(read),
            None => self.read(),
        }
    }

    fn rejudge_needed(&mut self) -> bool {
        if self.last.is_none() {
            return true;
        }
        // One look per owner process, not per lease: an idle console's tick.
        Self::states(&self.owner_pids(), &mut Prober::new()) != self.owner_states
    }

    fn acquire(&mut self, req: &AcquireRequest) -> Result<Grant, Refusal> {
        fence::acquire(&self.registry, req)
    }

    fn release(&mut self, lease_id: &str) -> Result<Released, Error> {
        fence::release(&self.registry, lease_id, self.lock_timeout)
    }

    fn release_grant(&mut self, grant: &Grant) -> Result<Released, Error> {
        match (&grant.entry, grant.recorded) {
            (_, false) => Ok(Released { removed: false, pruned: vec![], lease_id: None }),
            // The writer may have re-acquired since: its entry now, whatever its id.
            (Some(entry), true) => fence::release_held(&self.registry, entry, self.lock_timeout),
            (None, true) => self.release(&grant.lease_id),
        }
    }

    fn force_release(&mut self, target: &Target, allow_live: bool, dry_run: bool) -> Result<Removal, Error> {
        admin::force_release(&self.registry, target, allow_live, dry_run, self.lock_timeout)
    }

    fn prune(&mut self, opts: PruneOptions) -> Result<Removal, Error> {
        admin::prune(&self.registry, opts, self.lock_timeout)
    }

    fn doctor(&mut self) -> Result<DoctorReport, Error> {
        Ok(admin::doctor_with(&self.registry, self.idle_threshold))
    }

    fn repair(&mut self, opts: repair::RepairOptions) -> Result<RepairReport, Error> {
        repair::repair(&self.registry, opts, self.lock_timeout)
    }

    /// A registry file lease lasts as long as its owner, so nothing renews it; but it can
    /// be taken away (force-release, a hand edit). A thread looks for it in the file.
    fn keep_alive(&self, grant: &Grant, on_lost: OnLost) -> Result<Option<Box<dyn Renewal>>, Error> {
        if !grant.recorded {
            return Ok(None);
        }
        let Some(entry) = grant.entry.clone() else { return Ok(None) };
        Ok(Some(Box::new(LeaseWatch::start(self.registry.path(), entry, on_lost))))
    }
}
