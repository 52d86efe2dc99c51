//! Many hosts over SSH (`--host`), side by side with the same homes read locally.
//!
//! A real sshd this bench starts (own keys, a free loopback port; see
//! tests/common/sshd.rs) carries 20 "hosts": 20 homes of 1,000 leases each, owned by
//! live `sleep` processes. The same registries are also copied into one root's 20
//! profiles, read locally. Measured, with the real binary:
//!
//! - `ls -w -o json`: from an acquire on one home (t0 just before it; each change goes
//!   to the next host in turn) until ls -w prints the new lease's line;
//! - the console (200x60 pty, the `all` tab filtered to the new sessions): from the
//!   acquire until the new session id is on screen;
//! - with them, always: a host behind a link that holds each chunk 300 ms (an empty
//!   home) and a closed port: neither may slow the others;
//! - idle cost: CPU of the console and of each remote `serve --stdio` over a window
//!   with nothing changing (% of one core), and how many `serve` processes (SSH
//!   sessions) the console holds: one a host.
//!
//! Plain main (harness = false). `--quick`: 20 changes, 5 s window. Without `--bench`
//! (under `cargo test --benches`): 2 hosts of 100 leases, 3 changes.

mod support;

#[allow(dead_code)]
#[path = "../tests/common/sshd.rs"]
mod sshd;
mod process {
    pub const BIN: &str = env!("CARGO_BIN_EXE_leasectl");
}

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::thread;
use std::time::{Duration, Instant};

use leasectl::lease::{self, Registry};
use support::console::Console;
use support::{Owner, Sleepers, quantile};

const BIN: &str = process::BIN;

struct Setup {
    hosts: usize,
    leases: usize,
    changes: usize,
    window: Duration,
}

/// The homes: `dir/hNN` (one root each, behind sshd) and `dir/local/profiles/hNN` (the
/// same registries, one local root).
fn homes(dir: &Path, s: &Setup, owners: &[Owner]) -> (Vec<PathBuf>, PathBuf) {
    let local = dir.join("local");
    let mut remote = Vec::new();
    for i in 0..s.hosts {
        let home = dir.join(format!("h{i:02}"));
        fs::create_dir_all(home.join("runtime")).expect("home");
        support::fill(&Registry::new("root", &home), s.leases, owners);
        let profile = local.join("profiles").join(format!("h{i:02}"));
        fs::create_dir_all(profile.join("runtime")).expect("profile");
        fs::copy(home.join("runtime/active_sessions.json"), profile.join("runtime/active_sessions.json"))
            .expect("copy");
        remote.push(home);
    }
    (remote, local)
}

/// The 20 hosts, a slow one (behind `slow`, an empty home) and a closed port.
fn host_args(sshd: &sshd::Sshd, remote: &[PathBuf], slow: &(sshd::SlowProxy, PathBuf)) -> Vec<String> {
    let mut args: Vec<String> =
        remote.iter().enumerate().flat_map(|(i, h)| ["--host".to_owned(), sshd.spec(&format!("h{i:02}"), h)]).collect();
    let (proxy, empty) = slow;
    args.push("--host".into());
    args.push(format!("slow=ssh://{}@127.0.0.1:{}{}", sshd.user, proxy.port, empty.display()));
    args.push("--host".into());
    args.push(format!("closed=ssh://{}@127.0.0.1:1/nowhere", sshd.user));
    args
}

fn with_ssh(cmd: &mut Command, sshd: &sshd::Sshd) {
    cmd.env("LEASECTL_SSH_COMMAND", sshd.ssh_command())
        .env("LEASECTL_REMOTE_COMMAND", BIN)
        .env("XDG_CONFIG_HOME", sshd.dir())
        .env_remove("LEASECTL_HOSTS")
        .env_remove("HERMES_HOME");
}

/// An acquire of a new session on `home` (in this process, as any client's would be).
fn acquire(home: &Path, session: &str, owner: u64) {
    let mut req = support::request(owner);
    req.session_id = session.to_owned();
    lease::file::acquire(&Registry::new("root", home), &req).expect("granted");
}

