//! A registry file lease's watcher: nothing renews a file lease (it lasts as long as its
//! owner), but it can be taken away, so a thread looks for it in the file.

use std::path::PathBuf;
use std::time::Duration;

use super::{fence, registry};
use crate::lease::backend::{OnLost, Renewal};
use crate::lease::format::entry::Entry;

/// Watches a registry file for one lease; reports once when it is gone.
pub(super) struct LeaseWatch {
    /// Dropped by `stop`: the thread's wait ends at once (not at its next look).
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How often a held lease is looked for. A read takes no lock and costs a stat when the
/// file did not change (the parse is remembered).
const LEASE_WATCH_EVERY: Duration = Duration::from_millis(250);

impl LeaseWatch {
    /// Watch for `held`, or the entry its writer replaced it with (a re-acquire by the
    /// same writer is not a loss).
    pub(super) fn start(path: PathBuf, held: Entry, on_lost: OnLost) -> LeaseWatch {
        use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
        let (stop, stopping) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopping.recv_timeout(LEASE_WATCH_EVERY) {
                // An unreadable or invalid file says nothing either way: look again later.
                let gone = match registry::read(&path) {
                    Ok(file) => fence::held_by_writer(&file.entries, &held).is_none(),
                    Err(_) => false,
                };
                if gone && matches!(stopping.try_recv(), Err(TryRecvError::Empty)) {
                    let at = jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M:%S UTC");
                    on_lost(format!(
                        "lease {} is no longer in {} (force-released or removed by hand, seen at {at})",
                        held.lease_id(),
                        path.display()
                    ));
                    return;
                }
            }
        });
        LeaseWatch { stop: Some(stop), thread: Some(thread) }
    }
}

impl Renewal for LeaseWatch {
    fn stop(mut self: Box<Self>) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
