//! The registries this thread last read or wrote, by path: their exact bytes and
//! their parsed form. Reading the same bytes again (what an owner that acquired
//! finds when it releases, unless another writer came between) reuses the parsed
//! entries instead of validating every one again. Parsing is a function of the
//! bytes alone, so a byte-for-byte match gives exactly what parsing would.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use super::reparse::{self, IdCounts};
use super::store::RegistryFile;

/// Registries remembered per thread (the console reads one per profile).
const KEPT: usize = 4;

struct Recent {
    path: PathBuf,
    bytes: Vec<u8>,
    file: RegistryFile,
    /// `bytes` is exactly `{"entries": [E, …]}` of `file`'s entry texts, so a
    /// changed file can be parsed against it.
    hermes_layout: bool,
    /// Lease id hashes of `file`, counted when first needed (most reads never do).
    ids: Option<IdCounts>,
}

thread_local! {
    static RECENT: RefCell<Vec<Recent>> = const { RefCell::new(Vec::new()) };
}

/// What a lookup found.
pub enum Found {
    /// Exactly the bytes remembered: their registry.
    Same(RegistryFile),
    /// Other bytes, parsed against the remembered ones (remember them next).
    Reparsed(RegistryFile),
}

/// The parsed registry if `bytes` are exactly those last seen at `path`, or
/// differ from them only in a middle stretch of Hermes-layout entries.
pub fn lookup(path: &Path, bytes: &[u8]) -> Option<Found> {
    RECENT.with(|recent| {
        let mut recent = recent.borrow_mut();
        let hit = recent.iter_mut().find(|r| r.path == path)?;
        if hit.bytes == bytes {
            return Some(Found::Same(hit.file.clone()));
        }
        if !hit.hermes_layout {
            return None;
        }
        let ids = hit.ids.get_or_insert_with(|| reparse::id_counts(&hit.file));
        reparse::reparse(&hit.bytes, &hit.file, ids, bytes).map(Found::Reparsed)
    })
}

/// Remember what `path` holds now: `bytes`, parsed as `file`. The bytes are
/// moved in, and `bytes` gets back the buffer they replace, emptied (swapping
/// buffers avoids copying, and fresh multi-megabyte buffers cost page faults).
pub fn remember(path: &Path, bytes: &mut Vec<u8>, file: &RegistryFile, hermes_layout: bool) {
    RECENT.with(|recent| {
        let mut recent = recent.borrow_mut();
        let index = match recent.iter().position(|r| r.path == path) {
            Some(i) => i,
            None => {
                if recent.len() >= KEPT {
                    recent.remove(0);
                }
                recent.push(Recent {
                    path: path.to_path_buf(),
                    bytes: Vec::new(),
                    file: RegistryFile::default(),
                    hermes_layout: false,
                    ids: None,
                });
                recent.len() - 1
            }
        };
        let slot = &mut recent[index];
        std::mem::swap(&mut slot.bytes, bytes);
        bytes.clear();
        slot.file = file.clone();
        slot.hermes_layout = hermes_layout && file.extra.is_empty();
        slot.ids = None;
    })
}

/// Forget `path` (its file changed in a way not seen here).
pub fn forget(path: &Path) {
    RECENT.with(|recent| recent.borrow_mut().retain(|r| r.path != path));
}
