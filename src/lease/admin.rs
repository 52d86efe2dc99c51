//! The operator's actions: a read-only snapshot, prune, force-release and doctor.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::config::{CapSetting, read_cap};
use super::entry::{Problem, Rule};
use super::error::{Error, InvalidRegistry};
use super::liveness::{Liveness, Prober};
use super::paths::Registry;
use super::{Entry, lock, pyjson, store};

/// One lease as seen now.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseView {
    pub entry: Entry,
    pub liveness: Liveness,
    /// Set on etcd: the key, the owner's host, its etcd lease and what is left of it.
    pub remote: Option<RemoteLease>,
}

/// A lease's etcd side.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteLease {
    pub key: String,
    pub host: String,
    pub etcd_lease_id: i64,
    pub slot: Option<u64>,
    /// The revision of the transaction that wrote it.
    pub fencing_token: i64,
    /// Seconds left on the etcd lease (`None`: gone, or not read).
    pub ttl_left: Option<i64>,
}

impl LeaseView {
    pub fn local(entry: Entry, liveness: Liveness) -> LeaseView {
        LeaseView { entry, liveness, remote: None }
    }
}

/// A read-only look at one registry: never locks, never writes.
pub fn snapshot(reg: &Registry) -> super::backend::Listing {
    use super::backend::LeaseStore;
    super::backend::FileStore::new(reg.clone(), super::DEFAULT_LOCK_TIMEOUT).read()
}

fn judge_all(entries: Vec<Entry>) -> Vec<LeaseView> {
    let mut prober = Prober::new();
    entries
        .into_iter()
        .map(|entry| {
            let liveness = prober.judge(&entry);
            LeaseView::local(entry, liveness)
        })
        .collect()
}

/// What a prune removes besides dead and recycled owners, and whether it only says so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneOptions {
    /// Say what would be removed; change nothing.
    pub dry_run: bool,
    /// Also owners recycled only by a whole-second start time difference (clock step?).
    pub include_clock_step: bool,
    /// Also dead `run` owners whose work still runs (WORK RUNNING): `prune --force`.
    pub include_work_running: bool,
}

/// What an admin write removed (or, on a dry run, would remove).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Removal {
    pub removed: Vec<LeaseView>,
    pub dry_run: bool,
    /// True when at least one removed lease's owner was alive (or could not be proven dead).
    pub live_owner: bool,
    /// Leases a prune kept although they read as recycled: the owner runs and its start
    /// time is off by whole seconds, which a wall-clock step causes (see `--include-clock-step`).
    pub kept_clock_step: Vec<LeaseView>,
    /// A force-release dry run without `--live`: the live owners' leases it names, which
    /// would need `--live` (a real run refuses them all).
    pub needs_live: Vec<LeaseView>,
    /// Leases a prune kept because their dead owner's work still runs (`--force` takes them).
    pub kept_work_running: Vec<LeaseView>,
}

/// The lease `lease_id` when a plain release must not take it: its owner runs on this
/// host and is neither the caller, one of its ancestors nor `owner_pid` (the one the
/// caller says it acts for). Taking a live stranger's lease is force-release's job.
pub fn foreign_live_owner<'a>(views: &'a [LeaseView], lease_id: &str, owner_pid: Option<u64>) -> Option<&'a LeaseView> {
    let view = views.iter().find(|v| v.entry.lease_id() == lease_id)?;
    let pid = view.entry.pid();
    let here = view.remote.as_ref().is_none_or(|r| r.host == super::owner::hostname());
    let foreign = here
        && owner_may_be_alive(view)
        && Some(pid) != owner_pid
        && !super::owner::self_and_ancestors().contains(&pid);
    foreign.then_some(view)
}

