//! The etcd backend against a real etcd server, through the real binary.
//!
//! The test binary starts its own etcd (the `etcd` binary, a temp data dir, free ports on
//! 127.0.0.1) unless `LEASECTL_ETCD_ENDPOINTS` names one. Each test uses its own key prefix,
//! so tests share the server; the test that stops etcd mid-run starts a server of its own.
#![cfg(feature = "etcd")]

use std::ffi::OsStr;
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use leasectl::lease::etcd::{Etcd, EtcdConfig, fence};
use leasectl::lease::{AcquireRequest, Reason};
use serde_json::Value;

mod common;
mod etcd_cluster;
mod etcd_feed;
mod etcd_listing;
mod etcd_queue;
mod etcd_tls;
use common::Reaped;
use common::pty::{BIN, Pty, eventually};

// ---------------------------------------------------------------------------
// etcd servers
// ---------------------------------------------------------------------------

/// A single-node etcd on 127.0.0.1 with a temp data dir. Dropping it kills it.
struct EtcdServer {
    child: Reaped,
    endpoint: String,
    _data: tempfile::TempDir,
}

/// Data dirs are named after the test process: `leasectl-etcd-<pid>-…`.
const DATA_PREFIX: &str = "leasectl-etcd-";

/// Remove the data dirs of earlier test processes (the shared server's dir outlives its
/// test binary: nothing runs at process exit). Each holds over 100 MB of preallocated WAL.
fn sweep_stale_data_dirs() {
    let Ok(dir) = std::fs::read_dir(env!("CARGO_TARGET_TMPDIR")) else { return };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(DATA_PREFIX).and_then(|r| r.split('-').next()) else { continue };
        let alive = pid.parse::<u32>().is_ok_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port on 127.0.0.1");
    l.local_addr().expect("local addr").port()
}

impl EtcdServer {
    /// Start etcd and wait until it answers a real read. Ports are picked free; a start that
    /// loses a port race is tried again.
    fn start() -> EtcdServer {
        let mut last = String::new();
        for _ in 0..3 {
            match EtcdServer::try_start() {
                Ok(s) => return s,
                Err(e) => last = e,
            }
        }
        panic!("could not start etcd: {last}");
    }

    fn try_start() -> Result<EtcdServer, String> {
        sweep_stale_data_dirs();
        let data = tempfile::Builder::new()
            .prefix(&format!("{DATA_PREFIX}{}-", std::process::id()))
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .map_err(|e| format!("temp data dir: {e}"))?;
        let (client, peer) = (free_port(), free_port());
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        // The server must not outlive the test process (nor the thread that started it):
        // setpriv (util-linux) sets its parent-death signal, then becomes etcd.
        let mut cmd = Command::new("setpriv");
        cmd.args(["--pdeathsig", "KILL", "--", "etcd", "--name", "leasectl-test", "--data-dir"])
            .arg(data.path().join("data"))
            .args(["--listen-client-urls", &client_url, "--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url])
            .arg("--initial-cluster")
            .arg(format!("leasectl-test={peer_url}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(data.path().join("etcd.log")).map_err(|e| format!("log file: {e}"))?,
            ));
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "the `etcd` binary is not on PATH: install it (Debian: apt-get install etcd-server) or set \
                 LEASECTL_ETCD_ENDPOINTS to a running etcd"
            ),
            Err(e) => return Err(format!("spawn etcd: {e}")),
        };
        let mut server = EtcdServer { child: Reaped(child), endpoint: client_url, _data: data };
        let healthy = eventually(Duration::from_secs(20), || {
            if let Ok(Some(_)) = server.child.try_wait() {
                return true;
            }
            answers(&server.endpoint)
        });
        if let Ok(Some(status)) = server.child.try_wait() {
            return Err(format!("etcd exited at start ({status}); a port was probably taken"));
        }
        if !healthy {
            return Err("etcd did not answer within 20s".into());
        }
        Ok(server)
    }
}

/// A real read succeeds.
fn answers(endpoint: &str) -> bool {
    let Ok(mut cfg) = EtcdConfig::new(endpoint, Some("/health-check/"), None) else { return false };
    cfg.timeout = Duration::from_secs(1);
    Etcd::connect(&cfg).and_then(|e| e.list()).is_ok()
}

