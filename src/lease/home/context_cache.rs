//! What a home's leak judgment read (its config's idle threshold, its state.db's sessions),
//! kept between readings while the files it came from are as they were. A follower that
//! keeps a metrics file read both for every home at each write: two openings of the home
//! (root's link checks each), a second of CPU at 20,000 profiles.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::context::{self, Contexts, FileStamp};

/// A file changed this recently may change again within the same timestamp tick (its
/// ctime would not move): what was read from it is read again next time.
const SETTLED: f64 = 2.0;

/// The homes' readings, by home.
#[derive(Default)]
pub(crate) struct ContextCache {
    homes: HashMap<PathBuf, Kept>,
}

struct Kept {
    /// The files' versions when they were read; None when one was too fresh to trust.
    files: Option<[Option<FileStamp>; 3]>,
    /// The session ids the contexts were read for, sorted.
    ids: Vec<String>,
    idle: Option<Duration>,
    threshold: Duration,
    contexts: Contexts,
}

impl ContextCache {
    /// `home`'s idle threshold (`given`, else its config's) and the contexts of `ids`
    /// (sorted, each once): read again only when its config.yaml, state.db or state.db's
    /// write-ahead log changed, or other ids are asked for.
    pub(crate) fn get(&mut self, home: &Path, given: Option<Duration>, ids: &[&str]) -> (Duration, &Contexts) {
        use std::collections::hash_map::Entry;
        let files = versions(home);
        let still = |k: &Kept| {
            k.files == Some(files) && k.idle == given && k.ids.iter().map(String::as_str).eq(ids.iter().copied())
        };
        let read = || {
            let (threshold, _) = context::idle_threshold(home, given);
            let contexts = context::read_found(home, || ids.to_vec());
            let settled = files.iter().flatten().all(|v| settled(v.ctime_ns));
            let ids = ids.iter().map(|id| (*id).to_owned()).collect();
            Kept { files: settled.then_some(files), ids, idle: given, threshold, contexts }
        };
        let kept = match self.homes.entry(home.to_path_buf()) {
            Entry::Occupied(kept) if still(kept.get()) => kept.into_mut(),
            Entry::Occupied(kept) => {
                let kept = kept.into_mut();
                *kept = read();
                kept
            }
            Entry::Vacant(place) => place.insert(read()),
        };
        (kept.threshold, &kept.contexts)
    }

    /// Forget the homes not in `homes` (profiles removed, or holding no live lease now).
    pub(crate) fn keep_only(&mut self, homes: &std::collections::HashSet<PathBuf>) {
        self.homes.retain(|home, _| homes.contains(home));
    }
}

/// The stamps of the files a home's leak judgment reads: its config.yaml, then its
/// database's ([`context::signature`]).
fn versions(home: &Path) -> [Option<FileStamp>; 3] {
    let [db, wal] = context::signature(&context::state_db(home));
    [context::stamp(&home.join("config.yaml")), db, wal]
}

fn settled(ctime_ns: i128) -> bool {
    (crate::lease::now() - ctime_ns as f64 / 1e9) > SETTLED
}
