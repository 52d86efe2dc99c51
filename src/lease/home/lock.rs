//! The registry lock (spec §2): an exclusive flock on `active_sessions.lock`,
//! waited for with a bound; on timeout, the holder's pid read from `/proc/locks`.

use std::fs::{File, TryLockError};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::lease::error::Error;
use crate::lease::home::safe_file::{self, Spot};

/// Default bound on waiting for the registry lock.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// Held while a read-modify-write runs; dropping it closes the file, which releases the flock.
#[derive(Debug)]
pub struct RegistryLock {
    _file: File,
    /// When it was taken: how long it is held is kept for [`last_hold`].
    taken: Instant,
}

impl Drop for RegistryLock {
    fn drop(&mut self) {
        LAST_HOLD.with(|h| h.set(Some(self.taken.elapsed())));
    }
}

thread_local! {
    static LAST_HOLD: std::cell::Cell<Option<Duration>> = const { std::cell::Cell::new(None) };
}

/// How long this thread last held a registry lock: what every other writer waited at
/// most for it (the benches measure it: the lock is for the read-modify-write alone).
pub fn last_hold() -> Option<Duration> {
    LAST_HOLD.with(std::cell::Cell::get)
}

/// Take the exclusive lock, creating `runtime/` and the lock file as Hermes does (the
/// home itself must exist: see [`lock_making_home`]). Reached through [`safe_file`]: a symlink, FIFO
/// or device planted as the lock file or as `runtime/` is refused, never followed.
pub fn lock(lock_path: &Path, timeout: Duration) -> Result<RegistryLock, Error> {
    let file = open_lock_file(lock_path)?;
    lock_file(file, lock_path, timeout)
}

/// Take the lock as an acquire does: the home itself, and any missing directory above
/// it, is created first, as Hermes' acquire creates it (a fresh `HERMES_HOME`: a new
/// container or service account). Only the fence does this: every other command refuses
/// a home that is not there, so a mistyped `--home` never creates anything.
pub fn lock_making_home(lock_path: &Path, timeout: Duration) -> Result<RegistryLock, Error> {
    let home = Spot::in_subdir(lock_path).home;
    safe_file::Dir::create_home(&home).map_err(|e| {
        if safe_file::is_refusal(&e) {
            Error::Refused(format!("cannot create the Hermes home: {e}"))
        } else {
            Error::io("create the Hermes home", &home, e)
        }
    })?;
    lock(lock_path, timeout)
}

/// Open (creating) the lock file through the one door.
pub fn open_lock_file(lock_path: &Path) -> Result<File, Error> {
    let spot = Spot::in_subdir(lock_path);
    let opened = spot
        .dir_and_name()
        .and_then(|(dir_spot, name)| safe_file::Dir::create(&dir_spot).and_then(|dir| dir.open_append(name, 0o666)));
    opened.map_err(|e| {
        if safe_file::is_refusal(&e) {
            Error::Refused(format!("{e}: not usable as the lock (remove it; leasectl recreates it)"))
        } else {
            Error::io("open the lock file", lock_path, e)
        }
    })
}

/// Wait for the flock on an opened lock file, with the bound.
fn lock_file(file: File, lock_path: &Path, timeout: Duration) -> Result<RegistryLock, Error> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(RegistryLock { _file: file, taken: Instant::now() }),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => return Err(Error::io("lock", lock_path, e)),
        }
        let waited = started.elapsed();
        if waited >= timeout {
            let holder_pid = lock_holder(lock_path);
            // Named as lslocks names it: a pid alone says little to an operator.
            let holder_command = holder_pid
                .and_then(|pid| crate::lease::owners::owner::command_name(u64::from(pid)))
                .map(|c| crate::lease::words::human::escape(&c).into_owned());
            return Err(Error::LockTimeout { lock_path: lock_path.to_path_buf(), waited, holder_pid, holder_command });
        }
        std::thread::sleep(pause.min(timeout.saturating_sub(waited)));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// The pid holding a flock on `lock_path` right now, from `/proc/locks`, if any.
