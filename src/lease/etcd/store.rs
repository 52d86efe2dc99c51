//! The lease store on etcd: the same interface as a registry file, with an etcd
//! lease per grant (renewed by `keepalive`) and TTLs in every listing.

use std::collections::HashMap;
use std::time::Duration;

use super::keepalive::KeepAlive;
use super::queue::{self, Ticket};
use super::{Etcd, EtcdConfig, EtcdError, Held, fence, hostname};
use crate::lease::address::location::{EtcdLocation, Location};
use crate::lease::backend::{LeaseStore, Listing, OnLost, RemoteListing, Renewal};
use crate::lease::doctor::repair::RepairReport;
use crate::lease::error::Error;
use crate::lease::grant::{AcquireRequest, Grant, Released};
use crate::lease::home::config::CapSetting;
use crate::lease::owners::liveness::Prober;
use crate::lease::stop::{StopOptions, StopPlan, Stopped};
use crate::lease::view::{DoctorReport, ForceOptions, PruneOptions, Removal, Target};
use crate::lease::words::refusal::{Reason, Refusal};

/// TTLs are read one request per lease: a re-judgement reads at most this many.
const TTL_READS: usize = 256;

pub(crate) struct EtcdStore {
    location: Location,
    config: EtcdConfig,
    /// Connected lazily, and again after a failure, so a console recovers once etcd is back.
    etcd: Option<Etcd>,
    host: String,
    /// What the last read found, for `rejudge`.
    last: Option<Result<(Vec<Held>, RemoteListing), Error>>,
    /// This client's place in line, while it waits (`--wait`).
    line: Option<Ticket>,
    /// Members that did not answer the last check, and why; when that check was.
    not_answering: Vec<(String, String)>,
    members_checked: Option<std::time::Instant>,
}

/// How often a watcher (the console) asks every member whether it answers.
const MEMBER_CHECK_EVERY: Duration = Duration::from_secs(5);

impl EtcdStore {
    pub(crate) fn new(at: &EtcdLocation, ttl: Duration) -> EtcdStore {
        EtcdStore {
            location: Location::Etcd(Box::new(at.clone())),
            config: EtcdConfig::at(at, ttl),
            etcd: None,
            host: hostname(),
            last: None,
            line: None,
            not_answering: vec![],
            members_checked: None,
        }
    }

    fn etcd(&mut self) -> Result<&Etcd, EtcdError> {
        if self.etcd.is_none() {
            self.etcd = Some(Etcd::connect(&self.config)?);
        }
        self.etcd.as_ref().ok_or_else(|| EtcdError::Unavailable("no etcd client".into()))
    }

    /// Ask every member whether it answers, every few seconds (only where there are
    /// several: one member not answering is etcd unreachable, said otherwise). Only a
    /// watcher re-judges: a one-shot command never waits out a slow member's grace.
    fn check_members_when_due(&mut self) {
        if self.config.endpoints.len() < 2 || self.members_checked.is_some_and(|t| t.elapsed() < MEMBER_CHECK_EVERY) {
            return;
        }
        self.members_checked = Some(std::time::Instant::now());
        self.not_answering = match &self.etcd {
            Some(etcd) => etcd.members_not_answering(),
            None => vec![],
        };
    }

    /// A call failed: drop the client so the next call connects afresh.
    fn failed<T>(&mut self, e: EtcdError) -> Result<T, Error> {
        self.etcd = None;
        Err(e.into())
    }

    fn listing(&mut self, ttl_reads: usize) -> Listing {
        let leases = match self.last.clone() {
            None => Err(Error::Unavailable("not read yet".into())),
            Some(Err(e)) => Err(e),
            Some(Ok((held, remote))) => self.judged(&held, ttl_reads).map(|views| (views, remote)),
        };
        let (leases, remote) = match leases {
            Ok((views, remote)) => (Ok(views), Some(remote)),
            Err(e) => (Err(e), None),
        };
        let cap = match &self.last {
            Some(Ok((held, remote))) => prefix_cap(remote.cap, held),
            _ => CapSetting::default(),
        };
        Listing { location: self.location.clone(), exists: true, modified: None, cap, leases, remote }
    }

