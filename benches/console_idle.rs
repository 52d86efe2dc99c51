//! The idle console's cost: the real binary, `leasectl --home DIR tui`, in a
//! pseudo-terminal (200x60) on a home of 1,000 and then 10,000 leases, then on the
//! root and 10 profiles of 100 leases each (a 30 s window), all owned
//! by this bench process (its real start time, so every owner is alive). Once the
//! header shows every lease alive, wait 27 s (the header sparkline fills in its
//! first 25 s), then sample utime+stime from /proc/<pid>/stat over 10 s (30 s with
//! profiles): CPU % of one core. VmRSS (and the peak, VmHWM)
//! from /proc/<pid>/status after that. Targets: < 1 % of a core idle, < 40 MB RSS
//! at 10,000 leases.
//!
//! The binary is the one cargo builds for this bench (`target/release/leasectl`).
//! Plain main (harness = false). `--quick`: 1 s settle, 3 s window. Without
//! `--bench` (under `cargo test --benches`): a 100-lease smoke run. With
//! `CONSOLE_IDLE_PERF=DIR` set, `perf record -g` follows the console through each
//! window, into `DIR/console_idle_<leases>.data` (`perf report -i FILE --stdio`).

mod support;

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use leasectl::lease::Registry;
use support::Owner;
use support::console::Console;

const BUILT: &str = env!("CARGO_BIN_EXE_leasectl");

/// The binary measured: this build's, or `CONSOLE_IDLE_BIN` (another build, e.g. an older
/// commit's, to compare side by side in one run of this bench).
fn binary() -> String {
    std::env::var("CONSOLE_IDLE_BIN").unwrap_or_else(|_| BUILT.to_owned())
}
const ROWS: u16 = 60;
const COLS: u16 = 200;

struct Idle {
    n: usize,
    profiles: usize,
    aged: bool,
    first_draw: Duration,
    cpu_percent: f64,
    cpu_seconds: f64,
    window: Duration,
    rss_mb: f64,
    hwm_mb: f64,
}

/// The root with `n` leases, and `profiles` profiles with `n` leases each; with `aged`,
/// the newest lease is 5 minutes old (nothing on screen changes by the second).
fn measure(n: usize, profiles: usize, aged: bool, settle: Duration, window: Duration) -> Idle {
    let dir = tempfile::Builder::new().prefix("leasectl-bench-idle-").tempdir().expect("tempdir");
    let reg = Registry::new("root", dir.path());
    let newest = leasectl::lease::now() - if aged { 300.0 } else { 0.0 };
    support::fill_at(&reg, n, &[Owner::me()], newest);
    for p in 0..profiles {
        let name = format!("p{p:02}");
        let profile = Registry::new(name.clone(), dir.path().join("profiles").join(&name));
        std::fs::create_dir_all(profile.runtime_dir()).expect("mkdir runtime");
        support::fill_at(&profile, n, &[Owner::me()], newest);
    }
    let mut console = Console::start(&binary(), dir.path(), ROWS, COLS);
    let first_draw = console.wait_for(&format!("● {n} alive"), Duration::from_secs(30));
    thread::sleep(settle);
    let perf = std::env::var_os("CONSOLE_IDLE_PERF").map(|dir| {
        let out = Path::new(&dir).join(format!("console_idle_{n}x{}.data", profiles + 1));
        std::process::Command::new("perf")
            .args(["record", "-g", "-o"])
            .arg(&out)
            .args(["-p", &console.pid.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start perf record")
    });
    let (c0, t0) = (console.cpu_seconds(), Instant::now());
    thread::sleep(window);
    let (c1, elapsed) = (console.cpu_seconds(), t0.elapsed());
    if let Some(mut perf) = perf {
        // SIGINT makes perf record write its file and exit.
        if let Some(pid) = rustix::process::Pid::from_raw(perf.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
        }
        let _ = perf.wait();
    }
    let rss_mb = console.status_mb("VmRSS:");
    let hwm_mb = console.status_mb("VmHWM:");
    // Still alive and still showing every lease alive.
    console.wait_for(&format!("● {n} alive"), Duration::from_secs(5));
    drop(console);
    Idle {
        n,
        profiles,
        aged,
        first_draw,
        cpu_percent: (c1 - c0) / elapsed.as_secs_f64() * 100.0,
        cpu_seconds: c1 - c0,
        window: elapsed,
        rss_mb,
        hwm_mb,
    }
}

fn main() {
    if !Path::new(&binary()).is_file() {
        eprintln!("console_idle: {} is missing; build it first with `cargo build --release`", binary());
        std::process::exit(2);
    }
    // (leases per registry, profiles, idle window in s, newest lease 5 min old): the root
    // alone at two sizes with leases just taken (ages count seconds: a frame a second), then
    // a home shaped like Hermes' own, the root and 10 profiles of 100 leases, both ways.
    let (cases, settle): (&[(usize, usize, u64, bool)], u64) = if !support::benchmarking() {
        (&[(100, 0, 1, false), (100, 2, 1, true)], 1)
    } else if support::quick() {
        (&[(1_000, 0, 3, false), (10_000, 0, 3, false), (100, 10, 3, true), (100, 10, 3, false)], 1)
    } else {
        // 27 s settle: for its first 25 s the header's sparkline fills, a frame a second.
        (&[(1_000, 0, 10, false), (10_000, 0, 10, false), (100, 10, 30, true), (100, 10, 30, false)], 27)
    };
    let results: Vec<Idle> = cases
        .iter()
        .map(|&(n, profiles, window, aged)| {
            measure(n, profiles, aged, Duration::from_secs(settle), Duration::from_secs(window))
        })
        .collect();
    println!("console idle: `leasectl tui` in a {COLS}x{ROWS} pty, {settle} s settle, then an idle window");
    println!(
        "{:>9} {:>7} {:>8} {:>14} {:>12} {:>10} {:>10} {:>10}",
        "profiles", "leases", "newest", "first draw s", "CPU s", "CPU %", "VmRSS MB", "VmHWM MB"
    );
    for r in &results {
        println!(
            "{:>9} {:>7} {:>8} {:>14.2} {:>12.2} {:>9.2}% {:>10.1} {:>10.1}   (window {:.1} s)",
            r.profiles,
            r.n * (r.profiles + 1),
            if r.aged { "5 min" } else { "now" },
            r.first_draw.as_secs_f64(),
            r.cpu_seconds,
            r.cpu_percent,
            r.rss_mb,
            r.hwm_mb,
            r.window.as_secs_f64()
        );
    }
    println!("targets: < 1% of a core idle (< 0.5% with 10 profiles, over 30 s); < 40 MB RSS at 10,000 leases");
}
