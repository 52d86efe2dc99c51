//! Which writes of a registry file a reading spans. An acquire that pruned a crashed
//! owner's lease is one write that took that lease out and put another in: read across
//! that one write, the lease was pruned, not released (the owner was last seen alive).
//! The change feed notes each version replaced; the worker's readings use them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use rustc_hash::FxHashMap;

use crate::lease::changes;
use crate::lease::{FileVersion, LeaseStore, LeaseView, Listing, Prober};

/// The versions of each registry file replaced since it was last read, as the change
/// feed reported them (shared by the feed's thread and the worker).
pub(crate) type Replaced = Arc<Mutex<HashMap<PathBuf, Vec<Option<FileVersion>>>>>;

/// How long a reading of a file changed since the last one waits for the feed to report
/// the change (its debounce gathers 20 ms).
const FEED_WAIT: std::time::Duration = std::time::Duration::from_millis(150);

/// How long after a wait for a note that never came no reading waits for one.
const NO_WAIT_AFTER_GIVING_UP: std::time::Duration = std::time::Duration::from_secs(1);

/// What the worker knows of each store's last reading.
#[derive(Default)]
pub(crate) struct Writes {
    pub replaced: Replaced,
    /// By store index: the version last read whole (when known), and its leases. Only
    /// stores with either are kept (a console with 100,000 empty profiles keeps none).
    last: FxHashMap<usize, (Option<FileVersion>, Vec<LeaseView>)>,
    /// When a reading last waited [`FEED_WAIT`] for a note that never came: the feed named
    /// no file (a burst of more than it names, an overflow), and a reading of every
    /// registry would otherwise wait that long for each one changed (30 s for 200).
    gave_up: Option<std::time::Instant>,
}

impl Writes {
    /// The version of its file store `index`'s last reading read whole (None: no file, or
    /// it was replaced while being read).
    pub(crate) fn version_read(&self, index: usize) -> Option<FileVersion> {
        self.last.get(&index).and_then(|(version, _)| *version)
    }

    /// Read store `index`; with it, the ids of leases an acquire pruned, when the reading
    /// spans exactly one write that added a lease and removed leases whose owners are dead
    /// or recycled now (the fence prunes only those).
    pub(crate) fn read(&mut self, index: usize, store: &mut dyn LeaseStore) -> (Listing, Vec<String>) {
        let Some(path) = store.location().registry().map(|r| r.path()) else { return (store.read(), vec![]) };
        let before = FileVersion::of(&path);
        let listing = store.read();
        let after = FileVersion::of(&path);
        // Read right after a write of this console's own (an action, the demo's job): the
        // feed reports it after its debounce; a moment's wait lets the reading count it.
        let last_version = self.last.get(&index).and_then(|(version, _)| *version);
        let changed = before.is_some() && last_version.is_some() && before != last_version;
        let waited_lately = self.gave_up.is_some_and(|at| at.elapsed() < NO_WAIT_AFTER_GIVING_UP);
        let wait_until = std::time::Instant::now() + FEED_WAIT;
        let versions = loop {
            let noted = self.replaced.lock().unwrap_or_else(PoisonError::into_inner).remove(&path);
            match noted {
                Some(v) => break v,
                None if changed && !waited_lately && std::time::Instant::now() < wait_until => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                None => {
                    if changed && !waited_lately {
                        self.gave_up = Some(std::time::Instant::now());
                    }
                    break Vec::new();
                }
            }
        };
        let one_write = !versions.is_empty() && FileVersion::unseen(last_version, &versions) == 0;
        // Known exactly only when nothing replaced the file while it was read.
        let read_now = before.filter(|_| before == after);
        let Ok(views) = &listing.leases else {
            match self.last.get_mut(&index) {
                Some((read_before, _)) => *read_before = read_now,
                None if read_now.is_some() => {
                    self.last.insert(index, (read_now, Vec::new()));
                }
                None => {}
            }
            return (listing, vec![]);
        };
        if read_now.is_none() && views.is_empty() {
            // Nothing to keep for the next reading (no file, or no version and no lease),
            // and no acquire's write leaves the registry empty: nothing was pruned.
            self.last.remove(&index);
            return (listing, vec![]);
        }
        let (read_before, old) = self.last.entry(index).or_default();
        *read_before = read_now;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::{AcquireRequest, Location, Registry, StoreOptions};

    /// Only a registry with a file or leases is remembered: a console over 100,000
    /// empty profiles keeps nothing for them, and a profile keeps nothing again once its
    /// file is gone.
    #[test]
    fn only_a_registry_with_a_file_is_remembered() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = Registry::new("root", dir.path());
        let mut store = crate::lease::open(&Location::File(reg.clone()), StoreOptions::default()).expect("a store");
        let mut writes = Writes::default();
        let (listing, pruned) = writes.read(0, store.as_mut());
        assert_eq!(listing.leases.as_ref().map(Vec::len).ok(), Some(0));
        assert!(pruned.is_empty());
        assert!(writes.last.is_empty(), "no file: nothing kept");

        let req = AcquireRequest::for_this_process("S");
        store.acquire(&req).expect("granted");
        let (listing, _) = writes.read(0, store.as_mut());
        assert_eq!(listing.leases.as_ref().map(Vec::len).ok(), Some(1));
        let (version, leases) = writes.last.get(&0).expect("a file with a lease is kept");
        assert_eq!(*version, FileVersion::of(&reg.path()));
        assert_eq!(leases.len(), 1);

        std::fs::remove_file(reg.path()).expect("remove the registry");
        writes.read(0, store.as_mut());
        assert!(writes.last.is_empty(), "the file gone: nothing kept");
    }
}
