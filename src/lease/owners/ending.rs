//! Ending one owner process, and never another: the process is named by pid and start
//! time, held by a pidfd whose start time is checked again, and signalled only through
//! that pidfd. A pid reused by another process, before the pidfd is opened or after, is
//! never signalled: the pidfd names the process it was opened for, and the start time
//! read while it still ran says which process that is.

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, PidfdFlags, Signal};

use super::liveness;
use super::pidfds;

/// Why a process cannot be taken to be ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NotTaken {
    /// It ended already (nothing runs under its pid, or it is a zombie).
    Gone,
    /// Another process runs under its pid now (started at `actual`).
    Other { actual: f64 },
    /// It runs as another user, whom this user may not signal.
    NotPermitted { uid: u32, user: Option<String> },
    /// `/proc` does not show it to this user (hidepid): it cannot be told from another.
    Hidden(String),
    /// Its start time cannot be read, so it cannot be told from another process.
    Unreadable(String),
}

/// A process held by pidfd, proven to be the one named.
#[derive(Debug)]
pub(crate) struct Taken {
    pidfd: OwnedFd,
    pub pid: u64,
    pub uid: u32,
}

/// Take the process `pid` that started at `start_time` (epoch seconds, as psutil and the
/// registry say it, within a millisecond).
pub(crate) fn take(pid: u64, start_time: f64) -> Result<Taken, NotTaken> {
    let Some(raw) = i32::try_from(pid).ok().and_then(Pid::from_raw) else { return Err(NotTaken::Gone) };
    // Opened first: whatever is read of the pid below while this pidfd still runs is its.
    let pidfd = match rustix::process::pidfd_open(raw, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::SRCH | rustix::io::Errno::INVAL) => return Err(NotTaken::Gone),
        Err(e) => return Err(NotTaken::Unreadable(format!("cannot open a pidfd for pid {pid}: {e}"))),
    };
    let stat = match super::proc_stat::read(pid) {
        Ok(Some(stat)) => stat,
        Ok(None) => return Err(NotTaken::Unreadable(format!("unparsable /proc/{pid}/stat"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !pidfds::exited(&pidfd) => {
            return Err(NotTaken::Hidden(format!(
                "pid {pid} runs (the kernel says so) but /proc does not show it to this user (hidepid)"
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(NotTaken::Gone),
        Err(e) => return Err(NotTaken::Unreadable(format!("cannot read /proc/{pid}/stat: {e}"))),
    };
    let uid = owner_uid(pid);
    if stat.ended() || pidfds::exited(&pidfd) {
        return Err(NotTaken::Gone);
    }
    let Some(ticks) = stat.start_ticks else {
        return Err(NotTaken::Unreadable(format!("no start time in /proc/{pid}/stat")));
    };
    let actual = liveness::start_time_of_ticks(ticks).map_err(NotTaken::Unreadable)?;
    if (actual - start_time).abs() >= 0.001 {
        return Err(NotTaken::Other { actual });
    }
    let uid = uid.map_err(NotTaken::Unreadable)?;
    // kill(2)'s own rule, asked without a signal: the same user, or the right to (root).
    if let Err(rustix::io::Errno::PERM) = rustix::process::test_kill_process(raw) {
        return Err(NotTaken::NotPermitted { uid, user: super::owner::user_name(uid) });
    }
    Ok(Taken { pidfd, pid, uid })
}

/// The real user of `pid` (`Uid:` in its status), the one kill(2) checks.
fn owner_uid(pid: u64) -> Result<u32, String> {
    super::proc_stat::status_line(pid, "Uid:")
        .map_err(|e| format!("cannot read /proc/{pid}/status: {e}"))?
        .as_deref()
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no Uid line in /proc/{pid}/status"))
}

/// What a signal through a pidfd did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    Sent,
    /// The process had ended (its pidfd answers ESRCH): nothing was signalled.
    AlreadyEnded,
}

impl Taken {
    /// Send `sig` to this process, and to no other.
    pub(crate) fn signal(&self, sig: Signal) -> std::io::Result<Sent> {
        match rustix::process::pidfd_send_signal(&self.pidfd, sig) {
            Ok(()) => Ok(Sent::Sent),
            Err(rustix::io::Errno::SRCH) => Ok(Sent::AlreadyEnded),
            Err(e) => Err(e.into()),
        }
    }

    /// Wait up to `limit` for the process to end (a zombie has ended); true if it has.
    pub(crate) fn wait(&self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let timeout =
                rustix::time::Timespec { tv_sec: left.as_secs() as i64, tv_nsec: i64::from(left.subsec_nanos()) };
            let mut fds = [PollFd::new(&self.pidfd, PollFlags::IN)];
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(0) if left.is_zero() => return false,
                Ok(0) => {}
                Ok(_) => return true,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return pidfds::exited(&self.pidfd),
            }
        }
    }

    pub(crate) fn ended(&self) -> bool {
        pidfds::exited(&self.pidfd)
    }
}

/// The running descendants of `pid` (its children, theirs...), with their command names:
/// read from each process's own children lists (`/proc/PID/task/TID/children`), a few
/// files for an owner's family, not a look at every process of the machine.
pub(crate) fn descendants(pid: u64) -> Vec<(u32, String)> {
    let Ok(root) = u32::try_from(pid) else { return vec![] };
    let mut found: Vec<(u32, String)> = Vec::new();
    let mut queue = vec![root];
    while let Some(parent) = queue.pop() {
        for child in children(parent) {
            let running = super::proc_stat::read(u64::from(child)).ok().flatten().is_some_and(|s| !s.ended());
            if running && child != root && !found.iter().any(|(p, _)| *p == child) {
                let name = super::owner::command_name(u64::from(child)).unwrap_or_else(|| "-".into());
                found.push((child, name));
                queue.push(child);
            }
        }
    }
    found.sort();
    found
}

/// The children of `pid`, over all its threads (a child belongs to the thread that made it).
fn children(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    tasks
        .filter_map(|t| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{}/children", t.file_name().to_string_lossy())).ok()
        })
        .flat_map(|list| list.split_whitespace().filter_map(|c| c.parse().ok()).collect::<Vec<u32>>())
        .collect()
}

/// Take a process running now, whatever its start time (a member of an owner's family,
/// seen a moment ago as its descendant): None when it has ended or cannot be signalled.
pub(crate) fn take_running(pid: u32) -> Option<Taken> {
    let ticks = super::proc_stat::read(u64::from(pid)).ok().flatten()?.start_ticks?;
    let start_time = liveness::start_time_of_ticks(ticks).ok()?;
    take(u64::from(pid), start_time).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start_time(pid: u32) -> f64 {
        liveness::process_start_time(u64::from(pid)).expect("a running child has a start time")
    }

    #[test]
    fn a_process_is_taken_by_its_start_time_and_ended_through_its_pidfd() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("sleep");
        let t = start_time(child.id());
        let other = take(u64::from(child.id()), t + 5.0).expect_err("another start time is another process");
        assert!(matches!(other, NotTaken::Other { actual } if (actual - t).abs() < 0.001), "{other:?}");
        let taken = take(u64::from(child.id()), t).expect("the same process");
        assert!(!taken.wait(Duration::from_millis(50)), "it runs");
        assert_eq!(taken.signal(Signal::TERM).expect("sent"), Sent::Sent);
        assert!(taken.wait(Duration::from_secs(5)), "SIGTERM ends sleep");
        assert!(taken.ended());
        let status = child.wait().expect("reaped");
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGTERM));
        assert_eq!(taken.signal(Signal::KILL).expect("no error"), Sent::AlreadyEnded, "never another process");
        assert_eq!(take(u64::from(child.id()), t).map(|_| ()), Err(NotTaken::Gone));
    }
}
