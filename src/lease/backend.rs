//! The one interface over where leases live, and the vocabulary of its change feed.
//! The CLI and the console call only this; `lease::open` gives a [`LeaseStore`] for a
//! [`Location`] (a registry file, or etcd in a build with the `etcd` feature) and
//! `lease::watch` its change feed.

use std::path::PathBuf;
use std::time::Duration;

use super::address::location::Location;
use super::doctor::repair::{RepairOptions, RepairReport};
use super::error::Error;
use super::grant::{AcquireRequest, Grant, Released};
use super::home::config::CapSetting;
use super::home::lock::HeldFlocks;
use super::owners::liveness::Prober;
use super::stop::{StopOptions, StopPlan, Stopped};
use super::view::{DoctorReport, ForceOptions, LeaseView, PruneOptions, Removal, Target};
use super::words::refusal::Refusal;

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

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RemoteListing {
    pub revision: i64,
    /// Used slots: index and the session key holding it.
    pub slots: Vec<(u64, String)>,
    /// Why each bad key is not an entry (shown, never trusted).
    pub bad: Vec<String>,
    /// Who stands in line (`--wait`), in the order they will be served.
    #[serde(default)]
    pub waiting: Vec<Waiter>,
    /// The prefix's cap: the `--max` its capped clients last acquired with (`P/cap`).
    #[serde(default)]
    pub cap: Option<u64>,
}

/// One client waiting in line under an etcd prefix (`acquire`/`hold`/`run --wait`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Waiter {
    pub session_id: String,
    pub pid: u64,
    pub host: String,
    pub surface: Option<String>,
    /// When it joined the line (epoch seconds).
    pub since: f64,
    /// The cap (`--max`) it waits under, if any.
    pub cap: Option<u64>,
    /// Its place: the revision its key was created at (the lowest is served first).
    pub position: i64,
    /// Its key under the prefix.
    pub key: String,
}

/// A running renewal of a grant (etcd's keep-alive). Stopping it lets the lease end by its TTL.
pub trait Renewal: Send {
    fn stop(self: Box<Self>);
}

/// Called once, from another thread, when a held lease is lost: why.
pub type OnLost = Box<dyn FnOnce(String) + Send>;

/// What an owner's release ([`LeaseStore::release_unless`]) did.
#[derive(Debug, Clone)]
pub enum OwnerRelease {
    /// Released, or already gone; the lease as judged before it went (None: not there).
    Done { released: Released, view: Option<LeaseView> },
    /// Not released, nothing written: the check refused this lease.
    Refused(LeaseView),
}

