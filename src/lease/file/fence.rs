//! The fence (spec §4): acquire, release and transfer under the lock.
//! Exclusivity first, always; capacity second, only with a cap; fail closed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Map, Value};

use super::registry;
use crate::lease::backend::OwnerRelease;
use crate::lease::clock::now;
use crate::lease::error::{Error, Missing};
use crate::lease::format::entry::{Entry, NewLease, py_is_blank};
use crate::lease::grant::{AcquireRequest, Grant, Released};
use crate::lease::home::paths::Registry;
use crate::lease::owners::liveness::{Liveness, Prober, UnknownCause};
use crate::lease::view::{LeaseView, Target};
use crate::lease::words::refusal::{
    Reason, Refusal, capacity_message, not_owned_message, oldest_holder, unavailable_message,
};
use crate::lease::{address::ids, home::lock};

/// Whether this process ends once its command is done (see [`leave_writes_to_exit`]).
static WRITES_LEFT_TO_EXIT: AtomicBool = AtomicBool::new(false);

/// From now on, a registry a fence wrote is left for the process's exit to free, not
/// dropped entry by entry: for a one-shot command (dropping 10,000 entries and unmapping
/// the file's text were 1.4 % and more of an acquire). Never for a process that goes on.
pub fn leave_writes_to_exit() {
    WRITES_LEFT_TO_EXIT.store(true, Ordering::Relaxed);
}

/// Done with what was written, after the lock is released.
fn done_with(written: registry::RegistryFile) {
    if WRITES_LEFT_TO_EXIT.load(Ordering::Relaxed) {
        std::mem::forget(written);
    } else {
        drop(written);
    }
}

/// Keep the live entries; tracked ones (or all, under `strict`) must be proven alive.
/// Hermes' `_prune_dead`: untracked entries are judged leniently. With a `claim` (the
/// session being acquired), only that session's owner must be proven alive, as 0.22
/// scopes it: a sibling that cannot be judged is kept, so it fences its own session and
/// counts toward the cap, but refuses no claim of another session.
pub fn prune_dead(
    entries: Vec<Entry>,
    prober: &mut Prober,
    strict: bool,
    claim: Option<&str>,
) -> Result<(Vec<Entry>, Vec<Entry>), Error> {
    let keep = keep_flags(&entries, prober, strict, claim)?;
    // In place, with room for the entry an acquire adds: no second list of every entry,
    // and no regrowing copy of it, under the lock.
    let mut live = entries;
    // Mostly every owner is alive: nothing to take out, and no walk that takes nothing.
    if keep.iter().all(|&k| k) {
        live.reserve_exact(1);
        return Ok((live, Vec::new()));
    }
    let mut keep = keep.into_iter();
    // Visited once each, in order: `keep` follows the entries.
    let dead = live.extract_if(.., |_| !keep.next().unwrap_or(true)).collect();
    live.reserve_exact(1);
    Ok((live, dead))
}

/// For each entry, whether pruning keeps it; an error when a tracked owner of the
/// `claim`ed session (of any session, without one) cannot be judged.
fn keep_flags(entries: &[Entry], prober: &mut Prober, strict: bool, claim: Option<&str>) -> Result<Vec<bool>, Error> {
    let mut keep = Vec::with_capacity(entries.len());
    for entry in entries {
        let tracked = strict || entry.track_liveness();
        keep.push(match prober.judge(entry) {
            Liveness::Alive | Liveness::AliveInNamespace(_) | Liveness::WorkRunning { .. } => true,
            Liveness::Dead(_) | Liveness::Recycled { .. } => false,
            Liveness::Unknown(cause) if tracked => {
                if claim.is_some_and(|c| c != entry.session_id()) {
                    true
                } else {
                    let why = match cause {
                        UnknownCause::ProbeFailed(w)
                        | UnknownCause::StartTimeUnreadable(w)
                        | UnknownCause::Hidden(w)
                        | UnknownCause::Ambiguous(w)
                        | UnknownCause::Outside(w) => w,
                    };
                    return Err(Error::LivenessUnknown {
                        lease_id: entry.lease_id().to_owned(),
                        pid: entry.pid(),
                        why,
                    });
                }
            }
            Liveness::Unknown(UnknownCause::ProbeFailed(_)) => false,
            // Hidden is not dead: the kernel says the owner runs (an untracked entry's
            // unreadable start time is taken as alive, and so is this).
            // Nor are two processes that both match in containers, nor an owner outside the
            // container this runs in: never a guess that it is dead.
            Liveness::Unknown(
                UnknownCause::StartTimeUnreadable(_)
                | UnknownCause::Hidden(_)
                | UnknownCause::Ambiguous(_)
                | UnknownCause::Outside(_),
            ) => true,
        });
    }
    Ok(keep)
}

