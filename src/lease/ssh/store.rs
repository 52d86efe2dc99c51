//! A registry on another host, as a [`LeaseStore`]: each read and action is a request
//! to that host's `leasectl serve --stdio`, which runs it on its own registry with its
//! own guards and audit. Taking and giving back leases stays on the owner's host.

use std::sync::Arc;
use std::time::Duration;

use super::link::Link;
use super::wire::{Answer, Request};
use crate::lease::address::location::{Location, SshLocation};
use crate::lease::backend::{LeaseStore, Listing, OnLost, RecordedEvents, Renewal};
use crate::lease::doctor::repair::{RepairOptions, RepairReport};
use crate::lease::error::Error;
use crate::lease::grant::{AcquireRequest, Grant, Released};
use crate::lease::home::config::CapSetting;
use crate::lease::owners::liveness::Prober;
use crate::lease::stop::{StopOptions, StopPlan, Stopped};
use crate::lease::view::{DoctorReport, ForceOptions, PruneOptions, Removal, Target};
use crate::lease::words::refusal::{Reason, Refusal};

/// A read's answer: a registry of a thousand leases crosses in well under a second.
const READ_WITHIN: Duration = Duration::from_secs(10);
/// An action's answer: the remote waits for its lock (10 s at most by default).
const ACT_WITHIN: Duration = Duration::from_secs(30);

pub(crate) struct SshStore {
    location: Location,
    at: SshLocation,
    link: Arc<Link>,
    /// The link's change count at the last read: the same count, nothing new to read.
    read_at: Option<u64>,
}

impl SshStore {
    pub(crate) fn new(at: &SshLocation) -> SshStore {
        SshStore {
            location: Location::Ssh(Box::new(at.clone())),
            at: at.clone(),
            link: Link::to(&at.host),
            read_at: None,
        }
    }

    fn elsewhere(&self, what: &str) -> String {
        format!(
            "{what} runs where the owner runs: on {} itself (`ssh {} leasectl ...`); over --host leasectl lists, \
             force-releases, prunes and checks",
            self.at.host.name, self.at.host.name
        )
    }

    fn unlisted(&self, e: Error) -> Listing {
        Listing {
            location: self.location.clone(),
            exists: false,
            modified: None,
            cap: CapSetting::default(),
            leases: Err(e),
            remote: None,
        }
    }

