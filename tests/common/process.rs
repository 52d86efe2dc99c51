//! Real child processes for tests against the built binary: [`Proc`] (output read on
//! threads, killed and reaped on drop), [`Out`] (how one ended and what it printed),
//! [`Sleeper`] (an owner to name with `--owner-pid`) and [`Home`] (a temp Hermes home).

use std::fmt;
use std::fs;
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use super::Reaped;

pub const BIN: &str = env!("CARGO_BIN_EXE_leasectl");
/// Bound on every wait: for an exit, an output line, a file to change.
pub const WAIT: Duration = Duration::from_secs(10);
pub const POLL: Duration = Duration::from_millis(5);

/// A finished process: how it ended and everything it printed (lossy UTF-8).
pub struct Out {
    pub label: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl fmt::Debug for Out {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cut = |s: &str| -> String {
            if s.chars().count() > 3000 {
                format!("{}… ({} bytes)", s.chars().take(3000).collect::<String>(), s.len())
            } else {
                s.into()
            }
        };
        let how = describe(self.status);
        write!(f, "{}: {how}\n--- stdout ---\n{}\n--- stderr ---\n{}", self.label, cut(&self.stdout), cut(&self.stderr))
    }
}

impl Out {
    /// Assert the exact exit code (a death by signal fails too).
    pub fn expect_exit(&self, code: i32) {
        assert_eq!(self.status.code(), Some(code), "wrong exit: {self:?}");
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {self:?}"))
    }

    pub fn try_json(&self) -> Option<Value> {
        serde_json::from_str(&self.stdout).ok()
    }

    /// stdout and stderr together, for "the message mentions X" checks.
    pub fn text(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => format!("{status:?}"),
    }
}

/// Lines of a stream (each with its newline, bytes lossy), read on a thread, so a
/// test can wait for them with a deadline.
pub fn pump<R: Read + Send + 'static>(reader: R) -> Receiver<String> {
    let (_, go) = mpsc::channel();
    pump_after(go, reader)
}

/// Like [`pump`], but reading starts only once `go` fires (or its sender is dropped).
pub fn pump_after<R: Read + Send + 'static>(go: Receiver<()>, reader: R) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = go.recv();
        let mut reader = BufReader::new(reader);
        loop {
            let mut line = Vec::new();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if tx.send(String::from_utf8_lossy(&line).into_owned()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    rx
}

/// Everything left on a stream, exactly, and whether it closed before the deadline.
fn drain(rx: &Receiver<String>, deadline: Instant) -> (String, bool) {
    let mut text = String::new();
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => text.push_str(&line),
            Err(RecvTimeoutError::Disconnected) => return (text, true),
            Err(RecvTimeoutError::Timeout) => return (text, false),
        }
    }
}

/// A spawned child. Dropping it kills (SIGKILL; the whole process group for `group`)
/// and reaps it, so no test leaves a process behind, even when it panics.
pub struct Proc {
    pub label: String,
    pub child: Child,
    pub group: bool,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.group {
            let _ = super::signals::kill_group(self.child.id(), libc::SIGKILL);
        }
        // No-ops when the child is already reaped (std never signals a reaped pid).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// Spawn with stdout and stderr piped (stdin null).
    pub fn spawn(label: &str, mut cmd: Command) -> Proc {
        cmd.stdout(Stdio::piped());
        Proc::spawn_with_stdout(label, cmd, None)
    }

    /// Spawn; `stdout` gives the lines of wherever the command's stdout was already set
    /// to. The command (and its copy of that descriptor) is dropped here.
    pub fn spawn_with_stdout(label: &str, mut cmd: Command, stdout: Option<Receiver<String>>) -> Proc {
        cmd.stdin(Stdio::null()).stderr(Stdio::piped());
        let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot spawn {label}: {e}"));
        Proc::adopt(label, child, stdout)
    }

    fn adopt(label: &str, mut child: Child, stdout: Option<Receiver<String>>) -> Proc {
        let stdout = match stdout {
            Some(lines) => lines,
            None => pump(child.stdout.take().expect("stdout was piped")),
        };
        let stderr = pump(child.stderr.take().expect("stderr was piped"));
        Proc { label: label.to_owned(), child, group: false, stdout, stderr }
    }

    /// Run to completion (bounded by `WAIT`) and collect the output.
    pub fn run(label: &str, cmd: Command) -> Out {
        Proc::spawn(label, cmd).finish()
    }