/// Remove dead and recycled owners only (an unknown verdict is kept). A "recycled" owner
/// whose start time is off by whole seconds is most likely the same process seen across a
/// wall-clock step: kept, and named, unless `include_clock_step`. (The fence keeps Hermes'
/// rule and prunes it: both must agree on who owns a session.)
pub fn prune(reg: &Registry, opts: PruneOptions, lock_timeout: Duration) -> Result<Removal, Error> {
    let mut suspects = Vec::new();
    let mut working = Vec::new();
    let mut removal = edit(reg, opts.dry_run, lock_timeout, |views| {
        Ok(views
            .iter()
            .map(|v| {
                let suspect = v.liveness.clock_step_suspected() && !opts.include_clock_step;
                if suspect {
                    suspects.push(v.clone());
                }
                let work = matches!(v.liveness, Liveness::WorkRunning { .. });
                if work && !opts.include_work_running {
                    working.push(v.clone());
                }
                (matches!(v.liveness, Liveness::Dead(_) | Liveness::Recycled { .. }) && !suspect)
                    || (work && opts.include_work_running)
            })
            .collect())
    })?;
    removal.kept_clock_step = suspects;
    removal.kept_work_running = working;
    // Removing a lease whose work runs lets a second writer in beside that work.
    removal.live_owner |= removal.removed.iter().any(|v| matches!(v.liveness, Liveness::WorkRunning { .. }));
    Ok(removal)
}

/// Which leases an operator names for force-release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Lease(String),
    Session(String),
}

/// Release leases on an operator's word. A live (or unprovable) owner's lease is
/// refused unless `allow_live`, and the result says when an owner was alive.
pub fn force_release(
    reg: &Registry,
    target: &Target,
    allow_live: bool,
    dry_run: bool,
    lock_timeout: Duration,
) -> Result<Removal, Error> {
    let path = reg.path();
    let mut needs_live = Vec::new();
    let mut removal = edit(reg, dry_run, lock_timeout, |views| {
        let mut chosen: Vec<bool> = views
            .iter()
            .map(|v| match target {
                Target::Lease(id) => v.entry.lease_id() == id,
                Target::Session(s) => v.entry.session_id() == s,
            })
            .collect();
        if !chosen.contains(&true) {
            return Err(Error::NotFound(match target {
                Target::Lease(id) => format!("no lease {id} in {}", path.display()),
                Target::Session(s) => format!("no lease holds session {s} in {}", path.display()),
            }));
        }
        let live: Vec<&LeaseView> =
            views.iter().zip(&chosen).filter(|(v, c)| **c && owner_may_be_alive(v)).map(|(v, _)| v).collect();
        // A dry run shows the plan: what goes, and what would need --live.
        if !live.is_empty() && !allow_live && dry_run {
            needs_live = live.into_iter().cloned().collect();
            for (c, v) in chosen.iter_mut().zip(views) {
                *c = *c && !owner_may_be_alive(v);
            }
            return Ok(chosen);
        }
        if !live.is_empty() && !allow_live {
            let who: Vec<String> = live
                .iter()
                .map(|v| {
                    format!(
                        "lease {} (session {}, pid {}, {})",
                        v.entry.lease_id(),
                        v.entry.session_id(),
                        v.entry.pid(),
                        v.liveness.explain()
                    )
                })
                .collect();
            return Err(Error::LiveOwner(format!(
                "refusing to release a live owner's lease: {}. A live owner keeps writing to its session; \
                 removing its lease lets a second writer in. Pass --live to do it anyway.",
                who.join("; ")
            )));
        }
        Ok(chosen)
    })?;
    removal.needs_live = needs_live;
    Ok(removal)
}

/// Alive, or not provably dead: removing its lease could let a second writer in.
pub fn owner_may_be_alive(v: &LeaseView) -> bool {
    may_be_alive(&v.liveness)
}

/// The verdicts that forbid removing a lease without an explicit override.
pub fn may_be_alive(l: &Liveness) -> bool {
    matches!(l, Liveness::Alive | Liveness::Unknown(_) | Liveness::WorkRunning { .. })
}

