//! `leasectl demo` end to end: the real binary in a real pseudo-terminal, its output fed
//! into a terminal emulator (vt100), keys typed into the pty.
//!
//! Every demo gets its own `TMPDIR` (a fresh temp dir), so the sandbox it creates there
//! (`leasectl-demo-*`) is the only one, and its appearance and removal can be checked
//! without racing other tests. `HERMES_HOME` is removed from every child's environment.
//! Every wait has a deadline of a few seconds; the demo is killed and reaped when its
//! guard drops (also when a test fails), and any owner it left is killed too.

use std::ffi::OsStr;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::thread;
use std::time::{Duration, Instant};

use crate::common;
use common::pty::{POLL, Pty, eventually};
use common::pty::{lease_row, registry_entries};

const ROWS: u16 = 40;
const COLS: u16 = 120;
/// The playground panel's width (view_demo: `Constraint::Length(36)`), borders included.
const PLAYGROUND_WIDTH: usize = 36;
const SPAWN_FORM_TITLE: &str = "spawn an owner (a real leasectl hold process)";
const BACKSPACE: &[u8] = b"\x7f";
const ENTER: &[u8] = b"\r";

// ---------------------------------------------------------------------------
// Processes and the sandbox, from outside
// ---------------------------------------------------------------------------

/// The `leasectl-demo-*` directories directly inside `tmp`.
pub(crate) fn sandboxes(tmp: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(tmp)
        .unwrap_or_else(|e| panic!("read {}: {e}", tmp.display()))
        .map(|e| e.expect("a directory entry"))
        .filter(|e| e.file_name().to_string_lossy().starts_with("leasectl-demo-"))
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// The state letter of `/proc/PID/stat` (R, S, D, Z, …), or None when there is no such process.
pub(crate) fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) S …`: comm may hold spaces and parentheses; the state follows the last ')'.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// The process exists and is not a zombie (or dead).
fn pid_runs(pid: u32) -> bool {
    proc_state(pid).is_some_and(|s| s != 'Z' && s != 'X')
}

/// The processes whose parent is `parent`, with their state letters, sorted by pid.
pub(crate) fn children_of(parent: u32) -> Vec<(u32, char)> {
    let mut found: Vec<(u32, char)> = std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(|e| {
            let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) STATE PPID …`
            let mut after = stat.rsplit_once(')')?.1.split_whitespace();
            let state = after.next()?.chars().next()?;
            let ppid: u32 = after.next()?.parse().ok()?;
            (ppid == parent).then_some((pid, state))
        })
        .collect();
    found.sort();
    found
}

/// The process's command line, arguments joined by spaces ("" for a zombie or no process).
fn cmdline(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------
// The demo in a pty
// ---------------------------------------------------------------------------

/// Make this test process the reaper of orphaned descendants: an owner whose demo died
/// without reaping it (killed by its PR_SET_PDEATHSIG) becomes our child, and [`Demo`]'s drop
/// reaps it, also where pid 1 does not reap orphans (containers).
fn become_subreaper() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let made = common::signals::become_subreaper();
        assert!(made.is_ok(), "prctl(PR_SET_CHILD_SUBREAPER): {made:?}");
    });
}

/// Reap `pid` if it is (or becomes, within 1s) a zombie child of this process; nothing if it is
/// not our child. Polls with WNOHANG: never blocks for long.
fn reap_if_ours(pid: u32) {
    let start = Instant::now();
    loop {
        // Reaped now, or (ECHILD) not our child: done either way.
        if common::signals::reap_now(pid).unwrap_or(true) || start.elapsed() >= Duration::from_secs(1) {
            return;
        }
        thread::sleep(POLL);
    }
}

