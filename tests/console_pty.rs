//! The console (`leasectl tui`) end to end: the real binary in a real pseudo-terminal,
//! its output fed into a terminal emulator (vt100), keys typed into the pty.
//!
//! Every test has its own temp home, always passes `--home`, and removes `HERMES_HOME`
//! from every child's environment. Every wait has a deadline of a few seconds, and every
//! child is killed and reaped when its guard drops, also when a test fails.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::common;
use common::pty::{BIN, Pty};
use common::pty::{lease_row, registry_entries, session_row};

const PRUNE_DIALOG: &str = "Prune removes this dead or recycled owner's lease:";
/// How long `q` may take to end the console, and then the terminal's restoring to show.
const QUIT_WITHIN: Duration = Duration::from_secs(3);
const RESTORED_WITHIN: Duration = Duration::from_secs(2);

// ---------------------------------------------------------------------------
// A lease holder: `leasectl hold`
// ---------------------------------------------------------------------------

/// `leasectl --home HOME hold SESSION --json`. Dropping it SIGKILLs and reaps it.
struct Holder {
    child: common::Reaped,
}

impl Holder {
    /// Start the holder and return it with its grant (the first stdout line, as JSON).
    fn start(home: &Path, session: &str) -> (Holder, Value) {
        let child = Command::new(BIN)
            .arg("--home")
            .arg(home)
            .args(["hold", session, "--json"])
            .env_remove("HERMES_HOME")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn leasectl hold");
        let mut holder = Holder { child: common::Reaped(child) };
        let stdout = holder.child.stdout.take().expect("stdout was piped");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("leasectl hold printed no grant within 5s"),
            Err(RecvTimeoutError::Disconnected) => panic!("leasectl hold's stdout reader died"),
        };
        let grant: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            let _ = holder.child.kill();
            let _ = holder.child.wait();
            let mut err = String::new();
            if let Some(mut s) = holder.child.stderr.take() {
                let _ = s.read_to_string(&mut err);
            }
            panic!("leasectl hold's first line is not JSON ({e}): {line:?}; stderr: {err}")
        });
        (holder, grant)
    }

    /// SIGKILL (no chance to release) and reap.
    fn kill_and_reap(&mut self) -> ExitStatus {
        self.child.kill_and_reap()
    }
}

// ---------------------------------------------------------------------------
// Reading the screen and the registry
// ---------------------------------------------------------------------------

/// The row reads `<short> cli <pid> <owner> …` and ends with the badge.
fn row_is(row: &str, pid: u64, owner: &str, badge: &str) -> bool {
    let words: Vec<&str> = row.trim_start_matches('│').split_whitespace().collect();
    let pid = pid.to_string();
    words.get(1..4) == Some(&["cli", pid.as_str(), owner][..]) && row.trim_end_matches(['│', ' ']).ends_with(badge)
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn console_follows_a_holder_from_alive_to_dead_and_prunes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let runtime: PathBuf = home.join("runtime");
    let registry = runtime.join("active_sessions.json");
    assert!(!runtime.exists(), "the home must start without runtime/");

    // 1-3. The console starts on a home with no runtime/ yet and draws. A syslog socket
    // of the test's own hears its audit records.
    let syslog_path = dir.path().join("syslog.sock");
    let syslog = std::os::unix::net::UnixDatagram::bind(&syslog_path).expect("a syslog socket");
    syslog.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let args = [OsStr::new("--home"), home.as_os_str(), OsStr::new("tui")];
    let mut console =
        Pty::spawn("console", &args, &[("LEASECTL_SYSLOG_SOCKET", syslog_path.as_os_str())], home, 30, 100);
    console.wait_for("the first drawing (leases table, no leases)", Duration::from_secs(5), |s| {
        s.contains("leases") && s.contains("no leases held") && s.contains("(no file yet)")
    });
    let lflag = console.local_flags();
    assert_eq!(lflag & (libc::ICANON | libc::ECHO), 0, "the console runs in raw mode (c_lflag {lflag:#o})");
    assert!(console.alternate_screen(), "the console runs on the alternate screen");
    assert!(!runtime.exists(), "the console itself must not create runtime/");

    // 4. A holder appears; it creates runtime/ and the registry.
    let (mut holder, grant) = Holder::start(home, "S-pty");
    assert_eq!(grant["granted"], Value::Bool(true), "grant: {grant}");
    let lease_id = grant["lease_id"].as_str().unwrap_or_else(|| panic!("no lease_id in {grant}")).to_owned();
    let pid = grant["pid"].as_u64().unwrap_or_else(|| panic!("no pid in {grant}"));
    assert_eq!(pid, u64::from(holder.child.id()), "hold owns its lease itself");
    let short: String = lease_id.chars().take(8).collect();

    // 5. The console picks up the new directory and file: the session, the pid, alive.
    // Only the watcher can bring it in: the tick re-judges owners but reads no file.
    let shown = console.wait_for("S-pty held by a live owner", Duration::from_secs(2), |s| {
        session_row(s, "S-pty") && lease_row(s, &short).is_some_and(|r| row_is(&r, pid, "leasectl", "● alive"))
    });
    eprintln!("step 5: lease shown alive {shown:?} after the holder's grant was read");

    // 6. The holder dies without releasing; no file changes, the liveness tick must notice.
    let status = holder.kill_and_reap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "holder: {status:?}");
    let died = console.wait_for("the lease row to show the owner dead", Duration::from_secs(3), |s| {
        lease_row(s, &short).is_some_and(|r| row_is(&r, pid, "-", "✖ dead")) && s.contains("✖ 1 dead")
    });
    eprintln!("step 6: lease shown dead {died:?} after SIGKILL (tick ~1s)");
    let entries = registry_entries(&registry).expect("the registry is valid JSON with entries");
    assert_eq!(entries.len(), 1, "the dead owner's lease is still recorded: {entries:?}");

    // 7. Prune: p asks, y prunes.
    console.send(b"p");
    console.wait_for("the prune dialog listing the dead lease", Duration::from_secs(3), |s| {
        s.contains(PRUNE_DIALOG)
            && s.lines().any(|l| l.contains(&format!("{short}  session S-pty  cli  pid {pid}  ✖ dead")))
    });
    console.send(b"y");
    let pruned =
        console.wait_for("the registry emptied and the lease gone from the screen", Duration::from_secs(3), |s| {
            registry_entries(&registry).is_some_and(|e| e.is_empty())
                && !s.contains(PRUNE_DIALOG)
                && lease_row(s, &short).is_none()
                && !session_row(s, "S-pty")
                && s.contains("no leases held")
                && s.contains(&format!("prune: removed 1 lease {short}"))
        });
    eprintln!("step 7: pruned and redrawn {pruned:?} after y");
    // The console's prune is on record: in the home's audit file and in syslog.
    let audit = std::fs::read_to_string(home.join("logs/leasectl-audit.jsonl")).expect("the audit file");
    let record: Value = serde_json::from_str(audit.trim_end()).expect("one JSON line");
    assert_eq!(record["action"], "prune");
    assert_eq!(record["command"], "leasectl console: prune");
    assert_eq!(record["removed"][0]["lease_id"], lease_id.as_str());
    let mut buf = vec![0u8; 65_536];
    let n = syslog.recv(&mut buf).expect("a syslog record");
    let sent = String::from_utf8_lossy(&buf[..n]);
    assert!(sent.starts_with("<85>") && sent.contains("\"command\":\"leasectl console: prune\""), "{sent}");

    // 8. q quits and restores the terminal.
    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}

