//! The console (`leasectl tui`) under stress, end to end: the real binary in a real
//! pseudo-terminal, its output fed into a terminal emulator (vt100), keys typed into the pty.
//!
//! Every test has its own temp home, always passes `--home`, and removes `HERMES_HOME`
//! from every child's environment. Every wait has a deadline (generous: the machine may be
//! busy building or fuzzing), and every child is killed and reaped when its guard drops,
//! also when a test fails.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use common::pty::{POLL, Pty, cpu_time};
use common::pty::{registry_entries, session_row};

const HELP_TEXT: &str = "force-release the selected lease";
const HELP_END: &str = "Esc closes this help.";
const PRUNE_DIALOG: &str = "Prune removes this dead or recycled owner's lease:";
/// A pid no process has (far above any `pid_max`), recorded with a start time: dead.
const DEAD_PID: u64 = 2_147_483_646;
/// How long `q` may take to end the console, and then the terminal's restoring to show.
const QUIT_WITHIN: Duration = Duration::from_secs(5);
const RESTORED_WITHIN: Duration = Duration::from_secs(3);

fn now_secs() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock after 1970").as_secs_f64()
}

// ---------------------------------------------------------------------------
// Keys into the console
// ---------------------------------------------------------------------------

/// `?` opens the help, Esc closes it; both within `deadline`. Returns how long the help took.
fn help_round_trip(console: &mut Pty, deadline: Duration) -> Duration {
    console.send(b"?");
    let shown = console.wait_for("the help dialog", deadline, |s| s.contains(HELP_TEXT) && s.contains(HELP_END));
    // A lone Esc (its own write, nothing after it) reads as the Esc key. It closes the
    // help; only sent once the help is up.
    console.send(b"\x1b");
    console.wait_for("the help dialog to close", deadline, |s| !s.contains(HELP_END));
    shown
}

// ---------------------------------------------------------------------------
// /proc readings of the console
// ---------------------------------------------------------------------------

/// The process's resident set size in KiB (`VmRSS` in `/proc/<pid>/status`).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/<pid>/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status:\n{status}"))
}

// ---------------------------------------------------------------------------
// Registries on disk
// ---------------------------------------------------------------------------

/// Replace `runtime/active_sessions.json` as Hermes does: a temp file in `runtime/`
/// (`.active_sessions_XXXXXXXX.tmp`, which the console's watcher ignores), renamed over.
fn write_registry_atomically(runtime: &Path, tag: u64, doc: &Value) -> std::io::Result<()> {
    let tmp = runtime.join(format!(".active_sessions_{:08x}.tmp", tag & 0xffff_ffff));
    std::fs::write(&tmp, serde_json::to_vec(doc).expect("serialize the registry"))?;
    std::fs::rename(&tmp, runtime.join("active_sessions.json"))
}

/// One lease entry as Hermes writes it.
fn entry(lease_id: &str, session: &str, pid: u64, process_start_time: Value) -> Value {
    let now = now_secs();
    let mut entry = crate::common::planted(lease_id, session, pid)
        .without_metadata()
        .start_time(process_start_time)
        .at(now)
        .value();
    entry["started_at"] = (now - 30.0).into();
    entry
}

/// Version `n` of the churn: 1–5 entries of session `churn-<n>`, owned by this (live)
/// test process with no recorded start time.
fn churn_version(n: u64) -> Value {
    let me = u64::from(std::process::id());
    let entries: Vec<Value> =
        (0..1 + n % 5).map(|k| entry(&format!("{n:08x}{k:024x}"), &format!("churn-{n}"), me, Value::Null)).collect();
    json!({ "entries": entries })
}

/// The churn version the screen shows (`▸ churn-<n>`), if any.
fn shown_churn(screen: &str) -> Option<u64> {
    screen.lines().find_map(|l| {
        let rest = &l[l.find("▸ churn-")? + "▸ churn-".len()..];
        rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
    })
}

