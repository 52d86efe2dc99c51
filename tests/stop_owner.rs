//! `leasectl stop`: a live owner ended, race-free, with real processes: by SIGTERM, by
//! SIGKILL after the grace, never a recycled pid (seen at the look, or reused between the
//! look and the signal), never another user's process without the right, on record.

use std::os::unix::process::ExitStatusExt as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::Reaped;
use crate::common::process::{Home, WAIT, str_of, wait_for};

fn start_time(pid: u32) -> f64 {
    leasectl::lease::owners::liveness::process_start_time(u64::from(pid)).expect("a running process's start time")
}

/// True while `pid` runs as the same process (same start time), zombies excluded.
fn runs(pid: u32, start: f64) -> bool {
    leasectl::lease::owners::liveness::process_start_time(u64::from(pid)).is_some_and(|t| (t - start).abs() < 0.001)
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

fn spawn(program: &str, args: &[&str]) -> Child {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn an owner")
}

/// A lease for `pid` (its recorded start time `start`) written as Hermes writes one.
fn entry(lease: &str, session: &str, pid: u32, start: f64) -> Value {
    crate::common::planted(lease, session, pid.into())
        .without_metadata()
        .start_time(start)
        .at(leasectl::lease::now() - 60.0)
        .value()
}

#[allow(dead_code)]
fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let until = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(Instant::now() < until, "pid {} did not exit", child.id());
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_live_owner_is_ended_by_sigterm_and_its_own_release_is_said() {
    let home = Home::new();
    let mut holder = home.spawn("hold S1", &["hold", "S1", "--surface", "cli"]);
    let lease = str_of(&home.wait_entry_for("S1"), "lease_id").to_owned();
    let dry = home.run(&["stop", "--session", "S1", "--dry-run"]);
    dry.expect_exit(0);
    assert!(dry.stdout.contains(&format!("pid {}", holder.pid())) && dry.stdout.contains("hold S1"), "{dry:?}");
    assert!(dry.stdout.contains("dry run: nothing signalled"), "{dry:?}");
    assert!(holder.running(), "a dry run signals nothing");

    let unasked = home.run(&["stop", "--session", "S1"]);
    unasked.expect_exit(2);
    assert!(unasked.stderr.contains("pass --yes"), "no terminal to ask on: {unasked:?}");
    assert!(holder.running());

    let out = home.run(&["stop", "--session", "S1", "--yes", "--json"]);
    out.expect_exit(0);
    let v = out.json();
    let owner = &v["owners"][0];
    assert_eq!(owner["pid"], u64::from(holder.pid()), "{v}");
    assert_eq!(owner["ending"], "terminated", "{v}");
    assert_eq!(owner["signals"].as_array().map(Vec::len), Some(1), "SIGTERM alone: {v}");
    assert_eq!(owner["signals"][0]["signal"], "SIGTERM");
    assert_eq!(owner["leases"][0]["lease_id"], lease.as_str());
    assert_eq!(owner["leases"][0]["how"], "released", "hold releases its lease on SIGTERM: {v}");
    let status = holder.wait();
    assert!(status.success(), "hold ended by SIGTERM exits 0 after its release: {status:?}");
    assert!(home.entries().is_empty(), "the registry is clean");

    // On record: the audit says who stopped what and how; events say `stopped`.
    let audit = std::fs::read_to_string(home.path().join("logs/leasectl-audit.jsonl")).expect("the audit file");
    let record: Value = serde_json::from_str(audit.lines().last().expect("a record")).expect("JSON");
    assert_eq!(record["action"], "stop");
    assert_eq!(record["removed"][0]["lease_id"], lease.as_str());
    assert_eq!(record["stopped"][0]["signals"][0]["signal"], "SIGTERM");
    assert!(record["stopped"][0]["took"].as_f64().is_some_and(|t| t >= 0.0), "{record}");
    let events = home.run(&["events", "--since", "10m", "--json"]);
    events.expect_exit(0);
    let stopped: Vec<Value> = events
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "stopped")
        .collect();
    assert_eq!(stopped.len(), 1, "one word for it, `stopped`: {events:?}");
    assert!(stopped[0].to_string().contains(&lease), "{events:?}");
}