#[test]
fn console_starts_and_quits_cleanly_at_80x24() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut console = Pty::console(dir.path(), 24, 80);
    console.wait_for("the empty lease table", Duration::from_secs(5), |s| s.contains("no leases held"));

    console.send(b"?");
    console.wait_for("the help dialog", Duration::from_secs(3), |s| {
        s.contains("force-release the selected lease") && s.contains("Esc closes this help.")
    });
    // A lone Esc (its own write, nothing after it) reads as the Esc key.
    console.send(b"\x1b");
    console.wait_for("the help dialog to close", Duration::from_secs(3), |s| {
        !s.contains("Esc closes this help.") && s.contains("no leases held")
    });

    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}

/// S on a live owner's lease, at 80x24 and at an operator's pace: the dialog shows what
/// will end and asks; n leaves it running; S again and y end it (SIGTERM), the row shows
/// ENDING, then is gone, and the log says the owner released its lease as it ended.
#[test]
fn s_stops_the_selected_owner_after_its_confirmation_at_80x24() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let (mut holder, grant) = Holder::start(home, "S-stop");
    let lease_id = grant["lease_id"].as_str().expect("a lease id").to_owned();
    let short: String = lease_id.chars().take(8).collect();
    let pid = holder.child.id();
    let mut console = Pty::console(home, 24, 80);
    console.wait_for("the holder's lease, alive", Duration::from_secs(5), |s| {
        lease_row(s, &short).is_some_and(|r| r.contains("● alive"))
    });
    // The footer names the key.
    assert!(console.text().contains("S stop"), "the footer names S: {}", console.text());
    // Down to the lease row (the session's group row is first), then S.
    console.send(b"j");
    thread::sleep(Duration::from_millis(600));
    console.send(b"S");
    console.wait_for("the stop dialog, saying what ends", Duration::from_secs(5), |s| {
        s.contains(" stop? ")
            && s.contains("End 1 process in root")
            && s.contains(&format!("pid {pid}"))
            && s.contains("session S-stop")
            && s.contains(&format!("y stop pid {pid}"))
    });
    thread::sleep(Duration::from_secs(1));
    console.send(b"n");
    console.wait_for("the dialog closed", Duration::from_secs(3), |s| !s.contains(" stop? "));
    thread::sleep(Duration::from_millis(800));
    assert!(holder.child.try_wait().expect("try_wait").is_none(), "n signals nothing");
    console.send(b"S");
    console.wait_for("the stop dialog again", Duration::from_secs(5), |s| s.contains(&format!("y stop pid {pid}")));
    thread::sleep(Duration::from_secs(1));
    console.send(b"y");
    console.wait_for("the row gone and the log's word for it", Duration::from_secs(5), |s| {
        lease_row(s, &short).is_none() && s.contains(&format!("stop lease {short}: pid {pid}"))
    });
    let status = holder.child.wait().expect("reaped");
    assert!(status.success(), "hold ended by SIGTERM after its release: {status:?}");
    assert!(registry_entries(&home.join("runtime/active_sessions.json")).is_some_and(|e| e.is_empty()));
    let audit = std::fs::read_to_string(home.join("logs/leasectl-audit.jsonl")).expect("the audit file");
    let record: Value = serde_json::from_str(audit.lines().last().expect("a record")).expect("JSON");
    assert_eq!(record["action"], "stop");
    assert_eq!(record["command"], format!("leasectl console: stop lease {short}"));

    // An owner that ignores SIGTERM: its row reads ENDING through the grace, then is gone.
    let stubborn = Command::new("sh")
        .args(["-c", "trap '' TERM; while :; do sleep 1; done"])
        .stdin(Stdio::null())
        .spawn()
        .expect("sh");
    let mut stubborn = common::Reaped(stubborn);
    let acquired = Command::new(BIN)
        .arg("--home")
        .arg(home)
        .args(["acquire", "S-stubborn", "--owner-pid", &stubborn.id().to_string(), "--json"])
        .env_remove("HERMES_HOME")
        .output()
        .expect("acquire");
    let granted: Value = serde_json::from_slice(&acquired.stdout).expect("acquire --json");
    let short2: String = granted["lease_id"].as_str().expect("a lease id").chars().take(8).collect();
    console.wait_for("the stubborn owner's lease", Duration::from_secs(5), |s| lease_row(s, &short2).is_some());
    console.send(b"g");
    console.send(b"j");
    thread::sleep(Duration::from_millis(600));
    console.send(b"S");
    console
        .wait_for("its stop dialog", Duration::from_secs(5), |s| s.contains(&format!("y stop pid {}", stubborn.id())));
    console.send(b"y");
    console.wait_for("its row marked ENDING", Duration::from_secs(3), |s| {
        lease_row(s, &short2).is_some_and(|r| r.contains("ENDING"))
    });
    console.wait_for("its row gone after SIGKILL", Duration::from_secs(12), |s| {
        lease_row(s, &short2).is_none() && s.contains("ended by SIGKILL")
    });
    assert_eq!(stubborn.wait().expect("reaped").signal(), Some(libc::SIGKILL));
    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}

