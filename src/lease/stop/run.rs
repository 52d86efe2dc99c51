//! Ending the owners a plan names: SIGTERM through a pidfd proven to name the owner,
//! a grace period, SIGKILL to the owner and its family if it is still running; then its
//! leases are gone by its own release, or removed once it is dead.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use rustix::process::Signal;

use super::plan::held_by;
use super::{
    KILL_WAIT, LeaseEnd, LeaseGone, Member, OwnerEnding, OwnerStopped, OwnerToStop, SignalSent, StopOptions, StopPlan,
    Stopped,
};
use crate::lease::backend::LeaseStore;
use crate::lease::error::Error;
use crate::lease::owners::ending::{self, NotTaken, Sent, Taken};
use crate::lease::view::{ForceOptions, LeaseView, Target};

/// Carry out `plan` on `store`: each owner ended (or said why not), its leases cleaned.
pub(crate) fn run<S: LeaseStore + ?Sized>(store: &mut S, plan: &StopPlan, opts: StopOptions) -> Result<Stopped, Error> {
    let mut stopped = Stopped { owners: vec![], warnings: vec![], elsewhere: vec![] };
    for owner in &plan.owners {
        let ended = end(store, owner, opts)?;
        let leases = clean(store, owner, &ended.ending, &mut stopped.warnings)?;
        stopped.owners.push(OwnerStopped { leases, ..ended });
    }
    Ok(stopped)
}

/// The leases of `owner` in the registry now (it has not released them).
fn still_held<S: LeaseStore + ?Sized>(store: &mut S, owner: &OwnerToStop) -> Result<Vec<LeaseView>, Error> {
    let views = store.read().leases?;
    Ok(views.into_iter().filter(|v| held_by(v, owner.recorded(), owner.start_time)).collect())
}

fn end<S: LeaseStore + ?Sized>(store: &mut S, owner: &OwnerToStop, opts: StopOptions) -> Result<OwnerStopped, Error> {
    let mut done = OwnerStopped {
        pid: owner.pid,
        start_time: owner.start_time,
        name: owner.info.as_ref().map(|i| i.name.clone()),
        signals: vec![],
        ending: OwnerEnding::EndedBefore,
        took: None,
        family_ended: vec![],
        family_left: vec![],
        leases: vec![],
    };
    // Taken first, then its leases looked at: a lease seen held after the pidfd was
    // proven is held by the process this pidfd names.
    let taken = match ending::take(owner.pid, owner.start_time) {
        Ok(taken) => taken,
        Err(NotTaken::Gone) => return Ok(done),
        Err(NotTaken::Other { actual }) => {
            done.ending = OwnerEnding::Replaced { actual };
            return Ok(done);
        }
        Err(NotTaken::NotPermitted { uid, user }) => {
            let who = user.unwrap_or_else(|| format!("#{uid}"));
            done.ending = OwnerEnding::NotEnded(format!("it runs as user {who}, whom this user may not signal"));
            return Ok(done);
        }
        Err(NotTaken::Hidden(why) | NotTaken::Unreadable(why)) => {
            done.ending = OwnerEnding::NotEnded(why);
            return Ok(done);
        }
    };
    let named: HashSet<&str> = owner.leases.iter().map(|v| v.entry.lease_id()).collect();
    if !still_held(store, owner)?.iter().any(|v| named.contains(v.entry.lease_id())) {
        done.ending = OwnerEnding::ReleasedBefore;
        return Ok(done);
    }
    if crate::lease::failpoint::chosen("stop-before-signal") {
        pause_for_test();
    }
    let family = family_of(owner.pid);
    let started = Instant::now();
    let since = |at: Instant| at.duration_since(started).as_secs_f64();
    match signal(&taken, Signal::TERM, "SIGTERM", &mut done.signals, 0.0) {
        Ok(Sent::Sent) => {}
        Ok(Sent::AlreadyEnded) => {
            if let Err(NotTaken::Other { actual }) = ending::take(owner.pid, owner.start_time) {
                done.ending = OwnerEnding::Replaced { actual };
            }
            return Ok(with_family(done, &family));
        }
        Err(why) => {
            done.ending = OwnerEnding::NotEnded(why);
            return Ok(with_family(done, &family));
        }
    }
    if taken.wait(opts.grace) {
        done.ending = OwnerEnding::Terminated;
        done.took = Some(since(Instant::now()));
        return Ok(with_family(done, &family));
    }
    // Still running: SIGKILL to it and to what it started (a run command's work would
    // otherwise run on without the lease that fenced it).
    let kill_at = since(Instant::now());
    if let Err(why) = signal(&taken, Signal::KILL, "SIGKILL", &mut done.signals, kill_at) {
        done.ending = OwnerEnding::NotEnded(why);
        return Ok(with_family(done, &family));
    }
    for (_, member) in &family {
        let _ = member.signal(Signal::KILL);
    }
    if taken.wait(KILL_WAIT) {
        done.ending = OwnerEnding::Killed;
        done.took = Some(since(Instant::now()));
    } else {
        done.ending = OwnerEnding::NotEnded(format!(
            "still running {}s after SIGKILL (a process in uninterruptible sleep ends when its I/O does)",
            KILL_WAIT.as_secs()
        ));
    }
    Ok(with_family(done, &family))
}