/// The same writer re-acquiring: same owner pid AND the same non-empty live session id.
fn is_same_writer(existing: &Entry, req: &AcquireRequest) -> bool {
    let incoming = crate::lease::format::entry::live_id_string(req.metadata.get("live_session_id"));
    let held = existing.live_session_id();
    existing.pid() == req.owner_pid && !held.is_empty() && !incoming.is_empty() && held == incoming
}

/// The entry that is `held`'s writer's now: `held` itself, or the entry the same writer
/// replaced it with by re-acquiring the session (Hermes' re-entrancy: same pid, same
/// start time, same non-empty live session id, same session). A re-acquire by the same
/// writer is still the same owner, so `hold` and `run` follow it and release it.
pub fn held_by_writer<'a>(entries: &'a [Entry], held: &Entry) -> Option<&'a Entry> {
    entries.iter().find(|e| e.lease_id() == held.lease_id()).or_else(|| {
        let live = held.live_session_id();
        let same_start = |e: &Entry| match (e.process_start_time(), held.process_start_time()) {
            (Some(a), Some(b)) => (a - b).abs() < 0.001,
            (None, None) => true,
            _ => false,
        };
        entries.iter().find(|e| {
            !live.is_empty()
                && e.pid() == held.pid()
                && e.session_id() == held.session_id()
                && e.live_session_id() == live
                && same_start(e)
        })
    })
}

/// Release what a grant's writer holds now (see [`held_by_writer`]), found and removed
/// under one lock: a re-acquire in between cannot leave it behind.
pub fn release_held(reg: &Registry, held: &Entry, lock_timeout: Duration) -> Result<Released, Error> {
    let chosen = release_chosen(
        reg,
        lock_timeout,
        |entries| held_by_writer(entries, held).and_then(|e| entries.iter().position(|x| std::ptr::eq(x, e))),
        &|_| false,
    )?;
    Ok(released(chosen))
}

