//! Root acting in a home another user owns (issue 21): every path leasectl opens in a
//! home is planted, in turn, with a symlink (to a root-only file, to a missing path, to a
//! directory), a FIFO and a huge sparse file, by the home's owner (uid 65534, `nobody`:
//! a real second user), and root's prune, force-release, repair, events, doctor, the
//! recorder and the console's actions run against it. Nothing outside the home may be
//! created, changed or chown'd; nothing may hang or take unbounded memory; nothing root
//! leaves in the home may belong to root; and the action that uses the path names it.
//!
//! Needs root (CI runs as root); without it each test says so and passes.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt, lchown, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use common::process::BIN;

/// The home's owner: a real account other than root.
const MALLORY: u32 = 65534;
/// A pid no process can have: a dead owner.
const DEAD_PID: u64 = 2_147_483_646;
/// How long any one command may take (the lock timeout is 2 s).
const DEADLINE: Duration = Duration::from_secs(20);
/// Virtual memory for each command (KiB): a 1 GiB file read whole cannot fit.
const MEMORY_KIB: u64 = 600_000;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A test ignored for needing root fails, run without it: it never passes untested.
macro_rules! needs_root {
    () => {
        assert!(is_root(), "this test acts as root against another user's home: run it as root");
    };
}

/// What is planted at a path.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Plant {
    LinkToRootFile,
    LinkToMissing,
    LinkToDir,
    Fifo,
    HugeSparse,
}

const PLANTS: [Plant; 5] =
    [Plant::LinkToRootFile, Plant::LinkToMissing, Plant::LinkToDir, Plant::Fifo, Plant::HugeSparse];

/// Every path leasectl opens in a home.
const PATHS: [&str; 22] = [
    "runtime",
    "runtime/active_sessions.json",
    "runtime/active_sessions.lock",
    "runtime/.active_sessions_planted0.tmp",
    "logs",
    "logs/leasectl-audit.jsonl",
    "logs/leasectl-audit.jsonl.1",
    "logs/leasectl-audit.jsonl.2",
    "logs/leasectl-audit.jsonl.3",
    "logs/.leasectl-audit.lock",
    "logs/leasectl-events.jsonl",
    "logs/leasectl-events.jsonl.1",
    "logs/leasectl-events.jsonl.2",
    "logs/leasectl-events.jsonl.3",
    "config.yaml",
    "state.db",
    "state.db-wal",
    "state.db-shm",
    "profiles",
    "profiles/p1",
    "profiles/p1/runtime",
    "profiles/p1/runtime/active_sessions.json",
];

/// A temp dir with a home of mallory's and, beside it, root's files a planted link points to.
struct World {
    _tmp: tempfile::TempDir,

    home: PathBuf,
    outside: PathBuf,
    /// The metrics file's directory: world-writable and sticky, as a textfile collector's may be.
    textfile: PathBuf,
}

fn lease(id: u32, session: &str, pid: u64, start: f64) -> Value {
    json!({"lease_id": format!("{id:032x}"), "pid": pid, "process_start_time": start, "session_id": session,
           "started_at": 1.0, "surface": "cli", "updated_at": 1.0})
}

