//! End-to-end tests of the `leasectl` binary: real processes, real files, real flock.
//!
//! Every test has its own temp home, always passes `--home`, and removes `HERMES_HOME`
//! from the child environment. Every wait has a deadline, and every spawned child is
//! killed and reaped when its guard drops, also when a test fails.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::common;
use common::process::{
    Home, Proc, describe, entries_of, leasectl as at_home, pump_after, registry_of, runtime_of, str_of, wait_for,
};

// ---------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------

/// `sleep SECS`, a process to own leases with `--owner-pid`.
fn sleeper(secs: &str) -> Proc {
    let mut cmd = Command::new("sleep");
    cmd.arg(secs);
    Proc::spawn(&format!("sleep {secs}"), cmd)
}

/// The pid of a process that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut p = sleeper("0");
    let status = p.wait();
    assert!(status.success(), "sleep 0: {}", describe(status));
    p.pid()
}

/// The signals a process catches, from `/proc/PID/status`.
fn caught_signals(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("SigCgt:"))?.trim();
    u64::from_str_radix(hex, 16).ok()
}

fn catches_sigterm(pid: u32) -> bool {
    caught_signals(pid).is_some_and(|mask| mask & (1 << (libc::SIGTERM - 1)) != 0)
}

/// Wait until `pid` has installed its SIGTERM handler (a SIGTERM before that kills it outright).
fn wait_catches_sigterm(pid: u32) {
    wait_for(&format!("pid {pid} to install a SIGTERM handler"), || catches_sigterm(pid).then_some(()));
}

/// The first child of `pid` (its main thread's) whose command name is `comm`.
fn wait_child_named(pid: u32, comm: &str) -> u32 {
    wait_for(&format!("pid {pid} to have a child running {comm}"), || {
        let children = fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
        children
            .split_whitespace()
            .filter_map(|c| c.parse::<u32>().ok())
            .find(|c| fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim_end() == comm))
    })
}

fn is_lease_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn test_pid() -> u64 {
    u64::from(std::process::id())
}

// ---------------------------------------------------------------------------
// Homes
// ---------------------------------------------------------------------------

/// Start `hold SESSION --json ARGS` processes, all spawned before any is read.
fn start_holders(home: &Home, sessions: &[String], extra: &[&str]) -> Vec<Proc> {
    sessions
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut args = vec!["hold", s.as_str(), "--json"];
            args.extend_from_slice(extra);
            home.spawn(&format!("hold #{i} ({s})"), &args)
        })
        .collect()
}

/// A pipe whose buffer is full: a child writing to its write end blocks until the
/// read end is drained. Returns (read end, write end), both blocking.
fn full_pipe() -> (File, OwnedFd) {
    // Close-on-exec, as pipe2(O_CLOEXEC) made it.
    let (read, write) = std::io::pipe().expect("pipe");
    let (read, write) = (File::from(OwnedFd::from(read)), File::from(OwnedFd::from(write)));
    let set_nonblocking = |f: &File, on: bool| {
        use rustix::fs::OFlags;
        let flags = rustix::fs::fcntl_getfl(f).expect("F_GETFL");
        let flags = if on { flags | OFlags::NONBLOCK } else { flags - OFlags::NONBLOCK };
        rustix::fs::fcntl_setfl(f, flags).expect("F_SETFL");
    };
    set_nonblocking(&write, true);
    let mut w = &write;
    for chunk in [&[b'.'; 4096][..], &b"."[..]] {
        loop {
            match w.write(chunk) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("filling the pipe: {e}"),
            }
        }
    }
    set_nonblocking(&write, false);
    (read, OwnedFd::from(write))
}

// ---------------------------------------------------------------------------
// 1-2: concurrent holders
// ---------------------------------------------------------------------------

#[test]
fn sixteen_concurrent_holds_on_one_session_grant_exactly_one() {
    let home = Home::new();
    let sessions = vec!["S".to_owned(); 16];
    let mut procs = start_holders(&home, &sessions, &[]);
    let first: Vec<Value> = procs.iter().map(Proc::json_line).collect();
    let winners: Vec<usize> = (0..procs.len()).filter(|i| first[*i]["granted"] == true).collect();
    assert_eq!(winners.len(), 1, "exactly one grant expected, got: {first:#?}");
    let w = winners[0];
    let winner_pid = u64::from(procs[w].pid());
    let grant = &first[w];
    assert_eq!(grant["pid"], winner_pid, "hold is its own owner: {grant}");
    assert_eq!(grant["session_id"], "S");
    assert_eq!(grant["recorded"], true);
    let lease_id = str_of(grant, "lease_id").to_owned();
    assert!(is_lease_id(&lease_id), "{lease_id}");

    for (i, p) in procs.iter_mut().enumerate().filter(|(i, _)| *i != w) {
        let out = p.finish();
        out.expect_exit(3);
        let refusal = &first[i];
        assert_eq!(refusal["granted"], false, "hold #{i}: {refusal}");
        assert_eq!(refusal["reason"], "SESSION_NOT_OWNED", "hold #{i}: {refusal}");
        assert_eq!(refusal["holder"]["lease_id"], lease_id.as_str(), "hold #{i}: {refusal}");
        assert_eq!(refusal["holder"]["pid"], winner_pid, "hold #{i}: {refusal}");
        assert_eq!(out.stdout, "", "hold #{i} printed more than one line");
    }

    let holder = &mut procs[w];
    assert!(holder.running(), "the holder must keep running");
    let entries = home.entries();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["lease_id"], lease_id.as_str());
    assert_eq!(entries[0]["pid"], winner_pid);

    wait_catches_sigterm(holder.pid());
    holder.signal(libc::SIGTERM);
    holder.finish().expect_exit(0);
    assert_eq!(home.entries(), Vec::<Value>::new(), "hold released on SIGTERM");
}

#[test]
fn sixteen_holds_on_distinct_sessions_with_max_3_grant_exactly_three() {
    let home = Home::new();
    let sessions: Vec<String> = (0..16).map(|i| format!("S{i}")).collect();
    let mut procs = start_holders(&home, &sessions, &["--max", "3"]);
    let first: Vec<Value> = procs.iter().map(Proc::json_line).collect();
    let winners: Vec<usize> = (0..procs.len()).filter(|i| first[*i]["granted"] == true).collect();
    assert_eq!(winners.len(), 3, "exactly three grants expected, got: {first:#?}");

    for (i, p) in procs.iter_mut().enumerate().filter(|(i, _)| !winners.contains(i)) {
        p.finish().expect_exit(4);
        let refusal = &first[i];
        assert_eq!(refusal["granted"], false, "hold #{i}: {refusal}");
        assert_eq!(refusal["reason"], "MAX_CONCURRENT_SESSIONS", "hold #{i}: {refusal}");
        let message = str_of(refusal, "message");
        assert!(message.contains("(3/3)"), "hold #{i}: {message}");
    }

    let mut want: Vec<u64> = winners.iter().map(|i| u64::from(procs[*i].pid())).collect();
    want.sort_unstable();
    let mut got: Vec<u64> =
        home.entries().iter().map(|e| e["pid"].as_u64().unwrap_or_else(|| panic!("pid in {e}"))).collect();
    got.sort_unstable();
    assert_eq!(got, want, "the registry holds exactly the three holders' pids");
    for i in &winners {
        assert_eq!(first[*i]["pid"], u64::from(procs[*i].pid()));
        assert!(procs[*i].running(), "holder #{i} must keep running");
    }

    for i in &winners {
        let p = &mut procs[*i];
        wait_catches_sigterm(p.pid());
        p.signal(libc::SIGTERM);
        p.finish().expect_exit(0);
    }
    assert_eq!(home.entries(), Vec::<Value>::new());
}

// ---------------------------------------------------------------------------
// 3: a killed holder
// ---------------------------------------------------------------------------

#[test]
fn sigkilled_holders_lease_is_pruned_by_the_next_acquire() {
    let home = Home::new();
    let mut holder = home.spawn("hold S", &["hold", "S", "--json"]);
    let grant = holder.json_line();
    assert_eq!(grant["granted"], true, "{grant}");
    let old = str_of(&grant, "lease_id").to_owned();
    assert_eq!(home.lease_ids(), vec![old.clone()]);
    holder.kill_and_reap();
    assert_eq!(home.lease_ids(), vec![old.clone()], "SIGKILL leaves the lease behind");

    let out = home.run(&["acquire", "S", "--json"]);
    out.expect_exit(0);
    let v = out.json();
    assert_eq!(v["granted"], true, "{out:?}");
    assert_eq!(v["pid"], test_pid());
    let pruned = v["pruned"].as_array().unwrap_or_else(|| panic!("pruned list: {v}"));
    assert_eq!(pruned.len(), 1, "{v}");
    assert_eq!(pruned[0]["lease_id"], old.as_str());
    assert_eq!(pruned[0]["pid"], u64::from(holder.pid()));
    let new = str_of(&v, "lease_id");
    assert_ne!(new, old);

    let entries = home.entries();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["lease_id"], new);
    assert_eq!(entries[0]["pid"], test_pid());
}

// ---------------------------------------------------------------------------
// 4-5: run
// ---------------------------------------------------------------------------

