//! What every backend reports: a lease as seen with its owner's verdict, what an
//! operator's action targets and removed, and what doctor found.

use std::collections::BTreeMap;
use std::time::Duration;

pub use super::address::target::Target;
pub(crate) use super::doctor::report::{DoctorLeases, DoctorReport};
use super::format::entry::Entry;
use super::owners::liveness::Liveness;

/// One lease as seen now.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LeaseView {
    pub entry: Entry,
    pub liveness: Liveness,
    /// Set on etcd: the key, the owner's host, its etcd lease and what is left of it.
    /// Boxed: a file's leases never have one (a view is 176 bytes, not 264; `ls` of
    /// 50,000 leases holds a view of each).
    pub remote: Option<Box<RemoteLease>>,
}

/// A lease's etcd side.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// `entry` with its owner judged by `prober` now.
    pub fn judged(entry: Entry, prober: &mut super::owners::liveness::Prober) -> LeaseView {
        let liveness = prober.judge(&entry);
        LeaseView::local(entry, liveness)
    }

    pub fn local(entry: Entry, liveness: Liveness) -> LeaseView {
        LeaseView { entry, liveness, remote: None }
    }

    /// The owner's pid on this host: the one the lease records, but for an owner alive in
    /// another pid namespace (a container), whose pid here is another.
    pub fn pid_here(&self) -> u64 {
        self.liveness.namespaced().map_or(self.entry.pid(), |o| o.host_pid)
    }

    /// The pid whose process is named as this lease's owner: none where the process at
    /// the recorded pid is known not to be it and none other is (two in containers
    /// match; seen from inside a container, an owner outside it).
    pub fn owner_pid_here(&self) -> Option<u64> {
        use super::owners::liveness::UnknownCause;
        match &self.liveness {
            Liveness::Unknown(UnknownCause::Ambiguous(_) | UnknownCause::Outside(_)) => None,
            _ => Some(self.pid_here()),
        }
    }
}

/// Alive, or not provably dead: removing its lease could let a second writer in.
/// The sessions that more than one live owner holds, by session id, each with the
/// indexes of its live leases in `views` (in order); and how many leases are live.
/// Grouped through a sorted list of (32-bit session hash, index), 8 bytes a lease (a map
/// of every live session took ls and doctor past prune's memory at 50,000 leases); only
/// a run of equal hashes is grouped by the real ids, so a collision joins nothing.
pub(crate) fn held_twice(views: &[LeaseView]) -> (usize, BTreeMap<&str, Vec<usize>>) {
    use std::hash::BuildHasher;
    let hasher = rustc_hash::FxBuildHasher;
    let mut live: Vec<(u32, u32)> = views
        .iter()
        .enumerate()
        .filter(|(_, v)| v.liveness.counts_as_live())
        .map(|(i, v)| (hasher.hash_one(v.entry.session_id()) as u32, i as u32))
        .collect();
    live.sort_unstable();
    let mut twice = BTreeMap::new();
    for run in live.chunk_by(|a, b| a.0 == b.0).filter(|run| run.len() > 1) {
        let mut by_session: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for &(_, i) in run {
            by_session.entry(views[i as usize].entry.session_id()).or_default().push(i as usize);
        }
        twice.extend(by_session.into_iter().filter(|(_, held)| held.len() > 1));
    }
    (live.len(), twice)
}

/// The pid namespaces a registry's live owners run in, with how many leases each holds,
/// when there is more than one: Hermes in one of them judges the others' owners dead or
/// recycled and drops their leases on its next write (two writers). Empty otherwise.
pub(crate) fn pid_namespaces(views: &[LeaseView]) -> Vec<NamespaceShare> {
    pid_namespaces_of(views.iter().filter(|v| v.remote.is_none()).map(|v| &v.liveness))
}

/// [`pid_namespaces`] of this host's owners' verdicts.
pub(crate) fn pid_namespaces_of<'a>(verdicts: impl Iterator<Item = &'a Liveness>) -> Vec<NamespaceShare> {
    let mut shares: Vec<NamespaceShare> = Vec::new();
    for liveness in verdicts.filter(|l| l.is_alive()) {
        let place = match liveness.namespaced() {
            Some(o) => o.place(),
            None => "this host's pid namespace".to_owned(),
        };
        match shares.iter_mut().find(|s| s.place == place) {
            Some(share) => share.leases += 1,
            None => shares.push(NamespaceShare { place, leases: 1 }),
        }
    }
    if shares.len() < 2 {
        shares.clear();
    }
    shares
}

/// Where some of a registry's live owners run, and how many leases they hold.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NamespaceShare {
    /// `this host's pid namespace`, a container (`docker 3f2a9c1b2d4e`) or `pid namespace N`.
    pub place: String,
    pub leases: usize,
}