fn registry_text(entries: &[Value]) -> String {
    leasectl::lease::format::pyjson::to_string(&json!({ "entries": entries }))
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().to_path_buf();
        fs::set_permissions(&base, fs::Permissions::from_mode(0o755)).expect("chmod");
        let outside = base.join("outside");
        fs::create_dir_all(outside.join("dir")).expect("outside");
        fs::write(outside.join("dir/inner"), "root's").expect("inner");
        fs::write(outside.join("secret"), "root only").expect("secret");
        fs::set_permissions(outside.join("secret"), fs::Permissions::from_mode(0o600)).expect("chmod");
        let home = base.join("home");
        let me = u64::from(std::process::id());
        let start = leasectl::lease::owners::liveness::process_start_time(me).expect("own start time");
        for (h, tag) in [(home.clone(), 0), (home.join("profiles/p1"), 16)] {
            fs::create_dir_all(h.join("runtime")).expect("runtime");
            fs::create_dir_all(h.join("logs")).expect("logs");
            let text = registry_text(&[lease(tag + 1, "S-dead", DEAD_PID, 1.0), lease(tag + 2, "S-live", me, start)]);
            fs::write(h.join("runtime/active_sessions.json"), text).expect("registry");
            fs::write(h.join("runtime/active_sessions.lock"), "").expect("lock");
        }
        fs::write(home.join("config.yaml"), "max_concurrent_sessions: 8\nleasectl:\n  idle_threshold: 2h\n")
            .expect("config");
        fs::write(home.join("logs/leasectl-audit.jsonl"), "{\"action\": \"prune\"}\n").expect("audit");
        let now = leasectl::lease::now();
        let event = json!({"ts": now - 60.0, "time": "t", "event": "acquired", "profile": "root", "lease": {"entry": {"lease_id": "ab", "session_id": "S-old", "pid": 1}}});
        for f in ["logs/leasectl-events.jsonl", "logs/leasectl-events.jsonl.1"] {
            fs::write(home.join(f), format!("{event}\n")).expect("journal");
        }
        let db = rusqlite::Connection::open(home.join("state.db")).expect("state.db");
        db.execute_batch(
            "PRAGMA journal_mode=WAL; CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, title TEXT, \
             started_at REAL, ended_at REAL, end_reason TEXT, last_activity_at REAL); CREATE TABLE messages (id \
             INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT, timestamp REAL);",
        )
        .expect("schema");
        drop(db);
        chown_tree(&home);
        let textfile = base.join("textfile");
        fs::create_dir(&textfile).expect("textfile dir");
        fs::set_permissions(&textfile, fs::Permissions::from_mode(0o1777)).expect("sticky");
        World { _tmp: tmp, home, outside, textfile }
    }

    /// Replace `rel` in the home with `plant`, as mallory would (owned by her).
    fn plant(&self, rel: &str, plant: Plant) -> PathBuf {
        let at = self.home.join(rel);
        match fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => fs::remove_dir_all(&at).expect("remove dir"),
            Ok(_) => fs::remove_file(&at).expect("remove"),
            Err(_) => {}
        }
        match plant {
            Plant::LinkToRootFile => symlink(self.outside.join("secret"), &at).expect("symlink"),
            Plant::LinkToMissing => symlink(self.outside.join("missing"), &at).expect("symlink"),
            Plant::LinkToDir => symlink(self.outside.join("dir"), &at).expect("symlink"),
            Plant::Fifo => rustix::fs::mknodat(
                rustix::fs::CWD,
                &at,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o666),
                0,
            )
            .expect("mkfifo"),
            Plant::HugeSparse => fs::File::create(&at).and_then(|f| f.set_len(1 << 30)).expect("sparse file"),
        }
        lchown(&at, Some(MALLORY), Some(MALLORY)).expect("lchown");
        // The rotation lock is used only when the audit file is past its rotation size.
        if rel == "logs/.leasectl-audit.lock" {
            let audit = self.home.join("logs/leasectl-audit.jsonl");
            fs::OpenOptions::new().append(true).open(&audit).and_then(|f| f.set_len(10_485_800)).expect("grow audit");
        }
        at
    }

    /// Everything outside the home, as it stands (owner, mode, size, content).
    fn outside_state(&self) -> Vec<String> {
        let mut out = Vec::new();
        walk(&self.outside, &mut |p, m| {
            let content = if m.is_file() { fs::read(p).unwrap_or_default() } else { vec![] };
            out.push(format!(
                "{} {}:{} {:o} {} {:?}",
                p.display(),
                m.uid(),
                m.gid(),
                m.mode(),
                m.len(),
                String::from_utf8_lossy(&content)
            ));
        });
        out.sort();
        out
    }

    /// Paths in the home root left belonging to someone other than mallory.
    fn not_mallorys(&self) -> Vec<String> {
        let mut out = Vec::new();
        walk(&self.home, &mut |p, m| {
            if m.uid() != MALLORY {
                out.push(format!("{} (uid {})", p.display(), m.uid()));
            }
        });
        out
    }
}

fn walk(dir: &Path, each: &mut dyn FnMut(&Path, &fs::Metadata)) {
    if let Ok(m) = fs::symlink_metadata(dir) {
        each(dir, &m);
        if m.is_dir() {
            for e in fs::read_dir(dir).into_iter().flatten().flatten() {
                walk(&e.path(), each);
            }
        }
    }
}

fn chown_tree(dir: &Path) {
    walk(dir, &mut |p, _| lchown(p, Some(MALLORY), Some(MALLORY)).expect("lchown"));
}

