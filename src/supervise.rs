//! Holding a lease while something runs: wait for SIGINT/SIGTERM (`hold`), or
//! run a child and forward those signals to it (`run`).
//!
//! The handlers are installed BEFORE the lease is acquired: a stop signal that
//! arrives between the registry write and the wait must still release the lease.

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

    /// Block until SIGINT or SIGTERM arrives; return which. None when woken through
    /// [`StopSignals::waker`] instead (e.g. the lease was lost).
    pub fn wait(mut self) -> Option<i32> {
        self.signals.forever().next()
    }

    /// Something another thread can call to end [`StopSignals::wait`] without a signal.
    pub fn waker(&self) -> impl FnOnce() + Send + 'static {
        let handle = self.signals.handle();
        move || handle.close()
    }

    /// Run `cmd` (exec'd directly, never through a shell) with extra environment,
    /// forwarding SIGINT and SIGTERM to it; return its exit code. A stop signal
    /// that arrived before the spawn stops the command as soon as it starts.
    pub fn run_forwarding(self, cmd: &[String], env: &[(&str, &str)]) -> std::io::Result<i32> {
        self.run_supervised(cmd, env, None).map(|end| end.code)
    }

    /// [`StopSignals::run_forwarding`], and also stop CMD when `lost` says the lease is
    /// gone: SIGTERM, then SIGKILL after the stop's grace period. The end says why.
    pub fn run_supervised(
        mut self,
        cmd: &[String],
        env: &[(&str, &str)],
        lost: Option<LeaseLost>,
    ) -> std::io::Result<RunEnd> {
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
        // The child is signalled only while it is known not to be reaped: the stopper
        // holds `exited` while it kills, and the child is reaped only after it is set.
        let exited = Arc::new(Mutex::new(false));
        let (reaped_tx, reaped_rx) = channel::<()>();
        let stopper = lost.map(|lost| {
            let exited = Arc::clone(&exited);
            std::thread::spawn(move || -> Option<String> {
                let why = lost.messages.recv().ok()?;
                let signal = |sig| {
                    let done = exited.lock().map(|e| *e).unwrap_or(true);
                    if !done {
                        // SAFETY: kill has no memory-safety preconditions; the child is not reaped.
                        unsafe { libc::kill(pid, sig) };
                    }
                    !done
                };
                if signal(libc::SIGTERM) && reaped_rx.recv_timeout(lost.grace) == Err(RecvTimeoutError::Timeout) {
                    signal(libc::SIGKILL);
                }
                Some(why)
            })
        });
        let waited = wait_exited(pid);
        if let Ok(mut e) = exited.lock() {
            *e = true;
        }
        let status = child.wait();
        drop(reaped_tx);
        handle.close();
        let _ = forwarder.join();
        waited?;
        let code = exit_code_of(status?);
        // A stopper still waiting for a message means the lease was not lost.
        let lost = stopper.and_then(|t| if t.is_finished() { t.join().ok().flatten() } else { None });
        Ok(RunEnd { code, lost })
    }
}

/// Where a lost lease is reported to `run`, and how long CMD gets between SIGTERM and SIGKILL.
pub struct LeaseLost {
    pub messages: Receiver<String>,
    pub grace: Duration,
}

/// How `run`'s CMD ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    /// CMD's status as a shell reports it.
    pub code: i32,
    /// Set when CMD was stopped because the lease was lost: why.
    pub lost: Option<String>,
}

/// Block until `pid` (our child) has exited, without reaping it.
fn wait_exited(pid: libc::pid_t) -> std::io::Result<()> {
    loop {
        // SAFETY: info is a valid siginfo_t to fill; WNOWAIT leaves the child waitable.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
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