/// What the CLI and the console do with leases, whatever the backend.
pub trait LeaseStore: Send {
    fn location(&self) -> &Location;
    /// The cap configured at this location (a file's `config.yaml`; etcd has none: `--max` only).
    fn cap_setting(&self) -> CapSetting;
    /// Read every lease now and judge its owner. Never locks, never writes.
    fn read(&mut self) -> Listing;
    /// Judge again what the last read found, cheaply (files: no read; etcd: fresh TTLs).
    /// `prober` is shared by the stores judged in one round, as in
    /// [`LeaseStore::rejudge_needed`]: a gateway's owner of 3,000 registries was looked at
    /// 3,000 times each time its CPU figure moved.
    fn rejudge(&mut self, prober: &mut Prober) -> Listing;
    /// Whether [`LeaseStore::rejudge`] could find anything other than the last listing
    /// did (files: whether an owner process started, ended or changed; etcd: always).
    /// `prober` is shared by the stores asked in one round: an owner of many registries
    /// (a gateway's, one per profile) is looked at once, not once a registry.
    fn rejudge_needed(&mut self, _prober: &mut Prober) -> bool {
        true
    }
    /// The fence. Every failure to coordinate is a refusal, never a grant.
    fn acquire(&mut self, req: &AcquireRequest) -> Result<Grant, Refusal>;
    /// Stand in line for what `req` waits for (`--wait`): those who came first are served
    /// first, and everyone sees who waits. How many stand before it; `None` where a store
    /// has no line (a registry file: whoever takes the lock first).
    fn join_line(&mut self, _req: &AcquireRequest) -> Result<Option<usize>, Error> {
        Ok(None)
    }
    /// Leave the line (served, or given up).
    fn leave_line(&mut self) {}
    /// The owner's release by lease id; a lease already gone is fine.
    fn release(&mut self, lease_id: &str) -> Result<Released, Error>;
    /// The owner's release, unless `refuse` says no to the lease as judged now (nothing
    /// removed then). A registry file judges it from the read its removal makes, under
    /// the same lock: one read, and the lease judged is the lease removed.
    fn release_unless(&mut self, lease_id: &str, refuse: &dyn Fn(&LeaseView) -> bool) -> Result<OwnerRelease, Error> {
        let listed = self.read().leases.ok().and_then(|v| v.into_iter().find(|v| v.entry.lease_id() == lease_id));
        if let Some(view) = listed.as_ref().filter(|v| refuse(v)) {
            return Ok(OwnerRelease::Refused(view.clone()));
        }
        Ok(OwnerRelease::Done { released: self.release(lease_id)?, view: listed })
    }
    /// The release of a grant this process holds (at the end of `hold` / `run`).
    fn release_grant(&mut self, grant: &Grant) -> Result<Released, Error>;
    /// The operator's release. A live owner's lease only with `opts.allow_live`.
    fn force_release(&mut self, target: &Target, opts: ForceOptions) -> Result<Removal, Error>;
    /// What `stop` would end for `target`: each owner process, seen now, or why not
    /// (`lease::stop::plan` over this store's listing, where the owners run here).
    fn stop_plan(&mut self, target: &Target) -> Result<StopPlan, Error>;
    /// End the owners `plan` names (SIGTERM, the grace, SIGKILL), then remove what they
    /// leave; an owner changed since the plan is never signalled (`lease::stop::run`).
    fn stop(&mut self, plan: &StopPlan, opts: StopOptions) -> Result<Stopped, Error>;
    /// Remove dead and recycled owners' leases (etcd: those of owners on this host).
    fn prune(&mut self, opts: PruneOptions) -> Result<Removal, Error>;
    /// Everything `doctor` checks; only a registry file has a doctor.
    fn doctor(&mut self) -> Result<DoctorReport, Error>;
    /// `doctor --repair`; only a registry file can be repaired.
    fn repair(&mut self, opts: RepairOptions) -> Result<RepairReport, Error>;
    /// Keep a grant alive while its holder runs. `None`: nothing needs renewing (a
    /// registry file lease lasts as long as its owner process).
    fn keep_alive(&self, grant: &Grant, on_lost: OnLost) -> Result<Option<Box<dyn Renewal>>, Error>;
    /// How long taking this location's write lock takes now (at most `bound`), and
    /// whether someone else held it: what metrics report. None where there is no lock to
    /// take (etcd's fence is a transaction) or no lock file yet (nothing is created to
    /// measure it). Who holds a lock is not asked store by store: `held`, read from
    /// /proc/locks once for every store (each read of it costs the whole machine an RCU
    /// sync, as the console's reading of it does), says which lock files have a flock on
    /// them; a lock nobody holds is free, and not taken to tell.
    fn probe_lock(&self, _bound: Duration, _held: &HeldFlocks) -> Option<LockProbe> {
        None
    }
    /// How far behind this location's answers are, when noticeably (another host whose
    /// answers are slow: what is read may be that late).
    fn lag(&self) -> Option<Duration> {
        None
    }
    /// The leasectl version that answers for this location, when it is not this one
    /// (another host's, of the same protocol): said with the command that puts this
    /// build there.
    fn other_version(&self) -> Option<String> {
        None
    }
    /// The members of this location that did not answer the last check while others
    /// did, and why (etcd: checked every few seconds by a watcher).
    fn members_not_answering(&self) -> Vec<(String, String)> {
        vec![]
    }
    /// What to do about a refusal here.
    fn advice(&self, refusal: &Refusal) -> String {
        refusal.advice()
    }
    /// Another host's recorded history from `from` (epoch seconds) on, read there (its
    /// journal and unrecorded removals, merged). None where the journal is read here
    /// (`journal::journal_home`).
    fn recorded_since(&mut self, _from: f64) -> Option<Result<RecordedEvents, Error>> {
        None
    }
}

/// A home's recorded history as another host read it (`events --since` over `--host`).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct RecordedEvents {
    /// In time order; the newest [`RecordedEvents::MOST`] at most. Kept as their JSON
    /// text (a parsed event takes ten times its text's memory: 200 MiB for 50,000).
    pub events: Vec<Box<serde_json::value::RawValue>>,
    /// How many journals there were (none: no recorder ever ran there).
    pub journals: usize,
    /// Older events left out to stay within [`RecordedEvents::MOST`].
    pub left_out: usize,
    /// What could not be read there, each naming its file.
    pub warnings: Vec<String>,
}

