//! Owners already proven to be live processes, held by pidfd for the life of this
//! process. A pidfd names one process, never a later one with the same pid, and
//! polls readable once it has exited (zombie included), so re-checking a known
//! owner is one poll(2) instead of reading `/proc/<pid>/stat` again.

use std::collections::HashMap;
use std::os::fd::OwnedFd;

use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, PidfdFlags};
use std::sync::{Mutex, OnceLock};

/// At most this many pids are held (each costs a file descriptor); beyond it,
/// owners are probed through /proc every time, as without the cache.
pub(crate) const MAX_TRACKED: usize = 128;

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
pub(crate) fn open(pid: u64) -> std::io::Result<Option<OwnedFd>> {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else { return Ok(None) };
    match rustix::process::pidfd_open(pid, PidfdFlags::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::SRCH) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// True when the process behind `pidfd` has exited (or cannot be polled).
pub(crate) fn exited(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    let zero = rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 };
    rustix::event::poll(&mut fds, Some(&zero)) != Ok(0)
}

/// The start ticks of `pid` if it is a tracked process that is still running.
/// A tracked process found exited is forgotten (the caller probes /proc again).
pub(crate) fn running_start_ticks(pid: u64) -> Option<u64> {
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
pub(crate) fn remember(pid: u64, pidfd: OwnedFd, start_ticks: u64) {
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
#[cfg(test)]
pub(crate) fn tracked_count() -> usize {
    table().lock().map(|t| t.len()).unwrap_or(0)
}
