//! Registry replaced on disk → console state holds the new snapshot.
//!
//! No terminal: the notify watcher (`sources::spawn_watcher`, the console's debounce, as
//! `tui::run` starts it) and a `Worker`, wired as `tui::run` wires them: on each
//! `Event::FsChanged`, `update` asks for a reload, the worker reloads, and
//! `update(Loaded)` adopts the snapshot. Each change is one `lease::acquire` of a
//! new session (t0 just before it); the clock stops when the app's registry holds
//! the new lease id. Here the worker runs on the measuring thread (in the console
//! it has its own; the work is the same). 200 changes per registry size.
//!
//! Last, a home shaped like Hermes' own: the root and 10 profiles of 100 leases,
//! watched as `leasectl tui` watches a home (profiles discovered); each change goes
//! to the next registry in turn, and the clock stops when that registry's tab holds it.
//!
//! Also printed: `Worker::reload` alone, back to back with nothing changing
//! (median of 30), the reload's share without notify or acquire.
//!
//! Plain main (harness = false). `--quick`: 20 changes. Without `--bench` (under
//! `cargo test --benches`): a 3-change smoke run. `WATCH_SIZES=100,1000` picks
//! the registry sizes (default 100, 1000, 10000).

mod support;

use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use leasectl::lease::{self, Registry};
use leasectl::tui::event::{Effect, Event};
use leasectl::tui::sources::spawn_watcher;
use leasectl::tui::state::App;
use leasectl::tui::update::update;
use leasectl::tui::worker::{Scope, Worker};
use support::{LOCK_TIMEOUT, Owner, quantile};

/// The console's own debounce.
const DEBOUNCE: Duration = leasectl::tui::DEBOUNCE;
const GIVE_UP: Duration = Duration::from_secs(10);

struct Sample {
    total: f64,
    acquire: f64,
    /// From the acquire's return to the watcher's FsChanged (notify + debounce).
    notify: f64,
    /// `Worker::reload` (read, validate, judge owners), summed over the reloads.
    reload: f64,
    /// `update(Loaded)` (diff, apply, selection), summed over the reloads.
    update: f64,
    reloads: usize,
}

struct Console {
    worker: Worker,
    app: App,
    rx: Receiver<Event>,
}

