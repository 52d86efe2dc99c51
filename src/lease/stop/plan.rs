//! What a stop will end, as seen now: each owner of the leases named, proven to be the
//! process its leases record (by pid and start time, through a pidfd), with what an
//! operator needs to decide (who runs it, what it runs, its sessions, its children).
//! Anything that may not or cannot be ended is refused here, before any signal.

use std::collections::HashSet;

use super::{CannotStop, Member, OwnerToStop, SessionNote, StopPlan, StopRefusal, WhyNot};
use crate::lease::backend::Listing;
use crate::lease::error::{Error, Missing};
use crate::lease::owners::ending::{self, NotTaken};
use crate::lease::owners::liveness::{Liveness, Prober, UnknownCause};
use crate::lease::owners::owner;
use crate::lease::view::{LeaseView, Target};

/// Plan the stop of `target`'s owners from `listing` (read just now).
pub(crate) fn plan(listing: Listing, target: &Target) -> Result<StopPlan, Error> {
    let location = listing.location;
    let views = listing.leases?;
    let chosen: Vec<&LeaseView> = views.iter().filter(|v| target.names(&v.entry)).collect();
    if chosen.is_empty() {
        let place = match location.registry() {
            Some(reg) => format!("in {}", reg.path().display()),
            None => format!("in {}", location.label()),
        };
        return Err(Error::NotFound(Missing { target: target.clone(), live_only: false, place }));
    }
    let host = owner::hostname();
    let ourselves: HashSet<u64> = owner::self_and_ancestors().into_iter().collect();
    let mut prober = Prober::new();
    let mut refusals = Vec::new();
    let mut owners: Vec<OwnerToStop> = Vec::new();
    for view in chosen {
        let pid = view.entry.pid();
        let refuse = |why: WhyNot| StopRefusal {
            lease_id: view.entry.lease_id().to_owned(),
            session_id: view.entry.session_id().to_owned(),
            pid,
            why,
        };
        match judge(view, &host, &ourselves, &mut prober) {
            Err(why) => refusals.push(refuse(why)),
            Ok((here, start_time, uid)) => {
                match owners.iter_mut().find(|o| o.pid == here && o.start_time == start_time) {
                    Some(owner) => owner.leases.push(view.clone()),
                    None => owners.push(OwnerToStop {
                        pid: here,
                        recorded_pid: (here != pid).then_some(pid),
                        start_time,
                        uid,
                        info: None,
                        leases: vec![view.clone()],
                        also_holds: vec![],
                        family: vec![],
                        sessions: vec![],
                    }),
                }
            }
        }
    }
    if !refusals.is_empty() {
        return Err(Error::CannotStop(CannotStop { refusals }));
    }
    let pids: Vec<u64> = owners.iter().map(|o| o.pid).collect();
    let mut infos = owner::owner_infos(&pids);
    for owner in &mut owners {
        let named: HashSet<&str> = owner.leases.iter().map(|v| v.entry.lease_id()).collect();
        owner.also_holds = views
            .iter()
            .filter(|v| !named.contains(v.entry.lease_id()) && held_by(v, owner.recorded(), owner.start_time))
            .cloned()
            .collect();
        owner.info = infos.remove(&owner.pid);
        owner.family = ending::descendants(owner.pid).into_iter().map(|(pid, name)| Member { pid, name }).collect();
    }
    if let Some(reg) = location.registry() {
        let ids: Vec<&str> = owners.iter().flat_map(|o| o.all_leases().map(|v| v.entry.session_id())).collect();
        let contexts = crate::lease::home::context::read(&reg.home, &ids);
        for owner in &mut owners {
            let mut seen = HashSet::new();
            let sessions: Vec<&str> = owner.all_leases().map(|v| v.entry.session_id()).collect();
            owner.sessions = sessions
                .into_iter()
                .filter(|s| seen.insert(*s))
                .filter_map(|s| contexts.get(s))
                .map(|c| SessionNote {
                    session_id: c.session_id().to_owned(),
                    title: c.title().map(str::to_owned),
                    last_activity: c.last_activity(),
                    ended_at: c.ended_at(),
                    gateway_turn: c.gateway_turn(),
                })
                .collect();
        }
    }
    Ok(StopPlan { target: target.clone(), host, owners })
}

