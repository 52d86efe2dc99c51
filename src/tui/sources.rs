//! The console's event sources, merged on one channel: terminal input, the
//! liveness tick, and a notify watcher on every registry's `runtime/` directory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use ratatui::crossterm::event::{self as term, Event as TermEvent};

use super::event::Event;
use crate::lease::paths::{self, LOCK_FILE, REGISTRY_FILE};

/// Terminal keys and resizes. Blocks in `read`: no polling.
pub fn spawn_input(tx: Sender<Event>) {
    std::thread::spawn(move || {
        while let Ok(ev) = term::read() {
            let sent = match ev {
                TermEvent::Key(k) => tx.send(Event::Key(k)),
                TermEvent::Resize(..) => tx.send(Event::Resize),
                _ => Ok(()),
            };
            if sent.is_err() {
                break;
            }
        }
    });
}

/// SIGTERM and SIGHUP end the console like `q` does (terminal restored, demo cleaned up).
pub fn spawn_signals(tx: Sender<Event>) {
    use signal_hook::consts::{SIGHUP, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGTERM, SIGHUP]) else { return };
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let _ = tx.send(Event::Shutdown);
        }
    });
}

/// The liveness tick: about once a second.
pub fn spawn_tick(tx: Sender<Event>, every: Duration) {
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(every);
            if tx.send(Event::Tick(crate::lease::now())).is_err() {
                break;
            }
        }
    });
}

/// What the watcher looks after: fixed homes, or a root whose profiles come and go.
#[derive(Debug, Clone)]
pub struct WatchScope {
    pub root: PathBuf,
    /// Discover `<root>/profiles/*` as they appear.
    pub discover: bool,
    pub homes: Vec<PathBuf>,
}

impl WatchScope {
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

/// The longest a burst of changes is gathered before a reload.
const MAX_GATHER: Duration = Duration::from_millis(100);

/// Watch with notify; re-arm whenever directories appear or vanish. Events are
/// debounced here: after the first relevant one, gather until `debounce` passes
/// quietly. Idle, this thread blocks in `recv` (notify-debouncer-full wakes every
/// few milliseconds even when nothing happens, which an idle console cannot afford).
pub fn spawn_watcher(scope: WatchScope, tx: Sender<Event>, debounce: Duration) -> notify::Result<()> {
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
        while let Ok(first) = fs_rx.recv() {
            let mut paths = Vec::new();
            // Ok: keep the relevant paths. Err (overflow, a vanished watch): re-read everything.
            let take = |res: notify::Result<notify::Event>, paths: &mut Vec<PathBuf>| match res {
                Ok(ev) => {
                    for p in ev.paths.iter().filter(|p| relevant(&ev.kind, p)) {
                        // Bounded: under churn the same few paths repeat.
                        if paths.len() < 64 && !paths.contains(p) {
                            paths.push(p.clone());
                        }
                    }
                    false
                }
                Err(_) => true,
            };
            let failed = take(first, &mut paths);
            if paths.is_empty() && !failed {
                // Irrelevant (a read, the lock file, a temp file), but a directory may
                // have appeared or gone: re-arm without a reload.
                if rearm(&mut watcher, &mut watched) && tx.send(Event::FsChanged(vec![])).is_err() {
                    break;
                }
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
                        take(res, &mut paths);
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
            if tx.send(Event::FsChanged(paths)).is_err() {
                break;
            }
        }
    });
    Ok(())
}

/// Watch the etcd prefix with etcd's watch API; every burst of changes (gathered like
/// file events) becomes one `RemoteChanged`. A broken watch is re-made after a second,
/// with a `RemoteChanged` each time so the worker's reload shows the outage and the
/// recovery (and catches anything missed while no watch was open).
#[cfg(feature = "etcd")]
pub fn spawn_etcd_watcher(config: crate::lease::etcd::EtcdConfig, tx: Sender<Event>, debounce: Duration) {
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
            let _ = tx.send(Event::RemoteChanged);
            return;
        };
        while rt.block_on(watch_etcd_once(&config, &tx, debounce)) {
            std::thread::sleep(Duration::from_secs(1));
            if tx.send(Event::RemoteChanged).is_err() {
                return;
            }
        }
    });
}

/// One watch stream, until it breaks (true: try again) or the console is gone (false).
#[cfg(feature = "etcd")]
async fn watch_etcd_once(config: &crate::lease::etcd::EtcdConfig, tx: &Sender<Event>, debounce: Duration) -> bool {
    use etcd_client::{Client, WatchOptions};
    let setup = async {
        let mut client = Client::connect(config.endpoints.clone(), Some(config.connect_options())).await?;
        client.watch(config.prefix.clone(), Some(WatchOptions::new().with_prefix())).await
    };
    let mut stream = match tokio::time::timeout(config.timeout, setup).await {
        Ok(Ok(s)) => s,
        _ => return true,
    };
    // The watch is open: anything before it is caught by one reload now.
    if tx.send(Event::RemoteChanged).is_err() {
        return false;
    }
    loop {
        match stream.message().await {
            Ok(Some(resp)) if resp.canceled() => return true,
            Ok(Some(resp)) if resp.events().is_empty() => continue,
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return true,
        }
        // Gather until quiet for `debounce`, never longer than MAX_GATHER.
        let started = tokio::time::Instant::now();
        loop {
            let left = MAX_GATHER.saturating_sub(started.elapsed());
            if left.is_zero() {
                break;
            }
            match tokio::time::timeout(debounce.min(left), stream.message()).await {
                Ok(Ok(Some(_))) => {}
                Ok(_) => {
                    let _ = tx.send(Event::RemoteChanged);
                    return true;
                }
                Err(_) => break,
            }
        }
        if tx.send(Event::RemoteChanged).is_err() {
            return false;
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
        let scope = WatchScope { root: root.clone(), discover: true, homes: vec![] };
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
