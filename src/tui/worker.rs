//! The console's I/O: reads every location through its store, re-judges owners, runs
//! operator actions through the same stores. Runs on its own thread so the screen never waits.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use super::event::{ActionDone, ActionOutcome, Effect, Event, LeaseRow, Loaded, LockHolder, RegistrySnapshot};
use super::event::{Job, JobDone};
use super::extension::Runner;
use super::sessions::SessionCache;
use crate::lease::owners::liveness::Prober;
use crate::lease::owners::owner::{OwnerProbe, hostname};
use crate::lease::words::human::plural;
use crate::lease::{self, LeaseStore, Listing, Location, StoreOptions, home::paths};
use rustc_hash::FxHashMap;

/// Which locations the worker reads.
#[derive(Debug, Clone)]
pub struct Scope {
    pub locations: Vec<Location>,
    /// When set, `<root>/profiles/*` are discovered on every reload.
    pub discover_root: Option<PathBuf>,
    /// Every registry the hosts (`--host`) report joins, as they report it.
    pub discover_hosts: bool,
}

/// Registries read before their snapshots are sent, on a full reload.
const RELOAD_PART: usize = 256;
/// A full read of this many registries or more gives its freed pages back afterwards.
const TRIM_AFTER_READING: usize = 1000;

pub struct Worker {
    scope: Scope,
    /// The extension's runner (the demo's playground), if any.
    runner: Option<Box<dyn Runner>>,
    /// One store per location, in tab order; discovered profiles are added at the end.
    stores: super::stores::Stores,
    /// Each store's index by its location: a home with 100,000 profiles looks each up at
    /// every reload, and a scan of the list made that quadratic (minutes).
    opened: super::location_index::LocationIndex,
    /// Locations whose store could not be opened (not tried again).
    unopenable: HashSet<Location>,
    /// Set when the console quits: a long read (thousands of registries) stops at the
    /// next registry instead of holding the quit up.
    stop: Arc<std::sync::atomic::AtomicBool>,
    options: StoreOptions,
    owners: OwnerProbe,
    host: String,
    lock_checked: Option<Instant>,
    /// Last check's holder per store's lock file, and whether the check before saw it too.
    lock_seen: HashMap<usize, (LockHolder, bool)>,
    /// Each store's lock file, by device and inode, as its registry was last read.
    lock_files: super::lock_files::LockFiles,
    /// By store: its last reading was a registry file with no lease (or none readable),
    /// so no owner can die until the file changes, which the watcher reports. An idle
    /// tick asks only the others (asking 100,000 empty profiles was most of its cost).
    no_owners: Vec<bool>,
    /// Owner details last looked up, for which pids, and when.
    owner_infos: HashMap<u64, Arc<lease::owners::owner::OwnerInfo>>,
    owner_pids: Vec<u64>,
    /// By store: its owners on this host in its last snapshot. The owners looked up are
    /// all of theirs, whichever stores a snapshot covers.
    pids_of: Vec<Vec<u64>>,
    owners_checked: Option<Instant>,
    /// The stuck-lock holder's pid by store in the last snapshots (only the stores with
    /// one), to tell whether it changed.
    last_holders: FxHashMap<usize, u32>,
    /// Each home's state.db, read when it changes: session context and leak suspects.
    sessions: SessionCache,
    /// What the stores' audit could not record since the last action was reported.
    audit_failures: Arc<std::sync::Mutex<Vec<String>>>,
    /// The first whole read is done: profiles found after it are new ones.
    first_read_done: bool,
    /// Which writes each reading spans (the change feed notes the versions replaced).
    writes: super::writes::Writes,
    /// By store: leases its last reading found pruned by an acquire, for its snapshot.
    pruned: HashMap<usize, Vec<String>>,
    /// By store: the lease ids its last valid reading held (a registry file's): those gone
    /// since are looked up in the home's audit file, to say who removed them.
    held: HashMap<usize, std::collections::HashSet<String>>,
}

/// Who removed the leases a registry file's reading no longer holds, where its home's audit
/// file says (read only when a lease is gone); `held` is kept as of this reading.
fn removers(
    held: &mut HashMap<usize, std::collections::HashSet<String>>,
    index: usize,
    listing: &Listing,
) -> Vec<(String, lease::home::remover::Remover)> {
    let (Some(reg), Ok(views)) = (listing.location.registry(), &listing.leases) else { return vec![] };
    let now: std::collections::HashSet<String> = views.iter().map(|v| v.entry.lease_id().to_owned()).collect();
    let gone: Vec<String> =
        held.get(&index).map(|before| before.difference(&now).cloned().collect()).unwrap_or_default();
    // A registry with no lease keeps no set: most of 100,000 profiles hold none.
    if now.is_empty() {
        held.remove(&index);
    } else {
        held.insert(index, now);
    }
    if gone.is_empty() {
        return vec![];
    }
    let records = lease::home::audit::recent_records(&lease::home::audit::audit_file(&reg.home));
    gone.into_iter().filter_map(|id| lease::home::remover::from_audit(&id, &records).map(|r| (id, r))).collect()
}

