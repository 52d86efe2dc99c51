//! The live console (ratatui): watches every registry, shows every owner, and
//! lets an operator clean up safely. State in `state`, changes in `update`,
//! drawing in `view`, I/O in `worker`, event sources in `sources`.

pub mod diff;
pub mod event;
pub mod sources;
pub mod state;
pub mod time;
pub mod update;
pub mod update_demo;
pub mod view;
pub mod view_demo;
pub mod worker;
#[cfg(feature = "etcd")]
pub mod worker_etcd;

use std::path::PathBuf;
use std::sync::mpsc::channel;
use std::time::Duration;

use crate::lease::Registry;
use event::{Effect, Event};
use state::App;

/// What the console watches.
pub struct ConsoleOptions {
    pub registries: Vec<Registry>,
    /// Discover `<root>/profiles/*` (new profiles appear as new tabs).
    pub discover_root: Option<PathBuf>,
    pub root: PathBuf,
    pub lock_timeout: Duration,
    /// `leasectl demo`: the playground (sandbox and owner processes).
    pub demo: Option<crate::demo::Playground>,
    /// Start the demo's guided tour at once.
    pub tour: bool,
    /// Show the leases under an etcd prefix (watched with etcd's watch API) instead of files.
    #[cfg(feature = "etcd")]
    pub etcd: Option<crate::lease::etcd::EtcdConfig>,
}

/// The console's one "registry" on etcd: a tab named `etcd`, its home the location.
#[cfg(feature = "etcd")]
pub fn etcd_registry(config: &crate::lease::etcd::EtcdConfig) -> Registry {
    Registry::new("etcd", config.location())
}

/// How long filesystem events are gathered before a reload.
pub const DEBOUNCE: Duration = Duration::from_millis(20);
const TICK: Duration = Duration::from_secs(1);

pub fn run(opts: ConsoleOptions) -> std::io::Result<()> {
    let (tx, rx) = channel::<Event>();
    let (effects_tx, effects_rx) = channel::<Effect>();
    let scope = worker::Scope { registries: opts.registries.clone(), discover_root: opts.discover_root.clone() };
    let demo_state =
        opts.demo.as_ref().map(|pg| state::DemoState::new(pg.sandbox.home().to_path_buf(), pg.sandbox.owned()));
    let worker = worker::Worker::new(scope, opts.lock_timeout, opts.demo);
    #[cfg(feature = "etcd")]
    let worker = match &opts.etcd {
        Some(config) => {
            sources::spawn_etcd_watcher(config.clone(), tx.clone(), DEBOUNCE);
            worker.on_etcd(config.clone())
        }
        None => worker,
    };
    let worker = worker::spawn(worker, effects_rx, tx.clone());
    #[cfg(feature = "etcd")]
    let on_files = opts.etcd.is_none();
    #[cfg(not(feature = "etcd"))]
    let on_files = true;
    if on_files {
        let watch = sources::WatchScope {
            root: opts.root.clone(),
            discover: opts.discover_root.is_some(),
            homes: opts.registries.iter().map(|r| r.home.clone()).collect(),
        };
        sources::spawn_watcher(watch, tx.clone(), DEBOUNCE).map_err(std::io::Error::other)?;
    }
    sources::spawn_tick(tx.clone(), TICK);

    let mut app = App::new(opts.registries, crate::lease::now(), time::local_utc_offset());
    app.no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    app.demo = demo_state;
    let _ = effects_tx.send(Effect::Reload);
    if opts.tour
        && let Some(demo) = app.demo.as_mut()
    {
        demo.next_step = 1;
        let _ = effects_tx.send(Effect::Tour(0));
    }
    sources::spawn_signals(tx.clone());

    // ratatui::init installs a panic hook that restores the terminal.
    let mut terminal = ratatui::init();
    sources::spawn_input(tx);
    let result = (|| -> std::io::Result<()> {
        loop {
            if terminal.draw(|f| view::render(&app, f)).is_err() {
                // The terminal is gone (hangup, closed pty): end as if asked to quit.
                return Ok(());
            }
            // Test-only: prove the panic hook restores the terminal.
            if std::env::var_os("LEASECTL_TEST_FAILPOINT").is_some_and(|v| v == "console-panic") {
                panic!("test failpoint: console-panic");
            }
            let Ok(first) = rx.recv() else { return Ok(()) };
            // Apply everything already queued before drawing again: keeps up under churn.
            for ev in std::iter::once(first).chain(rx.try_iter()) {
                for effect in update::update(&mut app, ev) {
                    if effect == Effect::Quit {
                        return Ok(());
                    }
                    let _ = effects_tx.send(effect);
                }
            }
        }
    })();
    // Clean up first (the worker owns the demo's owners and sandbox), then restore the
    // terminal. The terminal may be gone (SIGHUP): restoring must not print or panic.
    let _ = effects_tx.send(Effect::Quit);
    drop(effects_tx);
    let _ = worker.join();
    let _ = ratatui::try_restore();
    // Its Drop would print to a possibly dead stderr when showing the cursor fails.
    std::mem::forget(terminal);
    result
}
