//! Shared test fixtures: entries, rows and snapshots built in memory; [`process`], real child
//! processes and temp homes for tests of the built binary; and [`pty`], the real
//! binary in a pseudo-terminal.
#![allow(dead_code)]

pub mod certs;
pub mod clock;
pub mod hermes_schema;
mod owners;
pub mod process;
pub mod pty;
pub mod signals;
pub mod sshd;
pub mod systemd;

pub use owners::owner;

use std::sync::Arc;

use leasectl::lease::home::config::CapSetting;
use leasectl::lease::owners::liveness::DeadCause;
use leasectl::lease::{Entry, Liveness, Location, Registry, file::registry as store};
use leasectl::tui::event::{Event, LeaseRow, Loaded, RegistrySnapshot};
use leasectl::tui::state::App;
use leasectl::tui::update::update;

/// 2026-11-29 22:19:18 UTC: every console test renders at this instant, UTC.
pub const NOW: f64 = 1_795_990_758.0;

pub fn registry(profile: &str) -> Location {
    Location::File(if profile == "root" {
        Registry::new("root", "/home/op/.hermes")
    } else {
        Registry::new(profile, format!("/home/op/.hermes/profiles/{profile}"))
    })
}

/// When a planted entry was taken, unless a test says: 2026-11-29 22:06:40.5 UTC.
pub const PLANTED_AT: f64 = 1_795_990_000.5;

/// A registry entry as Hermes writes it, for the registries tests plant: surface `cli`,
/// no recorded start time, taken and updated at [`PLANTED_AT`], empty metadata. Each
/// method changes one thing; `text` is the JSON as Hermes writes it (sorted keys,
/// Python's separators), `value` the same as a tree.
#[derive(Debug, Clone)]
pub struct Planted(serde_json::Value);

pub fn planted(lease: &str, session: &str, pid: u64) -> Planted {
    Planted(serde_json::json!({
        "lease_id": lease, "session_id": session, "surface": "cli", "pid": pid,
        "process_start_time": null, "started_at": PLANTED_AT, "updated_at": PLANTED_AT, "metadata": {},
    }))
}

impl Planted {
    /// Taken (and last updated) at `at`.
    pub fn at(mut self, at: f64) -> Planted {
        self.0["started_at"] = at.into();
        self.0["updated_at"] = at.into();
        self
    }

    /// The owner's recorded start time (`null` for none).
    pub fn start_time(mut self, t: impl Into<serde_json::Value>) -> Planted {
        self.0["process_start_time"] = t.into();
        self
    }

    pub fn surface(mut self, surface: &str) -> Planted {
        self.0["surface"] = surface.into();
        self
    }

    pub fn metadata(mut self, metadata: serde_json::Value) -> Planted {
        self.0["metadata"] = metadata;
        self
    }

    /// No metadata member at all.
    pub fn without_metadata(mut self) -> Planted {
        if let Some(members) = self.0.as_object_mut() {
            members.remove("metadata");
        }
        self
    }

    pub fn value(self) -> serde_json::Value {
        self.0
    }

    pub fn text(&self) -> String {
        leasectl::lease::format::pyjson::to_string(&self.0)
    }
}

/// An entry as Hermes writes one; `age` seconds old.
pub fn entry(lease: &str, session: &str, surface: &str, pid: u64, age: f64, live_id: Option<&str>) -> Entry {
    let entry = planted(lease, session, pid).surface(surface).start_time(NOW - age - 5.25).at(NOW - age);
    let entry = match live_id {
        Some(l) => entry.metadata(serde_json::json!({"live_session_id": l})),
        None => entry.without_metadata(),
    };
    let text = format!("[{}]", entry.text());
    store::parse(text.as_bytes()).expect("fixture entry is valid").entries.remove(0)
}

pub fn alive(e: Entry, name: &str) -> LeaseRow {
    LeaseRow {
        entry: Arc::new(e),
        liveness: Liveness::Alive,
        owner: Some(Arc::new(owner(name))),
        ttl_left: None,
        leak: None,
        owner_move: None,
        host: None,
    }
}

pub fn dead(e: Entry) -> LeaseRow {
    LeaseRow {
        entry: Arc::new(e),
        liveness: Liveness::Dead(DeadCause::PidGone),
        owner: None,
        ttl_left: None,
        leak: None,
        owner_move: None,
        host: None,
    }
}