/// A finished command, or why it did not finish.
struct Ran {
    code: Option<i32>,
    text: String,
}

fn command(home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -v {MEMORY_KIB}; exec \"$0\" \"$@\""))
        .arg(BIN)
        .arg("--home")
        .arg(home)
        .args(["--lock-timeout", "2"])
        // Over `--host local`: the home is served by `leasectl serve --stdio`, the program
        // an ssh host runs; root's serve touches the user's home as root's CLI does.
        .args(if args.first() == Some(&"--host") { vec!["--host".to_owned(), "w=local".to_owned()] } else { vec![] })
        .args(args.iter().skip_while(|a| **a == "--host"))
        .env_remove("HERMES_HOME")
        .env("LEASECTL_SYSLOG_SOCKET", home.with_file_name("no-syslog"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Run to the end within the deadline (killed and reported otherwise). Arguments led by
/// `--host` run over `--host w=local` (the home served by `leasectl serve --stdio`).
fn run(home: &Path, args: &[&str]) -> Result<Ran, String> {
    let child = command(home, args).spawn().map_err(|e| format!("spawn: {e}"))?;
    finish(child)
}

/// Wait for a spawned command to end within the deadline (killed and reported otherwise).
fn finish(mut child: std::process::Child) -> Result<Ran, String> {
    let mut pipes = (child.stdout.take(), child.stderr.take());
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut o) = pipes.0.take() {
            let _ = o.read_to_string(&mut s);
        }
        if let Some(mut e) = pipes.1.take() {
            let _ = e.read_to_string(&mut s);
        }
        s
    });
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let text = out.join().unwrap_or_default();
                return Ok(Ran { code: status.code(), text });
            }
            Ok(None) if started.elapsed() > DEADLINE => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("still running after {DEADLINE:?}: hung"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("wait: {e}")),
        }
    }
}

/// Which action must name a planted path in what it prints.
fn must_name(action: &str, rel: &str) -> bool {
    let registry = ["runtime", "runtime/active_sessions.json", "runtime/active_sessions.lock"];
    let audit = ["logs", "logs/leasectl-audit.jsonl", "logs/.leasectl-audit.lock"];
    match action {
        "prune" | "force-release" | "served-prune" | "served-force-release" => {
            registry.contains(&rel) || audit.contains(&rel)
        }
        "repair" => registry.contains(&rel),
        "events" | "console" | "served-events" => rel.starts_with("logs/leasectl-events.jsonl") || rel == "logs",
        "doctor" => rel == "config.yaml" || rel.starts_with("state.db") || registry[..2].contains(&rel),
        _ => false,
    }
}

/// One action against one planted path: what went wrong, if anything.
fn check(action: &str, rel: &str, plant: Plant) -> Vec<String> {
    let w = World::new();
    let planted = w.plant(rel, plant);
    if action == "repair" && rel != "runtime" && rel != "runtime/active_sessions.json" {
        // An invalid registry (cut short), so the repair writes a backup and a new file.
        let reg = w.home.join("runtime/active_sessions.json");
        let text = fs::read(&reg).expect("registry");
        fs::write(&reg, &text[..text.len() - 40]).expect("cut");
    }
    let before = w.outside_state();
    let ran = match action {
        "prune" => run(&w.home, &["--all-profiles", "prune"]),
        "force-release" => run(&w.home, &["force-release", "--session", "S-dead"]),
        // Forced: the registry is cut short, so whatever followed the cut is unknown.
        "repair" => run(&w.home, &["doctor", "--repair", "--yes", "--force"]),
        "events" => run(&w.home, &["events", "--since", "24h"]),
        "doctor" => run(&w.home, &["doctor"]),
        "recorder" => recorder(&w),
        "served-prune" => run(&w.home, &["--host", "--all-profiles", "prune"]),
        "served-force-release" => run(&w.home, &["--host", "force-release", "--session", "S-dead"]),
        "served-ls" => run(&w.home, &["--host", "--all-profiles", "ls"]),
        "served-events" => run(&w.home, &["--host", "events", "--since", "24h"]),
        "console" => Ok(console(&w)),
        other => panic!("no action {other}"),
    };
    let mut failed = Vec::new();
    let what = format!("{action} with {plant:?} at {rel}");
    match ran {
        Err(e) => failed.push(format!("{what}: {e}")),
        Ok(r) => {
            if matches!(r.code, None | Some(101) | Some(134)) {
                failed.push(format!("{what}: crashed ({:?}): {}", r.code, r.text));
            }
            // A huge regular file is still a regular file, fine for a lock, an audit file or
            // SQLite (which reads pages); what is read whole must refuse it, naming it.
            let read_whole = rel.ends_with("active_sessions.json") || rel == "config.yaml" || rel.contains("events");
            let refused = plant != Plant::HugeSparse || read_whole;
            if refused && must_name(action, rel) && !r.text.contains(&planted.display().to_string()) {
                failed.push(format!("{what}: nothing names {}: {}", planted.display(), r.text));
            }
        }
    }
    if w.outside_state() != before {
        failed.push(format!("{what}: changed files outside the home: {:?} -> {:?}", before, w.outside_state()));
    }
    if w.outside.join("missing").exists() {
        failed.push(format!("{what}: created the missing target outside the home"));
    }
    let rooted = w.not_mallorys();
    if !rooted.is_empty() {
        failed.push(format!("{what}: left files in the user's home that are not the user's: {rooted:?}"));
    }
    failed
}