/// A panic inside the console still restores the terminal (ratatui's panic hook):
/// the alternate screen is left and raw mode is off, and the process fails loudly.
#[test]
#[cfg_attr(not(feature = "failpoints"), ignore = "needs --features failpoints")]
fn console_restores_the_terminal_on_panic() {
    let home = tempfile::tempdir().expect("tempdir");
    let mut pty = Pty::spawn(
        "console",
        &[OsStr::new("--home"), home.path().as_os_str(), OsStr::new("tui")],
        &[("LEASECTL_TEST_FAILPOINT", OsStr::new("console-panic"))],
        home.path(),
        24,
        80,
    );
    let (status, _) = pty.wait_exit(Duration::from_secs(5));
    assert!(!status.success(), "a panic must not look like success: {status:?}");
    pty.check_terminal_restored(Duration::from_secs(2));
}

/// A lease acquired while the console's change feed is still being armed (failpoint
/// `watch-arming-slow`: two seconds), in a fresh home whose first read found no file, is
/// shown once the feed is on. The console once learnt of no change made before its
/// watches were in place, and showed the home empty until something else changed there.
#[test]
#[cfg_attr(not(feature = "failpoints"), ignore = "needs --features failpoints")]
fn a_lease_acquired_while_the_watch_is_arming_is_shown() {
    let home = tempfile::tempdir().expect("tempdir");
    let mut console = Pty::spawn(
        "console",
        &[OsStr::new("--home"), home.path().as_os_str(), OsStr::new("tui")],
        &[("LEASECTL_TEST_FAILPOINT", OsStr::new("watch-arming-slow"))],
        home.path(),
        24,
        80,
    );
    console.wait_for("the empty lease table", Duration::from_secs(5), |s| s.contains("no leases held"));
    acquire_as_me(home.path(), None, "S-first");
    console.wait_for("the lease acquired while arming", Duration::from_secs(8), |s| session_row(s, "S-first"));
    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}

/// `leasectl --home HOME [--profile P] acquire SESSION --owner-pid <this test>`, granted.
fn acquire_as_me(home: &Path, profile: Option<&str>, session: &str) {
    let mut cmd = Command::new(BIN);
    cmd.arg("--home").arg(home).env_remove("HERMES_HOME");
    if let Some(p) = profile {
        crate::common::make_profile(home.join("profiles").join(p));
        cmd.args(["--profile", p]);
    }
    let me = std::process::id().to_string();
    let out = cmd.args(["acquire", session, "--owner-pid", &me]).stdin(Stdio::null()).output().expect("run acquire");
    assert!(out.status.success(), "acquire {session}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn console_on_a_home_with_profiles_is_idle_when_nothing_changes_and_shows_a_profile_change() {
    // The usual Hermes layout: the root and a few profiles, each with its registry.
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    acquire_as_me(home, None, "S-root");
    for p in ["work", "ops", "lab"] {
        acquire_as_me(home, Some(p), &format!("S-{p}"));
    }
    let mut console = Pty::console(home, 40, 160);
    console.wait_for("the root's lease", Duration::from_secs(5), |s| session_row(s, "S-root"));

    // Idle: nothing changes, so the console should sleep. It once read profiles/ in a
    // loop, woken by its own reads (70-120 % of a core).
    thread::sleep(Duration::from_secs(1));
    let before = common::pty::cpu_time(console.pid());
    thread::sleep(Duration::from_secs(3));
    let used = common::pty::cpu_time(console.pid()) - before;
    assert!(used < Duration::from_millis(150), "the idle console used {used:?} of CPU in 3 s");

    // A change in a profile reaches the screen promptly.
    let mut tabs = 0;
    while !session_row(&console.text(), "S-work") {
        assert!(tabs < 4, "no tab shows profile work's lease:\n{}", console.text());
        console.send(b"\t");
        tabs += 1;
        thread::sleep(Duration::from_millis(200));
    }
    acquire_as_me(home, Some("work"), "S-work-new");
    let shown =
        console.wait_for("the new lease in profile work", Duration::from_secs(2), |s| session_row(s, "S-work-new"));
    eprintln!("a profile's new lease shown {shown:?} after the acquire returned");
    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}

#[test]
fn a_profile_created_while_the_console_runs_is_shown_and_the_tab_stays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    acquire_as_me(home, None, "S-root");
    acquire_as_me(home, Some("work"), "S-work");
    let mut console = Pty::console(home, 40, 160);
    console.wait_for("the root's lease", Duration::from_secs(5), |s| session_row(s, "S-root"));
    // Tabs: root, work, all. Go to "all".
    console.send(b"\t");
    thread::sleep(Duration::from_millis(200));
    console.send(b"\t");
    console.wait_for("the all tab", Duration::from_secs(3), |s| {
        session_row(s, "S-root") && session_row(s, "S-work") && s.contains("2 registries under")
    });
    // A new profile, its directories and its registry written at once by an acquire.
    acquire_as_me(home, Some("lab"), "S-lab");
    let shown = console.wait_for("the new profile's lease on the all tab", Duration::from_secs(3), |s| {
        session_row(s, "S-lab") && session_row(s, "S-root") && s.contains("3 registries under")
    });
    eprintln!("a new profile's first lease shown {shown:?} after the acquire returned");
    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}

/// More registries written in one burst than the change feed names one by one (it keeps
/// 64 paths a burst): every one is read again, none is left as it was before the burst.
#[test]
fn registries_written_in_one_burst_past_the_feeds_count_are_all_read() {
    const PROFILES: usize = 200;
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let runtime = |i: usize| home.join(format!("profiles/p{i:03}/runtime"));
    for i in 0..PROFILES {
        crate::common::make_profile(runtime(i));
        std::fs::write(runtime(i).join("active_sessions.json"), "{\"entries\": []}").expect("an empty registry");
    }
    let mut console = Pty::console(home, 40, 160);
    console.wait_for("the tabs", Duration::from_secs(10), |s| s.contains("more ›"));
    // To the all tab by its name.
    console.send(b"T");
    thread::sleep(Duration::from_millis(300));
    console.send(b"all\r");
    console.wait_for("the all tab", Duration::from_secs(5), |s| {
        s.contains(&format!("{} registries under", PROFILES + 1)) && s.contains("0 alive")
    });
    thread::sleep(Duration::from_secs(1));
    // One lease in each profile, each registry replaced as Hermes does (a temp file
    // renamed over it), all within a few milliseconds: one burst of the feed. The owner
    // is this test process (no start time recorded: alive while it runs).
    let me = std::process::id();
    for i in 0..PROFILES {
        let text = format!(
            "{{\"entries\": [{{\"lease_id\": \"{i:032x}\", \"pid\": {me}, \"process_start_time\": null, \
             \"session_id\": \"burst-{i}\", \"started_at\": 1796000000.5, \"surface\": \"cli\", \"updated_at\": 1796000000.5}}]}}"
        );
        let tmp = runtime(i).join(".active_sessions_burst.tmp");
        std::fs::write(&tmp, text).expect("the temp file");
        std::fs::rename(&tmp, runtime(i).join("active_sessions.json")).expect("rename over the registry");
    }
    let shown = console
        .wait_for("every lease of the burst", Duration::from_secs(5), |s| s.contains(&format!("{PROFILES} alive")));
    eprintln!("{PROFILES} registries written in one burst, all shown {shown:?} after");
    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}