/// The screen says `locked by pid <pid>` (the whole number, not a prefix of a longer one).
fn names_lock_holder(screen: &str, pid: u32) -> bool {
    let needle = format!("locked by pid {pid}");
    screen.match_indices(&needle).any(|(i, _)| !screen[i + needle.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

// ---------------------------------------------------------------------------
// The churn writer
// ---------------------------------------------------------------------------

const CHURN: Duration = Duration::from_secs(10);
const CHURN_PERIOD: Duration = Duration::from_micros(2000);
const DELETE_FILE_AT: Duration = Duration::from_secs(3);
const REMOVE_DIR_AT: Duration = Duration::from_secs(6);
const PAUSE: Duration = Duration::from_millis(300);

struct ChurnReport {
    rewrites: u64,
    /// When the registry file was deleted / runtime/ removed, and writing resumed, since the start.
    deleted_at: Duration,
    removed_at: Duration,
}

/// Rewrite the registry ~500 times a second for [`CHURN`]; at [`DELETE_FILE_AT`] delete
/// the file, at [`REMOVE_DIR_AT`] remove the whole `runtime/`; each followed by a
/// [`PAUSE`] (runtime/ recreated after it). `progress` holds the last version written.
fn churn(runtime: &Path, started: Instant, stop: &AtomicBool, progress: &AtomicU64) -> ChurnReport {
    let registry = runtime.join("active_sessions.json");
    let (mut deleted_at, mut removed_at) = (None, None);
    let mut n: u64 = 0;
    let mut next = Instant::now();
    while started.elapsed() < CHURN && !stop.load(Ordering::Relaxed) {
        let t = started.elapsed();
        if deleted_at.is_none() && t >= DELETE_FILE_AT {
            std::fs::remove_file(&registry).expect("delete the registry file");
            deleted_at = Some(t);
            thread::sleep(PAUSE);
            next = Instant::now();
            continue;
        }
        if removed_at.is_none() && t >= REMOVE_DIR_AT {
            std::fs::remove_dir_all(runtime).expect("remove runtime/");
            removed_at = Some(t);
            thread::sleep(PAUSE);
            std::fs::create_dir(runtime).expect("recreate runtime/");
            next = Instant::now();
            continue;
        }
        n += 1;
        write_registry_atomically(runtime, n, &churn_version(n)).expect("rewrite the registry");
        progress.store(n, Ordering::Relaxed);
        next += CHURN_PERIOD;
        let now = Instant::now();
        if next > now {
            thread::sleep(next - now);
        } else if now - next > Duration::from_millis(50) {
            // Far behind (a busy machine): do not burst to catch up.
            next = now;
        }
    }
    ChurnReport {
        rewrites: n,
        deleted_at: deleted_at.expect("the churn lasted past the file deletion"),
        removed_at: removed_at.expect("the churn lasted past the runtime/ removal"),
    }
}

/// Stops the churn writer when a test fails early.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------
// A lock holder: util-linux `flock LOCKFILE sleep 60`
// ---------------------------------------------------------------------------

/// `flock LOCK sleep 60` in its own process group. Dropping it SIGKILLs the group and
/// reaps `flock`.
struct LockHolder {
    child: std::process::Child,
    reaped: bool,
}

impl Drop for LockHolder {
    fn drop(&mut self) {
        if !self.reaped {
            self.kill_group();
            let _ = self.child.wait();
        }
    }
}

impl LockHolder {
    /// Start `flock` and wait (bounded) until the lock is really held.
    fn start(lock_path: &Path) -> LockHolder {
        let child = Command::new("flock")
            .arg(lock_path)
            .args(["sleep", "60"])
            .process_group(0)
            .env_remove("HERMES_HOME")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn flock (util-linux)");
        let holder = LockHolder { child, reaped: false };
        let start = Instant::now();
        while !lock_is_held(lock_path) {
            assert!(start.elapsed() < Duration::from_secs(5), "flock did not take {} within 5s", lock_path.display());
            thread::sleep(POLL);
        }
        holder
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn kill_group(&self) {
        // flock made itself the leader of its own group: the group id is its pid.
        let _ = common::signals::kill_group(self.child.id(), libc::SIGKILL);
    }

    /// SIGKILL `flock` and its `sleep`, reap `flock`.
    fn kill_and_reap(&mut self) {
        self.kill_group();
        let status = self.child.wait().expect("reap flock");
        self.reaped = true;
        assert!(!status.success(), "flock was killed, yet exited {status:?}");
    }
}

/// Someone holds an flock on `lock_path` (a non-blocking attempt would block).
/// Our own attempt, if it succeeds, is released at once (the file is closed).
fn lock_is_held(lock_path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(lock_path) else { return false };
    matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock))
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

/// Under ~500 atomic rewrites a second for 10 s (including the registry file deleted and
/// the whole `runtime/` removed and recreated mid-churn), the console keeps taking keys
/// (the help opens within 2 s each second), re-arms its watch on the recreated `runtime/`
/// (a registry written after the churn shows within 2 s), keeps its memory flat (RSS at
/// the end < 2x the RSS 2 s in + 10 MB), quits cleanly, and its table follows the churn
/// (the churn version it shows never stands still for more than 2 s). Also printed: the
/// rewrites done, the console's CPU time over the churn, and when its table changed.
#[test]
fn console_keeps_up_under_churn_and_rearms_its_watch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let runtime: PathBuf = home.join("runtime");
    std::fs::create_dir_all(&runtime).expect("create runtime/");

    let mut console = Pty::console(home, 40, 120);
    console.wait_for("the first drawing (no leases)", Duration::from_secs(10), |s| s.contains("no leases held"));
    let pid = console.pid();
    let cpu_before = cpu_time(pid);

    let stop = Arc::new(AtomicBool::new(false));
    let _stop_guard = StopOnDrop(Arc::clone(&stop));
    let progress = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let writer = {
        let (runtime, stop, progress) = (runtime.clone(), Arc::clone(&stop), Arc::clone(&progress));
        thread::spawn(move || churn(&runtime, started, &stop, &progress))
    };

    // During the churn: a help round trip about every second; between them, watch which
    // churn version the table shows (for the staleness measurement) and read the RSS at 2 s.
    let mut rss_early = None;
    let mut help_times = Vec::new();
    let mut shown_changes: Vec<(Duration, Option<u64>)> = vec![(Duration::ZERO, None)];
    let mut next_help = started + Duration::from_secs(1);
    while !writer.is_finished() {
        let now = Instant::now();
        if rss_early.is_none() && now - started >= Duration::from_secs(2) {
            rss_early = Some(rss_kib(pid));
        }
        if now >= next_help && now - started < CHURN - Duration::from_millis(500) {
            help_times.push((now - started, help_round_trip(&mut console, Duration::from_secs(2))));
            next_help += Duration::from_secs(1);
            continue;
        }
        let shown = shown_churn(&console.text());
        if shown_changes.last().map(|(_, s)| *s) != Some(shown) {
            shown_changes.push((started.elapsed(), shown));
        }
        thread::sleep(POLL);
    }
    let report = writer.join().expect("the churn writer panicked");
    let churn_time = started.elapsed();
    let cpu_churn = cpu_time(pid).saturating_sub(cpu_before);
    let last_written = progress.load(Ordering::Relaxed);
    assert!(help_times.len() >= 7, "only {} help round trips during the churn: {help_times:?}", help_times.len());

    // After the churn: one final registry. Only a re-armed watch on the new runtime/ sees it.
    let me = u64::from(std::process::id());
    let final_doc = json!({ "entries": [entry("f1a10000000000000000000000000000", "final-XYZ", me, Value::Null)] });
    write_registry_atomically(&runtime, u64::MAX, &final_doc).expect("write the final registry");
    let final_shown = console.wait_for("the final registry (final-XYZ)", Duration::from_secs(2), |s| {
        session_row(s, "final-XYZ") && shown_churn(s).is_none()
    });
    let rss_late = rss_kib(pid);
    let rss_early = rss_early.expect("the RSS was read 2 s into the churn");

    // The longest stretch of the churn during which the table's churn version stood still
    // (the pauses included: the file deleted, runtime/ removed).
    let mut stalls: Vec<Duration> = shown_changes.windows(2).map(|w| w[1].0 - w[0].0).collect();
    stalls.push(churn_time.saturating_sub(shown_changes.last().map_or(Duration::ZERO, |c| c.0)));
    let longest_stall = stalls.iter().copied().max().unwrap_or_default();

    eprintln!(
        "churn: {} rewrites in {churn_time:.2?} (~{:.0}/s; file deleted at {:.2?}, runtime/ removed at {:.2?})",
        report.rewrites,
        report.rewrites as f64 / churn_time.as_secs_f64(),
        report.deleted_at,
        report.removed_at
    );
    eprintln!(
        "console cpu over the churn: {cpu_churn:.2?} ({:.0}% of one core)",
        100.0 * cpu_churn.as_secs_f64() / churn_time.as_secs_f64()
    );
    eprintln!(
        "console rss: {rss_early} KiB at 2 s, {rss_late} KiB at the end (limit {} KiB)",
        2 * rss_early + 10 * 1024
    );
    let help_max = help_times.iter().map(|h| h.1).max().unwrap_or_default();
    eprintln!("help round trips: {} (slowest help {help_max:.2?})", help_times.len());
    eprintln!("final-XYZ shown {final_shown:.2?} after it was written");
    eprintln!(
        "table's churn version changed {} times during the churn (last written {last_written}); \
         longest stall {longest_stall:.2?}; changes: {:?}",
        shown_changes.len() - 1,
        shown_changes.iter().map(|(t, s)| format!("{:.2}s:{s:?}", t.as_secs_f64())).collect::<Vec<_>>()
    );

    assert!(
        rss_late < 2 * rss_early + 10 * 1024,
        "the console's memory grew: {rss_early} KiB at 2 s into the churn, {rss_late} KiB at the end"
    );
    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);

    // Fixed: bursts are gathered for at most 100 ms (MAX_GATHER in src/lease/backend.rs, used
    // by src/lease/file/watch.rs), so a
    // registry rewritten faster than the debounce still refreshes the table.
    assert!(
        longest_stall <= Duration::from_secs(2),
        "the console's table stood still for {longest_stall:.2?} while the registry was rewritten ~500/s \
         (its changes: {shown_changes:?})"
    );
}

/// While a prune waits for a registry lock held by another process (`flock`), the console
/// stays responsive (the help opens within 1 s: the action runs on the worker thread);
/// after the console's action timeout (≤ 3 s) the prune fails, the banner names the
/// holder's pid and the event log says `prune refused`. Once the holder is gone, the same
/// prune succeeds (the registry's `entries` is empty within 3 s), and `q` exits cleanly.
#[test]
fn console_stays_responsive_and_names_the_pid_holding_the_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let runtime = home.join("runtime");
    std::fs::create_dir_all(&runtime).expect("create runtime/");
    let registry = runtime.join("active_sessions.json");
    let doc = json!({ "entries": [entry("dead0000000000000000000000000000", "S-dead", DEAD_PID, json!(1.0))] });
    write_registry_atomically(&runtime, 1, &doc).expect("write the registry");

    let mut holder = LockHolder::start(&runtime.join("active_sessions.lock"));
    let holder_pid = holder.pid();

    let mut console = Pty::console(home, 30, 100);
    console.wait_for("the dead lease", Duration::from_secs(10), |s| session_row(s, "S-dead") && s.contains("✖ 1 dead"));

    // p asks, y prunes: the prune now waits for the lock on the worker thread.
    console.send(b"p");
    console.wait_for("the prune dialog", Duration::from_secs(3), |s| s.contains(PRUNE_DIALOG));
    console.send(b"y");
    let pressed = Instant::now();
    let help = help_round_trip(&mut console, Duration::from_secs(1));
    let help_at = pressed.elapsed();
    eprintln!("help shown {help:.2?} after ?, closed {help_at:.2?} after y (the prune waits up to 3 s)");

    // Both within 8 s of y: the refusal in the event log (its line may be cut at the right
    // edge), the holder's pid in the banner.
    let refused = help_at
        + console.wait_for("`prune refused` in the event log", Duration::from_secs(8) - help_at, |s| {
            s.contains("prune refused")
        });
    let named = refused
        + console.wait_for(
            &format!("the banner naming the lock holder (locked by pid {holder_pid})"),
            Duration::from_secs(8).saturating_sub(refused).max(POLL),
            |s| names_lock_holder(s, holder_pid),
        );
    eprintln!("prune refused {refused:.2?} after y; banner named pid {holder_pid} {named:.2?} after y");
    assert!(
        registry_entries(&registry).is_some_and(|e| e.len() == 1),
        "the refused prune must leave the registry alone: {:?}",
        registry_entries(&registry)
    );

    // The holder goes; the same prune now succeeds.
    holder.kill_and_reap();
    let start = Instant::now();
    while lock_is_held(&runtime.join("active_sessions.lock")) {
        assert!(start.elapsed() < Duration::from_secs(5), "the lock is still held after flock was killed");
        thread::sleep(POLL);
    }
    console.send(b"p");
    console.wait_for("the prune dialog again", Duration::from_secs(3), |s| s.contains(PRUNE_DIALOG));
    console.send(b"y");
    let pruned = console.wait_for("the registry's entries emptied", Duration::from_secs(3), |_| {
        registry_entries(&registry).is_some_and(|e| e.is_empty())
    });
    eprintln!("pruned {pruned:.2?} after the second y");
    console.wait_for("the prune logged and the lease gone", Duration::from_secs(3), |s| {
        s.contains("prune: removed 1 lease") && !session_row(s, "S-dead")
    });
    // The console looks at /proc/locks at most every 5 s (src/tui/worker.rs): the banner
    // may outlive the holder by that much, not more (one tick and slack on top).
    let cleared = console.wait_for("the lock banner gone", Duration::from_secs(10), |s| !s.contains("locked by pid"));
    eprintln!("lock banner gone {:.2?} after the second y", pruned + cleared);

    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}