/// Lines of a child's stdout, on a thread.
fn lines(child: &mut Child) -> Receiver<String> {
    let out = child.stdout.take().expect("stdout piped");
    let (tx, rx) = channel();
    thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn wait_line(rx: &Receiver<String>, needle: &str) -> Duration {
    let t0 = Instant::now();
    loop {
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("no line with {needle}"));
        if line.contains(needle) {
            return t0.elapsed();
        }
    }
}

/// `ls -w` latencies (ms), one per change; `homes_changed` is where each change goes.
fn ls_watch(mut cmd: Command, homes_changed: &[PathBuf], s: &Setup, owner: u64, tag: &str) -> Vec<f64> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = cmd.spawn().expect("ls -w");
    let rx = lines(&mut child);
    // Every lease listed first (a `present` line each), then quiet.
    let started = Instant::now();
    let mut present = 0;
    while present < s.hosts * s.leases {
        let line = rx.recv_timeout(Duration::from_secs(60)).expect("ls -w lists every lease");
        present += usize::from(line.contains("\"present\""));
    }
    let listed = started.elapsed();
    while rx.recv_timeout(Duration::from_millis(500)).is_ok() {}
    println!("{tag}: every lease listed {:.2} s after start", listed.as_secs_f64());
    let mut out = Vec::new();
    for k in 0..s.changes {
        let home = &homes_changed[k % homes_changed.len()];
        let session = format!("{tag}-{k}");
        let t0 = Instant::now();
        acquire(home, &session, owner);
        let _ = wait_line(&rx, &format!("\"{session}\""));
        out.push(t0.elapsed().as_secs_f64() * 1e3);
        thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    out
}

/// Console latencies (ms) and the console itself, settled on the `all` tab filtered to
/// this run's sessions.
fn console(mut console: Console, homes_changed: &[PathBuf], s: &Setup, owner: u64, tag: &str) -> (Vec<f64>, Console) {
    console.wait_for("leases", Duration::from_secs(60));
    thread::sleep(Duration::from_secs(3));
    // The last tab is `all`; a filter keeps the new sessions on screen.
    console.send(b"T");
    thread::sleep(Duration::from_millis(200));
    console.send(b"all\r");
    thread::sleep(Duration::from_millis(300));
    console.send(format!("/{tag}\r").as_bytes());
    thread::sleep(Duration::from_millis(500));
    let mut out = Vec::new();
    for k in 0..s.changes {
        let home = &homes_changed[k % homes_changed.len()];
        let session = format!("{tag}-{k:03}");
        let t0 = Instant::now();
        acquire(home, &session, owner);
        console.wait_for(&session, Duration::from_secs(30));
        out.push(t0.elapsed().as_secs_f64() * 1e3);
        thread::sleep(Duration::from_millis(50));
    }
    (out, console)
}

fn console_with(args: &[String], sshd: Option<&sshd::Sshd>) -> Console {
    let mut env: Vec<(String, String)> = vec![("TERM".into(), "xterm-256color".into())];
    if let Some(sshd) = sshd {
        env.push(("LEASECTL_SSH_COMMAND".into(), sshd.ssh_command()));
        env.push(("LEASECTL_REMOTE_COMMAND".into(), BIN.into()));
        env.push(("XDG_CONFIG_HOME".into(), sshd.dir().display().to_string()));
    }
    Console::start_with(BIN, args, &env, 60, 200)
}

/// CPU seconds (utime+stime) of `pid`.
fn cpu(pid: u32) -> f64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { return 0.0 };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 =
        f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0) + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    ticks as f64 / rustix::param::clock_ticks_per_second() as f64
}

/// The `serve --stdio` processes sshd runs for `port`.
fn serve_pids(port: u16) -> Vec<u32> {
    let suffix = format!(" {port}");
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_string_lossy().parse().ok()?;
            let cmdline = fs::read(e.path().join("cmdline")).ok()?;
            let environ = fs::read(e.path().join("environ")).ok()?;
            let serve = cmdline.split(|b| *b == 0).any(|w| w == b"serve");
            let ours = environ
                .split(|b| *b == 0)
                .any(|v| v.strip_prefix(b"SSH_CONNECTION=").is_some_and(|c| c.ends_with(suffix.as_bytes())));
            (serve && ours).then_some(pid)
        })
        .collect()
}

