//! Owners already proven to be live processes, held by pidfd for the life of this
//! process. A pidfd names one process, never a later one with the same pid, and
//! polls readable once it has exited (zombie included), so re-checking a known
//! owner is one poll(2) instead of reading `/proc/<pid>/stat` again.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Mutex, OnceLock};

/// At most this many pids are held (each costs a file descriptor); beyond it,
/// owners are probed through /proc every time, as without the cache.
pub const MAX_TRACKED: usize = 128;

/// A process known to be running, with the start time (clock ticks after boot)
/// read from its /proc stat while its pidfd showed it running.
struct Tracked {
    pidfd: OwnedFd,
    start_ticks: u64,
}

fn table() -> &'static Mutex<HashMap<u64, Tracked>> {
    static TABLE: OnceLock<Mutex<HashMap<u64, Tracked>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// A pidfd for `pid`: Ok(None) when `pid` is not a thread-group leader (a thread
/// id, EINVAL) or no longer exists (ESRCH); Err for anything else (old kernel).
pub fn open(pid: u64) -> std::io::Result<Option<OwnedFd>> {
    // SAFETY: pidfd_open takes plain integers; a returned fd is owned by us alone.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd >= 0 {
        // SAFETY: fd was just returned by the kernel and nothing else owns it.
        return Ok(Some(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) }));
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::ESRCH) => Ok(None),
        _ => Err(e),
    }
}

/// True when the process behind `pidfd` has exited (or cannot be polled).
pub fn exited(pidfd: &OwnedFd) -> bool {
    let mut fds = libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd, zero timeout.
    let rc = unsafe { libc::poll(&mut fds, 1, 0) };
    rc != 0
}

/// The start ticks of `pid` if it is a tracked process that is still running.
/// A tracked process found exited is forgotten (the caller probes /proc again).
pub fn running_start_ticks(pid: u64) -> Option<u64> {
    let mut table = table().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let tracked = table.get(&pid)?;
    if exited(&tracked.pidfd) {
        table.remove(&pid);
        return None;
    }
    Some(tracked.start_ticks)
}

/// Remember a process the caller found running: `pidfd` was opened before its
/// stat was read, and polled running after, so the ticks are that process's.
pub fn remember(pid: u64, pidfd: OwnedFd, start_ticks: u64) {
    let mut table = table().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if table.len() >= MAX_TRACKED && !table.contains_key(&pid) {
        table.retain(|_, t| !exited(&t.pidfd));
        if table.len() >= MAX_TRACKED {
            return;
        }
    }
    table.insert(pid, Tracked { pidfd, start_ticks });
}

/// How many processes are held (for tests).
pub fn tracked_count() -> usize {
    table().lock().map(|t| t.len()).unwrap_or(0)
}
