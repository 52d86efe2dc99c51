//! The fleet as one (issue 39), beside `hosts`: 20 "hosts", each a real sshd of its own
//! this bench starts (tests/common/sshd.rs; its own port, so its own shared connection,
//! as 20 machines would have), each a home with a root and two profiles of 100 leases
//! owned by live `sleep` processes. Measured with the real binary:
//!
//! - `ls` and `--all-profiles ls` over the 20 hosts, cold (`LEASECTL_SSH_PERSIST=0`: a
//!   new connection a host, every run) and warm (a shared connection a host, opened by a
//!   first run and kept by its persist), side by side, alternating;
//! - the console (200x60 pty, `all` tab): from its start until every registry of the 20
//!   hosts is listed (every lease counted alive), cold;
//! - its idle cost over a window with nothing changing (% of one core).
//!
//! Plain main (harness = false). `--quick`: 5 runs, 5 s window. Without `--bench` (under
//! `cargo test --benches`): 3 hosts, 2 runs, 1 s.

mod support;

#[allow(dead_code)]
#[path = "../tests/common/sshd.rs"]
mod sshd;
mod process {
    pub const BIN: &str = env!("CARGO_BIN_EXE_leasectl");
}

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use leasectl::lease::Registry;
use support::console::Console;
use support::{Sleepers, median};

const BIN: &str = process::BIN;
const PROFILES: [&str; 2] = ["work", "ops"];

struct Setup {
    hosts: usize,
    leases: usize,
    runs: usize,
    window: Duration,
}

/// `dir/hNN`: a root and its profiles, each filled.
fn homes(dir: &Path, s: &Setup, owners: &[support::Owner]) -> Vec<PathBuf> {
    (0..s.hosts)
        .map(|i| {
            let home = dir.join(format!("h{i:02}"));
            fs::create_dir_all(home.join("runtime")).expect("home");
            support::fill(&Registry::new("root", &home), s.leases, owners);
            for p in PROFILES {
                let profile = home.join("profiles").join(p);
                fs::create_dir_all(profile.join("runtime")).expect("profile");
                support::fill(&Registry::new(p, &profile), s.leases, owners);
            }
            home
        })
        .collect()
}

fn host_args(servers: &[sshd::Sshd], homes: &[PathBuf]) -> Vec<String> {
    homes
        .iter()
        .zip(servers)
        .enumerate()
        .flat_map(|(i, (h, server))| ["--host".to_owned(), server.spec(&format!("h{i:02}"), h)])
        .collect()
}

/// The ssh environment: the bench's keys, this build on the remote side, and the shared
/// connections' sockets in `runtime` (`persist` seconds; 0: none).
fn env(sshd: &sshd::Sshd, runtime: &Path, persist: u64) -> Vec<(String, String)> {
    vec![
        ("LEASECTL_SSH_COMMAND".into(), sshd.ssh_command()),
        ("LEASECTL_REMOTE_COMMAND".into(), BIN.into()),
        ("XDG_CONFIG_HOME".into(), sshd.dir().display().to_string()),
        ("XDG_RUNTIME_DIR".into(), runtime.display().to_string()),
        ("LEASECTL_SSH_PERSIST".into(), persist.to_string()),
        ("TERM".into(), "xterm-256color".into()),
    ]
}

/// One whole `leasectl ARGS` run, in seconds; it must succeed.
fn timed(args: &[String], env: &[(String, String)]) -> f64 {
    let t0 = Instant::now();
    let out = Command::new(BIN)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env_remove("LEASECTL_HOSTS")
        .env_remove("HERMES_HOME")
        .stdin(Stdio::null())
        .output()
        .expect("run leasectl");
    let took = t0.elapsed().as_secs_f64();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    took
}

fn summary(label: &str, xs: &[f64]) -> f64 {
    let min = xs.iter().copied().fold(f64::MAX, f64::min);
    let max = xs.iter().copied().fold(0.0, f64::max);
    let m = median(xs);
    println!("{label:<44} {m:>8.3} {min:>8.3} {max:>8.3}");
    m
}

