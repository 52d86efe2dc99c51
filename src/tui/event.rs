//! What flows on the console's one channel (events) and what `update` asks the
//! worker to do (effects).

use std::any::Any;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use ratatui::crossterm::event::{KeyEvent, MouseEvent};

use crate::lease::home::config::CapSetting;
use crate::lease::home::context::Contexts;
use crate::lease::owners::owner::OwnerInfo;
use crate::lease::{Entry, Error, Liveness, Location, Removal, Target};

#[derive(Debug)]
pub enum Event {
    Key(KeyEvent),
    /// A click or the wheel (while the console captures the mouse).
    Mouse(MouseEvent),
    /// The terminal's new size (columns, rows).
    Resize(u16, u16),
    /// Something changed under a watched directory (already debounced and filtered).
    FsChanged(Vec<PathBuf>),
    /// The change feed watches every registry file now: one changed before then may have
    /// gone unreported.
    FeedArmed,
    /// Changes under the watched etcd prefix, from etcd's watch (empty: the watch opened
    /// or re-opened; a re-read shows the rest).
    RemoteChanged(Vec<crate::lease::RemoteChange>),
    /// The liveness tick (about once a second), with the time it fired.
    Tick(f64),
    /// Fresh snapshots from the worker.
    Loaded(Loaded),
    /// An operator action finished.
    ActionDone(ActionDone),
    /// An extension's job finished on the worker thread.
    Extension(JobDone),
    /// What the recorder saw before the console opened, read on a thread of its own.
    History(History),
    /// SIGTERM/SIGHUP: leave as if the operator pressed q.
    Shutdown,
    /// Hosts that were down and are being tried again now (the operator's `r`).
    Retrying(Vec<String>),
    /// A repair's plan, to confirm: one line per kept/dropped/re-keyed entry.
    RepairPlanned {
        location: Location,
        result: Result<Vec<String>, Error>,
        /// The repair would lose a lease whose owner may be alive: only a forced one may run.
        needs_force: bool,
    },
    /// What a stop would end, or why it may not.
    StopPlanned {
        location: Location,
        result: Result<Box<crate::lease::stop::StopPlan>, Error>,
    },
}

/// What a finished operator action did.
#[derive(Debug)]
pub enum ActionOutcome {
    Removed(Removal),
    /// A repair: one line saying what was kept, dropped and where the backup is.
    Repaired(String),
    /// A stop: each owner ended (or why not), and what became of its leases.
    Stopped(crate::lease::stop::Stopped),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Re-read every registry (and discover new profiles).
    Reload,
    /// Re-read the registries these changed paths belong to, re-judge the others, and
    /// discover new profiles: a burst of changes in one profile reads that profile only.
    ReloadChanged(Vec<std::path::PathBuf>),
    /// Re-read the registry files changed since their last reading, and open new profiles
    /// (the change feed armed after the first read began).
    ReloadStale,
    /// Re-judge only the pids already known (no file read).
    Relive,
    /// Try every host that is down again now (the operator's `r`), not after its pause.
    RetryHosts,
    Prune {
        location: Location,
    },
    /// Work out what `doctor --repair` would do (nothing written).
    PlanRepair {
        location: Location,
    },
    /// Repair an invalid registry (backup kept beside it); `force` when it may lose a
    /// lease whose owner may be alive (the operator pressed F for it).
    Repair {
        location: Location,
        force: bool,
    },
    /// An extension's job, for its runner on the worker thread.
    Extension(Job),
    ForceRelease {
        location: Location,
        target: Target,
        allow_live: bool,
    },
    /// Work out what a stop of `target`'s owner would end (nothing signalled).
    PlanStop {
        location: Location,
        target: Target,
    },
    /// End the owners the plan names (the operator said yes to it).
    Stop {
        location: Location,
        plan: Box<crate::lease::stop::StopPlan>,
    },
    Quit,
}

/// One lease as the console shows it. The entry is shared, not copied, between
/// the worker's cache and every snapshot (a registry may hold thousands).
#[derive(Debug, Clone)]
pub struct LeaseRow {
    pub entry: Arc<Entry>,
    pub liveness: Liveness,
    /// Shared: one owner process usually holds many leases.
    pub owner: Option<Arc<OwnerInfo>>,
    /// On etcd: seconds left on the owner's etcd lease (-1: gone or not read). None on files.
    pub ttl_left: Option<i64>,
    /// Why this lease looks leaked (a live owner, its session ended or idle), if it does.
    pub leak: Option<Arc<str>>,
    /// On etcd: the host its owner runs on. None on files (this host).
    pub host: Option<Arc<str>>,
    /// A live owner's kind, what state.db says of it, and the safe move for its lease.
    pub owner_move: Option<Arc<crate::lease::owners::kind::OwnerMove>>,
}

impl LeaseRow {
    /// The owner's pid on this host (see [`crate::lease::LeaseView::pid_here`]).
    pub fn pid_here(&self) -> u64 {
        self.liveness.namespaced().map_or(self.entry.pid(), |o| o.host_pid)
    }
}

