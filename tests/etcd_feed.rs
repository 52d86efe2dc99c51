//! The etcd change feed is etcd's watch: `events --follow` says every lease that came
//! and went, as `etcdctl watch` sees the keys, each once; after a reconnect nothing comes
//! twice; a lease that nobody ended is `expired`, a revoked one `force-released` by whom.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::Value;

use super::common::Reaped;
use super::common::pty::eventually;
use super::etcd_cluster::Cluster;
use super::{leasectl, me, run, shared_endpoint, start_holding, unique_prefix};

/// A child whose standard output is collected line by line, killed when dropped.
struct Collected {
    _child: Reaped,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Collected {
    fn start(mut cmd: Command) -> Collected {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn");
        let out = child.stdout.take().expect("piped stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&lines);
        thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                into.lock().unwrap_or_else(|p| p.into_inner()).push(line);
            }
        });
        Collected { _child: Reaped(child), lines }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn events(&self) -> Vec<Value> {
        self.lines().iter().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }
}

/// `events --follow -o json` on a prefix, once it says it follows.
fn follow(endpoints: &str, prefix: &str) -> Collected {
    let mut cmd = leasectl(endpoints, prefix, &["events", "--follow", "-o", "json"]);
    cmd.stdin(Stdio::null());
    let feed = Collected::start(cmd);
    assert!(
        eventually(Duration::from_secs(10), || feed.events().iter().any(|e| e["event"] == "following")),
        "events --follow did not start: {:?}",
        feed.lines()
    );
    feed
}

/// Per session: the events said, in order.
fn by_session(events: &[Value]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in events {
        if let Some(s) = e["lease"]["entry"]["session_id"].as_str() {
            out.entry(s.to_owned()).or_default().push(e["event"].as_str().unwrap_or("?").to_owned());
        }
    }
    out
}

/// Per session: PUT and DELETE of its key, as `etcdctl watch --prefix` printed them.
fn etcdctl_by_session(lines: &[String], prefix: &str) -> BTreeMap<String, Vec<String>> {
    let keys = format!("{prefix}session/");
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut it = lines.iter();
    while let Some(op) = it.next() {
        if op != "PUT" && op != "DELETE" {
            continue;
        }
        let Some(session) = it.next().and_then(|k| k.strip_prefix(&keys)) else { continue };
        if op == "PUT" {
            it.next(); // the value
        }
        out.entry(session.to_owned()).or_default().push(op.clone());
    }
    out
}

/// `etcdctl watch` on the prefix, returned once it is watching: a key put beside the
/// sessions is seen (a fixed pause was too short under load, and it missed the first run).
fn etcdctl_watch(endpoints: &str, prefix: &str) -> Collected {
    let mut cmd = Command::new("etcdctl");
    cmd.args(["--endpoints", endpoints, "watch", "--prefix", prefix]).env("ETCDCTL_API", "3");
    let watch = Collected::start(cmd);
    let ready = format!("{prefix}watch-ready");
    let watching = eventually(Duration::from_secs(10), || {
        let _ = Command::new("etcdctl")
            .args(["--endpoints", endpoints, "put", &ready, "1"])
            .env("ETCDCTL_API", "3")
            .output();
        watch.lines().contains(&ready)
    });
    assert!(watching, "etcdctl watch did not start: {:?}", watch.lines());
    let _ = Command::new("etcdctl").args(["--endpoints", endpoints, "del", &ready]).env("ETCDCTL_API", "3").output();
    watch
}

