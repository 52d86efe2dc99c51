//! Holding a lease while something runs: wait for SIGINT/SIGTERM (`hold`), or
//! run a child and forward those signals to it (`run`).

use std::process::Command;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Block until SIGINT or SIGTERM arrives; return which.
pub fn wait_for_stop_signal() -> std::io::Result<i32> {
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    Ok(signals.forever().next().unwrap_or(SIGTERM))
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

/// Run `cmd` (exec'd directly, never through a shell) with extra environment,
/// forwarding SIGINT and SIGTERM to it; return its exit code.
pub fn run_forwarding(cmd: &[String], env: &[(&str, &str)]) -> std::io::Result<i32> {
    let Some((program, args)) = cmd.split_first() else {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command given"));
    };
    // Registered before the spawn, so a signal that arrives meanwhile is not lost.
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    let handle = signals.handle();
    let mut child = Command::new(program).args(args).envs(env.iter().copied()).spawn()?;
    let pid = child.id() as libc::pid_t;
    let forwarder = std::thread::spawn(move || {
        for sig in signals.forever() {
            // SAFETY: kill has no memory-safety preconditions; the child is ours and not yet reaped.
            unsafe { libc::kill(pid, sig) };
        }
    });
    let status = child.wait();
    handle.close();
    let _ = forwarder.join();
    Ok(exit_code_of(status?))
}