    /// Like [`Proc::run`], but None when the program does not exist (an optional tool).
    pub fn try_run(label: &str, mut cmd: Command) -> Option<Out> {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        match cmd.spawn() {
            Ok(child) => Some(Proc::adopt(label, child, None).finish()),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => panic!("cannot spawn {label}: {e}"),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next stdout line (without its newline), within the deadline.
    pub fn line(&self) -> String {
        let line = self
            .stdout
            .recv_timeout(WAIT)
            .unwrap_or_else(|e| panic!("{}: no stdout line within {WAIT:?} ({e})", self.label));
        line.strip_suffix('\n').map(str::to_owned).unwrap_or(line)
    }

    /// The next stdout line (without its newline), if one comes within `wait`.
    pub fn try_line(&self, wait: Duration) -> Option<String> {
        let line = self.stdout.recv_timeout(wait).ok()?;
        Some(line.strip_suffix('\n').map(str::to_owned).unwrap_or(line))
    }

    /// The next stdout line, parsed as one JSON value.
    pub fn json_line(&self) -> Value {
        let line = self.line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{}: stdout line is not JSON ({e}): {line}", self.label))
    }

    /// The next stderr line, parsed as one JSON value (`run --json`'s grant: its stdout is CMD's).
    pub fn err_json_line(&self) -> Value {
        let line = self
            .stderr
            .recv_timeout(WAIT)
            .unwrap_or_else(|e| panic!("{}: no stderr line within {WAIT:?} ({e})", self.label));
        serde_json::from_str(line.trim_end())
            .unwrap_or_else(|e| panic!("{}: stderr line is not JSON ({e}): {line}", self.label))
    }

    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Wait for the exit, at most `WAIT`.
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status,
                Ok(None) if Instant::now() < deadline => thread::sleep(POLL),
                Ok(None) => panic!("{} did not exit within {WAIT:?}", self.label),
                Err(e) => panic!("{}: wait failed: {e}", self.label),
            }
        }
    }

    /// Wait for the exit, then collect the rest of stdout and all of stderr.
    pub fn finish(&mut self) -> Out {
        self.finish_within(WAIT).unwrap_or_else(|out| panic!("did not exit within {WAIT:?}, killed: {out:?}"))
    }

    /// Wait for the exit, at most `limit`. Err when it was still running then (it has
    /// been killed and reaped) or its output stayed open: the Err holds what it printed.
    pub fn finish_within(&mut self, limit: Duration) -> Result<Out, Out> {
        let deadline = Instant::now() + limit;
        let (status, timed_out) = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break (status, false),
                Ok(None) if Instant::now() < deadline => thread::sleep(POLL),
                Ok(None) => {
                    let _ = self.child.kill();
                    break (self.child.wait().unwrap_or_else(|e| panic!("{}: reap: {e}", self.label)), true);
                }
                Err(e) => panic!("{}: wait failed: {e}", self.label),
            }
        };
        // Whatever inherited the pipes has them still open: give them a bounded time.
        let drained = Instant::now() + WAIT;
        let (stdout, out_closed) = drain(&self.stdout, drained);
        let (stderr, err_closed) = drain(&self.stderr, drained);
        let out = Out { label: self.label.clone(), status, stdout, stderr };
        if timed_out || !out_closed || !err_closed { Err(out) } else { Ok(out) }
    }

    /// Send a signal to a child that is still running (asserted: never to a reaped pid).
    pub fn signal(&mut self, sig: libc::c_int) {
        assert!(self.running(), "{} exited before it could be sent signal {sig}", self.label);
        let sent = super::signals::kill(self.pid(), sig);
        assert!(sent.is_ok(), "kill({}, {sig}): {sent:?}", self.pid());
    }

    /// SIGKILL and reap; returns the status.
    pub fn kill_and_reap(&mut self) -> ExitStatus {
        self.signal(libc::SIGKILL);
        let status = self.wait();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{}: {}", self.label, describe(status));
        status
    }
}

/// Poll `probe` until it yields a value, at most `WAIT`.
pub fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {WAIT:?} waiting for {what}");
        thread::sleep(POLL);
    }
}

/// `sleep 30`: an owner process to name with `--owner-pid`. Killed and reaped on drop.
pub struct Sleeper(Reaped);

impl Sleeper {
    pub fn new() -> Sleeper {
        let child = Command::new("sleep")
            .arg("30")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sleep 30");
        Sleeper(Reaped(child))
    }

    pub fn pid(&self) -> u64 {
        u64::from(self.0.id())
    }

    pub fn pid_arg(&self) -> String {
        self.pid().to_string()
    }

    /// Whether it still runs (not ended, not reaped).
    pub fn running(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }

    /// End it now (SIGKILL, reaped): its leases' owner is dead.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `leasectl --home HOME ARGS...`, without `HERMES_HOME`.
pub fn leasectl(home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("--home").arg(home).args(args).env_remove("HERMES_HOME");
    cmd
}

/// `leasectl --home HOME ARGS...` run to its end, stdin closed.
pub fn run_in(home: &Path, args: &[&str]) -> std::process::Output {
    leasectl(home, args).stdin(Stdio::null()).output().expect("run leasectl")
}

/// `acquire SESSION --owner-pid OWNER` in `home` (and `--profile`), asserted granted: its lease id.
pub fn acquire_for(home: &Path, profile: Option<&str>, session: &str, owner: &Sleeper) -> String {
    let pid = owner.pid_arg();
    let mut args: Vec<&str> = vec![];
    if let Some(p) = profile {
        args.extend(["--profile", p]);
    }
    args.extend(["acquire", session, "--owner-pid", &pid, "--json"]);
    let out = run_in(home, &args);
    assert!(out.status.success(), "acquire {session}: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("acquire --json");
    v["lease_id"].as_str().expect("a lease id").to_owned()
}

pub fn label(args: &[&str]) -> String {
    format!("leasectl {}", args.join(" "))
}

pub fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_else(|| panic!("{key:?} is not a string in {v}"))
}

/// The entries of registry bytes (asserted JSON with an entries list).
pub fn entries_of(bytes: &[u8]) -> Vec<Value> {
    let v: Value = serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("registry is not JSON ({e}): {}", String::from_utf8_lossy(bytes)));
    v["entries"].as_array().unwrap_or_else(|| panic!("no entries list in {v}")).clone()
}

