//! The fence's cost: one acquire + release cycle on a registry of 0, 100, 1,000
//! and 10,000 live entries, side by side with the FLOOR for the same file: two
//! locked rewrites (flock, read, temp file, fsync, rename), which is the I/O an
//! acquire and a release cannot avoid. The entries are owned by 4 real `sleep`
//! children (real start times), so every liveness check finds them alive.
//!
//! Criterion reports both per size (group `fence/<n>`); afterwards an
//! interleaved run (A, B, A, B, …) prints the ratio acquire_release / floor per
//! size, which is what matters on a noisy machine.

mod support;

use std::fs::{File, OpenOptions};
use std::hint::black_box;
use std::io::Write;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use leasectl::lease::{self, Registry};
use support::{LOCK_TIMEOUT, Owner, Releaser, Sleepers, median, releaser, request};

const SIZES: [usize; 4] = [0, 100, 1_000, 10_000];

/// One acquire and its release; returns (entries pruned, whether the release removed it).
fn cycle(reg: &Registry, me: u64) -> (usize, bool) {
    let grant = lease::file::acquire(reg, &request(me)).expect("acquire is granted");
    assert!(grant.recorded, "a non-empty session id is recorded");
    let released = lease::file::release(reg, &grant.lease_id, LOCK_TIMEOUT).expect("release");
    (grant.pruned.len() + released.pruned.len(), released.removed)
}

/// One locked rewrite of the registry with the same bytes: the least any writer does.
fn rewrite(reg: &Registry) {
    let lock_file: File =
        OpenOptions::new().append(true).create(true).open(reg.lock_path()).expect("open the lock file");
    lock_file.lock().expect("flock");
    let path = reg.path();
    let bytes = std::fs::read(&path).expect("read the registry");
    let tmp = reg.runtime_dir().join(".active_sessions_floor0.tmp");
    let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp).expect("create the temp file");
    f.write_all(&bytes).expect("write the temp file");
    f.sync_all().expect("fsync");
    drop(f);
    std::fs::rename(&tmp, &path).expect("rename over the registry");
    drop(lock_file);
}

/// The floor of an acquire + release: two locked rewrites.
fn floor(reg: &Registry) {
    rewrite(reg);
    rewrite(reg);
}

struct Home {
    _dir: tempfile::TempDir,
    reg: Registry,
    bytes: u64,
}

fn home(n: usize, owners: &[Owner]) -> Home {
    let dir = tempfile::Builder::new().prefix("leasectl-bench-fence-").tempdir().expect("tempdir");
    let reg = Registry::new("root", dir.path());
    std::fs::create_dir_all(reg.runtime_dir()).expect("mkdir runtime");
    support::fill(&reg, n, owners);
    let bytes = std::fs::metadata(reg.path()).expect("registry written").len();
    Home { _dir: dir, reg, bytes }
}

fn main() {
    let sleepers = Sleepers::spawn(4);
    let owners = sleepers.owners();
    let me = u64::from(std::process::id());
    let homes: Vec<Home> = SIZES.iter().map(|n| home(*n, &owners)).collect();

    // Every entry must be judged alive: one cycle prunes nothing and leaves n entries.
    for (n, h) in SIZES.iter().zip(&homes) {
        let (pruned, removed) = cycle(&h.reg, me);
        assert!(removed && pruned == 0, "size {n}: the release removed {removed}, {pruned} entries pruned");
        let left = lease::file::registry::read(&h.reg.path()).expect("valid").entries.len();
        assert_eq!(left, *n, "size {n}: the registry keeps its entries");
    }

    let mut c = Criterion::default().configure_from_args();
    for (n, h) in SIZES.iter().zip(&homes) {
        let mut group = c.benchmark_group(format!("fence/{n}"));
        if *n >= 10_000 {
            group.sample_size(20).measurement_time(Duration::from_secs(5));
        } else {
            group.sample_size(30).measurement_time(Duration::from_secs(3));
        }
        // Milliseconds per iteration: the same number of iterations in every sample.
        group.sampling_mode(SamplingMode::Flat).warm_up_time(Duration::from_secs(1));
        group.bench_function("acquire_release", |b| b.iter(|| black_box(cycle(&h.reg, me))));
        group.bench_function("floor", |b| b.iter(|| floor(&h.reg)));
        group.finish();
    }
    c.final_summary();

    if support::benchmarking() {
        ratio_table(&homes, me);
        breakdown(&homes);
        lock_holds(&homes, me);
    }
    drop(sleepers);
}

