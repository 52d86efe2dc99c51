//! Small untruths found by hand (issue 38), each as the test that failed first: totals
//! beside filters, marks on leases for a registry's state, a prefix too short, a hold that
//! never said how it ends, `(-)` for no owner, an invalid registry's path said twice.

use std::path::Path;
use std::process::{Output, Stdio};

use crate::common::process::{Sleeper, leasectl};

fn run(home: &Path, args: &[&str]) -> Output {
    crate::common::process::run_in(home, args)
}

fn acquire(home: &Path, session: &str, owner: &Sleeper) -> String {
    crate::common::process::acquire_for(home, None, session, owner)
}

/// `ls --liveness dead` over a registry over its cap: the line says how many of how many
/// leases it shows (it said `1 lease, 2/1 slots`), and no row is marked OVER CAP (every
/// live row was): that is the registry's state, on its line.
#[test]
fn ls_totals_are_true_beside_filters_and_over_cap_is_the_registrys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let (a, b) = (Sleeper::new(), Sleeper::new());
    let mut gone = Sleeper::new();
    acquire(home, "A", &a);
    acquire(home, "B", &b);
    acquire(home, "C", &gone);
    gone.kill();
    std::fs::write(home.join("config.yaml"), "max_concurrent_sessions: 1\n").expect("config");
    let out = run(home, &["ls", "--liveness", "dead"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1 of 3 leases shown, 2/1 slots  OVER CAP"), "{text}");
    let out = run(home, &["ls"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("3 leases, 2/1 slots  OVER CAP"), "{text}");
    assert_eq!(text.matches("OVER CAP").count(), 1, "said once, on the registry's line:\n{text}");
}

/// A prefix shorter than 4 characters is said to be one (it said "no lease 65c").
#[test]
fn a_prefix_too_short_is_said_to_be() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let owner = Sleeper::new();
    let id = acquire(home, "S", &owner);
    for args in [vec!["force-release", &id[..3]], vec!["--all-profiles", "force-release", &id[..3]]] {
        let out = run(home, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("4 characters"), "{args:?}: {err}");
    }
}

/// `hold` says on stderr how it ends: Ctrl-C releases (stdout keeps the grant alone).
#[test]
fn hold_says_ctrl_c_releases() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = leasectl(dir.path(), &["hold", "S"]);
    cmd.stdout(Stdio::piped());
    let mut holder = crate::common::process::Proc::spawn("hold", cmd);
    assert!(holder.line().starts_with("granted lease"), "stdout is the grant");
    holder.signal(libc::SIGINT);
    let out = holder.finish();
    assert!(out.stderr.contains("until Ctrl-C") && out.stderr.contains("which releases it"), "{out:?}");
}

/// An event whose owner has no name says nothing of it (it read `pid N (-) -`).
#[test]
fn an_event_with_no_owner_name_has_no_empty_parentheses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let mut owner = Sleeper::new();
    let id = acquire(home, "S", &owner);
    owner.kill();
    run(home, &["force-release", &id]);
    let out = run(home, &["events", "--since", "1h"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("force-released") && !text.contains("(-)"), "{text}");
}

/// An invalid registry's path is said once where its line names it already.
#[test]
fn an_invalid_registrys_path_is_said_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let owner = Sleeper::new();
    acquire(home, "S", &owner);
    let path = home.join("runtime/active_sessions.json");
    let text = std::fs::read_to_string(&path).expect("registry");
    std::fs::write(&path, &text[..text.len() / 2]).expect("truncate");
    let shown = path.display().to_string();
    for args in [vec!["ls"], vec!["prune"], vec!["acquire", "T", "--owner-pid", &owner.pid_arg()]] {
        let out = run(home, &args);
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(said.matches(&shown).count(), 1, "{args:?}: the path once:\n{said}");
        assert!(said.contains("not JSON"), "{args:?}: what is wrong:\n{said}");
    }
}

/// A home behind a directory this user cannot search is said to be unreachable, not to
/// be missing (it read "does not exist"): run as a real second user (uid 65534).
#[test]
fn a_home_that_cannot_be_reached_is_not_said_to_be_missing() {
    use std::os::unix::fs::PermissionsExt as _;
    use std::os::unix::process::CommandExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let locked = dir.path().join("locked");
    let home = locked.join("home");
    std::fs::create_dir_all(home.join("runtime")).expect("home");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let mut cmd = leasectl(&home, &["ls"]);
    cmd.uid(65534).gid(65534).stdin(Stdio::null());
    let out = cmd.output().expect("ls as uid 65534");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot reach the Hermes home") && err.contains("Permission denied"), "{err}");
    assert!(!err.contains("does not exist"), "{err}");
    // A home that is truly not there still says so.
    let out = run(&dir.path().join("nowhere"), &["ls"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}
