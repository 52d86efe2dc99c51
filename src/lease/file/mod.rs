//! The registry-file backend: Hermes' `active_sessions.json` under flock. Its text and
//! meaning (`format`), reading and writing the file (`registry`, with `recent` and
//! `reparse` remembering what was read),
//! the fence on it (`fence`), the operator's actions (`admin`), repair (`salvage`) and
//! its change feed (`watch`). [`FileStore`] puts them behind the one store interface.

pub(crate) mod admin;
mod advice;
pub mod fence;
pub(crate) mod format;
mod lease_watch;
mod recent;
pub mod registry;
pub use recent::set_remembering;
mod reparse;
pub mod salvage;
pub(crate) mod watch;

// The backend's operations on one registry, for callers that hold a [`Registry`] (tests,
// benches, the demo's sandbox) rather than a store.
pub use admin::{doctor, force_release, prune, snapshot};
pub use fence::{acquire, leave_writes_to_exit, release, transfer};

use std::cell::Cell;
use std::os::unix::fs::MetadataExt as _;
use std::sync::Arc;
use std::time::Duration;

use crate::lease::address::location::Location;
use crate::lease::backend::{LeaseStore, Listing, LockProbe, OnLost, OwnerRelease, Renewal};
use crate::lease::doctor::repair::{RepairOptions, RepairReport};
use crate::lease::error::Error;
use crate::lease::format::entry::Entry;
use crate::lease::grant::{AcquireRequest, Grant, Released};
use crate::lease::home::config::{CapSetting, read_cap};
use crate::lease::home::lock::{FileId, HeldFlocks};
use crate::lease::home::paths::Registry;
use crate::lease::owners::liveness::{Prober, ProcState};
use crate::lease::stop::{StopOptions, StopPlan, Stopped};
use crate::lease::view::{DoctorReport, ForceOptions, LeaseView, PruneOptions, Removal, Target};
use crate::lease::words::refusal::Refusal;
use lease_watch::LeaseWatch;

/// A Hermes registry file under flock.
pub struct FileStore {
    /// Always `Location::File`: the registry is kept once (a console keeps a store per
    /// profile, 100,000 of them).
    location: Location,
    lock_timeout: Duration,
    /// For doctor's leak suspects: see [`StoreOptions::idle_threshold`].
    pub idle_threshold: Option<Duration>,
    /// What the last read found (shared with every listing made from it), for `rejudge`.
    last: Option<FileRead>,
    /// What /proc said of each owner (distinct pids) when the last listing was made.
    owner_states: Vec<(u64, ProcState)>,
    /// The lock file as `probe_lock` last found it (`Some(None)`: none there), forgotten at
    /// each read: a lock file made or removed comes with a change a follower reads, and
    /// looking at 20,000 of them at each write of a metrics file was a third of its work.
    lock_file: Cell<Option<Option<FileId>>>,
}

/// Kept by every store of a console, 100,000 of them: a cap set and an error are boxed,
/// and none of most profiles has either.
struct FileRead {
    exists: bool,
    modified: Option<f64>,
    /// None: no cap, and nothing to say of it.
    cap: Option<Box<CapSetting>>,
    entries: Result<Arc<Vec<Entry>>, Box<Error>>,
}

/// The one empty entry list of this thread's empty registries.
fn no_entries() -> Arc<Vec<Entry>> {
    thread_local! {
        static NONE: Arc<Vec<Entry>> = Arc::new(Vec::new());
    }
    NONE.with(Arc::clone)
}

impl FileStore {
    pub fn new(registry: Registry, lock_timeout: Duration) -> FileStore {
        FileStore {
            location: Location::File(registry),
            lock_timeout,
            idle_threshold: None,
            last: None,
            owner_states: Vec::new(),
            lock_file: Cell::new(None),
        }
    }

    /// This store's registry.
    fn registry(&self) -> &Registry {
        match &self.location {
            Location::File(registry) => registry,
            // Made only by `new`, from a registry.
            Location::Etcd(_) | Location::Ssh(_) => unreachable!("a file store's location is a registry file"),
        }
    }