#[test]
fn run_gives_cmd_the_lease_releases_it_after_and_skips_cmd_on_refusal() {
    let home = Home::new();
    let out = home.run(&["run", "S", "--json", "--", "sh", "-c", "echo \"$LEASECTL_LEASE_ID $LEASECTL_SESSION_ID\""]);
    out.expect_exit(0);
    // stdout is CMD's alone; the grant is the first line on stderr.
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{out:?}");
    let first = out.stderr.lines().next().unwrap_or_default();
    let grant: Value = serde_json::from_str(first).unwrap_or_else(|e| panic!("grant line ({e}): {out:?}"));
    assert_eq!(grant["granted"], true);
    let lease_id = str_of(&grant, "lease_id");
    assert!(is_lease_id(lease_id), "{lease_id}");
    assert_eq!(lines[0], format!("{lease_id} S"), "CMD sees LEASECTL_LEASE_ID and LEASECTL_SESSION_ID");
    assert_eq!(home.entries(), Vec::<Value>::new(), "released after CMD exits");

    home.run(&["run", "S", "--", "sh", "-c", "exit 7"]).expect_exit(7);
    assert_eq!(home.entries(), Vec::<Value>::new());

    let mut holder = home.spawn("hold S", &["hold", "S", "--json"]);
    assert_eq!(holder.json_line()["granted"], true);
    let marker = home.path().join("MARKER");
    let marker_arg = marker.to_str().expect("temp path is UTF-8");
    let out = home.run(&["run", "S", "--", "touch", marker_arg]);
    out.expect_exit(3);
    assert!(out.stderr.starts_with("hermes-refusal-reason: SESSION_NOT_OWNED\n"), "{out:?}");
    assert!(!marker.exists(), "CMD must not run on refusal");
    assert_eq!(home.entries().len(), 1, "the refused run left the holder's lease alone");
    wait_catches_sigterm(holder.pid());
    holder.signal(libc::SIGTERM);
    holder.finish().expect_exit(0);
}

#[test]
fn run_forwards_sigterm_to_cmd_exits_143_and_releases() {
    let home = Home::new();
    let mut run = home.spawn("run S -- sleep 30", &["run", "S", "--", "sleep", "30"]);
    let entry = home.wait_entry_for("S");
    let keeper = wait_child_named(run.pid(), "leasectl");
    assert_eq!(entry["pid"], u64::from(keeper), "run's lease is owned by its keeper, leasectl's child");
    // CMD started (which run does after installing its forwarder), so SIGTERM goes to it.
    let sleep_pid = wait_child_named(keeper, "sleep");
    assert!(catches_sigterm(run.pid()), "run forwards SIGTERM, so it catches it");
    let started = Instant::now();
    run.signal(libc::SIGTERM);
    let out = run.finish();
    out.expect_exit(143);
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    assert_eq!(home.entries(), Vec::<Value>::new(), "released after CMD was killed");
    let cmdline = fs::read(format!("/proc/{sleep_pid}/cmdline")).unwrap_or_default();
    assert_ne!(cmdline, b"sleep\x0030\x00", "CMD (pid {sleep_pid}) was killed by the forwarded SIGTERM");
}

// A SIGTERM that arrives after the lease is written but before the grant is printed
// (once a real bug: the signal handlers were installed only after the grant line, so
// leasectl died by the default action, with no release). The window is held open with
// a full stdout pipe (the grant line blocks in write(2) after the registry is written);
// without it the bug showed in ~2-5% of tries.
fn sigterm_right_after_the_lease_is_written(args: &[&str], expected_exit: i32) {
    let home = Home::new();
    let (read_end, write_end) = full_pipe();
    let mut cmd = home.cmd(args);
    cmd.stdout(Stdio::from(write_end));
    let (go, wait_go) = mpsc::channel();
    let label = format!("{} (stdout full)", args.join(" "));
    let mut owner = Proc::spawn_with_stdout(&label, cmd, Some(pump_after(wait_go, read_end)));
    let entry = home.wait_entry_for("S");
    // hold owns its lease; run's keeper (its child) owns run's.
    let owner_pid = if args[0] == "run" { wait_child_named(owner.pid(), "leasectl") } else { owner.pid() };
    assert_eq!(entry["pid"], u64::from(owner_pid));
    let handler_installed = catches_sigterm(owner_pid);
    owner.signal(libc::SIGTERM);
    let _ = go.send(()); // drain the pipe now, so a correct leasectl can finish its write
    let out = owner.finish();
    assert_eq!(
        out.status.code(),
        Some(expected_exit),
        "{label} got SIGTERM after writing its lease (SIGTERM handler installed then: {handler_installed}); \
         registry afterwards: {:?}; {}",
        home.try_entries(),
        describe(out.status)
    );
    assert_eq!(home.entries(), Vec::<Value>::new(), "{label} released on SIGTERM");
}

#[test]
fn hold_releases_on_sigterm_that_arrives_right_after_the_lease_is_written() {
    sigterm_right_after_the_lease_is_written(&["hold", "S", "--json"], 0);
}

// `run`: CMD never runs, and the exit is 143 (CMD's SIGTERM status), not a death by signal.
#[test]
fn run_releases_on_sigterm_that_arrives_before_cmd_starts() {
    sigterm_right_after_the_lease_is_written(&["run", "S", "--json", "--", "sleep", "30"], 143);
}

// ---------------------------------------------------------------------------
// 6: JSON shapes and exit codes, command by command
// ---------------------------------------------------------------------------

#[test]
fn acquire_json_grant_and_refusals_3_4_5_with_exact_exit_codes() {
    let home = Home::new();
    let registry = home.registry();
    let registry_str = registry.to_str().expect("temp path is UTF-8");

    // Grant.
    let out = home.run(&["acquire", "S", "--surface", "tui", "--live-id", "tab-1", "--meta", "k=v", "--json"]);
    out.expect_exit(0);
    let g = out.json();
    assert_eq!(g["granted"], true);
    assert_eq!(g["recorded"], true);
    assert_eq!(g["session_id"], "S");
    assert_eq!(g["pid"], test_pid(), "the owner defaults to the calling process");
    assert_eq!(g["path"], registry_str);
    assert_eq!(g.get("replaced"), Some(&Value::Null));
    assert_eq!(g["pruned"], Value::Array(vec![]));
    let first = str_of(&g, "lease_id").to_owned();
    assert!(is_lease_id(&first), "{first}");
    let entries = home.entries();
    assert_eq!(entries.len(), 1);
    let e = &entries[0];
    assert_eq!(e["lease_id"], first.as_str());
    assert_eq!(e["session_id"], "S");
    assert_eq!(e["pid"], test_pid());
    assert_eq!(e["surface"], "tui");
    assert_eq!(e["metadata"]["live_session_id"], "tab-1");
    assert_eq!(e["metadata"]["k"], "v");
    assert!(e["process_start_time"].is_number(), "{e}");

    // 3: same session, another live id.
    let out = home.run(&["acquire", "S", "--live-id", "tab-2", "--json"]);
    out.expect_exit(3);
    let r = out.json();
    assert_eq!(r["granted"], false);
    assert_eq!(r["reason"], "SESSION_NOT_OWNED");
    assert_eq!(r["holder"]["lease_id"], first.as_str());
    assert!(str_of(&r, "message").starts_with("Session S already has a live owner (tui, pid "), "{r}");
    assert!(r["advice"].is_string(), "{r}");
    assert_eq!(home.lease_ids(), vec![first.clone()]);

    // Same writer (same owner, same live id) re-acquiring replaces its own entry.
    let out = home.run(&["acquire", "S", "--live-id", "tab-1", "--json"]);
    out.expect_exit(0);
    let g = out.json();
    assert_eq!(g["granted"], true);
    assert_eq!(g["replaced"], first.as_str());
    let second = str_of(&g, "lease_id").to_owned();
    assert_ne!(second, first);
    assert_eq!(home.lease_ids(), vec![second.clone()], "still one entry");

    // 4: --max 1 on another session.
    let out = home.run(&["acquire", "T", "--max", "1", "--json"]);
    out.expect_exit(4);
    let r = out.json();
    assert_eq!(r["granted"], false);
    assert_eq!(r["reason"], "MAX_CONCURRENT_SESSIONS");
    assert_eq!(r["holder"]["lease_id"], second.as_str(), "the oldest holder");
    assert_eq!(home.lease_ids(), vec![second.clone()]);

    // An owner pid that is not running: error, nothing written.
    let before = home.registry_bytes();
    let gone = dead_pid().to_string();
    let out = home.run(&["acquire", "U", "--owner-pid", &gone, "--json"]);
    out.expect_exit(1);
    assert!(out.stderr.contains(&format!("owner pid {gone} is not a running process")), "{out:?}");
    assert_eq!(home.registry_bytes(), before);

    // 5: an invalid registry is refused and left byte for byte as it was.
    let invalid = "{\"entries\": [}";
    home.write_registry(invalid);
    let out = home.run(&["acquire", "S2", "--json"]);
    out.expect_exit(5);
    let r = out.json();
    assert_eq!(r["granted"], false);
    assert_eq!(r["reason"], "SESSION_COORDINATION_UNAVAILABLE");
    assert_eq!(r.get("holder"), Some(&Value::Null));
    assert!(str_of(&r, "message").contains("The registry was left as it was"), "{r}");
    assert_eq!(home.registry_bytes(), invalid.as_bytes());

    // An empty session id is granted, not recorded, and writes nothing.
    let fresh = Home::new();
    let out = fresh.run(&["acquire", "", "--json"]);
    out.expect_exit(0);
    let g = out.json();
    assert_eq!(g["granted"], true);
    assert_eq!(g["recorded"], false);
    assert_eq!(g["session_id"], "");
    assert!(is_lease_id(str_of(&g, "lease_id")), "{g}");
    assert!(!fresh.registry().exists(), "no registry file for an empty session id");
}

