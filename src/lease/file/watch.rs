//! The change feed of registry files: a notify watcher on every home's `runtime/`
//! directory (and `profiles/` for new profiles), re-armed as directories come and go.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};

use crate::lease::backend::MAX_GATHER;
use crate::lease::paths::{self, LOCK_FILE, REGISTRY_FILE};

/// What the watcher looks after: fixed homes, or a root whose profiles come and go.
#[derive(Debug, Clone)]
pub struct FileWatch {
    pub root: PathBuf,
    /// Discover `<root>/profiles/*` as they appear.
    pub discover: bool,
    pub homes: Vec<PathBuf>,
}

impl FileWatch {
    fn homes(&self) -> Vec<PathBuf> {
        if self.discover {
            paths::all_registries(&self.root).into_iter().map(|r| r.home).collect()
        } else {
            self.homes.clone()
        }
    }

    /// The directories to watch now: each runtime dir, home and the profiles dir, or
    /// the nearest existing ancestor of each one that does not exist yet.
    pub fn desired(&self) -> BTreeSet<PathBuf> {
        let mut out = BTreeSet::new();
        let mut wanted: Vec<PathBuf> = Vec::new();
        for h in self.homes() {
            wanted.push(h.join("runtime"));
            wanted.push(h);
        }
        if self.discover {
            wanted.push(self.root.join("profiles"));
        }
        for w in wanted {
            if let Some(existing) = nearest_existing(&w) {
                out.insert(existing);
            }
        }
        out
    }
}

fn nearest_existing(p: &Path) -> Option<PathBuf> {
    p.ancestors().find(|a| a.is_dir()).map(Path::to_path_buf)
}

/// A registry, config or directory event; temp files, the lock file and reads are not.
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
        Some(LOCK_FILE) => false,
        Some(name) if name.starts_with(paths::TEMP_PREFIX) => false,
        // A directory appearing or going (runtime/, a home, a profile).
        _ => !matches!(kind, EventKind::Modify(notify::event::ModifyKind::Data(_))),
    }
}