impl PartialEq for LeaseRow {
    fn eq(&self, other: &LeaseRow) -> bool {
        (Arc::ptr_eq(&self.entry, &other.entry) || self.entry == other.entry)
            && self.liveness == other.liveness
            && self.owner == other.owner
            && self.ttl_left == other.ttl_left
            && self.host == other.host
            && self.leak == other.leak
            && self.owner_move == other.owner_move
    }
}

/// One registry as read now.
#[derive(Debug, Clone, PartialEq)]
pub struct RegistrySnapshot {
    pub location: Location,
    pub exists: bool,
    /// The registry file's modification time (epoch seconds), when it exists.
    pub modified: Option<f64>,
    pub cap: CapSetting,
    /// The leases, or the exact reason the file could not be used.
    pub leases: Result<Vec<LeaseRow>, crate::lease::Error>,
    /// Who has held the registry lock for more than a moment (from /proc/locks), if anyone.
    pub lock_holder: Option<LockHolder>,
    /// What the home's state.db says of the leased sessions (None: not a registry file).
    pub sessions: Option<Arc<Contexts>>,
    /// How far behind its answers are, when noticeably (a slow host over --host).
    pub lag: Option<std::time::Duration>,
    /// The leasectl version its host runs, when not this one (same protocol: it answers).
    pub other_version: Option<String>,
    /// Slots in use as the store counts them (etcd: the slot keys under the cap), where
    /// that is not the live leases.
    pub slots_used: Option<u64>,
    /// Who waits in line for a session or a slot (etcd `--wait`), in arrival order.
    pub waiting: Vec<crate::lease::Waiter>,
    /// Members that did not answer while others did (etcd), and why.
    pub not_answering: Vec<(String, String)>,
    /// Leases gone since the last reading that an acquire pruned (one write took them out
    /// and put a lease in; their owners are dead now): not released.
    pub pruned_by_acquire: Vec<String>,
    /// Leases gone since the last reading that the home's audit file names a remover for
    /// (an operator's force-release or prune, a repair), by lease id.
    pub removed_by: Vec<(String, crate::lease::home::remover::Remover)>,
}

/// A process holding a registry lock.
#[derive(Debug, Clone, PartialEq)]
pub struct LockHolder {
    pub pid: u32,
    /// Its command name (`/proc/<pid>/comm`), when readable.
    pub command: Option<String>,
    /// When the worker first saw it hold the lock (epoch seconds): held at least since.
    pub since: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub at: f64,
    /// The tab the first snapshot is expected at: a reload in parts sends the registries
    /// from here on (where the app looks first, instead of scanning every tab).
    pub first: usize,
    /// Part of the console's first read: a profile first seen here was there before the
    /// console opened (not a new one).
    pub initial: bool,
    pub snapshots: Vec<RegistrySnapshot>,
    /// The last part of a full read of many registries (or a look at all of them): once the app has applied it, the
    /// pages the parts used can go back to the system (given back before that, the parts
    /// still queued for the app were freed after, and kept).
    pub large_read_done: bool,
    /// Every owner on this host as now, when only CPU or memory figures moved: the rows
    /// they own show these, their registries not judged again (20,000 registries re-judged
    /// every 5 s for one busy gateway's figures was most of an idle console's work).
    pub owners_moved: Option<Arc<HashMap<u64, Arc<OwnerInfo>>>>,
}

/// The recorder's events from before the console opened, oldest first, and what could
/// not be read of its journals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    pub lines: Vec<HistoryLine>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HistoryLine {
    pub at: f64,
    pub profile: String,
    pub text: String,
}

#[derive(Debug)]
pub struct ActionDone {
    pub location: Location,
    /// What was asked, for the log ("prune", "force-release lease 1a2b3c4d").
    pub what: String,
    pub result: Result<ActionOutcome, Error>,
    /// What the audit record could not be written to (the action stands).
    pub audit_failures: Vec<String>,
}

impl ActionDone {
    /// Who holds the lock, when the action gave up waiting for it.
    pub fn lock_holder(&self) -> Option<u32> {
        match &self.result {
            Err(Error::LockTimeout { holder_pid, .. }) => *holder_pid,
            _ => None,
        }
    }
}

/// How much a log line matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Info,
    Change,
    Warn,
}

/// Work an extension asks for; its runner (`extension::Runner`) does it on the worker thread.
#[derive(Clone)]
pub struct Job(pub Arc<dyn Any + Send + Sync>);

impl Job {
    pub fn new(what: impl Any + Send + Sync) -> Job {
        Job(Arc::new(what))
    }
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl PartialEq for Job {
    fn eq(&self, other: &Job) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Job(..)")
    }
}

/// What a runner reports back to its extension.
pub struct JobDone(pub Box<dyn Any + Send>);

impl std::fmt::Debug for JobDone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobDone(..)")
    }
}
