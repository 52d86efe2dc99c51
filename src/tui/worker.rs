//! The console's I/O: reads registries, re-judges owners, runs operator actions
//! through the core under the lock. Runs on its own thread so the screen never waits.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use super::event::{ActionDone, ActionOutcome, DemoDone, Effect, Event, LeaseRow, Loaded, RegistrySnapshot};
use crate::demo::{Playground, tour};
use crate::lease::config::{CapSetting, read_cap};
use crate::lease::owner::OwnerProbe;
use crate::lease::{self, Entry, Error, Prober, Registry, paths, store};

/// Which registries the worker reads.
#[derive(Debug, Clone)]
pub struct Scope {
    pub registries: Vec<Registry>,
    /// When set, `<root>/profiles/*` are discovered on every reload.
    pub discover_root: Option<PathBuf>,
}

struct Known {
    registry: Registry,
    exists: bool,
    modified: Option<f64>,
    cap: CapSetting,
    entries: Result<Vec<Arc<Entry>>, String>,
}

pub struct Worker {
    scope: Scope,
    /// The demo's playground (owner processes, sandbox), when running `leasectl demo`.
    playground: Option<Playground>,
    known: Vec<Known>,
    owners: OwnerProbe,
    lock_timeout: Duration,
    lock_checked: Option<Instant>,
    /// Last check's holder per lock file, and whether the check before saw it too.
    lock_seen: HashMap<PathBuf, (u32, bool)>,
    /// Set when the console shows etcd instead of registry files.
    #[cfg(feature = "etcd")]
    etcd: Option<super::worker_etcd::EtcdWorker>,
}

/// How often a console looks at `/proc/locks`.
const LOCK_CHECK_EVERY: Duration = Duration::from_secs(5);

impl Worker {
    pub fn new(scope: Scope, lock_timeout: Duration, playground: Option<Playground>) -> Worker {
        Worker {
            scope,
            playground,
            known: vec![],
            owners: OwnerProbe::new(),
            lock_timeout,
            lock_checked: None,
            lock_seen: HashMap::new(),
            #[cfg(feature = "etcd")]
            etcd: None,
        }
    }

    /// Read and act on etcd instead of registry files.
    #[cfg(feature = "etcd")]
    pub fn on_etcd(mut self, config: crate::lease::etcd::EtcdConfig) -> Worker {
        self.etcd = Some(super::worker_etcd::EtcdWorker::new(config));
        self
    }

    /// Lock holders seen on two checks in a row (a lock is normally held for
    /// milliseconds). `/proc/locks` is read at most every `LOCK_CHECK_EVERY`: reading it
    /// makes the kernel synchronize RCU, which slows every flock on the machine meanwhile.
    fn stuck_locks(&mut self) -> Vec<Option<u32>> {
        let due = self.lock_checked.is_none_or(|t| t.elapsed() >= LOCK_CHECK_EVERY);
        if due {
            self.lock_checked = Some(Instant::now());
            let paths: Vec<PathBuf> = self.known.iter().map(|k| k.registry.lock_path()).collect();
            let holders = lease::lock::lock_holders(&paths);
            let mut seen = HashMap::new();
            for (path, holder) in paths.into_iter().zip(holders) {
                if let Some(pid) = holder {
                    let confirmed = self.lock_seen.get(&path).is_some_and(|(p, _)| *p == pid);
                    seen.insert(path, (pid, confirmed));
                }
            }
            self.lock_seen = seen;
        }
        self.known
            .iter()
            .map(|k| match self.lock_seen.get(&k.registry.lock_path()) {
                Some((pid, true)) => Some(*pid),
                _ => None,
            })
            .collect()
    }

    /// Run demo actions (or a tour step) on the playground.
    pub fn demo(&mut self, effect: &Effect) -> Option<DemoDone> {
        let pg = self.playground.as_mut()?;
        let (actions, tour_step) = match effect {
            Effect::Demo(a) => (vec![a.clone()], None),
            Effect::Tour(i) => {
                let steps = tour::steps();
                let step = steps.get(*i)?;
                (step.actions.clone(), Some((*i, step.title.to_owned(), step.why.to_owned())))
            }
            _ => return None,
        };
        let outcomes = actions.iter().map(|a| pg.run(a)).collect();
        Some(DemoDone { outcomes, owners: pg.owners(), tour_step })
    }

    fn registries(&self) -> Vec<Registry> {
        let mut regs = self.scope.registries.clone();
        if let Some(root) = &self.scope.discover_root {
            for r in paths::all_registries(root) {
                if !regs.contains(&r) {
                    regs.push(r);
                }
            }
        }
        regs
    }

