//! `run`: the lease covers all of CMD's work. No successor is granted while any process
//! CMD started still runs: not when CMD leaves processes behind, not when leasectl is
//! killed (SIGKILL included), not when they leave CMD's process group or session.

use crate::common;

use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::process::{Home, WAIT, str_of, wait_for};
use rustix::event::{PollFd, PollFlags, poll};
use rustix::process::{Pid, PidfdFlags, pidfd_open};

/// A process CMD leaves behind: it writes its pid to `file`, ignores SIGTERM (so only the
/// keeper's SIGKILL ends it early) and sleeps `secs`. `setsid` puts it in a session
/// (and process group) of its own.
fn leftover(file: &Path, secs: u32, setsid: bool) -> String {
    let f = file.display();
    let body = format!("trap '' TERM; echo \\$\\$ > {f}.tmp; mv {f}.tmp {f}; exec sleep {secs}");
    let start = if setsid { "setsid -f sh" } else { "sh" };
    format!("{start} -c \"{body}\" &")
}

/// The process whose pid `file` holds (once written), pinned by a pidfd.
struct Watched {
    pid: u32,
    fd: OwnedFd,
}

impl Watched {
    fn from_file(file: &Path) -> Watched {
        let pid: u32 = wait_for(&format!("{} to be written", file.display()), || {
            fs::read_to_string(file).ok()?.trim().parse().ok()
        });
        let fd = pidfd_open(Pid::from_raw(pid as i32).expect("a pid"), PidfdFlags::empty()).expect("pidfd_open");
        Watched { pid, fd }
    }

    /// A pidfd polls readable once its process has exited.
    fn ended(&self) -> bool {
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        poll(&mut fds, Some(&rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 })).expect("poll") > 0
    }
}

fn path_in(home: &Home, name: &str) -> PathBuf {
    home.path().join(name)
}