/// Acquire a lease (spec §4). Every failure to coordinate is a refusal with
/// `SESSION_COORDINATION_UNAVAILABLE`, and leaves the file exactly as it was.
pub fn acquire(reg: &Registry, req: &AcquireRequest) -> Result<Grant, Refusal> {
    let lease_id = ids::lease_id();
    // Blank is what Hermes' validator calls empty (after Python's strip()): recording it
    // would make every reader, Hermes included, refuse the whole registry.
    if py_is_blank(&req.session_id) {
        return Ok(Grant { lease_id, recorded: false, entry: None, replaced: None, pruned: vec![], remote: None });
    }
    let path = reg.path();
    let unavailable = |e: Error| Refusal {
        reason: Reason::SessionCoordinationUnavailable,
        message: unavailable_message(&path, &e),
        holder: None,
    };
    // Never in a deleted or missing named profile (Hermes 0.22's rule, in its words): the
    // claim would bring it back to disk, where 0.22 no longer lists it.
    if let Some(problem) = crate::lease::home::profiles::claim_problem(&reg.home) {
        return Err(Refusal { reason: Reason::SessionCoordinationUnavailable, message: problem, holder: None });
    }
    let guard = lock::lock_making_home(&reg.lock_path(), req.lock_timeout).map_err(unavailable)?;
    let file = registry::read(&path).map_err(unavailable)?;
    let mut prober = Prober::new();
    let (mut entries, pruned) =
        prune_dead(file.entries, &mut prober, req.track_liveness, Some(&req.session_id)).map_err(unavailable)?;
    let at = now();
    let new_entry = Entry::new_lease(NewLease {
        lease_id: lease_id.clone(),
        session_id: req.session_id.clone(),
        surface: req.surface.clone(),
        pid: req.owner_pid,
        process_start_time: prober.start_time(req.owner_pid),
        now: at,
        track_liveness: req.track_liveness,
        metadata: req.metadata.clone(),
    });
    let mut out = registry::RegistryFile { entries: Vec::new(), extra: file.extra };

    // Exclusivity first, under the same lock that just pruned dead owners.
    let refusal = if let Some(index) = entries.iter().position(|e| e.session_id() == req.session_id) {
        if is_same_writer(&entries[index], req) {
            let replaced = entries[index].lease_id().to_owned();
            entries[index] = new_entry.clone();
            out.entries = entries;
            registry::write(&guard, &path, &out).map_err(unavailable)?;
            drop(guard);
            done_with(out);
            return Ok(Grant {
                lease_id,
                recorded: true,
                entry: Some(new_entry),
                replaced: Some(replaced),
                pruned,
                remote: None,
            });
        }
        let holder = entries[index].clone();
        Some(Refusal {
            reason: Reason::SessionNotOwned,
            message: not_owned_message(&req.session_id, &holder, at),
            holder: Some(Box::new(holder)),
        })
    } else if let Some(cap) = req.cap.filter(|c| entries.len() as u64 >= *c) {
        // Capacity second, and only when a cap is configured.
        let oldest = oldest_holder(&entries).cloned();
        Some(Refusal {
            reason: Reason::MaxConcurrentSessions,
            message: capacity_message(entries.len(), cap, &entries, at),
            holder: oldest.map(Box::new),
        })
    } else {
        None
    };
    if let Some(refusal) = refusal {
        // A refusal still persists the prune.
        if !pruned.is_empty() {
            out.entries = entries;
            registry::write(&guard, &path, &out).map_err(unavailable)?;
        }
        drop(guard);
        return Err(refusal);
    }
    entries.push(new_entry.clone());
    out.entries = entries;
    registry::write(&guard, &path, &out).map_err(unavailable)?;
    // Unlocked before the entries are freed: the lock is for the read-modify-write.
    drop(guard);
    done_with(out);
    Ok(Grant { lease_id, recorded: true, entry: Some(new_entry), replaced: None, pruned, remote: None })
}

/// The owner's release: remove exactly this lease id, writing only if it was
/// present (dead owners pruned on the way, as Hermes does). Idempotent.
pub fn release(reg: &Registry, lease_id: &str, lock_timeout: Duration) -> Result<Released, Error> {
    Ok(released(release_unless(reg, lease_id, lock_timeout, &|_| false)?))
}

/// [`release`], unless `refuse` says no to the lease as judged under the lock (then
/// nothing is written).
pub fn release_unless(
    reg: &Registry,
    lease_id: &str,
    lock_timeout: Duration,
    refuse: &dyn Fn(&LeaseView) -> bool,
) -> Result<OwnerRelease, Error> {
    let choose = |entries: &[Entry]| entries.iter().position(|e| e.lease_id() == lease_id);
    release_chosen(reg, lock_timeout, choose, refuse)
}

/// What was released, where nothing refuses.
fn released(chosen: OwnerRelease) -> Released {
    match chosen {
        OwnerRelease::Done { released, .. } => released,
        OwnerRelease::Refused(_) => Released { removed: false, pruned: vec![], lease_id: None },
    }
}