/// `runtime/` removed and recreated at once, right after a registry write (so all of it
/// falls within one debounce window of the console's watcher): the console still re-arms
/// its watch on the new `runtime/` and shows a registry written there afterwards (2 s).
#[test]
fn console_rearms_its_watch_when_runtime_is_recreated_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let runtime: PathBuf = home.join("runtime");
    std::fs::create_dir_all(&runtime).expect("create runtime/");
    let me = u64::from(std::process::id());
    let registry_of = |session: &str, lease: &str| json!({ "entries": [entry(lease, session, me, Value::Null)] });

    let mut console = Pty::console(home, 30, 100);
    console.wait_for("the first drawing (no leases)", Duration::from_secs(10), |s| s.contains("no leases held"));
    write_registry_atomically(&runtime, 1, &registry_of("before-XYZ", "b0000000")).expect("write the registry");
    console.wait_for("before-XYZ", Duration::from_secs(2), |s| session_row(s, "before-XYZ"));

    // A write, then (10 ms later: the watcher is gathering that write's events, well
    // within its 20 ms debounce, tui::DEBOUNCE) runtime/ removed and recreated at once.
    write_registry_atomically(&runtime, 2, &registry_of("mid-XYZ", "c0000000")).expect("write the registry");
    thread::sleep(Duration::from_millis(10));
    std::fs::remove_dir_all(&runtime).expect("remove runtime/");
    std::fs::create_dir(&runtime).expect("recreate runtime/");
    // Well past the debounce: the console has settled on the new (empty) runtime/.
    thread::sleep(Duration::from_millis(500));
    write_registry_atomically(&runtime, 3, &registry_of("after-XYZ", "d0000000")).expect("write the registry");
    // Fixed: a watched directory named in an event is watched anew (Armed::renew in
    // src/lease/file/watch.rs),
    // so runtime/ removed and recreated within one debounce keeps its watch.
    let shown = console.wait_for("after-XYZ (written into the recreated runtime/)", Duration::from_secs(2), |s| {
        session_row(s, "after-XYZ")
    });
    eprintln!("after-XYZ shown {shown:.2?} after it was written");

    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}

