//! The real console in a pseudo-terminal, for the benches: its screen as a terminal
//! shows it, and its process's CPU time and memory.

use std::io::Read;
use std::num::NonZeroU16;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};

/// The console in a pty; SIGKILLed and reaped on drop.
pub struct Console {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    _master: Box<dyn portable_pty::MasterPty + Send>,
    writer: Option<Box<dyn std::io::Write + Send>>,
    screen: Arc<Mutex<vt100::Parser>>,
    pub pid: u32,
}

impl Drop for Console {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.pid as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
        let _ = self.child.wait();
    }
}

impl Console {
    pub fn start(binary: &str, home: &Path, rows: u16, cols: u16) -> Console {
        let pair =
            native_pty_system().openpty(PtySize { rows, cols, pixel_width: 0, pixel_height: 0 }).expect("openpty");
        let mut cmd = CommandBuilder::new(binary);
        cmd.arg("--home");
        cmd.arg(home);
        cmd.arg("tui");
        cmd.env("TERM", "xterm-256color");
        cmd.env_remove("HERMES_HOME");
        cmd.env_remove("NO_COLOR");
        cmd.cwd(home);
        Console::attach(pair, cmd, rows, cols)
    }

    /// `binary ARGS` with `env` set (and `HERMES_HOME`, `NO_COLOR` removed), in a temp directory.
    pub fn start_with(binary: &str, args: &[String], env: &[(String, String)], rows: u16, cols: u16) -> Console {
        let pair =
            native_pty_system().openpty(PtySize { rows, cols, pixel_width: 0, pixel_height: 0 }).expect("openpty");
        let mut cmd = CommandBuilder::new(binary);
        cmd.args(args);
        cmd.env_remove("HERMES_HOME");
        cmd.env_remove("NO_COLOR");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.cwd(std::env::temp_dir());
        Console::attach(pair, cmd, rows, cols)
    }

    /// The console's child in the pty, its screen kept by a thread that drains the pty so
    /// the console never blocks on a full terminal.
    fn attach(pair: portable_pty::PtyPair, cmd: CommandBuilder, rows: u16, cols: u16) -> Console {
        let child = pair.slave.spawn_command(cmd).expect("spawn leasectl in the pty");
        drop(pair.slave);
        let pid = child.process_id().expect("the console has a pid");
        let size = |n: u16| NonZeroU16::new(n).expect("non-zero");
        let screen = Arc::new(Mutex::new(vt100::Parser::new(size(rows), size(cols), 0)));
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let s = Arc::clone(&screen);
        thread::spawn(move || {
            let mut buf = [0u8; 16384];
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                s.lock().unwrap_or_else(|p| p.into_inner()).process(&buf[..n]);
            }
        });
        let writer = pair.master.take_writer().ok();
        Console { child, _master: pair.master, writer, screen, pid }
    }

    pub fn text(&self) -> String {
        self.screen.lock().unwrap_or_else(|p| p.into_inner()).screen().contents()
    }

    pub fn wait_for(&mut self, needle: &str, deadline: Duration) -> Duration {
        let start = Instant::now();
        loop {
            if self.text().contains(needle) {
                return start.elapsed();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the console exited ({status:?}) before showing {needle:?}:\n{}", self.text());
            }
            assert!(
                start.elapsed() < deadline,
                "the console did not show {needle:?} within {deadline:?}:\n{}",
                self.text()
            );
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// utime + stime of every thread, in seconds.
    pub fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).expect("read /proc/<pid>/stat");
        let rest = &stat[stat.rfind(')').expect("comm closes") + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // After ')' the fields start at field 3; utime is field 14, stime field 15.
        let ticks: u64 = fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
        let clk = rustix::param::clock_ticks_per_second() as f64;
        ticks as f64 / clk
    }

    /// A `VmXxx:` line of /proc/<pid>/status, in MB.
    pub fn status_mb(&self, key: &str) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).expect("read /proc/<pid>/status");
        let kb: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in /proc/<pid>/status"));
        kb / 1024.0
    }

    /// Type into it.
    pub fn send(&mut self, keys: &[u8]) {
        use std::io::Write as _;
        if let Some(writer) = self.writer.as_mut() {
            let _ = writer.write_all(keys);
            let _ = writer.flush();
        }
    }

    /// Wait for it to exit (panics after `deadline`).
    pub fn wait_exit(&mut self, deadline: Duration) {
        let start = Instant::now();
        while !matches!(self.child.try_wait(), Ok(Some(_))) {
            assert!(start.elapsed() < deadline, "the console did not exit within {deadline:?}");
            thread::sleep(Duration::from_millis(5));
        }
    }
}