#[test]
fn an_owner_that_ignores_sigterm_is_killed_after_the_grace_with_what_it_started() {
    let home = Home::new();
    // A shell that ignores SIGTERM (its sleep inherits that) and waits on its child.
    let shell = spawn("sh", &["-c", "trap '' TERM; sleep 30 & wait"]);
    let mut shell = Reaped(shell);
    let pid = shell.id().to_string();
    home.acquire_ok(&["S2", "--owner-pid", &pid]);
    let sleep = wait_for("the shell's sleep", || {
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
        children.split_whitespace().next().and_then(|c| c.parse::<u32>().ok())
    });
    let sleep_start = start_time(sleep);
    let began = Instant::now();
    let out = home.run(&["stop", "--session", "S2", "--grace", "1s", "--yes", "--json"]);
    out.expect_exit(0);
    let v = out.json();
    let owner = &v["owners"][0];
    assert_eq!(owner["ending"], "killed", "{v}");
    let signals: Vec<&str> =
        owner["signals"].as_array().into_iter().flatten().filter_map(|s| s["signal"].as_str()).collect();
    assert_eq!(signals, ["SIGTERM", "SIGKILL"], "{v}");
    let kill_after = owner["signals"][1]["after"].as_f64().expect("when SIGKILL went");
    assert!((1.0..3.0).contains(&kill_after), "SIGKILL after the grace of 1s: {v}");
    assert!(began.elapsed() >= Duration::from_secs(1));
    assert_eq!(owner["leases"][0]["how"], "pruned", "its lease removed once it was dead: {v}");
    let ended: Vec<u64> =
        owner["family_ended"].as_array().into_iter().flatten().filter_map(|m| m["pid"].as_u64()).collect();
    assert_eq!(ended, [u64::from(sleep)], "what it started ended with it: {v}");
    assert_eq!(shell.0.wait().expect("reaped").signal(), Some(libc::SIGKILL));
    assert!(!runs(sleep, sleep_start), "its sleep was killed too");
    assert!(home.entries().is_empty());
    let text = home.run(&["stop", "--session", "S2", "--yes"]);
    assert!(text.stderr.contains("no lease holds session S2"), "{text:?}");
}

#[test]
fn a_recycled_pid_is_never_signalled_and_the_refusal_says_so() {
    let home = Home::new();
    // A live process whose start time is not the one the lease records: another process.
    let mut stranger = Reaped(spawn("sleep", &["30"]));
    let start = start_time(stranger.id());
    let lease = "5eed0000000000000000000000000001";
    home.write_registry(serde_json::json!({"entries": [entry(lease, "S3", stranger.id(), start - 100.0)]}).to_string());
    let out = home.run(&["stop", "--session", "S3", "--yes"]);
    out.expect_exit(1);
    assert!(out.stderr.contains("not stopped, nothing signalled"), "{out:?}");
    assert!(out.stderr.contains("recycled") && out.stderr.contains("never signalled"), "{out:?}");
    assert!(out.stderr.contains("prune`"), "names what removes it: {out:?}");
    assert!(stranger.try_wait().expect("try_wait").is_none() && runs(stranger.id(), start), "not signalled");
    assert_eq!(home.lease_ids(), [lease], "nothing removed");
}

#[test]
fn a_dead_owners_lease_is_prunes_job() {
    let home = Home::new();
    let mut gone = spawn("sleep", &["30"]);
    let pid = gone.id().to_string();
    home.acquire_ok(&["S4", "--owner-pid", &pid]);
    gone.kill().expect("kill");
    gone.wait().expect("reap");
    let out = home.run(&["stop", "--session", "S4", "--yes", "--json"]);
    out.expect_exit(1);
    assert!(out.stderr.contains("not running") && out.stderr.contains("prune`"), "{out:?}");
    assert_eq!(home.entries().len(), 1, "stop removes nothing it did not end");
}

/// Writes `pid - 1` to ns_last_pid and forks until a `sleep` gets `pid` (other processes
/// of the machine may take it first).
fn sleeper_with_pid(pid: u32) -> Child {
    for _ in 0..500 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).expect("write ns_last_pid (root)");
        let mut child = spawn("sleep", &["30"]);
        if child.id() == pid {
            return child;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("no process got pid {pid} in 500 forks");
}

