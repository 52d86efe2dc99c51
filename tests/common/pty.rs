//! The real binary in a real pseudo-terminal: its output fed into a terminal emulator
//! (vt100) and kept as bytes, keys typed into the pty, every wait bounded by a deadline.
//!
//! [`Pty::spawn`] removes `HERMES_HOME` (and `NO_COLOR`) from the child's environment; a
//! [`Pty`] SIGKILLs and reaps its child when it drops, also when a test fails.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::num::NonZeroU16;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};

pub const BIN: &str = env!("CARGO_BIN_EXE_leasectl");
/// How often a wait looks again.
pub const POLL: Duration = Duration::from_millis(20);
/// The sequence crossterm writes to leave the alternate screen (and the one to enter it).
const LEAVE_ALT_SCREEN: &[u8] = b"\x1b[?1049l";
const ENTER_ALT_SCREEN: &[u8] = b"\x1b[?1049h";

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not hide what the screen showed.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

/// Poll `cond` every ~20 ms until it holds; false if it still does not after `deadline`.
pub fn eventually(deadline: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() >= deadline {
            return false;
        }
        thread::sleep(POLL);
    }
}

/// `leasectl ARGS` running in a pty. Dropping it SIGKILLs and reaps the child if it has not
/// been reaped yet (see [`Pty::end`] for a gentler end).
pub struct Pty {
    /// What messages call the child: "console", "demo".
    name: &'static str,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    /// None after [`Pty::hang_up`].
    master: Option<Box<dyn MasterPty + Send>>,
    writer: Option<Box<dyn Write + Send>>,
    /// Tells the reader thread to stop (it polls every 20 ms), and the thread.
    stop_reader: Arc<AtomicBool>,
    reader: Option<thread::JoinHandle<()>>,
    /// Everything the child printed, parsed as a terminal would.
    parser: Arc<Mutex<vt100::Parser>>,
    /// Everything the child printed, as bytes.
    raw: Arc<Mutex<Vec<u8>>>,
    reaped: bool,
}

impl Drop for Pty {
    fn drop(&mut self) {
        self.end(Duration::ZERO);
    }
}

impl Pty {
    /// `leasectl ARGS` in a new `rows` x `cols` pty, run in `cwd` with `TERM=xterm-256color`
    /// and `env` set, and `HERMES_HOME` and `NO_COLOR` removed. `name` is what messages call it.
    pub fn spawn(name: &'static str, args: &[&OsStr], env: &[(&str, &OsStr)], cwd: &Path, rows: u16, cols: u16) -> Pty {
        Pty::spawn_program(name, Path::new(BIN), args, env, cwd, rows, cols)
    }