/// Under the lock: read strictly, judge, let `choose` pick what goes, write if anything does.
fn edit(
    reg: &Registry,
    dry_run: bool,
    lock_timeout: Duration,
    choose: impl FnOnce(&[LeaseView]) -> Result<Vec<bool>, Error>,
) -> Result<Removal, Error> {
    let path = reg.path();
    // A dry run only looks, and a reader that only looks needs no lock (the registry is
    // replaced whole by rename): it creates nothing, not even the lock file.
    let guard = if dry_run { None } else { Some(lock::lock(&reg.lock_path(), lock_timeout)?) };
    let file = store::read(&path)?;
    let views = judge_all(file.entries);
    let chosen = choose(&views)?;
    let (mut removed, mut kept) = (Vec::new(), Vec::new());
    for (view, go) in views.into_iter().zip(chosen) {
        if go { removed.push(view) } else { kept.push(view.entry) }
    }
    let live_owner = removed.iter().any(owner_may_be_alive);
    if let Some(guard) = guard.filter(|_| !removed.is_empty()) {
        store::write(&guard, &path, &store::RegistryFile { entries: kept, extra: file.extra })?;
    }
    Ok(Removal { removed, dry_run, live_owner, ..Removal::default() })
}

/// Everything `doctor` checks in one registry.
#[derive(Debug, Clone)]
pub struct DoctorReport {
    pub registry: Registry,
    pub exists: bool,
    pub cap: CapSetting,
    /// Strict-validation problems, every one, with rule and entry.
    pub problems: Vec<Problem>,
    /// Indexes of entries whose session id is `""` (Hermes can write these; they block every acquire).
    pub empty_session_ids: Vec<usize>,
    /// Sessions held by more than one live entry.
    pub conflicts: BTreeMap<String, Vec<LeaseView>>,
    /// Dead and recycled owners still listed (a prune removes them).
    pub stale: Vec<LeaseView>,
    /// Temp files older than a few seconds: a crashed writer's leftovers.
    pub leftover_temp_files: Vec<PathBuf>,
    /// Who holds the registry lock right now, if anyone.
    pub lock_holder: Option<u32>,
    /// The lock file is a symlink, FIFO or anything but a regular file: no acquire can work.
    pub lock_problem: Option<String>,
    /// The registry is a symlink (to this target): every write refuses to go through it.
    pub symlink_to: Option<PathBuf>,
    /// Leases whose owner is alive.
    pub live: usize,
    /// More live leases than the cap allows (the cap was lowered, or a writer ignored it).
    pub over_cap: bool,
    /// Live owners whose session has ended or gone idle (state.db), each with the reason.
    /// Worth a look, not a problem: a suspect is still a live owner.
    pub leak_suspects: Vec<(LeaseView, String)>,
    /// Why state.db could not tell (no file, locked...), when it could not.
    pub context_unknown: Option<String>,
    /// A bad `leasectl.idle_threshold` in config.yaml, ignored.
    pub idle_warning: Option<String>,
}

impl DoctorReport {
    /// True when something needs an operator (doctor exits non-zero).
    pub fn has_problems(&self) -> bool {
        !self.problems.is_empty()
            || !self.conflicts.is_empty()
            || !self.leftover_temp_files.is_empty()
            || self.lock_problem.is_some()
            || self.symlink_to.is_some()
            || self.over_cap
    }
}

/// Temp files younger than this may belong to a write in progress.
const TEMP_GRACE: Duration = Duration::from_secs(10);

/// Inspect a registry without locking or writing.
pub fn doctor(reg: &Registry) -> DoctorReport {
    doctor_with(reg, None)
}

