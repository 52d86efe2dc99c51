//! Holding a lease while something runs: wait for SIGINT/SIGTERM/SIGHUP (`hold`), or
//! run a child and pass those signals on to its processes (`run`).
//!
//! The handlers are installed BEFORE the lease is acquired: a stop signal that
//! arrives between the registry write and the wait must still release the lease.

pub(crate) mod family;
pub(crate) mod keeper;

use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::{self, Signal, WaitOptions};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::SignalsInfo;
use signal_hook::iterator::exfiltrator::WithRawSiginfo;

use family::Family;

/// SIGINT, SIGTERM and SIGHUP, caught from now on (their default action no longer runs).
pub(crate) struct StopSignals {
    /// With each signal's siginfo: a SIGINT the terminal sent (Ctrl-C) reached CMD too.
    signals: SignalsInfo<WithRawSiginfo>,
}

/// A Ctrl-C at the terminal: the kernel sends SIGINT to the whole foreground process
/// group, CMD included (`kill` sets SI_USER instead). Not so a hangup: the kernel's
/// SIGHUP goes to the session leader alone.
fn from_terminal(info: &libc::siginfo_t) -> bool {
    info.si_signo == SIGINT && info.si_code == libc::SI_KERNEL
}

/// How `run` stands: as the keeper (the lease's owner, CMD's parent, a subreaper whose
/// whole family is CMD's work), or in-process (tests: only CMD's descendants are its work).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Supervision {
    Keeper {
        relay: u32,
    },
    // Only the unit tests supervise in-process.
    #[cfg_attr(not(test), allow(dead_code))]
    InProcess,
}