    /// Local owners judged by pid, remote ones alive while their key exists; TTLs read.
    fn judged(&mut self, held: &[Held], ttl_reads: usize) -> Result<Vec<crate::lease::view::LeaseView>, Error> {
        let ids: Vec<i64> = held.iter().take(ttl_reads).map(|h| h.etcd_lease_id).collect();
        let ttls: HashMap<i64, Option<i64>> = match self.etcd().and_then(|e| e.ttls(&ids)) {
            Ok(t) => t,
            Err(e) => return self.failed(e),
        };
        let mut prober = Prober::new();
        let host = self.host.clone();
        Ok(held
            .iter()
            .map(|h| h.view(h.liveness(&mut prober, &host), ttls.get(&h.etcd_lease_id).copied().flatten()))
            .collect())
    }
}

impl LeaseStore for EtcdStore {
    fn location(&self) -> &Location {
        &self.location
    }

    fn cap_setting(&self) -> CapSetting {
        CapSetting::default()
    }

    fn read(&mut self) -> Listing {
        let listed = self.etcd().and_then(Etcd::list);
        self.last = Some(match listed {
            Ok(l) => Ok((
                l.leases,
                RemoteListing {
                    revision: l.revision,
                    slots: l.slots,
                    bad: l.bad.iter().map(ToString::to_string).collect(),
                    waiting: l.waiting,
                    cap: l.cap,
                },
            )),
            Err(e) => {
                self.etcd = None;
                Err(e.into())
            }
        });
        self.listing(usize::MAX)
    }

    /// The console's tick: at most `TTL_READS` TTL requests.
    fn rejudge(&mut self, _prober: &mut Prober) -> Listing {
        if self.last.is_none() {
            return self.read();
        }
        self.check_members_when_due();
        self.listing(TTL_READS)
    }

    fn acquire(&mut self, req: &AcquireRequest) -> Result<Grant, Refusal> {
        // A place in line whose lease could not be kept is gone: a new one, at the back.
        if self.line.as_ref().is_some_and(Ticket::lost) {
            self.leave_line();
            let _ = self.join_line(req);
        }
        let connected = self.etcd().err();
        let ticket = self.line.as_ref().filter(|t| !t.lost());
        match (&self.etcd, connected) {
            (Some(etcd), None) => fence::acquire_in_line(etcd, req, ticket),
            (_, e) => Err(Refusal {
                reason: Reason::SessionCoordinationUnavailable,
                message: format!(
                    "leasectl could not use etcd ({}): {}. Nothing was granted.",
                    self.config.location(),
                    e.map(|e| e.to_string()).unwrap_or_else(|| "no etcd client".into())
                ),
                holder: None,
            }),
        }
    }

    fn join_line(&mut self, req: &AcquireRequest) -> Result<Option<usize>, Error> {
        // A place whose lease could not be kept is gone: a new one, at the back.
        if self.line.as_ref().is_some_and(|t| t.lost() || t.session_id != req.session_id) {
            self.leave_line();
        }
        if self.line.is_none() {
            let ticket = match self.etcd().and_then(|e| queue::join(e, req)) {
                Ok(t) => t,
                Err(e) => return self.failed(e),
            };
            self.line = Some(ticket);
        }
        let position = self.line.as_ref().map(|t| t.position).unwrap_or(i64::MAX);
        let line = match self.etcd().and_then(queue::line) {
            Ok(l) => l,
            Err(e) => return self.failed(e),
        };
        // Those before it that it waits behind: for the same session, or for slots.
        let behind = |w: &&crate::lease::backend::Waiter| {
            w.session_id == req.session_id || (req.cap.is_some() && w.cap.is_some())
        };
        Ok(Some(line.iter().filter(|w| w.position < position).filter(behind).count()))
    }

    fn leave_line(&mut self) {
        if let Some(ticket) = self.line.take() {
            queue::leave(self.etcd.as_ref(), ticket);
        }
    }

    fn release(&mut self, lease_id: &str) -> Result<Released, Error> {
        match self.etcd().and_then(|e| fence::release(e, lease_id)) {
            Ok(r) => Ok(r),
            Err(e) => self.failed(e),
        }
    }

