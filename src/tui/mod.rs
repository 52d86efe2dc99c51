//! The live console (ratatui): watches every registry, shows every owner, and
//! lets an operator clean up safely. State in `state`, changes in `update`,
//! drawing in `view`, I/O in `worker`, event sources in `sources`.

pub mod diff;
pub mod event;
pub mod sources;
pub mod state;
pub mod time;
pub mod update;
pub mod view;
pub mod worker;

use std::path::PathBuf;
use std::sync::mpsc::channel;
use std::time::Duration;

use crate::lease::Registry;
use event::{Effect, Event};
use state::App;

/// What the console watches.
#[derive(Debug, Clone)]
pub struct ConsoleOptions {
    pub registries: Vec<Registry>,
    /// Discover `<root>/profiles/*` (new profiles appear as new tabs).
    pub discover_root: Option<PathBuf>,
    pub root: PathBuf,
    pub lock_timeout: Duration,
}

/// How long filesystem events are gathered before a reload.
const DEBOUNCE: Duration = Duration::from_millis(40);
const TICK: Duration = Duration::from_secs(1);

pub fn run(opts: ConsoleOptions) -> std::io::Result<()> {
    let (tx, rx) = channel::<Event>();
    let (effects_tx, effects_rx) = channel::<Effect>();
    let scope = worker::Scope { registries: opts.registries.clone(), discover_root: opts.discover_root.clone() };
    worker::spawn(worker::Worker::new(scope, opts.lock_timeout), effects_rx, tx.clone());
    let watch = sources::WatchScope {
        root: opts.root.clone(),
        discover: opts.discover_root.is_some(),
        homes: opts.registries.iter().map(|r| r.home.clone()).collect(),
    };
    sources::spawn_watcher(watch, tx.clone(), DEBOUNCE).map_err(std::io::Error::other)?;
    sources::spawn_tick(tx.clone(), TICK);

    let mut app = App::new(opts.registries, crate::lease::now(), time::local_utc_offset());
    app.no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let _ = effects_tx.send(Effect::Reload);

    // ratatui::init installs a panic hook that restores the terminal.
    let mut terminal = ratatui::init();
    sources::spawn_input(tx);
    let result = (|| -> std::io::Result<()> {
        loop {
            terminal.draw(|f| view::render(&app, f))?;
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
    ratatui::restore();
    result
}
