//! What the core's caches buy, on the workloads they were written for: one bench
//! binary, built once per variant of the library (all caches, or one taken out),
//! the variants' binaries run in alternation by `benches/caches.sh`, which prints
//! each variant's medians as ratios against the variant with all caches.
//!
//! Workloads (milliseconds per operation, median of interleaved rounds):
//! - `cycle/N`: one thread acquires and releases a lease on a registry of N live
//!   entries (owned by 4 real `sleep` children);
//! - `two_threads/N`: the acquire and the release on two threads, so each read
//!   follows the other's write (another writer came between);
//! - `cli/N`: the same as two one-shot processes, `leasectl acquire` and
//!   `leasectl release` (the binary built with this bench);
//! - `console_change`: a home of the root and 10 profiles of 100 leases; another
//!   thread acquires in one profile (in turn), then the console's worker reloads
//!   every registry, as on a change it is told of;
//! - `console_tick`: the same worker re-judging every owner with nothing changed
//!   (once a second in the console).
//!
//! Plain main (harness = false). Without `--bench` (under `cargo test --benches`):
//! 2 rounds, as a smoke run. Output: one line `name median_ms` per workload.

mod support;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use leasectl::lease::{self, Location, Registry};
use leasectl::tui::worker::{Scope, Worker};
use serde_json::Value;
use support::{LOCK_TIMEOUT, Owner, Releaser, Sleepers, median, releaser, request};

const BIN: &str = env!("CARGO_BIN_EXE_leasectl");
const SIZES: [usize; 2] = [100, 1_000];
const PROFILES: usize = 10;
const PROFILE_LEASES: usize = 100;

fn home(n: usize, owners: &[Owner]) -> (tempfile::TempDir, Registry) {
    let dir = tempfile::Builder::new().prefix("leasectl-bench-caches-").tempdir().expect("tempdir");
    let reg = Registry::new("root", dir.path());
    std::fs::create_dir_all(reg.runtime_dir()).expect("mkdir runtime");
    support::fill(&reg, n, owners);
    (dir, reg)
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn cycle(reg: &Registry, me: u64) -> f64 {
    let t = Instant::now();
    let grant = lease::file::acquire(reg, &request(me)).expect("granted");
    let released = lease::file::release(reg, &grant.lease_id, LOCK_TIMEOUT).expect("release");
    assert!(released.removed);
    ms(t)
}

fn two_threads(reg: &Registry, me: u64, releaser: &Releaser) -> f64 {
    let t = Instant::now();
    let grant = lease::file::acquire(reg, &request(me)).expect("granted");
    releaser.work.send(grant.lease_id).expect("releaser alive");
    assert!(releaser.done.recv().expect("releaser alive"));
    ms(t)
}

/// The binary built with this bench, or `CACHES_LEASECTL` (a variant's copy).
fn bin() -> String {
    std::env::var("CACHES_LEASECTL").unwrap_or_else(|_| BIN.to_owned())
}

fn cli(home: &std::path::Path, owner: u64) -> f64 {
    let bin = bin();
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let k = SEQ.fetch_add(1, Ordering::Relaxed);
    let home = home.to_str().expect("utf-8 temp path");
    let t = Instant::now();
    let out = Command::new(&bin)
        .args(["--home", home, "acquire", &format!("cli-session-{k}"), "--owner-pid", &owner.to_string(), "--json"])
        .stderr(Stdio::inherit())
        .output()
        .expect("run leasectl acquire");
    assert!(out.status.success(), "acquire: {}", String::from_utf8_lossy(&out.stdout));
    let grant: Value = serde_json::from_slice(&out.stdout).expect("acquire --json");
    let lease_id = grant["lease_id"].as_str().expect("lease_id in the grant").to_owned();
    let status = Command::new(&bin)
        .args(["--home", home, "release", &lease_id, "--owner-pid", &owner.to_string()])
        .stdout(Stdio::null())
        .status()
        .expect("run leasectl release");
    assert!(status.success());
    ms(t)
}

/// The root and 10 profiles of 100 leases each, and the console's worker on it.
struct Console {
    _dir: tempfile::TempDir,
    registries: Vec<Registry>,
    worker: Worker,
    next: usize,
}

fn console(owners: &[Owner]) -> Console {
    let dir = tempfile::Builder::new().prefix("leasectl-bench-caches-home-").tempdir().expect("tempdir");
    let mut registries = vec![Registry::new("root", dir.path())];
    for p in 0..PROFILES {
        registries.push(Registry::new(format!("p{p}"), dir.path().join("profiles").join(format!("p{p}"))));
    }
    for reg in &registries {
        std::fs::create_dir_all(reg.runtime_dir()).expect("mkdir runtime");
        support::fill(reg, PROFILE_LEASES, owners);
    }
    let scope = Scope {
        locations: vec![Location::File(registries[0].clone())],
        discover_root: Some(dir.path().into()),
        discover_hosts: false,
    };
    let mut worker = Worker::new(scope, LOCK_TIMEOUT, None);
    let loaded = worker.reload();
    assert_eq!(loaded.snapshots.len(), PROFILES + 1, "the worker reads the root and every profile");
    Console { _dir: dir, registries, worker, next: 0 }
}

/// Another writer acquires in the next profile (untimed, on its own thread, as
/// another process would), then the worker reloads everything.
fn console_change(c: &mut Console, owner: u64) -> f64 {
    let reg = c.registries[c.next % c.registries.len()].clone();
    c.next += 1;
    std::thread::spawn(move || lease::file::acquire(&reg, &request(owner)).expect("granted"))
        .join()
        .expect("writer thread");
    let t = Instant::now();
    let loaded = c.worker.reload();
    let took = ms(t);
    assert!(loaded.snapshots.iter().all(|s| s.leases.is_ok()));
    took
}

fn console_tick(c: &mut Console) -> f64 {
    let t = Instant::now();
    let loaded = c.worker.relive();
    let took = ms(t);
    assert_eq!(loaded.snapshots.len(), PROFILES + 1);
    took
}

fn main() {
    let rounds = if support::benchmarking() { 400 } else { 2 };
    let sleepers = Sleepers::spawn(4);
    let owners = sleepers.owners();
    let me = u64::from(std::process::id());
    let homes: Vec<_> = SIZES.iter().map(|n| home(*n, &owners)).collect();
    let releasers: Vec<Releaser> = homes.iter().map(|(_, reg)| releaser(reg.clone())).collect();
    let mut console = console(&owners);

    let names: Vec<String> = SIZES
        .iter()
        .flat_map(|n| [format!("cycle/{n}"), format!("two_threads/{n}"), format!("cli/{n}")])
        .chain(["console_change".to_owned(), "console_tick".to_owned()])
        .collect();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for round in 0..rounds {
        // The order rotates so that load from elsewhere hits every workload alike.
        for k in 0..names.len() {
            let which = (round + k) % names.len();
            let took = match which {
                6 => console_change(&mut console, owners[0].pid),
                7 => console_tick(&mut console),
                _ => {
                    let (size, kind) = (which / 3, which % 3);
                    let (dir, reg) = &homes[size];
                    match kind {
                        0 => cycle(reg, me),
                        1 => two_threads(reg, me, &releasers[size]),
                        // The CLI runs fewer rounds: each is two process starts.
                        _ if round % 4 != 0 => continue,
                        _ => cli(dir.path(), owners[1].pid),
                    }
                }
            };
            times[which].push(took);
        }
    }
    for (name, t) in names.iter().zip(&times) {
        println!("{name} {:.4}", median(t));
    }
    drop(console);
    drop(sleepers);
}
