//! The console (`leasectl tui`) end to end: the real binary in a real pseudo-terminal,
//! its output fed into a terminal emulator (vt100), keys typed into the pty.
//!
//! Every test has its own temp home, always passes `--home`, and removes `HERMES_HOME`
//! from every child's environment. Every wait has a deadline of a few seconds, and every
//! child is killed and reaped when its guard drops, also when a test fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::num::NonZeroU16;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_leasectl");
/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(20);
/// The sequence crossterm writes to leave the alternate screen (and the one to enter it).
const LEAVE_ALT_SCREEN: &[u8] = b"\x1b[?1049l";
const ENTER_ALT_SCREEN: &[u8] = b"\x1b[?1049h";
const PRUNE_DIALOG: &str = "Prune removes these dead or recycled owners' leases:";

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not hide what the screen showed.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

// ---------------------------------------------------------------------------
// The console in a pty
// ---------------------------------------------------------------------------

/// `leasectl --home HOME tui` running in a pty. Dropping it SIGKILLs and reaps the
/// console if it has not been reaped yet.
struct Console {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    master: Box<dyn MasterPty + Send>,
    writer: Box<dyn Write + Send>,
    /// Everything the console printed, parsed as a terminal would.
    parser: Arc<Mutex<vt100::Parser>>,
    /// Everything the console printed, as bytes.
    raw: Arc<Mutex<Vec<u8>>>,
    reaped: bool,
}

impl Drop for Console {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        if let Some(pid) = self.child.process_id() {
            // SAFETY: kill has no memory-safety preconditions; the child is ours and not reaped.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        let _ = self.child.wait();
    }
}

impl Console {
    fn start(home: &Path, rows: u16, cols: u16) -> Console {
        let pair =
            native_pty_system().openpty(PtySize { rows, cols, pixel_width: 0, pixel_height: 0 }).expect("openpty");
        let mut cmd = CommandBuilder::new(BIN);
        cmd.arg("--home");
        cmd.arg(home);
        cmd.arg("tui");
        cmd.env("TERM", "xterm-256color");
        cmd.env_remove("HERMES_HOME");
        cmd.env_remove("NO_COLOR");
        cmd.cwd(home);
        let child = pair.slave.spawn_command(cmd).expect("spawn leasectl tui in the pty");
        // Only the console holds the slave now: the master reads EOF/EIO once it exits.
        drop(pair.slave);

        let rows_nz = NonZeroU16::new(rows).expect("rows > 0");
        let cols_nz = NonZeroU16::new(cols).expect("cols > 0");
        let parser = Arc::new(Mutex::new(vt100::Parser::new(rows_nz, cols_nz, 0)));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let (p, r) = (Arc::clone(&parser), Arc::clone(&raw));
        thread::spawn(move || {
            let mut buf = [0u8; 8192];
            // Ends with an error (EIO) or EOF once the console has exited.
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                lock(&r).extend_from_slice(&buf[..n]);
                lock(&p).process(&buf[..n]);
            }
        });
        let writer = pair.master.take_writer().expect("pty writer");
        Console { child, master: pair.master, writer, parser, raw, reaped: false }
    }

    fn text(&self) -> String {
        lock(&self.parser).screen().contents()
    }

    /// Type into the console.
    fn send(&mut self, keys: &[u8]) {
        self.writer.write_all(keys).expect("write to the pty");
        self.writer.flush().expect("flush the pty");
    }

    /// Poll the screen every ~20 ms until `cond` holds; returns how long that took.
    /// On timeout, panics with `what` and the whole screen.
    fn wait_for(&mut self, what: &str, deadline: Duration, cond: impl Fn(&str) -> bool) -> Duration {
        self.wait_until(what, deadline, |screen| cond(screen))
    }

    /// Like [`Console::wait_for`], for conditions on the screen and elsewhere (files).
    fn wait_until(&mut self, what: &str, deadline: Duration, mut cond: impl FnMut(&str) -> bool) -> Duration {
        let start = Instant::now();
        loop {
            let screen = self.text();
            if cond(&screen) {
                return start.elapsed();
            }
            if start.elapsed() >= deadline {
                let status = match self.child.try_wait() {
                    Ok(None) => "still running".to_owned(),
                    Ok(Some(s)) => format!("exited: {s:?}"),
                    Err(e) => format!("try_wait failed: {e}"),
                };
                panic!(
                    "timed out after {deadline:?} waiting for {what} (console {status}); the screen:\n{}\n{}\n{}",
                    "-".repeat(40),
                    screen,
                    "-".repeat(40)
                );
            }
            thread::sleep(POLL);
        }
    }

    /// Wait (bounded) for the console to exit, and reap it.
    fn wait_exit(&mut self, deadline: Duration) -> portable_pty::ExitStatus {
        let start = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.reaped = true;
                    return status;
                }
                Ok(None) if start.elapsed() < deadline => thread::sleep(POLL),
                Ok(None) => panic!("the console did not exit within {deadline:?}; the screen:\n{}", self.text()),
                Err(e) => panic!("try_wait on the console failed: {e}"),
            }
        }
    }

    /// Wait (bounded) until the console's output contains `needle`.
    fn wait_raw(&self, what: &str, needle: &[u8], deadline: Duration) {
        let start = Instant::now();
        while find(&lock(&self.raw), needle).is_none() {
            assert!(start.elapsed() < deadline, "the console never printed {what} ({needle:?}) within {deadline:?}");
            thread::sleep(POLL);
        }
    }

    /// The pty's local mode flags (`c_lflag`): a termios ioctl on the master reads the slave's.
    fn local_flags(&self) -> libc::tcflag_t {
        let fd = self.master.as_raw_fd().expect("the pty master has a descriptor");
        // SAFETY: termios is plain data; all-zero is a valid value to be overwritten.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd is the open pty master (owned by self.master); t is a valid termios to write.
        let rc = unsafe { libc::tcgetattr(fd, &mut t) };
        assert_eq!(rc, 0, "tcgetattr on the pty: {}", std::io::Error::last_os_error());
        t.c_lflag
    }

    /// Both the console's own exit and its terminal: success, alternate screen left
    /// (the sequence is in the output, after the last enter), and raw mode left.
    fn quit_and_check_restored(&mut self) {
        self.send(b"q");
        let status = self.wait_exit(Duration::from_secs(3));
        assert!(status.success(), "the console exited with {status:?}; the screen:\n{}", self.text());
        self.wait_raw("the sequence leaving the alternate screen", LEAVE_ALT_SCREEN, Duration::from_secs(2));
        {
            let raw = lock(&self.raw);
            let entered = find(&raw, ENTER_ALT_SCREEN).expect("the console entered the alternate screen");
            let left = find(&raw, LEAVE_ALT_SCREEN).expect("checked just above");
            assert!(left > entered, "the alternate screen was entered again after it was left");
        }
        assert!(!lock(&self.parser).screen().alternate_screen(), "the terminal is still on the alternate screen");
        let lflag = self.local_flags();
        assert_eq!(
            lflag & (libc::ICANON | libc::ECHO),
            libc::ICANON | libc::ECHO,
            "raw mode was not left: c_lflag {lflag:#o} lacks ICANON or ECHO"
        );
    }
}

