//! `run`'s two processes. The one a script starts (and may SIGKILL) only relays: it
//! forks a keeper, a copy of itself, that owns the lease, is CMD's parent and a child
//! subreaper, and releases only once every process CMD started has ended. Killing the
//! first one therefore cannot free the session while CMD's work still runs.

use rustix::process::{self, Pid, PidfdFlags, Signal, WaitOptions};

use super::{StopSignals, from_terminal, send};

/// Which side of the fork this process is on.
pub(crate) enum Side {
    /// The keeper, its relay (this pid) alive: acquire and run CMD.
    Keeper { relay: u32 },
    /// The relay: pass stop signals on to the keeper (this pid) and exit as it does.
    Relay { keeper: Pid },
}

/// True when the relay that started this keeper is gone (it gets SIGTERM then, as its
/// parent-death signal).
pub(crate) fn relay_gone(relay: u32) -> bool {
    process::getppid().map(|p| p.as_raw_nonzero().get() as u32) != Some(relay)
}

/// Make orphans of CMD's processes this process's children, so they stay in the family
/// and are waited for.
pub(crate) fn become_subreaper() -> std::io::Result<()> {
    Ok(process::set_child_subreaper(Some(process::getpid()))?)
}

/// Split into the relay and the keeper. A fork, not a second exec of this binary: the
/// keeper goes on from the command line already parsed and the home already found, which
/// spares `run` a whole process start (a quarter of `run S -- true`: 8 ms against 11 ms).
/// Stop signals are blocked across the fork: each side receives them once it has
/// installed its own handlers ([`StopSignals::install`] unblocks them), none is lost in
/// between and none is caught by the other side's.
#[allow(unsafe_code)] // fork(2) has no safe wrapper; see SAFETY
pub(crate) fn split() -> std::io::Result<Side> {
    let me = std::process::id();
    // A fork copies only the calling thread: with another thread running, a lock it held
    // (the allocator's, stdout's) would stay locked in the keeper forever.
    let threads = crate::lease::owners::proc_stat::read(u64::from(me))?.and_then(|s| s.threads);
    if threads != Some(1) {
        return Err(std::io::Error::other(format!(
            "{} threads are running, and only a single-threaded process can fork its keeper",
            threads.map_or_else(|| "an unknown number of".to_owned(), |n| n.to_string())
        )));
    }
    use std::io::Write;
    // Nothing buffered may be written twice, once by each side.
    let _ = std::io::stdout().flush();
    super::block_stop_signals(true)?;
    // SAFETY: this process has one thread (checked above), so the child's copy of every
    // lock and of the allocator is consistent and it may run any code, as this one does.
    match unsafe { libc::fork() } {
        -1 => {
            let e = std::io::Error::last_os_error();
            let _ = super::block_stop_signals(false);
            Err(e)
        }
        0 => {
            // If the relay is killed, even by SIGKILL, the keeper is told (SIGTERM) and
            // stops CMD's work before it releases. A relay already gone: nothing starts.
            process::set_parent_process_death_signal(Some(Signal::TERM))?;
            if relay_gone(me) {
                return Err(std::io::Error::other(format!("leasectl (pid {me}) ended before CMD started")));
            }
            Ok(Side::Keeper { relay: me })
        }
        child => Pid::from_raw(child).map(|keeper| Side::Relay { keeper }).ok_or_else(std::io::Error::last_os_error),
    }
}

/// The relay: pass stop signals on to the keeper (not a terminal's, which reached it
/// already); exit as it does.
pub(crate) fn relay(keeper: Pid, signals: StopSignals) -> std::io::Result<i32> {
    let mut signals = signals;
    let early: Vec<libc::siginfo_t> = signals.signals.pending().collect();
    // The keeper is this process's child, not yet waited for: its pid cannot be reused.
    let pidfd = std::sync::Arc::new(process::pidfd_open(keeper, PidfdFlags::empty())?);
    for info in early.iter().filter(|i| !from_terminal(i)) {
        send(&pidfd, info.si_signo);
    }
    let handle = signals.signals.handle();
    let to = std::sync::Arc::clone(&pidfd);
    let forwarder = std::thread::spawn(move || {
        for info in signals.signals.forever() {
            if !from_terminal(&info) {
                send(&to, info.si_signo);
            }
        }
    });
    let status = loop {
        match process::waitpid(Some(keeper), WaitOptions::empty()) {
            Ok(Some((_, status))) => break Ok(status),
            Ok(None) | Err(rustix::io::Errno::INTR) => continue,
            Err(e) => break Err(std::io::Error::from(e)),
        }
    };
    handle.close();
    let _ = forwarder.join();
    let status = status?;
    // A stop signal kills the keeper only before it holds anything; any other death
    // leaves its lease to be pruned while CMD's processes may run on.
    if let Some(sig) = status.terminating_signal().filter(|s| ![libc::SIGINT, libc::SIGTERM, libc::SIGHUP].contains(s))
    {
        eprintln!(
            "leasectl: the lease keeper (pid {}) was killed by signal {sig}; processes CMD started may still run",
            keeper.as_raw_nonzero()
        );
    }
    Ok(super::wait_code(status))
}