/// The server every test but one shares: `LEASECTL_ETCD_ENDPOINTS`, or one started for this
/// test binary by a thread that lives as long as the process (so the server does too).
fn shared_endpoint() -> String {
    static SHARED: OnceLock<String> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            if let Some(e) = std::env::var("LEASECTL_ETCD_ENDPOINTS").ok().filter(|e| !e.trim().is_empty()) {
                assert!(answers(&e), "LEASECTL_ETCD_ENDPOINTS={e} does not answer");
                return e;
            }
            let (tx, rx) = std::sync::mpsc::channel();
            thread::spawn(move || {
                let server = EtcdServer::start();
                let _ = tx.send(server.endpoint.clone());
                loop {
                    thread::park();
                }
            });
            rx.recv_timeout(Duration::from_secs(90)).expect("the shared etcd server started")
        })
        .clone()
}

/// A prefix no other test (or earlier run) uses.
fn unique_prefix(test: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("/leasectl-test/{test}-{}-{nanos}/", std::process::id())
}

// ---------------------------------------------------------------------------
// The binary
// ---------------------------------------------------------------------------

fn leasectl(endpoint: &str, prefix: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["--backend", "etcd", "--endpoints", endpoint, "--prefix", prefix])
        .args(args)
        .env_remove("HERMES_HOME")
        .stdin(Stdio::null());
    cmd
}

/// The console on `prefix` in a pseudo-terminal of `rows` x `cols`, and its working dir.
fn console_on(endpoints: &str, prefix: &str, rows: u16, cols: u16) -> (Pty, tempfile::TempDir) {
    let cwd = tempfile::tempdir().expect("tempdir");
    let args: Vec<&OsStr> = ["--backend", "etcd", "--endpoints", endpoints, "--prefix", prefix, "tui"]
        .into_iter()
        .map(OsStr::new)
        .collect();
    (Pty::spawn("console", &args, &[], cwd.path(), rows, cols), cwd)
}

fn run(endpoint: &str, prefix: &str, args: &[&str]) -> Output {
    leasectl(endpoint, prefix, args).output().expect("run leasectl")
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn me() -> String {
    std::process::id().to_string()
}

/// The leases under a prefix, as `ls --json` lists them.
fn listed(endpoint: &str, prefix: &str) -> Vec<Value> {
    let out = run(endpoint, prefix, &["ls", "--json"]);
    assert!(out.status.success(), "ls failed: {}", String::from_utf8_lossy(&out.stderr));
    json_of(&out)["leases"].as_array().cloned().unwrap_or_default()
}

/// A `leasectl` child killed and reaped when dropped.
/// A holder, and (for `run`, whose grant line comes on stderr) the rest of its stderr, read on a thread.
struct Proc(common::Reaped, Option<thread::JoinHandle<String>>);

impl Proc {
    fn signal(&self, sig: i32) {
        let _ = common::signals::kill(self.0.id(), sig);
    }

    /// Wait (bounded) for the exit; the exit code and stderr.
    fn wait_exit(&mut self, deadline: Duration) -> (Option<i32>, String, Duration) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.0.try_wait().expect("try_wait") {
                let mut err = String::new();
                if let Some(mut e) = self.0.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                if let Some(rest) = self.1.take() {
                    err.push_str(&rest.join().unwrap_or_default());
                }
                return (status.code(), err, start.elapsed());
            }
            assert!(start.elapsed() < deadline, "leasectl did not exit within {deadline:?}");
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Start `leasectl ... hold|run ... --json` and return it once its grant line is out.
fn start_holding(endpoint: &str, prefix: &str, args: &[&str]) -> (Proc, Value) {
    let mut child =
        leasectl(endpoint, prefix, args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn leasectl");
    // run's grant line is on stderr (its stdout is CMD's), and the rest of stderr is
    // kept for wait_exit; hold's grant is on stdout.
    let run = args.first() == Some(&"run");
    let stream: Box<dyn std::io::Read + Send> = if run {
        Box::new(child.stderr.take().expect("piped stderr"))
    } else {
        Box::new(child.stdout.take().expect("piped stdout"))
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = thread::spawn(move || {
        let mut reader = std::io::BufReader::new(stream);
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut reader, &mut line);
        let _ = tx.send(line);
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut reader, &mut rest);
        rest
    });
    let proc = Proc(common::Reaped(child), run.then_some(reader));
    let line = rx.recv_timeout(Duration::from_secs(10)).expect("the holder printed its grant within 10s");
    let grant: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("grant line is not JSON ({e}): {line:?}"));
    assert_eq!(grant["granted"], true, "not granted: {grant}");
    (proc, grant)
}

// ---------------------------------------------------------------------------
// The fence
// ---------------------------------------------------------------------------

#[test]
fn sixteen_clients_racing_on_one_session_get_exactly_one_grant() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("race");
    let me = me();
    let start = Arc::new(Barrier::new(16));
    let racers: Vec<_> = (0..16)
        .map(|i| {
            let (endpoint, prefix, me, start) = (endpoint.clone(), prefix.clone(), me.clone(), Arc::clone(&start));
            thread::spawn(move || {
                let live = format!("racer-{i}");
                let mut cmd = leasectl(
                    &endpoint,
                    &prefix,
                    &["acquire", "RACE", "--owner-pid", &me, "--live-id", &live, "--ttl", "30", "--json"],
                );
                start.wait();
                cmd.output().expect("run leasectl acquire")
            })
        })
        .collect();
    let outs: Vec<Output> = racers.into_iter().map(|t| t.join().expect("racer thread")).collect();
    let codes: Vec<Option<i32>> = outs.iter().map(|o| o.status.code()).collect();
    let granted = codes.iter().filter(|c| **c == Some(0)).count();
    let refused =
        outs.iter().filter(|o| o.status.code() == Some(3) && json_of(o)["reason"] == "SESSION_NOT_OWNED").count();
    assert_eq!((granted, refused), (1, 15), "exit codes: {codes:?}");
    let leases = listed(&endpoint, &prefix);
    assert_eq!(leases.len(), 1, "one session key: {leases:?}");
    let winner = outs.iter().find(|o| o.status.success()).map(json_of).expect("a winner");
    assert_eq!(leases[0]["entry"]["lease_id"], winner["lease_id"]);
    assert_eq!(leases[0]["fencing_token"], winner["fencing_token"]);
}