// ---------------------------------------------------------------------------
// A lease holder: `leasectl hold`
// ---------------------------------------------------------------------------

/// `leasectl --home HOME hold SESSION --json`. Dropping it SIGKILLs and reaps it.
struct Holder {
    child: std::process::Child,
    reaped: bool,
}

impl Drop for Holder {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
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
        let mut holder = Holder { child, reaped: false };
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
            holder.reaped = true;
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
        // SAFETY: kill has no memory-safety preconditions; the child is ours and not reaped.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGKILL) };
        assert_eq!(rc, 0, "kill -KILL {}: {}", self.child.id(), std::io::Error::last_os_error());
        let status = self.child.wait().expect("reap the holder");
        self.reaped = true;
        status
    }
}

// ---------------------------------------------------------------------------
// Reading the screen and the registry
// ---------------------------------------------------------------------------

/// The lease table's row for lease `short` (the first 8 chars of its id), if shown.
/// Table rows start `│  <short> `; dialog lines (`│ │  …`) and event lines do not.
fn lease_row(screen: &str, short: &str) -> Option<String> {
    let prefix = format!("  {short} ");
    screen.lines().find(|l| l.strip_prefix('│').is_some_and(|rest| rest.starts_with(&prefix))).map(str::to_owned)
}

/// The row reads `<short> cli <pid> <owner> …` and ends with the badge.
fn row_is(row: &str, pid: u64, owner: &str, badge: &str) -> bool {
    let words: Vec<&str> = row.trim_start_matches('│').split_whitespace().collect();
    let pid = pid.to_string();
    words.get(1..4) == Some(&["cli", pid.as_str(), owner][..]) && row.trim_end_matches(['│', ' ']).ends_with(badge)
}

fn session_row(screen: &str, session: &str) -> bool {
    screen.lines().any(|l| l.contains(&format!("▸ {session} ")))
}

/// The registry's entries, or None when the file is missing or not (yet) a valid document.
fn registry_entries(path: &Path) -> Option<Vec<Value>> {
    let text = std::fs::read_to_string(path).ok()?;
    let doc: Value = serde_json::from_str(&text).ok()?;
    doc.get("entries")?.as_array().cloned()
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

    // 1-3. The console starts on a home with no runtime/ yet and draws.
    let mut console = Console::start(home, 30, 100);
    console.wait_for("the first drawing (leases table, no leases)", Duration::from_secs(5), |s| {
        s.contains("leases") && s.contains("no leases held") && s.contains("(no file yet)")
    });
    let lflag = console.local_flags();
    assert_eq!(lflag & (libc::ICANON | libc::ECHO), 0, "the console runs in raw mode (c_lflag {lflag:#o})");
    assert!(lock(&console.parser).screen().alternate_screen(), "the console runs on the alternate screen");
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
        console.wait_until("the registry emptied and the lease gone from the screen", Duration::from_secs(3), |s| {
            registry_entries(&registry).is_some_and(|e| e.is_empty())
                && !s.contains(PRUNE_DIALOG)
                && lease_row(s, &short).is_none()
                && !session_row(s, "S-pty")
                && s.contains("no leases held")
                && s.contains(&format!("prune: removed 1 lease(s) {short}"))
        });
    eprintln!("step 7: pruned and redrawn {pruned:?} after y");

    // 8. q quits and restores the terminal.
    console.quit_and_check_restored();
}

#[test]
fn console_starts_and_quits_cleanly_at_80x24() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut console = Console::start(dir.path(), 24, 80);
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

    console.quit_and_check_restored();
}
