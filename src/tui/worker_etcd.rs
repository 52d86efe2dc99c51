//! The console worker's I/O on etcd: list the prefix, read each lease's TTL, and run
//! the operator's actions through the etcd fence. Same snapshots as on files.

use std::collections::HashMap;
use std::sync::Arc;

use super::event::{ActionDone, ActionOutcome, Effect, Event, LeaseRow, Loaded, RegistrySnapshot};
use crate::lease::config::CapSetting;
use crate::lease::etcd::{Etcd, EtcdConfig, Held, fence, hostname};
use crate::lease::owner::OwnerProbe;
use crate::lease::{self, Entry, Prober, Registry};

/// TTLs are read one request per lease: at most this many per tick.
const TTL_READS_PER_TICK: usize = 256;

struct Known {
    entry: Arc<Entry>,
    host: String,
    etcd_lease_id: i64,
}

pub struct EtcdWorker {
    registry: Registry,
    config: EtcdConfig,
    etcd: Result<Etcd, String>,
    host: String,
    known: Result<Vec<Known>, String>,
}

impl EtcdWorker {
    pub fn new(config: EtcdConfig) -> EtcdWorker {
        EtcdWorker {
            registry: super::etcd_registry(&config),
            etcd: Etcd::connect(&config).map_err(|e| e.to_string()),
            config,
            host: hostname(),
            known: Ok(vec![]),
        }
    }

    /// List the prefix again, then judge. A client that could not be set up is tried
    /// again, so the console recovers once etcd is back.
    pub fn reload(&mut self, owners: &mut OwnerProbe) -> Loaded {
        if self.etcd.is_err() {
            self.etcd = Etcd::connect(&self.config).map_err(|e| e.to_string());
        }
        self.known = match &self.etcd {
            Err(e) => Err(e.clone()),
            Ok(etcd) => etcd.list().map_err(|e| e.to_string()).map(|listing| {
                listing
                    .leases
                    .into_iter()
                    .map(|h: Held| Known { host: h.host, etcd_lease_id: h.etcd_lease_id, entry: Arc::new(h.entry) })
                    .collect()
            }),
        };
        self.judge(owners)
    }

    /// Fresh TTLs and local owner verdicts for the leases already listed.
    pub fn judge(&mut self, owners: &mut OwnerProbe) -> Loaded {
        let leases = match (&self.known, &self.etcd) {
            (Err(e), _) | (Ok(_), Err(e)) => Err(e.clone()),
            (Ok(known), Ok(etcd)) => {
                let ids: Vec<i64> = known.iter().take(TTL_READS_PER_TICK).map(|k| k.etcd_lease_id).collect();
                match etcd.ttls(&ids) {
                    Err(e) => Err(e.to_string()),
                    Ok(ttls) => Ok(self.rows(known, &ttls, owners)),
                }
            }
        };
        Loaded {
            at: lease::now(),
            snapshots: vec![RegistrySnapshot {
                registry: self.registry.clone(),
                exists: true,
                modified: None,
                cap: CapSetting::default(),
                leases,
                lock_holder: None,
                remote: Some(self.config.location()),
            }],
        }
    }

    fn rows(&self, known: &[Known], ttls: &HashMap<i64, Option<i64>>, owners: &mut OwnerProbe) -> Vec<LeaseRow> {
        // Process details only for owners on this host: a pid elsewhere means nothing here.
        let local: Vec<u64> = known.iter().filter(|k| k.host == self.host).map(|k| k.entry.pid()).collect();
        let infos: HashMap<u64, Arc<lease::owner::OwnerInfo>> =
            owners.infos(&local).into_iter().map(|(pid, o)| (pid, Arc::new(o))).collect();
        let mut prober = Prober::new();
        known
            .iter()
            .map(|k| {
                let here = k.host == self.host;
                LeaseRow {
                    liveness: if here { prober.judge(&k.entry) } else { lease::Liveness::Alive },
                    owner: if here { infos.get(&k.entry.pid()).cloned() } else { None },
                    entry: Arc::clone(&k.entry),
                    ttl_left: Some(ttls.get(&k.etcd_lease_id).copied().flatten().unwrap_or(-1)),
                }
            })
            .collect()
    }

    /// An operator action on etcd: force-release revokes leases; prune revokes those of
    /// dead owners on this host; there is no file to repair.
    pub fn act(&mut self, effect: &Effect) -> Option<Event> {
        let etcd = match &self.etcd {
            Ok(e) => e,
            Err(e) => {
                let e = e.clone();
                return Some(self.done("action", Err(e)));
            }
        };
        match effect {
            Effect::Prune { .. } => {
                let r = fence::prune_local(etcd).map(ActionOutcome::Removed).map_err(|e| e.to_string());
                Some(self.done("prune", r))
            }
            Effect::ForceRelease { target, allow_live, .. } => {
                let what = match target {
                    lease::Target::Lease(id) => {
                        format!("force-release lease {}", id.chars().take(8).collect::<String>())
                    }
                    lease::Target::Session(s) => format!("force-release session {s}"),
                };
                let r = fence::force_release(etcd, target, *allow_live, false)
                    .map(ActionOutcome::Removed)
                    .map_err(|e| e.to_string());
                Some(self.done(&what, r))
            }
            Effect::PlanRepair { .. } | Effect::Repair { .. } => Some(Event::RepairPlanned {
                registry: self.registry.clone(),
                result: Err("etcd has no registry file to repair".into()),
            }),
            _ => None,
        }
    }

    fn done(&self, what: &str, result: Result<ActionOutcome, String>) -> Event {
        Event::ActionDone(ActionDone {
            registry: self.registry.clone(),
            what: what.to_owned(),
            result,
            lock_holder: None,
        })
    }
}
