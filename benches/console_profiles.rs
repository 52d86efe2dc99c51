//! A home with many profiles in the console: the real binary, `leasectl --home DIR tui`,
//! in a pseudo-terminal (200x60), on a root with 1,000, 10,000 and then 100,000 empty
//! profiles (their directories only: every registry is read, none holds a lease).
//! Measured per size: the time to the first screen (the header drawn), the time until
//! every tab is filled (the log names the last profile's registry as read), how long a
//! key takes to show (`?` opens the help, Esc closes it) while the tabs are still being
//! read, then, idle once every tab is in, its CPU over 20 s (after 10 s to settle) and its
//! memory (VmRSS, VmHWM), the CPU one registry write in a profile costs it, an owner's
//! death and a profile made, how long `q` takes to end it, and until every process it left
//! has ended too (targets: first screen within a second, a key and q within 100 ms, idle
//! under 1 % of a core and 100 MB at 100,000 profiles; the screen is looked at every 5 ms).
//! Beside each size, the watches' teardown: what the kernel takes to close an inotify
//! descriptor that watches every profile directory (the console's watcher holds one such
//! watch per profile; at 10,000 profiles and more its exit leaves the close to a child).
//!
//! Plain main (harness = false). Without `--bench` (under `cargo test --benches`): a
//! 1,000-profile smoke run with a 1 s window. `CONSOLE_PROFILES_BIN` measures another build
//! instead; `CONSOLE_PROFILES_BASELINE_BIN` measures one beside this build, size by size
//! (each on its own, one after the other); `CONSOLE_PROFILES_SIZES=1000,10000` picks the sizes.

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
    /// Idle CPU, % of one core, and memory in MB (resident, its peak).
    idle_cpu: f64,
    rss_mb: f64,
    peak_mb: f64,
    first_screen: Duration,
    all_tabs: Duration,
    /// `?` to the help on screen, while loading; None when the load was done first.
    key_while_loading: Option<Duration>,
    quit: Duration,
    /// From `q` until every process the console left has ended too (at 10,000 profiles and
    /// more it leaves a child to tear its inotify watches down; this bench reaps orphans).
    all_gone: Duration,
    /// CPU (ms of a core) a registry write in one profile costs the console, averaged over
    /// three writes 1.5 s apart in a profile that has its runtime directory already.
    per_write_ms: f64,
    /// CPU (ms of a core) the console spends in the 6 s after a lease's owner dies.
    owner_death_ms: f64,
    /// CPU (ms of a core) the console spends in the 6 s after a profile is made.
    new_profile_ms: f64,
}

/// A root with `profiles` profiles, each holding only its config.yaml (the identity file
/// `hermes profile create` writes, by which a directory is a profile).
fn home_of(profiles: usize) -> tempfile::TempDir {
    let dir = tempfile::Builder::new().prefix("leasectl-bench-profiles-").tempdir().expect("tempdir");
    let root = dir.path().join("profiles");
    std::fs::create_dir(&root).expect("profiles/");
    for n in 0..profiles {
        let profile = root.join(format!("p{n:06}"));
        std::fs::create_dir(&profile).expect("a profile");
        std::fs::write(profile.join("config.yaml"), "").expect("its config.yaml");
    }
    dir
}

/// How long closing an inotify descriptor takes once it watches the home, `profiles/`
/// and every profile in it: the part of any exit that follows every profile this way.
fn inotify_close_floor(dir: &Path) -> Duration {
    use rustix::fs::inotify;
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC).expect("inotify_init");
    let watch = |p: &Path| {
        let flags = inotify::WatchFlags::CREATE | inotify::WatchFlags::DELETE | inotify::WatchFlags::MOVED_TO;
        inotify::add_watch(&fd, p, flags).expect("inotify_add_watch (raise fs.inotify.max_user_watches?)");
    };
    watch(dir);
    let root = dir.join("profiles");
    watch(&root);
    for profile in std::fs::read_dir(&root).expect("profiles/") {
        watch(&profile.expect("a profile").path());
    }
    let started = Instant::now();
    drop(fd);
    started.elapsed()
}