#[test]
fn ctrl_c_and_sigterm_end_the_console_and_restore_the_terminal() {
    for how in ["ctrl-c", "sigterm"] {
        let home = tempfile::tempdir().expect("tempdir");
        let mut console = Pty::console(home.path(), 24, 80);
        console.wait_for("the first drawing", Duration::from_secs(5), |s| s.contains("no leases held"));
        if how == "ctrl-c" {
            console.send(b"\x03");
        } else {
            let sent = common::signals::kill(console.pid(), libc::SIGTERM);
            assert!(sent.is_ok(), "kill -TERM: {sent:?}");
        }
        let (status, _) = console.wait_exit(QUIT_WITHIN);
        assert!(status.success(), "{how}: the console exited with {status:?}");
        console.check_terminal_restored(RESTORED_WITHIN);
    }
}

#[test]
fn ctrl_c_at_a_terminal_reaches_run_s_command_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let count = home.join("sigints");
    // CMD counts the SIGINTs it gets, then ends by itself after about 2 s.
    let script = format!(
        "trap 'echo int >> {f}' INT; echo ready; i=0; while [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done",
        f = count.display()
    );
    let args = [
        OsStr::new("--home"),
        home.as_os_str(),
        OsStr::new("run"),
        OsStr::new("S"),
        OsStr::new("--"),
        OsStr::new("sh"),
        OsStr::new("-c"),
        OsStr::new(&script),
    ];
    let mut run = Pty::spawn("run", &args, &[], home, 24, 80);
    run.wait_for("CMD ready", Duration::from_secs(5), |s| s.contains("ready"));
    thread::sleep(Duration::from_millis(200));
    run.send(b"\x03");
    let _ = run.wait_exit(Duration::from_secs(10));
    let got = std::fs::read_to_string(&count).unwrap_or_default();
    assert_eq!(got.lines().count(), 1, "CMD got SIGINT {} time(s): {got:?}", got.lines().count());
}

#[test]
fn a_terminal_hangup_releases_hold_and_run_like_sigterm() {
    for (what, tail) in [("hold", &[][..]), ("run", &["--", "sleep", "30"][..])] {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path();
        let mut args = vec![OsStr::new("--home"), home.as_os_str(), OsStr::new(what), OsStr::new("S-hup")];
        args.extend(tail.iter().map(OsStr::new));
        let mut pty = Pty::spawn("hold", &args, &[], home, 24, 80);
        let registry = home.join("runtime").join("active_sessions.json");
        assert!(
            common::pty::eventually(Duration::from_secs(5), || registry_entries(&registry)
                .is_some_and(|e| e.len() == 1)),
            "{what}: the lease is taken"
        );
        pty.hang_up();
        let (status, _) = pty.wait_exit(Duration::from_secs(5));
        let left = registry_entries(&registry).unwrap_or_default();
        assert!(left.is_empty(), "{what}: a hangup releases the lease (exit {status:?}); left: {left:?}");
    }
}

/// TERM=dumb cannot show a full-screen interface: the console says so and lists what it
/// would show (as `less` and `htop` decline), never entering the alternate screen.
#[test]
fn a_dumb_terminal_gets_the_listing_not_the_console() {
    let home = tempfile::tempdir().expect("tempdir");
    let mut pty = Pty::spawn(
        "console",
        &[OsStr::new("--home"), home.path().as_os_str()],
        &[("TERM", OsStr::new("dumb"))],
        home.path(),
        24,
        80,
    );
    let (status, _) = pty.wait_exit(Duration::from_secs(5));
    assert!(status.success(), "{status:?}: {}", pty.text());
    pty.wait_for("the listing", Duration::from_secs(2), |s| s.contains("TERM=dumb") && s.contains("0 leases"));
    assert!(!pty.wrote(b"\x1b[?1049h"), "it never entered the alternate screen");
}

/// At a person's pace: `/` over a filter in force replaces it as typed (it used to append:
/// `S1` then `/S2` filtered on `S1S2`), and Ctrl-x does not act as x (no release dialog).
#[test]
fn slash_replaces_the_filter_and_ctrl_x_does_not_release() {
    let home = tempfile::tempdir().expect("tempdir");
    let entries = vec![
        dead_lease("a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1", "FIRST"),
        dead_lease("b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2", "OTHER"),
    ];
    write_leases(home.path(), entries);
    let mut console = Pty::console(home.path(), 30, 100);
    console.wait_for("both leases", Duration::from_secs(5), |s| s.contains("FIRST") && s.contains("OTHER"));
    let pace = Duration::from_millis(1500);
    console.send(b"/FIRST\r");
    console.wait_for("FIRST alone", Duration::from_secs(3), |s| s.contains("FIRST") && !s.contains("OTHER"));
    thread::sleep(pace);
    console.send(b"/");
    thread::sleep(pace);
    console.send(b"OTHER\r");
    console.wait_for("OTHER alone: the filter was replaced", Duration::from_secs(3), |s| {
        s.contains("OTHER") && !s.contains("FIRST")
    });
    thread::sleep(pace);
    // Ctrl-x is byte 0x18: bound to nothing, it opens no dialog, even after a tick or two.
    console.send(b"\x18");
    thread::sleep(Duration::from_millis(2500));
    assert!(!console.text().contains("force-release?"), "Ctrl-x released: {}", console.text());
    console.send(b"x");
    console.wait_for("x opens the release dialog", Duration::from_secs(3), |s| s.contains("force-release?"));
    console.send(b"n");
    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}

