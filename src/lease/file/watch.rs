//! The change feed of registry files: a notify watcher on every home's `runtime/`
//! directory (and `profiles/` for new profiles), re-armed as directories come and go.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};

use crate::lease::backend::{FileVersion, MAX_GATHER};
use crate::lease::home::paths::{self, LOCK_FILE, REGISTRY_FILE};

/// What the watcher looks after: fixed homes, or a root whose profiles come and go.
#[derive(Debug, Clone)]
pub(crate) struct FileWatch {
    pub root: PathBuf,
    /// Discover `<root>/profiles/*` as they appear.
    pub discover: bool,
    pub homes: Vec<PathBuf>,
}

impl FileWatch {
    fn homes(&self) -> Vec<PathBuf> {
        if self.discover { paths::all_homes(&self.root) } else { self.homes.clone() }
    }

    /// Whether `dir` is one of the homes in scope (the root, a profile, a fixed home).
    fn is_home(&self, dir: &Path) -> bool {
        (self.discover && paths::root_of(dir) == self.root) || self.homes.iter().any(|h| h == dir)
    }

    /// Whether `dir` is (or, gone, was) a directory of the `profiles/` the scope discovers.
    fn in_profiles(&self, dir: &Path) -> bool {
        self.discover && paths::is_in_profiles_of(&self.root, dir)
    }

    /// Whether `dir` is one that [`desired`](Self::desired) lists while it is there: a
    /// home in scope, its runtime/, or `profiles/` (not the ancestors of missing ones).
    fn wants(&self, dir: &Path) -> bool {
        let home_in_scope = |h: &Path| {
            (self.discover && (h == self.root || paths::is_profile_of(&self.root, h)))
                || self.homes.iter().any(|home| home == h)
        };
        let shaped = home_in_scope(dir)
            || (paths::is_runtime_dir(dir) && dir.parent().is_some_and(home_in_scope))
            || (self.discover && dir.parent() == Some(self.root.as_path()) && dir.ends_with("profiles"));
        shaped && is_real_dir(dir)
    }

    /// The directories to watch now: each runtime dir, home and the profiles dir, or
    /// the nearest existing ancestor of each one that does not exist yet.
    pub(crate) fn desired(&self) -> BTreeSet<PathBuf> {
        let mut out = BTreeSet::new();
        // A directory inside a home is watched only as itself: one its owner made a
        // symlink (to a busy directory, or root's) is not followed; the home is watched.
        // Each path is made as it is looked at (a list of them all first was two copies
        // of every home at 100,000 profiles, freed between the ones kept).
        let mut want = |base: &Path, inner: Option<&str>| {
            let inner = inner.map(|name| base.join(name)).filter(|p| is_real_dir(p));
            if let Some(existing) = inner.or_else(|| nearest_existing(base)) {
                out.insert(existing);
            }
        };
        for h in self.homes() {
            want(&h, Some(paths::RUNTIME_DIR));
            want(&h, None);
        }
        if self.discover {
            want(&self.root, Some("profiles"));
        }
        out
    }
}

fn is_real_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

fn nearest_existing(p: &Path) -> Option<PathBuf> {
    p.ancestors().find(|a| a.is_dir()).map(Path::to_path_buf)
}

/// A registry, config or directory event, or a lock file made; temp files, the lock
/// file's use and reads are not.
fn relevant(kind: &EventKind, path: &Path) -> bool {
    let interesting_kind = matches!(
        kind,
        EventKind::Create(_)
            | EventKind::Remove(_)
            | EventKind::Modify(notify::event::ModifyKind::Data(_))
            | EventKind::Modify(notify::event::ModifyKind::Name(_))
            | EventKind::Modify(notify::event::ModifyKind::Any)
            | EventKind::Any
    );
    if !interesting_kind {
        return false;
    }
    match path.file_name().and_then(|n| n.to_str()) {
        Some(REGISTRY_FILE) | Some("config.yaml") => true,
        // Made (a home's first lock, or re-made), removed or renamed over: the console
        // notes its inode, to find its holder in /proc/locks, and metrics report a lock
        // only where its file is. Opening and locking it are not changes.
        Some(LOCK_FILE) => {
            matches!(
                kind,
                EventKind::Create(_) | EventKind::Remove(_) | EventKind::Modify(notify::event::ModifyKind::Name(_))
            )
        }
        Some(name) if name.starts_with(paths::TEMP_PREFIX) => false,
        // A directory appearing or going (runtime/, a home, a profile).
        _ => !matches!(kind, EventKind::Modify(notify::event::ModifyKind::Data(_))),
    }
}