/// The same race in one instant: 16 clients, each with its own connection already open,
/// released together, so their reads overlap and only the transaction's compare decides.
fn race_connected_clients(sessions: impl Fn(usize) -> String, cap: Option<u64>) -> (String, Vec<Result<i64, Reason>>) {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("instant");
    let start = Arc::new(Barrier::new(16));
    let clients: Vec<_> = (0..16)
        .map(|i| {
            let cfg = EtcdConfig::new(&endpoint, Some(&prefix), Some(30)).expect("config");
            let start = Arc::clone(&start);
            let req = AcquireRequest {
                session_id: sessions(i),
                surface: Some("gateway".into()),
                metadata: serde_json::Map::new(),
                owner_pid: u64::from(std::process::id()),
                cap,
                track_liveness: false,
                lock_timeout: Duration::ZERO,
            };
            thread::spawn(move || {
                let etcd = Etcd::connect(&cfg).expect("connect");
                etcd.list().expect("warm the connection up");
                start.wait();
                fence::acquire(&etcd, &req).map(|g| g.fencing_token().unwrap_or(0)).map_err(|r| r.reason)
            })
        })
        .collect();
    (prefix, clients.into_iter().map(|t| t.join().expect("client thread")).collect())
}

#[test]
fn sixteen_connected_clients_released_at_once_get_exactly_one_grant() {
    for round in 0..5 {
        let (prefix, results) = race_connected_clients(|_| "INSTANT".into(), None);
        let granted = results.iter().filter(|r| r.is_ok()).count();
        let refused = results.iter().filter(|r| **r == Err(Reason::SessionNotOwned)).count();
        assert_eq!((granted, refused), (1, 15), "round {round}: {results:?}");
        assert_eq!(listed(&shared_endpoint(), &prefix).len(), 1);
    }
}

#[test]
fn connected_clients_released_at_once_never_exceed_the_cap() {
    for round in 0..5 {
        let (prefix, results) = race_connected_clients(|i| format!("SLOT-{i}"), Some(4));
        let granted = results.iter().filter(|r| r.is_ok()).count();
        let full = results.iter().filter(|r| **r == Err(Reason::MaxConcurrentSessions)).count();
        assert_eq!((granted, full), (4, 12), "round {round}: {results:?}");
        let ls = json_of(&run(&shared_endpoint(), &prefix, &["ls", "--json"]));
        assert_eq!(ls["slots_used"].as_array().map(Vec::len), Some(4));
        assert_eq!(ls["leases"].as_array().map(Vec::len), Some(4));
    }
}