    /// [`Pty::spawn`] of another leasectl binary: one an artifact installed, say.
    #[allow(unsafe_code)] // a raw descriptor from portable-pty: no safe call takes it; see SAFETY
    pub fn spawn_program(
        name: &'static str,
        program: &Path,
        args: &[&OsStr],
        env: &[(&str, &OsStr)],
        cwd: &Path,
        rows: u16,
        cols: u16,
    ) -> Pty {
        let pair =
            native_pty_system().openpty(PtySize { rows, cols, pixel_width: 0, pixel_height: 0 }).expect("openpty");
        let mut cmd = CommandBuilder::new(program);
        cmd.args(args);
        cmd.env("TERM", "xterm-256color");
        cmd.env_remove("HERMES_HOME");
        cmd.env_remove("NO_COLOR");
        // After the defaults: a test may give a TERM (or NO_COLOR) of its own.
        for (key, value) in env {
            cmd.env(key, value);
        }
        cmd.cwd(cwd);
        let child = pair
            .slave
            .spawn_command(cmd)
            .unwrap_or_else(|e| panic!("spawn the {name} (leasectl {args:?}) in the pty: {e}"));
        // Only the child holds the slave now: the master reads EOF/EIO once it exits.
        drop(pair.slave);

        let rows_nz = NonZeroU16::new(rows).expect("rows > 0");
        let cols_nz = NonZeroU16::new(cols).expect("cols > 0");
        let parser = Arc::new(Mutex::new(vt100::Parser::new(rows_nz, cols_nz, 0)));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        // The reader is a dup of the master: poll the master's descriptor (the same open file), so
        // the thread can be told to stop and drop its descriptor (see `hang_up`). The master
        // outlives the thread: it is dropped only after the thread is joined.
        let fd = pair.master.as_raw_fd().expect("the pty master has a descriptor");
        let stop = Arc::new(AtomicBool::new(false));
        let (p, r, st) = (Arc::clone(&parser), Arc::clone(&raw), Arc::clone(&stop));
        let reader = thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while !st.load(Ordering::Relaxed) {
                let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
                // SAFETY: pfd is one valid pollfd; fd is the open master (joined before it closes).
                let ready = unsafe { libc::poll(&mut pfd, 1, POLL.as_millis() as libc::c_int) };
                if ready == 0
                    || (ready < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted)
                {
                    continue;
                }
                // Ends with an error (EIO) or EOF once the child has exited.
                match reader.read(&mut buf) {
                    Ok(n @ 1..) => {
                        lock(&r).extend_from_slice(&buf[..n]);
                        lock(&p).process(&buf[..n]);
                    }
                    _ => break,
                }
            }
        });
        let writer = pair.master.take_writer().expect("pty writer");
        Pty {
            name,
            child,
            master: Some(pair.master),
            writer: Some(writer),
            stop_reader: stop,
            reader: Some(reader),
            parser,
            raw,
            reaped: false,
        }
    }

    /// The console: `leasectl --home HOME tui` in a `rows` x `cols` pty, run in `home`.
    pub fn console(home: &Path, rows: u16, cols: u16) -> Pty {
        Pty::spawn("console", &[OsStr::new("--home"), home.as_os_str(), OsStr::new("tui")], &[], home, rows, cols)
    }

    fn stop_reader(&mut self) {
        self.stop_reader.store(true, Ordering::Relaxed);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }

    /// Unless it has been reaped already: stop reading, end the child and reap it. With a
    /// `grace`, first SIGTERM (so that it can clean up after itself) and SIGKILL only if it has
    /// not exited within `grace`; without one (zero), SIGKILL at once.
    pub fn end(&mut self, grace: Duration) {
        self.stop_reader();
        if self.reaped {
            return;
        }
        if let Some(pid) = self.child.process_id() {
            let exited = !grace.is_zero() && {
                let _ = super::signals::kill(pid, libc::SIGTERM);
                eventually(grace, || !matches!(self.child.try_wait(), Ok(None)))
            };
            if !exited {
                let _ = super::signals::kill(pid, libc::SIGKILL);
            }
        }
        let _ = self.child.wait();
        self.reaped = true;
    }

    /// Close the terminal, as a closed terminal window or a dropped ssh connection does: every
    /// descriptor of the pty's master is closed, and the kernel hangs up the child's controlling
    /// terminal (SIGHUP to the child; its reads and writes on the terminal fail from then on).
    pub fn hang_up(&mut self) {
        self.stop_reader();
        self.writer = None;
        self.master = None;
    }

    pub fn pid(&self) -> u32 {
        self.child.process_id().unwrap_or_else(|| panic!("the {} has a pid", self.name))
    }

    /// The screen's text.
    pub fn text(&self) -> String {
        lock(&self.parser).screen().contents()
    }

    /// The child ever wrote `needle` (a control sequence, say) to the terminal.
    pub fn wrote(&self, needle: &[u8]) -> bool {
        find(&lock(&self.raw), needle).is_some()
    }

    /// Make the terminal `rows` x `cols`, as a person resizing the window does: the child
    /// gets SIGWINCH, the emulator the new size.
    pub fn resize(&mut self, rows: u16, cols: u16) {
        lock(&self.parser).set_size(NonZeroU16::new(rows).expect("rows"), NonZeroU16::new(cols).expect("cols"));
        let master = self.master.as_ref().expect("the terminal was not hung up");
        master.resize(PtySize { rows, cols, pixel_width: 0, pixel_height: 0 }).expect("resize the pty");
    }

    /// The terminal is on the alternate screen.
    pub fn alternate_screen(&self) -> bool {
        lock(&self.parser).screen().alternate_screen()
    }

    /// Type into the child.
    pub fn send(&mut self, keys: &[u8]) {
        let writer = self.writer.as_mut().expect("the terminal was not hung up");
        writer.write_all(keys).expect("write to the pty");
        writer.flush().expect("flush the pty");
    }

    /// Poll the screen every ~20 ms until `cond` holds (on the screen, and anything else: files);
    /// returns how long that took. On timeout, panics with `what` and the whole screen.
    pub fn wait_for(&mut self, what: &str, deadline: Duration, mut cond: impl FnMut(&str) -> bool) -> Duration {
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
                    "timed out after {deadline:?} waiting for {what} ({} {status}); the screen:\n{}\n{}\n{}",
                    self.name,
                    "-".repeat(40),
                    screen,
                    "-".repeat(40)
                );
            }
            thread::sleep(POLL);
        }
    }

    /// Wait (bounded) for the child to exit, and reap it; returns the status and how long it took.
    pub fn wait_exit(&mut self, deadline: Duration) -> (portable_pty::ExitStatus, Duration) {
        let start = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.reaped = true;
                    return (status, start.elapsed());
                }
                Ok(None) if start.elapsed() < deadline => thread::sleep(POLL),
                Ok(None) => panic!("the {} did not exit within {deadline:?}; the screen:\n{}", self.name, self.text()),
                Err(e) => panic!("try_wait on the {} failed: {e}", self.name),
            }
        }
    }

    /// Wait (bounded) until the child's output contains `needle`.
    pub fn wait_raw(&self, what: &str, needle: &[u8], deadline: Duration) {
        let start = Instant::now();
        while find(&lock(&self.raw), needle).is_none() {
            assert!(
                start.elapsed() < deadline,
                "the {} never printed {what} ({needle:?}) within {deadline:?}",
                self.name
            );
            thread::sleep(POLL);
        }
    }

    /// The pty's local mode flags (`c_lflag`): a termios ioctl on the master reads the slave's.
    #[allow(unsafe_code)] // a raw descriptor from portable-pty: no safe call takes it; see SAFETY
    pub fn local_flags(&self) -> libc::tcflag_t {
        let master = self.master.as_ref().expect("the terminal was not hung up");
        let fd = master.as_raw_fd().expect("the pty master has a descriptor");
        // SAFETY: termios is plain data; all-zero is a valid value to be overwritten.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd is the open pty master (owned by self.master); t is a valid termios to write.
        let rc = unsafe { libc::tcgetattr(fd, &mut t) };
        assert_eq!(rc, 0, "tcgetattr on the pty: {}", std::io::Error::last_os_error());
        t.c_lflag
    }

    /// After the child exited: the alternate screen was left (the sequence is in the output
    /// within `deadline`, after the last enter), the cursor shown again, and raw mode left.
    pub fn check_terminal_restored(&self, deadline: Duration) {
        self.wait_raw("the sequence leaving the alternate screen", LEAVE_ALT_SCREEN, deadline);
        {
            let raw = lock(&self.raw);
            let entered = find(&raw, ENTER_ALT_SCREEN)
                .unwrap_or_else(|| panic!("the {} entered the alternate screen", self.name));
            let left = find(&raw, LEAVE_ALT_SCREEN).expect("checked just above");
            assert!(left > entered, "the alternate screen was entered again after it was left");
        }
        assert!(!self.alternate_screen(), "the terminal is still on the alternate screen");
        {
            // The cursor: shown again after it was last hidden (DECTCEM).
            let raw = lock(&self.raw);
            let rfind = |needle: &[u8]| raw.windows(needle.len()).rposition(|w| w == needle);
            if let Some(hidden) = rfind(b"\x1b[?25l") {
                let shown = rfind(b"\x1b[?25h");
                assert!(shown.is_some_and(|s| s > hidden), "the {} left the cursor hidden", self.name);
            }
        }
        let lflag = self.local_flags();
        assert_eq!(
            lflag & (libc::ICANON | libc::ECHO),
            libc::ICANON | libc::ECHO,
            "raw mode was not left: c_lflag {lflag:#o} lacks ICANON or ECHO"
        );
    }

    /// `q`, then both the child's own exit (within `exit_deadline`, successful) and its terminal
    /// ([`Pty::check_terminal_restored`] within `restore_deadline`).
    pub fn quit_and_check_restored(&mut self, exit_deadline: Duration, restore_deadline: Duration) {
        self.send(b"q");
        let (status, _) = self.wait_exit(exit_deadline);
        assert!(status.success(), "the {} exited with {status:?}; the screen:\n{}", self.name, self.text());
        self.check_terminal_restored(restore_deadline);
    }
}