/// The lease's owner as a process that may be ended from here: its pid here (another
/// than the lease records for an owner in a container), start time and user, or why not.
fn judge(
    view: &LeaseView,
    host: &str,
    ourselves: &HashSet<u64>,
    prober: &mut Prober,
) -> Result<(u64, f64, u32), WhyNot> {
    if let Some(remote) = view.remote.as_ref().filter(|r| r.host != host) {
        return Err(WhyNot::OtherHost { host: remote.host.clone() });
    }
    // An owner in another pid namespace is ended by the pid this host knows it by.
    let pid = view.liveness.namespaced().map_or(view.entry.pid(), |o| o.host_pid);
    if ourselves.contains(&pid) {
        return Err(WhyNot::Itself);
    }
    let verdict = view.liveness.explain();
    match &view.liveness {
        Liveness::Alive | Liveness::AliveInNamespace(_) => {}
        Liveness::Dead(_) => return Err(WhyNot::Dead { verdict }),
        Liveness::Recycled { .. } => return Err(WhyNot::Recycled { verdict }),
        Liveness::Unknown(UnknownCause::Hidden(why)) => return Err(WhyNot::Hidden { why: why.clone() }),
        Liveness::Unknown(_) => return Err(WhyNot::Unknown { why: verdict }),
        Liveness::WorkRunning { .. } => return Err(WhyNot::WorkRunning { verdict }),
    }
    // A lease that records no start time names its owner by pid alone: the process
    // running it now, as seen at this look, is the one a later signal may reach.
    let recorded = view.entry.process_start_time();
    let Some(start_time) = recorded.or_else(|| prober.start_time(pid)) else {
        return Err(WhyNot::Dead { verdict: "dead: pid gone".into() });
    };
    match ending::take(pid, start_time) {
        Ok(taken) => Ok((pid, start_time, taken.uid)),
        Err(NotTaken::Gone) => Err(WhyNot::Dead { verdict: "dead: pid gone".into() }),
        Err(NotTaken::Other { actual }) => {
            Err(WhyNot::Recycled { verdict: Liveness::Recycled { recorded: start_time, actual }.explain() })
        }
        Err(NotTaken::NotPermitted { uid, user }) => Err(WhyNot::NotPermitted { uid, user }),
        Err(NotTaken::Hidden(why)) => Err(WhyNot::Hidden { why }),
        Err(NotTaken::Unreadable(why)) => Err(WhyNot::Unknown { why }),
    }
}

/// True when `view`'s owner is the process that recorded `pid` and started at `start_time`.
pub(crate) fn held_by(view: &LeaseView, pid: u64, start_time: f64) -> bool {
    view.entry.pid() == pid
        && view.entry.process_start_time().is_none_or(|t| (t - start_time).abs() < 0.001)
        && view.liveness.counts_as_live()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::address::location::Location;
    use crate::lease::format::entry::Entry;
    use crate::lease::view::RemoteLease;

    fn listing(views: Vec<LeaseView>) -> Listing {
        Listing {
            location: Location::File(crate::lease::Registry::new("root", std::path::Path::new("/nonexistent-home"))),
            exists: true,
            modified: None,
            cap: Default::default(),
            leases: Ok(views),
            remote: None,
        }
    }

    /// An owner on another host (etcd) is ended there: refused here, with the host and
    /// the command to run on it; nothing about this host's processes is asked.
    #[test]
    fn an_owner_on_another_host_is_refused_with_where_to_run_it() {
        let text = r#"{"lease_id": "0f3c9e2a5b7d4c1e8a6f2d9b0c4e7a13", "pid": 4242, "process_start_time": 1.5, "session_id": "S1"}"#;
        let entry = Entry::from_text(0, text, &std::collections::HashSet::<String>::new()).expect("entry");
        let mut view = LeaseView::local(entry, Liveness::Alive);
        view.remote = Some(Box::new(RemoteLease {
            key: "/p/s/S1".into(),
            host: "gw-elsewhere".into(),
            etcd_lease_id: 7,
            slot: None,
            fencing_token: 1,
            ttl_left: Some(20),
        }));
        let Err(Error::CannotStop(refused)) = plan(listing(vec![view]), &Target::Session("S1".into())) else {
            panic!("not refused")
        };
        assert_eq!(refused.refusals[0].why, WhyNot::OtherHost { host: "gw-elsewhere".into() });
        let said = crate::lease::words::hint::render(&refused.to_string(), &crate::lease::words::hint::Reach::plain());
        assert!(
            said.contains("runs on host gw-elsewhere") && said.contains("`ssh gw-elsewhere leasectl stop 0f3c9e2a"),
            "{said}"
        );
    }

    #[test]
    fn this_process_is_never_its_own_stop() {
        let me = std::process::id();
        let start = crate::lease::owners::liveness::process_start_time(u64::from(me)).expect("my start time");
        let text = format!(
            r#"{{"lease_id": "5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f", "pid": {me}, "process_start_time": {start}, "session_id": "S2"}}"#
        );
        let entry = Entry::from_text(0, &text, &std::collections::HashSet::<String>::new()).expect("entry");
        let view = LeaseView::local(entry, Liveness::Alive);
        let Err(Error::CannotStop(refused)) = plan(listing(vec![view]), &Target::Session("S2".into())) else {
            panic!("not refused")
        };
        assert_eq!(refused.refusals[0].why, WhyNot::Itself);
    }
}