/// [`doctor`], with leak suspects judged against `idle` (else the home's config).
pub fn doctor_with(reg: &Registry, idle: Option<Duration>) -> DoctorReport {
    let path = reg.path();
    let mut report = DoctorReport {
        registry: reg.clone(),
        exists: path.exists(),
        cap: read_cap(&reg.config_path()),
        problems: vec![],
        empty_session_ids: vec![],
        conflicts: BTreeMap::new(),
        stale: vec![],
        leftover_temp_files: vec![],
        lock_holder: lock::lock_holder(&reg.lock_path()),
        lock_problem: match std::fs::symlink_metadata(reg.lock_path()) {
            Ok(m) if m.is_file() => None,
            Ok(m) if m.file_type().is_symlink() => Some("the lock file is a symlink (leasectl refuses it)".into()),
            Ok(_) => Some("the lock file is not a regular file (a FIFO, socket, device or directory)".into()),
            Err(_) => None,
        },
        symlink_to: std::fs::symlink_metadata(&path)
            .ok()
            .filter(|m| m.file_type().is_symlink())
            // Resolved, so the fix can be pasted from anywhere; a dangling link as written.
            .map(|_| std::fs::canonicalize(&path).or_else(|_| std::fs::read_link(&path)).unwrap_or_default()),
        live: 0,
        over_cap: false,
        leak_suspects: vec![],
        context_unknown: None,
        idle_warning: None,
    };
    match store::read_bytes(&path) {
        Err(Error::Invalid(InvalidRegistry { problems, .. })) => report.problems = problems,
        Err(other) => report.problems.push(Problem {
            rule: Rule::Unreadable,
            entry_index: None,
            lease_id: None,
            detail: other.to_string(),
        }),
        Ok(None) => {}
        Ok(Some(bytes)) => match store::parse(&bytes) {
            Err(problems) => {
                report.empty_session_ids = empty_session_ids(&bytes);
                report.problems = problems;
            }
            Ok(file) => {
                let views = judge_all(file.entries);
                let mut by_session: BTreeMap<String, Vec<LeaseView>> = BTreeMap::new();
                for v in &views {
                    if v.liveness == Liveness::Alive {
                        by_session.entry(v.entry.session_id().to_owned()).or_default().push(v.clone());
                    }
                }
                report.live = by_session.values().map(Vec::len).sum();
                report.over_cap = report.cap.cap.is_some_and(|c| report.live as u64 > c);
                report.conflicts = by_session.into_iter().filter(|(_, v)| v.len() > 1).collect();
                let (threshold, warning) = super::context::idle_threshold(&reg.home, idle);
                report.idle_warning = warning;
                let live: Vec<&LeaseView> = views.iter().filter(|v| v.liveness == Liveness::Alive).collect();
                let ids: Vec<&str> = live.iter().map(|v| v.entry.session_id()).collect();
                match super::context::read(&reg.home, &ids) {
                    super::context::Contexts::Unknown(why) => report.context_unknown = Some(why),
                    contexts => {
                        let at = super::now();
                        for v in live {
                            let owner = super::owner::command_name(v.entry.pid()).unwrap_or_else(|| "-".into());
                            if let Some(reason) = super::context::leak_reason(
                                v,
                                contexts.get(v.entry.session_id()),
                                threshold,
                                at,
                                &owner,
                            ) {
                                report.leak_suspects.push((v.clone(), reason));
                            }
                        }
                    }
                }
                report.stale = views
                    .into_iter()
                    .filter(|v| matches!(v.liveness, Liveness::Dead(_) | Liveness::Recycled { .. }))
                    .collect();
            }
        },
    }
    report.leftover_temp_files = store::leftover_temp_files(&reg.runtime_dir())
        .into_iter()
        .filter(|p| {
            std::fs::metadata(p)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= TEMP_GRACE)
        })
        .collect();
    report
}

fn empty_session_ids(bytes: &[u8]) -> Vec<usize> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if store::too_many_values(bytes) {
        return vec![];
    }
    let Ok(value) = std::str::from_utf8(bytes).map_err(|_| ()).and_then(|t| pyjson::parse(t).map_err(|_| ())) else {
        return vec![];
    };
    let list = match &value {
        serde_json::Value::Array(l) => l,
        serde_json::Value::Object(m) => match m.get("entries") {
            Some(serde_json::Value::Array(l)) => l,
            _ => return vec![],
        },
        _ => return vec![],
    };
    list.iter()
        .enumerate()
        .filter(|(_, e)| e.get("session_id").and_then(|s| s.as_str()) == Some(""))
        .map(|(i, _)| i)
        .collect()
}