#[test]
fn release_removes_then_reports_already_gone() {
    let home = Home::new();
    let id = home.acquire_ok(&["S"]);
    let out = home.run(&["release", &id, "--json"]);
    out.expect_exit(0);
    let v = out.json();
    assert_eq!(v["released"], true);
    assert_eq!(v["already_gone"], false);
    assert_eq!(v["lease_id"], id.as_str());
    assert_eq!(home.entries(), Vec::<Value>::new());

    let before = home.registry_bytes();
    let out = home.run(&["release", &id, "--json"]);
    out.expect_exit(0);
    let v = out.json();
    assert_eq!(v["released"], false);
    assert_eq!(v["already_gone"], true);
    assert_eq!(home.registry_bytes(), before);

    let out = home.run(&["release", &id]);
    out.expect_exit(0);
    assert!(out.stdout.contains("already gone"), "{out:?}");
}

#[test]
fn force_release_refuses_live_owners_without_live_and_removes_dead_owners() {
    let home = Home::new();
    let id = home.acquire_ok(&["S"]);
    let before = home.registry_bytes();

    // A live owner without --live: refused, file unchanged.
    let out = home.run(&["force-release", &id, "--json"]);
    out.expect_exit(1);
    assert!(out.stderr.contains("refusing to release a live owner's lease"), "{out:?}");
    assert_eq!(out.stdout, "");
    assert_eq!(home.registry_bytes(), before);

    // --dry-run --live: says it, changes nothing.
    let out = home.run(&["force-release", &id, "--live", "--dry-run", "--json"]);
    out.expect_exit(0);
    assert!(out.stderr.starts_with("WARNING: would release the lease of a LIVE owner"), "{out:?}");
    let v = out.json();
    assert_eq!(v["profile"], "root");
    assert_eq!(v["path"], home.registry().to_str().expect("UTF-8 path"));
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["live_owner"], true);
    let removed = v["removed"].as_array().unwrap_or_else(|| panic!("removed list: {v}"));
    assert_eq!(removed.len(), 1);
    assert_eq!(removed[0]["entry"]["lease_id"], id.as_str());
    assert_eq!(removed[0]["liveness"], "alive");
    assert_eq!(home.registry_bytes(), before);

    // --live: removed, with a WARNING.
    let out = home.run(&["force-release", "--session", "S", "--live", "--json"]);
    out.expect_exit(0);
    assert!(out.stderr.starts_with("WARNING: released the lease of a LIVE owner"), "{out:?}");
    let v = out.json();
    assert_eq!(v["dry_run"], false);
    assert_eq!(v["live_owner"], true);
    assert_eq!(v["removed"][0]["entry"]["lease_id"], id.as_str());
    assert_eq!(home.entries(), Vec::<Value>::new());

    // A dead owner's lease goes without --live, and without a warning.
    let mut owner = sleeper("100");
    let pid = owner.pid().to_string();
    let dead = home.acquire_ok(&["D", "--owner-pid", &pid]);
    owner.kill_and_reap();
    let out = home.run(&["force-release", &dead, "--json"]);
    out.expect_exit(0);
    assert_eq!(out.stderr, "", "no warning for a dead owner");
    let v = out.json();
    assert_eq!(v["live_owner"], false);
    assert_eq!(v["dry_run"], false);
    assert_eq!(v["removed"][0]["entry"]["lease_id"], dead.as_str());
    assert_eq!(v["removed"][0]["liveness"], "dead");
    assert_eq!(home.entries(), Vec::<Value>::new());

    // Unknown lease: error.
    let before = home.registry_bytes();
    let out = home.run(&["force-release", &dead, "--json"]);
    out.expect_exit(1);
    assert!(out.stderr.contains(&format!("no lease {dead}")), "{out:?}");
    assert_eq!(home.registry_bytes(), before);
}

#[test]
fn prune_dry_run_changes_nothing_and_prune_removes_only_dead_owners() {
    let home = Home::new();
    let live = home.acquire_ok(&["L"]);
    let mut owner = sleeper("100");
    let pid = owner.pid().to_string();
    let dead = home.acquire_ok(&["D", "--owner-pid", &pid]);
    owner.kill_and_reap();
    let before = home.registry_bytes();

    let out = home.run(&["prune", "--dry-run", "--json"]);
    out.expect_exit(0);
    let v = out.json();
    let regs = v["registries"].as_array().unwrap_or_else(|| panic!("registries: {v}"));
    assert_eq!(regs.len(), 1);
    assert_eq!(regs[0]["profile"], "root");
    assert_eq!(regs[0]["path"], home.registry().to_str().expect("UTF-8 path"));
    assert_eq!(regs[0]["dry_run"], true);
    assert_eq!(regs[0]["live_owner"], false);
    let removed = regs[0]["removed"].as_array().unwrap_or_else(|| panic!("removed: {v}"));
    assert_eq!(removed.len(), 1, "{v}");
    assert_eq!(removed[0]["entry"]["lease_id"], dead.as_str());
    assert_eq!(removed[0]["liveness"], "dead");
    assert_eq!(home.registry_bytes(), before, "--dry-run writes nothing");

    let out = home.run(&["prune", "--json"]);
    out.expect_exit(0);
    let v = out.json();
    assert_eq!(v["registries"][0]["dry_run"], false);
    assert_eq!(v["registries"][0]["removed"][0]["entry"]["lease_id"], dead.as_str());
    assert_eq!(v["registries"][0]["removed"].as_array().map(Vec::len), Some(1));
    assert_eq!(home.lease_ids(), vec![live.clone()], "the live owner's lease stays");

    let out = home.run(&["prune", "--json"]);
    out.expect_exit(0);
    assert_eq!(out.json()["registries"][0]["removed"], Value::Array(vec![]));
    assert_eq!(home.lease_ids(), vec![live]);
}

#[test]
fn doctor_exits_0_when_healthy_and_1_on_invalid_file_conflict_or_leftover_temp() {
    let home = Home::new();
    let out = home.run(&["doctor", "--json"]);
    out.expect_exit(0);
    let v = out.json();
    assert_eq!(v["ok"], true);
    assert_eq!(v["registries"][0]["exists"], false);

    home.acquire_ok(&["S"]);
    let out = home.run(&["doctor", "--json"]);
    out.expect_exit(0);
    let v = out.json();
    assert_eq!(v["ok"], true, "{out:?}");
    let r = &v["registries"][0];
    assert_eq!(r["profile"], "root");
    assert_eq!(r["exists"], true);
    assert_eq!(r["problems"], Value::Array(vec![]));
    assert_eq!(r["conflicts"], Value::Array(vec![]));
    assert_eq!(r["empty_session_ids"], Value::Array(vec![]));
    assert_eq!(r["stale"], Value::Array(vec![]));
    assert_eq!(r.get("lock_holder"), Some(&Value::Null));

    // Invalid JSON.
    home.write_registry("{\"entries\": [}");
    let out = home.run(&["doctor", "--json"]);
    out.expect_exit(1);
    let v = out.json();
    assert_eq!(v["ok"], false);
    let problems = v["registries"][0]["problems"].as_array().unwrap_or_else(|| panic!("problems: {v}"));
    assert_eq!(problems.len(), 1, "{v}");
    assert_eq!(problems[0]["rule"], "not_json");
    assert_eq!(problems[0].get("entry"), Some(&Value::Null));
    assert_eq!(problems[0].get("lease_id"), Some(&Value::Null));
    assert!(str_of(&problems[0], "message").starts_with("not JSON"), "{v}");
    home.run(&["doctor"]).expect_exit(1);

    // One session, two live owners.
    let mut other = sleeper("100");
    let (a, b) = ("a".repeat(32), "b".repeat(32));
    home.write_registry(format!(
        "{{\"entries\": [{{\"lease_id\": \"{a}\", \"pid\": {}, \"session_id\": \"S\"}}, \
         {{\"lease_id\": \"{b}\", \"pid\": {}, \"session_id\": \"S\"}}]}}",
        test_pid(),
        other.pid()
    ));
    let out = home.run(&["doctor", "--json"]);
    out.expect_exit(1);
    let v = out.json();
    let conflicts = v["registries"][0]["conflicts"].as_array().unwrap_or_else(|| panic!("conflicts: {v}"));
    assert_eq!(conflicts.len(), 1, "{v}");
    assert_eq!(conflicts[0]["session_id"], "S");
    let ids: Vec<&str> = conflicts[0]["leases"]
        .as_array()
        .unwrap_or_else(|| panic!("leases: {v}"))
        .iter()
        .map(|l| str_of(&l["entry"], "lease_id"))
        .collect();
    assert_eq!(ids, vec![a.as_str(), b.as_str()]);
    other.kill_and_reap();

    // A crashed writer's temp file older than 10 s.
    let healthy = Home::new();
    healthy.acquire_ok(&["S"]);
    let tmp = healthy.path().join("runtime").join(".active_sessions_crashed1.tmp");
    let f = File::create(&tmp).expect("create a temp file");
    f.set_modified(SystemTime::now() - Duration::from_secs(60)).expect("age the temp file");
    drop(f);
    let out = healthy.run(&["doctor", "--json"]);
    out.expect_exit(1);
    let v = out.json();
    assert_eq!(v["registries"][0]["leftover_temp_files"][0], tmp.to_str().expect("UTF-8 path"), "{v}");
}

