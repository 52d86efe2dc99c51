//! A home with many profiles in the console: the real binary, `leasectl --home DIR tui`,
//! in a pseudo-terminal (200x60), on a root with 1,000, 10,000 and then 100,000 empty
//! profiles (their directories only: every registry is read, none holds a lease).
//! Measured per size: the time to the first screen (the header drawn), the time until
//! every tab is filled (the log names the last profile's registry as read), how long a
//! key takes to show (`?` opens the help, Esc closes it) while the tabs are still being
//! read, and how long `q` takes to end it once every tab is in (target: first screen and
//! q within a second, a key within 100 ms; the screen is looked at every 5 ms).
//!
//! Plain main (harness = false). Without `--bench` (under `cargo test --benches`): a
//! 100-profile smoke run. `CONSOLE_PROFILES_BIN` measures another build side by side;
//! `CONSOLE_PROFILES_SIZES=1000,10000` picks the sizes.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::console::Console;

const BUILT: &str = env!("CARGO_BIN_EXE_leasectl");
const ROWS: u16 = 60;
const COLS: u16 = 200;

fn binary() -> String {
    std::env::var("CONSOLE_PROFILES_BIN").unwrap_or_else(|_| BUILT.to_owned())
}

struct Loaded {
    profiles: usize,
    first_screen: Duration,
    all_tabs: Duration,
    /// `?` to the help on screen, while loading; None when the load was done first.
    key_while_loading: Option<Duration>,
    quit: Duration,
}

fn measure(profiles: usize) -> Loaded {
    let dir = tempfile::Builder::new().prefix("leasectl-bench-profiles-").tempdir().expect("tempdir");
    let root = dir.path().join("profiles");
    std::fs::create_dir(&root).expect("profiles/");
    for n in 0..profiles {
        std::fs::create_dir(root.join(format!("p{n:06}"))).expect("a profile");
    }
    let started = Instant::now();
    let mut console = Console::start(&binary(), dir.path(), ROWS, COLS);
    console.wait_for("┌ leasectl", Duration::from_secs(60));
    let first_screen = started.elapsed();
    let last = format!("profiles/p{:06}/runtime", profiles - 1);
    let key_while_loading = (!console.text().contains(&last)).then(|| {
        let asked = Instant::now();
        console.send(b"?");
        console.wait_for("Esc closes this help", Duration::from_secs(30));
        let shown = asked.elapsed();
        console.send(b"\x1b");
        shown
    });
    // Profiles are read in tab order: the last one's "watching" line comes last.
    console.wait_for(&last, Duration::from_secs(600));
    let all_tabs = started.elapsed();
    let asked = Instant::now();
    console.send(b"q");
    console.wait_exit(Duration::from_secs(30));
    Loaded { profiles, first_screen, all_tabs, key_while_loading, quit: asked.elapsed() }
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    if !Path::new(&binary()).is_file() {
        eprintln!("console_profiles: {} is missing; build it first with `cargo build --release`", binary());
        std::process::exit(1);
    }
    // CONSOLE_PROFILES_SIZES=1000,10000 picks the sizes (an old build may not finish 100,000).
    let chosen: Vec<usize> = std::env::var("CONSOLE_PROFILES_SIZES")
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_default();
    let sizes: &[usize] = if !chosen.is_empty() {
        &chosen
    } else if bench {
        &[1_000, 10_000, 100_000]
    } else {
        &[100]
    };
    println!("console with many profiles: `leasectl tui` in a {COLS}x{ROWS} pty");
    println!(
        "{:>9}  {:>12}  {:>14}  {:>16}  {:>9}",
        "profiles", "first screen", "all tabs in", "key while loading", "q ends"
    );
    for &n in sizes {
        let l = measure(n);
        println!(
            "{:>9}  {:>10.0}ms  {:>12.0}ms  {:>17}  {:>7.0}ms",
            l.profiles,
            l.first_screen.as_secs_f64() * 1000.0,
            l.all_tabs.as_secs_f64() * 1000.0,
            l.key_while_loading.map_or("(loaded first)".to_owned(), |d| format!("{:.0}ms", d.as_secs_f64() * 1000.0)),
            l.quit.as_secs_f64() * 1000.0
        );
    }
}