#[test]
#[ignore = "needs root (ns_last_pid, to reuse a pid) and --features failpoints; .ci/run runs it"]
fn a_pid_reused_between_the_look_and_the_signal_is_never_signalled() {
    assert!(rustix::process::geteuid().is_root(), "this test needs root");
    if !cfg!(feature = "failpoints") {
        panic!("this test needs --features failpoints (its pause between the look and the signal)");
    }
    let home = Home::new();
    let mut owner = spawn("sleep", &["30"]);
    let pid = owner.id();
    home.acquire_ok(&["S5", "--owner-pid", &pid.to_string()]);
    let go = home.outside().join("go");
    let mut cmd = home.cmd(&["stop", "--session", "S5", "--yes", "--json"]);
    cmd.env("LEASECTL_TEST_FAILPOINT", "stop-before-signal").env("LEASECTL_TEST_GO", &go);
    let stop = crate::common::process::Proc::spawn("stop S5", cmd);
    let waiting = home.outside().join("go.waiting");
    wait_for("stop to hold the owner's pidfd, before its signal", || waiting.exists().then_some(()));
    // The owner ends and its pid goes to another process, between the look and the signal.
    owner.kill().expect("kill");
    owner.wait().expect("reap");
    let mut reuser = Reaped(sleeper_with_pid(pid));
    let reuser_start = start_time(pid);
    std::fs::write(&go, b"").expect("go");
    let mut stop = stop;
    let out = stop.finish();
    out.expect_exit(0);
    let v = out.json();
    assert_eq!(v["owners"][0]["ending"], "replaced", "{v}");
    assert_eq!(v["owners"][0]["signals"].as_array().map(Vec::len), Some(0), "nothing signalled: {v}");
    assert!(reuser.try_wait().expect("try_wait").is_none() && runs(pid, reuser_start), "the new process runs on");
    assert_eq!(v["owners"][0]["leases"][0]["how"], "pruned", "the dead owner's lease removed: {v}");
    assert!(home.entries().is_empty());
}

#[test]
#[ignore = "needs root (to run the owner and the operator as two other real users); .ci/run runs it"]
fn another_users_owner_is_refused_for_a_non_root_operator() {
    assert!(rustix::process::geteuid().is_root(), "this test needs root");
    let home = Home::new();
    // The owner (nobody, uid 65534) makes its registry in the home; the operator (daemon,
    // uid 1) reads it.
    for dir in [home.outside(), home.path()] {
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).expect("chmod");
    }
    let as_user = |uid: &str, args: &[&str]| {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid", uid, "--regid", uid, "--clear-groups", "--"]);
        cmd.arg(crate::common::process::BIN).arg("--home").arg(home.path()).args(args).env_remove("HERMES_HOME");
        cmd
    };
    let holder = crate::common::process::Proc::spawn("hold as nobody", as_user("65534", &["hold", "S6"]));
    home.wait_entry_for("S6");
    let out = crate::common::process::Proc::run("stop as daemon", as_user("1", &["stop", "--session", "S6", "--yes"]));
    out.expect_exit(1);
    assert!(out.stderr.contains("runs as user nobody (uid 65534)"), "says who owns it: {out:?}");
    assert!(out.stderr.contains("`sudo -u nobody leasectl --home"), "and how to act as them: {out:?}");
    let mut holder = holder;
    assert!(holder.running(), "not signalled");
    // Root may: the same stop ends it.
    let root = home.run(&["stop", "--session", "S6", "--yes", "--json"]);
    root.expect_exit(0);
    assert_eq!(root.json()["owners"][0]["ending"], "terminated");
    holder.wait();
}