fn row(label: &str, xs: &[f64]) {
    let max = xs.iter().copied().fold(0.0, f64::max);
    println!("{label:<34} {:>8.1} {:>8.1} {:>8.1}", quantile(xs, 0.5), quantile(xs, 0.99), max);
}

fn main() {
    let s = if !support::benchmarking() {
        Setup { hosts: 2, leases: 100, changes: 3, window: Duration::from_secs(1) }
    } else if support::quick() {
        Setup { hosts: 20, leases: 1_000, changes: 20, window: Duration::from_secs(5) }
    } else {
        Setup { hosts: 20, leases: 1_000, changes: 100, window: Duration::from_secs(15) }
    };
    let sshd = sshd::Sshd::start();
    let dir = tempfile::tempdir().expect("dir");
    let sleepers = Sleepers::spawn(4);
    let owners = sleepers.owners();
    let owner = owners[0].pid;
    let (remote, local) = homes(dir.path(), &s, &owners);
    let empty = dir.path().join("slow-home");
    fs::create_dir_all(&empty).expect("slow home");
    let proxy = sshd::SlowProxy::start(sshd.port);
    sshd.trust_port(proxy.port);
    proxy.delay.store(300, std::sync::atomic::Ordering::Relaxed);
    let slow = (proxy, empty);
    let local_profiles: Vec<PathBuf> = (0..s.hosts).map(|i| local.join("profiles").join(format!("h{i:02}"))).collect();
    println!(
        "{} hosts x {} leases over ssh (with a host behind a 300 ms link and a closed port), against the same \
         registries read locally",
        s.hosts, s.leases
    );
    println!("{:<34} {:>8} {:>8} {:>8}", "a change seen, ms", "p50", "p99", "max");

    let mut cmd = Command::new(BIN);
    cmd.args(host_args(&sshd, &remote, &slow)).args(["ls", "-w", "-o", "json"]);
    with_ssh(&mut cmd, &sshd);
    row("ls -w over ssh", &ls_watch(cmd, &remote, &s, owner, "lsw-ssh"));
    let mut cmd = Command::new(BIN);
    cmd.arg("--home").arg(&local).args(["--all-profiles", "ls", "-w", "-o", "json"]).env_remove("HERMES_HOME");
    row("ls -w locally", &ls_watch(cmd, &local_profiles, &s, owner, "lsw-local"));

    let mut args = host_args(&sshd, &remote, &slow);
    args.push("tui".into());
    let (ssh_times, ssh_console) = console(console_with(&args, Some(&sshd)), &remote, &s, owner, "tuissh");
    row("console over ssh", &ssh_times);
    let idle_pids = serve_pids(sshd.port);
    let before: Vec<f64> = idle_pids.iter().map(|p| cpu(*p)).collect();
    let console_before = ssh_console.cpu_seconds();
    thread::sleep(s.window);
    let window = s.window.as_secs_f64();
    let console_idle = (ssh_console.cpu_seconds() - console_before) / window * 100.0;
    let serve_idle: Vec<f64> = idle_pids.iter().zip(&before).map(|(p, b)| (cpu(*p) - b) / window * 100.0).collect();
    drop(ssh_console);

    let local_args = vec!["--home".to_owned(), local.display().to_string(), "tui".to_owned()];
    let (local_times, local_console) = console(console_with(&local_args, None), &local_profiles, &s, owner, "tuilocal");
    row("console locally", &local_times);
    let local_before = local_console.cpu_seconds();
    thread::sleep(s.window);
    let local_idle = (local_console.cpu_seconds() - local_before) / window * 100.0;
    drop(local_console);

    println!();
    println!("idle over {:.0} s, % of one core:", window);
    println!("  console over ssh     {console_idle:.2}");
    println!("  console locally      {local_idle:.2}");
    let max_serve = serve_idle.iter().copied().fold(0.0, f64::max);
    println!(
        "  each serve --stdio   max {max_serve:.2}, mean {:.2} ({} processes for the {} hosts reached: one ssh \
         session a host)",
        serve_idle.iter().sum::<f64>() / serve_idle.len().max(1) as f64,
        idle_pids.len(),
        s.hosts + 1
    );
}