/// How owners' details changed between two looks: the owners (sorted pids) gone, new, or
/// with another name, command or user, whose leases' wording may change; and whether the
/// figures of any other moved enough to show: CPU by a point or more, memory by 5 % or
/// more (an owner's CPU figure moves on every look; redrawing thousands of rows for 0.1 %
/// would be most of an idle console's work).
fn owners_changed(
    a: &HashMap<u64, Arc<lease::owners::owner::OwnerInfo>>,
    b: &HashMap<u64, Arc<lease::owners::owner::OwnerInfo>>,
) -> (Vec<u64>, bool) {
    use lease::owners::owner::OwnerInfo;
    let who = |x: &OwnerInfo, y: &OwnerInfo| x.name != y.name || x.cmdline != y.cmdline || x.user != y.user;
    let figures = |x: &OwnerInfo, y: &OwnerInfo| {
        (x.cpu_percent - y.cpu_percent).abs() >= 1.0 || x.rss_bytes.abs_diff(y.rss_bytes) * 20 >= y.rss_bytes.max(1)
    };
    let mut pids: Vec<u64> = a
        .iter()
        .filter(|(pid, x)| b.get(pid).is_none_or(|y| who(x, y)))
        .map(|(pid, _)| *pid)
        .chain(b.keys().filter(|pid| !a.contains_key(pid)).copied())
        .collect();
    pids.sort_unstable();
    let moved = a.iter().any(|(pid, x)| b.get(pid).is_some_and(|y| figures(x, y)));
    (pids, moved)
}

