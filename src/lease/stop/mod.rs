//! `stop`: end a lease's owner process, then leave the registry clean. The plan says what
//! will be ended (`plan`), the run ends it race-free and removes what it leaves (`run`):
//! its leases are gone by its own release, or pruned once it is dead.

mod plan;
mod run;

use serde::{Deserialize, Serialize};
use std::time::Duration;

pub(crate) use plan::{held_by, plan};
pub(crate) use run::run;

use super::owners::owner::OwnerInfo;
use super::view::{LeaseView, Target};

/// How long an owner has after SIGTERM before SIGKILL, unless told.
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(5);
/// How long SIGKILL is given to end a process (one in uninterruptible sleep can outlast it).
pub(crate) const KILL_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy)]
pub struct StopOptions {
    /// From SIGTERM to SIGKILL.
    pub grace: Duration,
}

impl Default for StopOptions {
    fn default() -> StopOptions {
        StopOptions { grace: DEFAULT_GRACE }
    }
}

/// What a stop will end: each owner process of the leases named, as seen at the look.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopPlan {
    pub target: Target,
    /// Where the owners run (this host's name, where the plan was made).
    pub host: String,
    pub owners: Vec<OwnerToStop>,
}

/// One owner process: named by pid and start time, as its leases record it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnerToStop {
    /// Its pid on this host: the process signalled.
    pub pid: u64,
    /// The pid its leases record, where that is another (an owner in a container's pid
    /// namespace records the pid it has there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_pid: Option<u64>,
    /// Its start time (epoch seconds), as the lease records it and /proc showed it.
    pub start_time: f64,
    pub uid: u32,
    pub info: Option<OwnerInfo>,
    /// The leases named that it holds.
    pub leases: Vec<LeaseView>,
    /// Its other leases in this registry: they end with it.
    pub also_holds: Vec<LeaseView>,
    /// The processes it started (its children and theirs), as seen at the look.
    pub family: Vec<Member>,
    /// What Hermes' state.db says of its sessions, where it says anything.
    pub sessions: Vec<SessionNote>,
}

impl OwnerToStop {
    /// The pid its leases record.
    pub fn recorded(&self) -> u64 {
        self.recorded_pid.unwrap_or(self.pid)
    }

    /// Its pid for people: `pid 14653`, and for an owner in a container the pid its leases
    /// record there too: `pid 14653 (pid 1 in its pid namespace)`.
    pub fn pid_text(&self) -> String {
        match self.recorded_pid {
            Some(recorded) => format!("pid {} (pid {recorded} in its pid namespace)", self.pid),
            None => format!("pid {}", self.pid),
        }
    }

    /// What kind of process it is (the process, not one of its chats), from its first
    /// lease and its command line.
    pub fn kind(&self) -> super::owners::kind::OwnerKind {
        use super::owners::kind::OwnerKind;
        let cmdline = self.info.as_ref().map(|i| i.cmdline.as_slice());
        self.all_leases().next().map_or(OwnerKind::Other, |v| OwnerKind::of(&v.entry, cmdline).process())
    }

    /// Every lease it holds here, named first.
    pub fn all_leases(&self) -> impl Iterator<Item = &LeaseView> {
        self.leases.iter().chain(&self.also_holds)
    }
}

/// A process of an owner's family.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub pid: u32,
    pub name: String,
}

/// A session as Hermes' state.db has it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionNote {
    pub session_id: String,
    pub title: Option<String>,
    pub last_activity: Option<f64>,
    pub ended_at: Option<f64>,
    /// For a gateway's chat: whether a turn runs for it (state.db's routing row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_turn: Option<bool>,
}

/// What a stop did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stopped {
    pub owners: Vec<OwnerStopped>,
    /// What could not be done after the owners ended (a lease left, a write refused).
    pub warnings: Vec<String>,
    /// What went in the home's other registries (the ended owners' leases there), said
    /// by the caller that cleaned them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elsewhere: Vec<String>,
}