fn main() {
    let s = if !support::benchmarking() {
        Setup { hosts: 3, leases: 20, runs: 2, window: Duration::from_secs(1) }
    } else if support::quick() {
        Setup { hosts: 20, leases: 100, runs: 5, window: Duration::from_secs(5) }
    } else {
        Setup { hosts: 20, leases: 100, runs: 15, window: Duration::from_secs(15) }
    };
    let sshd = sshd::Sshd::start();
    let mut servers: Vec<sshd::Sshd> = (1..s.hosts).map(|_| sshd.another()).collect();
    servers.insert(0, sshd.another());
    let dir = tempfile::tempdir().expect("dir");
    let sleepers = Sleepers::spawn(4);
    let owners = sleepers.owners();
    let homes = homes(dir.path(), &s, &owners);
    let hosts = host_args(&servers, &homes);
    let registries = s.hosts * (1 + PROFILES.len());
    println!(
        "{} hosts x {} registries x {} leases over ssh, {} runs each",
        s.hosts,
        1 + PROFILES.len(),
        s.leases,
        s.runs
    );
    println!("{:<44} {:>8} {:>8} {:>8}", "whole run, s", "median", "min", "max");

    let cold_dir = tempfile::tempdir().expect("runtime");
    let warm_dir = tempfile::tempdir().expect("runtime");
    let cold = env(&sshd, cold_dir.path(), 0);
    let warm = env(&sshd, warm_dir.path(), 60);
    for (what, extra) in [("ls", vec!["ls"]), ("--all-profiles ls", vec!["--all-profiles", "ls"])] {
        let mut args = hosts.clone();
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        args.extend(["-o".to_owned(), "tsv".to_owned()]);
        // The warm side's connections are opened once, then kept by their persist.
        timed(&args, &warm);
        let (mut c, mut w) = (Vec::new(), Vec::new());
        for _ in 0..s.runs {
            c.push(timed(&args, &cold));
            w.push(timed(&args, &warm));
        }
        let cm = summary(&format!("{what}, cold (a connection a host)"), &c);
        let wm = summary(&format!("{what}, warm (shared within the persist)"), &w);
        println!("{:<44} {:>8.2}", "  warm / cold", wm / cm);
    }

    // The floor: 20 parallel `ssh true`, cold and through shared connections as
    // leasectl's (the same options), side by side.
    let floor = |persist: u64, runtime: &Path| -> f64 {
        let t0 = Instant::now();
        thread::scope(|scope| {
            for server in &servers {
                scope.spawn(move || {
                    let mut cmd = Command::new("sh");
                    cmd.arg("-c").arg(format!("{} \"$@\"", server.ssh_command())).arg("ssh");
                    cmd.args(["-T", "-o", "BatchMode=yes"]);
                    if persist > 0 {
                        cmd.args(["-o", "ControlMaster=auto", "-o", "ControlPersist=60"]);
                        cmd.arg("-o").arg(format!("ControlPath={}/floor-%C", runtime.display()));
                    }
                    cmd.args(["-p", &server.port.to_string(), "-l", &server.user, "--", "127.0.0.1", "true"]);
                    let status = cmd.stdin(Stdio::null()).stdout(Stdio::null()).status().expect("ssh");
                    assert!(status.success(), "ssh true");
                });
            }
        });
        t0.elapsed().as_secs_f64()
    };
    floor(60, warm_dir.path());
    let (mut c, mut w) = (Vec::new(), Vec::new());
    for _ in 0..s.runs {
        c.push(floor(0, cold_dir.path()));
        w.push(floor(60, warm_dir.path()));
    }
    summary(&format!("floor: {} parallel `ssh true`, cold", s.hosts), &c);
    summary(&format!("floor: {} parallel `ssh true`, shared", s.hosts), &w);

    // The console, cold: until every registry's every lease is counted.
    let total = registries * s.leases;
    let mut args = hosts.clone();
    args.push("tui".into());
    let console_dir = tempfile::tempdir().expect("runtime");
    let mut listed = Vec::new();
    let mut idle = 0.0;
    for run in 0..s.runs.min(5) {
        let t0 = Instant::now();
        let mut console = Console::start_with(BIN, &args, &env(&sshd, console_dir.path(), 0), 60, 200);
        console.wait_for("h00:root", Duration::from_secs(60));
        // The all tab: its header counts every lease of every registry read.
        console.send(b"T");
        thread::sleep(Duration::from_millis(100));
        console.send(b"all\r");
        console.wait_for(&format!("{registries} registries on {} hosts", s.hosts), Duration::from_secs(60));
        console.wait_for(&format!("● {total} alive"), Duration::from_secs(60));
        listed.push(t0.elapsed().as_secs_f64());
        if run == 0 {
            thread::sleep(Duration::from_secs(2));
            let before = console.cpu_seconds();
            thread::sleep(s.window);
            idle = (console.cpu_seconds() - before) / s.window.as_secs_f64() * 100.0;
        }
        drop(console);
    }
    summary(&format!("console: all {registries} registries listed"), &listed);
    println!("console idle over {:.0} s: {idle:.2} % of one core", s.window.as_secs_f64());
}