    /// Re-read every registry file and config.
    pub fn reload(&mut self) -> Loaded {
        #[cfg(feature = "etcd")]
        if let Some(etcd) = self.etcd.as_mut() {
            return etcd.reload(&mut self.owners);
        }
        self.known = self
            .registries()
            .into_iter()
            .map(|registry| {
                let path = registry.path();
                let entries = store::read(&path)
                    .map(|f| f.entries.into_iter().map(Arc::new).collect())
                    .map_err(|e| e.to_string());
                let modified = std::fs::metadata(&path)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_secs_f64());
                Known {
                    exists: modified.is_some() || path.exists(),
                    modified,
                    cap: read_cap(&registry.config_path()),
                    entries,
                    registry,
                }
            })
            .collect();
        self.judge()
    }

    /// Re-judge the owners already known, reading no registry file.
    pub fn relive(&mut self) -> Loaded {
        #[cfg(feature = "etcd")]
        if let Some(etcd) = self.etcd.as_mut() {
            return etcd.judge(&mut self.owners);
        }
        if self.known.is_empty() {
            return self.reload();
        }
        self.judge()
    }

    fn judge(&mut self) -> Loaded {
        let mut prober = Prober::new();
        let pids: Vec<u64> =
            self.known.iter().filter_map(|k| k.entries.as_ref().ok()).flatten().map(|e| e.pid()).collect();
        let owners: HashMap<u64, Arc<lease::owner::OwnerInfo>> =
            self.owners.infos(&pids).into_iter().map(|(pid, o)| (pid, Arc::new(o))).collect();
        let holders = self.stuck_locks();
        let snapshots = self
            .known
            .iter()
            .zip(holders)
            .map(|(k, lock_holder)| RegistrySnapshot {
                lock_holder,
                remote: None,
                registry: k.registry.clone(),
                exists: k.exists,
                modified: k.modified,
                cap: k.cap.clone(),
                leases: k.entries.as_ref().map_err(Clone::clone).map(|entries| {
                    entries
                        .iter()
                        .map(|e| LeaseRow {
                            liveness: prober.judge(e),
                            owner: owners.get(&e.pid()).cloned(),
                            entry: Arc::clone(e),
                            ttl_left: None,
                        })
                        .collect()
                }),
            })
            .collect();
        Loaded { at: lease::now(), snapshots }
    }

    /// Run an operator action through the core.
    pub fn act(&mut self, effect: &Effect) -> Option<Event> {
        #[cfg(feature = "etcd")]
        if let Some(etcd) = self.etcd.as_mut() {
            return etcd.act(effect);
        }
        let (registry, what, result) = match effect {
            Effect::Prune { registry } => (
                registry.clone(),
                "prune".to_owned(),
                lease::prune(registry, false, self.lock_timeout).map(ActionOutcome::Removed),
            ),
            Effect::ForceRelease { registry, target, allow_live } => {
                let what = match target {
                    lease::Target::Lease(id) => {
                        format!("force-release lease {}", id.chars().take(8).collect::<String>())
                    }
                    lease::Target::Session(s) => format!("force-release session {s}"),
                };
                let result = lease::force_release(registry, target, *allow_live, false, self.lock_timeout);
                (registry.clone(), what, result.map(ActionOutcome::Removed))
            }
            Effect::PlanRepair { registry } => {
                let result = lease::repair::repair(registry, true, self.lock_timeout)
                    .map(|r| {
                        if r.needed {
                            plan_lines(&r.plan)
                        } else {
                            vec!["the registry is valid: nothing to repair".into()]
                        }
                    })
                    .map_err(|e| e.to_string());
                return Some(Event::RepairPlanned { registry: registry.clone(), result });
            }
            Effect::Repair { registry } => {
                let result = lease::repair::repair(registry, false, self.lock_timeout).map(|r| {
                    let backup = r.backup.map(|b| b.display().to_string()).unwrap_or_else(|| "-".into());
                    ActionOutcome::Repaired(format!(
                        "kept {} lease(s), dropped {}, re-keyed {}; old bytes in {backup}",
                        r.plan.kept.len(),
                        r.plan.dropped.len(),
                        r.plan.rekeyed.len()
                    ))
                });
                (registry.clone(), "repair".to_owned(), result)
            }
            _ => return None,
        };
        let lock_holder = match &result {
            Err(Error::LockTimeout { holder_pid, .. }) => *holder_pid,
            _ => None,
        };
        // What the action learned about the lock stands until the next check: a timeout
        // names the holder at once; a success proves the lock free.
        match (lock_holder, &result) {
            (Some(pid), _) => {
                self.lock_seen.insert(registry.lock_path(), (pid, true));
            }
            (None, Ok(_)) => {
                self.lock_seen.remove(&registry.lock_path());
            }
            _ => {}
        }
        Some(Event::ActionDone(ActionDone { registry, what, result: result.map_err(|e| e.to_string()), lock_holder }))
    }
}

/// A repair plan as lines for the confirmation dialog.
fn plan_lines(plan: &lease::repair::RepairPlan) -> Vec<String> {
    let mut out = vec![format!("keep {} valid lease(s)", plan.kept.len())];
    if plan.salvaged {
        out.push(format!("the JSON is broken: {} complete entr(ies) salvaged, the rest is unreadable", plan.found));
    }
    out.extend(
        plan.dropped
            .iter()
            .map(|d| format!("drop entry {} (lease {}): {}", d.index, d.lease_id.as_deref().unwrap_or("-"), d.why)),
    );
    out.extend(plan.rekeyed.iter().map(|(a, b)| format!("live duplicate {a}: kept as {b}")));
    out
}

/// Serve effects until the channel closes. Queued reloads collapse into one.
/// The worker owns the demo's playground: join it so owners are killed and the
/// sandbox removed before the process exits.
pub fn spawn(mut worker: Worker, effects: Receiver<Effect>, events: Sender<Event>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while let Ok(first) = effects.recv() {
            let mut batch = vec![first];
            batch.extend(effects.try_iter());
            let mut reload = false;
            let mut relive = false;
            for effect in &batch {
                match effect {
                    Effect::Reload => reload = true,
                    Effect::Relive => relive = true,
                    Effect::Quit => return,
                    demo @ (Effect::Demo(_) | Effect::Tour(_)) => {
                        if let Some(done) = worker.demo(demo) {
                            reload = true;
                            if events.send(Event::DemoDone(done)).is_err() {
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
            let loaded = if reload {
                worker.reload()
            } else if relive {
                worker.relive()
            } else {
                continue;
            };
            if events.send(Event::Loaded(loaded)).is_err() {
                return;
            }
        }
    })
}
