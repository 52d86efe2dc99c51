//! The registry lock (spec §2): an exclusive flock on `active_sessions.lock`,
//! waited for with a bound; on timeout, the holder's pid read from `/proc/locks`.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::error::Error;

/// Held while a read-modify-write runs; dropping it closes the file, which releases the flock.
#[derive(Debug)]
pub struct RegistryLock {
    _file: File,
}

/// Take the exclusive lock, creating `runtime/` and the lock file as Hermes does.
pub fn lock(lock_path: &Path, timeout: Duration) -> Result<RegistryLock, Error> {
    if let Some(dir) = lock_path.parent() {
        super::ownership::create_dir_all(dir).map_err(|e| Error::io("create the runtime directory", dir, e))?;
    }
    // O_NOFOLLOW: a symlink planted as the lock file must not make us create or
    // lock a file outside runtime/.
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(lock_path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => Error::Refused(format!(
                "{} is a symlink: refusing to lock through it (remove it; leasectl recreates it)",
                lock_path.display()
            )),
            // O_NONBLOCK on a FIFO with no reader.
            Some(libc::ENXIO) => Error::Refused(format!(
                "{} is not a regular file: refusing to use it as the lock (remove it; leasectl recreates it)",
                lock_path.display()
            )),
            _ => Error::io("open the lock file", lock_path, e),
        })?;
    // A FIFO or device planted as the lock file is not a lock: refuse it.
    match file.metadata() {
        Ok(m) if m.is_file() => {
            // Root's lock file in a user's runtime/ must not lock the user out.
            use std::os::unix::fs::MetadataExt;
            if let Some(dir) = lock_path.parent()
                && let Ok(owner) = super::ownership::owner_of(dir)
                && (m.uid(), m.gid()) != owner
                && m.uid() == 0
            {
                super::ownership::give(&file, owner).map_err(|e| Error::io("give the lock file to", dir, e))?;
            }
        }
        Ok(_) => {
            return Err(Error::Refused(format!(
                "{} is not a regular file: refusing to use it as the lock (remove it; leasectl recreates it)",
                lock_path.display()
            )));
        }
        Err(e) => return Err(Error::io("inspect the lock file", lock_path, e)),
    }
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(RegistryLock { _file: file }),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => return Err(Error::io("lock", lock_path, e)),
        }
        let waited = started.elapsed();
        if waited >= timeout {
            let holder_pid = lock_holder(lock_path);
            // Named as lslocks names it: a pid alone says little to an operator.
            let holder_command = holder_pid
                .and_then(|pid| super::owner::command_name(u64::from(pid)))
                .map(|c| super::human::escape(&c).into_owned());
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

/// The flock holder of each lock file, reading `/proc/locks` once for all of them.
pub fn lock_holders(lock_paths: &[PathBuf]) -> Vec<Option<u32>> {
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    lock_paths.iter().map(|p| std::fs::metadata(p).ok().and_then(|m| holder_in(&locks, m.dev(), m.ino()))).collect()
}

/// Find a granted FLOCK on (dev, ino) in `/proc/locks` text. Waiters (`->`) are skipped.
fn holder_in(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let (major, minor) = (libc::major(dev) as u64, libc::minor(dev) as u64);
    for line in locks.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 2911 fd:00:1705934 0 EOF"
        if fields.len() < 6 || fields[1] != "FLOCK" {
            continue;
        }
        let mut id = fields[5].split(':');
        let (Some(ma), Some(mi), Some(inode)) = (id.next(), id.next(), id.next()) else {
            continue;
        };
        let matches = u64::from_str_radix(ma, 16).ok() == Some(major)
            && u64::from_str_radix(mi, 16).ok() == Some(minor)
            && inode.parse::<u64>().ok() == Some(ino);
        if matches {
            return fields[4].parse().ok();
        }
    }
    None
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