/// `leasectl demo` running in a pty with `TMPDIR` set. Dropping it ends the demo if it has not
/// been reaped yet (SIGTERM, so it cleans up after itself; SIGKILL after 2s) and reaps it, then
/// SIGKILLs any owner it recorded that still runs in its sandbox (the owners also have
/// PR_SET_PDEATHSIG; this is the belt to those braces) and reaps those orphaned to us.
pub(crate) struct Demo {
    pty: Pty,
    /// The sandbox, once known, and the owner pids seen on the screen: for the cleanup on drop.
    sandbox: Option<PathBuf>,
    owners: Vec<u32>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        // First SIGTERM, so that the demo itself kills and reaps its owners and removes its
        // sandbox; SIGKILL if it has not exited within 2s.
        self.pty.end(Duration::from_secs(2));
        let Some(sandbox) = &self.sandbox else { return };
        let home = sandbox.to_string_lossy().into_owned();
        for &pid in &self.owners {
            // Only a process that is still this sandbox's `hold` (not a recycled pid).
            if pid_runs(pid) && cmdline(pid).contains(&home) {
                let _ = common::signals::kill(pid, libc::SIGKILL);
            }
            reap_if_ours(pid);
        }
    }
}

/// The demo's terminal: [`Pty`]'s methods (`send`, `wait_for`, `hang_up`, …) on a [`Demo`].
impl Deref for Demo {
    type Target = Pty;

    fn deref(&self) -> &Pty {
        &self.pty
    }
}

impl DerefMut for Demo {
    fn deref_mut(&mut self) -> &mut Pty {
        &mut self.pty
    }
}

impl Demo {
    fn start(tmpdir: &Path) -> Demo {
        Demo::start_sized(tmpdir, ROWS, COLS)
    }

    /// The demo in a `rows` x `cols` terminal.
    pub(crate) fn start_sized(tmpdir: &Path, rows: u16, cols: u16) -> Demo {
        become_subreaper();
        let pty = Pty::spawn("demo", &[OsStr::new("demo")], &[("TMPDIR", tmpdir.as_os_str())], tmpdir, rows, cols);
        Demo { pty, sandbox: None, owners: vec![] }
    }

    /// Remember the sandbox and owner pids, for the cleanup on drop.
    pub(crate) fn remember(&mut self, sandbox: &Path, owners: &[u32]) {
        self.sandbox = Some(sandbox.to_path_buf());
        self.owners.extend(owners.iter().filter(|p| !self.owners.contains(p)).collect::<Vec<_>>());
    }

    /// Wait for the first drawing with the playground; the one sandbox in `tmpdir` is returned
    /// (and remembered for the cleanup).
    fn wait_ready(&mut self, tmpdir: &Path) -> PathBuf {
        let took = self.wait_for("the playground panel", Duration::from_secs(5), |s| {
            s.contains("playground") && s.contains("no owner processes yet: press o")
        });
        eprintln!("demo drawn with its playground after {took:?}");
        let found = sandboxes(tmpdir);
        assert_eq!(found.len(), 1, "exactly one sandbox in {}: {found:?}", tmpdir.display());
        let sandbox = found[0].clone();
        self.sandbox = Some(sandbox.clone());
        assert!(sandbox.is_dir(), "{} is a directory", sandbox.display());

        // The screen names that sandbox: the header (its registry), the playground panel as far as it fits.
        let screen = self.text();
        let shown = playground_sandbox(&screen).unwrap_or_else(|| panic!("no sandbox line in:\n{screen}"));
        let path = sandbox.to_string_lossy().into_owned();
        assert!(
            !shown.is_empty() && path.starts_with(&shown),
            "the playground shows {shown:?}, not (a prefix of) the sandbox {path:?}; the screen:\n{screen}"
        );
        // The header's registry path may be clipped on a long TMPDIR: look for its tail only.
        let name = sandbox.file_name().expect("a name").to_string_lossy().into_owned();
        assert!(
            screen.contains(&format!("{name}/runtime/active_sessions.json")),
            "the header shows the sandbox's registry {path}/runtime/active_sessions.json; the screen:\n{screen}"
        );
        sandbox
    }