impl Stopped {
    /// Every lease that went, with how.
    pub fn leases_gone(&self) -> impl Iterator<Item = &LeaseGone> {
        self.owners.iter().flat_map(|o| &o.leases).filter(|l| l.how != LeaseEnd::Left)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnerStopped {
    pub pid: u64,
    pub start_time: f64,
    pub name: Option<String>,
    /// Each signal sent, with seconds after the first.
    pub signals: Vec<SignalSent>,
    pub ending: OwnerEnding,
    /// Seconds from the first signal to its end, when it ended after one.
    pub took: Option<f64>,
    /// Its family that ended with it, and what runs on.
    pub family_ended: Vec<Member>,
    pub family_left: Vec<Member>,
    pub leases: Vec<LeaseGone>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalSent {
    pub signal: String,
    pub after: f64,
}

/// How an owner came to its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OwnerEnding {
    /// It ended on SIGTERM, within the grace period.
    Terminated,
    /// It outlasted the grace period and ended on SIGKILL.
    Killed,
    /// It ended by itself before any signal: nothing was signalled.
    EndedBefore,
    /// It ended by itself before any signal, and its pid runs another process now
    /// (started at `actual`), which was not signalled either.
    Replaced { actual: f64 },
    /// Its leases were gone when it was about to be signalled (it released them): it was
    /// left running.
    ReleasedBefore,
    /// Not ended: why (still running after SIGKILL, a signal refused).
    NotEnded(String),
}

impl OwnerEnding {
    pub fn ended(&self) -> bool {
        !matches!(self, OwnerEnding::NotEnded(_) | OwnerEnding::ReleasedBefore)
    }

    /// The word JSON and the audit record carry.
    pub fn name(&self) -> &'static str {
        match self {
            OwnerEnding::Terminated => "terminated",
            OwnerEnding::Killed => "killed",
            OwnerEnding::EndedBefore => "ended-before",
            OwnerEnding::Replaced { .. } => "replaced",
            OwnerEnding::ReleasedBefore => "released-before",
            OwnerEnding::NotEnded(_) => "not-ended",
        }
    }
}

/// One of an owner's leases, and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseGone {
    pub view: LeaseView,
    pub how: LeaseEnd,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeaseEnd {
    /// Its owner released it as it ended.
    Released,
    /// Pruned by the stop, its owner dead.
    Pruned,
    /// Still there (its owner still runs, or the write failed: said in the warnings).
    Left,
}

impl LeaseEnd {
    pub fn name(&self) -> &'static str {
        match self {
            LeaseEnd::Released => "released",
            LeaseEnd::Pruned => "pruned",
            LeaseEnd::Left => "left",
        }
    }
}

/// A short time as people read it: `40 ms`, `5.2 s`.
pub(crate) fn seconds(t: f64) -> String {
    if t < 0.001 {
        "under 1 ms".into()
    } else if t < 1.0 {
        format!("{:.0} ms", t * 1000.0)
    } else {
        format!("{t:.1} s")
    }
}

/// What a stop did to one owner, in one line: how it ended, and its leases.
pub(crate) fn said(o: &OwnerStopped) -> String {
    let name = o.name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
    let took = o.took.map(seconds).unwrap_or_default();
    let how = match &o.ending {
        OwnerEnding::Terminated => format!("ended by SIGTERM after {took}"),
        OwnerEnding::Killed => {
            let kill = o.signals.iter().find(|s| s.signal == "SIGKILL").map_or(0.0, |s| s.after);
            format!("ended by SIGKILL {took} after SIGTERM (it outlasted SIGTERM for {})", seconds(kill))
        }
        OwnerEnding::EndedBefore => "had ended by itself before the signal: nothing signalled".into(),
        OwnerEnding::Replaced { actual } => format!(
            "had ended by itself before the signal, and its pid runs another process now (started {} ago): nothing \
             signalled",
            super::words::human::duration(super::now() - actual)
        ),
        OwnerEnding::ReleasedBefore => {
            "had released its lease before the signal: left running, nothing signalled".into()
        }
        OwnerEnding::NotEnded(why) => format!("NOT ENDED: {why}"),
    };
    let leases: Vec<String> = o
        .leases
        .iter()
        .map(|l| {
            let id: String = l.view.entry.lease_id().chars().take(8).collect();
            let how = match (&o.ending, &l.how) {
                (OwnerEnding::ReleasedBefore, LeaseEnd::Released) => "released by its owner before the signal",
                (_, LeaseEnd::Released) => "released by its owner as it ended",
                (_, LeaseEnd::Pruned) => "removed (its owner dead)",
                (_, LeaseEnd::Left) => "LEFT in the registry",
            };
            format!("lease {id} (session {}) {how}", l.view.entry.session_id())
        })
        .collect();
    let family = match o.family_ended.is_empty() {
        true => String::new(),
        false => {
            let m: Vec<String> = o.family_ended.iter().map(|m| format!("{} ({})", m.pid, m.name)).collect();
            format!("; with it ended what it started: {}", m.join(", "))
        }
    };
    format!("pid {}{name} {how}{family}; {}", o.pid, leases.join("; "))
}

