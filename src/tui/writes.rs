//! Which writes of a registry file a reading spans. An acquire that pruned a crashed
//! owner's lease is one write that took that lease out and put another in: read across
//! that one write, the lease was pruned, not released (the owner was last seen alive).
//! The change feed notes each version replaced; the worker's readings use them.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use crate::lease::{Entry, FileVersion, LeaseStore, Listing, Liveness, Prober};

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
    last: Vec<(Option<FileVersion>, Vec<Entry>)>,
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
        let now: HashSet<&str> = views.iter().map(|v| v.entry.lease_id()).collect();
        let was: HashSet<&str> = old.iter().map(Entry::lease_id).collect();
        let mut pruned = Vec::new();
        if one_write && views.iter().any(|v| !was.contains(v.entry.lease_id())) {
            let mut prober = Prober::new();
            for gone in old.iter().filter(|e| !now.contains(e.lease_id())) {
                if !matches!(prober.judge(gone), Liveness::Alive | Liveness::Unknown(_)) {
                    pruned.push(gone.lease_id().to_owned());
                }
            }
        }
        *old = views.iter().map(|v| v.entry.clone()).collect();
        (listing, pruned)
    }
}