#[test]
fn the_cap_holds_across_clients_and_a_release_frees_a_slot() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("cap");
    let me = me();
    let start = Arc::new(Barrier::new(8));
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let (endpoint, prefix, me, start) = (endpoint.clone(), prefix.clone(), me.clone(), Arc::clone(&start));
            thread::spawn(move || {
                let session = format!("CAP-{i}");
                let mut cmd = leasectl(
                    &endpoint,
                    &prefix,
                    &["acquire", &session, "--owner-pid", &me, "--max", "3", "--ttl", "30", "--json"],
                );
                start.wait();
                cmd.output().expect("run leasectl acquire")
            })
        })
        .collect();
    let outs: Vec<Output> = clients.into_iter().map(|t| t.join().expect("client thread")).collect();
    let codes: Vec<Option<i32>> = outs.iter().map(|o| o.status.code()).collect();
    let granted: Vec<Value> = outs.iter().filter(|o| o.status.success()).map(json_of).collect();
    let at_cap =
        outs.iter().filter(|o| o.status.code() == Some(4) && json_of(o)["reason"] == "MAX_CONCURRENT_SESSIONS").count();
    assert_eq!((granted.len(), at_cap), (3, 5), "exit codes: {codes:?}");
    let mut slots: Vec<u64> = granted.iter().filter_map(|g| g["slot"].as_u64()).collect();
    slots.sort_unstable();
    assert_eq!(slots, vec![0, 1, 2], "each grant holds its own slot");
    let ls = json_of(&run(&endpoint, &prefix, &["ls", "--json"]));
    assert_eq!(ls["slots_used"].as_array().map(Vec::len), Some(3));

    // Full: one more is refused, with the reason on stderr's first line.
    let full = run(&endpoint, &prefix, &["acquire", "CAP-extra", "--owner-pid", &me, "--max", "3"]);
    assert_eq!(full.status.code(), Some(4));
    let err = String::from_utf8_lossy(&full.stderr);
    assert!(err.starts_with("hermes-refusal-reason: MAX_CONCURRENT_SESSIONS\n"), "{err}");
    assert!(err.contains("active session limit (3/3)"), "{err}");
    // The advice names what sets the cap here (--max), not a config.yaml etcd never reads.
    assert!(err.contains("(--max)") && !err.contains("max_concurrent_sessions"), "{err}");
    // The cap the holders were granted under is known (the console said "no cap").
    let metrics = String::from_utf8_lossy(&run(&endpoint, &prefix, &["metrics"]).stdout).into_owned();
    assert!(metrics.lines().any(|l| l.starts_with("leasectl_cap{") && l.ends_with(" 3")), "{metrics}");

    // A release frees its slot for the next client.
    let lease = granted[0]["lease_id"].as_str().expect("lease id");
    let released = json_of(&run(&endpoint, &prefix, &["release", lease, "--json"]));
    assert_eq!(released["released"], true);
    let again = run(&endpoint, &prefix, &["release", lease, "--json"]);
    assert_eq!(json_of(&again)["already_gone"], true, "release is idempotent");
    let next = run(&endpoint, &prefix, &["acquire", "CAP-extra", "--owner-pid", &me, "--max", "3", "--json"]);
    assert!(next.status.success(), "{}", String::from_utf8_lossy(&next.stderr));
    assert_eq!(json_of(&next)["slot"], granted[0]["slot"]);
}

#[test]
fn the_same_writer_replaces_its_own_entry_and_others_are_refused() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("writer");
    let me = me();
    let acquire = |live: &str| {
        run(&endpoint, &prefix, &["acquire", "W", "--owner-pid", &me, "--live-id", live, "--max", "2", "--json"])
    };
    let first = json_of(&acquire("tab-1"));
    let again = acquire("tab-1");
    assert!(again.status.success(), "same writer re-enters: {}", String::from_utf8_lossy(&again.stdout));
    let again = json_of(&again);
    assert_eq!(again["replaced"], first["lease_id"]);
    assert_eq!(again["slot"], first["slot"], "the same writer keeps its slot");
    let other = acquire("tab-2");
    assert_eq!(other.status.code(), Some(3), "another live id is another writer");
    let leases = listed(&endpoint, &prefix);
    assert_eq!(leases.len(), 1);
    assert_eq!(leases[0]["entry"]["lease_id"], again["lease_id"]);
    let ls = json_of(&run(&endpoint, &prefix, &["ls", "--json"]));
    assert_eq!(ls["slots_used"].as_array().map(Vec::len), Some(1), "no slot leaked by the replacement");
}

