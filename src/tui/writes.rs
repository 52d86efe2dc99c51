//! Which writes of a registry file a reading spans. An acquire that pruned a crashed
//! owner's lease is one write that took that lease out and put another in: read across
//! that one write, the lease was pruned, not released (the owner was last seen alive).
//! The change feed notes each version replaced; the worker's readings use them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use crate::lease::changes;
use crate::lease::{FileVersion, LeaseStore, LeaseView, Listing, Prober};

/// The versions of each registry file replaced since it was last read, as the change
/// feed reported them (shared by the feed's thread and the worker).
pub type Replaced = Arc<Mutex<HashMap<PathBuf, Vec<Option<FileVersion>>>>>;

/// How long a reading of a file changed since the last one waits for the feed to report
/// the change (its debounce gathers 20 ms).
const FEED_WAIT: std::time::Duration = std::time::Duration::from_millis(150);

/// What the worker knows of each store's last reading.
#[derive(Default)]
pub struct Writes {
    pub replaced: Replaced,
    /// By store: the version last read whole (when known), and its leases.
    last: Vec<(Option<FileVersion>, Vec<LeaseView>)>,
}

impl Writes {
    /// Read store `index`; with it, the ids of leases an acquire pruned, when the reading
    /// spans exactly one write that added a lease and removed leases whose owners are dead
    /// or recycled now (the fence prunes only those).
    pub fn read(&mut self, index: usize, store: &mut dyn LeaseStore) -> (Listing, Vec<String>) {
        let Some(path) = store.location().registry().map(|r| r.path()) else { return (store.read(), vec![]) };
        let before = FileVersion::of(&path);
        let listing = store.read();
        let after = FileVersion::of(&path);
        if self.last.len() <= index {
            self.last.resize_with(index + 1, Default::default);
        }
        // Read right after a write of this console's own (an action, the demo's job): the
        // feed reports it after its debounce; a moment's wait lets the reading count it.
        let changed = before.is_some() && self.last[index].0.is_some() && before != self.last[index].0;
        let wait_until = std::time::Instant::now() + FEED_WAIT;
        let versions = loop {
            let noted = self.replaced.lock().unwrap_or_else(PoisonError::into_inner).remove(&path);
            match noted {
                Some(v) => break v,
                None if changed && std::time::Instant::now() < wait_until => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                None => break Vec::new(),
            }
        };
        let (read_before, old) = &mut self.last[index];
        let one_write = !versions.is_empty() && FileVersion::unseen(*read_before, &versions) == 0;
        // Known exactly only when nothing replaced the file while it was read.
        *read_before = before.filter(|_| before == after);
        let Ok(views) = &listing.leases else { return (listing, vec![]) };
        // The core's rule, as `ls -w` applies it: gone in the one write that put a lease
        // in, its owner dead or recycled now.
        let mut pruned = Vec::new();
        if one_write {
            let mut events = changes::between(old, views);
            let mut prober = Prober::new();
            pruned = changes::prunes_of_an_acquire(&mut events, |v| prober.judge(&v.entry));
        }
        old.clone_from(views);
        (listing, pruned)
    }
}