/// A directory coming or going (runtime/, a home, a profile), not a file in one.
fn is_directory_event(kind: &EventKind, path: &Path) -> bool {
    matches!(kind, EventKind::Create(_) | EventKind::Remove(_) | EventKind::Modify(notify::event::ModifyKind::Name(_)))
        && !matches!(path.file_name().and_then(|n| n.to_str()), Some(REGISTRY_FILE | "config.yaml" | LOCK_FILE))
}

/// A new version of a registry: renamed over it (Hermes' and leasectl's writes) or created.
fn replacement(kind: &EventKind, path: &Path) -> bool {
    use notify::event::{ModifyKind, RenameMode};
    path.file_name().is_some_and(|n| n == REGISTRY_FILE)
        && matches!(kind, EventKind::Create(_) | EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both)))
}

/// Watch with notify; re-arm whenever directories appear or vanish. Events are
/// debounced here: after the first relevant one, gather until `debounce` passes
/// quietly. Idle, this thread blocks in `recv` (notify-debouncer-full wakes every
/// few milliseconds even when nothing happens, which an idle console cannot afford).
/// `report` gets the relevant paths of each burst (empty: directories came or went), and
/// how many times each registry in it was replaced (renamed over or created): a reader
/// that reads once per burst missed all versions but the last. When it returns false
/// the watcher stops.
///
/// The receiver returned hears once every directory in scope is watched: a change made
/// before then may go unreported (arming takes about a second at 100,000 profiles).
pub(crate) fn spawn(
    scope: FileWatch,
    debounce: Duration,
    report: impl Fn(Vec<PathBuf>, Vec<(PathBuf, Vec<Option<FileVersion>>)>) -> bool + Send + 'static,
) -> notify::Result<Receiver<()>> {
    let (fs_tx, fs_rx): (Sender<notify::Result<notify::Event>>, Receiver<notify::Result<notify::Event>>) = channel();
    let watcher = feed(fs_tx)?;
    let (armed_tx, armed_rx) = channel();
    std::thread::spawn(move || {
        let mut armed = Armed { watcher };
        // For tests (feature `failpoints`): arming that takes its time, as at 100,000 profiles.
        if crate::lease::failpoint::chosen("watch-arming-slow") {
            std::thread::sleep(Duration::from_secs(2));
        }
        armed.rearm(&scope);
        let _ = armed_tx.send(());
        let mut renames = Renames::default();
        while let Ok(first) = fs_rx.recv() {
            let mut burst = Burst::default();
            let dirs = burst.take(first, &mut renames);
            // A directory that appeared (runtime/ at a home's first acquire) is watched
            // before gathering: every version written into it while a burst is gathered
            // would otherwise go unseen, uncounted.
            burst.follow(&mut armed, &dirs, &scope);
            if burst.paths.is_empty() && matches!(dirs, Dirs::Unchanged) {
                // Nothing changed: the lock file, a temp file. No I/O here: re-arming
                // looks at the directories, and when opens were in the feed that made a
                // loop that kept a core busy (they are not now: see `feed`). Directories
                // that come or go are Create/Remove/rename events, relevant ones.
                continue;
            }
            if !gather(&fs_rx, debounce, &mut burst, &mut renames, &mut armed, &scope) {
                return;
            }
            armed.renew(&burst.paths, &scope);
            // Only a directory that came or went, other than a home's runtime/, makes it
            // look at every profile again (a second of CPU at 100,000 profiles).
            if burst.rearm_after {
                armed.rearm(&scope);
            }
            // Paths left out would leave their registries unread: none named means all.
            let paths = if burst.too_many_paths { Vec::new() } else { burst.paths };
            if !report(paths, burst.replaced) {
                break;
            }
        }
    });
    Ok(armed_rx)
}