/// The cycle with an acquire and its release on two threads: each read finds
/// what the other thread wrote, as when another writer came between (only the
/// changed entries are validated again).
fn cycle_two_threads(reg: &Registry, me: u64, releaser: &Releaser) -> f64 {
    let t = Instant::now();
    let grant = lease::file::acquire(reg, &request(me)).expect("acquire is granted");
    releaser.work.send(grant.lease_id).expect("releaser alive");
    let removed = releaser.done.recv().expect("releaser alive");
    assert!(removed, "the release removed the lease");
    t.elapsed().as_secs_f64() * 1e3
}

/// The cycle with nothing remembered: acquire and release each on a new thread
/// (so each read parses and validates the whole file, as a new process would).
fn cycle_fresh_threads(reg: &Registry, me: u64) -> f64 {
    let t = Instant::now();
    std::thread::scope(|s| {
        let grant = s.spawn(|| lease::file::acquire(reg, &request(me))).join().expect("thread").expect("granted");
        let lease_id = grant.lease_id;
        let released = s.spawn(move || lease::file::release(reg, &lease_id, LOCK_TIMEOUT)).join().expect("thread");
        assert!(released.expect("release").removed);
    });
    t.elapsed().as_secs_f64() * 1e3
}

/// Interleaved rounds per size (floor, then each kind of cycle, the order
/// rotating), so load from elsewhere hits every side alike; medians.
fn ratio_table(homes: &[Home], me: u64) {
    println!();
    println!("fence: acquire+release vs floor (two locked rewrites), interleaved rounds, medians");
    println!("  same thread: one thread acquires and releases (it remembers what it wrote)");
    println!("  two threads: acquire and release on two threads (each read follows the other's write)");
    println!("  fresh threads: each on a new thread (nothing remembered: a full parse, as a new process)");
    let starts: Vec<f64> = (0..50)
        .map(|_| {
            time(|| {
                std::thread::scope(|s| {
                    s.spawn(|| ()).join().expect("thread");
                    s.spawn(|| ()).join().expect("thread");
                })
            })
        })
        .collect();
    println!("  (two thread starts and joins alone, included in fresh threads: {:.3} ms)", median(&starts));
    println!(
        "{:>7} {:>9} {:>6} {:>9} {:>17} {:>17} {:>17} {:>7}",
        "entries", "file", "rounds", "floor ms", "same thread", "two threads", "fresh threads", "target"
    );
    for (n, h) in SIZES.iter().zip(homes) {
        let rounds = match (support::quick(), *n >= 10_000) {
            (true, _) => 5,
            (false, true) => 25,
            (false, false) => 60,
        };
        let two = releaser(h.reg.clone());
        let mut times: [Vec<f64>; 4] = Default::default();
        for round in 0..rounds {
            for k in 0..4 {
                let which = (round + k) % 4;
                let ms = match which {
                    0 => time(|| floor(&h.reg)),
                    1 => time(|| cycle(&h.reg, me)),
                    2 => cycle_two_threads(&h.reg, me, &two),
                    _ => cycle_fresh_threads(&h.reg, me),
                };
                times[which].push(ms);
            }
        }
        let target = if *n <= 100 {
            "<=1.5x"
        } else if *n >= 10_000 {
            "<=3x"
        } else {
            "-"
        };
        let floor_ms = median(&times[0]);
        let cell = |v: &[f64]| {
            let ratios: Vec<f64> = v.iter().zip(&times[0]).map(|(a, b)| a / b).collect();
            format!("{:.2} ms {:.2}x", median(v), median(&ratios))
        };
        println!(
            "{:>7} {:>7}KB {:>6} {:>9.3} {:>17} {:>17} {:>17} {:>7}",
            n,
            h.bytes / 1024,
            rounds,
            floor_ms,
            cell(&times[1]),
            cell(&times[2]),
            cell(&times[3]),
            target
        );
    }
}

