//! What happened between two readings of one registry, as events a person or a script
//! can follow: leases acquired, released, pruned, owners dying. The registry records
//! no history, so a lease gone is named by what its owner was last seen as: a dead
//! owner's lease was pruned, a live one's released.

use std::collections::HashMap;

use super::format::entry::Entry;
use super::owners::liveness::Liveness;
use super::view::LeaseView;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Held when the watch began.
    Present,
    Acquired,
    /// Gone while its owner was alive (or unknown): the owner's release, or a force-release.
    Released,
    /// Gone after its owner had died or its pid was reused.
    Pruned,
    OwnerDied,
    OwnerRecycled,
    /// The owner reads alive again (a clock step undone, a /proc hiccup).
    OwnerAlive,
    /// The same lease id rewritten (its writer re-acquired: surface, metadata, times).
    Updated,
}

impl EventKind {
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Present => "present",
            EventKind::Acquired => "acquired",
            EventKind::Released => "released",
            EventKind::Pruned => "pruned",
            EventKind::OwnerDied => "owner-died",
            EventKind::OwnerRecycled => "owner-recycled",
            EventKind::OwnerAlive => "owner-alive",
            EventKind::Updated => "updated",
        }
    }
}

/// The events' names for a registry that cannot be read (for `error`) and reads again:
/// a file is invalid, etcd or another host unreachable (nothing is wrong with its data).
pub fn unreadable_names(location: &super::Location, error: Option<&super::Error>) -> (&'static str, &'static str) {
    match (location, error) {
        (super::Location::Etcd(_), _) => ("etcd-unreachable", "etcd-reachable"),
        (_, Some(super::Error::Unreachable { fault, .. })) if fault.reached() => ("host-cannot-serve", "host-serving"),
        (_, Some(super::Error::Unreachable { .. })) => ("host-unreachable", "host-reachable"),
        (_, Some(super::Error::Connecting { .. })) => ("host-connecting", "host-reachable"),
        _ => ("registry-invalid", "registry-valid"),
    }
}

/// What a registry reading again is said with: a host or etcd answers, a file reads.
pub fn again_words(location: &super::Location, error: Option<&super::Error>) -> &'static str {
    match (location, error) {
        (_, Some(super::Error::Unreachable { fault, .. })) if fault.reached() => "serving again",
        (super::Location::Etcd(_), _) | (_, Some(super::Error::Unreachable { .. })) => "answering again",
        (_, Some(super::Error::Connecting { .. })) => "answering",
        _ => "readable again",
    }
}

/// One change to one lease; `view` is the lease as last seen (before it went, for
/// released and pruned).
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseEvent {
    pub kind: EventKind,
    pub view: LeaseView,
}

/// A lease as judged at one reading: what [`diff`] compares (the CLI's `LeaseView`, the
/// console's rows).
pub trait Judged {
    fn entry(&self) -> &Entry;
    fn liveness(&self) -> &Liveness;
}

impl Judged for LeaseView {
    fn entry(&self) -> &Entry {
        &self.entry
    }
    fn liveness(&self) -> &Liveness {
        &self.liveness
    }
}

/// One change, by reference: the lease as last seen (before it went, for released and
/// pruned), and as it was before when it changed in place.
#[derive(Debug)]
pub struct Change<'a, T> {
    pub kind: EventKind,
    pub lease: &'a T,
    pub previous: Option<&'a T>,
}

/// Every lease of a first reading, as present.
pub fn present(views: &[LeaseView]) -> Vec<LeaseEvent> {
    views.iter().map(|v| LeaseEvent { kind: EventKind::Present, view: v.clone() }).collect()
}

/// In one write that acquired a lease, a lease gone whose owner is dead or recycled now
/// (`judge` says how its owner is now) was pruned by that acquire (the fence removes them
/// first), not released: say so, with that verdict. Only for one write: across several, a
/// release and a later acquire look the same. Returns the ids of the leases the acquire
/// pruned (those seen dead already included).
pub fn prunes_of_an_acquire(events: &mut [LeaseEvent], mut judge: impl FnMut(&LeaseView) -> Liveness) -> Vec<String> {
    let mut fenced = Vec::new();
    if !events.iter().any(|e| e.kind == EventKind::Acquired) {
        return fenced;
    }
    for e in events.iter_mut() {
        match e.kind {
            // Its owner seen dead already: gone in an acquire's write, the fence took it.
            EventKind::Pruned => fenced.push(e.view.entry.lease_id().to_owned()),
            EventKind::Released => {
                let now = judge(&e.view);
                if !(now.is_alive() || matches!(now, Liveness::Unknown(_))) {
                    e.kind = EventKind::Pruned;
                    e.view.liveness = now;
                    fenced.push(e.view.entry.lease_id().to_owned());
                }
            }
            _ => {}
        }
    }
    fenced
}

