//! Shared bench fixtures: Hermes-shaped registry JSON, real owner processes,
//! in-memory console snapshots, and small statistics helpers. Every bench
//! works in its own temp home; nothing here touches `~/.hermes`.
#![allow(dead_code)]

pub mod console;
#[path = "../../tests/common/hermes_schema.rs"]
mod hermes_schema;
#[path = "../../tests/common/owners.rs"]
mod owners;
#[allow(unused_imports)] // for the benches that make a state.db; the rest leave it
pub use hermes_schema::{STATE_DB_SCHEMA, many_sessions};
pub use owners::owner as owner_info;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use leasectl::lease::format::pyjson::float_repr;
use leasectl::lease::home::config::CapSetting;
use leasectl::lease::owners::liveness::{DeadCause, process_start_time};
use leasectl::lease::{Entry, Liveness, Registry, file::registry as store, home::lock};
use leasectl::tui::event::{Event, LeaseRow, Loaded, RegistrySnapshot};
use leasectl::tui::state::App;
use leasectl::tui::update::update;

/// 2026-11-29 22:19:18 UTC, as in tests/common: in-memory fixtures use this instant.
pub const NOW: f64 = 1_795_990_758.0;

pub const LOCK_TIMEOUT: Duration = Duration::from_secs(10);

const SURFACES: [&str; 4] = ["cli", "tui", "desktop", "gateway"];

/// An owner pid and the start time recorded for it.
#[derive(Debug, Clone, Copy)]
pub struct Owner {
    pub pid: u64,
    pub start_time: Option<f64>,
}

impl Owner {
    /// The bench process itself, with its real start time.
    pub fn me() -> Owner {
        let pid = u64::from(std::process::id());
        Owner { pid, start_time: Some(process_start_time(pid).expect("own start time")) }
    }
}

/// One entry as Hermes writes it (keys sorted, one line), owned by `owner`.
/// Every other entry has `track_liveness: true`.
pub fn entry_json(i: usize, owner: Owner, now: f64) -> String {
    let pst = owner.start_time.map(float_repr).unwrap_or_else(|| "null".into());
    let track = if i.is_multiple_of(2) { ", \"track_liveness\": true" } else { "" };
    let started = float_repr(now - (i % 5000) as f64 * 1.5 - 0.25);
    format!(
        "{{\"lease_id\": \"{i:08x}beefcafe0123456789abcdef\", \"metadata\": {{\"live_session_id\": \"tab-{i}\"}}, \
         \"pid\": {pid}, \"process_start_time\": {pst}, \"session_id\": \"chat-{i}\", \"started_at\": {started}, \
         \"surface\": \"{surface}\"{track}, \"updated_at\": {started}}}",
        pid = owner.pid,
        surface = SURFACES[i % SURFACES.len()],
    )
}

/// A registry of `n` entries, owners assigned round-robin.
pub fn registry_json(n: usize, owners: &[Owner], now: f64) -> String {
    let mut out = String::with_capacity(32 + n * 280);
    out.push_str("{\"entries\": [");
    for i in 0..n {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&entry_json(i, owners[i % owners.len()], now));
    }
    out.push_str("]}");
    out
}

/// Parse generated JSON into a registry (it must be valid).
pub fn registry_file(n: usize, owners: &[Owner], now: f64) -> store::RegistryFile {
    store::parse(registry_json(n, owners, now).as_bytes()).expect("generated registry is valid")
}

/// Write `n` entries to `reg` under the registry lock, the way leasectl writes.
pub fn fill(reg: &Registry, n: usize, owners: &[Owner]) {
    fill_at(reg, n, owners, leasectl::lease::now());
}

/// [`fill`] with the newest lease started at `now` (the others 1.5 s apart before it).
pub fn fill_at(reg: &Registry, n: usize, owners: &[Owner], now: f64) {
    let file = registry_file(n, owners, now);
    let guard = lock::lock(&reg.lock_path(), LOCK_TIMEOUT).expect("lock the fresh registry");
    store::write(&guard, &reg.path(), &file).expect("write the registry");
}

/// Real owner processes (`sleep 600`), killed and reaped on drop.
pub struct Sleepers {
    children: Vec<Child>,
}

impl Sleepers {
    pub fn spawn(n: usize) -> Sleepers {
        let children = (0..n)
            .map(|_| {
                Command::new("sleep")
                    .arg("600")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("spawn `sleep 600`")
            })
            .collect();
        Sleepers { children }
    }