/// `--all-profiles events --follow --record --metrics-file` as a service would run it; root
/// force-releases a lease while it runs: it must record it, and stop on SIGTERM.
fn recorder(w: &World) -> Result<Ran, String> {
    let metrics = w.textfile.join("leasectl.prom");
    let mut cmd =
        command(&w.home, &["--all-profiles", "events", "--follow", "--record", "-o", "json", "--metrics-file"]);
    cmd.arg(&metrics);
    let mut child = cmd.spawn().map_err(|e| format!("spawn: {e}"))?;
    let stdout = common::process::pump(child.stdout.take().expect("stdout"));
    let stderr = common::process::pump(child.stderr.take().expect("stderr"));
    // Its first event ("following", or why it cannot) says it watches; then root acts.
    let mut text = stdout.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
    let released = run(&w.home, &["force-release", "--session", "S-dead"])?;
    let mut seen = false;
    let until = Instant::now() + Duration::from_secs(5);
    while released.code == Some(0) && !seen && Instant::now() < until {
        if let Ok(line) = stdout.recv_timeout(Duration::from_millis(50)) {
            seen |= line.contains("S-dead");
            text.push_str(&line);
        }
    }
    if released.code == Some(0) && !seen {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("the recorder did not report the force-release within 5 s: {text}"));
    }
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).expect("pid"),
        rustix::process::Signal::TERM,
    );
    let stopped = Instant::now() + Duration::from_secs(5);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            _ if Instant::now() > stopped => break None,
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    while let Ok(line) = stderr.try_recv() {
        text.push_str(&line);
    }
    match status {
        Some(s) => Ok(Ran { code: s.code().or(Some(0)), text }),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("the recorder did not stop within 5 s of SIGTERM: {text}"))
        }
    }
}

/// The console's prune, force-release and repair, through its worker (in this process,
/// as root: the worker thread acts as the home's owner).
fn console(w: &World) -> Ran {
    use leasectl::lease::{Location, Registry, Target};
    use leasectl::tui::event::Effect;
    use leasectl::tui::worker::{Scope, Worker};
    let location = Location::File(Registry::new("root", &w.home));
    let scope = Scope { locations: vec![location.clone()], discover_root: Some(w.home.clone()), discover_hosts: false };
    let mut worker = Worker::new(scope, Duration::from_secs(2), None);
    worker.reload();
    // The console opens with the recorder's last day (a FIFO or link there must not hang it).
    let mut app =
        leasectl::tui::state::App::new(vec![location.clone()], leasectl::lease::now(), jiff::tz::TimeZone::UTC);
    leasectl::tui::load_history(&mut app, std::slice::from_ref(&location), Some(&w.home));
    let mut text: String = app.log.iter().map(|l| format!("{}\n", l.text)).collect();
    for effect in [
        Effect::Prune { location: location.clone() },
        Effect::ForceRelease {
            location: location.clone(),
            target: Target::Session("S-dead".into()),
            allow_live: false,
        },
        Effect::Repair { location: location.clone(), force: false },
    ] {
        text.push_str(&format!("{:?}\n", worker.act(&effect)));
    }
    Ran { code: Some(0), text }
}