/// When an action gives up on a held lock, the console names the holder in its banner at
/// once (the action's own reading of `/proc/locks`), and keeps naming it while the lock is
/// held: 1 s after `prune refused` is logged, the banner says `locked by pid <holder>`. The
/// holder here starts after the console, so the console's periodic check has not seen it
/// twice yet.
#[test]
fn console_names_the_lock_holder_as_soon_as_an_action_times_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let runtime = home.join("runtime");
    std::fs::create_dir_all(&runtime).expect("create runtime/");
    let doc = json!({ "entries": [entry("dead0000000000000000000000000000", "S-dead", DEAD_PID, json!(1.0))] });
    write_registry_atomically(&runtime, 1, &doc).expect("write the registry");

    let mut console = Pty::console(home, 30, 100);
    console.wait_for("the dead lease", Duration::from_secs(10), |s| session_row(s, "S-dead") && s.contains("✖ 1 dead"));
    let holder = LockHolder::start(&runtime.join("active_sessions.lock"));
    let holder_pid = holder.pid();

    console.send(b"p");
    console.wait_for("the prune dialog", Duration::from_secs(3), |s| s.contains(PRUNE_DIALOG));
    console.send(b"y");
    let refused =
        console.wait_for("`prune refused` in the event log", Duration::from_secs(8), |s| s.contains("prune refused"));
    eprintln!("prune refused {refused:.2?} after y");
    thread::sleep(Duration::from_secs(1));
    // Fixed: the worker keeps the holder a timed-out action named until its next
    // /proc/locks check (src/tui/worker.rs), so the banner shows at once.
    let named = console.wait_for(
        &format!("the banner naming the lock holder (locked by pid {holder_pid}) 1 s after the refusal"),
        Duration::from_secs(1),
        |s| names_lock_holder(s, holder_pid),
    );
    eprintln!("banner named pid {holder_pid} {:.2?} after the refusal", Duration::from_secs(1) + named);
    drop(holder);
    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}