pub fn lock_holder(lock_path: &Path) -> Option<u32> {
    let meta = std::fs::metadata(lock_path).ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    holder_in(&locks, meta.dev(), meta.ino())
}

/// A file as the kernel names it in `/proc/locks`: its device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    /// The file at `path` (a symlink followed, as an open would), if it is there.
    pub fn of(path: &Path) -> Option<FileId> {
        std::fs::metadata(path).ok().map(|m| FileId { dev: m.dev(), ino: m.ino() })
    }
}

/// Every granted flock on the machine, with its holder's pid, from one read of
/// `/proc/locks`: a caller watching many lock files matches these against the files it
/// knows instead of statting each one.
pub fn granted_flocks() -> Vec<(FileId, u32)> {
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    locks.lines().filter_map(granted_flock).collect()
}

/// The files a flock is held on, from one read of `/proc/locks`: whoever asks about many
/// lock files (metrics, for each profile) takes only those locks, the others being free.
#[derive(Debug, Default)]
pub struct HeldFlocks(std::collections::HashSet<FileId>);

impl HeldFlocks {
    /// As the kernel lists them now.
    pub fn now() -> HeldFlocks {
        HeldFlocks(granted_flocks().into_iter().map(|(id, _)| id).collect())
    }

    pub fn on(&self, file: FileId) -> bool {
        self.0.contains(&file)
    }
}

/// A granted FLOCK line: "1: FLOCK  ADVISORY  WRITE 2911 fd:00:1705934 0 EOF".
/// Waiters (`->`) and POSIX locks are not.
fn granted_flock(line: &str) -> Option<(FileId, u32)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 6 || fields[1] != "FLOCK" {
        return None;
    }
    let mut id = fields[5].split(':');
    let (major, minor, inode) = (id.next()?, id.next()?, id.next()?);
    let major = u32::from_str_radix(major, 16).ok()?;
    let minor = u32::from_str_radix(minor, 16).ok()?;
    let id = FileId { dev: libc::makedev(major, minor), ino: inode.parse().ok()? };
    Some((id, fields[4].parse().ok()?))
}

/// Find a granted FLOCK on (dev, ino) in `/proc/locks` text.
fn holder_in(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let wanted = FileId { dev, ino };
    locks.lines().filter_map(granted_flock).find(|(id, _)| *id == wanted).map(|(_, pid)| pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_locks_lines() {
        let dev = libc::makedev(0xfd, 0x01);
        let text = "1: POSIX  ADVISORY  WRITE 77 fd:01:99 0 EOF\n\
                    2: FLOCK  ADVISORY  WRITE 4242 fd:01:99 0 EOF\n\
                    2: -> FLOCK  ADVISORY  WRITE 555 fd:01:99 0 EOF\n";
        assert_eq!(holder_in(text, dev, 99), Some(4242));
        assert_eq!(holder_in(text, dev, 98), None);
        let granted: Vec<(FileId, u32)> = text.lines().filter_map(granted_flock).collect();
        assert_eq!(granted, vec![(FileId { dev, ino: 99 }, 4242)], "the POSIX lock and the waiter are not");
    }

    #[test]
    fn timeout_names_the_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runtime").join("active_sessions.lock");
        let held = lock(&path, Duration::from_secs(1)).expect("first lock");
        // A second open file description conflicts with the first, even in one process.
        let err = lock(&path, Duration::from_millis(50)).expect_err("must time out");
        match err {
            Error::LockTimeout { holder_pid, .. } => {
                assert_eq!(holder_pid, Some(std::process::id()))
            }
            other => panic!("unexpected {other}"),
        }
        drop(held);
        assert!(lock(&path, Duration::from_millis(50)).is_ok(), "free after drop");
    }
}