/// True when `sig` is ignored in this process (inherited across exec, as `nohup` sets it).
#[allow(unsafe_code)] // the system call below has no safe wrapper; see SAFETY
fn ignored(sig: i32) -> bool {
    // SAFETY: a null new action only reads the current disposition into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// Why the stopper stops CMD's work.
enum StopWhy {
    Lost(String),
    RelayGone,
}

enum Stopper {
    Stop(StopWhy),
    /// CMD and every process it left have ended.
    Reaped,
}

impl StopSignals {
    pub(crate) fn install() -> std::io::Result<StopSignals> {
        // SIGHUP: the terminal closed. It ends `hold` and `run` like SIGTERM (CMD first,
        // then the release) instead of killing leasectl with its lease still recorded.
        // Unless started ignoring it (`nohup`): then a hangup must not end the work.
        let stops: &[i32] = if ignored(SIGHUP) { &[SIGINT, SIGTERM] } else { &[SIGINT, SIGTERM, SIGHUP] };
        let signals = SignalsInfo::new(stops)?;
        // Blocked across `run`'s fork ([`keeper::split`]): caught from here on.
        block_stop_signals(false)?;
        Ok(StopSignals { signals })
    }

    /// True when a stop signal already arrived (e.g. while acquiring).
    pub(crate) fn pending(&mut self) -> bool {
        self.signals.pending().next().is_some()
    }

    /// Block until SIGINT or SIGTERM arrives; return which. None when woken through
    /// [`StopSignals::waker`] instead (e.g. the lease was lost).
    pub(crate) fn wait(mut self) -> Option<i32> {
        self.signals.forever().next().map(|info| info.si_signo)
    }

    /// Something another thread can call to end [`StopSignals::wait`] without a signal.
    pub(crate) fn waker(&self) -> impl FnOnce() + Send + 'static {
        let handle = self.signals.handle();
        move || handle.close()
    }

    /// Run CMD (exec'd directly, never through a shell) and return once its work has
    /// ended: CMD and, for a keeper, every process it left behind. Stop signals go to all
    /// of them; one that arrived before the spawn stops CMD as soon as it starts. When
    /// `lost` reports the lease gone (why), or the relay dies, the work is stopped:
    /// SIGTERM, then SIGKILL after `grace`.
    pub(crate) fn run_supervised(
        mut self,
        cmd: &[String],
        env: &[(&str, &str)],
        lost: Option<Receiver<String>>,
        grace: Duration,
        how: Supervision,
    ) -> std::io::Result<RunEnd> {
        let Some((program, args)) = cmd.split_first() else {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command given"));
        };
        // Signals before the spawn never reached CMD: all are passed on.
        let early: Vec<i32> = self.signals.pending().map(|info| info.si_signo).collect();
        let handle = self.signals.handle();
        let (child, pidfd) = start(program, args, env)?;
        let cmd_pid = process::Pid::from_child(&child);
        // CMD itself is signalled through its pidfd (never a pid that may be reused), once:
        // the rest of the work through the family, which leaves it out.
        let family = match how {
            Supervision::Keeper { .. } => Family { root: std::process::id(), except: Some(child.id()) },
            Supervision::InProcess => Family { root: child.id(), except: None },
        };
        let cmd_id = child.id();
        let signal_work = move |sig: i32, skip_pgrp: Option<u32>| {
            // Skipped only when CMD is in the group the terminal signalled.
            let in_skipped_group = skip_pgrp.is_some()
                && crate::lease::owners::owner::proc_stat(u64::from(cmd_id)).map(|s| s.pgrp) == skip_pgrp;
            if !in_skipped_group {
                send(&pidfd, sig);
            }
            if let Some(sig) = Signal::from_named_raw(sig) {
                family.signal(sig, skip_pgrp);
            }
        };
        for sig in early {
            signal_work(sig, None);
        }
        // The stopper hears why to stop the work, and when it has all been reaped.
        let (stop_tx, stop_rx) = channel::<Stopper>();
        // Why the lease was lost, set before CMD is signalled, so the end reports it
        // whenever CMD stops because of it.
        let lost_why: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let stopper = spawn_stopper(stop_rx, Arc::clone(&lost_why), signal_work.clone(), grace);
        let forwarder = spawn_forwarder(self.signals, stop_tx.clone(), signal_work, how);
        if let Some(lost) = lost {
            let stop_tx = stop_tx.clone();
            std::thread::spawn(move || {
                if let Ok(why) = lost.recv() {
                    let _ = stop_tx.send(Stopper::Stop(StopWhy::Lost(why)));
                }
            });
        }
        let status = reap(cmd_pid, how);
        let _ = stop_tx.send(Stopper::Reaped);
        handle.close();
        let _ = forwarder.join();
        let _ = stopper.join();
        drop(child);
        let code = status?;
        let lost = lost_why.lock().ok().and_then(|w| w.clone());
        Ok(RunEnd { code, lost })
    }
}

/// CMD started (dying with this keeper, even by SIGKILL, rather than run unfenced), and
/// a pidfd on it: it is signalled through that, never through a pid that may be reused.
#[allow(unsafe_code)] // the system call below has no safe wrapper; see SAFETY
fn start(program: &str, args: &[String], env: &[(&str, &str)]) -> std::io::Result<(std::process::Child, Arc<OwnedFd>)> {
    let mut command = Command::new(program);
    command.args(args).envs(env.iter().copied());
    // SAFETY: the closure only makes one prctl syscall, which is async-signal-safe.
    unsafe {
        command.pre_exec(|| Ok(process::set_parent_process_death_signal(Some(Signal::KILL))?));
    }
    let mut child = command.spawn()?;
    match process::pidfd_open(process::Pid::from_child(&child), process::PidfdFlags::empty()) {
        Ok(fd) => Ok((child, Arc::new(fd))),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e.into())
        }
    }
}