/// The console's CPU for one registry write in the first profile: watch what changed, not
/// every profile. The first write (its runtime directory made) is not counted.
fn per_write_cpu(console: &Console, binary: &str, dir: &Path) -> f64 {
    let me = std::process::id().to_string();
    let acquire = |session: &str| {
        let status = std::process::Command::new(binary)
            .arg("--home")
            .arg(dir)
            .args(["--profile", "p000000", "acquire", session, "--owner-pid", &me])
            .env_remove("HERMES_HOME")
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run acquire");
        assert!(status.success(), "acquire {session} failed");
    };
    // Each build's run on the same home writes sessions of its own (the first run's are
    // still held: this bench is their owner).
    let run = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let pause = Duration::from_millis(1500);
    acquire(&format!("bench-{run}-first"));
    // Its runtime directory made (a directory to watch): let the console settle.
    std::thread::sleep(pause * 4);
    let before = console.cpu_seconds();
    for n in 0..3 {
        acquire(&format!("bench-{run}-{n}"));
        std::thread::sleep(pause);
    }
    (console.cpu_seconds() - before) * 1000.0 / 3.0
}

/// The console's CPU in the 6 s after the owner of a lease in the first profile dies (a
/// tick finds it dead: the console judges again and shows it).
fn owner_death_cpu(console: &Console, binary: &str, dir: &Path) -> f64 {
    let mut owner = std::process::Command::new("sleep").arg("1000").spawn().expect("start an owner");
    let status = std::process::Command::new(binary)
        .arg("--home")
        .arg(dir)
        .args(["--profile", "p000000", "acquire", &format!("dies-{}", owner.id()), "--owner-pid"])
        .arg(owner.id().to_string())
        .env_remove("HERMES_HOME")
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run acquire");
    assert!(status.success(), "acquire for the owner failed");
    std::thread::sleep(Duration::from_secs(3));
    let before = console.cpu_seconds();
    owner.kill().expect("kill the owner");
    owner.wait().expect("reap the owner");
    std::thread::sleep(Duration::from_secs(6));
    (console.cpu_seconds() - before) * 1000.0
}

/// The console's CPU in the 6 s after a profile is made (a directory in profiles/ with its
/// config.yaml: the console opens it, watches it and shows its tab).
fn new_profile_cpu(console: &Console, dir: &Path) -> f64 {
    let run = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let before = console.cpu_seconds();
    let made = dir.join("profiles").join(format!("new-{run}"));
    std::fs::create_dir(&made).expect("make a profile");
    std::fs::write(made.join("config.yaml"), "").expect("its config.yaml");
    std::thread::sleep(Duration::from_secs(6));
    (console.cpu_seconds() - before) * 1000.0
}

fn measure(binary: &str, dir: &Path, profiles: usize, window: Duration) -> Loaded {
    let started = Instant::now();
    let mut console = Console::start(binary, dir, ROWS, COLS);
    console.wait_for("┌ leasectl", Duration::from_secs(60));
    let first_screen = started.elapsed();
    // Said once the first read is in (a home of 1,000 registries or more): the root and
    // every profile, counted now, as an earlier build's run on this home made one more.
    let registries = std::fs::read_dir(dir.join("profiles")).expect("profiles/").count() + 1;
    let last = format!("first read done: {registries} registries");
    let key_while_loading = (!console.text().contains(&last)).then(|| {
        let asked = Instant::now();
        console.send(b"?");
        console.wait_for("Esc closes this help", Duration::from_secs(30));
        let shown = asked.elapsed();
        console.send(b"\x1b");
        shown
    });
    console.wait_for(&last, Duration::from_secs(600));
    let all_tabs = started.elapsed();
    std::thread::sleep(window / 2);
    let cpu = console.cpu_seconds();
    std::thread::sleep(window);
    let idle_cpu = (console.cpu_seconds() - cpu) / window.as_secs_f64() * 100.0;
    let (rss_mb, peak_mb) = (console.status_mb("VmRSS:"), console.status_mb("VmHWM:"));
    let per_write_ms = per_write_cpu(&console, binary, dir);
    let owner_death_ms = owner_death_cpu(&console, binary, dir);
    let new_profile_ms = new_profile_cpu(&console, dir);
    let asked = Instant::now();
    console.send(b"q");
    console.wait_exit(Duration::from_secs(30));
    let quit = asked.elapsed();
    wait_for_orphans(Duration::from_secs(30));
    Loaded {
        profiles,
        idle_cpu,
        rss_mb,
        peak_mb,
        first_screen,
        all_tabs,
        key_while_loading,
        quit,
        all_gone: asked.elapsed(),
        per_write_ms,
        owner_death_ms,
        new_profile_ms,
    }
}