/// With 100,000 profiles the console is drawn at once and answers `q` within a second
/// while the registries are still being read (it once sat on "reading..." for over 75 s,
/// deaf to q, SIGTERM and a hangup: a list of tabs scanned for every tab, and every home's journal
/// looked for before the first frame).
#[test]
fn a_home_with_100_000_profiles_draws_at_once_and_answers_keys_sigterm_and_a_hangup_while_loading() {
    let home = tempfile::tempdir().expect("tempdir");
    let profiles = home.path().join("profiles");
    std::fs::create_dir(&profiles).expect("profiles");
    for n in 0..100_000 {
        let profile = profiles.join(format!("p{n:06}"));
        std::fs::create_dir(&profile).expect("a profile");
        std::fs::write(profile.join("config.yaml"), "").expect("its identity file");
    }
    let mut console = Pty::console(home.path(), 30, 120);
    let drawn = console.wait_for("the first screen", Duration::from_secs(5), |s| s.contains("leasectl"));
    eprintln!("first screen after {drawn:?}");
    thread::sleep(Duration::from_secs(2));
    console.send(b"q");
    let (status, took) = console.wait_exit(Duration::from_secs(5));
    eprintln!("q answered in {took:?}");
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_secs(1), "q took {took:?} while loading");
    // SIGTERM and the help key while loading, on the same home (its tabs take seconds).
    let mut console = Pty::console(home.path(), 30, 120);
    console.wait_for("the first screen", Duration::from_secs(5), |s| s.contains("leasectl"));
    thread::sleep(Duration::from_secs(1));
    console.send(b"?");
    let help = console.wait_for("the help, while loading", Duration::from_secs(1), |s| s.contains("Esc closes"));
    eprintln!("? answered in {help:?} while loading");
    console.send(b"\x1b");
    let loading = !console.text().contains("p099999");
    common::signals::kill(console.pid(), libc::SIGTERM).expect("SIGTERM to the console");
    let (_, took) = console.wait_exit(Duration::from_secs(5));
    eprintln!("SIGTERM answered in {took:?} (still loading: {loading})");
    assert!(took < Duration::from_secs(1), "SIGTERM took {took:?} while loading");
    // The terminal goes away while loading (window closed, ssh dropped): SIGHUP, and a
    // terminal that is gone. The console ends as on q, within a second.
    let mut console = Pty::console(home.path(), 30, 120);
    console.wait_for("the first screen", Duration::from_secs(5), |s| s.contains("leasectl"));
    thread::sleep(Duration::from_secs(1));
    console.hang_up();
    let (status, took) = console.wait_exit(Duration::from_secs(5));
    eprintln!("a hangup answered in {took:?} while loading: {status:?}");
    assert!(took < Duration::from_secs(1), "a hangup took {took:?} while loading");
}

/// The mouse, as a terminal reports it (SGR sequences written to the PTY), at a person's
/// pace: a click on a tab shows it, a click on a lease row selects it, the wheel moves
/// the selection; `m` gives the mouse back to the terminal, and the wheel does nothing then.
#[test]
fn the_mouse_clicks_tabs_and_rows_and_scrolls_until_m_gives_it_back() {
    let home = tempfile::tempdir().expect("tempdir");
    let sessions = ["ALPHA", "BRAVO", "CHARLIE", "DELTA", "ECHO"];
    let leases = sessions.iter().enumerate().map(|(i, s)| dead_lease(&format!("{:x}{}", i + 10, "0".repeat(31)), s));
    write_leases(home.path(), leases.collect());
    write_leases(
        &home.path().join("profiles/other"),
        vec![dead_lease("f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1", "ONLY-IN-OTHER")],
    );
    let mut console = Pty::console(home.path(), 30, 100);
    console.wait_for("the root's leases", Duration::from_secs(5), |s| s.contains("ECHO"));
    let pace = Duration::from_millis(1200);
    // SGR mouse reports: button;column;row (1-based), M for a press.
    let click = |col: u16, row: u16| format!("\x1b[<0;{col};{row}M").into_bytes();
    // The tab bar reads " root │ other │ all ": "other" starts at column 9.
    thread::sleep(pace);
    console.send(&click(10, 1));
    console.wait_for("the other tab", Duration::from_secs(3), |s| s.contains("ONLY-IN-OTHER") && !s.contains("ECHO"));
    thread::sleep(pace);
    console.send(&click(3, 1));
    console.wait_for("the root tab again", Duration::from_secs(3), |s| s.contains("ECHO"));
    // Click the row of CHARLIE's lease, then open the details: they are CHARLIE's.
    thread::sleep(pace);
    let screen = console.text();
    let row = screen.lines().position(|l| l.contains("c0000000")).expect("CHARLIE's lease row") as u16 + 1;
    console.send(&click(5, row));
    thread::sleep(pace);
    console.send(b"\r");
    console.wait_for("CHARLIE's details", Duration::from_secs(3), |s| s.contains("\"CHARLIE\""));
    console.send(b"\r");
    // The wheel: down a notch moves the selection three rows (to ECHO, the last).
    thread::sleep(pace);
    console.send(b"\x1b[<65;5;12M");
    thread::sleep(pace);
    console.send(b"\r");
    console.wait_for("ECHO's details", Duration::from_secs(3), |s| s.contains("\"ECHO\""));
    console.send(b"\r");
    // `m`: the mouse is the terminal's again; a wheel report now moves nothing.
    thread::sleep(pace);
    console.send(b"m");
    thread::sleep(pace);
    console.send(b"\x1b[<64;5;12M");
    thread::sleep(pace);
    console.send(b"\r");
    console.wait_for("still ECHO's details", Duration::from_secs(3), |s| s.contains("\"ECHO\""));
    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}