    fn removal(&self, request: Request) -> Result<Removal, Error> {
        match self.link.call(request, ACT_WITHIN)? {
            Answer::Removal(mut r) => {
                for w in &mut r.warnings {
                    *w = format!("on host {}: {}", self.at.host.name, crate::lease::words::human::escape(w));
                }
                Ok(r)
            }
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(answer: &Answer) -> Error {
    Error::Unavailable(format!("the remote answered something else than was asked ({answer:?})"))
}

impl LeaseStore for SshStore {
    fn location(&self) -> &Location {
        &self.location
    }

    fn cap_setting(&self) -> CapSetting {
        self.link.pushed(&self.at.profile).map(|l| l.cap).unwrap_or_default()
    }

    fn read(&mut self) -> Listing {
        self.read_at = Some(self.link.changes());
        if let Some(pushed) = self.link.pushed(&self.at.profile) {
            return pushed.at(self.location.clone());
        }
        // Subscribed: the listing comes when the host answers; never wait for it here (a
        // slow link made a reload wait on a request of its own).
        if let Some(why) = self.link.awaiting_feed() {
            return self.unlisted(why);
        }
        match self.link.call(Request::Read { profile: self.at.profile.clone() }, READ_WITHIN) {
            Ok(Answer::Listing(l)) => {
                self.link.remember(&self.at.profile, &l);
                (*l).at(self.location.clone())
            }
            Ok(other) => self.unlisted(unexpected(&other)),
            Err(e) => self.unlisted(e),
        }
    }

    /// The remote judges its owners itself (it alone can see them): its latest listing.
    fn rejudge(&mut self, _prober: &mut Prober) -> Listing {
        self.read()
    }

    fn lag(&self) -> Option<Duration> {
        self.link.lag()
    }

    fn other_version(&self) -> Option<String> {
        self.link.other_version()
    }

    /// Only when the host sent something since (a listing, or went down or came back).
    fn rejudge_needed(&mut self, _prober: &mut Prober) -> bool {
        self.read_at != Some(self.link.changes())
    }

    fn acquire(&mut self, _req: &AcquireRequest) -> Result<Grant, Refusal> {
        Err(Refusal {
            reason: Reason::SessionCoordinationUnavailable,
            message: self.elsewhere("acquire"),
            holder: None,
        })
    }

    fn release(&mut self, _lease_id: &str) -> Result<Released, Error> {
        Err(Error::Unsupported(self.elsewhere("release")))
    }

    fn release_grant(&mut self, _grant: &Grant) -> Result<Released, Error> {
        Err(Error::Unsupported(self.elsewhere("release")))
    }

    fn force_release(&mut self, target: &Target, opts: ForceOptions) -> Result<Removal, Error> {
        self.removal(Request::ForceRelease {
            profile: self.at.profile.clone(),
            target: target.clone(),
            allow_live: opts.allow_live,
            dry_run: opts.dry_run,
        })
    }

    /// The plan is made there, where the owners run and can be seen.
    fn stop_plan(&mut self, target: &Target) -> Result<StopPlan, Error> {
        let request = Request::StopPlan { profile: self.at.profile.clone(), target: target.clone() };
        match self.link.call(request, ACT_WITHIN)? {
            Answer::StopPlan(plan) => Ok(*plan),
            other => Err(unexpected(&other)),
        }
    }

    /// Ended there, through pidfds of that host's kernel; the answer waits for the grace.
    fn stop(&mut self, plan: &StopPlan, opts: StopOptions) -> Result<Stopped, Error> {
        let text = serde_json::to_string(plan).map_err(|e| Error::Refused(format!("cannot send the plan: {e}")))?;
        let request = Request::Stop {
            profile: self.at.profile.clone(),
            plan: text,
            grace_ms: opts.grace.as_millis().to_string(),
        };
        let within = ACT_WITHIN + opts.grace + crate::lease::stop::KILL_WAIT;
        match self.link.call(request, within)? {
            Answer::Stopped(mut stopped) => {
                for w in &mut stopped.warnings {
                    *w = format!("on host {}: {}", self.at.host.name, crate::lease::words::human::escape(w));
                }
                Ok(*stopped)
            }
            other => Err(unexpected(&other)),
        }
    }

    fn prune(&mut self, opts: PruneOptions) -> Result<Removal, Error> {
        self.removal(Request::Prune {
            profile: self.at.profile.clone(),
            dry_run: opts.dry_run,
            include_clock_step: opts.include_clock_step,
            include_work_running: opts.include_work_running,
        })
    }

    fn recorded_since(&mut self, from: f64) -> Option<Result<RecordedEvents, Error>> {
        let request = Request::Events { profile: self.at.profile.clone(), from: from.to_string() };
        Some(match self.link.call(request, ACT_WITHIN) {
            Ok(Answer::Events(recorded)) => Ok(*recorded),
            Ok(other) => Err(unexpected(&other)),
            Err(e) => Err(e),
        })
    }

    fn doctor(&mut self) -> Result<DoctorReport, Error> {
        match self.link.call(Request::Doctor { profile: self.at.profile.clone() }, ACT_WITHIN)? {
            Answer::Doctor(d) => Ok(*d),
            other => Err(unexpected(&other)),
        }
    }

    fn repair(&mut self, _opts: RepairOptions) -> Result<RepairReport, Error> {
        Err(Error::Unsupported(format!(
            "a repair is done on the host itself: `ssh {} leasectl doctor --repair` (it shows what it would keep and \
             lose, and asks)",
            crate::lease::words::human::shell_word(&self.at.host.name)
        )))
    }

    fn keep_alive(&self, _grant: &Grant, _on_lost: OnLost) -> Result<Option<Box<dyn Renewal>>, Error> {
        Err(Error::Unsupported(self.elsewhere("holding a lease")))
    }
}