/// Reap this process's children until none is left: once the console is reaped, they are
/// the processes it left (this bench is their reaper).
fn wait_for_orphans(deadline: Duration) {
    use rustix::process::{WaitOptions, wait};
    let start = Instant::now();
    loop {
        // Any child (waitpid(-1)): rustix's waitpid(None) is waitpid(0), this group's only.
        match wait(WaitOptions::NOHANG) {
            Ok(Some(_)) => continue,
            Ok(None) => {
                assert!(start.elapsed() < deadline, "a process the console left did not end within {deadline:?}");
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(_) => return,
        }
    }
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    // The console's orphans come here: their end is measured (and no zombie is left).
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).expect("PR_SET_CHILD_SUBREAPER");
    let mut binaries = vec![("this", binary())];
    if let Ok(b) = std::env::var("CONSOLE_PROFILES_BASELINE_BIN") {
        binaries.push(("baseline", b));
    }
    for (_, b) in &binaries {
        if !Path::new(b).is_file() {
            eprintln!("console_profiles: {b} is missing; build it first with `cargo build --release`");
            std::process::exit(1);
        }
    }
    let window = if bench { Duration::from_secs(20) } else { Duration::from_secs(1) };
    // CONSOLE_PROFILES_SIZES=1000,10000 picks the sizes (an old build may not finish 100,000).
    let chosen: Vec<usize> = std::env::var("CONSOLE_PROFILES_SIZES")
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_default();
    let sizes: &[usize] = if !chosen.is_empty() {
        &chosen
    } else if bench {
        &[1_000, 10_000, 100_000]
    } else {
        // The smallest home whose first read's end the console says (and this waits for).
        &[1_000]
    };
    println!("console with many profiles: `leasectl tui` in a {COLS}x{ROWS} pty");
    println!(
        "{:>8}  {:>9}  {:>12}  {:>14}  {:>16}  {:>9}  {:>9}  {:>8}  {:>9}  {:>9}  {:>12}  {:>11}  {:>11}",
        "build",
        "profiles",
        "first screen",
        "all tabs in",
        "key while loading",
        "idle cpu",
        "rss",
        "peak",
        "q ends",
        "all gone",
        "cpu a write",
        "owner dies",
        "new profile"
    );
    for &n in sizes {
        let home = home_of(n);
        for (name, b) in &binaries {
            let l = measure(b, home.path(), n, window);
            println!(
                "{name:>8}  {:>9}  {:>10.0}ms  {:>12.0}ms  {:>17}  {:>8.2}%  {:>7.0}MB  {:>6.0}MB  {:>7.0}ms  {:>7.0}ms  {:>10.0}ms  {:>9.0}ms  {:>9.0}ms",
                l.profiles,
                l.first_screen.as_secs_f64() * 1000.0,
                l.all_tabs.as_secs_f64() * 1000.0,
                l.key_while_loading
                    .map_or("(loaded first)".to_owned(), |d| format!("{:.0}ms", d.as_secs_f64() * 1000.0)),
                l.idle_cpu,
                l.rss_mb,
                l.peak_mb,
                l.quit.as_secs_f64() * 1000.0,
                l.all_gone.as_secs_f64() * 1000.0,
                l.per_write_ms,
                l.owner_death_ms,
                l.new_profile_ms
            );
        }
        let floor = inotify_close_floor(home.path());
        println!(
            "{:>8}  {n:>9}  the watches' teardown (closing {} inotify watches): {:.0}ms",
            "floor",
            n + 2,
            floor.as_secs_f64() * 1000.0
        );
    }
}