#[test]
fn fencing_tokens_strictly_increase() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("tokens");
    let me = me();
    let mut tokens = Vec::new();
    for i in 0..6 {
        let session = format!("T{}", i % 2);
        let out = run(&endpoint, &prefix, &["acquire", &session, "--owner-pid", &me, "--live-id", "w", "--json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let grant = json_of(&out);
        tokens.push(grant["fencing_token"].as_i64().expect("a token"));
        if i % 3 == 2 {
            let lease = grant["lease_id"].as_str().expect("lease id");
            assert!(run(&endpoint, &prefix, &["release", lease]).status.success());
        }
    }
    // Other clients writing under other prefixes only push the revision further.
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens: {tokens:?}");
    for lease in listed(&endpoint, &prefix) {
        let token = lease["fencing_token"].as_i64().expect("listed token");
        assert!(tokens.contains(&token), "a listed token is one a grant reported: {token} in {tokens:?}");
    }
}

#[test]
fn an_owner_that_stops_renewing_loses_the_session_after_the_ttl() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("ttl");
    let (mut holder, grant) = start_holding(&endpoint, &prefix, &["hold", "TTL-S", "--ttl", "3", "--json"]);
    assert_eq!(grant["ttl_secs"], 3);
    assert_eq!(grant["renewed"], true);
    let me = me();
    let successor = || run(&endpoint, &prefix, &["acquire", "TTL-S", "--owner-pid", &me, "--ttl", "30", "--json"]);

    // Renewed: still held after twice its TTL.
    thread::sleep(Duration::from_secs(6));
    assert_eq!(successor().status.code(), Some(3), "a renewed lease outlives its TTL");

    // The owner stops renewing (frozen): the session is free once the TTL ran out, not before.
    holder.signal(libc::SIGSTOP);
    let stopped = Instant::now();
    let mut taken = None;
    assert!(
        eventually(Duration::from_secs(10), || {
            let out = successor();
            if out.status.success() {
                taken = Some(json_of(&out));
                return true;
            }
            assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
            false
        }),
        "the successor never acquired"
    );
    let waited = stopped.elapsed();
    assert!(waited >= Duration::from_secs(1), "the session was free {waited:?} after the owner stopped");
    let taken = taken.expect("a successor grant");
    assert!(taken["fencing_token"].as_i64() > grant["fencing_token"].as_i64(), "the successor's token is higher");

    // Woken up, the old owner learns it lost the lease and exits non-zero.
    holder.signal(libc::SIGCONT);
    let (code, err, _) = holder.wait_exit(Duration::from_secs(5));
    assert_eq!(code, Some(6), "a lost lease exits 6, as on a registry file; stderr: {err}");
    assert!(err.contains("lost the lease on session TTL-S"), "{err}");
    // A TTL one leader election can outlast is said, after the grant line.
    assert!(err.contains("warning: --ttl 3 is shorter than an etcd leader election"), "{err}");
}

#[test]
fn a_force_release_revokes_the_lease_and_the_holder_is_told() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("force");
    let (mut holder, grant) = start_holding(&endpoint, &prefix, &["hold", "F-S", "--ttl", "3", "--json"]);
    let lease = grant["lease_id"].as_str().expect("lease id");
    // A live owner (its pid runs here) needs --live.
    let refused = run(&endpoint, &prefix, &["force-release", lease]);
    assert_eq!(refused.status.code(), Some(1));
    // The override is given as the command that does it (issue 38: the one hint that was not).
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains(&format!("force-release {lease} --live`")) && said.contains("--backend etcd"), "{said}");
    assert_eq!(listed(&endpoint, &prefix).len(), 1, "nothing was removed");
    let out = run(&endpoint, &prefix, &["force-release", lease, "--live", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json_of(&out)["removed"].as_array().map(Vec::len), Some(1));
    assert!(listed(&endpoint, &prefix).is_empty(), "revoking the lease removed its keys");
    // The holder's next renewal (every TTL/3) finds the lease gone.
    let (code, err, took) = holder.wait_exit(Duration::from_secs(4));
    assert_eq!(code, Some(6), "a lost lease exits 6; stderr: {err}");
    assert!(err.contains("no longer exists"), "{err}");
    assert!(took < Duration::from_secs(3), "told within a TTL: {took:?}");
}