/// A directory coming or going (runtime/, a home, a profile), not a file in one.
fn is_directory_event(kind: &EventKind, path: &Path) -> bool {
    matches!(kind, EventKind::Create(_) | EventKind::Remove(_) | EventKind::Modify(notify::event::ModifyKind::Name(_)))
        && !matches!(path.file_name().and_then(|n| n.to_str()), Some(REGISTRY_FILE) | Some("config.yaml"))
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
pub fn spawn(
    scope: FileWatch,
    debounce: Duration,
    report: impl Fn(Vec<PathBuf>, Vec<(PathBuf, usize)>) -> bool + Send + 'static,
) -> notify::Result<()> {
    let (fs_tx, fs_rx): (Sender<notify::Result<notify::Event>>, Receiver<notify::Result<notify::Event>>) = channel();
    let mut watcher = notify::recommended_watcher(fs_tx)?;
    std::thread::spawn(move || {
        let mut watched: BTreeSet<PathBuf> = BTreeSet::new();
        let rearm = |watcher: &mut notify::RecommendedWatcher, watched: &mut BTreeSet<PathBuf>| -> bool {
            let mut changed = false;
            // Loop until stable: a directory may appear while we arm its parent.
            for _ in 0..8 {
                let desired = scope.desired();
                if desired == *watched {
                    break;
                }
                for gone in watched.difference(&desired) {
                    let _ = watcher.unwatch(gone);
                }
                for new in desired.difference(watched) {
                    let _ = watcher.watch(new, RecursiveMode::NonRecursive);
                }
                *watched = desired;
                changed = true;
            }
            changed
        };
        rearm(&mut watcher, &mut watched);
        // Rename cookies already counted (a rename may be reported as To and as Both).
        let mut trackers: Vec<usize> = Vec::new();
        while let Ok(first) = fs_rx.recv() {
            let mut paths = Vec::new();
            let mut replaced: Vec<(PathBuf, usize)> = Vec::new();
            // Ok: keep the relevant paths. Err (overflow, a vanished watch): re-read everything.
            // Either way, true when a directory came or went: the watches must follow at once.
            let mut take = |res: notify::Result<notify::Event>,
                            paths: &mut Vec<PathBuf>,
                            replaced: &mut Vec<(PathBuf, usize)>| match res {
                Ok(ev) => {
                    let dir_event = ev.paths.iter().any(|p| relevant(&ev.kind, p) && is_directory_event(&ev.kind, p));
                    for p in ev.paths.iter().filter(|p| relevant(&ev.kind, p)) {
                        // Bounded: under churn the same few paths repeat.
                        if paths.len() < 64 && !paths.contains(p) {
                            paths.push(p.clone());
                        }
                        // One rename can come as To and as Both: its tracker (the
                        // rename's cookie) counts it once.
                        let tracker = ev.attrs.tracker();
                        let counted = replacement(&ev.kind, p)
                            && tracker.is_some_and(|t| {
                                let again = trackers.contains(&t);
                                if !again {
                                    trackers.push(t);
                                    if trackers.len() > 1024 {
                                        trackers.remove(0);
                                    }
                                }
                                again
                            });
                        if replacement(&ev.kind, p) && !counted {
                            if let Some((_, n)) = replaced.iter_mut().find(|(q, _)| q == p) {
                                *n += 1;
                            } else if replaced.len() < 64 {
                                replaced.push((p.clone(), 1));
                            }
                        }
                    }
                    dir_event
                }
                Err(_) => true,
            };
            let failed = take(first, &mut paths, &mut replaced);
            // A directory that appeared (runtime/ at a home's first acquire) is watched
            // before gathering: every version written into it while a burst is gathered
            // would otherwise go unseen, uncounted.
            if failed {
                rearm(&mut watcher, &mut watched);
            }
            if paths.is_empty() && !failed {
                // Nothing changed: a read (the console's own included), the lock file, a
                // temp file. No I/O here: looking at the directories (re-arming) opens
                // them, and that open is an event too (notify's inotify mask includes
                // IN_OPEN), which once made a loop that kept a core busy. Directories
                // that come or go are Create/Remove/rename events, relevant ones.
                continue;
            }
            // Gather until quiet for `debounce`, but never longer than MAX_GATHER: a
            // registry rewritten faster than the debounce must still show.
            let started = std::time::Instant::now();
            loop {
                let left = MAX_GATHER.saturating_sub(started.elapsed());
                if left.is_zero() {
                    break;
                }
                match fs_rx.recv_timeout(debounce.min(left)) {
                    Ok(res) => {
                        if take(res, &mut paths, &mut replaced) {
                            rearm(&mut watcher, &mut watched);
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
            // A watched directory that was removed and recreated between two looks
            // keeps its path but lost its inotify watch: watch every touched one anew.
            for dir in paths.iter().filter(|p| watched.contains(*p)) {
                let _ = watcher.unwatch(dir);
                let _ = watcher.watch(dir, RecursiveMode::NonRecursive);
            }
            rearm(&mut watcher, &mut watched);
            if !report(paths, replaced) {
                break;
            }
        }
    });
    Ok(())
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

    #[test]
    fn reads_lock_and_temp_files_are_not_relevant() {
        use notify::event::{AccessKind, CreateKind, DataChange, ModifyKind, RenameMode};
        let reg = Path::new("/h/runtime/active_sessions.json");
        assert!(relevant(&EventKind::Modify(ModifyKind::Name(RenameMode::To)), reg));
        assert!(relevant(&EventKind::Create(CreateKind::File), reg));
        assert!(!relevant(&EventKind::Access(AccessKind::Any), reg));
        assert!(!relevant(&EventKind::Create(CreateKind::File), Path::new("/h/runtime/active_sessions.lock")));
        assert!(!relevant(
            &EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            Path::new("/h/runtime/.active_sessions_abc.tmp")
        ));
        assert!(relevant(&EventKind::Create(CreateKind::Folder), Path::new("/h/runtime")));
    }
}