fn matrix(action: &str) {
    let mut failed = Vec::new();
    for rel in PATHS {
        for plant in PLANTS {
            failed.extend(check(action, rel, plant));
        }
    }
    assert!(failed.is_empty(), "{} failure(s):\n{}", failed.len(), failed.join("\n"));
}

#[test]
#[ignore = "needs root: acts as root against another user's home (.ci/run runs it)"]
fn roots_prune_of_every_profile_stays_in_the_home() {
    needs_root!();
    matrix("prune");
}

#[test]
#[ignore = "needs root: acts as root against another user's home (.ci/run runs it)"]
fn roots_force_release_stays_in_the_home() {
    needs_root!();
    matrix("force-release");
}

#[test]
#[ignore = "needs root: acts as root against another user's home (.ci/run runs it)"]
fn roots_repair_stays_in_the_home() {
    needs_root!();
    matrix("repair");
}

#[test]
#[ignore = "needs root: acts as root against another user's home (.ci/run runs it)"]
fn events_since_reads_within_bounds_and_names_what_it_skips() {
    needs_root!();
    matrix("events");
}

#[test]
#[ignore = "needs root: acts as root against another user's home (.ci/run runs it)"]
fn doctor_reads_config_and_state_db_only_as_regular_files() {
    needs_root!();
    matrix("doctor");
}

#[test]
#[ignore = "needs root: acts as root against another user's home (.ci/run runs it)"]
fn the_recorder_records_and_stops_whatever_is_planted() {
    needs_root!();
    matrix("recorder");
}

#[test]
#[ignore = "needs root: acts as root against another user's home (.ci/run runs it)"]
fn the_consoles_actions_stay_in_the_home() {
    needs_root!();
    matrix("console");
}

/// The same home served over `--host` (`leasectl serve --stdio`, as root on the host):
/// its prune, force-release, listings and recorded events stay in the home and name what
/// they refuse.
#[test]
#[ignore = "needs root: acts as root against another user's home (.ci/run runs it)"]
fn a_served_homes_prune_force_release_listing_and_events_stay_in_the_home() {
    needs_root!();
    matrix("served-prune");
    matrix("served-force-release");
    matrix("served-ls");
    matrix("served-events");
}

/// A fresh home (Hermes' seed test starts from one) that root's acquire, hold or run
/// creates inside mallory's directory is hers, every directory and file of it; a symlink
/// she planted on the way to a directory of root's is refused and nothing is made there;
/// one to her own directory is followed, and what is made there is hers too.
#[test]
#[ignore = "needs root: acts as root against another user's home (.ci/run runs it)"]
fn a_fresh_home_root_creates_in_a_users_directory_is_the_users() {
    needs_root!();
    let w = World::new();
    let mine = w.home.join("u");
    fs::create_dir(&mine).expect("mallory's dir");
    lchown(&mine, Some(MALLORY), Some(MALLORY)).expect("lchown");
    let me = std::process::id().to_string();
    let fresh = |name: &str| mine.join(name).join("deeper/.hermes");
    let registry = |home: &Path| home.join("runtime/active_sessions.json");
    let before = w.outside_state();

    let by_acquire = fresh("acquire");
    let ran = run(&by_acquire, &["acquire", "S", "--owner-pid", &me, "--json"]).expect("acquire finishes");
    assert_eq!(ran.code, Some(0), "{}", ran.text);
    assert!(registry(&by_acquire).is_file(), "{}", ran.text);
    let by_run = fresh("run");
    let ran = run(&by_run, &["run", "S", "-q", "--", "true"]).expect("run finishes");
    assert_eq!(ran.code, Some(0), "{}", ran.text);
    let by_hold = fresh("hold");
    let mut hold = command(&by_hold, &["hold", "S"]).spawn().expect("hold");
    let deadline = Instant::now() + DEADLINE;
    while !registry(&by_hold).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = hold.kill();
    let _ = hold.wait();
    assert!(registry(&by_hold).is_file(), "hold made no registry");

    // Her symlink to her own directory: followed, and the home made there is hers.
    let her_real = mine.join("real");
    fs::create_dir(&her_real).expect("mkdir");
    lchown(&her_real, Some(MALLORY), Some(MALLORY)).expect("lchown");
    symlink(&her_real, mine.join("via")).expect("symlink");
    lchown(mine.join("via"), Some(MALLORY), Some(MALLORY)).expect("lchown");
    let ran = run(&mine.join("via/.hermes"), &["acquire", "S", "--owner-pid", &me]).expect("acquire finishes");
    assert_eq!(ran.code, Some(0), "{}", ran.text);
    assert!(registry(&her_real.join(".hermes")).is_file());
    assert_eq!(w.not_mallorys(), Vec::<String>::new(), "root left what is not mallory's in her home");

    // Her symlink to root's directory: refused, named, nothing made there.
    symlink(w.outside.join("dir"), mine.join("roots")).expect("symlink");
    lchown(mine.join("roots"), Some(MALLORY), Some(MALLORY)).expect("lchown");
    let ran = run(&mine.join("roots/.hermes"), &["acquire", "S", "--owner-pid", &me]).expect("acquire finishes");
    assert_eq!(ran.code, Some(5), "{}", ran.text);
    assert!(ran.text.contains("symlink") && ran.text.contains("roots"), "{}", ran.text);
    assert_eq!(w.outside_state(), before, "root's acquire made something outside the home");
}

