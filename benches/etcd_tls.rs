//! The fence over TLS (issue 40): acquire+release against one etcd 3.4 node over plain
//! http and another over TLS with client certificates (`--client-cert-auth`, made by
//! openssl here), and against `etcdctl lock` on each, as whole processes, since a
//! process is what a script or a gateway runs (connect, handshake, grant, transaction,
//! release, revoke):
//!
//! - `leasectl run S -q -- true`: acquire, hold, release in one process;
//! - `leasectl acquire S` then `leasectl release ID`: two processes;
//! - `etcdctl lock S true`: etcd's own lock, one process;
//! - floor: `etcdctl get K`, one process, one read.
//!
//! Every row runs on both nodes, the rows and nodes interleaved run by run (this machine
//! is noisy: pairs, not separate batches); medians and the median of the paired ratios.
//! Plain main (harness = false). `--quick`: 10 runs. Without `--bench` (under `cargo test
//! --benches`): 2 runs. Needs `etcd`, `etcdctl` and `openssl` on PATH.

mod support;

#[allow(dead_code)]
#[path = "../tests/common/certs.rs"]
mod certs;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::median;

const BIN: &str = env!("CARGO_BIN_EXE_leasectl");

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// One etcd node; killed when dropped.
struct Node {
    child: Child,
    endpoint: String,
    /// `--cacert/--cert/--key` for a client (empty: plain http).
    tls: Vec<String>,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Node {
    fn start(dir: &Path, name: &str, tls: bool) -> Node {
        let scheme = if tls { "https" } else { "http" };
        let endpoint = format!("{scheme}://127.0.0.1:{}", free_port());
        let peer = format!("http://127.0.0.1:{}", free_port());
        let p = |n: &str| dir.join(n).display().to_string();
        let mut cmd = Command::new("etcd");
        cmd.args(["--name", name, "--data-dir", &p(&format!("{name}.data"))])
            .args(["--listen-client-urls", &endpoint, "--advertise-client-urls", &endpoint])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("{name}={peer}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if tls {
            cmd.args(["--cert-file", &p("server.crt"), "--key-file", &p("server.key"), "--client-cert-auth"])
                .args(["--trusted-ca-file", &p("ca.crt")]);
        }
        let tls = if tls {
            vec!["--cacert".into(), p("ca.crt"), "--cert".into(), p("client.crt"), "--key".into(), p("client.key")]
        } else {
            vec![]
        };
        let node = Node { child: cmd.spawn().expect("etcd on PATH (apt-get install etcd-server)"), endpoint, tls };
        let started = Instant::now();
        while !node.etcdctl(&["endpoint", "health"]).status().is_ok_and(|s| s.success()) {
            assert!(started.elapsed() < Duration::from_secs(30), "etcd at {} did not start", node.endpoint);
            std::thread::sleep(Duration::from_millis(100));
        }
        node
    }

    fn etcdctl(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("etcdctl");
        cmd.env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.endpoint])
            .args(&self.tls)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }

    fn leasectl(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(["--backend", "etcd", "--endpoints", &self.endpoint, "--prefix", "/bench/"])
            .args(&self.tls)
            .args(args)
            .env_remove("HERMES_HOME")
            .stdin(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }
}

/// How long `cmd` takes, whole; it must succeed.
fn timed(mut cmd: Command) -> f64 {
    let started = Instant::now();
    let status = cmd.stdout(Stdio::null()).status().expect("run");
    assert!(status.success(), "{cmd:?} failed: {status}");
    started.elapsed().as_secs_f64()
}

/// `acquire` then `release` of its lease, two processes; the sum.
fn acquire_release(node: &Node) -> f64 {
    let started = Instant::now();
    let me = std::process::id().to_string();
    let out = node.leasectl(&["acquire", "BENCH-AR", "--owner-pid", &me, "--json"]).output().expect("acquire");
    assert!(out.status.success(), "acquire failed");
    let grant: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let lease = grant["lease_id"].as_str().expect("a lease id").to_owned();
    let mut release = node.leasectl(&["release", &lease]);
    release.stdout(Stdio::null());
    assert!(release.status().expect("release").success(), "release failed");
    started.elapsed().as_secs_f64()
}

type Row = (&'static str, fn(&Node) -> f64);

fn main() {
    let runs = if !support::benchmarking() {
        2
    } else if support::quick() {
        10
    } else {
        30
    };
    let dir = tempfile::tempdir().expect("temp dir");
    certs::certificates(dir.path(), "ca", &["server", "client"]);
    let plain = Node::start(dir.path(), "plain", false);
    let tls = Node::start(dir.path(), "tls", true);
    let rows: [Row; 4] = [
        ("leasectl run S -q -- true", |n| timed(n.leasectl(&["run", "BENCH-RUN", "-q", "--", "true"]))),
        ("leasectl acquire + release", acquire_release),
        ("etcdctl lock S true", |n| timed(n.etcdctl(&["lock", "BENCH-LOCK", "true"]))),
        ("floor: etcdctl get K", |n| timed(n.etcdctl(&["get", "BENCH-K"]))),
    ];
    // Warm the page cache and both nodes once.
    for (_, f) in &rows {
        f(&plain);
        f(&tls);
    }
    let mut times: Vec<[Vec<f64>; 2]> = rows.iter().map(|_| [Vec::new(), Vec::new()]).collect();
    for run in 0..runs {
        for (r, (_, f)) in rows.iter().enumerate() {
            // Alternate which node goes first, so neither always runs warm after the other.
            let order: [usize; 2] = if run % 2 == 0 { [0, 1] } else { [1, 0] };
            for node in order {
                times[r][node].push(f(if node == 0 { &plain } else { &tls }));
            }
        }
    }
    println!("etcd 3.4, one local node each; {runs} runs, medians (ms); ratios are medians of the pairs");
    println!("{:<30} {:>9} {:>9} {:>9}", "", "http", "TLS", "TLS/http");
    for (r, (name, _)) in rows.iter().enumerate() {
        let [h, t] = &times[r];
        let ratios: Vec<f64> = h.iter().zip(t).map(|(h, t)| t / h).collect();
        println!("{name:<30} {:>9.1} {:>9.1} {:>8.2}x", median(h) * 1e3, median(t) * 1e3, median(&ratios));
    }
    let (run, lock) = (&times[0], &times[2]);
    for (node, name) in ["http", "TLS"].iter().enumerate() {
        let ratios: Vec<f64> = run[node].iter().zip(&lock[node]).map(|(r, l)| r / l).collect();
        println!("leasectl run / etcdctl lock over {name}: {:.2}x", median(&ratios));
    }
}
