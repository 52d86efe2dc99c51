//! What a refusal or a refused action tells the operator to do: the lease to act on is
//! the one that looks leaked (state.db), never a healthy, busy one; when every holder is
//! healthy it says so and gives the command that waits; every override is a command.

use std::path::Path;
use std::process::Output;

use crate::common::process::Sleeper;
use crate::common::state_db;

fn run(home: &Path, args: &[&str]) -> Output {
    crate::common::process::run_in(home, args)
}

fn acquire(home: &Path, session: &str, owner: &Sleeper) -> String {
    crate::common::process::acquire_for(home, None, session, owner)
}

/// The `what to do:` line of a refusal on stderr.
fn advice(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    err.lines().find_map(|l| l.strip_prefix("what to do: ")).unwrap_or_else(|| panic!("no advice in {err}")).to_owned()
}

/// A full cap: the advice names the leak suspect (its session ended a day ago), not the
/// oldest lease, which is healthy and in use; it found the oldest before.
#[test]
fn a_full_caps_advice_names_the_leak_suspect_not_the_oldest_lease() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    std::fs::write(home.join("config.yaml"), "max_concurrent_sessions: 2\n").expect("config");
    let (busy, leaked, asker) = (Sleeper::new(), Sleeper::new(), Sleeper::new());
    let oldest = acquire(home, "BUSY", &busy);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let suspect = acquire(home, "GONE", &leaked);
    // Both taken before the session ended (a lease taken after is no leak).
    crate::common::backdate_leases(home, 2.0 * 86_400.0);
    state_db(home, &[("BUSY", None), ("GONE", Some(86_400.0))]);
    let out = run(home, &["acquire", "NEW", "--owner-pid", &asker.pid_arg()]);
    assert_eq!(out.status.code(), Some(4));
    let said = advice(&out);
    assert!(said.contains(&format!("force-release {suspect} --live`")), "{said}");
    assert!(said.contains("session ended 1d00h ago"), "says why: {said}");
    assert!(!said.contains(&oldest), "the healthy oldest lease is not offered: {said}");
}

/// Every holder healthy: it says so, and gives this very command with --wait.
#[test]
fn with_every_holder_healthy_the_advice_is_to_wait_with_the_command_that_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    std::fs::write(home.join("config.yaml"), "max_concurrent_sessions: 1\n").expect("config");
    let (holder, asker) = (Sleeper::new(), Sleeper::new());
    let held = acquire(home, "BUSY", &holder);
    state_db(home, &[("BUSY", None)]);
    let out = run(home, &["acquire", "NEW", "--owner-pid", &asker.pid_arg()]);
    let said = advice(&out);
    assert!(said.contains("none looks leaked") && !said.contains(&held), "{said}");
    let wait = format!("acquire NEW --owner-pid {} --wait 60`", asker.pid_arg());
    assert!(said.contains(&wait) && said.contains("--home"), "{said}");
    // A `run` refused by another holder of the same session, a moment in.
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let first = Sleeper::new();
    acquire(home, "JOB", &first);
    let out = run(home, &["run", "JOB", "--", "true"]);
    assert_eq!(out.status.code(), Some(3));
    let said = advice(&out);
    assert!(said.contains("live and in use") && !said.contains("force-release"), "{said}");
    assert!(said.contains("run JOB --wait 60 -- true`"), "{said}");
}

/// A session held by a live pid whose session ended (state.db): the refusal names that
/// holder as the leak suspect, among other leases of the same and other owners; a
/// holder in use is not one.
#[test]
fn a_held_sessions_advice_names_its_holder_when_it_looks_leaked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let (leaked, busy, asker) = (Sleeper::new(), Sleeper::new(), Sleeper::new());
    for i in 0..20 {
        acquire(home, &format!("OTHER-{i}"), if i % 2 == 0 { &leaked } else { &busy });
    }
    let held = acquire(home, "GONE", &leaked);
    let in_use = acquire(home, "BUSY", &busy);
    crate::common::backdate_leases(home, 2.0 * 86_400.0);
    state_db(home, &[("GONE", Some(3_600.0)), ("BUSY", None), ("OTHER-0", Some(86_400.0))]);
    let out = run(home, &["acquire", "GONE", "--owner-pid", &asker.pid_arg()]);
    assert_eq!(out.status.code(), Some(3));
    let said = advice(&out);
    assert!(said.contains("looks gone though its pid lives on"), "{said}");
    assert!(
        said.contains(&format!("force-release {held} --live`")) && said.contains("session ended 1h00m ago"),
        "{said}"
    );
    let out = run(home, &["acquire", "BUSY", "--owner-pid", &asker.pid_arg()]);
    let said = advice(&out);
    assert!(said.contains("live and in use") && !said.contains(&in_use), "{said}");
}

/// A live owner's lease refused without --live: the override is a command, with the home.
#[test]
fn a_live_owners_refusal_gives_the_override_as_a_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let owner = Sleeper::new();
    let id = acquire(home, "S", &owner);
    let out = run(home, &["force-release", &id[..8]]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("Pass --live"), "{err}");
    assert!(err.contains(&format!("`leasectl --home {} force-release {id} --live`", home.display())), "{err}");
}

/// `doctor` on a truncated registry gives the repair command, as it does for everything
/// else it finds; `doctor --repair --force` does not then say it NEEDS --force.
#[test]
fn doctor_gives_the_repair_command_and_a_forced_repair_does_not_ask_for_force() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let owner = Sleeper::new();
    acquire(home, "S", &owner);
    let path = home.join("runtime/active_sessions.json");
    let text = std::fs::read_to_string(&path).expect("registry");
    std::fs::write(&path, &text[..text.len() / 2]).expect("truncate");
    let out = run(home, &["doctor"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("INVALID"), "{said}");
    assert!(said.contains(&format!("`leasectl --home {} doctor --repair` repairs it", home.display())), "{said}");
    let out = run(home, &["doctor", "--repair", "--force", "--yes"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!said.contains("NEEDS --force"), "{said}");
}