pub fn recycled(e: Entry, clock_step: bool) -> LeaseRow {
    let recorded = e.process_start_time().unwrap_or(0.0);
    let actual = if clock_step { recorded + 3.0 } else { recorded + 812.37 };
    LeaseRow {
        entry: Arc::new(e),
        liveness: Liveness::Recycled { recorded, actual },
        owner: Some(Arc::new(owner("bash"))),
        ttl_left: None,
        leak: None,
        owner_move: None,
        host: None,
    }
}

/// A snapshot as the worker reads it; an error is given as the text the console shows.
pub fn snap(reg: &Location, cap: Option<u64>, leases: Result<Vec<LeaseRow>, String>) -> RegistrySnapshot {
    let leases = leases.map_err(leasectl::lease::Error::Refused);
    RegistrySnapshot {
        location: reg.clone(),
        exists: true,
        modified: Some(NOW - 60.0),
        cap: CapSetting { cap, key: cap.map(|_| "max_concurrent_sessions".into()), warnings: vec![] },
        leases,
        lock_holder: None,
        sessions: None,
        lag: None,
        other_version: None,
        pruned_by_acquire: vec![],
        removed_by: vec![],
        slots_used: None,
        waiting: vec![],
        not_answering: vec![],
    }
}

pub fn loaded(snapshots: Vec<RegistrySnapshot>) -> Event {
    Event::Loaded(Loaded { at: NOW, first: 0, initial: false, snapshots, large_read_done: false, owners_moved: None })
}

/// An app that has loaded these snapshots once.
pub fn app(snapshots: Vec<RegistrySnapshot>) -> App {
    let regs = snapshots.iter().map(|s| s.location.clone()).collect();
    let mut app = App::new(regs, NOW, jiff::tz::TimeZone::UTC);
    update(&mut app, loaded(snapshots));
    app
}

/// The mixed registry used by several tests: alive, dead, recycled, clock step.
pub fn mixed_root() -> RegistrySnapshot {
    let root = registry("root");
    snap(
        &root,
        Some(4),
        Ok(vec![
            alive(
                entry(
                    "a1b2c3d4e5f60718293a4b5c6d7e8f90",
                    "chat-42",
                    "desktop",
                    4101,
                    3.0 * 3600.0 + 720.0,
                    Some("tab-1"),
                ),
                "hermes-desktop",
            ),
            dead(entry("0f1e2d3c4b5a69788796a5b4c3d2e1f0", "chat-7", "gateway", 4200, 300.0, None)),
            recycled(entry("99887766554433221100ffeeddccbbaa", "chat-9", "cli", 4300, 7200.0, Some("t-9")), false),
            recycled(entry("1234567890abcdef1234567890abcdef", "chat-11", "tui", 4400, 90.0, None), true),
        ]),
    )
}

/// A child process that is killed (SIGKILL) and reaped when dropped, so no test leaves
/// one behind, even when it panics. Both are no-ops once the child is reaped.
pub struct Reaped(pub std::process::Child);

