//! A store that puts every change it makes on record: force-release, prune and repair
//! go to the audit ([`super::home::audit`]) as they happen, whoever calls. The CLI and the
//! console wrap their stores in it, so both write the same records.

use std::sync::Arc;
use std::time::Duration;

use super::address::location::Location;
use super::backend::{LeaseStore, Listing, LockProbe, OnLost, OwnerRelease, Renewal};
use super::doctor::repair::{RepairOptions, RepairReport};
use super::error::Error;
use super::grant::{AcquireRequest, Grant, Released};
use super::home::audit::{self, Actor};
use super::home::config::CapSetting;
use super::home::lock::HeldFlocks;
use super::owners::liveness::Prober;
use super::stop::{StopOptions, StopPlan, Stopped};
use super::view::{DoctorReport, ForceOptions, LeaseView, PruneOptions, Removal, Target};
use super::words::refusal::Refusal;

/// Told what could not be recorded, in words (the action stands either way).
pub(crate) type OnAuditFailure = Box<dyn Fn(String) + Send + Sync>;

/// Whom the changes are recorded as done by, and who is told what could not be recorded.
/// Shared by every store it wraps (a console opens one per profile: 100,000 of them).
pub(crate) struct Auditor {
    actor: Actor,
    on_failure: OnAuditFailure,
}

impl Auditor {
    pub(crate) fn new(actor: Actor, on_failure: OnAuditFailure) -> Arc<Auditor> {
        Arc::new(Auditor { actor, on_failure })
    }
}

/// `inner`, with its changes on record as done by its auditor's actor.
pub(crate) struct Audited {
    inner: Box<dyn LeaseStore>,
    auditor: Arc<Auditor>,
}

impl Audited {
    pub(crate) fn wrap(inner: Box<dyn LeaseStore>, auditor: Arc<Auditor>) -> Box<dyn LeaseStore> {
        Box::new(Audited { inner, auditor })
    }

    fn report(&self, failures: Vec<String>) {
        for f in failures {
            (self.auditor.on_failure)(f);
        }
    }
}

impl LeaseStore for Audited {
    fn location(&self) -> &Location {
        self.inner.location()
    }
    fn cap_setting(&self) -> CapSetting {
        self.inner.cap_setting()
    }
    fn read(&mut self) -> Listing {
        self.inner.read()
    }
    fn rejudge(&mut self, prober: &mut Prober) -> Listing {
        self.inner.rejudge(prober)
    }
    fn rejudge_needed(&mut self, prober: &mut Prober) -> bool {
        self.inner.rejudge_needed(prober)
    }
    fn acquire(&mut self, req: &AcquireRequest) -> Result<Grant, Refusal> {
        self.inner.acquire(req)
    }
    fn join_line(&mut self, req: &AcquireRequest) -> Result<Option<usize>, Error> {
        self.inner.join_line(req)
    }
    fn leave_line(&mut self) {
        self.inner.leave_line()
    }
    fn release(&mut self, lease_id: &str) -> Result<Released, Error> {
        self.inner.release(lease_id)
    }
    fn release_unless(&mut self, lease_id: &str, refuse: &dyn Fn(&LeaseView) -> bool) -> Result<OwnerRelease, Error> {
        self.inner.release_unless(lease_id, refuse)
    }
    fn release_grant(&mut self, grant: &Grant) -> Result<Released, Error> {
        self.inner.release_grant(grant)
    }

    fn force_release(&mut self, target: &Target, opts: ForceOptions) -> Result<Removal, Error> {
        let r = self.inner.force_release(target, opts)?;
        let what = match target {
            Target::Lease(id) => format!("force-release lease {}", id.chars().take(8).collect::<String>()),
            Target::Session(s) => format!("force-release session {s}"),
            Target::Stopped(_) => "stop: the leases of an owner it ended".to_owned(),
        };
        let action = if matches!(target, Target::Stopped(_)) { "stop" } else { "force-release" };
        self.report(audit::removal(action, self.inner.location(), &self.auditor.actor.doing(&what), &r));
        self.report(r.warnings.clone());
        Ok(r)
    }

    fn stop_plan(&mut self, target: &Target) -> Result<StopPlan, Error> {
        self.inner.stop_plan(target)
    }

    /// A stop is on record with the signals sent and every lease that went by it.
    fn stop(&mut self, plan: &StopPlan, opts: StopOptions) -> Result<Stopped, Error> {
        let stopped = self.inner.stop(plan, opts)?;
        let what = match &plan.target {
            Target::Lease(id) => format!("stop lease {}", id.chars().take(8).collect::<String>()),
            Target::Session(s) => format!("stop session {s}"),
            Target::Stopped(_) => "stop".to_owned(),
        };
        self.report(audit::stop(self.inner.location(), &self.auditor.actor.doing(&what), &stopped));
        self.report(stopped.warnings.clone());
        Ok(stopped)
    }

    fn prune(&mut self, opts: PruneOptions) -> Result<Removal, Error> {
        let r = self.inner.prune(opts)?;
        self.report(audit::removal("prune", self.inner.location(), &self.auditor.actor.doing("prune"), &r));
        self.report(r.warnings.clone());
        Ok(r)
    }

    fn doctor(&mut self) -> Result<DoctorReport, Error> {
        self.inner.doctor()
    }

    /// A repair that rewrote the registry is on record with every entry kept, restored,
    /// dropped and lost, and where the old bytes are.
    fn repair(&mut self, opts: RepairOptions) -> Result<RepairReport, Error> {
        let r = self.inner.repair(opts)?;
        if !opts.dry_run && r.needed {
            let what = if opts.force { "repair (forced)" } else { "repair" };
            let live_risk = !r.plan.live_risks().is_empty();
            self.report(audit::repair(self.inner.location(), &self.auditor.actor.doing(what), &r, live_risk));
        }
        Ok(r)
    }

    fn keep_alive(&self, grant: &Grant, on_lost: OnLost) -> Result<Option<Box<dyn Renewal>>, Error> {
        self.inner.keep_alive(grant, on_lost)
    }
    fn lag(&self) -> Option<Duration> {
        self.inner.lag()
    }
    fn members_not_answering(&self) -> Vec<(String, String)> {
        self.inner.members_not_answering()
    }
    fn other_version(&self) -> Option<String> {
        self.inner.other_version()
    }
    fn probe_lock(&self, bound: Duration, held: &HeldFlocks) -> Option<LockProbe> {
        self.inner.probe_lock(bound, held)
    }
    fn advice(&self, refusal: &Refusal) -> String {
        self.inner.advice(refusal)
    }
    fn recorded_since(&mut self, from: f64) -> Option<Result<super::backend::RecordedEvents, Error>> {
        self.inner.recorded_since(from)
    }
}