#[test]
fn ls_reports_liveness_and_owner_and_never_touches_the_file() {
    let home = Home::new();
    let mut live_owner = sleeper("100");
    let mut dead_owner = sleeper("100");
    let live_pid = live_owner.pid().to_string();
    let dead_pid = dead_owner.pid().to_string();
    let live = home.acquire_ok(&["A", "--owner-pid", &live_pid, "--surface", "tui"]);
    let dead = home.acquire_ok(&["B", "--owner-pid", &dead_pid]);
    dead_owner.kill_and_reap();
    let before = home.registry_bytes();

    let out = home.run(&["ls", "--json"]);
    out.expect_exit(0);
    let v = out.json();
    let regs = v["registries"].as_array().unwrap_or_else(|| panic!("registries: {v}"));
    assert_eq!(regs.len(), 1);
    let r = &regs[0];
    assert_eq!(r["profile"], "root");
    assert_eq!(r["path"], home.registry().to_str().expect("UTF-8 path"));
    assert_eq!(r.get("cap"), Some(&Value::Null));
    assert_eq!(r.get("error"), Some(&Value::Null));
    let leases = r["leases"].as_array().unwrap_or_else(|| panic!("leases: {v}"));
    assert_eq!(leases.len(), 2, "{v}");

    let a = &leases[0];
    assert_eq!(a["entry"]["lease_id"], live.as_str());
    assert_eq!(a["entry"]["session_id"], "A");
    assert_eq!(a["entry"]["surface"], "tui");
    assert_eq!(a["entry"]["pid"], u64::from(live_owner.pid()));
    assert!(a["entry"]["process_start_time"].is_number(), "{a}");
    assert!(a["entry"]["started_at"].is_number(), "{a}");
    assert_eq!(a["liveness"], "alive");
    assert_eq!(a["owner"]["name"], "sleep");
    assert_eq!(a["owner"]["cmdline"], serde_json::json!(["sleep", "100"]));
    assert!(a["owner"]["rss_bytes"].is_u64(), "{a}");

    let b = &leases[1];
    assert_eq!(b["entry"]["lease_id"], dead.as_str());
    assert_eq!(b["liveness"], "dead");
    assert_eq!(b["liveness_detail"], "dead: pid gone");
    assert_eq!(b.get("owner"), Some(&Value::Null));

    let out = home.run(&["ls"]);
    out.expect_exit(0);
    assert!(out.stdout.contains("2 leases"), "{out:?}");
    assert_eq!(home.registry_bytes(), before, "ls never prunes or rewrites");
    live_owner.kill_and_reap();

    // An invalid registry: exit 1 with the error set, file untouched.
    home.write_registry("{\"entries\": [}");
    let out = home.run(&["ls", "--json"]);
    out.expect_exit(1);
    let v = out.json();
    assert!(str_of(&v["registries"][0], "error").contains("not JSON"), "{v}");
    assert_eq!(v["registries"][0]["leases"], Value::Array(vec![]));
    assert_eq!(home.registry_bytes(), b"{\"entries\": [}");
}

#[test]
fn profiles_have_their_own_registry_and_all_profiles_is_for_ls_prune_doctor_force_release_only() {
    let home = Home::new();
    let work_registry = home.path().join("profiles/work/runtime/active_sessions.json");
    home.make_profile("work");
    home.make_profile("alpha");
    let out = home.run(&["--profile", "work", "acquire", "S", "--json"]);
    out.expect_exit(0);
    let g = out.json();
    assert_eq!(g["path"], work_registry.to_str().expect("UTF-8 path"));
    assert!(work_registry.exists());
    assert!(!home.registry().exists(), "the root registry is untouched");
    let work_lease = str_of(&g, "lease_id").to_owned();
    let alpha_lease = home.acquire_ok(&["--profile", "alpha", "S"]);
    let root_lease = home.acquire_ok(&["S"]);

    let out = home.run(&["ls", "--all-profiles", "--json"]);
    out.expect_exit(0);
    let v = out.json();
    let regs = v["registries"].as_array().unwrap_or_else(|| panic!("registries: {v}"));
    let profiles: Vec<&str> = regs.iter().map(|r| str_of(r, "profile")).collect();
    assert_eq!(profiles, vec!["root", "alpha", "work"]);
    let leases: Vec<Vec<&str>> = regs
        .iter()
        .map(|r| {
            r["leases"]
                .as_array()
                .unwrap_or_else(|| panic!("leases: {r}"))
                .iter()
                .map(|l| str_of(&l["entry"], "lease_id"))
                .collect()
        })
        .collect();
    assert_eq!(leases, vec![vec![root_lease.as_str()], vec![alpha_lease.as_str()], vec![work_lease.as_str()]]);
    assert_eq!(regs[2]["path"], work_registry.to_str().expect("UTF-8 path"));

    home.run(&["prune", "--all-profiles", "--json"]).expect_exit(0);
    home.run(&["doctor", "--all-profiles", "--json"]).expect_exit(0);

    let snapshot = fs::read(&work_registry).expect("read the work registry");
    for args in [
        &["--all-profiles", "acquire", "S2"][..],
        &["--all-profiles", "release", &work_lease],
        &["--all-profiles", "hold", "S3"],
        &["--all-profiles", "run", "S4", "--", "true"],
    ] {
        let out = home.run(args);
        out.expect_exit(2);
        assert!(
            out.stderr
                .contains("--all-profiles works with ls, prune, doctor, force-release, stop, events and metrics only"),
            "{args:?}: {out:?}"
        );
    }
    assert_eq!(fs::read(&work_registry).expect("read the work registry"), snapshot);
    assert_eq!(home.lease_ids(), vec![root_lease]);
}

#[test]
fn config_yaml_cap_applies_and_max_overrides_it() {
    let home = Home::new();
    fs::write(home.path().join("config.yaml"), "max_concurrent_sessions: 1\n").expect("write config.yaml");
    home.acquire_ok(&["A"]);
    let out = home.run(&["acquire", "B", "--json"]);
    out.expect_exit(4);
    assert_eq!(out.json()["reason"], "MAX_CONCURRENT_SESSIONS");
    home.acquire_ok(&["B", "--max", "0"]);
    assert_eq!(home.entries().len(), 2);
    let v = home.run(&["ls", "--json"]).json();
    assert_eq!(v["registries"][0]["cap"], 1);

    let gateway = Home::new();
    fs::write(gateway.path().join("config.yaml"), "gateway:\n  max_concurrent_sessions: 1\n")
        .expect("write config.yaml");
    gateway.acquire_ok(&["A"]);
    gateway.run(&["acquire", "B", "--json"]).expect_exit(4);
    gateway.acquire_ok(&["B", "--max", "2"]);
}

// ---------------------------------------------------------------------------
// 7: refusal on stderr
// ---------------------------------------------------------------------------

#[test]
fn refusal_without_json_puts_the_reason_on_stderrs_first_line() {
    let home = Home::new();
    home.acquire_ok(&["S", "--live-id", "one"]);
    let out = home.run(&["acquire", "S", "--live-id", "two"]);
    out.expect_exit(3);
    assert_eq!(out.stderr.lines().next(), Some("hermes-refusal-reason: SESSION_NOT_OWNED"), "{out:?}");
    assert!(out.stderr.lines().nth(1).is_some_and(|l| l.starts_with("Session S already has a live owner")), "{out:?}");
    assert_eq!(out.stdout, "");
}

// ---------------------------------------------------------------------------
// 8: the lock
// ---------------------------------------------------------------------------