/// The changes from `old` to `new`, owned: gone leases first (in old order), then new
/// and changed ones (in new order).
pub fn between(old: &[LeaseView], new: &[LeaseView]) -> Vec<LeaseEvent> {
    diff(old, new).into_iter().map(|c| LeaseEvent { kind: c.kind, view: c.lease.clone() }).collect()
}

/// The changes from `old` to `new`, the one diff every follower uses (`ls -w`, `events`,
/// the console's event log). Linear: one map by lease id each way.
pub fn diff<'a, T: Judged>(old: &'a [T], new: &'a [T]) -> Vec<Change<'a, T>> {
    let before: HashMap<&str, &T> = old.iter().map(|v| (v.entry().lease_id(), v)).collect();
    let after: HashMap<&str, &T> = new.iter().map(|v| (v.entry().lease_id(), v)).collect();
    let mut events = Vec::new();
    for v in old.iter().filter(|v| !after.contains_key(v.entry().lease_id())) {
        let kind = match v.liveness() {
            Liveness::Dead(_) | Liveness::Recycled { .. } | Liveness::WorkRunning { .. } => EventKind::Pruned,
            Liveness::Alive | Liveness::AliveInNamespace(_) | Liveness::Unknown(_) => EventKind::Released,
        };
        events.push(Change { kind, lease: v, previous: None });
    }
    for v in new {
        let Some(was) = before.get(v.entry().lease_id()) else {
            events.push(Change { kind: EventKind::Acquired, lease: v, previous: None });
            continue;
        };
        let kind = match (was.liveness(), v.liveness()) {
            (was, Liveness::Dead(_)) if was.is_alive() => Some(EventKind::OwnerDied),
            (was, Liveness::Recycled { .. }) if was.is_alive() => Some(EventKind::OwnerRecycled),
            (Liveness::Dead(_) | Liveness::Recycled { .. }, now) if now.is_alive() => Some(EventKind::OwnerAlive),
            _ if was.entry() != v.entry() => Some(EventKind::Updated),
            _ => None,
        };
        if let Some(kind) = kind {
            events.push(Change { kind, lease: v, previous: Some(*was) });
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::Entry;
    use crate::lease::owners::liveness::DeadCause;

    fn view(id: &str, liveness: Liveness) -> LeaseView {
        let value = serde_json::json!({"lease_id": id, "session_id": "S", "pid": 7});
        let entry = Entry::from_value(0, value, &std::collections::HashSet::<String>::new()).expect("an entry");
        LeaseView { entry, liveness, remote: None }
    }

    fn kinds(events: &[LeaseEvent]) -> Vec<(&str, EventKind)> {
        events.iter().map(|e| (e.view.entry.lease_id(), e.kind)).collect()
    }

    #[test]
    fn gone_leases_are_released_or_pruned_by_their_owners_last_state() {
        let dead = || Liveness::Dead(DeadCause::PidGone);
        let old = [view("a", Liveness::Alive), view("b", dead()), view("c", Liveness::Alive)];
        let new = [view("c", dead()), view("d", Liveness::Alive)];
        assert_eq!(
            kinds(&between(&old, &new)),
            [
                ("a", EventKind::Released),
                ("b", EventKind::Pruned),
                ("c", EventKind::OwnerDied),
                ("d", EventKind::Acquired)
            ]
        );
        assert!(between(&new, &new).is_empty(), "no change, no event");
    }

    #[test]
    fn a_lease_gone_in_the_write_of_an_acquire_is_pruned_only_if_its_owner_ended() {
        let old = [view("a", Liveness::Alive), view("b", Liveness::Alive)];
        let with_acquire = [view("n", Liveness::Alive)];
        let judge = |v: &LeaseView| match v.entry.lease_id() {
            "a" => Liveness::Dead(DeadCause::PidGone),
            _ => Liveness::Alive,
        };
        let mut events = between(&old, &with_acquire);
        prunes_of_an_acquire(&mut events, judge);
        let expected = [("a", EventKind::Pruned), ("b", EventKind::Released), ("n", EventKind::Acquired)];
        assert_eq!(kinds(&events), expected, "b's owner lives: not the fence's");
        assert_eq!(events[0].view.liveness, Liveness::Dead(DeadCause::PidGone), "said with its owner as it is now");
        // Without an acquire in the write, a removal is not the fence's.
        let mut events = between(&old, &[]);
        prunes_of_an_acquire(&mut events, judge);
        assert_eq!(kinds(&events), [("a", EventKind::Released), ("b", EventKind::Released)]);
    }
}