#[test]
fn every_short_run_is_said_once_as_etcdctl_watch_sees_it() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("feed");
    let watch = etcdctl_watch(&endpoint, &prefix);
    let feed = follow(&endpoint, &prefix);
    thread::sleep(Duration::from_millis(300));
    let runs = 200;
    for i in 0..runs {
        let out = run(&endpoint, &prefix, &["run", &format!("R{i:03}"), "-q", "--", "true"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    // A lease nobody ends expires; a revoked one is force-released, by whom.
    let me = me();
    let out = run(&endpoint, &prefix, &["acquire", "EXPIRES", "--owner-pid", &me, "--ttl", "2"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (mut holder, grant) = start_holding(&endpoint, &prefix, &["hold", "REVOKED", "--json"]);
    let lease = grant["lease_id"].as_str().expect("lease id").to_owned();
    assert!(run(&endpoint, &prefix, &["force-release", &lease, "--live"]).status.success());
    let _ = holder.wait_exit(Duration::from_secs(10));
    let done = |f: &Collected| {
        let said = by_session(&f.events());
        said.get("EXPIRES").is_some_and(|e| e.len() == 2) && said.get("REVOKED").is_some_and(|e| e.len() == 2)
    };
    assert!(eventually(Duration::from_secs(15), || done(&feed)), "{:?}", by_session(&feed.events()));
    thread::sleep(Duration::from_millis(500));

    let said = by_session(&feed.events());
    let seen = etcdctl_by_session(&watch.lines(), &prefix);
    for i in 0..runs {
        let s = format!("R{i:03}");
        assert_eq!(said.get(&s).map(Vec::as_slice), Some(&["acquired".to_owned(), "released".to_owned()][..]), "{s}");
        assert_eq!(seen.get(&s).map(Vec::as_slice), Some(&["PUT".to_owned(), "DELETE".to_owned()][..]), "{s}");
    }
    assert_eq!(said.len(), seen.len(), "one session each: {said:?}\n{seen:?}");
    assert_eq!(said["EXPIRES"], ["acquired", "expired"]);
    assert_eq!(said["REVOKED"], ["acquired", "force-released"]);
    let revoked = feed.events().into_iter().find(|e| e["event"] == "force-released").expect("the revoke");
    assert!(revoked["detail"].as_str().is_some_and(|d| d.starts_with("by ") && d.contains("(pid ")), "{revoked}");
}

/// A stop's removal of its ended owner's lease is said as a stop's, by whom: not as an
/// operator's force-release.
#[test]
fn a_stops_removal_is_said_stopped_not_force_released() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("feed-stop");
    let feed = follow(&endpoint, &prefix);
    thread::sleep(Duration::from_millis(300));
    // An owner that does not release on SIGTERM (a sleep): its lease outlives it, and the
    // stop removes it once it has ended.
    let owner = super::common::process::Sleeper::new();
    let out = run(&endpoint, &prefix, &["acquire", "STOPPED", "--owner-pid", &owner.pid_arg(), "--ttl", "30"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&endpoint, &prefix, &["stop", "--session", "STOPPED", "--yes"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let done = |f: &Collected| by_session(&f.events()).get("STOPPED").is_some_and(|e| e.len() == 2);
    assert!(eventually(Duration::from_secs(15), || done(&feed)), "{:?}", by_session(&feed.events()));
    assert_eq!(by_session(&feed.events())["STOPPED"], ["acquired", "stopped"]);
    let stopped = feed.events().into_iter().find(|e| e["event"] == "stopped").expect("the stop");
    assert!(stopped["detail"].as_str().is_some_and(|d| d.starts_with("by ") && d.contains("(pid ")), "{stopped}");
}

/// The member the feed watches dies: the watch is re-made on another member from the
/// revision after the last one seen. A lease held all along is not "acquired" again, and
/// runs during and after the outage are each said once.
#[test]
fn a_watch_re_made_after_a_member_dies_misses_nothing_and_doubles_nothing() {
    let mut cluster = Cluster::start();
    let endpoints = cluster.endpoints(&[0, 1, 2]);
    let prefix = unique_prefix("feed-reconnect");
    let (_holder, _) = start_holding(&endpoints, &prefix, &["hold", "HELD", "--json"]);
    let feed = follow(&endpoints, &prefix);
    let runs = |from: usize| {
        for i in from..from + 20 {
            let out = run(&endpoints, &prefix, &["run", &format!("R{i:03}"), "-q", "--", "true"]);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
    };
    runs(0);
    cluster.kill(0); // the first listed: the one the feed watched
    runs(20);
    cluster.spawn(0);
    runs(40);
    let all_said = |f: &Collected| by_session(&f.events()).values().filter(|e| e.len() >= 2).count() >= 60;
    assert!(eventually(Duration::from_secs(20), || all_said(&feed)), "{:?}", by_session(&feed.events()));
    thread::sleep(Duration::from_secs(2));
    let said = by_session(&feed.events());
    assert!(!said.contains_key("HELD"), "a lease held all along is said again: {:?}", said.get("HELD"));
    for i in 0..60 {
        let s = format!("R{i:03}");
        assert_eq!(said.get(&s).map(Vec::as_slice), Some(&["acquired".to_owned(), "released".to_owned()][..]), "{s}");
    }
}

/// The member the feed watches freezes (SIGSTOP: its connection stays open, and silent):
/// the feed asks it for progress, gets no answer, and re-makes its watch on a member that
/// answers. A run made while it is frozen is said within seconds (it was said only once
/// the member thawed), and every run is said once.
#[test]
fn a_watch_whose_member_freezes_moves_on_and_misses_nothing() {
    let mut cluster = Cluster::start();
    let (frozen, endpoints) = cluster.follower_listed_first();
    let prefix = unique_prefix("feed-frozen");
    let feed = follow(&endpoints, &prefix);
    let runs = |from: usize, to: usize| {
        for i in from..to {
            let out = run(&endpoints, &prefix, &["run", &format!("R{i:03}"), "-q", "--", "true"]);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
    };
    runs(0, 10);
    cluster.freeze(frozen);
    runs(10, 11);
    let said_once =
        |f: &Collected, i: usize| by_session(&f.events()).get(&format!("R{i:03}")).is_some_and(|e| e.len() >= 2);
    // 2 s of quiet, 1 s for an answer, a second before the watch is re-made: about 4 s.
    assert!(
        eventually(Duration::from_secs(6), || said_once(&feed, 10)),
        "a run made while the watched member is frozen was not said: {:?}",
        feed.lines()
    );
    runs(11, 20);
    cluster.thaw(frozen);
    runs(20, 30);
    assert!(eventually(Duration::from_secs(20), || (0..30).all(|i| said_once(&feed, i))), "{:?}", feed.lines());
    thread::sleep(Duration::from_secs(2));
    let said = by_session(&feed.events());
    for i in 0..30 {
        let s = format!("R{i:03}");
        assert_eq!(said.get(&s).map(Vec::as_slice), Some(&["acquired".to_owned(), "released".to_owned()][..]), "{s}");
    }
}

/// `events --follow --record` on etcd keeps its journal in the recorder's state directory
/// (`$XDG_STATE_HOME/leasectl/etcd-...`), a second recorder is refused, and `events
/// --since` reads the journal back (it recorded nothing and pointed back at itself).
#[test]
fn the_recorder_on_etcd_keeps_a_journal_that_since_reads_back() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("record");
    let state = tempfile::tempdir().expect("state dir");
    let with_state = |args: &[&str]| {
        let mut cmd = leasectl(&endpoint, &prefix, args);
        cmd.env("XDG_STATE_HOME", state.path()).env_remove("HOME");
        cmd
    };
    let recorder = Collected::start(with_state(&["events", "--follow", "--record", "-o", "json"]));
    assert!(
        eventually(Duration::from_secs(10), || recorder.events().iter().any(|e| e["event"] == "following")),
        "the recorder did not start: {:?}",
        recorder.lines()
    );
    let second = with_state(&["events", "--follow", "--record"]).output().expect("run");
    assert_eq!(second.status.code(), Some(1), "a second recorder is refused");
    assert!(String::from_utf8_lossy(&second.stderr).contains("records"), "{second:?}");
    for i in 0..3 {
        let out = run(&endpoint, &prefix, &["run", &format!("REC{i}"), "-q", "--", "true"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(
        // Both events of every run: the last release may reach the recorder after the run ends.
        eventually(Duration::from_secs(10), || {
            let said = by_session(&recorder.events());
            said.len() == 3 && said.values().all(|events| events.len() == 2)
        }),
        "{:?}",
        recorder.lines()
    );
    drop(recorder);
    let journal = std::fs::read_dir(state.path().join("leasectl"))
        .expect("the state directory")
        .filter_map(Result::ok)
        .map(|e| e.path().join("logs/leasectl-events.jsonl"))
        .find(|p| p.is_file())
        .expect("a journal under $XDG_STATE_HOME/leasectl");
    assert!(journal.to_string_lossy().contains("/leasectl/etcd-leasectl-test-record-"), "{}", journal.display());
    let out = with_state(&["events", "--since", "1h", "-o", "json"]).output().expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let read: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let said = by_session(&read);
    for i in 0..3 {
        assert_eq!(
            said.get(&format!("REC{i}")).map(Vec::as_slice),
            Some(&["acquired".to_owned(), "released".to_owned()][..])
        );
    }
    assert!(!String::from_utf8_lossy(&out.stderr).contains("no events recorded"), "{out:?}");
}

/// A TCP proxy in front of etcd that can cut every connection and refuse new ones (the
/// follower cut off from etcd) and open again.
struct CutProxy {
    port: u16,
    open: Arc<std::sync::atomic::AtomicBool>,
    conns: Arc<Mutex<Vec<std::net::TcpStream>>>,
}

impl CutProxy {
    fn start(to: &str) -> CutProxy {
        use std::sync::atomic::Ordering;
        let to = to.trim_start_matches("http://").to_owned();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let open = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let conns: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
        let (o, c) = (Arc::clone(&open), Arc::clone(&conns));
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if !o.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(upstream) = std::net::TcpStream::connect(&to) else { continue };
                let mut kept = c.lock().unwrap_or_else(|p| p.into_inner());
                kept.extend([client.try_clone().expect("clone"), upstream.try_clone().expect("clone")]);
                for (mut from, mut into) in
                    [(client.try_clone().expect("clone"), upstream.try_clone().expect("clone")), (upstream, client)]
                {
                    thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut into);
                        let _ = into.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        CutProxy { port, open, conns }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn cut(&self) {
        self.open.store(false, std::sync::atomic::Ordering::SeqCst);
        for s in self.conns.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    fn mend(&self) {
        self.open.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// etcd's current revision, then compacted to it (history before it gone).
fn compact(endpoint: &str) {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoint, "endpoint", "status", "-w", "json"])
        .output()
        .expect("etcdctl");
    let v: Value = serde_json::from_slice(&out.stdout).expect("status json");
    let revision = v[0]["Status"]["header"]["revision"].as_i64().expect("revision");
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoint, "compaction", &revision.to_string()])
        .output()
        .expect("etcdctl compaction");
    assert!(out.status.success(), "compaction: {}", String::from_utf8_lossy(&out.stderr));
}

/// A follower cut off from etcd while a lease is acquired and kept, with a compaction
/// before it comes back, says the gap and then the held lease (it said the gap and never
/// the lease). One that had seen no event before the cut says the same (it restarted
/// "from now" and said nothing at all) (issue 40).
#[test]
fn a_follower_cut_off_across_a_compaction_says_the_gap_and_the_held_lease() {
    let _alone = super::etcd_cluster::alone();
    let server = super::EtcdServer::start();
    let prefix = unique_prefix("feed-compacted");
    let proxy = CutProxy::start(&server.endpoint);
    let seen_before = follow(&proxy.endpoint(), &prefix);
    let out = run(&server.endpoint, &prefix, &["run", "R-before", "-q", "--", "true"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        eventually(Duration::from_secs(10), || by_session(&seen_before.events())
            .get("R-before")
            .is_some_and(|e| e.len() == 2)),
        "{:?}",
        seen_before.lines()
    );
    let fresh = follow(&proxy.endpoint(), &prefix);
    proxy.cut();
    thread::sleep(Duration::from_secs(2));
    let (_holder, _) = start_holding(&server.endpoint, &prefix, &["hold", "HELD", "--json"]);
    for i in 0..3 {
        let out = run(&server.endpoint, &prefix, &["run", &format!("R{i}"), "-q", "--", "true"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    compact(&server.endpoint);
    thread::sleep(Duration::from_secs(2));
    proxy.mend();
    for feed in [&seen_before, &fresh] {
        let said =
            |f: &Collected| by_session(&f.events()).get("HELD").is_some_and(|e| e.contains(&"acquired".to_owned()));
        assert!(eventually(Duration::from_secs(30), || said(feed)), "the held lease: {:?}", feed.lines());
        let events = feed.events();
        let gap = events.iter().position(|e| e["event"] == "gap");
        let held = events.iter().position(|e| e["event"] == "acquired" && e["lease"]["entry"]["session_id"] == "HELD");
        assert!(gap.is_some() && gap < held, "a gap, then the held lease: {:?}", feed.lines());
    }
}