#[test]
fn lock_timeout_refuses_with_5_and_names_the_flock_process_as_holder() {
    let home = Home::new();
    let lock = home.lock_file();
    fs::create_dir_all(home.path().join("runtime")).expect("create runtime/");
    let mut cmd = Command::new("flock");
    cmd.arg(&lock).args(["sleep", "30"]).process_group(0);
    let mut flock = Proc::spawn("flock LOCK sleep 30", cmd);
    flock.group = true; // flock forks sleep, which inherits the locked descriptor: kill both
    wait_for("flock to hold the registry lock", || {
        let f = OpenOptions::new().append(true).create(true).open(&lock).expect("open the lock file");
        match f.try_lock() {
            Err(std::fs::TryLockError::WouldBlock) => Some(()),
            Ok(()) => None, // not taken yet; dropping `f` unlocks
            Err(std::fs::TryLockError::Error(e)) => panic!("try_lock: {e}"),
        }
    });
    let sleep_pid = wait_child_named(flock.pid(), "sleep");

    let started = Instant::now();
    let out = home.run(&["acquire", "S", "--lock-timeout", "0.3", "--json"]);
    let took = started.elapsed();
    out.expect_exit(5);
    assert!(took >= Duration::from_millis(300), "gave up after {took:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let r = out.json();
    assert_eq!(r["granted"], false);
    assert_eq!(r["reason"], "SESSION_COORDINATION_UNAVAILABLE");
    assert_eq!(r.get("holder"), Some(&Value::Null));
    let message = str_of(&r, "message");
    // The kernel records the process that called flock(2) (the `flock` tool), not the
    // `sleep` it forked, even though sleep shares the locked open file description.
    // The holder is named with its command, as lslocks does.
    assert!(message.contains(&format!("held by pid {} (flock)", flock.pid())), "flock pid {}: {message}", flock.pid());
    assert!(!message.contains(&format!("held by pid {sleep_pid}")), "{message}");
    assert!(!home.registry().exists(), "nothing written");

    let out = home.run(&["release", &"0".repeat(32), "--lock-timeout", "0.3"]);
    out.expect_exit(5);
    assert!(out.stderr.contains(&format!("held by pid {} (flock)", flock.pid())), "{out:?}");

    let out = home.run(&["doctor", "--json"]);
    out.expect_exit(0);
    assert_eq!(out.json()["registries"][0]["lock_holder"], u64::from(flock.pid()));
    assert_eq!(out.json()["registries"][0]["lock_holder_command"], "flock");
    // As the lock-timeout error does: the holder's command, and that it outlasted a watch.
    let out = home.run(&["doctor"]);
    let said = format!("lock held right now by pid {} (flock), still held after 1.0s of watching", flock.pid());
    assert!(out.stdout.contains(&said), "{out:?}");
}

/// `leasectl` with no command and no terminal prints what the console would show: the
/// root and every profile (the console's scope), as a table.
#[test]
fn no_command_without_a_terminal_lists_the_root_and_every_profile() {
    let home = Home::new();
    home.make_profile("work");
    home.acquire_ok(&["--profile", "work", "S-WORK"]);
    home.acquire_ok(&["S-ROOT"]);
    let out = home.run(&[]);
    out.expect_exit(0);
    assert!(out.stdout.contains("S-ROOT"), "{out:?}");
    assert!(out.stdout.contains("S-WORK"), "the work profile is listed too: {out:?}");
}

#[test]
fn the_console_and_the_demo_without_a_terminal_say_so_and_exit_2() {
    let home = Home::new();
    let tmp = home.outside().join("tmp");
    fs::create_dir_all(&tmp).expect("mkdir tmp");
    let mut tui = home.cmd(&["tui"]);
    tui.env("TMPDIR", &tmp);
    // The demo makes its own sandbox (under TMPDIR) when given no --home.
    let mut demo = Command::new(common::process::BIN);
    demo.arg("demo").env("TMPDIR", &tmp).env_remove("HERMES_HOME");
    for (what, cmd) in [("leasectl tui", tui), ("leasectl demo", demo)] {
        let out = Proc::run(what, cmd);
        out.expect_exit(2);
        // The hint names the same home, as the operator gave it.
        assert!(out.stderr.contains("needs a terminal") && out.stderr.contains(" ls`"), "{out:?}");
        assert_eq!(out.stderr.lines().count(), 1, "one line, no backtrace: {out:?}");
        assert!(!out.text().contains("panicked"), "{out:?}");
    }
    let left: Vec<_> = fs::read_dir(&tmp).expect("read tmp").flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "the demo left its sandbox behind: {left:?}");
}

#[test]
fn ls_shows_ages_in_the_consoles_format() {
    let home = Home::new();
    let owner = sleeper("30");
    home.acquire_ok(&["S-fresh", "--owner-pid", &owner.pid().to_string()]);
    let out = home.run(&["ls"]);
    out.expect_exit(0);
    let row = out.stdout.lines().find(|l| l.contains("S-fresh")).unwrap_or_else(|| panic!("no row: {out:?}"));
    let age_ok =
        row.split_whitespace().any(|w| w.strip_suffix('s').is_some_and(|n| n.parse::<u32>().is_ok_and(|n| n < 30)));
    assert!(age_ok && !row.contains(" 0m"), "a lease seconds old reads `Ns`, as in the console: {row:?}");
}

#[test]
fn a_blank_session_id_is_granted_unrecorded_and_never_takes_the_registry_down() {
    let home = Home::new();
    let owner = sleeper("30");
    let pid = owner.pid().to_string();
    home.acquire_ok(&["S-real", "--owner-pid", &pid]);
    // Whatever Python's str.strip() strips: space, tab, U+3000, U+00A0, U+001C.
    for blank in [" ", "\t", "\u{3000}", "\u{a0}", "\u{1c}", " \u{2003} "] {
        let out = home.run(&["acquire", blank, "--owner-pid", &pid, "--json"]);
        out.expect_exit(0);
        let v = out.json();
        assert_eq!(v["granted"], true, "{out:?}");
        assert_eq!(v["recorded"], false, "a blank id is like an empty one: {out:?}");
    }
    assert_eq!(home.entries().len(), 1, "nothing blank recorded");
    home.acquire_ok(&["S-next", "--owner-pid", &pid]);
    // A blank entry another writer left is removed by doctor --repair.
    let mut doc: Value = serde_json::from_slice(&home.registry_bytes()).expect("json");
    let mut blank = doc["entries"][0].clone();
    blank["session_id"] = Value::String(" ".into());
    blank["lease_id"] = Value::String("b1a4cb1a4cb1a4cb1a4cb1a4cb1a4cb1".into());
    doc["entries"].as_array_mut().expect("entries").push(blank);
    home.write_registry(doc.to_string());
    home.run(&["acquire", "S-after", "--owner-pid", &pid]).expect_exit(5);
    home.run(&["doctor", "--repair", "--yes"]).expect_exit(0);
    let sessions: Vec<String> = home.entries().iter().map(|e| str_of(e, "session_id").to_owned()).collect();
    assert_eq!(sessions, ["S-real", "S-next"], "the blank entry is gone, the others kept");
    home.acquire_ok(&["S-after", "--owner-pid", &pid]);
}

#[test]
fn a_mistyped_profile_or_home_is_an_error_and_nothing_is_created() {
    let home = Home::new();
    let owner = sleeper("30");
    let pid = owner.pid().to_string();
    for p in ["work", "ops"] {
        home.make_profile(p);
        home.acquire_ok(&["S", "--profile", p, "--owner-pid", &pid]);
    }
    let me = std::process::id().to_string();
    for cmd in [
        &["ls"][..],
        &["doctor"],
        &["prune"],
        &["force-release", "--session", "S"],
        &["acquire", "S", "--owner-pid", &me],
        &["run", "S", "--", "true"],
        &["hold", "S"],
    ] {
        let mut args = vec!["--profile", "wrk"];
        args.extend(cmd);
        let out = home.run(&args);
        out.expect_exit(1);
        assert!(out.stderr.contains("no profile 'wrk'") && out.stderr.contains("profiles: ops, work"), "{out:?}");
        assert!(!home.path().join("profiles").join("wrk").exists(), "{args:?} created the mistyped profile");
    }
    // A home that is not there is created by the fence alone (see the next test): every
    // other command refuses it and creates nothing, and a profile of it stays unknown.
    let missing = home.outside().join("no-such-home");
    let some_id = "0f3c9e2a5b7d4c1e8a6f2d9b0c4e7a13";
    for cmd in [
        &["ls"][..],
        &["ls", "--all-profiles"],
        &["prune"],
        &["doctor"],
        &["doctor", "--repair", "--yes"],
        &["metrics"],
        &["events", "--since", "1h"],
        &["force-release", "--session", "S"],
        &["force-release", some_id, "--live"],
        &["release", some_id],
        &["tui"],
        &["--profile", "work", "acquire", "S", "--owner-pid", &me],
        &["--profile", "work", "run", "S", "--", "true"],
        &["--profile", "work", "hold", "S"],
    ] {
        let mut c = Command::new(common::process::BIN);
        c.arg("--home").arg(&missing).args(cmd).env_remove("HERMES_HOME");
        let out = Proc::run("leasectl --home missing", c);
        out.expect_exit(1);
        let said = if cmd[0] == "--profile" { "no profile 'work'" } else { "does not exist" };
        assert!(out.stderr.contains(said), "{cmd:?}: {out:?}");
        assert!(!missing.exists(), "{cmd:?} created the mistyped home");
    }
    // The fence creates runtime/ in a profile that exists (`hermes profile create` made it).
    home.make_profile("lab");
    home.acquire_ok(&["S", "--profile", "lab", "--owner-pid", &pid]);
    assert!(home.path().join("profiles/lab/runtime").is_dir());
}