/// SQLite opens state.db by its path: root's read of a user's state.db acts as that user.
/// A failpoint holds the read between leasectl's check of the files and SQLite's open;
/// there mallory swaps her home for a link to a directory of root's holding a WAL
/// database of root's (before: root's SQLite created its -shm there, root's), or swaps
/// state.db for a FIFO (before: the read hung). Nothing outside the home may change,
/// nothing may hang: the context is "unknown for now" within the bound.
#[test]
#[cfg_attr(not(feature = "failpoints"), ignore = "needs --features failpoints and root")]
#[cfg_attr(feature = "failpoints", ignore = "needs root: acts as root against another user's home (.ci/run runs it)")]
fn roots_state_db_read_cannot_be_swapped_into_roots_directory_or_hung() {
    needs_root!();
    for swap in ["home", "fifo"] {
        let w = World::new();
        // A writer's -wal and -shm beside her state.db: SQLite then opens it as it stands,
        // not immutable, and a database swapped in is opened with its side files.
        for side in ["state.db-wal", "state.db-shm"] {
            fs::write(w.home.join(side), "").expect("side file");
            lchown(w.home.join(side), Some(MALLORY), Some(MALLORY)).expect("lchown");
        }
        let roots = w.outside.join("rootdb");
        fs::create_dir(&roots).expect("root's dir");
        let db = rusqlite::Connection::open(roots.join("state.db")).expect("root's db");
        db.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE sessions (id TEXT PRIMARY KEY, title TEXT);")
            .expect("root's schema");
        drop(db);
        let before = w.outside_state();
        let mut cmd = command(&w.home, &["ls", "-o", "wide"]);
        cmd.env("LEASECTL_TEST_FAILPOINT", "state-db-open");
        let child = cmd.spawn().expect("ls");
        std::thread::sleep(Duration::from_millis(500));
        if swap == "home" {
            fs::rename(&w.home, w.home.with_file_name("home-away")).expect("move her home");
            symlink(&roots, &w.home).expect("home -> root's dir");
            lchown(&w.home, Some(MALLORY), Some(MALLORY)).expect("lchown");
        } else {
            fs::remove_file(w.home.join("state.db")).expect("remove state.db");
            rustix::fs::mknodat(
                rustix::fs::CWD,
                w.home.join("state.db"),
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o666),
                0,
            )
            .expect("mkfifo");
            lchown(w.home.join("state.db"), Some(MALLORY), Some(MALLORY)).expect("lchown");
        }
        let ran = finish(child).unwrap_or_else(|e| panic!("{swap}: root's ls -o wide {e}"));
        assert_eq!(ran.code, Some(0), "{swap}: {}", ran.text);
        let after = w.outside_state();
        let changed: Vec<&String> = after.iter().filter(|l| !before.contains(l)).collect();
        let names = |lines: &[&String]| -> Vec<String> {
            lines.iter().map(|l| l.split(' ').take(2).collect::<Vec<_>>().join(" ")).collect()
        };
        assert!(changed.is_empty(), "{swap}: root's read of state.db changed root's files: {:?}", names(&changed));
        if swap == "fifo" {
            assert!(ran.text.contains("did not answer within"), "{swap}: {}", ran.text);
        }
        // Nothing SQLite made in her home (moved aside or not) is root's.
        let mut rooted = w.not_mallorys();
        walk(&w.home.with_file_name("home-away"), &mut |p, m| {
            if m.uid() != MALLORY {
                rooted.push(format!("{} (uid {})", p.display(), m.uid()));
            }
        });
        assert!(rooted.is_empty(), "{swap}: root left what is not hers in her home: {rooted:?}");
    }
}

