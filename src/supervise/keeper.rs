//! `run`'s two processes. The one a script starts (and may SIGKILL) only relays: it
//! starts a keeper, a second leasectl, that owns the lease, is CMD's parent and a child
//! subreaper, and releases only once every process CMD started has ended. Killing the
//! first one therefore cannot free the session while CMD's work still runs.

use std::os::unix::process::CommandExt;
use std::process::Command;

use rustix::process::{self, Pid, PidfdFlags, Signal};

use super::{StopSignals, exit_code_of, from_terminal, send};

/// Set in the keeper's environment to the pid of the leasectl that started it.
pub const KEEPER_ENV: &str = "LEASECTL_INTERNAL_KEEPER_FOR";

/// How this process stands to `run`'s pair.
pub enum Role {
    /// Started by a user or script: start a keeper and relay.
    Relay,
    /// The keeper, its relay (this pid) alive.
    Keeper(u32),
    /// A keeper whose relay died before it started: nothing may run.
    Orphaned(u32),
}

pub fn role() -> Role {
    let Some(relay) = std::env::var(KEEPER_ENV).ok().and_then(|v| v.parse::<u32>().ok()) else {
        return Role::Relay;
    };
    let parent = process::getppid().map(|p| p.as_raw_nonzero().get() as u32);
    if parent == Some(relay) { Role::Keeper(relay) } else { Role::Orphaned(relay) }
}

/// True when the relay that started this keeper is gone (it gets SIGTERM then, as its
/// parent-death signal).
pub fn relay_gone(relay: u32) -> bool {
    process::getppid().map(|p| p.as_raw_nonzero().get() as u32) != Some(relay)
}

/// Make orphans of CMD's processes this process's children, so they stay in the family
/// and are waited for.
pub fn become_subreaper() -> std::io::Result<()> {
    Ok(process::set_child_subreaper(Some(process::getpid()))?)
}

/// The relay: start this same binary, with the same arguments, as the keeper; pass
/// stop signals on to it (not a terminal's, which reached it already); exit as it does.
#[allow(unsafe_code)] // the system call below has no safe wrapper; see SAFETY
pub fn relay(signals: StopSignals) -> std::io::Result<i32> {
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| "leasectl".into());
    let me = std::process::id();
    // The binary by its path, so the keeper's command name is this one's (`ps`, `ls`);
    // /proc/self/exe only when that path is gone (replaced while running).
    let exe = std::env::current_exe().ok().filter(|p| p.exists()).unwrap_or_else(|| "/proc/self/exe".into());
    let mut keeper = Command::new(exe);
    keeper.arg0(arg0).args(args).env(KEEPER_ENV, me.to_string());
    // SAFETY: prctl and getppid are async-signal-safe syscalls.
    unsafe {
        keeper.pre_exec(move || {
            // If this relay is killed, even by SIGKILL, the keeper is told (SIGTERM) and
            // stops CMD's work before it releases. A relay already gone: nothing starts.
            process::set_parent_process_death_signal(Some(Signal::TERM))?;
            if process::getppid().map(|p| p.as_raw_nonzero().get() as u32) != Some(me) {
                return Err(std::io::Error::other("leasectl exited before its keeper started"));
            }
            Ok(())
        });
    }
    let mut signals = signals;
    let early: Vec<libc::siginfo_t> = signals.signals.pending().collect();
    let child = keeper.spawn()?;
    let pid = Pid::from_child(&child);
    let pidfd = std::sync::Arc::new(process::pidfd_open(pid, PidfdFlags::empty())?);
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
    let mut child = child;
    let status = child.wait();
    handle.close();
    let _ = forwarder.join();
    let status = status?;
    use std::os::unix::process::ExitStatusExt;
    // A stop signal kills the keeper only before it holds anything; any other death
    // leaves its lease to be pruned while CMD's processes may run on.
    if let Some(sig) = status.signal().filter(|s| ![libc::SIGINT, libc::SIGTERM, libc::SIGHUP].contains(s)) {
        eprintln!(
            "leasectl: the lease keeper (pid {}) was killed by signal {sig}; processes CMD started may still run",
            child.id()
        );
    }
    Ok(exit_code_of(status))
}