/// The seed's failure, reproduced: `run S -- sh -c 'sleep & wait'`, then SIGKILL leasectl.
/// The next acquire must be refused for as long as the left-behind process runs.
#[test]
fn sigkill_of_leasectl_never_frees_the_session_while_cmds_work_runs() {
    let home = Home::new();
    let file = path_in(&home, "left");
    let script = format!("{} wait", leftover(&file, 60, false));
    let mut run = home.spawn("run S", &["run", "S", "--json", "--", "sh", "-c", &script]);
    let grant = run.err_json_line();
    assert_eq!(grant["granted"], true, "{grant}");
    let left = Watched::from_file(&file);
    run.signal(libc::SIGKILL);
    run.wait();
    let killed = Instant::now();
    let mut refusals = 0;
    loop {
        let out = home.run(&["acquire", "S", "--json"]);
        if out.status.code() == Some(0) {
            assert!(
                left.ended(),
                "session S was granted to {} while pid {} (left by CMD) still runs",
                str_of(&out.json(), "lease_id"),
                left.pid
            );
            break;
        }
        out.expect_exit(3);
        refusals += 1;
        assert!(killed.elapsed() < WAIT, "the work was never stopped: pid {} runs on", left.pid);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(refusals > 0, "the session was never refused while the work ran");
    eprintln!("granted {:?} after the SIGKILL, {refusals} refusals before", killed.elapsed());
}

/// CMD exits at once, leaving two processes, one in a session of its own: the lease is
/// held, and `run` waits, until both end; then it exits with CMD's status.
#[test]
fn processes_cmd_leaves_behind_hold_the_lease_until_they_end_setsid_included() {
    let home = Home::new();
    let (a, b) = (path_in(&home, "a"), path_in(&home, "b"));
    let script = format!("{} {} exit 7", leftover(&a, 1, false), leftover(&b, 2, true));
    let mut run = home.spawn("run S", &["run", "S", "--", "sh", "-c", &script]);
    let (a, b) = (Watched::from_file(&a), Watched::from_file(&b));
    // Every acquire while either still runs must be refused (CMD itself exited at once).
    let mut refusals = 0;
    while !(a.ended() && b.ended()) {
        let out = home.run(&["acquire", "S"]);
        if a.ended() && b.ended() && out.status.code() == Some(0) {
            break;
        }
        out.expect_exit(3);
        refusals += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(refusals > 10, "only {refusals} tries in the 2 s the leftovers ran");
    let out = run.finish();
    assert!(a.ended() && b.ended(), "run exited before its leftovers ended: {out:?}");
    out.expect_exit(7);
    let me = u64::from(std::process::id());
    let others: Vec<serde_json::Value> = home.entries().into_iter().filter(|e| e["pid"] != me).collect();
    assert!(others.is_empty(), "run released once all had ended: {others:?}");
}

/// A lease force-released under `run`: every process of the work is stopped (SIGTERM,
/// then SIGKILL after the grace), not only CMD; then `run` exits 6.
#[test]
fn a_lost_lease_stops_every_process_of_the_work() {
    let home = Home::new();
    let file = path_in(&home, "left");
    let script = format!("{} wait", leftover(&file, 60, true));
    let mut run = home.spawn("run S", &["run", "S", "--json", "--", "sh", "-c", &script]);
    let id = str_of(&run.err_json_line(), "lease_id").to_owned();
    let left = Watched::from_file(&file);
    home.run(&["force-release", &id, "--live"]).expect_exit(0);
    let out = run.finish();
    out.expect_exit(6);
    assert!(left.ended(), "pid {} (left by CMD, in its own session) was not stopped: {out:?}", left.pid);
}

/// SIGTERM to leasectl reaches every process of the work, not only CMD, and the lease
/// is released once they have ended.
#[test]
fn sigterm_reaches_every_process_of_the_work() {
    let home = Home::new();
    let file = path_in(&home, "left");
    let f = file.display();
    let script = format!("setsid -f sh -c 'echo $$ > {f}.tmp; mv {f}.tmp {f}; exec sleep 60'; sleep 60");
    let mut run = home.spawn("run S", &["run", "S", "--json", "--", "sh", "-c", &script]);
    run.err_json_line();
    let left = Watched::from_file(&file);
    run.signal(libc::SIGTERM);
    let out = run.finish();
    out.expect_exit(143);
    assert!(left.ended(), "pid {} got no SIGTERM: {out:?}", left.pid);
    assert_eq!(home.entries(), Vec::<serde_json::Value>::new());
}

/// Under `nohup` (SIGHUP ignored from the start) a hangup does not end `hold` or `run`:
/// the work goes on and the lease stays; SIGTERM still ends them.
#[test]
fn nohup_keeps_hold_and_run_through_a_hangup() {
    for (what, tail) in [("hold", &[][..]), ("run", &["--", "sleep", "30"][..])] {
        let home = Home::new();
        let mut args = vec![what, "S"];
        args.extend_from_slice(tail);
        // The real nohup: SIGHUP ignored, then leasectl exec'd (stdout is a pipe: no nohup.out).
        let mut cmd = std::process::Command::new("nohup");
        cmd.arg(common::process::BIN).arg("--home").arg(home.path()).args(&args).env_remove("HERMES_HOME");
        let mut proc = common::process::Proc::spawn(what, cmd);
        home.wait_entry_for("S");
        let lease_owner = home.entries()[0]["pid"].as_u64().expect("pid");
        // Both leasectl processes of `run` get the hangup, as a terminal's job would.
        proc.signal(libc::SIGHUP);
        let _ = rustix::process::kill_process(
            Pid::from_raw(lease_owner as i32).expect("pid"),
            rustix::process::Signal::HUP,
        );
        std::thread::sleep(Duration::from_millis(300));
        assert!(proc.running(), "{what} ended on a hangup under nohup");
        assert_eq!(home.entries().len(), 1, "{what}: the lease stays");
        proc.signal(libc::SIGTERM);
        proc.finish();
        assert_eq!(home.entries(), Vec::<serde_json::Value>::new(), "{what}: SIGTERM still releases");
    }
}

/// A SIGINT sent to leasectl with `kill` reaches CMD once (passed on through its pidfd,
/// not also as a member of the work).
#[test]
fn a_sigint_sent_with_kill_reaches_cmd_once() {
    let home = Home::new();
    let count = home.outside().join("sigints");
    let ready = home.outside().join("ready");
    let script = format!(
        "trap 'echo int >> {c}' INT; touch {r}; i=0; while [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done",
        c = count.display(),
        r = ready.display()
    );
    let mut run = home.spawn("run S", &["run", "S", "--", "sh", "-c", &script]);
    wait_for("CMD to be ready", || ready.exists().then_some(()));
    run.signal(libc::SIGINT);
    run.finish();
    let got = fs::read_to_string(&count).unwrap_or_default();
    assert_eq!(got.lines().count(), 1, "CMD got SIGINT {} time(s)", got.lines().count());
}

/// The processes whose command line holds `token` (one of its arguments).
fn processes_with(token: &str) -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == token.as_bytes()))
        })
        .collect()
}

/// `run` forks its keeper with the stop signals blocked, and each side unblocks them once
/// its handlers are in place. A SIGTERM at any moment of that start, to the process a
/// script started, is never lost (no `run` left waiting on CMD), leaves no lease and no
/// CMD behind.
#[test]
fn a_sigterm_during_runs_start_is_never_lost_and_leaves_nothing_behind() {
    for round in 0..24u64 {
        let home = Home::new();
        // CMD's $0: how its process is found, whoever its parent is by then.
        let token = home.outside().join(format!("cmd-{round}")).display().to_string();
        let mut run = home.spawn("run S", &["run", "S", "-q", "--", "sh", "-c", "sleep 30; :", &token]);
        std::thread::sleep(Duration::from_micros(round * 250));
        run.signal(libc::SIGTERM);
        let out = run
            .finish_within(Duration::from_secs(10))
            .unwrap_or_else(|o| panic!("round {round}: run went on after SIGTERM: {o:?}"));
        assert_ne!(out.status.code(), Some(0), "round {round}: {out:?}");
        // Killed before its handlers, the relay leaves a keeper that ends on its own.
        wait_for(&format!("round {round}: no lease and no CMD left"), || {
            (home.try_entries().is_none_or(|e| e.is_empty()) && processes_with(&token).is_empty()).then_some(())
        });
    }
}
