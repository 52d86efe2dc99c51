//! The live console (ratatui): watches every registry, shows every owner, and
//! lets an operator clean up safely. State in `state`, changes in `update`,
//! drawing in `view`, I/O in `worker`, event sources in `sources`.

mod columns;
mod dialog_view;
pub mod diff;
pub mod event;
pub mod extension;
mod history;
pub(crate) mod keys;
pub(crate) mod layout;
mod location_index;
mod lock_files;
mod mouse;
pub(crate) mod samples;
pub(crate) mod sessions;
pub mod sort;
pub mod sources;
pub mod state;
mod stores;
mod style;
pub mod time;
pub mod update;
pub mod view;
mod watch_handoff;
pub mod worker;
pub(crate) mod writes;

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

use crate::lease::Location;
use event::{Effect, Event};
pub use history::{history_homes, hosts_history, load_history, read_history};
use state::App;

/// What the console watches.
pub struct ConsoleOptions {
    /// Registry files, or one etcd prefix.
    pub locations: Vec<Location>,
    /// Discover `<root>/profiles/*` (new profiles appear as new tabs).
    pub discover_root: Option<PathBuf>,
    /// Add every registry the hosts of `locations` (`--host`) report, as they report them.
    pub discover_hosts: bool,
    pub lock_timeout: Duration,
    /// The idle threshold for leak suspects given on the command line, if any.
    pub idle_threshold: Option<Duration>,
    /// A plug-in (the demo): its state in the app, its runner on the worker thread.
    pub extension: Option<(Box<dyn extension::Extension>, Box<dyn extension::Runner>)>,
}

/// How long filesystem events are gathered before a reload.
pub const DEBOUNCE: Duration = Duration::from_millis(20);
const TICK: Duration = Duration::from_secs(1);
/// How long a tick's frame waits for the worker's re-judged owners.
const TICK_ANSWER: Duration = Duration::from_millis(250);

/// How long a quitting console waits for its worker's action in flight.
const QUIT_GRACE: Duration = Duration::from_millis(200);

/// The console: its sources and worker started, the loop run until quit, then
/// everything stopped and the terminal restored (in that order).
pub fn run(opts: ConsoleOptions) -> std::io::Result<()> {
    let (tx, rx) = channel::<Event>();
    let (effects_tx, effects_rx) = channel::<Effect>();
    let scope = worker::Scope {
        locations: opts.locations.clone(),
        discover_root: opts.discover_root.clone(),
        discover_hosts: opts.discover_hosts,
    };
    let (mut plugin, runner) = opts.extension.map_or((None, None), |(x, r)| (Some(x), Some(r)));
    let has_runner = runner.is_some();
    let worker = worker::Worker::new(scope, opts.lock_timeout, runner).with_idle_threshold(opts.idle_threshold);
    let stop_worker = worker.stopper();
    let replaced = worker.replaced();
    let worker = worker::spawn(worker, effects_rx, tx.clone());
    let watch = crate::lease::WatchScope {
        locations: opts.locations.clone(),
        discover_root: opts.discover_root.clone(),
        debounce: DEBOUNCE,
    };
    sources::spawn_watcher(&watch, tx.clone(), replaced).map_err(std::io::Error::other)?;
    sources::spawn_tick(tx.clone(), TICK);

    let mut app = App::new(opts.locations.clone(), crate::lease::now(), time::local_zone());
    app.no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    // The history comes on a thread of its own: listing 100,000 profiles for their
    // journals takes 0.3 s, and the first screen does not wait for it.
    let (locations, root, now, history_tx) = (opts.locations.clone(), opts.discover_root.clone(), app.now, tx.clone());
    let every_profile = opts.discover_hosts;
    std::thread::spawn(move || {
        let history = read_history(&history_homes(&locations, root.as_deref()), now);
        let _ = history_tx.send(Event::History(history));
        // Other hosts' journals are read there; their lines join these when they come.
        if let Some(history) = hosts_history(&locations, every_profile, now) {
            let _ = history_tx.send(Event::History(history));
        }
    });
    let _ = effects_tx.send(Effect::Reload);
    // The extension's first jobs (the demo's tour) go after the first read.
    if let Some(ext) = plugin.as_mut() {
        for job in ext.start() {
            let _ = effects_tx.send(Effect::Extension(job));
        }
    }
    app.extension = plugin;
    sources::spawn_signals(tx.clone());

    // ratatui::init installs a panic hook that restores the terminal.
    let mut terminal = ratatui::init();
    // ratatui's panic hook restores the terminal but knows nothing of the mouse: give the
    // mouse back first, then let it run.
    let restore_terminal = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = set_mouse(false);
        restore_terminal(info);
    }));
    if let Ok(size) = terminal.size() {
        app.size = (size.width, size.height);
    }
    app.mouse = std::env::var_os("LEASECTL_NO_MOUSE").is_none_or(|v| v.is_empty());
    sources::spawn_input(tx);
    let result = main_loop(&mut terminal, &mut app, &rx, &effects_tx);
    // Clean up first (the worker owns the extension's runner: the demo's owners and
    // sandbox), then restore the terminal.
    stop_worker.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = effects_tx.send(Effect::Quit);
    drop(effects_tx);
    // An extension's runner has something to clean up (the demo's owners and sandbox):
    // then the worker is waited for. Otherwise it is given a moment to finish an action
    // in flight (each write is whole either way), but a read of thousands of registries
    // does not hold the quit up: exit ends it.
    let grace = std::time::Instant::now() + QUIT_GRACE;
    while !has_runner && !worker.is_finished() && std::time::Instant::now() < grace {
        std::thread::sleep(Duration::from_millis(5));
    }
    if has_runner || worker.is_finished() {
        let _ = worker.join();
    }
    restore(terminal);
    // The process ends next: its state is not freed piece by piece (100,000 tabs' worth
    // held the quit up), but the extension is dropped, as it may clean up.
    drop(app.extension.take());
    // Tens of thousands of watches take the kernel 10 ms and more to tear down, which the
    // exit would wait for: a child does it once this process has ended.
    if app.registries.len() >= watch_handoff::FROM_REGISTRIES {
        let _ = watch_handoff::hand_off();
    }
    std::mem::forget(app);
    result
}