#[test]
fn etcd_stopped_mid_run_gives_coordination_unavailable_never_a_grant() {
    let server = EtcdServer::start();
    let endpoint = server.endpoint.clone();
    let prefix = unique_prefix("outage");
    let marker_dir = tempfile::tempdir().expect("tempdir");
    let marker = marker_dir.path().join("term");
    let script =
        format!("trap 'echo TERM > {}; exit 143' TERM; while :; do sleep 0.05; done", marker.to_string_lossy());
    let (mut runner, grant) =
        start_holding(&endpoint, &prefix, &["run", "OUT-S", "--ttl", "3", "--json", "--", "sh", "-c", &script]);
    assert!(grant["fencing_token"].as_i64().is_some_and(|t| t > 0));
    let (mut holder, _) = start_holding(&endpoint, &prefix, &["hold", "OUT-H", "--ttl", "3", "--json"]);
    let me = me();

    // A server that hangs (stopped): answers are never trusted, nothing is granted.
    let _ = common::signals::kill(server.child.id(), libc::SIGSTOP);
    let stopped = Instant::now();
    let (endpoint2, prefix2, me2) = (endpoint.clone(), prefix.clone(), me.clone());
    let acquirer =
        thread::spawn(move || run(&endpoint2, &prefix2, &["acquire", "OUT-T", "--owner-pid", &me2, "--json"]));

    // Meanwhile the running owner stops CMD and exits 6 (lease lost), within 2/3 of its TTL (3 s) after its
    // last renewal, which came before etcd stopped: before the lease can end on the server.
    let (code, err, _) = runner.wait_exit(Duration::from_secs(10));
    let lost_after = stopped.elapsed();
    assert_eq!(code, Some(6), "stderr: {err}");
    assert!(err.contains("lost the lease on session OUT-S"), "{err}");
    assert!(lost_after < Duration::from_millis(2500), "CMD was stopped {lost_after:?} after etcd stopped (TTL 3s)");
    assert_eq!(std::fs::read_to_string(&marker).map(|s| s.trim().to_owned()).ok().as_deref(), Some("TERM"));
    // `hold` is told by the same bound, and exits 6.
    let (code, err, _) = holder.wait_exit(Duration::from_secs(5));
    let held_until = stopped.elapsed();
    assert_eq!(code, Some(6), "stderr: {err}");
    assert!(err.contains("lost the lease on session OUT-H") && err.contains("could not renew"), "{err}");
    assert!(held_until < Duration::from_millis(2500), "hold exited {held_until:?} after etcd stopped (TTL 3s)");

    let out = acquirer.join().expect("acquirer thread");
    assert_eq!(out.status.code(), Some(5), "{}", String::from_utf8_lossy(&out.stdout));
    let refusal = json_of(&out);
    assert_eq!(refusal["granted"], false);
    assert_eq!(refusal["reason"], "SESSION_COORDINATION_UNAVAILABLE");

    // A server that is gone (killed): refused at once, with the reason line.
    let _ = common::signals::kill(server.child.id(), libc::SIGKILL);
    let out = run(&endpoint, &prefix, &["acquire", "OUT-U", "--owner-pid", &me]);
    assert_eq!(out.status.code(), Some(5));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("hermes-refusal-reason: SESSION_COORDINATION_UNAVAILABLE\n"), "{err}");
    let out = run(&endpoint, &prefix, &["hold", "OUT-V", "--json"]);
    assert_eq!(out.status.code(), Some(5), "hold is refused too");
    assert_eq!(json_of(&out)["granted"], false);
    let ls = run(&endpoint, &prefix, &["ls"]);
    assert_eq!(ls.status.code(), Some(5), "ls cannot list: {}", String::from_utf8_lossy(&ls.stderr));
}