/// A fresh HERMES_HOME (a new container, a new service account; Hermes' seed test starts
/// from one) is created by acquire, hold and run, with any missing directory above it, as
/// Hermes' acquire creates it (`mkdir(parents=True)`).
#[test]
fn acquire_hold_and_run_create_a_fresh_home_as_hermes_does() {
    let base = tempfile::tempdir().expect("tempdir");
    let owner = sleeper("30");
    let pid = owner.pid().to_string();
    let fresh = |name: &str| base.path().join(name).join("deeper/.hermes");

    let by_flag = fresh("flag");
    let out = Proc::run("acquire", at_home(&by_flag, &["acquire", "S", "--owner-pid", &pid, "--json"]));
    out.expect_exit(0);
    assert_eq!(out.json()["path"], registry_of(&by_flag).display().to_string(), "{out:?}");
    assert_eq!(entries_of(&fs::read(registry_of(&by_flag)).expect("registry")).len(), 1);
    // The same fence on the new home: a second owner of S is refused as usual.
    let other = sleeper("30");
    let out = Proc::run("acquire", at_home(&by_flag, &["acquire", "S", "--owner-pid", &other.pid().to_string()]));
    out.expect_exit(3);
    // Made as mkdir makes a directory (0777 less the umask), as Python's mkdir does.
    let made = base.path().join("made-by-mkdir");
    fs::create_dir(&made).expect("mkdir");
    let mode = |p: &Path| fs::metadata(p).expect("stat").permissions().mode() & 0o7777;
    for dir in [base.path().join("flag"), base.path().join("flag/deeper"), by_flag.clone(), runtime_of(&by_flag)] {
        assert_eq!(mode(&dir), mode(&made), "{}", dir.display());
    }

    // From HERMES_HOME, as Hermes finds it.
    let by_env = fresh("env");
    let mut cmd = Command::new(common::process::BIN);
    cmd.env("HERMES_HOME", &by_env).args(["acquire", "S", "--owner-pid", &pid]);
    Proc::run("acquire (HERMES_HOME)", cmd).expect_exit(0);
    assert_eq!(entries_of(&fs::read(registry_of(&by_env)).expect("registry")).len(), 1);

    // run: the lease is held while CMD runs, and released after.
    let for_run = fresh("run");
    let script = format!("test -s {}", registry_of(&for_run).display());
    Proc::run("run", at_home(&for_run, &["run", "S", "-q", "--", "sh", "-c", &script])).expect_exit(0);
    assert!(entries_of(&fs::read(registry_of(&for_run)).expect("registry")).is_empty(), "released after CMD");

    // hold: holds on the new home until stopped.
    let for_hold = fresh("hold");
    let mut holder = Proc::spawn("hold", at_home(&for_hold, &["hold", "S", "--json"]));
    let held = holder.json_line();
    assert_eq!(held["session_id"], "S", "{held}");
    assert_eq!(entries_of(&fs::read(registry_of(&for_hold)).expect("registry")).len(), 1);
    holder.signal(libc::SIGTERM);
    let out = holder.finish();
    out.expect_exit(0);
    assert!(entries_of(&fs::read(registry_of(&for_hold)).expect("registry")).is_empty(), "released on SIGTERM");

    // An empty session id is granted and never recorded: nothing is written, nothing made.
    let untouched = fresh("empty");
    Proc::run("acquire ''", at_home(&untouched, &["acquire", "", "--owner-pid", &pid])).expect_exit(0);
    assert!(!base.path().join("empty").exists(), "an unrecorded grant created the home");

    // What cannot be a home is said, and nothing is made beside it.
    let file = base.path().join("a-file");
    fs::write(&file, "").expect("write");
    let out = Proc::run("acquire", at_home(&file.join(".hermes"), &["acquire", "S", "--owner-pid", &pid]));
    out.expect_exit(5);
    assert!(out.stderr.contains("a-file") && out.stderr.contains("directory"), "{out:?}");
    let link_home = base.path().join("link/.hermes");
    fs::create_dir(base.path().join("link")).expect("mkdir");
    std::os::unix::fs::symlink(base.path().join("nowhere"), &link_home).expect("symlink");
    let out = Proc::run("acquire", at_home(&link_home, &["acquire", "S", "--owner-pid", &pid]));
    out.expect_exit(5);
    assert!(out.stderr.contains("symlink"), "{out:?}");
    assert!(!base.path().join("nowhere").exists(), "a dangling symlink was followed");
}

/// Text from a home reaches a person's terminal escaped, from every command: a profile
/// directory named with escape sequences (set the title, clear the screen), a session id
/// and a crashed writer's temp file named so, an invalid registry in that profile. Only
/// JSON and metrics (exact, as documented) may carry them, and those only as their formats
/// encode them.
#[test]
fn escapes_planted_in_a_home_reach_no_terminal_from_any_command() {
    let home = Home::new();
    let owner = sleeper("30");
    let pid = owner.pid().to_string();
    let evil = "p\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{202e}x";
    let profile = home.make_profile(evil);
    let broken = home.make_profile("broken\u{1b}[5m");
    fs::create_dir_all(broken.join("runtime")).expect("runtime");
    fs::write(broken.join("runtime/active_sessions.json"), "{\"entries\": [\u{1b}[2J").expect("invalid registry");
    let s_id = home.acquire_ok(&["--profile", evil, "S\u{1b}[2J", "--owner-pid", &pid]);
    let mut gone = sleeper("30");
    home.acquire_ok(&["--profile", evil, "T", "--owner-pid", &gone.pid().to_string()]);
    gone.kill_and_reap();
    fs::write(profile.join("runtime/.active_sessions_\u{1b}[2Jx.tmp"), "{}").expect("temp file");
    let raw = ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'];
    let commands: Vec<Vec<&str>> = vec![
        vec!["--all-profiles", "ls"],
        vec!["--all-profiles", "ls", "-o", "wide"],
        vec!["--all-profiles", "ls", "--no-headers"],
        vec!["--all-profiles", "doctor"],
        vec!["--all-profiles", "prune", "--dry-run"],
        vec!["--all-profiles", "force-release", "--session", "S\u{1b}[2J", "--dry-run"],
        vec!["--all-profiles", "events", "--since", "1h"],
        vec!["--profile", evil, "acquire", "S\u{1b}[2J", "--owner-pid", "1"],
        vec!["--profile", evil, "ls"],
        vec!["--profile", evil, "doctor"],
        vec!["--profile", "no-such", "ls"],
        vec!["--profile", evil, "release", &s_id[..8]],
        vec!["--profile", evil, "run", "S\u{1b}[2J", "--", "true"],
        vec!["--profile", evil, "hold", "S\u{1b}[2J"],
        vec!["--profile", evil, "metrics"],
        // What a host sends (`leasectl serve` answering over --host) is shown the same way.
        vec!["--host", "w=local", "--all-profiles", "ls"],
        vec!["--host", "w=local", "--all-profiles", "doctor"],
        vec!["--all-profiles", "prune"],
        vec!["--all-profiles", "doctor", "--repair", "--yes"],
    ];
    for args in &commands {
        let out = home.run(args);
        if args.contains(&"metrics") {
            // Exact, as documented: Prometheus' text format escapes only \\, " and newlines.
            assert!(out.stdout.contains(evil), "metrics keeps the profile's name exact: {out:?}");
            continue;
        }
        for (what, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            assert!(!text.chars().any(|c| raw.contains(&c)), "{args:?} printed a raw escape on {what}: {text:?}");
        }
        // Each names the profile, the session or the file (events: there are none yet).
        let shown = out.stdout.contains("\\u{1b}") || out.stderr.contains("\\u{1b}");
        assert!(shown || args.contains(&"events"), "{args:?} shows it escaped: {out:?}");
    }
    // JSON stays exact: the name is there, as JSON writes it.
    let json = home.run(&["--all-profiles", "ls", "--json"]);
    assert!(json.stdout.contains(&serde_json::to_string(evil).expect("json")), "{json:?}");
}

/// HERMES_HOME, read by the argument parser as Hermes reads it: trimmed, empty or blank
/// meaning unset (then ~/.hermes), `--home` winning over it; and a hint made under it
/// leaves the home to the environment (it names `--home` only when `--home` was typed).
#[test]
fn hermes_home_is_read_as_hermes_reads_it_and_left_to_the_environment_in_hints() {
    let home = Home::new();
    let owner = sleeper("30");
    home.acquire_ok(&["S", "--owner-pid", &owner.pid().to_string()]);
    let fake_home = home.outside().join("user");
    fs::create_dir_all(fake_home.join(".hermes")).expect("~/.hermes");
    let ls = |hermes_home: &str, extra: &[&str]| {
        let mut cmd = Command::new(common::process::BIN);
        cmd.env("HERMES_HOME", hermes_home).env("HOME", &fake_home).args(extra).args(["ls", "--json"]);
        let out = Proc::run("ls", cmd);
        out.expect_exit(0);
        out.json()["registries"][0]["path"].as_str().unwrap_or_default().to_owned()
    };
    let registry = home.registry().display().to_string();
    let default = fake_home.join(".hermes/runtime/active_sessions.json").display().to_string();
    assert_eq!(ls(&format!("  {}\t", home.path().display()), &[]), registry, "trimmed");
    assert_eq!(ls("", &[]), default, "empty is unset");
    assert_eq!(ls("   ", &[]), default, "blank is unset");
    assert_eq!(ls("/nonexistent", &["--home", &home.path().display().to_string()]), registry, "--home wins");
    // A leak suspect (its session ended after the lease was taken), so that the advice
    // names a force-release.
    common::backdate_leases(home.path(), 2.0 * 86_400.0);
    common::state_db(home.path(), &[("S", Some(86_400.0))]);
    let mut cmd = Command::new(common::process::BIN);
    cmd.env("HERMES_HOME", home.path()).args(["acquire", "S", "--owner-pid", "1"]);
    let out = Proc::run("acquire under HERMES_HOME", cmd);
    out.expect_exit(3);
    assert!(out.stderr.contains("`leasectl force-release ") && !out.stderr.contains("--home"), "{out:?}");
    let mut cmd = Command::new(common::process::BIN);
    cmd.env_remove("HERMES_HOME").args(["--home", "", "ls"]);
    let out = Proc::run("--home ''", cmd);
    out.expect_exit(1);
    assert!(out.stderr.contains("--home needs a directory"), "{out:?}");
}