impl Console {
    /// Handle one event as `tui::run` + the worker thread would. When it
    /// reloaded: the time of the reload and of the update, in ms.
    fn handle(&mut self, ev: Event) -> Option<(f64, f64)> {
        let effects = update(&mut self.app, ev);
        let changed: Vec<_> = effects
            .iter()
            .filter_map(|e| match e {
                Effect::ReloadChanged(paths) => Some(paths.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        let everything = effects.contains(&Effect::Reload);
        if everything || !changed.is_empty() {
            let t = Instant::now();
            let loaded = if everything { self.worker.reload() } else { self.worker.reload_changed(&changed) };
            let reload = t.elapsed();
            update(&mut self.app, Event::Loaded(loaded));
            let both = t.elapsed();
            return Some((reload.as_secs_f64() * 1e3, (both - reload).as_secs_f64() * 1e3));
        }
        None
    }

    /// Whether registry `index` (tab order: the root, then profiles by name) holds the lease.
    fn holds(&self, index: usize, lease_id: &str) -> bool {
        self.app.registries.get(index).is_some_and(|r| r.leases.iter().any(|l| l.entry.lease_id() == lease_id))
    }

    /// Handle whatever is queued or arrives within `quiet`.
    fn settle(&mut self, quiet: Duration) {
        while let Ok(ev) = self.rx.recv_timeout(quiet) {
            self.handle(ev);
        }
    }
}

/// A home of the root and `profiles` profiles, `n` leases each. With profiles, the
/// console is set up as `leasectl tui` sets it up for a home: the root's location,
/// with `profiles/*` discovered (and watched) as they come.
fn run(n: usize, profiles: usize, changes: usize) -> (Vec<Sample>, f64) {
    let dir = tempfile::Builder::new().prefix("leasectl-bench-watch-").tempdir().expect("tempdir");
    let home = dir.path().to_path_buf();
    let reg = Registry::new("root", &home);
    support::fill(&reg, n, &[Owner::me()]);
    let mut registries = vec![reg.clone()];
    for p in 0..profiles {
        let name = format!("p{p:02}");
        let profile = Registry::new(name.clone(), home.join("profiles").join(&name));
        std::fs::create_dir_all(profile.runtime_dir()).expect("mkdir runtime");
        support::fill(&profile, n, &[Owner::me()]);
        registries.push(profile);
    }
    let discover_root = (profiles > 0).then(|| home.clone());

    let (tx, rx) = channel();
    let location = leasectl::lease::Location::File(reg.clone());
    let scope = leasectl::lease::WatchScope {
        locations: vec![location.clone()],
        discover_root: discover_root.clone(),
        debounce: DEBOUNCE,
    };
    spawn_watcher(&scope, tx, Default::default()).expect("start the watcher");
    let worker =
        Worker::new(Scope { locations: vec![location], discover_root, discover_hosts: false }, LOCK_TIMEOUT, None);
    let mut console =
        Console { worker, app: App::new(vec![reg.clone().into()], lease::now(), jiff::tz::TimeZone::UTC), rx };
    let first = console.worker.reload();
    update(&mut console.app, Event::Loaded(first));
    assert_eq!(console.app.registries.len(), profiles + 1, "the root and every profile");
    assert!(console.app.registries.iter().all(|r| r.leases.len() == n), "initial load");
    // Let the watcher thread arm its watches, and swallow anything from the start.
    console.settle(Duration::from_millis(300));

    let reload_alone: Vec<f64> = (0..30)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(console.worker.reload());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let mut samples = Vec::with_capacity(changes);
    for k in 0..changes {
        // A small, varying pause, so changes do not beat in step with anything.
        console.settle(Duration::from_millis(5 + (k as u64 * 7) % 25));
        let t0 = Instant::now();
        // Each change in the next registry in turn (with profiles: mostly a profile's).
        let index = k % registries.len();
        let grant = lease::file::acquire(&registries[index], &support::request(u64::from(std::process::id())))
            .expect("acquire");
        let acquired = t0.elapsed();
        let mut fs_changed = None;
        let (mut reloads, mut reload_ms, mut update_ms) = (0, 0.0, 0.0);
        while !console.holds(index, &grant.lease_id) {
            let left = GIVE_UP.saturating_sub(t0.elapsed());
            let ev = match console.rx.recv_timeout(left) {
                Ok(ev) => ev,
                Err(RecvTimeoutError::Timeout) => panic!("change {k}: the console never saw lease {}", grant.lease_id),
                Err(RecvTimeoutError::Disconnected) => panic!("the watcher stopped"),
            };
            if matches!(ev, Event::FsChanged(_)) && fs_changed.is_none() {
                fs_changed = Some(t0.elapsed());
            }
            if let Some((r, u)) = console.handle(ev) {
                reloads += 1;
                reload_ms += r;
                update_ms += u;
            }
        }
        let total = t0.elapsed();
        let fs = fs_changed.unwrap_or(total);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        samples.push(Sample {
            total: ms(total),
            acquire: ms(acquired),
            notify: ms(fs.saturating_sub(acquired)),
            reload: reload_ms,
            update: update_ms,
            reloads,
        });
    }
    (samples, quantile(&reload_alone, 0.5))
}

fn main() {
    let benchmarking = support::benchmarking();
    let chosen: Option<Vec<usize>> = std::env::var("WATCH_SIZES")
        .ok()
        .map(|v| v.split(',').map(|n| n.trim().parse().expect("WATCH_SIZES: numbers, comma-separated")).collect());
    let all = chosen.unwrap_or_else(|| vec![100, 1_000, 10_000]);
    let (sizes, changes): (&[usize], usize) = if !benchmarking {
        (&[100], 3)
    } else if support::quick() {
        (&all, 20)
    } else {
        (&all, 200)
    };
    println!(
        "watch latency: acquire → console state holds the new lease ({changes} changes, debounce {} ms)",
        DEBOUNCE.as_millis()
    );
    println!(
        "{:>9} {:>7} {:>8} {:>8} {:>8} | {:>11} {:>11} {:>11} {:>11} {:>8} {:>13}",
        "profiles",
        "entries",
        "p50 ms",
        "p99 ms",
        "max ms",
        "acquire p50",
        "notify p50",
        "reload p50",
        "update p50",
        "reloads",
        "reload alone"
    );
    // The root alone at each size, then the root and 10 profiles of 100 leases.
    let homes: Vec<(usize, usize)> =
        sizes.iter().map(|&n| (n, 0)).chain(std::iter::once((100, if benchmarking { 10 } else { 2 }))).collect();
    for (n, profiles) in homes {
        let (s, reload_alone) = run(n, profiles, changes);
        let col = |f: fn(&Sample) -> f64| s.iter().map(f).collect::<Vec<f64>>();
        let total = col(|x| x.total);
        let reloads: usize = s.iter().map(|x| x.reloads).sum();
        println!(
            "{:>9} {:>7} {:>8.1} {:>8.1} {:>8.1} | {:>11.1} {:>11.1} {:>11.1} {:>11.1} {:>8.2} {:>13.1}",
            profiles,
            n,
            quantile(&total, 0.5),
            quantile(&total, 0.99),
            total.iter().copied().fold(0.0, f64::max),
            quantile(&col(|x| x.acquire), 0.5),
            quantile(&col(|x| x.notify), 0.5),
            quantile(&col(|x| x.reload), 0.5),
            quantile(&col(|x| x.update), 0.5),
            reloads as f64 / s.len() as f64,
            reload_alone,
        );
    }
    println!("notify = acquire returned → FsChanged received (includes the {} ms debounce)", DEBOUNCE.as_millis());
    println!("target: p99 < 100 ms");
}
