//! The registries this thread last read or wrote, by path: their exact bytes and
//! their parsed form. Reading the same bytes again (what an owner that acquired
//! finds when it releases, unless another writer came between) reuses the parsed
//! entries instead of validating every one again. Parsing is a function of the
//! bytes alone, so a byte-for-byte match gives exactly what parsing would.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustc_hash::FxBuildHasher as FxBuild;

use super::format::RegistryFile;
use super::reparse::{self, IdCounts};

/// Registries remembered per thread, found by path in constant time, so a console
/// on any number of profiles hits as often as one on a single registry. Beyond
/// either bound the least recently used are forgotten.
const MAX_PATHS: usize = 1024;
const MAX_BYTES: usize = 512 * 1024 * 1024;
/// Larger registries are not remembered: their copy would double a one-shot `ls`'s memory
/// (about 30,000 leases and up; a console on one parses each change in full).
const MAX_FILE_BYTES: usize = 8 * 1024 * 1024;

struct Recent {
    /// Shared with the entries of a file read in full, which borrow it.
    bytes: Arc<String>,
    file: RegistryFile,
    /// `bytes` is exactly `{"entries": [E, …]}` of `file`'s entry texts, so a
    /// changed file can be parsed against it.
    hermes_layout: bool,
    /// Lease id hashes of `file`, counted when first needed (most reads never do).
    ids: Option<IdCounts>,
    /// When this path was last looked up or remembered (a per-thread counter).
    used: u64,
}

#[derive(Default)]
struct Remembered {
    by_path: HashMap<PathBuf, Recent, FxBuild>,
    bytes: usize,
    clock: u64,
}

impl Remembered {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn remove(&mut self, path: &Path) {
        if let Some(r) = self.by_path.remove(path) {
            self.bytes -= r.bytes.len();
        }
    }

    /// Forget the least recently used until `extra` more bytes and one more path fit.
    fn make_room(&mut self, extra: usize) {
        while !self.by_path.is_empty() && (self.by_path.len() >= MAX_PATHS || self.bytes + extra > MAX_BYTES) {
            let oldest = self.by_path.iter().min_by_key(|(_, r)| r.used).map(|(p, _)| p.clone());
            match oldest {
                Some(path) => self.remove(&path),
                None => break,
            }
        }
    }
}

thread_local! {
    static RECENT: RefCell<Remembered> = RefCell::new(Remembered::default());
}

/// Off in a process that reads each registry once (a one-shot command): what it would
/// remember is never looked up, and remembering cost a copy of the whole registry at
/// each read and write, made while the registry lock was held.
static ENABLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Remember (the default) or not, from now on in this process (see [`ENABLED`]).
pub fn set_remembering(on: bool) {
    ENABLED.store(on, std::sync::atomic::Ordering::Relaxed);
}

pub(super) fn enabled() -> bool {
    ENABLED.load(std::sync::atomic::Ordering::Relaxed)
}

/// What a lookup found.
pub(super) enum Found {
    /// Exactly the bytes remembered: their registry.
    Same(RegistryFile),
    /// Other bytes, parsed against the remembered ones (remember them next).
    Reparsed(RegistryFile),
}

/// The parsed registry if `bytes` are exactly those last seen at `path`, or
/// differ from them only in a middle stretch of Hermes-layout entries.
pub(super) fn lookup(path: &Path, bytes: &[u8]) -> Option<Found> {
    RECENT.with(|recent| {
        let mut recent = recent.borrow_mut();
        let now = recent.tick();
        let hit = recent.by_path.get_mut(path)?;
        hit.used = now;
        if hit.bytes.as_bytes() == bytes {
            return Some(Found::Same(hit.file.clone()));
        }
        if !hit.hermes_layout {
            return None;
        }
        let ids = hit.ids.get_or_insert_with(|| reparse::id_counts(&hit.file));
        reparse::reparse(hit.bytes.as_bytes(), &hit.file, ids, bytes).map(Found::Reparsed)
    })
}

/// Remember what `path` holds now: `bytes`, parsed as `file`.
pub(super) fn remember(path: &Path, bytes: Arc<String>, file: &RegistryFile, hermes_layout: bool) {
    if !enabled() {
        return;
    }
    RECENT.with(|recent| {
        let mut recent = recent.borrow_mut();
        recent.remove(path);
        if bytes.len() > MAX_FILE_BYTES.min(MAX_BYTES) {
            return;
        }
        recent.make_room(bytes.len());
        let used = recent.tick();
        recent.bytes += bytes.len();
        let hermes_layout = hermes_layout && file.extra.is_empty();
        recent.by_path.insert(path.to_path_buf(), Recent { bytes, file: file.clone(), hermes_layout, ids: None, used });
    })
}

/// Forget `path` (its file changed in a way not seen here).
pub(super) fn forget(path: &Path) {
    RECENT.with(|recent| recent.borrow_mut().remove(path));
}

/// How many registries this thread remembers.
#[cfg(test)]
pub(super) fn remembered_count() -> usize {
    RECENT.with(|recent| recent.borrow().by_path.len())
}
