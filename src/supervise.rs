//! Holding a lease while something runs: wait for SIGINT/SIGTERM (`hold`), or
//! run a child and forward those signals to it (`run`).
//!
//! The handlers are installed BEFORE the lease is acquired: a stop signal that
//! arrives between the registry write and the wait must still release the lease.

use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::{self, Signal};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::SignalsInfo;
use signal_hook::iterator::exfiltrator::WithRawSiginfo;

/// SIGINT, SIGTERM and SIGHUP, caught from now on (their default action no longer runs).
pub struct StopSignals {
    /// With each signal's siginfo: a SIGINT the terminal sent (Ctrl-C) reached CMD too.
    signals: SignalsInfo<WithRawSiginfo>,
}

/// A Ctrl-C at the terminal: the kernel sends SIGINT to the whole foreground process
/// group, CMD included (`kill` sets SI_USER instead).
fn from_terminal(info: &libc::siginfo_t) -> bool {
    info.si_signo == SIGINT && info.si_code == libc::SI_KERNEL
}

impl StopSignals {
    pub fn install() -> std::io::Result<StopSignals> {
        // SIGHUP: the terminal closed. It ends `hold` and `run` like SIGTERM (CMD first,
        // then the release) instead of killing leasectl with its lease still recorded.
        Ok(StopSignals { signals: SignalsInfo::new([SIGINT, SIGTERM, SIGHUP])? })
    }

    /// True when a stop signal already arrived (e.g. while acquiring).
    pub fn pending(&mut self) -> bool {
        self.signals.pending().next().is_some()
    }

    /// Block until SIGINT or SIGTERM arrives; return which. None when woken through
    /// [`StopSignals::waker`] instead (e.g. the lease was lost).
    pub fn wait(mut self) -> Option<i32> {
        self.signals.forever().next().map(|info| info.si_signo)
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
        // Signals before the spawn never reached CMD: all are passed on.
        let early: Vec<i32> = self.signals.pending().map(|info| info.si_signo).collect();
        let handle = self.signals.handle();
        let mut cmd = Command::new(program);
        cmd.args(args).envs(env.iter().copied());
        // If leasectl dies (even by SIGKILL) its lease becomes prunable: the work must
        // not outlive it, or a successor and CMD would write one session together.
        // SAFETY: the closure only makes one prctl syscall, which is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| Ok(process::set_parent_process_death_signal(Some(Signal::KILL))?));
        }
        let mut child = cmd.spawn()?;
        // Every signal goes through a pidfd: it names this child, and never a process that
        // reuses its pid once the child is reaped (a signal then fails with ESRCH).
        let pidfd = match process::pidfd_open(process::Pid::from_child(&child), process::PidfdFlags::empty()) {
            Ok(fd) => Arc::new(fd),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e.into());
            }
        };
        for sig in early {
            send(&pidfd, sig);
        }
        let mut signals = self.signals;
        let forward_to = Arc::clone(&pidfd);
        let forwarder = std::thread::spawn(move || {
            for info in signals.forever() {
                // CMD is in leasectl's process group: the terminal's SIGINT reached it
                // already, and passing it on would make it two.
                if !from_terminal(&info) {
                    send(&forward_to, info.si_signo);
                }
            }
        });
        // Why the lease was lost, set before CMD is signalled, so the end reports it
        // whenever CMD stops because of it.
        let lost_why: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let (reaped_tx, reaped_rx) = channel::<()>();
        if let Some(lost) = lost {
            let (why_slot, stop) = (Arc::clone(&lost_why), Arc::clone(&pidfd));
            std::thread::spawn(move || {
                let Ok(why) = lost.messages.recv() else { return };
                if let Ok(mut slot) = why_slot.lock() {
                    *slot = Some(why);
                }
                send(&stop, SIGTERM);
                if reaped_rx.recv_timeout(lost.grace) == Err(RecvTimeoutError::Timeout) {
                    send(&stop, signal_hook::consts::SIGKILL);
                }
            });
        }
        let status = child.wait();
        drop(reaped_tx);
        handle.close();
        let _ = forwarder.join();
        let code = exit_code_of(status?);
        let lost = lost_why.lock().ok().and_then(|w| w.clone());
        Ok(RunEnd { code, lost })
    }
}

/// Send `sig` to the process behind `pidfd`; a process already gone is not an error.
fn send(pidfd: &OwnedFd, sig: i32) {
    if let Some(sig) = Signal::from_named_raw(sig) {
        let _ = process::pidfd_send_signal(pidfd, sig);
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

/// How a child ended, as a shell would report it in `$?`.
pub fn exit_code_of(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lost lease that stops CMD is always reported as the reason it ended (the report
    /// once raced the stopper thread and was sometimes missing).
    #[test]
    fn a_lost_lease_is_reported_every_time_it_stops_cmd() {
        for round in 0..40 {
            let (tx, rx) = channel();
            let signals = StopSignals::install().expect("signal handlers");
            let script = "trap 'exit 143' TERM; while :; do sleep 0.01; done".to_owned();
            let cmd = ["sh".to_owned(), "-c".to_owned(), script];
            tx.send("the lease is gone".to_owned()).expect("send");
            let lost = LeaseLost { messages: rx, grace: Duration::from_secs(2) };
            let end = signals.run_supervised(&cmd, &[], Some(lost)).expect("run");
            assert_eq!(end.code, 143, "round {round}");
            assert_eq!(end.lost.as_deref(), Some("the lease is gone"), "round {round}");
        }
    }

    /// Signals go through a pidfd: once CMD is reaped, a late signal reaches nobody,
    /// not a process that reused its pid.
    #[test]
    fn a_signal_after_the_child_is_reaped_reaches_nobody() {
        let mut child = Command::new("true").spawn().expect("spawn");
        let pidfd = process::pidfd_open(process::Pid::from_child(&child), process::PidfdFlags::empty()).expect("pidfd");
        child.wait().expect("wait");
        let err = process::pidfd_send_signal(&pidfd, Signal::TERM).expect_err("the child is gone");
        assert_eq!(err, rustix::io::Errno::SRCH);
    }
}