#[test]
fn names_from_the_registry_are_shown_escaped_for_people_and_exact_in_json() {
    let home = Home::new();
    let owner = sleeper("30");
    let pid = owner.pid().to_string();
    let hostile = "S\u{1b}[2J\u{202e}x\ny";
    home.acquire_ok(&[hostile, "--surface", "cli\u{7}", "--live-id", "t\u{9b}1", "--owner-pid", &pid]);
    let raw = ['\u{1b}', '\u{202e}', '\u{7}', '\u{9b}'];
    let clean = |what: &str, text: &str| {
        assert!(!text.chars().any(|c| raw.contains(&c)), "{what} printed a raw control character: {text:?}");
    };
    let ls = home.run(&["ls"]);
    ls.expect_exit(0);
    clean("ls", &ls.stdout);
    assert!(ls.stdout.contains("S\\u{1b}[2J\\u{202e}x\\u{a}y"), "{ls:?}");
    let json = home.run(&["ls", "--json"]);
    assert!(json.stdout.contains(&serde_json::to_string(hostile).expect("json")), "JSON stays exact: {json:?}");
    let other = sleeper("30");
    let refused = home.run(&["acquire", hostile, "--owner-pid", &other.pid().to_string()]);
    refused.expect_exit(3);
    clean("a refusal", &refused.text());
    let doctor = home.run(&["doctor"]);
    clean("doctor", &doctor.text());
    let dry = home.run(&["force-release", "--session", hostile, "--live", "--dry-run"]);
    clean("force-release", &dry.text());
}

#[test]
fn prune_keeps_a_clock_step_suspect_unless_asked() {
    let home = Home::new();
    let owner = sleeper("30");
    let pid = u64::from(owner.pid());
    let start = leasectl::lease::owners::liveness::process_start_time(pid).expect("start time");
    let at = leasectl::lease::now() - 60.0;
    let entry = |lease: &str, session: &str, pid: u64, pst: f64| {
        serde_json::json!({"lease_id": lease, "session_id": session, "pid": pid, "surface": "cli",
            "process_start_time": pst, "started_at": at, "updated_at": at})
    };
    // A wall-clock step of exactly 3 s makes a live owner look recycled.
    let stepped = entry("5737ed005737ed005737ed005737ed00", "S-step", pid, start + 3.0);
    let dead = entry("dead0000dead0000dead0000dead0000", "S-dead", 2_147_483_646, start);
    home.write_registry(serde_json::json!({"entries": [stepped, dead]}).to_string());
    let out = home.run(&["prune"]);
    out.expect_exit(0);
    assert!(out.text().contains("clock step") && out.text().contains("--include-clock-step"), "says why: {out:?}");
    let sessions: Vec<String> = home.entries().iter().map(|e| str_of(e, "session_id").to_owned()).collect();
    assert_eq!(sessions, ["S-step"], "the dead owner's lease goes, the clock-step suspect stays");
    // One verdict everywhere: doctor names the prune that removes it, and force-release
    // treats it as the live owner prune says it most likely is.
    let doctor = home.run(&["doctor"]);
    assert!(doctor.stdout.contains("prune --include-clock-step` removes it"), "{doctor:?}");
    assert!(!doctor.stdout.contains("prune` removes it"), "{doctor:?}");
    home.run(&["force-release", "5737ed00"]).expect_exit(1);
    assert_eq!(home.entries().len(), 1, "kept without --live");
    home.run(&["prune", "--include-clock-step"]).expect_exit(0);
    assert!(home.entries().is_empty(), "asked for, it goes too");
}

#[test]
fn doctor_reports_a_symlinked_registry_with_the_fix() {
    let home = Home::new();
    let owner = sleeper("30");
    home.acquire_ok(&["S", "--owner-pid", &owner.pid().to_string()]);
    let elsewhere = home.outside().join("real_sessions.json");
    fs::rename(home.registry(), &elsewhere).expect("move the registry");
    std::os::unix::fs::symlink(&elsewhere, home.registry()).expect("symlink");
    let out = home.run(&["doctor"]);
    out.expect_exit(1);
    assert!(out.stdout.contains("symlink") && out.stdout.contains("cp --remove-destination"), "{out:?}");
    let json = home.run(&["doctor", "--json"]);
    json.expect_exit(1);
    assert!(
        json.json()["registries"][0]["symlink_to"].as_str().is_some_and(|t| t.ends_with("real_sessions.json")),
        "{json:?}"
    );
}

#[test]
fn release_is_the_owners_a_live_stranger_is_refused() {
    let home = Home::new();
    let owner = sleeper("30");
    let pid = owner.pid().to_string();
    let id = home.acquire_ok(&["S", "--owner-pid", &pid]);
    let out = home.run(&["release", &id]);
    out.expect_exit(1);
    assert!(out.stderr.contains("force-release") && out.stderr.contains(&pid), "{out:?}");
    assert_eq!(home.lease_ids(), std::slice::from_ref(&id), "the live owner's lease stays");
    // Named by a prefix, the same refusal.
    let by_prefix = home.run(&["release", &id[..8]]);
    by_prefix.expect_exit(1);
    assert!(by_prefix.stderr.contains("force-release") && by_prefix.stderr.contains(&pid), "{by_prefix:?}");
    assert_eq!(home.lease_ids(), std::slice::from_ref(&id), "the live owner's lease stays");
    home.run(&["release", &id, "--owner-pid", &pid]).expect_exit(0);
    assert!(home.entries().is_empty());
    // The caller's own lease (leasectl's parent owns it by default) and a dead owner's go.
    let mine = home.acquire_ok(&["S-mine"]);
    home.run(&["release", &mine]).expect_exit(0);
    let mut later_dead = sleeper("30");
    let gone = home.acquire_ok(&["S-gone", "--owner-pid", &later_dead.pid().to_string()]);
    later_dead.kill_and_reap();
    home.run(&["release", &gone]).expect_exit(0);
    assert!(home.entries().is_empty());
}