/// At 80x24, the details of a lease show its owner's memory as it moves (the figures reach
/// the rows without the registry being judged again), at a person's pace.
#[test]
fn the_details_follow_an_owners_memory_as_it_moves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let owner = common::owner_whose_memory_moves();
    let pid = owner.id();
    let start = leasectl::lease::owners::liveness::process_start_time(u64::from(pid)).expect("the owner's start");
    std::fs::create_dir_all(home.join("runtime")).expect("runtime/");
    let text = format!(
        "{{\"entries\": [{{\"lease_id\": \"{:032x}\", \"pid\": {pid}, \"process_start_time\": {start:?}, \
         \"session_id\": \"S-1\", \"started_at\": 1796000000.5, \"surface\": \"cli\", \"updated_at\": 1796000000.5}}]}}",
        7
    );
    std::fs::write(home.join("runtime/active_sessions.json"), text).expect("a registry");
    let mut console = Pty::console(home, 24, 80);
    console.wait_for("the lease", Duration::from_secs(10), |s| s.contains("python3") && s.contains("alive"));
    thread::sleep(Duration::from_millis(1200));
    console.send(b"\r");
    // The owner's figures are the details' last lines: scrolled to, a key a second.
    for _ in 0..5 {
        thread::sleep(Duration::from_millis(1000));
        console.send(b"]");
    }
    let rss = |s: &str| {
        let line = s.lines().find(|l| l.contains("rss:"))?;
        line.split("rss:").nth(1)?.split_whitespace().next().map(str::to_owned)
    };
    let mut seen: Vec<String> = Vec::new();
    console.wait_for("the owner's memory", Duration::from_secs(5), |s| rss(s).is_some());
    let deadline = std::time::Instant::now() + Duration::from_secs(16);
    while std::time::Instant::now() < deadline && seen.len() < 3 {
        if let Some(now) = rss(&console.text())
            && seen.last() != Some(&now)
        {
            seen.push(now);
        }
        thread::sleep(Duration::from_millis(250));
    }
    eprintln!("the owner's memory as shown: {seen:?}");
    assert!(seen.len() >= 3, "the details showed the owner's memory as {seen:?} over 16 s");
    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}

/// A lease whose owner is gone (a pid no process has), as Hermes writes one.
fn dead_lease(id: &str, session: &str) -> Value {
    serde_json::json!({"lease_id": id, "session_id": session, "pid": 4_000_000u64, "surface": "cli",
        "process_start_time": 1.0, "started_at": 1.0, "updated_at": 1.0})
}

/// `entries` as `home`'s registry (runtime/ made).
fn write_leases(home: &Path, entries: Vec<Value>) {
    std::fs::create_dir_all(home.join("runtime")).expect("runtime");
    common::make_profile_if_one(home);
    std::fs::write(home.join("runtime/active_sessions.json"), serde_json::json!({ "entries": entries }).to_string())
        .expect("registry");
}

/// At quit, a console over 10,000 profiles or more hands its inotify watches to a child:
/// the kernel's teardown of 100,000 watches held its exit up by 100 ms and more. The child
/// has left the terminal's session, ends once the console has, and is all it leaves; a
/// home of three profiles leaves nothing. Run in a test process of its own, the reaper of
/// its orphans, so that no other test's children are taken for the console's.
#[test]
fn quitting_over_10_000_profiles_leaves_the_watches_to_a_child_that_ends_after_it() {
    const ALONE: &str = "LEASECTL_TEST_ALONE_AS_REAPER";
    const NAME: &str = "console_pty::quitting_over_10_000_profiles_leaves_the_watches_to_a_child_that_ends_after_it";
    if std::env::var_os(ALONE).is_none() {
        let run = Command::new(std::env::current_exe().expect("this test binary"))
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(ALONE, "1")
            .output()
            .expect("run this test in a process of its own");
        let said = format!("{}{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
        eprintln!("{said}");
        assert!(run.status.success() && said.contains("1 passed"), "{said}");
        return;
    }
    common::signals::become_subreaper().expect("PR_SET_CHILD_SUBREAPER");
    for (profiles, handed) in [(3, false), (10_000, true)] {
        let home = tempfile::tempdir().expect("tempdir");
        let root = home.path().join("profiles");
        std::fs::create_dir(&root).expect("profiles");
        for n in 0..profiles {
            crate::common::make_profile(root.join(format!("p{n:06}")));
        }
        let mut console = Pty::console(home.path(), 60, 200);
        let read = format!("first read done: {} registries", profiles + 1);
        // A small home's read says no such line: its last profile's tab is there instead.
        console.wait_for("every registry read", Duration::from_secs(60), |s| {
            s.contains(&read) || (profiles < 1_000 && s.contains(&format!("p{:06}", profiles - 1)))
        });
        thread::sleep(Duration::from_secs(2));
        let console_pid = console.pid();
        console.send(b"q");
        let (status, took) = console.wait_exit(QUIT_WITHIN);
        assert!(status.success(), "{status:?}");
        eprintln!("{profiles} profiles: q ended the console in {took:?}");
        // This process's children now: the console is reaped, so only what it left.
        let mut left = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while std::time::Instant::now() < deadline {
            for (pid, comm, session) in children_of(std::process::id()) {
                assert_ne!(pid, console_pid);
                // Reaped once it has ended (a zombie, or gone within the second).
                left.push((pid, comm, session));
                let start = std::time::Instant::now();
                while !common::signals::reap_now(pid).unwrap_or(true) {
                    assert!(start.elapsed() < Duration::from_secs(5), "the console's child {pid} did not end");
                    thread::sleep(Duration::from_millis(5));
                }
            }
            thread::sleep(Duration::from_millis(20));
        }
        if handed {
            assert_eq!(left.len(), 1, "one child to tear the watches down, ended once the console had: {left:?}");
            let (pid, comm, session) = &left[0];
            assert_eq!(comm, "leasectl", "{left:?}");
            assert_eq!(session, pid, "the child left the terminal's session: {left:?}");
        } else {
            assert!(left.is_empty(), "a small home's console leaves nothing: {left:?}");
        }
    }
}

/// `(pid, comm, session)` of each child of `parent`, from `/proc/*/stat` (a zombie too).
fn children_of(parent: u32) -> Vec<(u32, String, u32)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        let comm = stat[open + 1..close].to_owned();
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let field = |i: usize| rest.get(i).and_then(|f| f.parse::<u32>().ok());
        if field(1) == Some(parent) {
            found.push((pid, comm, field(3).unwrap_or(0)));
        }
    }
    found
}