/// Under the lock: remove the lease at the place `choose` finds (none: a no-op), pruning
/// dead owners, unless `refuse` says no to it as judged now.
fn release_chosen(
    reg: &Registry,
    lock_timeout: Duration,
    choose: impl FnOnce(&[Entry]) -> Option<usize>,
    refuse: &dyn Fn(&LeaseView) -> bool,
) -> Result<OwnerRelease, Error> {
    let path = reg.path();
    let guard = lock::lock(&reg.lock_path(), lock_timeout)?;
    let file = registry::read(&path)?;
    let Some((at, chosen)) = choose(&file.entries).and_then(|at| Some((at, file.entries.get(at)?))) else {
        let released = Released { removed: false, pruned: vec![], lease_id: None };
        return Ok(OwnerRelease::Done { released, view: None });
    };
    let lease_id = chosen.lease_id().to_owned();
    let lease_id = lease_id.as_str();
    let mut prober = Prober::new();
    let view = LeaseView::local(chosen.clone(), prober.judge(chosen));
    if refuse(&view) {
        // Unlocked before the entries are freed, as after a write.
        drop(guard);
        return Ok(OwnerRelease::Refused(view));
    }
    let tracked = view.entry.track_liveness();
    // If liveness cannot be proven, release the lease alone and prune nothing. Nor
    // inside a container: an owner outside it looks dead from here, and a release has no
    // need of a prune (Hermes' own release drops such a live owner's lease).
    let keep = match crate::lease::owners::namespaces::inside_a_container() {
        Some(_) => vec![true; file.entries.len()],
        None => keep_flags(&file.entries, &mut prober, tracked, Some(view.entry.session_id()))
            .unwrap_or_else(|_| vec![true; file.entries.len()]),
    };
    // In place: no second list of every entry under the lock. `keep` follows the entries
    // (each visited once, in order); the lease released is not a pruned one.
    let mut entries = file.entries;
    // Mostly every owner is alive: no walk that takes nothing out.
    // One entry has the id (a file with two is refused when read): where it was found,
    // unless entries before it were pruned.
    let (pruned, at) = if keep.iter().all(|&k| k) {
        (Vec::new(), Some(at))
    } else {
        let mut keep = keep.into_iter();
        let pruned = entries.extract_if(.., |e| !keep.next().unwrap_or(true) && e.lease_id() != lease_id).collect();
        (pruned, entries.iter().position(|e| e.lease_id() == lease_id))
    };
    if let Some(at) = at {
        entries.remove(at);
    }
    let out = registry::RegistryFile { entries, extra: file.extra };
    registry::write(&guard, &path, &out)?;
    // Unlocked before the entries are freed: the lock is for the read-modify-write.
    drop(guard);
    done_with(out);
    let released = Released { removed: true, pruned, lease_id: Some(lease_id.to_owned()) };
    Ok(OwnerRelease::Done { released, view: Some(view) })
}

/// Move a lease to another session id without dropping its slot. Unlike Hermes,
/// refused with `SESSION_NOT_OWNED` when another live owner holds the target.
pub fn transfer(
    reg: &Registry,
    lease_id: &str,
    new_session_id: &str,
    metadata: Option<Map<String, Value>>,
    lock_timeout: Duration,
) -> Result<Result<Entry, Refusal>, Error> {
    if py_is_blank(new_session_id) {
        return Err(Error::Refused("cannot transfer a lease to an empty or blank session id".into()));
    }
    let path = reg.path();
    let guard = lock::lock(&reg.lock_path(), lock_timeout)?;
    let file = registry::read(&path)?;
    let mut prober = Prober::new();
    let (mut entries, _pruned) = prune_dead(file.entries, &mut prober, false, None)?;
    let Some(own) = entries.iter().position(|e| e.lease_id() == lease_id) else {
        return Err(Error::NotFound(Missing {
            target: Target::Lease(lease_id.to_owned()),
            live_only: true,
            place: format!("in {}", path.display()),
        }));
    };
    let at = now();
    if let Some(holder) = entries.iter().find(|e| e.session_id() == new_session_id && e.lease_id() != lease_id) {
        let holder = holder.clone();
        return Ok(Err(Refusal {
            reason: Reason::SessionNotOwned,
            message: not_owned_message(new_session_id, &holder, at),
            holder: Some(Box::new(holder)),
        }));
    }
    entries[own].move_to(new_session_id, at, metadata);
    let moved = entries[own].clone();
    registry::write(&guard, &path, &registry::RegistryFile { entries, extra: file.extra })?;
    Ok(Ok(moved))
}
