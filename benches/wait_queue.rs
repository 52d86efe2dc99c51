//! Jobs queued on one session with `run --wait`: 100 `leasectl run S --wait 600 -q --
//! sleep 0.05` started at once, each waiting its turn. Measured: the wall time until the
//! last one is done, against the sum of the jobs' own time (100 x 50 ms = 5 s); the
//! ratio is the queue's overhead. On a registry file, and on etcd when the `etcd` binary
//! is on PATH (a node of its own on free ports) and the build has the etcd backend.
//!
//! Plain main (harness = false). Without `--bench` (under `cargo test --benches`): 5 jobs.
//! `WAIT_QUEUE_BIN` measures another build side by side; `WAIT_QUEUE_JOBS=N` sets the count.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BUILT: &str = env!("CARGO_BIN_EXE_leasectl");
const JOB: Duration = Duration::from_millis(50);

fn binary() -> String {
    std::env::var("WAIT_QUEUE_BIN").unwrap_or_else(|_| BUILT.to_owned())
}

/// Start `jobs` queued runs with these registry options; the wall time until all are done.
fn queue(registry: &[String], jobs: usize) -> Duration {
    let started = Instant::now();
    let children: Vec<Child> = (0..jobs)
        .map(|_| {
            Command::new(binary())
                .args(registry)
                .args(["run", "QUEUED", "--wait", "600", "-q", "--", "sleep", &format!("{}", JOB.as_secs_f64())])
                .env_remove("HERMES_HOME")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn leasectl")
        })
        .collect();
    for mut child in children {
        let status = child.wait().expect("wait");
        assert!(status.success(), "a queued job failed: {status}");
    }
    started.elapsed()
}

fn report(backend: &str, jobs: usize, took: Duration) {
    let own = JOB * jobs as u32;
    println!(
        "{backend:>6}  {jobs:>5}  {:>9.2}s  {:>9.2}s  {:>6.2}x",
        took.as_secs_f64(),
        own.as_secs_f64(),
        took.as_secs_f64() / own.as_secs_f64()
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// A single-node etcd of the bench's own (its data dir kept as long as it runs), killed
/// when dropped.
struct Etcd {
    child: Child,
    _data: tempfile::TempDir,
    endpoint: String,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_etcd() -> Option<Etcd> {
    let dir = tempfile::tempdir().ok()?;
    let (client, peer) = (format!("http://127.0.0.1:{}", free_port()), format!("http://127.0.0.1:{}", free_port()));
    let child = Command::new("etcd")
        .args(["--name", "bench", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
        .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
        .args(["--initial-cluster", &format!("bench={peer}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let etcd = Etcd { child, _data: dir, endpoint: client };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let up = Command::new("etcdctl")
            .args(["--endpoints", &etcd.endpoint, "endpoint", "health"])
            .env("ETCDCTL_API", "3")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if up {
            return Some(etcd);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

/// Whether this build takes `--backend etcd`.
fn has_etcd_backend() -> bool {
    Command::new(binary()).args(["--backend", "etcd", "--help"]).output().is_ok_and(|o| o.status.success())
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    if !Path::new(&binary()).is_file() {
        eprintln!("wait_queue: {} is missing; build it first with `cargo build --release`", binary());
        std::process::exit(1);
    }
    let jobs: usize =
        std::env::var("WAIT_QUEUE_JOBS").ok().and_then(|n| n.parse().ok()).unwrap_or(if bench { 100 } else { 5 });
    println!("{jobs} jobs of {} ms queued on one session with run --wait ({})", JOB.as_millis(), binary());
    println!("{:>6}  {:>5}  {:>10}  {:>10}  {:>7}", "store", "jobs", "wall", "jobs' own", "ratio");
    let home = tempfile::tempdir().expect("temp home");
    let file = vec!["--home".to_owned(), home.path().display().to_string()];
    report("file", jobs, queue(&file, jobs));
    if !has_etcd_backend() {
        println!("  etcd: this build has no etcd backend");
        return;
    }
    let Some(etcd) = start_etcd() else {
        println!("  etcd: no `etcd` on PATH (apt-get install etcd-server) or it did not start");
        return;
    };
    let on_etcd = vec!["--backend".into(), "etcd".into(), "--endpoints".into(), etcd.endpoint.clone()];
    report("etcd", jobs, queue(&on_etcd, jobs));
}