    /// The owner processes of `views` as this host knows them (an owner in a container
    /// by its pid here, and the pid it recorded), each with what /proc says of it now.
    fn states_of(views: &[LeaseView], prober: &mut Prober) -> Vec<(u64, ProcState)> {
        let pids = views.iter().flat_map(|v| [v.entry.pid(), v.pid_here()]);
        Self::states(&crate::lease::owners::distinct_pids(pids), prober)
    }

    fn states(pids: &[u64], prober: &mut Prober) -> Vec<(u64, ProcState)> {
        pids.iter().map(|pid| (*pid, prober.state(*pid))).collect()
    }

    /// Whether the registry file exists, and when it was last modified (seconds).
    fn stat(path: &std::path::Path) -> (bool, Option<f64>) {
        // One look: `exists` is the same look again.
        let metadata = std::fs::metadata(path);
        let modified = metadata
            .as_ref()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_secs_f64());
        (metadata.is_ok(), modified)
    }

    /// The home's cap, when one is set or something is to be said of it.
    fn cap(&self) -> Option<Box<CapSetting>> {
        Some(read_cap(&self.registry().config_path())).filter(|c| *c != CapSetting::default()).map(Box::new)
    }

    /// A listing for a process that reads once (nothing remembered: `set_remembering`):
    /// each entry is judged as it is read and kept only as its view, and no read is kept
    /// for a next look (`rejudge` reads again). The entries and their views were both
    /// whole before: more at 50,000 leases than a prune holds.
    pub fn read_once(&mut self) -> Listing {
        let path = self.registry().path();
        let mut prober = Prober::new();
        let leases = registry::read_each(&path, &mut |e| LeaseView::judged(e, &mut prober));
        let (exists, modified) = Self::stat(&path);
        self.last = None;
        self.lock_file.set(None);
        self.owner_states = match &leases {
            Ok(views) => Self::states_of(views, &mut prober),
            Err(_) => Vec::new(),
        };
        Listing {
            location: self.location.clone(),
            exists,
            modified,
            cap: self.cap().as_deref().cloned().unwrap_or_default(),
            leases,
            remote: None,
        }
    }

    /// A listing of `read`, and what /proc said of each owner meanwhile.
    fn listing(&mut self, read: FileRead, prober: &mut Prober) -> Listing {
        let listing = Listing {
            location: self.location.clone(),
            exists: read.exists,
            modified: read.modified,
            cap: read.cap.as_deref().cloned().unwrap_or_default(),
            leases: read
                .entries
                .as_ref()
                .map_err(|e| Error::clone(e))
                .map(|entries| entries.iter().map(|e| LeaseView::local(e.clone(), prober.judge(e))).collect()),
            remote: None,
        };
        self.last = Some(read);
        self.owner_states = listing.leases.as_ref().map(|views| Self::states_of(views, prober)).unwrap_or_default();
        listing
    }
}

impl LeaseStore for FileStore {
    fn location(&self) -> &Location {
        &self.location
    }

    fn cap_setting(&self) -> CapSetting {
        read_cap(&self.registry().config_path())
    }

    fn read(&mut self) -> Listing {
        self.lock_file.set(None);
        if !recent::enabled() {
            return self.read_once();
        }
        let path = self.registry().path();
        // Every empty registry shares one empty list (a console may read 100,000 of them).
        let entries = registry::read(&path)
            .map(|f| if f.entries.is_empty() { no_entries() } else { Arc::new(f.entries) })
            .map_err(Box::new);
        let (exists, modified) = Self::stat(&path);
        let read = FileRead { exists, modified, cap: self.cap(), entries };
        self.listing(read, &mut Prober::new())
    }

    fn rejudge(&mut self, prober: &mut Prober) -> Listing {
        match self.last.take() {
            Some(read) => self.listing(read, prober),
            None => self.read(),
        }
    }