/// The thread that stops the work when told why: SIGTERM, then after `grace` SIGKILL
/// again and again until all are gone (one may have forked between two looks).
fn spawn_stopper(
    stop_rx: Receiver<Stopper>,
    lost_why: Arc<Mutex<Option<String>>>,
    signal_work: impl Fn(i32, Option<u32>) + Send + 'static,
    grace: Duration,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let Ok(Stopper::Stop(why)) = stop_rx.recv() else { return };
        if let (StopWhy::Lost(why), Ok(mut slot)) = (why, lost_why.lock()) {
            *slot = Some(why);
        }
        signal_work(SIGTERM, None);
        let mut wait = grace;
        while let Ok(Stopper::Stop(_)) | Err(RecvTimeoutError::Timeout) = stop_rx.recv_timeout(wait) {
            signal_work(signal_hook::consts::SIGKILL, None);
            wait = Duration::from_millis(20);
        }
    })
}

/// The thread that passes every signal on to the work, and tells the stopper once when
/// the relay (the process a script started) is gone.
fn spawn_forwarder(
    mut signals: SignalsInfo<WithRawSiginfo>,
    stop_tx: std::sync::mpsc::Sender<Stopper>,
    signal_work: impl Fn(i32, Option<u32>) + Send + 'static,
    how: Supervision,
) -> std::thread::JoinHandle<()> {
    let own_group = family::own_process_group();
    std::thread::spawn(move || {
        // The relay's death is one event however often it is signalled: the parent-death
        // signal fires again as the keeper is re-parented from the relay's thread to
        // another of its threads, then out of it. A second Stop would end the grace at once.
        let mut relay_gone_told = false;
        for info in signals.forever() {
            // A terminal's signal reached CMD's foreground group already: passing it on
            // would make it two. Members that left the group still need it.
            let skip = from_terminal(&info).then_some(own_group);
            signal_work(info.si_signo, skip);
            if let Supervision::Keeper { relay } = how
                && !relay_gone_told
                && keeper::relay_gone(relay)
            {
                relay_gone_told = true;
                let _ = stop_tx.send(Stopper::Stop(StopWhy::RelayGone));
            }
        }
    })
}

/// Wait for CMD, then (as the keeper) for every process re-parented to this one; return
/// CMD's status as a shell reports it.
fn reap(cmd: process::Pid, how: Supervision) -> std::io::Result<i32> {
    let status = loop {
        match process::waitpid(Some(cmd), WaitOptions::empty()) {
            Ok(Some((_, status))) => break status,
            Ok(None) | Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    let code = wait_code(status);
    if let Supervision::Keeper { .. } = how {
        // Every child left is CMD's work (the keeper starts no other): ECHILD means done.
        while let Ok(_) | Err(rustix::io::Errno::INTR) = process::wait(WaitOptions::empty()) {}
    }
    Ok(code)
}

/// Send `sig` to the process behind `pidfd`; a process already gone is not an error.
fn send(pidfd: &OwnedFd, sig: i32) {
    if let Some(sig) = Signal::from_named_raw(sig) {
        let _ = process::pidfd_send_signal(pidfd, sig);
    }
}

/// How `run`'s CMD ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunEnd {
    /// CMD's status as a shell reports it.
    pub code: i32,
    /// Set when CMD was stopped because the lease was lost: why.
    pub lost: Option<String>,
}

/// How a child ended, as a shell would report it in `$?`.
fn wait_code(status: process::WaitStatus) -> i32 {
    match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    }
}

/// Block (or unblock) SIGINT, SIGTERM and SIGHUP in this thread: a signal that arrives
/// while they are blocked waits, pending, until they are unblocked.
#[allow(unsafe_code)] // the system calls below have no safe wrapper; see SAFETY
fn block_stop_signals(block: bool) -> std::io::Result<()> {
    // SAFETY: the set is initialised by sigemptyset before use; pthread_sigmask only
    // reads it, and a null old set asks for nothing back.
    let rc = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(if block { libc::SIG_BLOCK } else { libc::SIG_UNBLOCK }, &set, std::ptr::null_mut())
    };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::from_raw_os_error(rc)) }
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
            let end = signals
                .run_supervised(&cmd, &[], Some(rx), Duration::from_secs(2), Supervision::InProcess)
                .expect("run");
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