#[test]
fn output_that_cannot_be_written_fails_and_an_unreported_grant_is_released() {
    let home = Home::new();
    let full = || File::options().write(true).open("/dev/full").expect("/dev/full");
    for args in [&["acquire", "S-full", "--json"][..], &["acquire", "S-full"]] {
        let mut cmd = home.cmd(args);
        cmd.stdout(full());
        let (_, no_lines) = mpsc::channel();
        let out = Proc::spawn_with_stdout(&format!("{args:?} > /dev/full"), cmd, Some(no_lines)).finish();
        assert_ne!(out.status.code(), Some(0), "a grant nobody saw is not a success: {out:?}");
        assert!(out.stderr.contains("released"), "{out:?}");
        assert!(home.try_entries().unwrap_or_default().is_empty(), "the unreported lease was released");
    }
    let mut ls = home.cmd(&["ls"]);
    ls.stdout(full());
    let (_, no_lines) = mpsc::channel();
    let out = Proc::spawn_with_stdout("ls > /dev/full", ls, Some(no_lines)).finish();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

#[test]
fn a_lease_removed_under_hold_or_run_is_noticed_and_exits_6() {
    let home = Home::new();
    // hold: force-release its lease; hold notices and exits 6.
    let mut hold = home.spawn("hold", &["hold", "S-hold", "--json"]);
    let grant = hold.json_line();
    let id = str_of(&grant, "lease_id").to_owned();
    home.run(&["force-release", &id, "--live"]).expect_exit(0);
    let out = hold.finish();
    out.expect_exit(6);
    assert!(out.stderr.contains("lost the lease"), "{out:?}");
    // run: its CMD is stopped, then it exits 6.
    let mut run = home.spawn("run", &["run", "S-run", "--json", "--", "sleep", "30"]);
    let grant = run.err_json_line();
    let id = str_of(&grant, "lease_id").to_owned();
    let sleep = wait_child_named(wait_child_named(run.pid(), "leasectl"), "sleep");
    home.run(&["force-release", &id, "--live"]).expect_exit(0);
    let out = run.finish();
    out.expect_exit(6);
    assert!(out.stderr.contains("lost the lease") && out.stderr.contains("CMD was stopped"), "{out:?}");
    assert!(
        !std::path::Path::new(&format!("/proc/{sleep}")).exists()
            || fs::read_to_string(format!("/proc/{sleep}/stat")).is_ok_and(|s| s.contains(") Z")),
        "CMD was stopped"
    );
}

#[test]
fn the_value_bound_counts_values_not_commas_in_strings_and_depth_is_named() {
    let home = Home::new();
    let me = std::process::id();
    // 1.1 million commas inside one string: one value, readable by Hermes (Python's json).
    let commas = ",".repeat(1_100_000);
    home.write_registry(format!(
        r#"{{"entries": [{{"lease_id": "c0mma000c0mma000c0mma000c0mma000", "session_id": "S", "pid": {me}, "metadata": {{"note": "{commas}"}}}}]}}"#
    ));
    let out = home.run(&["ls", "--json"]);
    out.expect_exit(0);
    assert!(out.stdout.contains("c0mma000c0mma000c0mma000c0mma000"), "the registry is read");
    // Nesting deeper than leasectl reads is refused naming the depth.
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    home.write_registry(format!(
        r#"{{"entries": [{{"lease_id": "deep0000deep0000deep0000deep0000", "session_id": "S", "pid": {me}, "metadata": {{"x": {deep}}}}}]}}"#
    ));
    let out = home.run(&["ls"]);
    out.expect_exit(1);
    assert!(out.text().contains("202 levels deep"), "the entry, its metadata and 200 lists: {out:?}");
}

/// `n` leases as Hermes writes them (json.dumps, sorted keys), entry `i` owned by the pid
/// and start time `owner(i, t)` gives (`t`: the entry's own time).
fn hermes_leases(n: u32, owner: impl Fn(u32, f64) -> (u32, Option<f64>)) -> String {
    let at = 1_795_990_758.0;
    let entries: Vec<String> = (0..n)
        .map(|i| {
            let t = at - f64::from(i) - 0.5;
            let (pid, start) = owner(i, t);
            let start = start.map_or("null".to_owned(), |s| format!("{s:?}"));
            format!(
                "{{\"lease_id\": \"{i:08x}beefcafe0123456789abcdef\", \"metadata\": {{\"live_session_id\": \"tab-{i}\"}}, \
                 \"pid\": {pid}, \"process_start_time\": {start}, \"session_id\": \"chat-{i}\", \"started_at\": {t:?}, \
                 \"surface\": \"cli\", \"updated_at\": {t:?}}}"
            )
        })
        .collect();
    format!("{{\"entries\": [{}]}}", entries.join(", "))
}

/// The peak memory (KB, GNU time's) of leasectl run on `home` with `args`.
fn peak_kb(home: &Path, args: &[&str]) -> u64 {
    let mut cmd = Command::new("/usr/bin/time");
    cmd.args(["-f", "%M"]).arg(common::process::BIN).arg("--home").arg(home).args(args);
    cmd.stdout(Stdio::null()).env_remove("HERMES_HOME");
    let (_, no_lines) = mpsc::channel();
    let out = Proc::spawn_with_stdout("time leasectl", cmd, Some(no_lines)).finish();
    out.stderr.lines().last().and_then(|l| l.trim().parse().ok()).unwrap_or_else(|| panic!("{out:?}"))
}

/// Whether `args` on `home` peaks under three times its registry, plus what the binary
/// takes on an empty home and a megabyte of allocator slack.
fn assert_within_three_times_the_file(home: &Home, args: &[&str]) {
    let size_kb = fs::metadata(home.registry()).expect("registry").len() / 1024;
    let base_kb = peak_kb(Home::new().path(), args);
    let used = peak_kb(home.path(), args);
    eprintln!("{args:?}: {used} KB peak for a {size_kb} KB registry (an empty home: {base_kb} KB)");
    let limit = 3 * size_kb + base_kb + 1024;
    assert!(used < limit, "{args:?}: {used} KB is over 3 x {size_kb} KB + {base_kb} KB + 1 MB");
}

#[test]
fn ls_json_on_fifty_thousand_leases_stays_within_three_times_the_file() {
    let home = Home::new();
    // Owners long gone.
    home.write_registry(hermes_leases(50_000, |_, _| (1, None)));
    assert_within_three_times_the_file(&home, &["ls", "--json"]);
}

#[test]
fn prune_of_fifty_thousand_dead_leases_stays_within_three_times_the_file() {
    let home = Home::new();
    // Owners long gone: pids above the kernel's largest.
    home.write_registry(hermes_leases(50_000, |i, t| (4_300_000 + i, Some(t))));
    // Each removed lease was a JSON tree before it was printed, for text output too:
    // 255 MB for this 12 MB registry.
    assert_within_three_times_the_file(&home, &["prune", "--dry-run"]);
    assert_within_three_times_the_file(&home, &["prune", "--dry-run", "--json"]);
}

/// `ls` reads state.db for every lease's activity and `doctor` for its live owners'
/// sessions. At 50,000 leases, 3 in 10 of dead owners, with a state.db of every session
/// (three messages each, a third ended hours ago), neither may take more than 15% more memory than a
/// dry run that reads, judges and plans over every lease of the same home
/// (`force-release --session S --dry-run`: it holds the leases it keeps beside those it
/// would remove, as `prune` did before it let go of the ones it keeps).
#[test]
fn ls_and_doctor_over_a_state_db_take_at_most_15_percent_more_memory_than_a_plan_over_fifty_thousand_leases() {
    let over = commands_over_a_plan_with_a_state_db(leasectl::lease::now());
    assert!(over.is_empty(), "over force-release --dry-run: {over:?}");
}

/// The same home an hour later than the idle threshold: every live owner's session has
/// gone idle or ended, so `doctor` names 35,000 leak suspects, each with its reason.
#[test]
fn doctor_with_every_live_lease_a_leak_suspect_takes_at_most_15_percent_more_memory_than_a_plan() {
    let three_hours_ago = leasectl::lease::now() - 3.0 * 3600.0;
    let over = commands_over_a_plan_with_a_state_db(three_hours_ago);
    assert!(over.is_empty(), "over force-release --dry-run: {over:?}");
}

/// Peaks of `ls` and `doctor` (text and JSON) more than 15% above `force-release
/// --dry-run`'s, on a home of 50,000 leases (3 in 10 of dead owners) whose state.db was
/// last written at `written`. The margin is the state.db reader's thread: on the system
/// allocator what it frees stays in its own arena (2–3 MB here, 7–10% of the plan; nothing
/// a few hundred leases would show), and two runs of one command differ by tens of KB.
fn commands_over_a_plan_with_a_state_db(written: f64) -> Vec<String> {
    let home = Home::new();
    let me = std::process::id();
    let start = leasectl::lease::owners::liveness::process_start_time(u64::from(me)).expect("own start time");
    home.write_registry(hermes_leases(
        50_000,
        |i, t| if i % 10 < 3 { (4_300_000 + i, Some(t)) } else { (me, Some(start)) },
    ));
    common::hermes_schema::many_sessions(&home.path().join("state.db"), 50_000, 3, written);
    // A live owner's session: the plan names it (and that it would need --live).
    let plan = peak_kb(home.path(), &["force-release", "--session", "chat-3", "--dry-run"]);
    [&["ls"][..], &["ls", "-o", "json"], &["doctor"], &["doctor", "--json"]]
        .into_iter()
        .filter_map(|args| {
            let used = peak_kb(home.path(), args);
            eprintln!("{args:?}: {used} KB at its peak; force-release --dry-run {plan} KB");
            (used > plan + plan * 15 / 100).then(|| format!("{args:?} {used} KB against {plan} KB"))
        })
        .collect()
}

#[test]
fn run_keeps_stdout_for_cmd_its_banner_on_stderr_and_q_silences_it() {
    let home = Home::new();
    let out = home.run(&["run", "S-out", "--", "echo", "from-cmd"]);
    out.expect_exit(0);
    assert_eq!(out.stdout, "from-cmd\n", "stdout is CMD's alone: {out:?}");
    assert!(out.stderr.contains("granted lease"), "the banner is on stderr: {out:?}");
    let quiet = home.run(&["run", "S-out", "-q", "--", "echo", "from-cmd"]);
    quiet.expect_exit(0);
    assert_eq!(quiet.stdout, "from-cmd\n");
    assert!(!quiet.stderr.contains("granted lease"), "-q silences the banner: {quiet:?}");
}

/// A one-shot command looks at its home through the directory it opened once: each file
/// it may read is one `stat` beside that directory, not a copy of the descriptor, a
/// `stat` of the home's owner and a close around it (as root that opening also walks the
/// home's path for planted links, twice). `ls` of an empty home is the start of every
/// listing, so strace counts what it makes.
#[test]
fn ls_of_an_empty_home_looks_at_each_of_its_files_once_from_the_home_it_opened() {
    let home = Home::new();
    let out = home.outside().join("ls.strace");
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-e", "trace=fcntl,fstat,newfstatat,statx,close,openat,open", "-o"]).arg(&out);
    cmd.arg(common::process::BIN).arg("--home").arg(home.path()).arg("ls").env_remove("HERMES_HOME");
    let ran = cmd.output().expect("strace");
    assert!(ran.status.success(), "{ran:?}");
    let trace = fs::read_to_string(&out).expect("strace's output");
    let count = |what: &str| trace.lines().filter(|l| l.contains(what)).count();
    let copies = count("F_DUPFD_CLOEXEC");
    let owner_looks = count("fstat(");
    let registry_looks = count("active_sessions.json\"");
    assert_eq!(
        (copies, registry_looks),
        (0, 1),
        "copies of the home's descriptor, looks at the registry; owner looks {owner_looks}:\n{trace}"
    );
    // The opened home's owner, once; as root also the check that the path still names it.
    assert!(owner_looks <= 2, "{owner_looks} fstat calls:\n{trace}");
}