#[test]
fn usage_errors_name_what_is_wrong() {
    let out =
        Command::new(BIN).args(["--backend", "etcd", "ls"]).env_remove("ETCDCTL_ENDPOINTS").output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--backend etcd needs --endpoints"));
    let out = Command::new(BIN)
        .args(["--backend", "etcd", "--endpoints", "ftp://127.0.0.1:2379", "ls"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an http:// URL"));
    let out =
        Command::new(BIN).args(["--backend", "etcd", "--endpoints", "http://x:1", "prune"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to prune"));
    let home = tempfile::tempdir().expect("tempdir");
    let out = Command::new(BIN)
        .arg("--home")
        .arg(home.path())
        .args(["acquire", "S", "--ttl", "5"])
        .env_remove("HERMES_HOME")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ttl works with --backend etcd only"));
    // Control characters in --prefix or --endpoints would reach the terminal raw in every
    // header and grant line: refused, shown escaped.
    for (option, value) in [("--prefix", "/lease\x1b[2Jctl/"), ("--endpoints", "http://h:1\x1b[31m")] {
        let args = if option == "--endpoints" {
            vec!["--backend", "etcd", option, value, "ls"]
        } else {
            vec!["--backend", "etcd", "--endpoints", "http://x:1", option, value, "ls"]
        };
        let out = Command::new(BIN).args(&args).output().expect("run");
        assert_eq!(out.status.code(), Some(2), "{option}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("contains a control character") && !err.contains('\x1b'), "{option}: {err:?}");
    }
}

// ---------------------------------------------------------------------------
// The console
// ---------------------------------------------------------------------------

#[test]
fn the_console_follows_changes_made_by_another_client() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("console");
    let (mut console, _cwd) = console_on(&endpoint, &prefix, 30, 120);
    console.wait_for("the empty etcd table", Duration::from_secs(10), |s| {
        s.contains("no leases held") && s.contains(&prefix)
    });

    // Another client acquires: the row appears (watch, not polling) with its TTL.
    let me = me();
    let out = run(&endpoint, &prefix, &["acquire", "CONSOLE-S1", "--owner-pid", &me, "--ttl", "60", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let grant = json_of(&out);
    let short: String = grant["lease_id"].as_str().expect("lease id").chars().take(8).collect();
    let took = console.wait_for("the acquired lease", Duration::from_secs(3), |s| {
        s.contains("CONSOLE-S1") && s.contains(&short) && s.contains("ttl ")
    });
    assert!(took < Duration::from_secs(3));
    console.wait_for("the acquire in the event log", Duration::from_secs(3), |s| {
        s.contains("acquired: session CONSOLE-S1")
    });

    // A second client's hold shows too; its TTL stays up while it renews.
    let (holder, _) = start_holding(&endpoint, &prefix, &["hold", "CONSOLE-S2", "--ttl", "3", "--json"]);
    console.wait_for("the holder's lease", Duration::from_secs(3), |s| s.contains("CONSOLE-S2"));

    // Released elsewhere: the row goes.
    let lease = grant["lease_id"].as_str().expect("lease id");
    assert!(run(&endpoint, &prefix, &["release", lease]).status.success());
    console.wait_for("the released lease to go", Duration::from_secs(3), |s| {
        !s.contains("CONSOLE-S1  ") && s.contains("released: session CONSOLE-S1")
    });

    // The holder is frozen: its key expires with the TTL and the console follows.
    holder.signal(libc::SIGSTOP);
    console.wait_for("the expired lease to go", Duration::from_secs(8), |s| !s.contains("▸ CONSOLE-S2"));
    // Nobody ended it: the log says it expired (it said "pruned" or "released").
    console.wait_for("the expiry in the log", Duration::from_secs(3), |s| s.contains("expired: session CONSOLE-S2"));
    holder.signal(libc::SIGCONT);
    console.quit_and_check_restored(Duration::from_secs(5), Duration::from_secs(2));
}

/// etcdctl's setup works unchanged (issue 40, in part): `ETCDCTL_ENDPOINTS` is the
/// endpoints when --endpoints is not given, and an endpoint without a scheme is plain
/// http, as etcdctl takes it; a file command with it set is not touched by it.
#[test]
fn etcdctl_endpoints_and_endpoints_without_a_scheme_work() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("etcdctl-env");
    let bare = endpoint.trim_start_matches("http://").to_owned();
    let out = Command::new(BIN)
        .args(["--backend", "etcd", "--prefix", &prefix, "acquire", "S-env", "--json"])
        .env("ETCDCTL_ENDPOINTS", &bare)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(BIN)
        .args(["--backend", "etcd", "--endpoints", &bare, "--prefix", &prefix, "ls", "--json"])
        .env_remove("ETCDCTL_ENDPOINTS")
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("S-env"), "{}", String::from_utf8_lossy(&out.stdout));
    let home = tempfile::tempdir().expect("home");
    let out = Command::new(BIN)
        .arg("--home")
        .arg(home.path())
        .args(["ls"])
        .env("ETCDCTL_ENDPOINTS", &bare)
        .output()
        .expect("run");
    assert!(out.status.success(), "a file command ignores it: {}", String::from_utf8_lossy(&out.stderr));
}

/// `--command-timeout` and `--dial-timeout` (and etcdctl's environment for them) bound how
/// long a command waits for an etcd that takes connections and never answers (it was
/// always 5 s) (issue 40, in part).
#[test]
fn the_command_timeout_bounds_the_wait_for_a_silent_etcd() {
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("127.0.0.1:{}", silent.local_addr().expect("addr").port());
    let held = thread::spawn(move || {
        let kept: Vec<_> = silent.incoming().take(8).collect();
        thread::sleep(Duration::from_secs(30));
        drop(kept);
    });
    for (args, env) in [
        (vec!["--command-timeout", "1s", "--dial-timeout", "1s", "ls"], None),
        (vec!["ls"], Some(("ETCDCTL_COMMAND_TIMEOUT", "1s"))),
    ] {
        let mut cmd = leasectl(&endpoint, "/silent/", &args);
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let started = Instant::now();
        let out = cmd.output().expect("run");
        let took = started.elapsed();
        assert_eq!(out.status.code(), Some(5), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(took < Duration::from_secs(3), "waited {took:?}, not the 1 s asked");
    }
    drop(held);
}

/// The etcd settings in `$XDG_CONFIG_HOME/leasectl/etcd`: a command needs only `--backend
/// etcd`; the command line comes first; a bad line names the file and line; a password
/// is not kept there (issue 40, in part).
#[test]
fn the_etcd_settings_file_fills_what_the_command_line_leaves() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("settings-file");
    let config = tempfile::tempdir().expect("config dir");
    std::fs::create_dir_all(config.path().join("leasectl")).expect("dir");
    let file = config.path().join("leasectl/etcd");
    let bare = |args: &[&str]| {
        Command::new(BIN)
            .args(["--backend", "etcd"])
            .args(args)
            .env("XDG_CONFIG_HOME", config.path())
            .env_remove("ETCDCTL_ENDPOINTS")
            .stdin(Stdio::null())
            .output()
            .expect("run")
    };
    std::fs::write(
        &file,
        format!("# the fleet's etcd\nendpoints = {endpoint}\nprefix = {prefix}\ncommand-timeout = 5s\n"),
    )
    .expect("write");
    let out = bare(&["run", "S-file", "-q", "--", "true"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = bare(&["ls", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&prefix),
        "the file's prefix: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The command line comes first.
    let other = unique_prefix("settings-given");
    let out = bare(&["--prefix", &other, "ls", "--json"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&other), "{}", String::from_utf8_lossy(&out.stdout));
    for (text, said) in [
        ("endpoints\n", ":1: endpoints is not name = value"),
        ("colour = red\n", ":1: unknown setting colour"),
        ("user = ops:secret\n", ":1: user: a password is not kept here"),
    ] {
        std::fs::write(&file, text).expect("write");
        let out = bare(&["ls"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("{}{said}", file.display())), "{err}");
    }
}

/// `stop` on etcd: a holder on this host is ended through its pidfd and its own release
/// revokes its etcd lease; stop says so.
#[test]
fn stop_ends_a_holder_on_this_host_and_its_release_revokes_the_lease() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("stop");
    let (mut holder, grant) = start_holding(&endpoint, &prefix, &["hold", "STOP-S", "--ttl", "30", "--json"]);
    let lease = grant["lease_id"].as_str().expect("lease id").to_owned();
    let out = run(&endpoint, &prefix, &["stop", &lease, "--yes", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json_of(&out);
    assert_eq!(v["owners"][0]["ending"], "terminated", "{v}");
    assert_eq!(v["owners"][0]["leases"][0]["how"], "released", "{v}");
    let (code, err, _) = holder.wait_exit(Duration::from_secs(5));
    assert_eq!(code, Some(0), "hold released on SIGTERM: {err}");
    assert!(listed(&endpoint, &prefix).is_empty(), "its keys are gone");
}
