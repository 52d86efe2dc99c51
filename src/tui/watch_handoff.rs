//! A console that follows 100,000 profiles holds an inotify watch on each, and the
//! kernel tears the watches down when the last descriptor on them closes: about 1 µs a
//! watch, which a process's exit waits for (100 ms and more at 100,000). At quit the
//! console hands its inotify descriptors to a child that holds nothing else and ends
//! once the console has ended: the shell has its prompt back, and the teardown runs
//! after it, in the child (the same work, off the operator's wait).

use std::os::fd::{AsRawFd, RawFd};

/// Below this many registries the teardown takes under 10 ms, about what the fork costs.
pub(super) const FROM_REGISTRIES: usize = 10_000;

/// This process's inotify descriptors, in order.
fn inotify_fds() -> std::io::Result<Vec<RawFd>> {
    let mut fds = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let entry = entry?;
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse::<RawFd>().ok()) else { continue };
        // The listing's own descriptor is gone by now: its link cannot be read.
        if std::fs::read_link(entry.path()).is_ok_and(|to| to.as_os_str() == "anon_inode:inotify") {
            fds.push(fd);
        }
    }
    fds.sort_unstable();
    Ok(fds)
}

/// The ranges of descriptors, `[first, last]`, that are none of `keep` (sorted).
fn ranges_without(keep: &[RawFd]) -> Vec<(u32, u32)> {
    let mut ranges = Vec::with_capacity(keep.len() + 1);
    let mut first = 0u32;
    for &fd in keep {
        let Ok(fd) = u32::try_from(fd) else { continue };
        if fd > first {
            ranges.push((first, fd - 1));
        }
        first = fd.saturating_add(1);
    }
    ranges.push((first, u32::MAX));
    ranges
}

/// Hand this process's inotify descriptors to a child that closes them once this process
/// has ended. Returns false when there were none to hand. Call it last, with the terminal
/// restored: the child closes every other descriptor (the terminal's among them) at once.
#[allow(unsafe_code)] // fork(2) and what the child does after it have no safe wrappers; see SAFETY
pub(super) fn hand_off() -> std::io::Result<bool> {
    let mut keep = inotify_fds()?;
    if keep.is_empty() {
        return Ok(false);
    }
    // The child waits on this: readable once every thread of this process has ended, and
    // so once this process's descriptors are closed.
    let me = rustix::process::pidfd_open(rustix::process::getpid(), rustix::process::PidfdFlags::empty())?;
    keep.push(me.as_raw_fd());
    keep.sort_unstable();
    // Made before the fork: the child may not allocate (another thread may hold the
    // allocator's lock, and a fork copies only this thread).
    let ranges = ranges_without(&keep);
    let pidfd = me.as_raw_fd();
    // SAFETY: the child runs only async-signal-safe calls (close_range, setsid, signal,
    // sigemptyset, sigprocmask, poll, _exit) on data made before the fork, and never returns from this function.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        0 => unsafe {
            for &(first, last) in &ranges {
                libc::close_range(first, last, 0);
            }
            // Out of the terminal's session: a key pressed at the prompt signals nothing here.
            libc::setsid();
            // The console's stop handlers wrote to its signal pipe, closed here: a stop
            // signal ends this child as it would any process, and none is held blocked.
            for stop in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
                libc::signal(stop, libc::SIG_DFL);
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            let mut ended = libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 };
            while libc::poll(&mut ended, 1, -1) < 0 && *libc::__errno_location() == libc::EINTR {}
            libc::_exit(0)
        },
        _ => Ok(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ranges_close_everything_but_what_is_kept() {
        assert_eq!(ranges_without(&[]), vec![(0, u32::MAX)]);
        assert_eq!(ranges_without(&[0]), vec![(1, u32::MAX)]);
        assert_eq!(ranges_without(&[3, 4, 9]), vec![(0, 2), (5, 8), (10, u32::MAX)]);
    }
}