pub fn runtime_of(home: &Path) -> PathBuf {
    home.join("runtime")
}

pub fn registry_of(home: &Path) -> PathBuf {
    runtime_of(home).join("active_sessions.json")
}

/// Leftover `.active_sessions_*.tmp` files in a runtime directory (symlinks included).
pub fn temp_files(runtime: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(runtime)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(".active_sessions_") && n.ends_with(".tmp")
        })
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// A temp dir holding a Hermes home (`<tmp>/home`) and room outside it (`<tmp>`);
/// every command gets `--home` and no `HERMES_HOME`.
pub struct Home {
    dir: TempDir,
    home: PathBuf,
}

impl Home {
    pub fn new() -> Home {
        let dir = tempfile::tempdir().expect("create a temp dir");
        let home = dir.path().join("home");
        fs::create_dir_all(&home).expect("create the home");
        Home { dir, home }
    }

    pub fn path(&self) -> &Path {
        &self.home
    }

    /// Create profile `name` (as `hermes profile create` would, with its config.yaml, the
    /// identity file Hermes 0.22 lists a profile by): leasectl creates none.
    pub fn make_profile(&self, name: &str) -> PathBuf {
        let p = self.home.join("profiles").join(name);
        fs::create_dir_all(&p).expect("create the profile");
        if !p.join("config.yaml").exists() {
            fs::write(p.join("config.yaml"), "").expect("the profile's config.yaml");
        }
        p
    }

    /// The temp dir around the home: "outside runtime/".
    pub fn outside(&self) -> &Path {
        self.dir.path()
    }

    pub fn runtime(&self) -> PathBuf {
        runtime_of(&self.home)
    }

    pub fn registry(&self) -> PathBuf {
        registry_of(&self.home)
    }

    pub fn lock_file(&self) -> PathBuf {
        self.runtime().join("active_sessions.lock")
    }

    pub fn write_registry(&self, bytes: impl AsRef<[u8]>) {
        fs::create_dir_all(self.runtime()).expect("create runtime/");
        fs::write(self.registry(), bytes).expect("write the registry");
    }

    pub fn registry_bytes(&self) -> Vec<u8> {
        fs::read(self.registry()).expect("read the registry")
    }

    /// The registry's entries, None when the file does not exist.
    pub fn try_entries(&self) -> Option<Vec<Value>> {
        let bytes = fs::read(self.registry()).ok()?;
        Some(entries_of(&bytes))
    }

    pub fn entries(&self) -> Vec<Value> {
        entries_of(&self.registry_bytes())
    }

    pub fn lease_ids(&self) -> Vec<String> {
        self.entries().iter().map(|e| str_of(e, "lease_id").to_owned()).collect()
    }

    pub fn wait_entry_for(&self, session: &str) -> Value {
        wait_for(&format!("a registry entry for session {session}"), || {
            self.try_entries()?.into_iter().find(|e| e["session_id"] == session)
        })
    }

    pub fn temp_files(&self) -> Vec<PathBuf> {
        temp_files(&self.runtime())
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        leasectl(&self.home, args)
    }

    pub fn spawn(&self, label: &str, args: &[&str]) -> Proc {
        Proc::spawn(label, self.cmd(args))
    }

    /// Run to completion (bounded) and collect the output.
    pub fn run(&self, args: &[&str]) -> Out {
        Proc::run(&label(args), self.cmd(args))
    }

    /// `acquire ... --json`, asserted granted; returns the lease id.
    pub fn acquire_ok(&self, args: &[&str]) -> String {
        let mut all = vec!["acquire"];
        all.extend_from_slice(args);
        all.push("--json");
        let out = self.run(&all);
        out.expect_exit(0);
        let v = out.json();
        assert_eq!(v["granted"], true, "{out:?}");
        str_of(&v, "lease_id").to_owned()
    }
}

/// A state.db in `home` as Hermes makes it (sessions and messages; no rows yet).
pub fn hermes_state_db(home: &Path) -> rusqlite::Connection {
    let db = rusqlite::Connection::open(home.join("state.db")).expect("create state.db");
    db.execute_batch(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, title TEXT, started_at REAL, ended_at REAL, \
         end_reason TEXT); CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT, \
         timestamp REAL);",
    )
    .expect("the state.db schema");
    db
}