/// The process's CPU time so far (utime + stime from `/proc/<pid>/stat`).
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/<pid>/stat");
    // The command name is in parentheses and may hold spaces: count fields after the last ')'.
    // After it: state (field 3), ..., utime (field 14), stime (field 15).
    let rest = &stat[stat.rfind(')').expect("a ')' in /proc/<pid>/stat") + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> u64 { fields[i].parse().unwrap_or_else(|_| panic!("field {i} of {stat:?}")) };
    let total = ticks(11) + ticks(12);
    let hz = super::signals::clock_ticks_per_second().max(1);
    Duration::from_millis(total * 1000 / hz)
}

// ---------------------------------------------------------------------------
// Reading the screen and the registry (shared by the pty tests)
// ---------------------------------------------------------------------------

/// The registry's entries, or None when the file is missing or not (yet) a valid document.
pub fn registry_entries(path: &Path) -> Option<Vec<serde_json::Value>> {
    let text = std::fs::read_to_string(path).ok()?;
    let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
    doc.get("entries")?.as_array().cloned()
}

/// The lease table's row for lease `short` (the first 8 chars of its id), if shown.
/// Table rows start `│  <short>` (the whole id where it fits); dialog lines (`│ │  …`),
/// the panels below and event lines do not.
pub fn lease_row(screen: &str, short: &str) -> Option<String> {
    // The id is short, or whole where the terminal has room for it.
    let prefix = format!("  {short}");
    let is_row = |rest: &str| {
        rest.strip_prefix(&prefix)
            .is_some_and(|after| after.starts_with(' ') || after.starts_with(|c: char| c.is_ascii_hexdigit()))
    };
    screen.lines().find(|l| l.strip_prefix('│').is_some_and(is_row)).map(str::to_owned)
}

/// A session's group row (`▸ S `) is on the screen.
pub fn session_row(screen: &str, session: &str) -> bool {
    screen.lines().any(|l| l.contains(&format!("▸ {session} ")))
}