    /// `o`, check the prefilled session (`S<n>`), clear it with Backspace, type `session`, Enter.
    /// Returns once the form is gone (the result is for the caller to wait for).
    fn submit_spawn_form(&mut self, prefilled: &str, session: &str) {
        self.send(b"o");
        self.wait_for("the spawn form with the session field focused", Duration::from_secs(3), |s| {
            s.contains(SPAWN_FORM_TITLE) && form_value(s, "session").is_some()
        });
        let value = form_value(&self.text(), "session").expect("checked just above");
        assert_eq!(value, prefilled, "the session field's default");
        for _ in value.chars() {
            self.send(BACKSPACE);
        }
        self.wait_for("the session field cleared", Duration::from_secs(3), |s| {
            form_value(s, "session").as_deref() == Some("")
        });
        self.send(session.as_bytes());
        self.wait_for("the session typed into the field", Duration::from_secs(3), |s| {
            form_value(s, "session").as_deref() == Some(session)
        });
        self.send(ENTER);
        self.wait_for("the spawn form to close", Duration::from_secs(3), |s| !s.contains(SPAWN_FORM_TITLE));
    }

    /// Spawn an owner of `session` through the form and wait for its grant: returns its pid
    /// (from the owner line, checked against the result panel) and the short lease id.
    fn spawn_granted_owner(&mut self, prefilled: &str, session: &str) -> (u32, String) {
        let start = Instant::now();
        self.submit_spawn_form(prefilled, session);
        self.wait_for(&format!("✔ GRANTED and a running owner of {session}"), Duration::from_secs(5), |s| {
            granted(s).is_some_and(|(_, sess, _)| sess == session)
                && owner_lines(s).iter().any(|(_, sess)| sess == session)
        });
        eprintln!("owner of {session} granted and listed {:?} after o", start.elapsed());
        let screen = self.text();
        let (short, _, granted_pid) = granted(&screen).expect("checked just above");
        let owners = owner_lines(&screen);
        let pid = owners.iter().find(|(_, sess)| sess == session).map(|(pid, _)| *pid).expect("checked just above");
        self.owners.push(pid);
        assert_eq!(granted_pid, pid, "the result panel and the owner line name the same pid; the screen:\n{screen}");
        (pid, short)
    }
}

// ---------------------------------------------------------------------------
// Reading the screen
// ---------------------------------------------------------------------------

/// The playground panel's inner text (between its borders), line by line.
pub(crate) fn playground_lines(screen: &str) -> Vec<String> {
    let lines: Vec<&str> = screen.lines().collect();
    let Some(top) = lines.iter().position(|l| l.starts_with("┌ playground ")) else { return vec![] };
    lines[top + 1..]
        .iter()
        .take_while(|l| l.starts_with('│'))
        .map(|l| l.chars().skip(1).take(PLAYGROUND_WIDTH - 2).collect::<String>().trim_end().to_owned())
        .collect()
}

/// The path under `sandbox (removed on exit):` in the playground panel (clipped to the panel).
fn playground_sandbox(screen: &str) -> Option<String> {
    let lines = playground_lines(screen);
    let at = lines.iter().position(|l| l == "sandbox (removed on exit):")?;
    lines.get(at + 1).map(|l| l.trim().to_owned())
}

/// The playground's running owners: `● pid N SESSION SURFACE LIVEID` as (pid, session).
fn owner_lines(screen: &str) -> Vec<(u32, String)> {
    playground_lines(screen)
        .iter()
        .filter_map(|l| {
            let words: Vec<&str> = l.strip_prefix("● pid ")?.split_whitespace().collect();
            Some((words.first()?.parse().ok()?, (*words.get(1)?).to_owned()))
        })
        .collect()
}

/// The result panel's `✔ GRANTED lease SHORT for SESSION to pid PID`, as (short, session, pid).
fn granted(screen: &str) -> Option<(String, String, u32)> {
    screen.lines().find_map(|l| {
        let rest = &l[l.find("✔ GRANTED lease ")? + "✔ GRANTED lease ".len()..];
        let words: Vec<&str> = rest.trim_end_matches(['│', ' ']).split_whitespace().collect();
        match words[..] {
            [short, "for", session, "to", "pid", pid] => {
                Some((short.to_owned(), session.to_owned(), pid.parse().ok()?))
            }
            _ => None,
        }
    })
}