#[test]
fn the_lock_banner_names_the_holder_its_command_and_how_long() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let runtime = home.join("runtime");
    std::fs::create_dir_all(&runtime).expect("mkdir runtime");
    let holder = LockHolder::start(&runtime.join("active_sessions.lock"));
    let mut console = Pty::console(home, 30, 160);
    let needle = format!("locked by pid {} (flock) for ", holder.pid());
    // The worker trusts a holder seen on two checks 5 s apart (a lock is normally held for
    // milliseconds); the banner then counts from the first sighting.
    console.wait_for("the banner naming flock", Duration::from_secs(15), |s| s.contains(&needle));
    let held = |s: &str| -> Option<u64> {
        let rest = &s[s.find(&needle)? + needle.len()..];
        let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let unit = rest[n.len()..].chars().next()?;
        n.parse::<u64>().ok().map(|n| if unit == 's' { n } else { n * 60 })
    };
    console.wait_for("the banner to count ten seconds or more", Duration::from_secs(20), |s| {
        held(s).is_some_and(|n| n >= 10)
    });
    drop(holder);
    console.quit_and_check_restored(Duration::from_secs(3), Duration::from_secs(2));
}

/// A lock file made after the console opened, and held with no registry written (a
/// process stuck right after taking the lock), still gets its banner: the console finds
/// holders by the lock files' inodes, noted as each registry is read, and a new lock
/// file is news to the watcher (it used to stat every lock file on every check).
/// Profiles beside the root, and seconds between steps, as an operator's home has them.
#[test]
fn a_lock_file_made_after_the_console_opened_gets_the_banner() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    for profile in ["work", "ops", "night"] {
        crate::common::make_profile(home.join("profiles").join(profile));
    }
    std::fs::write(home.join("config.yaml"), "max_concurrent_sessions: 4\n").expect("config.yaml");
    let mut console = Pty::console(home, 24, 80);
    console.wait_for("the first screen", Duration::from_secs(10), |s| s.contains("no leases held"));
    thread::sleep(Duration::from_secs(2));
    let runtime = home.join("runtime");
    std::fs::create_dir(&runtime).expect("mkdir runtime");
    // The console reads the new runtime/ (no lock file in it yet) before the lock is made.
    thread::sleep(Duration::from_secs(2));
    let holder = LockHolder::start(&runtime.join("active_sessions.lock"));
    let needle = format!("locked by pid {} (flock)", holder.pid());
    console.wait_for("the banner for a lock file made later", Duration::from_secs(20), |s| s.contains(&needle));
    drop(holder);
    console.quit_and_check_restored(QUIT_WITHIN, RESTORED_WITHIN);
}