impl RecordedEvents {
    /// The most events one answer carries (a day of a busy home's is far fewer).
    pub const MOST: usize = 100_000;
}

/// What taking a lock once found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LockProbe {
    pub waited: Duration,
    /// Not taken within the bound: someone holds it.
    pub held: bool,
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
            lock_timeout: super::home::lock::DEFAULT_LOCK_TIMEOUT,
            ttl: super::address::location::DEFAULT_TTL,
            idle_threshold: None,
        }
    }
}

/// The longest a burst of changes is gathered before it is reported.
pub const MAX_GATHER: Duration = Duration::from_millis(100);

/// What changed, as the change feed reports it (bursts already gathered).
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Paths under a watched home changed (a registry, a config, a new profile).
    Files(Vec<PathBuf>),
    /// A registry was replaced in one burst, once per version listed (each as the file
    /// was seen when its event came, None when it could not be looked at): a reader that
    /// reads once per burst saw only the last of those versions. Sent before its `Files`.
    Replaced(PathBuf, Vec<Option<FileVersion>>),
    /// Changes under an etcd prefix, from etcd's watch: each once, in revision order (a
    /// re-made watch resumes after the last revision seen). Empty: the watch (re)opened
    /// and nothing was missed; a re-read shows the same.
    Remote(Vec<RemoteChange>),
}

/// One change to a lease under an etcd prefix, as etcd's watch reported it.
#[derive(Debug, Clone, PartialEq)]
pub enum RemoteChange {
    /// A session key written: a new lease (`created`), or its writer's re-acquire.
    Put { revision: i64, view: LeaseView, created: bool },
    /// A session key gone: the lease as it was held, and how it ended.
    Deleted { revision: i64, view: LeaseView, ended: Ending },
    /// A client joined or left the line (`--wait`), or the prefix's cap key changed: no
    /// lease changed, and a re-read shows what did.
    Line { revision: i64 },
    /// The watch lost history (etcd compacted past the last revision seen, or a deleted
    /// key's last value was not given): what changed meanwhile is only known by a re-read.
    Resync,
}

/// How a lease under an etcd prefix ended, as its ender marked it (`P/ended/<lease id>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Its owner (or someone on its behalf) released it.
    Released,
    /// An operator revoked it (`force-release`), named.
    ForceReleased { by: String },
    /// `stop` ended its owner and removed it, named.
    Stopped { by: String },
    /// The console's or `prune`'s removal of a dead owner's lease, named.
    Pruned { by: String },
    /// Nobody ended it: its etcd lease ran out (the owner stopped renewing), or was
    /// revoked outside leasectl.
    Expired,
}

impl RemoteChange {
    pub fn revision(&self) -> i64 {
        match self {
            RemoteChange::Put { revision, .. }
            | RemoteChange::Deleted { revision, .. }
            | RemoteChange::Line { revision } => *revision,
            RemoteChange::Resync => 0,
        }
    }
}

/// One version of a file: its inode and change time. A rename over a registry makes a
/// new one; a reader that knows which version it read can tell a version it missed from
/// the one it saw, whichever order the read and the rename's event came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileVersion {
    pub ino: u64,
    pub ctime_ns: i128,
}

impl FileVersion {
    /// The version at `path` now (the path itself, never a link's target).
    pub fn of(path: &std::path::Path) -> Option<FileVersion> {
        use std::os::unix::fs::MetadataExt as _;
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(FileVersion { ino: m.ino(), ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()) })
    }

    /// How many versions of a file were never read, of those `replaced` since the last
    /// reading (which read `read_before`, when known): all but the one read now, and but
    /// any that was the one read last time (its event can come after that reading, as a
    /// burst gathers or a re-judge tick reads).
    ///
    /// A version is looked at when its event is handled, which can be after the next one
    /// replaced it: then two events name the later version, and the earlier may well be
    /// the one read last time. Only what is certain is said ("at least N"), so such a
    /// repeat is credited to the version read before when no event names it.
    pub fn unseen(read_before: Option<FileVersion>, replaced: &[Option<FileVersion>]) -> usize {
        let named_read_before = replaced.iter().any(|v| v.is_some() && *v == read_before);
        let repeated = replaced.iter().enumerate().any(|(i, v)| v.is_some() && replaced[..i].contains(v));
        let read_before = usize::from(named_read_before || (read_before.is_some() && repeated));
        // The last replacement made the version read now, seen or not when its event came.
        replaced.len().saturating_sub(read_before + usize::from(!replaced.is_empty()))
    }
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