    /// Each child with its real (psutil-compatible) start time.
    pub fn owners(&self) -> Vec<Owner> {
        self.children
            .iter()
            .map(|c| {
                let pid = u64::from(c.id());
                let start_time = process_start_time(pid).expect("a fresh `sleep` child has a start time");
                Owner { pid, start_time: Some(start_time) }
            })
            .collect()
    }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `count` pids at or below `pid_max` that name no process right now (searched
/// downward from `pid_max`, where the kernel has not handed out pids yet).
pub fn unused_pids(count: usize) -> Vec<u64> {
    let pid_max: u64 =
        std::fs::read_to_string("/proc/sys/kernel/pid_max").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(32_768);
    (2..=pid_max).rev().filter(|p| !Path::new(&format!("/proc/{p}")).exists()).take(count).collect()
}

// ---------------------------------------------------------------------------
// In-memory console fixtures (as tests/common builds them)
// ---------------------------------------------------------------------------

pub fn registry(profile: &str) -> Registry {
    Registry::new(profile, "/home/op/.hermes")
}

/// `n` entries in memory, over 16 fake owners (pids 4100..4116), timed before [`NOW`].
pub fn entries(n: usize) -> Vec<Arc<Entry>> {
    let owners: Vec<Owner> = (0..16).map(|k| Owner { pid: 4100 + k, start_time: Some(NOW - 86_400.0) }).collect();
    registry_file(n, &owners, NOW).entries.into_iter().map(Arc::new).collect()
}

/// Console rows for these entries: mostly alive, every 50th dead, every 97th recycled.
pub fn rows(entries: &[Arc<Entry>]) -> Vec<LeaseRow> {
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let (liveness, owner) = if i % 50 == 49 {
                (Liveness::Dead(DeadCause::PidGone), None)
            } else if i % 97 == 96 {
                let recorded = e.process_start_time().unwrap_or(0.0);
                (Liveness::Recycled { recorded, actual: recorded + 812.37 }, Some(owner_info("bash")))
            } else {
                (Liveness::Alive, Some(owner_info("hermes")))
            };
            LeaseRow {
                entry: Arc::clone(e),
                liveness,
                owner: owner.map(Arc::new),
                ttl_left: None,
                leak: None,
                owner_move: None,
                host: None,
            }
        })
        .collect()
}

pub fn snapshot(reg: &Registry, leases: Vec<LeaseRow>) -> RegistrySnapshot {
    RegistrySnapshot {
        location: reg.clone().into(),
        exists: true,
        modified: Some(NOW - 60.0),
        cap: CapSetting { cap: None, key: None, warnings: vec![] },
        leases: Ok(leases),
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

/// An app that has loaded this one snapshot.
pub fn app_with(snap: RegistrySnapshot) -> App {
    let mut app = App::new(vec![snap.location.clone()], NOW, jiff::tz::TimeZone::UTC);
    update(
        &mut app,
        Event::Loaded(Loaded {
            at: NOW,
            first: 0,
            initial: false,
            snapshots: vec![snap],
            large_read_done: false,
            owners_moved: None,
        }),
    );
    app
}

// ---------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------

/// The `q` quantile (0..=1) of `xs`, nearest rank.
pub fn quantile(xs: &[f64], q: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

pub fn median(xs: &[f64]) -> f64 {
    quantile(xs, 0.5)
}

/// True when criterion was asked to benchmark (not `cargo test --benches`, not
/// `--list`, not `--profile-time`, which is for a profiler).
pub fn benchmarking() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--bench")
        && !args.iter().any(|a| a == "--list" || a == "--test" || a.starts_with("--profile-time"))
}

pub fn quick() -> bool {
    std::env::args().any(|a| a == "--quick")
}

static REQUESTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// An acquire of a fresh session (and live id) by `owner`, liveness tracked.
pub fn request(owner: u64) -> leasectl::lease::AcquireRequest {
    let k = REQUESTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut metadata = serde_json::Map::new();
    metadata.insert("live_session_id".into(), serde_json::Value::String(format!("bench-live-{k}")));
    leasectl::lease::AcquireRequest {
        session_id: format!("bench-session-{k}"),
        surface: Some("cli".into()),
        metadata,
        owner_pid: owner,
        cap: None,
        track_liveness: true,
        lock_timeout: LOCK_TIMEOUT,
    }
}

/// A thread that releases the leases it is sent, one registry's, and answers
/// whether each release removed its lease.
pub struct Releaser {
    pub work: std::sync::mpsc::Sender<String>,
    pub done: std::sync::mpsc::Receiver<bool>,
}

pub fn releaser(reg: Registry) -> Releaser {
    let (work, work_rx) = std::sync::mpsc::channel::<String>();
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for lease_id in work_rx {
            let removed =
                leasectl::lease::file::release(&reg, &lease_id, LOCK_TIMEOUT).map(|r| r.removed).unwrap_or(false);
            if done_tx.send(removed).is_err() {
                break;
            }
        }
    });
    Releaser { work, done }
}
