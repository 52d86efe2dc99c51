//! The process calls the tests make (kill, waitpid, subreaper, FIFOs, clock ticks),
//! through rustix: no unsafe code in the tests.

use rustix::process::{Pid, Signal, WaitOptions};

fn pid(raw: u32) -> Pid {
    Pid::from_raw(i32::try_from(raw).expect("a pid fits an i32")).expect("a pid is positive")
}

fn signal(sig: i32) -> Signal {
    Signal::from_named_raw(sig).expect("a named signal")
}

/// kill(2) on one process.
pub fn kill(target: u32, sig: i32) -> std::io::Result<()> {
    Ok(rustix::process::kill_process(pid(target), signal(sig))?)
}

/// kill(2) on a process group.
pub fn kill_group(pgid: u32, sig: i32) -> std::io::Result<()> {
    Ok(rustix::process::kill_process_group(pid(pgid), signal(sig))?)
}

/// waitpid(2) without waiting: true when `child` was reaped now, false when it runs
/// on; an error when it is not this process's child.
pub fn reap_now(child: u32) -> std::io::Result<bool> {
    Ok(rustix::process::waitpid(Some(pid(child)), WaitOptions::NOHANG)?.is_some())
}

/// Make this process the reaper of its orphaned descendants.
pub fn become_subreaper() -> std::io::Result<()> {
    Ok(rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?)
}

/// mkfifo(3): a FIFO at `path`, mode 0666 less the umask.
pub fn mkfifo(path: &std::path::Path) -> std::io::Result<()> {
    use rustix::fs::{CWD, FileType, Mode};
    Ok(rustix::fs::mknodat(CWD, path, FileType::Fifo, Mode::from_raw_mode(0o666), 0)?)
}

/// The kernel's clock ticks per second (`/proc/<pid>/stat` times are in ticks).
pub fn clock_ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second()
}