/// Where `fs.protected_hardlinks` is 0, mallory can make her audit file a hard link to
/// any file (made here by the test as root, which that setting would let her do): root's
/// force-release must not append its JSON line to it, and says why; nor to an audit file
/// that is not hers. The removal itself is done.
#[test]
#[ignore = "needs root: acts as root against another user's home (.ci/run runs it)"]
fn roots_audit_record_is_never_appended_to_a_hard_link_or_a_file_not_the_users() {
    needs_root!();
    for planted in ["hard link", "root's file"] {
        let w = World::new();
        let audit = w.home.join("logs/leasectl-audit.jsonl");
        fs::remove_file(&audit).expect("remove the audit file");
        if planted == "hard link" {
            fs::hard_link(w.outside.join("secret"), &audit).expect("hard link");
        } else {
            fs::write(&audit, "").expect("root's audit file");
        }
        let before = w.outside_state();
        let ran = run(&w.home, &["force-release", "--session", "S-dead"]).expect("force-release finishes");
        assert_eq!(ran.code, Some(0), "{planted}: {}", ran.text);
        let why = if planted == "hard link" { "hard links" } else { "belongs to uid 0" };
        assert!(ran.text.contains(&audit.display().to_string()) && ran.text.contains(why), "{planted}: {}", ran.text);
        assert_eq!(w.outside_state(), before, "{planted}: root's record reached a file outside the home");
        assert_eq!(fs::read(&audit).expect("audit").len() as u64, if planted == "hard link" { 9 } else { 0 });
    }
}

/// The inodes `pid`'s inotify watches are on (`/proc/PID/fdinfo`: `inotify wd:.. ino:HEX`).
fn watched_inodes(pid: u32) -> Vec<u64> {
    let mut inodes = Vec::new();
    for fd in fs::read_dir(format!("/proc/{pid}/fdinfo")).into_iter().flatten().flatten() {
        let text = fs::read_to_string(fd.path()).unwrap_or_default();
        for line in text.lines().filter(|l| l.starts_with("inotify wd:")) {
            let ino = line.split_whitespace().find_map(|w| w.strip_prefix("ino:"));
            inodes.extend(ino.and_then(|h| u64::from_str_radix(h, 16).ok()));
        }
    }
    inodes
}

/// A `runtime/` or `profiles/` the home's owner made a symlink to another directory (a
/// busy one, or one of root's) is not watched through: root's follower would be woken by
/// every change there. The home itself is watched instead (what leasectl reads there is
/// refused anyway).
#[test]
fn a_symlinked_runtime_or_profiles_is_not_watched_through() {
    let w = World::new();
    let elsewhere = w.outside.join("dir");
    fs::remove_dir_all(w.home.join("runtime")).expect("runtime");
    symlink(&elsewhere, w.home.join("runtime")).expect("runtime -> outside");
    fs::rename(w.home.join("profiles"), w.outside.join("profiles")).expect("profiles away");
    symlink(w.outside.join("profiles"), w.home.join("profiles")).expect("profiles -> outside");
    let mut follower = command(&w.home, &["--all-profiles", "ls", "-w"]).spawn().expect("ls -w");
    let pid = follower.id();
    let mut watched = Vec::new();
    let until = Instant::now() + Duration::from_secs(5);
    // The watcher is armed once the listing is out; wait for its watches to show.
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
        watched = watched_inodes(pid);
        if !watched.is_empty() {
            std::thread::sleep(Duration::from_millis(300));
            watched = watched_inodes(pid);
            break;
        }
    }
    let _ = follower.kill();
    let _ = follower.wait();
    let ino = |p: &Path| fs::metadata(p).map(|m| m.ino()).expect("inode");
    assert!(watched.contains(&ino(&w.home)), "the home is watched: {watched:?}");
    for target in [elsewhere, w.outside.join("profiles"), w.outside.join("profiles/p1/runtime")] {
        assert!(!watched.contains(&ino(&target)), "{} is watched through a symlink: {watched:?}", target.display());
    }
}