/// An idle console over many profiles whose registries hold live leases looks at a share
/// of their state.db files each second, not at every one: every home's each second was
/// 60 % of an idle console's work at 20,000 such profiles. Counted with strace attached
/// to each of its threads for three seconds, as are its looks at the leases' one owner
/// (each registry's owners were looked at apart). A session that then ends in one home's
/// state.db is still shown a leak suspect.
#[test]
fn an_idle_console_looks_at_a_share_of_the_state_dbs_and_at_each_owner_once_a_second() {
    const PROFILES: usize = 3_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    // The one owner of every lease has details that differ from one look at them (every
    // 5 s) to the next, as the test process's CPU figure did in CI beside other tests.
    let owner = common::owner_whose_memory_moves();
    let me = owner.id();
    let start = leasectl::lease::owners::liveness::process_start_time(u64::from(me)).expect("the owner's start");
    for i in 0..PROFILES {
        let runtime = home.join(format!("profiles/p{i:04}/runtime"));
        crate::common::make_profile(&runtime);
        let text = format!(
            "{{\"entries\": [{{\"lease_id\": \"{i:032x}\", \"pid\": {me}, \"process_start_time\": {start:?}, \
             \"session_id\": \"S-{i}\", \"started_at\": 1796000000.5, \"surface\": \"cli\", \"updated_at\": 1796000000.5}}]}}"
        );
        std::fs::write(runtime.join("active_sessions.json"), text).expect("a registry");
    }
    let p42 = home.join("profiles/p0042");
    common::state_db(&p42, &[("S-42", None)]);
    let mut console = Pty::console(&home, 40, 160);
    console.wait_for("the tabs", Duration::from_secs(20), |s| s.contains("more ›"));
    // Its first reading of 3,000 registries done (on a loaded machine that takes a while):
    // a second in which it used under a tenth of a second of CPU.
    let settled = common::pty::eventually(Duration::from_secs(60), || {
        let before = common::pty::cpu_time(console.pid());
        thread::sleep(Duration::from_secs(1));
        common::pty::cpu_time(console.pid()) - before < Duration::from_millis(100)
    });
    assert!(settled, "the console never went idle");
    let looked_at = "stat,lstat,newfstatat,statx,poll,ppoll";
    let text = common::traced(console.pid(), looked_at, Duration::from_secs(3), &dir.path().join("strace.out"));
    let looks = text.lines().filter(|l| l.contains("state.db")).count();
    // The one owner of every lease is looked at once a round, not once a registry.
    // A look at a live owner is a poll of its pidfd that does not wait.
    let owner_looks = text.lines().filter(|l| l.contains("poll(") && l.contains("{tv_sec=0, tv_nsec=0}")).count();
    eprintln!("{looks} looks at state.db files and {owner_looks} at the owner in 3 idle seconds");
    assert!(looks < 9_000, "an idle console of {PROFILES} homes looked at state.db files {looks} times in 3 s");
    assert!(owner_looks < 30, "the one owner of {PROFILES} registries was looked at {owner_looks} times in 3 s");
    // Over a look at the owners' details (every 5 s), which finds the owner's memory
    // moved: its leases are shown again, and the owner is still looked at once, not once a
    // registry (3,000 looks in CI).
    let text =
        common::traced(console.pid(), "poll,ppoll", Duration::from_secs(6), &dir.path().join("strace-owner.out"));
    let owner_looks = text.lines().filter(|l| l.contains("poll(") && l.contains("{tv_sec=0, tv_nsec=0}")).count();
    eprintln!("{owner_looks} looks at the owner in 6 s, its memory moving");
    assert!(owner_looks < 30, "the one owner of {PROFILES} registries was looked at {owner_looks} times in 6 s");
    // A registry changes (each change made the snapshot of every registry with leases look
    // at its home's state.db again): the same share of looks.
    let p7 = home.join("profiles/p0007/runtime");
    let replaced = format!(
        "{{\"entries\": [{{\"lease_id\": \"{:032x}\", \"pid\": {me}, \"process_start_time\": {start:?}, \
         \"session_id\": \"S-7b\", \"started_at\": 1796000000.5, \"surface\": \"cli\", \"updated_at\": 1796000000.5}}]}}",
        PROFILES + 7
    );
    let writer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(500));
        std::fs::write(p7.join(".active_sessions_t.tmp"), replaced).expect("the temp file");
        std::fs::rename(p7.join(".active_sessions_t.tmp"), p7.join("active_sessions.json")).expect("rename");
    });
    let text = common::traced(
        console.pid(),
        "stat,lstat,newfstatat,statx",
        Duration::from_secs(3),
        &dir.path().join("strace-change.out"),
    );
    writer.join().expect("the writer");
    let looks = text.lines().filter(|l| l.contains("state.db")).count();
    eprintln!("{looks} looks at state.db files in 3 s around a change");
    assert!(
        looks < 9_000,
        "a console of {PROFILES} homes looked at state.db files {looks} times in 3 s around a change"
    );
    // S-42 ends: p0042's tab shows it a leak suspect.
    common::end_session(&p42, "S-42", leasectl::lease::now());
    console.send(b"T");
    thread::sleep(Duration::from_millis(300));
    console.send(b"p0042\r");
    console.wait_for("S-42 a leak suspect", Duration::from_secs(15), |s| s.contains("S-42") && s.contains("LEAK?"));
    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}