    /// A failure leaves the lease to its TTL: nobody renews it any more.
    fn release_grant(&mut self, grant: &Grant) -> Result<Released, Error> {
        let ttl = grant.remote.as_ref().map(|r| r.ttl).unwrap_or(self.config.ttl);
        self.etcd().and_then(|e| fence::release_grant(e, grant)).map_err(|e| {
            Error::Unavailable(format!(
                "could not release lease {} ({e}); nobody renews it any more, so etcd ends it within {}s",
                grant.lease_id,
                ttl.as_secs()
            ))
        })
    }

    fn force_release(&mut self, target: &Target, opts: ForceOptions) -> Result<Removal, Error> {
        let etcd = self.etcd()?;
        fence::force_release(etcd, target, opts)
    }

    // On etcd a lease ends with its TTL; there is no start time to step.
    fn stop_plan(&mut self, target: &Target) -> Result<StopPlan, Error> {
        crate::lease::stop::plan(self.read(), target)
    }

    fn stop(&mut self, plan: &StopPlan, opts: StopOptions) -> Result<Stopped, Error> {
        crate::lease::stop::run(self, plan, opts)
    }

    fn prune(&mut self, opts: PruneOptions) -> Result<Removal, Error> {
        match self.etcd().and_then(|e| fence::prune_local(e, opts.dry_run)) {
            Ok(r) => Ok(r),
            Err(e) => self.failed(e),
        }
    }

    fn doctor(&mut self) -> Result<DoctorReport, Error> {
        Err(Error::Unsupported("etcd has no registry file to check".into()))
    }

    fn repair(&mut self, _opts: crate::lease::doctor::repair::RepairOptions) -> Result<RepairReport, Error> {
        Err(Error::Unsupported("etcd has no registry file to repair".into()))
    }

    fn keep_alive(&self, grant: &Grant, on_lost: OnLost) -> Result<Option<Box<dyn Renewal>>, Error> {
        let Some(remote) = grant.remote.as_ref().filter(|_| grant.recorded) else { return Ok(None) };
        let keep = KeepAlive::start(self.config.clone(), remote.etcd_lease_id, remote.ttl, remote.granted_at, on_lost)
            .map_err(|e| Error::Unavailable(format!("cannot start renewing lease {} ({e})", grant.lease_id)))?;
        Ok(Some(Box::new(keep)))
    }

    fn members_not_answering(&self) -> Vec<(String, String)> {
        self.not_answering.clone()
    }

    fn advice(&self, refusal: &Refusal) -> String {
        match refusal.reason {
            Reason::SessionCoordinationUnavailable => format!(
                "Check that etcd is up and reachable (etcdctl --endpoints {} endpoint health), then retry.",
                self.config.endpoints.join(",")
            ),
            // etcd keeps no config.yaml: the cap is the --max each client passes.
            Reason::MaxConcurrentSessions => {
                refusal.advice().replace("raise max_concurrent_sessions", "raise the cap every client passes (--max)")
            }
            _ => refusal.advice(),
        }
    }
}

impl Drop for EtcdStore {
    /// A waiter that stops waiting leaves the line at once (not when its lease runs out).
    fn drop(&mut self) {
        self.leave_line();
    }
}

/// The cap on etcd is the `--max` each client passes. The `cap` key keeps the last one a
/// capped client acquired with, so the cap stays known while nobody holds a slot; a
/// prefix written before that key existed shows the one its holders were granted under.
/// Holders granted under different caps are warned about.
fn prefix_cap(recorded: Option<u64>, held: &[Held]) -> CapSetting {
    let mut caps: Vec<u64> = held.iter().filter_map(|h| h.cap).chain(recorded).collect();
    caps.sort_unstable();
    caps.dedup();
    let mut setting = CapSetting { cap: recorded.or(caps.last().copied()), key: None, warnings: vec![] };
    if !caps.is_empty() {
        setting.key = Some("--max".into());
    }
    if caps.len() > 1 {
        let listed: Vec<String> = caps.iter().map(u64::to_string).collect();
        setting.warnings.push(format!(
            "holders were granted under different caps (--max {}): every client of a prefix must pass the same --max",
            listed.join(", ")
        ));
    }
    setting
}

impl Renewal for KeepAlive {
    fn stop(self: Box<Self>) {
        KeepAlive::stop(*self);
    }
}