/// Send `sig`, noting it when it was sent; the error in words.
fn signal(taken: &Taken, sig: Signal, name: &str, sent: &mut Vec<SignalSent>, after: f64) -> Result<Sent, String> {
    match taken.signal(sig) {
        Ok(Sent::Sent) => {
            sent.push(SignalSent { signal: name.to_owned(), after });
            Ok(Sent::Sent)
        }
        Ok(Sent::AlreadyEnded) => Ok(Sent::AlreadyEnded),
        Err(e) => Err(format!("{name} to pid {} was refused: {e}", taken.pid)),
    }
}

/// The owner's descendants, each held by a pidfd proven to be a child of the family.
fn family_of(pid: u64) -> Vec<(Member, Taken)> {
    let members = ending::descendants(pid);
    let mut family: HashSet<u32> = members.iter().map(|(p, _)| *p).collect();
    family.extend(u32::try_from(pid).ok());
    members
        .into_iter()
        .filter_map(|(p, name)| {
            let taken = ending::take_running(p)?;
            // A pid reused between the look in /proc and the pidfd has another parent.
            let parent = crate::lease::owners::owner::proc_stat(u64::from(p))?.ppid;
            family.contains(&parent).then_some((Member { pid: p, name }, taken))
        })
        .collect()
}

/// Which of the family ended, and which run on.
fn with_family(mut done: OwnerStopped, family: &[(Member, Taken)]) -> OwnerStopped {
    // A child a moment behind its parent (a shell's sleep): given a moment to follow.
    let until = Instant::now() + Duration::from_millis(300);
    for (member, taken) in family {
        let left = until.saturating_duration_since(Instant::now());
        match taken.ended() || (done.ending.ended() && taken.wait(left)) {
            true => done.family_ended.push(member.clone()),
            false => done.family_left.push(member.clone()),
        }
    }
    done
}

/// What became of `owner`'s leases: released by it, or removed now that it is dead.
fn clean<S: LeaseStore + ?Sized>(
    store: &mut S,
    owner: &OwnerToStop,
    ending: &OwnerEnding,
    warnings: &mut Vec<String>,
) -> Result<Vec<LeaseGone>, Error> {
    // Its leases as they are now, whatever their owner's verdict (a dead owner's too).
    let present = store.read().leases?;
    let present = |id: &str| present.iter().any(|v| v.entry.lease_id() == id && v.entry.pid() == owner.recorded());
    // Each lease in order, with what became of it; None: still there, its owner ended.
    let mut each: Vec<(&LeaseView, Option<LeaseEnd>)> = owner
        .all_leases()
        .map(|view| match (present(view.entry.lease_id()), ending.ended()) {
            (false, _) => (view, Some(LeaseEnd::Released)),
            (true, false) => (view, Some(LeaseEnd::Left)),
            (true, true) => (view, None),
        })
        .collect();
    let ids: Vec<String> =
        each.iter().filter(|(_, how)| how.is_none()).map(|(v, _)| v.entry.lease_id().to_owned()).collect();
    if !ids.is_empty() {
        // Its owner was seen to end (its pidfd said so): its leases are a dead owner's,
        // whatever an etcd TTL still says, and go in one write, as a stop's.
        let opts = ForceOptions { allow_live: true, dry_run: false };
        let removed: Result<Vec<String>, Error> = match store.force_release(&Target::Stopped(ids), opts) {
            Ok(r) => Ok(r.removed.iter().map(|v| v.entry.lease_id().to_owned()).collect()),
            Err(Error::NotFound(_)) => Ok(vec![]),
            Err(e) => Err(e),
        };
        for (view, how) in each.iter_mut().filter(|(_, how)| how.is_none()) {
            *how = Some(match &removed {
                Ok(gone) if gone.iter().any(|id| id == view.entry.lease_id()) => LeaseEnd::Pruned,
                Ok(_) => LeaseEnd::Released,
                Err(e) => {
                    let (id, session) = (view.entry.lease_id(), view.entry.session_id());
                    warnings.push(format!("lease {id} (session {session}) was left: {e}"));
                    LeaseEnd::Left
                }
            });
        }
    }
    Ok(each
        .into_iter()
        .map(|(view, how)| LeaseGone { view: view.clone(), how: how.unwrap_or(LeaseEnd::Left) })
        .collect())
}

/// Between the look and the signal, for a test that forces the race there: waits until
/// the file `$LEASECTL_TEST_GO` exists, saying so in `$LEASECTL_TEST_GO.waiting`.
fn pause_for_test() {
    let Some(go) = std::env::var_os("LEASECTL_TEST_GO").map(std::path::PathBuf::from) else { return };
    let mut waiting = go.clone().into_os_string();
    waiting.push(".waiting");
    // one door: a test's marker beside its own go file, never in a home.
    let _ = std::fs::write(&waiting, b"");
    let until = Instant::now() + Duration::from_secs(60);
    while !go.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
}
