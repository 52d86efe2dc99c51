//! Holding a lease while something runs: wait for SIGINT/SIGTERM (`hold`), or
//! run a child and forward those signals to it (`run`).
//!
//! The handlers are installed BEFORE the lease is acquired: a stop signal that
//! arrives between the registry write and the wait must still release the lease.

use std::os::unix::process::CommandExt;
use std::process::Command;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// SIGINT and SIGTERM, caught from now on (their default action no longer runs).
pub struct StopSignals {
    signals: Signals,
}

impl StopSignals {
    pub fn install() -> std::io::Result<StopSignals> {
        Ok(StopSignals { signals: Signals::new([SIGINT, SIGTERM])? })
    }

    /// True when a stop signal already arrived (e.g. while acquiring).
    pub fn pending(&mut self) -> bool {
        self.signals.pending().next().is_some()
    }

    /// Block until SIGINT or SIGTERM arrives; return which.
    pub fn wait(mut self) -> i32 {
        self.signals.forever().next().unwrap_or(SIGTERM)
    }

    /// Run `cmd` (exec'd directly, never through a shell) with extra environment,
    /// forwarding SIGINT and SIGTERM to it; return its exit code. A stop signal
    /// that arrived before the spawn stops the command as soon as it starts.
    pub fn run_forwarding(mut self, cmd: &[String], env: &[(&str, &str)]) -> std::io::Result<i32> {
        let Some((program, args)) = cmd.split_first() else {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command given"));
        };
        let early: Vec<i32> = self.signals.pending().collect();
        let handle = self.signals.handle();
        let mut cmd = Command::new(program);
        cmd.args(args).envs(env.iter().copied());
        // If leasectl dies (even by SIGKILL) its lease becomes prunable: the work must
        // not outlive it, or a successor and CMD would write one session together.
        // SAFETY: prctl is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        let pid = child.id() as libc::pid_t;
        for sig in early {
            // SAFETY: kill has no memory-safety preconditions; the child is ours and not yet reaped.
            unsafe { libc::kill(pid, sig) };
        }
        let mut signals = self.signals;
        let forwarder = std::thread::spawn(move || {
            for sig in signals.forever() {
                // SAFETY: as above.
                unsafe { libc::kill(pid, sig) };
            }
        });
        let status = child.wait();
        handle.close();
        let _ = forwarder.join();
        Ok(exit_code_of(status?))
    }
}

/// How a child ended, as a shell would report it in `$?`.
pub fn exit_code_of(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    }
}