/// The focused form field `label`'s text: `▸ LABEL   VALUE▏`.
fn form_value(screen: &str, label: &str) -> Option<String> {
    let marker = format!("▸ {label} ");
    screen.lines().find_map(|l| {
        let rest = &l[l.find(&marker)? + marker.len()..];
        let value = rest.trim_start();
        Some(value[..value.find('▏')?].to_owned())
    })
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn demo_refuses_a_second_owner_of_one_session_and_cleans_up_on_quit() {
    // Declared first, dropped last: after the demo guard.
    let tmp = tempfile::tempdir().expect("tempdir");
    let tmpdir = tmp.path();

    // 1-2. The demo starts and draws; its sandbox is the one new directory in TMPDIR.
    let mut demo = Demo::start(tmpdir);
    let sandbox = demo.wait_ready(tmpdir);
    let registry = sandbox.join("runtime").join("active_sessions.json");

    // 3. The first owner of S-one, through the keys.
    let (pid, short) = demo.spawn_granted_owner("S1", "S-one");
    assert!(Path::new(&format!("/proc/{pid}")).exists(), "the first owner's pid {pid} has no /proc entry");
    assert!(pid_runs(pid), "the first owner's pid {pid} is in state {:?}", proc_state(pid));
    let owner_cmd = cmdline(pid);
    assert!(
        owner_cmd.contains(" hold S-one ") && owner_cmd.contains(&*sandbox.to_string_lossy()),
        "pid {pid} is not `leasectl hold S-one` in the sandbox: {owner_cmd:?}"
    );
    // Its lease reaches the table through the watcher.
    let row = demo.wait_for("the first owner's lease row", Duration::from_secs(3), |s| {
        lease_row(s, &short).is_some_and(|r| r.contains(&pid.to_string()) && r.contains("● alive"))
    });
    eprintln!("step 3: lease row shown {row:?} after the grant");

    // 4. A second owner of the same session: refused, with the reason, the message, the advice,
    // and the first owner's lease marked as the one blocking.
    let start = Instant::now();
    demo.submit_spawn_form("S2", "S-one");
    demo.wait_for(
        "✖ REFUSED SESSION_NOT_OWNED with message, advice and the ◀ blocking mark",
        Duration::from_secs(5),
        |s| {
            s.contains("✖ REFUSED SESSION_NOT_OWNED")
                && s.contains("already has a live owner")
                && s.contains("what to do:")
                && lease_row(s, &short).is_some_and(|r| r.trim_end_matches(['│', ' ']).ends_with("◀ blocking"))
        },
    );
    eprintln!("step 4: refusal shown {:?} after o", start.elapsed());
    let screen = demo.text();
    assert!(
        screen.contains(&format!("blocking lease {short} is marked ◀ in the table")),
        "the result names the blocking lease {short}; the screen:\n{screen}"
    );
    assert!(
        screen.contains(&format!("Session S-one already has a live owner (tui, pid {pid},")),
        "the message names the first owner's pid {pid}; the screen:\n{screen}"
    );
    assert_eq!(
        owner_lines(&screen),
        vec![(pid, "S-one".to_owned())],
        "only the first owner runs; the screen:\n{screen}"
    );
    assert!(pid_runs(pid), "the refusal must not disturb the first owner (pid {pid})");
    // The refused `hold` exited and was reaped: the demo's only child is the first owner, not a zombie.
    let demo_pid = demo.pid();
    let children = children_of(demo_pid);
    assert!(
        children.len() == 1 && children[0].0 == pid && children[0].1 != 'Z',
        "the demo (pid {demo_pid}) has children {children:?}, want only the first owner {pid}, running"
    );

    // 5. The registry holds the first owner's lease only.
    let entries = registry_entries(&registry)
        .unwrap_or_else(|| panic!("{} is a valid registry with entries", registry.display()));
    assert_eq!(entries.len(), 1, "exactly one lease in the registry: {entries:?}");
    assert_eq!(entries[0]["pid"].as_u64(), Some(u64::from(pid)), "the lease is the first owner's: {entries:?}");
    assert_eq!(entries[0]["session_id"].as_str(), Some("S-one"), "{entries:?}");
    assert!(
        entries[0]["lease_id"].as_str().is_some_and(|id| id.starts_with(&short)),
        "the lease is {short}…: {entries:?}"
    );

    // 6. q quits: success, the sandbox removed, the owner killed and reaped, the terminal restored.
    demo.send(b"q");
    let (status, took) = demo.wait_exit(Duration::from_secs(5));
    eprintln!("step 6: the demo exited {took:?} after q: {status:?}");
    assert!(status.success(), "the demo exited with {status:?}; the screen:\n{}", demo.text());
    assert!(!sandbox.exists(), "the sandbox {} is still there after the demo exited", sandbox.display());
    assert_eq!(sandboxes(tmpdir), Vec::<PathBuf>::new(), "a leasectl-demo-* is left in TMPDIR");
    assert!(
        eventually(Duration::from_secs(2), || !pid_runs(pid)),
        "the owner pid {pid} still runs 2s after the demo exited (state {:?})",
        proc_state(pid)
    );
    demo.check_terminal_restored(Duration::from_secs(2));
}

#[test]
fn demo_quits_cleanly_on_sigterm() {
    // Declared first, dropped last: after the demo guard.
    let tmp = tempfile::tempdir().expect("tempdir");
    let tmpdir = tmp.path();

    let mut demo = Demo::start(tmpdir);
    let sandbox = demo.wait_ready(tmpdir);
    let (pid, _short) = demo.spawn_granted_owner("S1", "S-term");
    assert!(pid_runs(pid), "the owner's pid {pid} is in state {:?}", proc_state(pid));

    let demo_pid = demo.pid();
    let sent = common::signals::kill(demo_pid, libc::SIGTERM);
    assert!(sent.is_ok(), "kill -TERM {demo_pid}: {sent:?}");
    let (status, took) = demo.wait_exit(Duration::from_secs(5));
    eprintln!("the demo exited {took:?} after SIGTERM: {status:?}");
    assert!(status.success(), "SIGTERM ends the demo like q does; it exited with {status:?}");
    assert!(!sandbox.exists(), "the sandbox {} is still there after SIGTERM", sandbox.display());
    assert_eq!(sandboxes(tmpdir), Vec::<PathBuf>::new(), "a leasectl-demo-* is left in TMPDIR");
    assert!(
        eventually(Duration::from_secs(2), || !pid_runs(pid)),
        "the owner pid {pid} still runs 2s after the demo exited (state {:?})",
        proc_state(pid)
    );
    demo.check_terminal_restored(Duration::from_secs(2));
}

#[test]
fn demo_cleans_up_when_its_terminal_hangs_up() {
    // Declared first, dropped last: after the demo guard.
    let tmp = tempfile::tempdir().expect("tempdir");
    let tmpdir = tmp.path();

    let mut demo = Demo::start(tmpdir);
    let sandbox = demo.wait_ready(tmpdir);
    let (pid, _short) = demo.spawn_granted_owner("S1", "S-hup");
    assert!(pid_runs(pid), "the owner's pid {pid} is in state {:?}", proc_state(pid));

    // The terminal goes away (window closed, ssh dropped): SIGHUP, and the terminal is dead.
    demo.hang_up();
    let (status, took) = demo.wait_exit(Duration::from_secs(5));
    eprintln!("the demo exited {took:?} after its terminal hung up: {status:?}");
    // Cleanup runs before the terminal is restored, and restoring a dead terminal neither
    // prints nor panics (src/tui/mod.rs), so a hangup ends the demo like q does.
    assert!(
        !sandbox.exists(),
        "the sandbox {} is still there after the terminal hung up (the demo exited with {status:?})",
        sandbox.display()
    );
    assert_eq!(sandboxes(tmpdir), Vec::<PathBuf>::new(), "a leasectl-demo-* is left in TMPDIR");
    assert!(status.success(), "a hangup ends the demo like q does; it exited with {status:?}");
    assert!(
        eventually(Duration::from_secs(2), || !pid_runs(pid)),
        "the owner pid {pid} still runs 2s after the demo exited (state {:?})",
        proc_state(pid)
    );
}