/// A watcher that reports changes only. Opens and closes are left in the kernel: every
/// read of a watched directory or registry (the console's own, each owner's) would wake
/// this thread and allocate an event, 200,000 of them for the first read of 100,000 profiles.
fn feed(tx: Sender<notify::Result<notify::Event>>) -> notify::Result<notify::RecommendedWatcher> {
    notify::RecommendedWatcher::new(tx, notify::Config::default().with_event_kinds(notify::EventKindMask::CORE))
}

/// Directories armed at once from which the memory freed is given back (the console's
/// first arming over 100,000 profiles frees tens of megabytes).
const LARGE_ARMING: usize = 1000;

/// [`FileWatch::desired`], made on a thread of its own. Its set is two copies of every
/// path for a moment; notify's own copies are made on the thread that calls `watch`, and
/// the set made there left holes among them that no trim gives back (10 MB resident at
/// 100,000 profiles). Made apart, the set's memory is all freed together.
fn desired_apart(scope: &FileWatch) -> BTreeSet<PathBuf> {
    std::thread::scope(|s| s.spawn(|| scope.desired()).join()).unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The watcher, kept to what the scope wants. Which directories it watches is notify's
/// to know: a second set of them here was 120 bytes a profile, 12 MB at 100,000.
struct Armed {
    watcher: notify::RecommendedWatcher,
}

impl Armed {
    /// The directories watched now, as notify has them (a deleted one's watch is gone).
    fn watched(&self) -> BTreeSet<PathBuf> {
        self.watcher.watched_paths().unwrap_or_default().into_iter().map(|(dir, _)| dir).collect()
    }

    /// Watch what `scope` wants now, and nothing else. Loops until stable: a directory
    /// may appear while its parent is armed. One that cannot be watched is tried once.
    fn rearm(&mut self, scope: &FileWatch) {
        let mut watched = self.watched();
        for _ in 0..8 {
            let desired = desired_apart(scope);
            if desired == watched {
                break;
            }
            for gone in watched.difference(&desired) {
                let _ = self.watcher.unwatch(gone);
            }
            for new in desired.difference(&watched) {
                let _ = self.watcher.watch(new, RecursiveMode::NonRecursive);
            }
            watched = desired;
        }
        if watched.len() >= LARGE_ARMING {
            drop(watched);
            crate::lease::memory::give_back_free_pages();
        }
    }

    /// A home's runtime/ came or went: watched as [`FileWatch::desired`] would have it
    /// (a real directory, never a link), without looking at every other home. Watching a
    /// watched directory again changes nothing. One that went is not unwatched here:
    /// notify lets go of a watched directory removed or moved away as it sees it go, and
    /// its `unwatch` compares every watched path (50 ms at 100,000 profiles).
    fn follow_runtime(&mut self, runtime: &Path) {
        if is_real_dir(runtime) {
            let _ = self.watcher.watch(runtime, RecursiveMode::NonRecursive);
        }
    }

    /// A profile came or went: it and its runtime/ are watched as [`FileWatch::desired`]
    /// would have them, without listing the other profiles (seconds at 100,000).
    fn follow_profile(&mut self, home: &Path) {
        // Gone: notify lets go of it and its runtime/ (see `follow_runtime`).
        if is_real_dir(home) {
            let _ = self.watcher.watch(home, RecursiveMode::NonRecursive);
            // Looked at once the home is watched: a runtime/ made before is seen here,
            // one made after is an event.
            self.follow_runtime(&home.join(paths::RUNTIME_DIR));
        }
    }

    /// A watched directory removed and recreated between two looks keeps its path but
    /// lost its inotify watch: every touched one is watched again. notify let go of the
    /// removed one as it saw it go (before the events that follow it were sent), so this
    /// watches the new directory; a watch still in place is left as it is.
    fn renew(&mut self, touched: &[PathBuf], scope: &FileWatch) {
        for dir in touched.iter().filter(|p| scope.wants(p)) {
            let _ = self.watcher.watch(dir, RecursiveMode::NonRecursive);
        }
    }
}

/// Rename cookies already counted (one rename can be reported as To and as Both).
#[derive(Default)]
struct Renames(Vec<usize>);

impl Renames {
    /// True the first time this rename's cookie is seen.
    fn first_time(&mut self, cookie: usize) -> bool {
        if self.0.contains(&cookie) {
            return false;
        }
        self.0.push(cookie);
        if self.0.len() > 1024 {
            self.0.remove(0);
        }
        true
    }
}

/// The relevant paths a burst names, at most; more, and it names none (read everything).
const MAX_PATHS: usize = 64;

/// One burst of changes: the relevant paths, and how many times each registry in it was
/// replaced. Both bounded: under churn the same few paths repeat.
#[derive(Default)]
struct Burst {
    paths: Vec<PathBuf>,
    /// More relevant paths came than `paths` keeps: which registries changed is not known,
    /// and the burst is reported as everything (no paths), as an overflow of the feed is.
    too_many_paths: bool,
    /// A directory other than a home's runtime/ came or went in it (or the feed failed):
    /// the watches are made again from the scope once it is over.
    rearm_after: bool,
    replaced: Vec<(PathBuf, Vec<Option<FileVersion>>)>,
}

impl Burst {
    /// Ok: keep the relevant paths. Err (overflow, a vanished watch): re-read everything.
    /// Either way, the directories that came or went: the watches must follow at once.
    fn take(&mut self, res: notify::Result<notify::Event>, renames: &mut Renames) -> Dirs {
        let Ok(ev) = res else { return Dirs::Other };
        let dirs: Vec<&PathBuf> =
            ev.paths.iter().filter(|p| relevant(&ev.kind, p) && is_directory_event(&ev.kind, p)).collect();
        for p in ev.paths.iter().filter(|p| relevant(&ev.kind, p)) {
            if !self.paths.contains(p) {
                if self.paths.len() < MAX_PATHS {
                    self.paths.push(p.clone());
                } else {
                    self.too_many_paths = true;
                }
            }
            // A rename counts once, by its tracker (the rename's cookie); a creation
            // has none and counts as it comes.
            let new_version =
                replacement(&ev.kind, p) && ev.attrs.tracker().is_none_or(|cookie| renames.first_time(cookie));
            if new_version {
                // Looked at as the event comes: the version this rename made (or a later
                // one, if others followed at once).
                let version = FileVersion::of(p);
                if let Some((_, versions)) = self.replaced.iter_mut().find(|(q, _)| q == p) {
                    if versions.len() < 100_000 {
                        versions.push(version);
                    }
                } else if self.replaced.len() < 64 {
                    self.replaced.push((p.clone(), vec![version]));
                }
            }
        }
        if dirs.is_empty() {
            Dirs::Unchanged
        } else if dirs.iter().all(|p| paths::is_runtime_dir(p) || is_profile_shaped(p)) {
            Dirs::Homes(dirs.into_iter().cloned().collect())
        } else {
            Dirs::Other
        }
    }

    /// Make the watches follow directories that came or went: a profile of the root, or
    /// a home's runtime/, is watched or let go on its own; anything else looks at the
    /// whole scope again, now and once the burst is over.
    fn follow(&mut self, armed: &mut Armed, dirs: &Dirs, scope: &FileWatch) {
        match dirs {
            Dirs::Unchanged => {}
            Dirs::Homes(dirs) if dirs.iter().all(|p| scope.in_profiles(p) || is_runtime_of_home(p, scope)) => {
                // What went first: a profile renamed keeps its inode's watch, which letting
                // go of its old path after watching the new one would remove.
                let (present, gone): (Vec<&PathBuf>, Vec<&PathBuf>) = dirs.iter().partition(|p| is_real_dir(p));
                for p in gone.into_iter().chain(present) {
                    if !scope.in_profiles(p) {
                        armed.follow_runtime(p);
                    } else if paths::is_profile_of(&scope.root, p) {
                        armed.follow_profile(p);
                    }
                    // Else a hidden directory in profiles/: no profile, nothing to watch.
                }
            }
            _ => {
                self.rearm_after = true;
                armed.rearm(scope);
            }
        }
    }
}

/// `<something>/profiles/<name>`: a profile, if its root is the scope's.
fn is_profile_shaped(p: &Path) -> bool {
    paths::root_of(p) != p
}

/// A `runtime/` directory of a home in scope.
fn is_runtime_of_home(p: &Path, scope: &FileWatch) -> bool {
    paths::is_runtime_dir(p) && p.parent().is_some_and(|h| scope.is_home(h))
}

/// The directories an event made or removed, as the watches see them.
enum Dirs {
    Unchanged,
    /// Profiles (`profiles/<name>`) and `runtime/` directories only.
    Homes(Vec<PathBuf>),
    /// Others (a fixed home, `profiles/` itself), or the feed failed.
    Other,
}

/// Gather until quiet for `debounce`, but never longer than MAX_GATHER: a registry
/// rewritten faster than the debounce must still show. False when the watcher is gone.
fn gather(
    fs_rx: &Receiver<notify::Result<notify::Event>>,
    debounce: Duration,
    burst: &mut Burst,
    renames: &mut Renames,
    armed: &mut Armed,
    scope: &FileWatch,
) -> bool {
    let started = std::time::Instant::now();
    loop {
        let left = MAX_GATHER.saturating_sub(started.elapsed());
        if left.is_zero() {
            return true;
        }
        match fs_rx.recv_timeout(debounce.min(left)) {
            Ok(res) => {
                let dirs = burst.take(res, renames);
                burst.follow(armed, &dirs, scope);
            }
            Err(RecvTimeoutError::Timeout) => return true,
            Err(RecvTimeoutError::Disconnected) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_dirs_are_watched_from_their_nearest_parent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("home");
        let scope = FileWatch { root: root.clone(), discover: true, homes: vec![] };
        assert_eq!(scope.desired().into_iter().collect::<Vec<_>>(), vec![dir.path().to_path_buf()]);
        std::fs::create_dir_all(root.join("runtime")).expect("mkdir");
        let d: Vec<PathBuf> = scope.desired().into_iter().collect();
        assert_eq!(d, vec![root.clone(), root.join("runtime")]);
        std::fs::create_dir_all(root.join("profiles/work")).expect("mkdir");
        let d: Vec<PathBuf> = scope.desired().into_iter().collect();
        assert_eq!(d, vec![root.clone(), root.join("profiles"), root.join("profiles/work"), root.join("runtime")]);
    }

    /// Reads are not in the feed, changes are: a registry read over and over (by the
    /// console, by every owner) wakes nobody, a registry replaced is one event away.
    #[test]
    fn the_feed_carries_changes_not_reads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let registry = dir.path().join(REGISTRY_FILE);
        std::fs::write(&registry, "{}").expect("write");
        let (tx, rx) = channel();
        let mut watcher = feed(tx).expect("watcher");
        watcher.watch(dir.path(), RecursiveMode::NonRecursive).expect("watch");
        for _ in 0..20 {
            std::fs::read(&registry).expect("read");
            std::fs::read_dir(dir.path()).expect("list").for_each(drop);
        }
        match rx.recv_timeout(Duration::from_millis(500)) {
            Err(RecvTimeoutError::Timeout) => {}
            other => panic!("reads made an event: {other:?}"),
        }
        let temp = dir.path().join(format!("{}x", paths::TEMP_PREFIX));
        std::fs::write(&temp, "{\"entries\": []}").expect("write");
        std::fs::rename(&temp, &registry).expect("rename");
        // The temp file's creation comes first; the rename over the registry follows.
        let replaced = std::iter::from_fn(|| rx.recv_timeout(Duration::from_secs(10)).ok())
            .take(10)
            .flatten()
            .any(|e| e.paths.iter().any(|p| replacement(&e.kind, p)));
        assert!(replaced, "the registry's replacement was not seen");
    }

    /// A profile made or removed is followed on its own (no look at every profile, which
    /// cost seconds at 100,000), and the watches end as the full look would have them.
    #[test]
    fn a_profile_that_comes_or_goes_is_followed_on_its_own() {
        use notify::event::{CreateKind, RemoveKind};
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("home");
        let profiles = root.join("profiles");
        std::fs::create_dir_all(profiles.join("old")).expect("mkdir");
        let scope = FileWatch { root: root.clone(), discover: true, homes: vec![] };
        let (tx, _rx) = channel();
        let mut armed = Armed { watcher: feed(tx).expect("a watcher") };
        armed.rearm(&scope);
        let mut renames = Renames::default();
        let mut event = |kind: EventKind, path: PathBuf, armed: &mut Armed| {
            let mut burst = Burst::default();
            let dirs = burst.take(Ok(notify::Event::new(kind).add_path(path)), &mut renames);
            burst.follow(armed, &dirs, &scope);
            assert!(!burst.rearm_after, "looked at every profile again");
        };
        // Made with its runtime/ already in it (moved in, or made before its watch was).
        std::fs::create_dir_all(profiles.join("new/runtime")).expect("mkdir");
        event(EventKind::Create(CreateKind::Folder), profiles.join("new"), &mut armed);
        assert!(armed.watched().contains(&profiles.join("new/runtime")));
        // A link is no profile; a hidden directory neither.
        std::os::unix::fs::symlink(dir.path(), profiles.join("link")).expect("symlink");
        event(EventKind::Create(CreateKind::Any), profiles.join("link"), &mut armed);
        std::fs::create_dir(profiles.join(".hidden")).expect("mkdir");
        event(EventKind::Create(CreateKind::Folder), profiles.join(".hidden"), &mut armed);
        assert_eq!(armed.watched(), scope.desired());
        std::fs::remove_dir_all(profiles.join("old")).expect("rm");
        event(EventKind::Remove(RemoveKind::Folder), profiles.join("old"), &mut armed);
        // notify lets go of it as it reads the removal from the kernel, on its own thread.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while armed.watched().contains(&profiles.join("old")) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!armed.watched().contains(&profiles.join("old")));
        assert_eq!(armed.watched(), scope.desired());
    }

    /// A touched directory is watched anew exactly when the scope lists it (the watcher
    /// keeps no list of its own to look it up in).
    #[test]
    fn a_directory_is_wanted_when_the_scope_lists_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("home");
        let profiles = root.join("profiles");
        for d in ["runtime", "profiles/a/runtime", "profiles/b", "profiles/.hidden/runtime", "elsewhere"] {
            std::fs::create_dir_all(root.join(d)).expect("mkdir");
        }
        std::os::unix::fs::symlink(root.join("elsewhere"), profiles.join("link")).expect("symlink");
        let scope = FileWatch { root: root.clone(), discover: true, homes: vec![] };
        let desired = scope.desired();
        assert_eq!(desired.len(), 6, "{desired:?}");
        for d in &desired {
            assert!(scope.wants(d), "{}", d.display());
        }
        for d in ["elsewhere", "profiles/.hidden", "profiles/.hidden/runtime", "profiles/link", "profiles/b/runtime"] {
            assert!(!scope.wants(&root.join(d)), "{d}");
        }
        assert!(!scope.wants(dir.path()), "an ancestor is the full look's to arm");
        let fixed = FileWatch { root: root.clone(), discover: false, homes: vec![profiles.join("a")] };
        assert!(fixed.wants(&profiles.join("a/runtime")) && !fixed.wants(&profiles.join("b")));
    }

    #[test]
    fn reads_lock_and_temp_files_are_not_relevant() {
        use notify::event::{AccessKind, CreateKind, DataChange, ModifyKind, RemoveKind, RenameMode};
        let reg = Path::new("/h/runtime/active_sessions.json");
        assert!(relevant(&EventKind::Modify(ModifyKind::Name(RenameMode::To)), reg));
        assert!(relevant(&EventKind::Create(CreateKind::File), reg));
        assert!(!relevant(&EventKind::Access(AccessKind::Any), reg));
        let lock = Path::new("/h/runtime/active_sessions.lock");
        assert!(relevant(&EventKind::Create(CreateKind::File), lock), "a new lock file is noted (its inode)");
        assert!(!is_directory_event(&EventKind::Create(CreateKind::File), lock));
        assert!(relevant(&EventKind::Remove(RemoveKind::File), lock), "a lock file gone is no lock to report");
        assert!(relevant(&EventKind::Modify(ModifyKind::Name(RenameMode::To)), lock), "another file in its place");
        assert!(!relevant(&EventKind::Modify(ModifyKind::Data(DataChange::Any)), lock));
        assert!(!relevant(&EventKind::Access(AccessKind::Any), lock));
        assert!(!relevant(
            &EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            Path::new("/h/runtime/.active_sessions_abc.tmp")
        ));
        assert!(relevant(&EventKind::Create(CreateKind::Folder), Path::new("/h/runtime")));
    }
}