    fn rejudge_needed(&mut self, prober: &mut Prober) -> bool {
        if self.last.is_none() {
            return true;
        }
        // One look per owner process, not per lease: an idle console's tick.
        let pids: Vec<u64> = self.owner_states.iter().map(|(pid, _)| *pid).collect();
        Self::states(&pids, prober) != self.owner_states
    }

    fn acquire(&mut self, req: &AcquireRequest) -> Result<Grant, Refusal> {
        fence::acquire(self.registry(), req)
    }

    fn release(&mut self, lease_id: &str) -> Result<Released, Error> {
        fence::release(self.registry(), lease_id, self.lock_timeout)
    }

    fn release_unless(&mut self, lease_id: &str, refuse: &dyn Fn(&LeaseView) -> bool) -> Result<OwnerRelease, Error> {
        fence::release_unless(self.registry(), lease_id, self.lock_timeout, refuse)
    }

    fn release_grant(&mut self, grant: &Grant) -> Result<Released, Error> {
        match (&grant.entry, grant.recorded) {
            (_, false) => Ok(Released { removed: false, pruned: vec![], lease_id: None }),
            // The writer may have re-acquired since: its entry now, whatever its id.
            (Some(entry), true) => fence::release_held(self.registry(), entry, self.lock_timeout),
            (None, true) => self.release(&grant.lease_id),
        }
    }

    fn force_release(&mut self, target: &Target, opts: ForceOptions) -> Result<Removal, Error> {
        admin::force_release(self.registry(), target, opts, self.lock_timeout)
    }

    fn probe_lock(&self, bound: Duration, held: &HeldFlocks) -> Option<LockProbe> {
        let path = self.registry().lock_path();
        let identity = |path: &std::path::Path| {
            let meta = std::fs::metadata(path).ok().filter(std::fs::Metadata::is_file)?;
            Some(FileId { dev: meta.dev(), ino: meta.ino() })
        };
        let known = self.lock_file.get().unwrap_or_else(|| identity(&path));
        self.lock_file.set(Some(known));
        let free = LockProbe { waited: Duration::ZERO, held: false };
        if !held.on(known?) {
            return Some(free);
        }
        // Someone holds it: the file is looked at again (it may have been replaced since).
        let now = identity(&path);
        self.lock_file.set(Some(now));
        if !held.on(now?) {
            return Some(free);
        }
        let started = std::time::Instant::now();
        let got = crate::lease::home::lock::lock(&path, bound);
        Some(LockProbe { waited: started.elapsed(), held: got.is_err() })
    }

    fn stop_plan(&mut self, target: &Target) -> Result<StopPlan, Error> {
        crate::lease::stop::plan(self.read(), target)
    }

    fn stop(&mut self, plan: &StopPlan, opts: StopOptions) -> Result<Stopped, Error> {
        crate::lease::stop::run(self, plan, opts)
    }

    fn prune(&mut self, opts: PruneOptions) -> Result<Removal, Error> {
        admin::prune(self.registry(), opts, self.lock_timeout)
    }

    /// The lease to act on is picked from this registry and its home's state.db.
    fn advice(&self, refusal: &Refusal) -> String {
        advice::advice(self.registry(), self.idle_threshold, refusal)
    }

    fn doctor(&mut self) -> Result<DoctorReport, Error> {
        Ok(admin::doctor_with(self.registry(), self.idle_threshold))
    }

    fn repair(&mut self, opts: RepairOptions) -> Result<RepairReport, Error> {
        salvage::repair(self.registry(), opts, self.lock_timeout)
    }

    /// A registry file lease lasts as long as its owner, so nothing renews it; but it can
    /// be taken away (force-release, a hand edit). A thread looks for it in the file.
    fn keep_alive(&self, grant: &Grant, on_lost: OnLost) -> Result<Option<Box<dyn Renewal>>, Error> {
        if !grant.recorded {
            return Ok(None);
        }
        let Some(entry) = grant.entry.clone() else { return Ok(None) };
        Ok(Some(Box::new(LeaseWatch::start(self.registry().path(), entry, on_lost))))
    }
}
