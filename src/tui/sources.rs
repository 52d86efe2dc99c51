//! The console's event sources, merged on one channel: terminal input, the
//! liveness tick, and the registries' change feed.

use std::sync::mpsc::Sender;
use std::time::Duration;

use ratatui::crossterm::event::{self as term, Event as TermEvent};

use super::event::Event;
use crate::lease::Change;

/// Terminal keys and resizes. Blocks in `read`: no polling.
pub fn spawn_input(tx: Sender<Event>) {
    std::thread::spawn(move || {
        while let Ok(ev) = term::read() {
            let sent = match ev {
                TermEvent::Key(k) => tx.send(Event::Key(k)),
                TermEvent::Resize(w, h) => tx.send(Event::Resize(w, h)),
                TermEvent::Mouse(m) => tx.send(Event::Mouse(m)),
                _ => Ok(()),
            };
            if sent.is_err() {
                break;
            }
        }
    });
}

/// SIGTERM and SIGHUP end the console like `q` does (terminal restored, demo cleaned up).
pub fn spawn_signals(tx: Sender<Event>) {
    use signal_hook::consts::{SIGHUP, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGTERM, SIGHUP]) else { return };
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let _ = tx.send(Event::Shutdown);
        }
    });
}

/// The liveness tick: about once a second.
pub fn spawn_tick(tx: Sender<Event>, every: Duration) {
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(every);
            if tx.send(Event::Tick(crate::lease::now())).is_err() {
                break;
            }
        }
    });
}

/// The registries' change feed (files and etcd alike), as console events.
pub fn spawn_watcher(
    scope: &crate::lease::WatchScope,
    tx: Sender<Event>,
    replaced: super::writes::Replaced,
) -> Result<(), crate::lease::Error> {
    let armed_tx = tx.clone();
    let tx = std::sync::Mutex::new(tx);
    let arming = crate::lease::watch_arming(
        scope,
        std::sync::Arc::new(move |change| {
            let event = match change {
                Change::Files(paths) => Event::FsChanged(paths),
                Change::Remote(changes) => Event::RemoteChanged(changes),
                // Noted for the worker's next reading of that file (which writes it spans);
                // it comes before the change's own event.
                Change::Replaced(path, versions) => {
                    replaced
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .entry(path)
                        .or_default()
                        .extend(versions);
                    return true;
                }
            };
            tx.lock().is_ok_and(|tx| tx.send(event).is_ok())
        }),
    )?;
    // The first read does not wait for the watches (a second at 100,000 profiles): what
    // changed before they were in place is read again once they are.
    std::thread::spawn(move || {
        arming.wait();
        let _ = armed_tx.send(Event::FeedArmed);
    });
    Ok(())
}
