//! Which store's lock file each granted flock is on. Each lock file's device and inode
//! are noted when its registry is read, and a lock check matches `/proc/locks` against
//! them: with 100,000 profiles the console statted 100,000 lock files every 5 s (most
//! of them not there), a tenth of a core while idle.

use std::collections::HashMap;
use std::path::Path;

use crate::lease::home::lock::{FileId, granted_flocks};

#[derive(Debug, Default)]
pub(super) struct LockFiles {
    store_of: HashMap<FileId, usize>,
    file_of: HashMap<usize, FileId>,
}

impl LockFiles {
    /// Note store `index`'s lock file as it is now; one not there is forgotten.
    pub(super) fn note(&mut self, index: usize, lock_path: Option<&Path>) {
        let now = lock_path.and_then(FileId::of);
        if let Some(old) = self.file_of.remove(&index)
            && self.store_of.get(&old) == Some(&index)
        {
            self.store_of.remove(&old);
        }
        if let Some(id) = now {
            self.file_of.insert(index, id);
            self.store_of.insert(id, index);
        }
    }

    /// The stores whose lock file a process holds now, with its pid. `/proc/locks` is
    /// read only when some lock file is known.
    pub(super) fn held(&self) -> Vec<(usize, u32)> {
        if self.store_of.is_empty() {
            return vec![];
        }
        granted_flocks().into_iter().filter_map(|(id, pid)| self.store_of.get(&id).map(|i| (*i, pid))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real flock on a noted lock file is found; one on a file not noted, or after the
    /// file was re-made (another inode) and noted again, is not put on the wrong store.
    #[test]
    fn a_held_lock_file_is_found_by_its_inode() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("a.lock"), dir.path().join("b.lock"));
        let mut files = LockFiles::default();
        files.note(0, Some(&a));
        assert!(files.held().is_empty(), "no lock file yet");
        std::fs::write(&a, b"").expect("a");
        std::fs::write(&b, b"").expect("b");
        files.note(0, Some(&a));
        files.note(1, None);
        let held_a = std::fs::File::open(&a).expect("open a");
        held_a.lock().expect("flock a");
        let held_b = std::fs::File::open(&b).expect("open b");
        held_b.lock().expect("flock b");
        assert_eq!(files.held(), vec![(0, std::process::id())]);
        drop(held_a);
        // Another test's child, between its fork and its exec, holds a copy of every
        // descriptor (and so the lock) for a moment: the release shows once that is done.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while !files.held().is_empty() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(files.held().is_empty(), "released");
        std::fs::remove_file(&a).expect("rm a");
        files.note(0, Some(&a));
        files.note(1, Some(&b));
        assert_eq!(files.held(), vec![(1, std::process::id())]);
    }
}