/// Draw, wait for events, update, hand the effects to the worker; until quit, or the
/// terminal or every source is gone.
fn main_loop(
    terminal: &mut ratatui::DefaultTerminal,
    app: &mut App,
    rx: &Receiver<Event>,
    effects_tx: &Sender<Effect>,
) -> std::io::Result<()> {
    // The minute last drawn: ages past a minute change only with it.
    let mut drawn_minute = None;
    let mut draw = true;
    let mut mouse_taken = false;
    loop {
        // The mouse is the terminal's until the console takes it (on, and `m` toggles).
        if app.mouse != mouse_taken && set_mouse(app.mouse).is_ok() {
            mouse_taken = app.mouse;
        }
        if draw {
            if terminal.draw(|f| view::render(app, f)).is_err() {
                // The terminal is gone (hangup, closed pty): end as if asked to quit.
                return Ok(());
            }
            drawn_minute = Some((app.now / 60.0).floor());
        }
        // For tests (feature `failpoints`): prove the panic hook restores the terminal.
        if crate::lease::failpoint::chosen("console-panic") {
            panic!("test failpoint: console-panic");
        }
        let Ok(mut first) = rx.recv() else { return Ok(()) };
        loop {
            // Apply everything already queued before drawing again: keeps up under churn.
            let mut only_ticks = true;
            for ev in std::iter::once(first).chain(rx.try_iter()) {
                only_ticks &= matches!(ev, Event::Tick(_));
                let large_read_done = matches!(&ev, Event::Loaded(l) if l.large_read_done);
                for effect in update::update(app, ev) {
                    if effect == Effect::Quit {
                        return Ok(());
                    }
                    let _ = effects_tx.send(effect);
                }
                if large_read_done {
                    // Every part is applied and freed: a third of the resident memory of a
                    // console over 100,000 profiles, kept by the allocator otherwise.
                    // The watcher gives back what arming its directories freed itself.
                    crate::lease::memory::give_back_free_pages();
                }
            }
            // A tick asks the worker to re-judge the owners; its answer (sent only when
            // something changed) follows within milliseconds: one frame for both. A tick
            // left unanswered draws only when the second or the minute shows.
            match only_ticks.then(|| rx.recv_timeout(TICK_ANSWER)) {
                Some(Ok(next)) => first = next,
                Some(Err(RecvTimeoutError::Disconnected)) => return Ok(()),
                Some(Err(RecvTimeoutError::Timeout)) => {
                    draw = app.ticks_visibly() || drawn_minute != Some((app.now / 60.0).floor());
                    break;
                }
                None => {
                    draw = true;
                    break;
                }
            }
        }
    }
}

/// Take the mouse (clicks and the wheel come as events) or give it back to the terminal.
fn set_mouse(on: bool) -> std::io::Result<()> {
    use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
    if on {
        ratatui::crossterm::execute!(std::io::stdout(), EnableMouseCapture)
    } else {
        ratatui::crossterm::execute!(std::io::stdout(), DisableMouseCapture)
    }
}

/// Give the terminal back. It may be gone (SIGHUP): restoring must not print or panic.
fn restore(terminal: ratatui::DefaultTerminal) {
    let _ = set_mouse(false);
    let _ = ratatui::try_restore();
    // ratatui's restore leaves the cursor as the last frame left it (hidden); the
    // Terminal's Drop would show it but prints to a possibly dead stderr when that fails.
    let _ = ratatui::crossterm::execute!(std::io::stdout(), ratatui::crossterm::cursor::Show);
    std::mem::forget(terminal);
}
