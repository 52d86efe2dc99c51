//! The seed test (hermes-agent/tests/hermes_cli/test_active_session_exclusivity.py),
//! ported one for one: AT MOST ONE LIVE OWNER MAY RUN A GIVEN STORED SESSION,
//! whether or not a cap is configured. The owner is this test process, as
//! Hermes' owner is `os.getpid()`; each test has its own temp home.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use leasectl::lease::{
    self, AcquireRequest, Grant, Liveness, Reason, Refusal, Registry, file::registry as store, home::lock,
};
use serde_json::{Map, Value};

static OWNER_SEQ: AtomicU64 = AtomicU64::new(0);

fn home() -> (tempfile::TempDir, Registry) {
    let dir = tempfile::tempdir().expect("tempdir");
    // The seed's own setup: HERMES_HOME names a directory that does not exist yet (a
    // fresh container or service account); the fence creates it, as Hermes' does.
    let reg = Registry::new("root", dir.path().join(".hermes"));
    (dir, reg)
}

/// Acquire as a DISTINCT owner unless a live id is given explicitly (the live
/// session id is half of writer identity).
fn acquire(reg: &Registry, session: &str, cap: Option<u64>, live_id: Option<&str>) -> Result<Grant, Refusal> {
    let live = match live_id {
        Some(l) => l.to_owned(),
        None => format!("live-{}", OWNER_SEQ.fetch_add(1, Ordering::Relaxed)),
    };
    let mut metadata = Map::new();
    metadata.insert("live_session_id".into(), Value::String(live));
    lease::file::acquire(
        reg,
        &AcquireRequest {
            session_id: session.into(),
            surface: Some("tui".into()),
            metadata,
            owner_pid: u64::from(std::process::id()),
            cap,
            track_liveness: false,
            lock_timeout: Duration::from_secs(10),
        },
    )
}

/// Hermes' `active_session_registry_snapshot()`: the live entries.
fn live_entries(reg: &Registry) -> Vec<lease::Entry> {
    let snap = lease::file::snapshot(reg);
    snap.leases
        .expect("registry readable")
        .into_iter()
        .filter(|v| v.liveness == Liveness::Alive)
        .map(|v| v.entry)
        .collect()
}

/// Rewrite the registry's first entry with another pid and start time, under the lock.
fn rewrite_owner(reg: &Registry, pid: u64, start: f64) {
    let guard = lock::lock(&reg.lock_path(), Duration::from_secs(5)).expect("lock");
    let text = std::fs::read_to_string(reg.path()).expect("registry exists");
    let mut v: Value = serde_json::from_str(&text).expect("json");
    let entries = v["entries"].as_array_mut().expect("entries list");
    assert_eq!(entries.len(), 1);
    entries[0]["pid"] = Value::from(pid);
    entries[0]["process_start_time"] = Value::from(start);
    let file = store::parse(v.to_string().as_bytes()).expect("still valid");
    store::write(&guard, &reg.path(), &file).expect("write");
}

#[test]
fn test_no_cap_configured_still_fences_one_session() {
    let (_d, reg) = home();
    let lease_a = acquire(&reg, "S", None, None);
    assert!(lease_a.is_ok(), "first owner granted: {lease_a:?}");

    let refusal = acquire(&reg, "S", None, None).expect_err("a second live owner of one session must be refused");
    assert_eq!(refusal.reason, Reason::SessionNotOwned);
    assert!(refusal.message.contains('S'));
    // Exactly one holder is recorded: a refusal must not leave a slot behind.
    assert_eq!(live_entries(&reg).len(), 1);
}

#[test]
fn test_different_sessions_still_run_concurrently() {
    let (_d, reg) = home();
    assert!(acquire(&reg, "S1", None, None).is_ok());
    assert!(acquire(&reg, "S2", None, None).is_ok());
    assert_eq!(live_entries(&reg).len(), 2);
}