/// The pids of the live owners on this host (`host`) in `listings`, sorted: those whose
/// details are looked up. Owners on another host (--host) are described by that host.
fn local_owner_pids(listings: &[Listing], host: &str) -> Vec<u64> {
    let mut pids: Vec<u64> = listings
        .iter()
        .filter(|l| l.location.host().is_none())
        .filter_map(|l| l.leases.as_ref().ok())
        .flatten()
        // A dead owner has no process to describe: its death changes this set, so the
        // details of a pid that is gone are never shown from before.
        .filter(|v| v.remote.as_ref().is_none_or(|r| r.host == host) && !matches!(v.liveness, lease::Liveness::Dead(_)))
        .map(lease::LeaseView::pid_here)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// How often a console looks at `/proc/locks`.
const LOCK_CHECK_EVERY: Duration = Duration::from_secs(5);
/// How often the owners' CPU and memory are looked up again (their pids: on every change).
/// Each lookup reads several /proc files per owner: every tick would be most of an idle
/// console's CPU.
const OWNERS_EVERY: Duration = Duration::from_secs(5);

impl Worker {
    pub fn new(scope: Scope, lock_timeout: Duration, runner: Option<Box<dyn Runner>>) -> Worker {
        let audit_failures: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
        let failures = Arc::clone(&audit_failures);
        let on_failure = Box::new(move |f: String| {
            if let Ok(mut all) = failures.lock() {
                all.push(f);
            }
        });
        // The console as the actor of every store's changes; what could not be recorded goes
        // to `audit_failures`. One for all the stores.
        let auditor = lease::audited::Auditor::new(lease::home::audit::Actor::console(), on_failure);
        Worker {
            scope,
            runner,
            stores: super::stores::Stores::new(StoreOptions { lock_timeout, ..StoreOptions::default() }, auditor),
            opened: Default::default(),
            unopenable: Default::default(),
            stop: Arc::default(),
            options: StoreOptions { lock_timeout, ..StoreOptions::default() },
            owners: OwnerProbe::new(),
            host: hostname(),
            lock_checked: None,
            lock_seen: HashMap::new(),
            lock_files: super::lock_files::LockFiles::default(),
            no_owners: Vec::new(),
            owner_infos: HashMap::new(),
            owner_pids: Vec::new(),
            pids_of: Vec::new(),
            owners_checked: None,
            last_holders: FxHashMap::default(),
            sessions: SessionCache::default(),
            audit_failures,
            first_read_done: false,
            writes: super::writes::Writes::default(),
            pruned: HashMap::new(),
            held: HashMap::new(),
        }
    }

    /// Where the change feed notes the registry versions it saw replaced.
    pub fn replaced(&self) -> super::writes::Replaced {
        Arc::clone(&self.writes.replaced)
    }

    /// Read store `index` (one of `stores`), noting the leases an acquire pruned since its
    /// last reading.
    fn read(&mut self, index: usize) -> Listing {
        let (listing, pruned) = self.stores.read(index, &mut self.writes);
        self.lock_files.note(index, listing.location.lock_path().as_deref());
        if pruned.is_empty() {
            self.pruned.remove(&index);
        } else {
            self.pruned.insert(index, pruned);
        }
        listing
    }

    /// A flag that, set, makes a read in progress stop at the next registry (quit).
    pub fn stopper(&self) -> Arc<std::sync::atomic::AtomicBool> {
        Arc::clone(&self.stop)
    }

    fn stopping(&self) -> bool {
        self.stop.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Leak suspects are judged against this idle threshold (else each home's config).
    pub fn with_idle_threshold(mut self, idle: Option<Duration>) -> Worker {
        self.sessions.idle_given = idle;
        self
    }

    /// Lock holders seen on two checks in a row (a lock is normally held for
    /// milliseconds). `/proc/locks` is read at most every `LOCK_CHECK_EVERY`: reading it
    /// makes the kernel synchronize RCU, which slows every flock on the machine meanwhile.
    /// Only the stores at `indices` are answered for: a reload in parts asks for each part,
    /// and answering for all 100,000 stores each time made it quadratic.
    fn stuck_locks(&mut self, indices: impl IntoIterator<Item = usize>) -> Vec<Option<LockHolder>> {
        self.check_locks();
        indices
            .into_iter()
            .map(|index| match self.lock_seen.get(&index) {
                Some((holder, true)) => Some(holder.clone()),
                _ => None,
            })
            .collect()
    }

    /// Look at `/proc/locks` again when due (see [`Worker::stuck_locks`]).
    fn check_locks(&mut self) {
        let due = self.lock_checked.is_none_or(|t| t.elapsed() >= LOCK_CHECK_EVERY);
        if due {
            self.lock_checked = Some(Instant::now());
            let mut seen = HashMap::new();
            for (index, pid) in self.lock_files.held() {
                let seen_before = self.lock_seen.remove(&index).map(|(h, _)| h).filter(|h| h.pid == pid);
                let confirmed = seen_before.is_some();
                let holder = seen_before.unwrap_or_else(|| LockHolder {
                    pid,
                    command: lease::owners::owner::command_name(u64::from(pid)),
                    since: lease::now(),
                });
                seen.insert(index, (holder, confirmed));
            }
            self.lock_seen = seen;
        }
    }

    /// The stores whose lock a holder was seen on in two checks in a row, with its pid
    /// (few: an idle tick compares these, not a slot for each of 100,000 stores).
    fn confirmed_holders(&mut self) -> FxHashMap<usize, u32> {
        self.check_locks();
        self.lock_seen.iter().filter(|(_, (_, confirmed))| *confirmed).map(|(&i, (h, _))| (i, h.pid)).collect()
    }

    /// Run an extension's job.
    pub fn extension(&mut self, job: &Job) -> Option<JobDone> {
        self.runner.as_mut()?.run(job)
    }

    /// The extension's news between jobs (see [`Runner::poll`]).
    pub fn extension_news(&mut self) -> Option<JobDone> {
        self.runner.as_mut()?.poll()
    }

    /// Open a store for every location in scope not opened yet (new profiles included).
    fn open_new(&mut self) {
        let mut wanted = self.scope.locations.clone();
        if let Some(root) = &self.scope.discover_root {
            wanted.extend(paths::all_registries(root).into_iter().map(Location::File));
        }
        if self.scope.discover_hosts {
            wanted.extend(lease::known_registries(&self.scope.locations));
        }
        for location in wanted {
            if self.stopping() {
                return;
            }
            self.open_if_new(location);
        }
    }

    /// Open a store for `location` unless one is open already (or it cannot be opened).
    fn open_if_new(&mut self, location: Location) {
        if self.store_index(&location).is_some() || self.unopenable.contains(&location) {
            return;
        }
        // The CLI opened each location once before starting the console, so this cannot fail.
        let Ok(store) = lease::open(&location, self.options) else {
            self.unopenable.insert(location);
            return;
        };
        // Every change the console makes is on record, as the CLI's are.
        self.stores.push(store);
        let (stores, index) = (&self.stores, self.stores.len() - 1);
        self.opened.insert(&location, index, |i| stores.location(i));
    }

    /// Whether `dir` is (or, gone, was) a profile of the root this console discovers.
    fn is_discovered_profile(&self, dir: &Path) -> bool {
        self.scope.discover_root.as_deref().is_some_and(|root| paths::is_profile_of(root, dir))
    }

    /// Open the profiles among `changed` that are new, real directories (never a link:
    /// [`paths::all_registries`] lists none), without listing the others (seconds at 100,000).
    /// A directory becomes a profile when its identity file appears, or is shown when a
    /// registry with leases appears in it: the homes of the files changed are looked at too.
    fn open_new_profiles(&mut self, changed: &[PathBuf]) {
        let Some(root) = self.scope.discover_root.clone() else { return };
        let mut dirs: Vec<&Path> = changed
            .iter()
            .flat_map(|p| [Some(p.as_path()), p.parent(), p.parent().and_then(Path::parent)])
            .flatten()
            .filter(|d| self.is_discovered_profile(d))
            .collect();
        dirs.sort();
        dirs.dedup();
        for dir in dirs {
            let Some(name) = dir.file_name().and_then(|n| n.to_str()) else { continue };
            if let Some(registry) = paths::listed_profile(&root, name) {
                self.open_if_new(Location::File(registry));
            }
        }
    }

    /// The index of the store opened for `location`.
    fn store_index(&self, location: &Location) -> Option<usize> {
        let stores = &self.stores;
        self.opened.find(location, |i| stores.location(i))
    }

    /// Re-read every location.
    pub fn reload(&mut self) -> Loaded {
        self.open_new();
        let stop = Arc::clone(&self.stop);
        let still = |_: &_| !stop.load(std::sync::atomic::Ordering::Relaxed);
        let count = self.stores.len();
        let listings: Vec<Listing> = (0..count).take_while(|_| still(&())).map(|i| self.read(i)).collect();
        let loaded = self.snapshots(listings);
        self.first_read_done = true;
        loaded
    }

    /// Re-read every location, sending the snapshots in parts as they are read: with
    /// thousands of profiles the first tabs fill in at once, not after the last is read.
    /// False when nobody listens any more (or the console quits).
    pub fn reload_in_parts(&mut self, send: &mut dyn FnMut(Loaded) -> bool) -> bool {
        self.open_new();
        let count = self.stores.len();
        let mut start = 0;
        while start < count {
            if self.stopping() {
                return false;
            }
            let end = (start + RELOAD_PART).min(count);
            let listings: Vec<Listing> = (start..end).map(|i| self.read(i)).collect();
            let mut loaded = self.snapshots_from(start, listings);
            loaded.large_read_done = end == count && count >= TRIM_AFTER_READING;
            if !send(loaded) {
                return false;
            }
            start = end;
        }
        // Nothing to read yet (no store): an empty snapshot says the first read is done.
        let sent = count > 0 || send(self.snapshots(vec![]));
        self.first_read_done = true;
        sent
    }

    /// Re-read the registries `changed` paths belong to (a registry, its runtime
    /// directory, its home or config.yaml), re-judge the others that hold leases (and the
    /// remote ones), open new profiles; send only those.
    pub fn reload_changed(&mut self, changed: &[PathBuf]) -> Loaded {
        // Only a directory coming or going can be a new profile: a file written in a home
        // is one open already (listing 100,000 profiles after every write cost a second),
        // and so is the runtime/ a home's first acquire makes. A profile made is opened on
        // its own (listing them all cost 4 s of CPU at 100,000).
        self.open_new_profiles(changed);
        let known_home = |h: &Path| self.stores.locations().any(|l| l.registry().is_some_and(|r| r.home == h));
        let known_runtime = |p: &Path| paths::is_runtime_dir(p) && p.parent().is_some_and(known_home);
        // A hidden directory in profiles/ is no profile: nothing to open.
        let in_profiles =
            |p: &Path| self.scope.discover_root.as_deref().is_some_and(|r| paths::is_in_profiles_of(r, p));
        if !changed.iter().all(|p| paths::is_home_file(p) || known_runtime(p) || in_profiles(p)) {
            self.open_new();
        }
        let homes: HashSet<&Path> = changed.iter().flat_map(|p| paths::homes_touched(p)).collect();
        // Remote locations have their own feed: a file change says nothing of them.
        let touched: Vec<bool> = self
            .stores
            .locations()
            .map(|l| l.registry().is_some_and(|reg| homes.contains(reg.home.as_path())))
            .collect();
        // The others are judged again, but for file registries that held no lease: nothing
        // in them can have changed (snapshots of 100,000 of those were most of a write's cost).
        let indices: Vec<usize> = (0..self.stores.len())
            .filter(|&i| touched[i] || !self.no_owners.get(i).copied().unwrap_or(false))
            .collect();
        // One look at each owner process, however many registries it holds leases in.
        let mut prober = Prober::new();
        let listings: Vec<Listing> = indices
            .iter()
            .map(|&i| if touched[i] { self.read(i) } else { self.stores.rejudge(i, &mut prober) })
            .collect();
        self.snapshots_at(&indices, listings)
    }

    /// Re-read the file registries whose file is not the version last read (a change made
    /// before the feed watched it), and open the profiles made meanwhile.
    pub fn reload_stale(&mut self) -> Loaded {
        let known = self.stores.len();
        self.open_new();
        let indices: Vec<usize> = (0..self.stores.len()).filter(|&i| i >= known || self.stale(i)).collect();
        let listings: Vec<Listing> = indices.iter().map(|&i| self.read(i)).collect();
        let mut loaded = self.snapshots_at(&indices, listings);
        // Listing 100,000 profiles again freed as much as it made: given back, as after a read.
        loaded.large_read_done = self.stores.len() >= TRIM_AFTER_READING;
        loaded
    }

    /// Whether store `index`'s registry file is not the version its last reading read.
    fn stale(&self, index: usize) -> bool {
        let Some(path) = self.stores.location(index).and_then(Location::registry).map(lease::Registry::path) else {
            return false;
        };
        lease::FileVersion::of(&path) != self.writes.version_read(index)
    }

    /// Re-judge the owners already known (files: no read; etcd: fresh TTLs).
    pub fn relive(&mut self) -> Loaded {
        if self.stores.is_empty() {
            return self.reload();
        }
        // A file registry that held no lease has no owner to judge: it is sent only when
        // its lock's holder changed (100,000 snapshots for every owner's CPU figure that
        // moved cost a quarter of a second).
        let now = self.confirmed_holders();
        let indices: Vec<usize> = (0..self.stores.len())
            .filter(|&i| !self.no_owners.get(i).copied().unwrap_or(false) || now.get(&i) != self.last_holders.get(&i))
            .collect();
        let mut prober = Prober::new();
        let listings: Vec<Listing> = indices.iter().map(|&i| self.stores.rejudge(i, &mut prober)).collect();
        self.snapshots_at(&indices, listings)
    }

    /// [`Worker::relive`], or None when nothing it would show has changed since the last
    /// snapshots (the usual tick of an idle console: no owner died, no TTL, no lock).
    pub fn relive_if_changed(&mut self) -> Option<Loaded> {
        // Every store is asked (a file store remembers what it found for the next tick).
        let empty = self.stores.is_empty();
        let no_owners = &self.no_owners;
        let stores = &mut self.stores;
        let mut prober = Prober::new();
        let needed: Vec<usize> = (0..stores.len())
            .filter(|i| !no_owners.get(*i).copied().unwrap_or(false))
            .filter(|&i| stores.rejudge_needed(i, &mut prober))
            .collect();
        if empty {
            return Some(self.relive());
        }
        // Only the registries whose owners changed (and any whose stuck lock did): a
        // snapshot of 20,000 registries for one owner that came or went was most of it.
        if !needed.is_empty() {
            let now = self.confirmed_holders();
            let indices: Vec<usize> = (0..self.stores.len())
                .filter(|i| needed.binary_search(i).is_ok() || now.get(i) != self.last_holders.get(i))
                .collect();
            // The round's prober: what it found of each owner just now is what is shown.
            let listings: Vec<Listing> = indices.iter().map(|&i| self.stores.rejudge(i, &mut prober)).collect();
            return Some(self.snapshots_at(&indices, listings));
        }
        // No owner came or went: only their details or a stuck lock can have changed,
        // each looked at on its own schedule, without judging every lease again.
        let (mut changed, mut moved) = (Vec::new(), false);
        if self.owners_checked.is_none_or(|t| t.elapsed() >= OWNERS_EVERY) {
            let fresh = self.lookup_owners(&self.owner_pids.clone());
            self.owners_checked = Some(Instant::now());
            (changed, moved) = owners_changed(&fresh, &self.owner_infos);
            if !changed.is_empty() || moved {
                self.owner_infos = fresh;
            }
        }
        let now = self.confirmed_holders();
        if changed.is_empty() && !moved && now == self.last_holders {
            return self.sessions.due(lease::now()).then(|| self.relive());
        }
        // Judged again: only the registries holding a lease of an owner who changed, and
        // any whose stuck lock did. Figures that moved go to the rows as they are (a busy
        // gateway's CPU figure re-judged all 3,000 of its registries every 5 s).
        let pids_of = &self.pids_of;
        let holds_changed =
            |i: usize| pids_of.get(i).is_some_and(|p| p.iter().any(|pid| changed.binary_search(pid).is_ok()));
        let indices: Vec<usize> =
            (0..self.stores.len()).filter(|&i| holds_changed(i) || now.get(&i) != self.last_holders.get(&i)).collect();
        let listings: Vec<Listing> = indices.iter().map(|&i| self.stores.rejudge(i, &mut prober)).collect();
        let mut loaded = self.snapshots_at(&indices, listings);
        loaded.owners_moved = moved.then(|| Arc::new(self.owner_infos.clone()));
        Some(loaded)
    }

    fn lookup_owners(&mut self, pids: &[u64]) -> HashMap<u64, Arc<lease::owners::owner::OwnerInfo>> {
        self.owners.infos(pids).into_iter().map(|(pid, o)| (pid, Arc::new(o))).collect()
    }

    fn snapshots(&mut self, listings: Vec<Listing>) -> Loaded {
        self.snapshots_from(0, listings)
    }

    /// How each store at `indices` answers.
    fn answering(&self, indices: &[usize]) -> Vec<Answering> {
        let answers = |s: &dyn LeaseStore| Answering {
            lag: s.lag(),
            not_answering: s.members_not_answering(),
            other_version: s.other_version(),
        };
        indices.iter().map(|&i| self.stores.open(i).map(answers).unwrap_or_default()).collect()
    }

    /// Which of the stores at `indices` have no owner to judge.
    /// These stores' owners on this host stand in for theirs among all of them: every
    /// store's owners, together.
    fn note_pids(&mut self, indices: &[usize], listings: &[Listing], host: &str) -> Vec<u64> {
        self.pids_of.resize(self.stores.len(), Vec::new());
        for (&i, l) in indices.iter().zip(listings) {
            if let Some(p) = self.pids_of.get_mut(i) {
                *p = local_owner_pids(std::slice::from_ref(l), host);
            }
        }
        let mut pids: Vec<u64> = self.pids_of.iter().flatten().copied().collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    fn note_owners(&mut self, indices: &[usize], listings: &[Listing]) {
        self.no_owners.resize(self.stores.len(), false);
        for (&i, l) in indices.iter().zip(listings) {
            let file = matches!(l.location, Location::File(_));
            if let Some(slot) = self.no_owners.get_mut(i) {
                *slot = file && l.leases.as_ref().map_or(true, Vec::is_empty);
            }
        }
    }

    /// These stores' lock holders stand in for their places among all of them.
    fn note_holders(&mut self, indices: &[usize], holders: &[Option<LockHolder>]) {
        for (&i, h) in indices.iter().zip(holders) {
            match h {
                Some(h) => self.last_holders.insert(i, h.pid),
                None => self.last_holders.remove(&i),
            };
        }
        let stores = self.stores.len();
        self.last_holders.retain(|&i, _| i < stores);
    }

    /// Snapshots of `listings`, the stores' from `start` on.
    fn snapshots_from(&mut self, start: usize, listings: Vec<Listing>) -> Loaded {
        let indices: Vec<usize> = (start..start + listings.len()).collect();
        self.snapshots_at(&indices, listings)
    }

    /// Snapshots of `listings`, the stores' at `indices` (in tab order).
    fn snapshots_at(&mut self, indices: &[usize], listings: Vec<Listing>) -> Loaded {
        // Process details only for owners on this host: a pid elsewhere means nothing here.
        let host = self.host.clone();
        let local = |v: &lease::LeaseView| v.remote.as_ref().is_none_or(|r| r.host == host);
        let pids = self.note_pids(indices, &listings, &host);
        let owners_due = self.owners_checked.is_none_or(|t| t.elapsed() >= OWNERS_EVERY);
        if owners_due || pids != self.owner_pids {
            self.owner_infos = self.lookup_owners(&pids);
            self.owner_pids = pids;
            self.owners_checked = Some(Instant::now());
        }
        self.note_owners(indices, &listings);
        let holders: Vec<Option<LockHolder>> = self.stuck_locks(indices.iter().copied());
        let answering = self.answering(indices);
        self.note_holders(indices, &holders);
        let owners = &self.owner_infos;
        let at = lease::now();
        let idle_given = self.sessions.idle_given;
        let sessions = &mut self.sessions;
        let pruned: Vec<Vec<String>> = indices.iter().map(|i| self.pruned.remove(i).unwrap_or_default()).collect();
        let removed_by: Vec<Vec<(String, lease::home::remover::Remover)>> =
            indices.iter().zip(&listings).map(|(&i, l)| removers(&mut self.held, i, l)).collect();
        // How many sessions each owner holds, over every registry read here.
        let held = lease::owners::kind::Holdings::of(listings.iter().filter_map(|l| l.leases.as_ref().ok()).flatten());
        let snapshots = listings
            .into_iter()
            .zip(holders)
            .zip(answering.into_iter().chain(std::iter::repeat_with(Answering::default)))
            .zip(pruned)
            .zip(removed_by)
            .map(|((((l, lock_holder), answers), pruned_by_acquire), removed_by)| {
                let remote_owners = owners_on_host(&l.location);
                let owners = remote_owners.as_ref().unwrap_or(owners);
                let context = match (&l.location, &l.leases) {
                    (Location::File(reg), Ok(views)) => Some(sessions.contexts(&reg.home, views, at)),
                    // Read on the registry's host, sent with its listing.
                    (Location::Ssh(_), Ok(_)) => {
                        lease::remote_sessions(&l.location).map(|(c, idle)| (Arc::new(c), idle_given.unwrap_or(idle)))
                    }
                    _ => None,
                };
                let (slots_used, waiting) = line_and_slots(&l);
                RegistrySnapshot {
                    not_answering: answers.not_answering,
                    slots_used,
                    waiting,
                    lock_holder,
                    lag: answers.lag,
                    other_version: answers.other_version,
                    pruned_by_acquire,
                    removed_by,
                    sessions: context.as_ref().map(|(c, _)| Arc::clone(c)),
                    location: l.location,
                    exists: l.exists,
                    modified: l.modified,
                    cap: l.cap,
                    leases: l.leases.map(|views| {
                        views
                            .into_iter()
                            .map(|v| {
                                let seen = Seen { owners, context: context.as_ref(), held: &held, at };
                                let shown = local(&v) || remote_owners.is_some();
                                seen.row(v, shown)
                            })
                            .collect()
                    }),
                }
            })
            .collect();
        self.sessions.judged(at);
        let (first, initial) = (indices.first().copied().unwrap_or(0), !self.first_read_done);
        Loaded { at, first, initial, snapshots, large_read_done: false, owners_moved: None }
    }

    /// Run an operator action through the location's store.
    pub fn act(&mut self, effect: &Effect) -> Option<Event> {
        let location = match effect {
            Effect::Prune { location }
            | Effect::ForceRelease { location, .. }
            | Effect::PlanStop { location, .. }
            | Effect::Stop { location, .. }
            | Effect::PlanRepair { location }
            | Effect::Repair { location, .. } => location.clone(),
            _ => return None,
        };
        if self.store_index(&location).is_none() {
            self.open_new();
        }
        let index = self.store_index(&location)?;
        let store = self.stores.store(index)?;
        let (what, result) = match effect {
            Effect::Prune { .. } => {
                ("prune".to_owned(), store.prune(lease::PruneOptions::default()).map(ActionOutcome::Removed))
            }
            Effect::ForceRelease { target, allow_live, .. } => {
                let what = format!("force-release {}", target.short());
                let opts = lease::ForceOptions { allow_live: *allow_live, dry_run: false };
                (what, store.force_release(target, opts).map(ActionOutcome::Removed))
            }
            Effect::PlanStop { target, .. } => {
                let result = store.stop_plan(target).map(Box::new);
                return Some(Event::StopPlanned { location, result });
            }
            Effect::Stop { plan, .. } => {
                let what = format!("stop {}", plan.target.short());
                let opts = lease::stop::StopOptions::default();
                let stopped = store.stop(plan, opts).map(|mut stopped| {
                    stopped.elsewhere = self.clean_elsewhere(index, plan, &stopped);
                    stopped
                });
                (what, stopped.map(ActionOutcome::Stopped))
            }
            Effect::PlanRepair { .. } => {
                let planned = store.repair(lease::doctor::repair::RepairOptions { dry_run: true, force: false });
                let needs_force = planned.as_ref().is_ok_and(|r| !r.plan.live_risks().is_empty());
                let result = planned.map(|r| {
                    if r.needed { plan_lines(&r.plan) } else { vec!["the registry is valid: nothing to repair".into()] }
                });
                return Some(Event::RepairPlanned { location, result, needs_force });
            }
            Effect::Repair { force, .. } => {
                let done = store.repair(lease::doctor::repair::RepairOptions { dry_run: false, force: *force });
                ("repair".to_owned(), done.map(|r| ActionOutcome::Repaired(repaired_summary(&r))))
            }
            _ => return None,
        };
        // The store put the change on record; what it could not record is said in the log.
        let audit_failures = self.audit_failures.lock().map(|mut all| std::mem::take(&mut *all)).unwrap_or_default();
        let done = ActionDone { location, what, result, audit_failures };
        self.learn_lock(&done);
        Some(Event::ActionDone(done))
    }

    /// An ended owner's leases in the home's other registries (profiles), each removed in
    /// one write as a stop's: said in words, one line a registry.
    fn clean_elsewhere(
        &mut self,
        index: usize,
        plan: &lease::stop::StopPlan,
        stopped: &lease::stop::Stopped,
    ) -> Vec<String> {
        let Some(home) = self.stores.location(index).and_then(|l| l.registry()).map(|r| r.home.clone()) else {
            return vec![];
        };
        let root = lease::home::paths::root_of(&home);
        let ended: Vec<&lease::stop::OwnerToStop> = plan
            .owners
            .iter()
            .filter(|o| stopped.owners.iter().any(|s| s.start_time == o.start_time && s.ending.ended()))
            .collect();
        let mut said = Vec::new();
        for other in (0..self.stores.len()).filter(|i| *i != index) {
            let Some(reg) = self.stores.location(other).and_then(|l| l.registry()).cloned() else { continue };
            if lease::home::paths::root_of(&reg.home) != root {
                continue;
            }
            let Ok(views) = lease::file::snapshot(&reg).leases else { continue };
            let ids: Vec<String> = views
                .iter()
                // Its owner has ended: its leases read as a dead owner's now, found by its
                // pid and start time.
                .filter(|v| {
                    ended.iter().any(|o| {
                        v.entry.pid() == o.recorded()
                            && v.entry.process_start_time().is_some_and(|t| (t - o.start_time).abs() < 0.001)
                    })
                })
                .map(|v| v.entry.lease_id().to_owned())
                .collect();
            if ids.is_empty() {
                continue;
            }
            let Some(store) = self.stores.store(other) else { continue };
            let opts = lease::ForceOptions { allow_live: true, dry_run: false };
            said.push(match store.force_release(&lease::Target::Stopped(ids), opts) {
                Ok(r) => format!(
                    "in {}: removed {} of the ended owner",
                    reg.profile,
                    plural(r.removed.len(), "lease", "leases")
                ),
                Err(e) => format!("in {}: its leases were left: {e}", reg.profile),
            });
        }
        said
    }

    /// What an action learned about its registry's lock stands until the next check: a
    /// timeout names the holder at once (held at least as long as the action waited); a
    /// success proves the lock free.
    fn learn_lock(&mut self, done: &ActionDone) {
        let Some(index) = self.store_index(&done.location) else { return };
        match (done.lock_holder(), &done.result) {
            (Some(pid), _) => {
                let known = self.lock_seen.get(&index).map(|(h, _)| h.clone()).filter(|h| h.pid == pid);
                let waited = self.options.lock_timeout.as_secs_f64();
                let holder = known.unwrap_or_else(|| LockHolder {
                    pid,
                    command: lease::owners::owner::command_name(u64::from(pid)),
                    since: lease::now() - waited,
                });
                self.lock_seen.insert(index, (holder, true));
            }
            (None, Ok(_)) => {
                self.lock_seen.remove(&index);
            }
            _ => {}
        }
    }
}

/// What a repair did, in one log line.
fn repaired_summary(r: &lease::doctor::repair::RepairReport) -> String {
    let backup = r.backup.as_ref().map(|b| b.display().to_string()).unwrap_or_else(|| "-".into());
    format!(
        "kept {} ({} restored), dropped {}, re-keyed {}{}; old bytes in {backup}",
        plural(r.plan.kept.len(), "lease", "leases"),
        r.plan.restored.len(),
        r.plan.dropped.len(),
        r.plan.rekeyed.len(),
        if r.plan.cut_at.is_some() { ", and what followed the cut is lost" } else { "" }
    )
}

/// A repair plan as lines for the confirmation dialog.
fn plan_lines(plan: &lease::doctor::repair::RepairPlan) -> Vec<String> {
    let mut out = vec![format!("keep {}", plural(plan.kept.len(), "valid lease", "valid leases"))];
    if plan.salvaged {
        out.push(format!("the JSON is broken: {} salvaged", plural(plan.found, "complete entry", "complete entries")));
    }
    out.extend(plan.restored.iter().map(|r| {
        format!(
            "restore entry {} (lease {}, session {}): rebuilt {}",
            r.index,
            r.lease_id,
            r.session_id,
            r.rebuilt.join(", ")
        )
    }));
    out.extend(plan.dropped.iter().map(|d| {
        format!(
            "drop entry {} (lease {}, session {}, pid {}, owner {}): {}",
            d.index,
            d.lease_id.as_deref().unwrap_or("-"),
            d.session_id.as_deref().unwrap_or("-"),
            d.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            d.owner.as_deref().unwrap_or("unknown"),
            d.why
        )
    }));
    if let Some(at) = plan.cut_at {
        out.push(format!("unreadable from byte {at} on: the entries that stood there are lost"));
    }
    out.extend(plan.rekeyed.iter().map(|(a, b)| format!("live duplicate {a}: kept as {b}")));
    out
}

/// Serve effects until the channel closes. Queued reloads collapse into one.
/// The worker owns the extension's runner: join it so whatever the runner started
/// (the demo's owners and sandbox) is cleaned up before the process exits.
pub fn spawn(mut worker: Worker, effects: Receiver<Effect>, events: Sender<Event>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while let Ok(first) = effects.recv() {
            let mut batch = vec![first];
            batch.extend(effects.try_iter());
            let mut reload = false;
            let mut relive = false;
            let mut stale = false;
            let mut changed: Vec<PathBuf> = Vec::new();
            for effect in &batch {
                match effect {
                    Effect::Reload => reload = true,
                    Effect::ReloadChanged(paths) => changed.extend(paths.iter().cloned()),
                    Effect::ReloadStale => stale = true,
                    Effect::Relive => {
                        relive = true;
                        if let Some(news) = worker.extension_news() {
                            reload = true;
                            if events.send(Event::Extension(news)).is_err() {
                                return;
                            }
                        }
                    }
                    Effect::Quit => {
                        // The process ends next: freeing every store one by one held the
                        // quit up (0.3 s at 100,000 profiles). An extension's runner has
                        // something to clean up (the demo's owners, its sandbox): dropped.
                        if worker.runner.is_none() {
                            std::mem::forget(worker);
                        }
                        return;
                    }
                    Effect::RetryHosts => {
                        let locations: Vec<Location> = worker.stores.locations().cloned().collect();
                        let tried = lease::retry_hosts_now(&locations);
                        if !tried.is_empty() && events.send(Event::Retrying(tried)).is_err() {
                            return;
                        }
                    }
                    Effect::Extension(job) => {
                        if let Some(done) = worker.extension(job) {
                            // What the job changed is read (and logged) before its answer:
                            // the log reads cause, then what the registry shows, then outcome.
                            let mut send = |loaded| events.send(Event::Loaded(loaded)).is_ok();
                            if !worker.reload_in_parts(&mut send) || events.send(Event::Extension(done)).is_err() {
                                return;
                            }
                        }
                    }
                    action => {
                        if let Some(done) = worker.act(action) {
                            reload = true;
                            if events.send(done).is_err() {
                                return;
                            }
                        }
                    }
                }
            }
            // The feed armed as changes came (once, rarely): everything is read.
            let loaded = if reload || (stale && !changed.is_empty()) {
                let mut send = |loaded| events.send(Event::Loaded(loaded)).is_ok();
                if !worker.reload_in_parts(&mut send) {
                    return;
                }
                continue;
            } else if stale {
                worker.reload_stale()
            } else if !changed.is_empty() {
                worker.reload_changed(&changed)
            } else if relive {
                match worker.relive_if_changed() {
                    Some(loaded) => loaded,
                    None => continue,
                }
            } else {
                continue;
            };
            if events.send(Event::Loaded(loaded)).is_err() {
                return;
            }
        }
    })
}

/// etcd's own count of slots in use (the slot keys under the cap) and who waits in line.
fn line_and_slots(l: &Listing) -> (Option<u64>, Vec<lease::Waiter>) {
    let Some(remote) = &l.remote else { return (None, vec![]) };
    let used = remote.slots.iter().filter(|(i, _)| l.cap.cap.is_none_or(|c| *i < c)).count() as u64;
    (Some(used), remote.waiting.clone())
}

/// The owners of a registry on another host (`--host`), looked up there.
fn owners_on_host(location: &Location) -> Option<HashMap<u64, Arc<lease::owners::owner::OwnerInfo>>> {
    location.host()?;
    Some(lease::owners_at(location, &[]).into_iter().map(|(p, o)| (p, Arc::new(o))).collect())
}

/// How a store answers: late (a slow host), or with members not answering (etcd).
#[derive(Default)]
struct Answering {
    lag: Option<std::time::Duration>,
    not_answering: Vec<(String, String)>,
    other_version: Option<String>,
}

/// What one reading saw beside a lease: its owners' processes, its home's state.db, how
/// many sessions each owner holds, and when.
struct Seen<'a> {
    owners: &'a HashMap<u64, Arc<lease::owners::owner::OwnerInfo>>,
    context: Option<&'a (Arc<lease::home::context::Contexts>, std::time::Duration)>,
    held: &'a lease::owners::kind::Holdings,
    at: f64,
}

impl Seen<'_> {
    /// `v` as the console shows it; `shown`: its owner is a process looked at here.
    fn row(&self, v: lease::LeaseView, shown: bool) -> LeaseRow {
        let info = v.owner_pid_here().and_then(|p| self.owners.get(&p));
        let ctx = self.context.and_then(|(c, _)| c.get(v.entry.session_id()));
        LeaseRow {
            owner_move: lease::view::owner_may_be_alive(&v).then(|| {
                let cmdline = info.map(|o| o.cmdline.as_slice());
                Arc::new(lease::owners::kind::OwnerMove::of(&v, ctx, self.held.of_owner(&v), cmdline, self.at))
            }),
            leak: self
                .context
                .and_then(|(c, idle)| super::sessions::leak(&v, c, *idle, self.at, info.map(|o| o.name.as_str()))),
            owner: (shown && !matches!(v.liveness, lease::Liveness::Dead(_))).then(|| info.cloned()).flatten(),
            ttl_left: v.remote.as_ref().map(|r| r.ttl_left.unwrap_or(-1)),
            host: v.remote.as_ref().map(|r| Arc::from(r.host.as_str())),
            liveness: v.liveness,
            entry: Arc::new(v.entry),
        }
    }
}