/// Where an acquire + release spends its time: its steps timed one by one with
/// the crate's public functions, on the same files (each result dropped outside
/// its step; dropping is its own column). "parse" is a full strict parse of the
/// bytes (what a read costs when nothing is remembered); "read" is `store::read`
/// of bytes this thread saw last (what the same-thread cycle pays). The model is
/// the same-thread cycle: 2 read + 2 prune + 2 serialize + 2 rewrite + 2 drop.
fn breakdown(homes: &[Home]) {
    println!();
    println!(
        "fence: steps of acquire+release, medians in ms (model = 2 x (read + prune + serialize + rewrite + drop))"
    );
    println!(
        "{:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "entries", "parse", "read", "prune", "serialize", "rewrite", "drop", "model"
    );
    for (n, h) in SIZES.iter().zip(homes) {
        let rounds = if support::quick() { 3 } else { 15 };
        let path = h.reg.path();
        let bytes = std::fs::read(&path).expect("read the registry");
        let mut steps: [Vec<f64>; 6] = Default::default();
        for _ in 0..rounds {
            let (ms, parsed) = timed(|| lease::file::registry::parse(&bytes).expect("valid"));
            steps[0].push(ms);
            drop(parsed);
            let (ms, file) = timed(|| lease::file::registry::read(&path).expect("valid"));
            steps[1].push(ms);
            let (ms, kept) = timed(|| {
                lease::file::fence::prune_dead(file.entries.clone(), &mut lease::Prober::new(), true, None)
                    .expect("all alive")
            });
            steps[2].push(ms);
            let (ms, _text) = timed(|| lease::file::registry::serialize(&file));
            steps[3].push(ms);
            steps[4].push(timed(|| rewrite(&h.reg)).0);
            steps[5].push(timed(|| drop(kept)).0);
        }
        let m: Vec<f64> = steps.iter().map(|v| median(v)).collect();
        let model = 2.0 * (m[1] + m[2] + m[3] + m[4] + m[5]);
        println!(
            "{:>7} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            n, m[0], m[1], m[2], m[3], m[4], m[5], model
        );
    }
}

/// How long the registry lock is held by an acquire and by a release, each on a new
/// thread as in a new process, with the copy of what was read and written kept (as
/// `hold`, `run` and the console keep it) and without (a one-shot `acquire` or `ls`).
fn lock_holds(homes: &[Home], me: u64) {
    println!();
    println!("fence: how long the lock is held, medians in ms (new thread each: nothing remembered before)");
    println!("{:>7} {:>16} {:>16} {:>16}", "entries", "acquire, kept", "acquire, none", "release, kept");
    let held = || lease::home::lock::last_hold().map_or(f64::NAN, |d| d.as_secs_f64() * 1e3);
    for (n, h) in SIZES.iter().zip(homes) {
        let rounds = if support::quick() { 5 } else { 15 };
        let mut holds: [Vec<f64>; 3] = Default::default();
        for _ in 0..rounds {
            for remembering in [true, false] {
                lease::file::set_remembering(remembering);
                let (id, hold) = std::thread::scope(|s| {
                    s.spawn(|| {
                        let grant = lease::file::acquire(&h.reg, &request(me)).expect("granted");
                        (grant.lease_id, held())
                    })
                    .join()
                    .expect("thread")
                });
                holds[usize::from(!remembering)].push(hold);
                lease::file::set_remembering(true);
                let hold = std::thread::scope(|s| {
                    s.spawn(|| {
                        lease::file::release(&h.reg, &id, LOCK_TIMEOUT).expect("released");
                        held()
                    })
                    .join()
                    .expect("thread")
                });
                if remembering {
                    holds[2].push(hold);
                }
            }
        }
        let m: Vec<f64> = holds.iter().map(|v| median(v)).collect();
        println!("{n:>7} {:>16.3} {:>16.3} {:>16.3}", m[0], m[1], m[2]);
    }
}

/// Run `f`, returning its time in ms and its result (dropped by the caller, untimed).
fn timed<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let t = Instant::now();
    let out = black_box(f());
    (t.elapsed().as_secs_f64() * 1e3, out)
}

fn time<T>(f: impl FnOnce() -> T) -> f64 {
    let t = Instant::now();
    black_box(f());
    t.elapsed().as_secs_f64() * 1e3
}