#[test]
fn test_global_capacity_still_applies_independently() {
    let (_d, reg) = home();
    assert!(acquire(&reg, "S1", Some(2), None).is_ok());
    assert!(acquire(&reg, "S2", Some(2), None).is_ok());
    let refusal = acquire(&reg, "S3", Some(2), None).expect_err("cap reached");
    assert_eq!(
        refusal.reason,
        Reason::MaxConcurrentSessions,
        "a capacity refusal must not be reported as an ownership refusal"
    );
}

#[test]
fn test_capacity_and_exclusivity_are_not_the_same_switch() {
    let (_d, reg) = home();
    assert!(acquire(&reg, "S", Some(4), None).is_ok());
    let refusal = acquire(&reg, "S", Some(4), None).expect_err("second owner");
    assert_eq!(
        refusal.reason,
        Reason::SessionNotOwned,
        "with capacity to spare, the refusal can only be about ownership"
    );
}

#[test]
fn test_a_dead_owner_is_pruned_and_a_successor_may_acquire() {
    let (_d, reg) = home();
    assert!(acquire(&reg, "S", None, None).is_ok());
    rewrite_owner(&reg, 0x7FFF_FFFE, 1.0);
    let successor = acquire(&reg, "S", None, None);
    assert!(successor.is_ok(), "a dead owner must not block a successor: {successor:?}");
    assert_eq!(live_entries(&reg).len(), 1);
}

#[test]
fn test_a_recycled_pid_does_not_keep_a_lease_alive() {
    let (_d, reg) = home();
    assert!(acquire(&reg, "S", None, None).is_ok());
    // Our own pid, but a start time we never had.
    rewrite_owner(&reg, u64::from(std::process::id()), 1.0);
    let successor = acquire(&reg, "S", None, None);
    assert!(successor.is_ok(), "a recycled pid must not hold a session: {successor:?}");
}

#[test]
fn test_release_lets_the_next_owner_in() {
    let (_d, reg) = home();
    let lease_a = acquire(&reg, "S", None, None).expect("granted");
    assert!(acquire(&reg, "S", None, None).is_err());
    lease::file::release(&reg, &lease_a.lease_id, Duration::from_secs(5)).expect("release");
    assert!(live_entries(&reg).is_empty());
    let lease_b = acquire(&reg, "S", None, None);
    assert!(lease_b.is_ok(), "after release the session must be acquirable: {lease_b:?}");
}

#[test]
fn test_release_is_idempotent_and_only_drops_its_own_lease() {
    let (_d, reg) = home();
    let lease_a = acquire(&reg, "S1", None, None).expect("granted");
    let lease_b = acquire(&reg, "S2", None, None);
    let first = lease::file::release(&reg, &lease_a.lease_id, Duration::from_secs(5)).expect("release");
    let second = lease::file::release(&reg, &lease_a.lease_id, Duration::from_secs(5)).expect("release again");
    assert!(first.removed && !second.removed);
    let held: Vec<String> = live_entries(&reg).iter().map(|e| e.session_id().to_owned()).collect();
    assert_eq!(held, vec!["S2".to_owned()]);
    assert!(lease_b.is_ok());
}

#[test]
fn test_a_session_with_no_stored_id_is_exempt() {
    let (_d, reg) = home();
    let a = acquire(&reg, "", None, None).expect("granted");
    let b = acquire(&reg, "", None, None).expect("empty ids do not collide with each other");
    assert!(!a.recorded && !b.recorded);
    assert!(!reg.path().exists(), "an unrecorded lease writes nothing");
}

#[test]
fn test_the_same_live_session_may_re_acquire_its_own_lease() {
    let (_d, reg) = home();
    let lease_a = acquire(&reg, "S", None, Some("tab-1")).expect("granted");
    let again = acquire(&reg, "S", None, Some("tab-1"));
    let again = again.expect("a writer must not be fenced out by its own leak");
    assert_eq!(again.replaced.as_deref(), Some(lease_a.lease_id.as_str()));
    assert_eq!(live_entries(&reg).len(), 1, "and it must not double-book");

    // A DIFFERENT live session in the same process is still a second writer.
    let refusal = acquire(&reg, "S", None, Some("tab-2")).expect_err("other tab");
    assert_eq!(refusal.reason, Reason::SessionNotOwned);
}