impl std::ops::Deref for Reaped {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

impl Reaped {
    /// SIGKILL (no chance to clean up) and reap; returns the status.
    pub fn kill_and_reap(&mut self) -> std::process::ExitStatus {
        let sent = signals::kill(self.0.id(), libc::SIGKILL);
        assert!(sent.is_ok(), "kill -KILL {}: {sent:?}", self.0.id());
        self.0.wait().expect("reap the child")
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A process whose memory steps every second through eleven sizes, 5 MB apart, and round
/// again: two looks at its details 5 s apart (up to 10 s on a loaded machine) find it at
/// sizes steps apart, its memory moved well over 5 % (deterministically, where a busy
/// owner's CPU figure moves only now and then; with seven sizes, looks 7 s apart on a
/// loaded machine would find the same). Killed and reaped when dropped.
pub fn owner_whose_memory_moves() -> Reaped {
    let script = "import time\ni = 0\nwhile True:\n    held = [b'x' * 5_000_000 for _ in range(i % 11)]\n    \
                  i += 1\n    time.sleep(1)";
    Reaped(std::process::Command::new("/usr/bin/python3").args(["-c", script]).spawn().expect("python3"))
}

/// Every `.rs` file under `dir` (the crate's sources, read as text by the tests that
/// check the layering, the one door and the README).
pub fn rust_sources(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("a source folder").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(rust_sources(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// Session `id` ends in `home`'s state.db at `at`, closed from the CLI.
pub fn end_session(home: &std::path::Path, id: &str, at: f64) {
    let db = rusqlite::Connection::open(home.join("state.db")).expect("state.db");
    db.execute("UPDATE sessions SET ended_at = ?1, end_reason = 'cli_close' WHERE id = ?2", rusqlite::params![at, id])
        .expect("end the session");
}

/// The system calls `syscalls` (strace's `-e trace=` list) that every thread of `pid`
/// makes over `how_long`, as strace writes them: attached, then detached.
pub fn traced(pid: u32, syscalls: &str, how_long: std::time::Duration, out: &std::path::Path) -> String {
    let mut strace = std::process::Command::new("strace");
    strace.args(["-qq", "-e", &format!("trace={syscalls}"), "-o"]).arg(out);
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads").flatten() {
        strace.arg("-p").arg(task.file_name());
    }
    let mut strace = strace.stderr(std::process::Stdio::null()).spawn().expect("strace");
    std::thread::sleep(how_long);
    let _ = signals::kill(strace.id(), libc::SIGINT);
    let _ = strace.wait();
    std::fs::read_to_string(out).expect("strace's output")
}

/// A Hermes-like state.db saying when each session ended (None: still open, active now).
pub fn state_db(home: &std::path::Path, sessions: &[(&str, Option<f64>)]) {
    let db = rusqlite::Connection::open(home.join("state.db")).expect("state.db");
    db.execute_batch(hermes_schema::STATE_DB_SCHEMA).expect("schema");
    let now = leasectl::lease::now();
    for (id, ended_ago) in sessions {
        let ended = ended_ago.map(|a| now - a);
        let reason = ended.map(|_| "cli_close");
        db.execute(
            "INSERT INTO sessions VALUES (?1, 'cli', 't', ?2, ?3, ?4, ?5)",
            rusqlite::params![id, now - 90_000.0, ended, reason, ended.unwrap_or(now - 5.0)],
        )
        .expect("row");
    }
}

/// A registry of `n` leases in Hermes' layout, sessions `chat-0` .. `chat-{n-1}`, all owned
/// by this test process (alive, its real start time), written to `path`.
pub fn write_live_registry(path: &std::path::Path, n: usize) {
    let pid = std::process::id();
    let start = leasectl::lease::owners::liveness::process_start_time(u64::from(pid)).expect("own start time");
    let now = leasectl::lease::now();
    let entries: Vec<String> = (0..n)
        .map(|i| {
            let at = now - i as f64;
            format!(
                "{{\"lease_id\": \"{i:08x}beefcafe0123456789abcdef\", \"pid\": {pid}, \"process_start_time\": {start:?}, \
                 \"session_id\": \"chat-{i}\", \"started_at\": {at:?}, \"surface\": \"cli\", \"updated_at\": {at:?}}}"
            )
        })
        .collect();
    std::fs::write(path, format!("{{\"entries\": [{}]}}", entries.join(", "))).expect("registry");
}

/// Make a profile's directory (or a directory in one, such as its runtime/) with the
/// profile's config.yaml: the identity file `hermes profile create` writes, by which
/// Hermes 0.22 (and leasectl) tell a profile from any other directory.
pub fn make_profile(dir: impl AsRef<std::path::Path>) {
    let dir = dir.as_ref();
    std::fs::create_dir_all(dir).expect("create the profile's directory");
    let home = if dir.ends_with("runtime") { dir.parent().unwrap_or(dir) } else { dir };
    if !home.join("config.yaml").exists() {
        std::fs::write(home.join("config.yaml"), "").expect("the profile's config.yaml");
    }
}

/// A home that is `<root>/profiles/<name>` made a profile (see [`make_profile`]); any
/// other home is left as it is.
pub fn make_profile_if_one(home: &std::path::Path) {
    if home.parent().is_some_and(|p| p.ends_with("profiles")) {
        make_profile(home);
    }
}

/// Move every lease in `home`'s registry back `secs` (started_at and updated_at): leases
/// taken before their session ended or went idle, as a leaked lease is (a lease taken
/// after is no leak suspect).
pub fn backdate_leases(home: &std::path::Path, secs: f64) {
    let path = home.join("runtime/active_sessions.json");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("the registry")).expect("the registry's JSON");
    for e in v["entries"].as_array_mut().expect("entries") {
        for key in ["started_at", "updated_at"] {
            if let Some(t) = e[key].as_f64() {
                e[key] = serde_json::json!(t - secs);
            }
        }
    }
    std::fs::write(&path, v.to_string()).expect("write the registry");
}