/// Why owners of one registry in several pid namespaces are a hazard, and what to do.
pub(crate) fn pid_namespaces_text(shares: &[NamespaceShare]) -> String {
    let each: Vec<String> = shares
        .iter()
        .map(|s| format!("{} ({})", s.place, crate::lease::words::human::plural(s.leases, "lease", "leases")))
        .collect();
    format!(
        "live owners in {} pid namespaces share this registry: {}. Hermes running in one judges the others' \
         owners dead or recycled and drops their leases on its next write, letting a second writer into their \
         sessions. Run a home's owners in one pid namespace, or share the host's (docker run --pid=host).",
        shares.len(),
        each.join(", ")
    )
}

pub(crate) fn owner_may_be_alive(v: &LeaseView) -> bool {
    may_be_alive(&v.liveness)
}

/// The verdicts that forbid removing a lease without an explicit override. A "recycled"
/// owner whose start time is off by whole seconds is most likely the same, live process
/// seen across a wall-clock step: prune keeps it, and so does every other removal.
pub(crate) fn may_be_alive(l: &Liveness) -> bool {
    l.is_alive() || matches!(l, Liveness::Unknown(_) | Liveness::WorkRunning { .. }) || l.clock_step_suspected()
}

/// How a force-release goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForceOptions {
    /// Take a live (or unprovable) owner's lease too: the operator's explicit, warned decision.
    pub allow_live: bool,
    /// Say what would be removed; change nothing.
    pub dry_run: bool,
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
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
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
    /// Of the leases removed, the ids of a live gateway's leftovers: no turn ran for their
    /// chat (state.db), so they needed no `--live` and no owner is left writing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateway_leftovers: Vec<String>,
    /// What the host that acted over `--host` could not keep beside the change (its audit
    /// record), to be said where the operator is; empty where the change was made here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The lease `lease_id` when a plain release must not take it: its owner runs on this
/// host and is neither the caller, one of its ancestors nor `owner_pid` (the one the
/// caller says it acts for). Taking a live stranger's lease is force-release's job.
pub(crate) fn foreign_live_owner<'a>(
    views: &'a [LeaseView],
    lease_id: &str,
    owner_pid: Option<u64>,
) -> Option<&'a LeaseView> {
    let view = views.iter().find(|v| v.entry.lease_id() == lease_id)?;
    let pid = view.entry.pid();
    let here = view.remote.as_ref().is_none_or(|r| r.host == super::owners::owner::hostname());
    let foreign = here
        && owner_may_be_alive(view)
        && Some(pid) != owner_pid
        && !super::owners::owner::self_and_ancestors().contains(&pid);
    foreign.then_some(view)
}

/// How long doctor watches a lock someone holds: a writer's instant passes well within
/// it, so a lock still held after it is worth an operator's look.
pub(crate) const LOCK_WATCH: Duration = Duration::from_secs(1);

/// Lease `lease-{i}` of `session`, owned by pid 100 + i, judged `liveness`.
#[cfg(test)]
pub(crate) fn test_lease(i: usize, session: &str, liveness: Liveness) -> LeaseView {
    let entry = Entry::new_lease(super::format::entry::NewLease {
        lease_id: format!("lease-{i}"),
        session_id: session.to_owned(),
        surface: None,
        pid: 100 + i as u64,
        process_start_time: None,
        now: 1.0,
        track_liveness: false,
        metadata: serde_json::Map::new(),
    });
    LeaseView::local(entry, liveness)
}

#[cfg(test)]
mod tests {
    use super::test_lease as lease;
    use super::*;
    use crate::lease::owners::liveness::DeadCause;

    /// Two live owners of one session are found; two sessions whose 32-bit hashes
    /// collide are not taken for one; a dead owner counts for nothing.
    #[test]
    fn a_session_is_held_twice_by_its_real_id_not_its_hash() {
        use std::hash::BuildHasher;
        let hash = |s: &str| rustc_hash::FxBuildHasher.hash_one(s) as u32;
        let mut seen = std::collections::HashMap::new();
        let (a, b) = (0u64..)
            .map(|n| format!("s-{n}"))
            .find_map(|s| seen.insert(hash(&s), s.clone()).map(|other| (other, s)))
            .expect("a collision among 2^32 hashes");
        let views = vec![
            lease(0, &a, Liveness::Alive),
            lease(1, "twice", Liveness::Alive),
            lease(2, &b, Liveness::Alive),
            lease(3, "twice", Liveness::Alive),
            lease(4, &a, Liveness::Dead(DeadCause::PidGone)),
        ];
        let (live, twice) = held_twice(&views);
        assert_eq!(live, 4);
        assert_eq!(twice.into_iter().collect::<Vec<_>>(), vec![("twice", vec![1, 3])]);
    }
}