/// A gateway's leases in the console, at 80x24 and an operator's pace: its details say
/// its kind and the safe move; `x` on a chat with no turn running takes `y` alone (no
/// session id to type: a leftover, not a live owner's lease) and leaves the gateway
/// running; `S` on it says what ending it costs and asks again, every chat named.
#[test]
fn a_gateways_leftover_goes_on_y_and_its_stop_is_asked_again_naming_every_chat_at_80x24() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let mut gateway = common::process::Sleeper::new();
    let (left, busy, other) = ("agent:main:telegram:dm:1234", "agent:main:telegram:dm:77", "agent:main:telegram:dm:9");
    for (key, chat) in [(left, "1234"), (busy, "77"), (other, "9")] {
        let out = Command::new(BIN)
            .arg("--home")
            .arg(home)
            .args(["acquire", key, "--owner-pid", &gateway.pid_arg(), "--surface", "gateway:telegram"])
            .args(["--live-id", key, "--meta", "platform=telegram", "--meta", &format!("chat_id={chat}")])
            .env_remove("HERMES_HOME")
            .output()
            .expect("acquire");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    // It holds a session in profile work too: it ends with it, and goes there too.
    let work = home.join("profiles/work");
    common::make_profile(&work);
    let out = Command::new(BIN)
        .arg("--home")
        .arg(home)
        .args([
            "--profile",
            "work",
            "acquire",
            "W1",
            "--owner-pid",
            &gateway.pid_arg(),
            "--surface",
            "gateway:telegram",
        ])
        .env_remove("HERMES_HOME")
        .output()
        .expect("acquire in work");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    common::backdate_leases(home, 300.0);
    common::state_db(home, &[]);
    let db = rusqlite::Connection::open(home.join("state.db")).expect("state.db");
    db.execute_batch(
        "CREATE TABLE gateway_routing (scope TEXT NOT NULL DEFAULT '', session_key TEXT NOT NULL, \
         entry_json TEXT NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (scope, session_key))",
    )
    .expect("gateway_routing");
    for (key, turn) in [(left, Value::Null), (busy, Value::from("a273e0ba")), (other, Value::Null)] {
        let entry =
            serde_json::json!({"session_key": key, "session_id": format!("s-{key}"), "active_turn_token": turn});
        db.execute("INSERT INTO gateway_routing VALUES ('', ?1, ?2, 0)", rusqlite::params![key, entry.to_string()])
            .expect("a routing row");
    }
    drop(db);
    let registry = home.join("runtime/active_sessions.json");
    let pace = Duration::from_millis(1200);
    let mut console = Pty::console(home, 24, 80);
    console.wait_for("the gateway's three leases", Duration::from_secs(5), |s| {
        s.contains("dm:1234") && s.contains("dm:77")
    });
    thread::sleep(pace);
    console.send(b"/dm:1234\r");
    console.wait_for("the leftover alone", Duration::from_secs(3), |s| s.contains("dm:1234") && !s.contains("dm:77"));
    thread::sleep(pace);
    console.send(b"x");
    console.wait_for("its dialog: the safe move, y alone", Duration::from_secs(3), |s| {
        s.contains("force-release?") && s.contains("runs no turn") && !s.contains("Type the session id")
    });
    thread::sleep(pace);
    console.send(b"y");
    console.wait_for("the leftover gone", Duration::from_secs(5), |_| {
        registry_entries(&registry).is_some_and(|e| e.len() == 2)
    });
    assert!(gateway.running(), "the gateway runs on");
    thread::sleep(pace);
    console.send(b"/dm:77\r");
    console.wait_for("the chat in a turn", Duration::from_secs(3), |s| s.contains("dm:77") && !s.contains("dm:9 "));
    thread::sleep(pace);
    console.send(b"S");
    console.wait_for("the stop dialog says what it costs", Duration::from_secs(5), |s| {
        s.contains(" stop? ")
            && s.contains("it is the gateway (telegram)")
            && s.contains("1 running a turn")
            && s.contains("also in work: lease")
    });
    thread::sleep(pace);
    console.send(b"y");
    console.wait_for("asked again, every chat named", Duration::from_secs(3), |s| {
        s.contains("stop every session?")
            && s.contains("holds 3 sessions")
            && s.contains("(a turn runs now)")
            && s.contains("W1 (in work)")
    });
    thread::sleep(pace);
    console.send(b"n");
    console.wait_for("closed", Duration::from_secs(3), |s| !s.contains("stop every session?"));
    thread::sleep(pace);
    assert!(gateway.running(), "n signals nothing");
    assert_eq!(registry_entries(&registry).map(|e| e.len()), Some(2));
    console.send(b"S");
    console.wait_for("the stop dialog again", Duration::from_secs(5), |s| s.contains(" stop? "));
    thread::sleep(pace);
    console.send(b"y");
    console.wait_for("asked again", Duration::from_secs(3), |s| s.contains("stop every session?"));
    thread::sleep(pace);
    console.send(b"y");
    let work_registry = work.join("runtime/active_sessions.json");
    console.wait_for("its leases gone with the gateway, in work too", Duration::from_secs(8), |s| {
        registry_entries(&registry).is_some_and(|e| e.is_empty())
            && registry_entries(&work_registry).is_some_and(|e| e.is_empty())
            && s.contains("in work: removed 1 lease")
    });
    assert!(!gateway.running(), "ended");
    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}

/// `stop` on a terminal, of an owner of more than one session: the first question, then
/// the second, naming every session (another profile's too); `n` to the second signals
/// nothing, `y` to both ends it and cleans both registries.
#[test]
fn stop_on_a_terminal_asks_again_naming_every_session_of_an_owner_of_many() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let mut gateway = common::process::Sleeper::new();
    let acquire = |profile: Option<&str>, session: &str| {
        let mut cmd = Command::new(BIN);
        cmd.arg("--home").arg(home);
        if let Some(p) = profile {
            cmd.args(["--profile", p]);
        }
        let out = cmd
            .args(["acquire", session, "--owner-pid", &gateway.pid_arg(), "--surface", "gateway:telegram"])
            .env_remove("HERMES_HOME")
            .output()
            .expect("acquire");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    common::make_profile(home.join("profiles/work"));
    acquire(None, "CHAT-1");
    acquire(None, "CHAT-2");
    acquire(Some("work"), "W1");
    let args =
        [OsStr::new("--home"), home.as_os_str(), OsStr::new("stop"), OsStr::new("--session"), OsStr::new("CHAT-1")];
    let pace = Duration::from_millis(1200);
    let mut pty = Pty::spawn("stop", &args, &[], home, 30, 160);
    pty.wait_for("the first question", Duration::from_secs(5), |s| s.contains("End pid") && s.contains("[y/N]"));
    thread::sleep(pace);
    pty.send(b"y\r");
    pty.wait_for("the second, every session named", Duration::from_secs(5), |s| {
        s.contains("holds 3 sessions: CHAT-1, CHAT-2, W1 (in work). End every one of them? [y/N]")
    });
    thread::sleep(pace);
    pty.send(b"n\r");
    let (status, _) = pty.wait_exit(Duration::from_secs(5));
    assert!(!status.success(), "n: not stopped");
    assert!(gateway.running(), "nothing signalled");
    assert_eq!(registry_entries(&home.join("runtime/active_sessions.json")).map(|e| e.len()), Some(2));

    let mut pty = Pty::spawn("stop", &args, &[], home, 30, 160);
    pty.wait_for("the first question", Duration::from_secs(5), |s| s.contains("[y/N]"));
    thread::sleep(pace);
    pty.send(b"y\r");
    pty.wait_for("the second", Duration::from_secs(5), |s| s.contains("End every one of them?"));
    thread::sleep(pace);
    pty.send(b"y\r");
    pty.wait_for("its leases removed, in work too", Duration::from_secs(10), |s| {
        s.contains("in work: lease") && s.contains("(session W1) removed (its owner dead)")
    });
    let (status, _) = pty.wait_exit(Duration::from_secs(5));
    assert!(status.success(), "stopped");
    assert!(!gateway.running(), "ended");
    assert_eq!(registry_entries(&home.join("runtime/active_sessions.json")).map(|e| e.len()), Some(0));
    assert_eq!(registry_entries(&home.join("profiles/work/runtime/active_sessions.json")).map(|e| e.len()), Some(0));
}