/// Why a lease's owner may not or cannot be ended from here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopRefusal {
    pub lease_id: String,
    pub session_id: String,
    pub pid: u64,
    pub why: WhyNot,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WhyNot {
    /// Its owner is dead already: prune's job.
    Dead { verdict: String },
    /// Its pid runs another process now: that one is never signalled.
    Recycled { verdict: String },
    /// `/proc` hides the owner from this user.
    Hidden { why: String },
    /// Its owner cannot be judged (its start time unreadable).
    Unknown { why: String },
    /// Another user's process, which this user may not signal.
    NotPermitted { uid: u32, user: Option<String> },
    /// The owner runs on another host (etcd).
    OtherHost { host: String },
    /// The owner is gone but the work it started runs on.
    WorkRunning { verdict: String },
    /// The owner is this leasectl or one of its parents.
    Itself,
}

impl WhyNot {
    /// The word JSON carries.
    pub fn name(&self) -> &'static str {
        match self {
            WhyNot::Dead { .. } => "dead",
            WhyNot::Recycled { .. } => "recycled",
            WhyNot::Hidden { .. } => "hidden",
            WhyNot::Unknown { .. } => "unknown",
            WhyNot::NotPermitted { .. } => "not-permitted",
            WhyNot::OtherHost { .. } => "other-host",
            WhyNot::WorkRunning { .. } => "work-running",
            WhyNot::Itself => "itself",
        }
    }
}

impl std::fmt::Display for StopRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use super::words::hint::{command, command_via};
        let id: String = self.lease_id.chars().take(8).collect();
        let lease = format!("lease {id} (session {}, pid {})", self.session_id, self.pid);
        let again = ["stop", self.lease_id.as_str()];
        match &self.why {
            WhyNot::Dead { verdict } => write!(
                f,
                "{lease}: its owner is not running ({verdict}); nothing to end. {} removes its lease",
                command(&["prune"])
            ),
            WhyNot::Recycled { verdict } => write!(
                f,
                "{lease}: {verdict}; that process is not the owner and is never signalled. The owner is gone: {} \
                 removes its lease",
                command(&["prune"])
            ),
            WhyNot::Hidden { why } => write!(
                f,
                "{lease}: its owner cannot be seen from this user ({why}); nothing is signalled that cannot be told \
                 from another process. As root: {}",
                command_via(&["sudo"], &again)
            ),
            WhyNot::Unknown { why } => {
                write!(f, "{lease}: its owner cannot be told from another process ({why}); nothing signalled")
            }
            WhyNot::NotPermitted { uid, user } => {
                let who = user.clone().unwrap_or_else(|| format!("#{uid}"));
                write!(
                    f,
                    "{lease}: its owner runs as user {} (uid {uid}), whom this user may not signal. As that user \
                     (or root): {}",
                    super::words::human::escape(&who),
                    command_via(&["sudo", "-u", &who], &again)
                )
            }
            WhyNot::OtherHost { host } => write!(
                f,
                "{lease}: its owner runs on host {}; a process is ended where it runs: {}",
                super::words::human::escape(host),
                command_via(&["ssh", host], &again)
            ),
            WhyNot::WorkRunning { verdict } => write!(
                f,
                "{lease}: {verdict}; stop ends a live owner, and this one is gone. End that work's processes, or \
                 {} removes the lease beside them",
                command(&["prune", "--force"])
            ),
            WhyNot::Itself => {
                write!(f, "{lease}: its owner is this leasectl or a parent of it; it does not end itself")
            }
        }
    }
}

/// Every refusal of a stop, each said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CannotStop {
    pub refusals: Vec<StopRefusal>,
}

impl std::fmt::Display for CannotStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let each: Vec<String> = self.refusals.iter().map(ToString::to_string).collect();
        write!(f, "not stopped, nothing signalled: {}", each.join("; "))
    }
}