/// force-release of a live owner's lease says the danger in words and names stop: in its
/// refusal, in a dry run's warning, and after the fact (the owner runs on, untold).
#[test]
fn force_release_live_says_the_owner_keeps_running_and_names_stop() {
    let home = Home::new();
    let owner = crate::common::process::Sleeper::new();
    let lease = home.acquire_ok(&["S7", "--owner-pid", &owner.pid_arg()]);
    let refused = home.run(&["force-release", "--session", "S7"]);
    refused.expect_exit(1);
    assert!(refused.stderr.contains("(the safe way): `leasectl --home"), "{refused:?}");
    assert!(refused.stderr.contains("stop --session S7`"), "{refused:?}");
    let dry = home.run(&["force-release", "--session", "S7", "--live", "--dry-run"]);
    dry.expect_exit(0);
    assert!(dry.stderr.contains("The owner keeps running and is not told"), "{dry:?}");
    assert!(dry.stderr.contains(&format!("stop {lease}`")), "{dry:?}");
    let done = home.run(&["force-release", "--session", "S7", "--live"]);
    done.expect_exit(0);
    assert!(done.stderr.contains("The owner keeps running and is not told"), "{done:?}");
    assert!(done.stderr.contains(&format!("end pid {} yourself", owner.pid())), "{done:?}");
    assert!(!done.stderr.contains(&format!("stop {lease}")), "no stop of a lease that is gone: {done:?}");
}

/// A `leasectl run` owner: the keeper holds the lease and CMD runs under it; stop ends the
/// keeper, which stops CMD and releases, and says CMD ended with it.
#[test]
fn a_run_owner_is_stopped_with_its_command_and_stop_says_what_ended() {
    let home = Home::new();
    let mut run = home.spawn("run S8 -- sleep 30", &["run", "S8", "--", "sleep", "30"]);
    let entry = home.wait_entry_for("S8");
    let keeper = entry["pid"].as_u64().expect("the keeper's pid");
    let sleep = wait_for("CMD under the keeper", || {
        let children = std::fs::read_to_string(format!("/proc/{keeper}/task/{keeper}/children")).ok()?;
        children.split_whitespace().next().and_then(|c| c.parse::<u32>().ok())
    });
    let dry = home.run(&["stop", "--session", "S8", "--dry-run"]);
    assert!(
        dry.stdout
            .contains(&format!("processes it started (ended with it if it ends them, or by SIGKILL): {sleep} (sleep)")),
        "{dry:?}"
    );
    let out = home.run(&["stop", "--session", "S8", "--yes", "--json"]);
    out.expect_exit(0);
    let v = out.json();
    assert_eq!(v["owners"][0]["pid"], keeper, "{v}");
    assert_eq!(v["owners"][0]["ending"], "terminated", "{v}");
    assert_eq!(v["owners"][0]["family_ended"][0]["pid"], u64::from(sleep), "{v}");
    assert_eq!(v["owners"][0]["leases"][0]["how"], "released", "the keeper released it: {v}");
    let status = run.wait();
    assert!(!status.success(), "run reports CMD stopped: {status:?}");
    assert!(home.entries().is_empty());
}

/// The preview says what an operator decides on: the owner's command and age, each
/// session's title and last activity from state.db, and the other leases that end with it.
#[test]
fn the_preview_names_the_sessions_from_state_db_and_what_else_ends_with_it() {
    let home = Home::new();
    crate::common::state_db(home.path(), &[("S9", None), ("S10", Some(60.0))]);
    let owner = crate::common::process::Sleeper::new();
    home.acquire_ok(&["S9", "--owner-pid", &owner.pid_arg()]);
    let other = home.acquire_ok(&["S10", "--owner-pid", &owner.pid_arg()]);
    let dry = home.run(&["stop", "--session", "S9", "--dry-run"]);
    dry.expect_exit(0);
    let text = dry.stdout.clone();
    assert!(
        text.contains(&format!("pid {}  sleep  user root", owner.pid())) || text.contains("  sleep  user "),
        "{dry:?}"
    );
    assert!(text.contains("command: sleep 30"), "{dry:?}");
    assert!(text.contains("session S9  (\"t\", last activity 5s ago)"), "{dry:?}");
    assert!(text.contains(&format!("also holds lease {}  session S10  (\"t\", last activity", &other[..8])), "{dry:?}");
    assert!(text.contains("ended 1m ago) (it ends with it)"), "{dry:?}");
    let plan = home.run(&["stop", "--session", "S9", "--dry-run", "--json"]).json();
    assert_eq!(plan["owners"][0]["sessions"][0]["title"], "t", "{plan}");
    assert_eq!(plan["owners"][0]["also_holds"][0]["entry"]["session_id"], "S10", "{plan}");
}
