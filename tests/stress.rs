//! Mutual exclusion under load: 32 workers for about 30 s acquire, hold briefly and
//! release across 8 sessions with a cap of 3, while about a tenth of holders are
//! SIGKILLed. Each holder is a real leasectl hold process; its hold is the window
//! between learning of its grant and being told to stop (a killed holder's hold ends
//! at its kill). The checker proves: no two holds of one session overlap, never
//! more than 3 holds at once, the registry parses afterwards and holds no live owner
//! but the running ones (none), and no temp file is left.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use leasectl::lease::{self, Liveness, Registry, file::registry as store};

use crate::common;
use common::Reaped;

const WORKERS: usize = 32;
const SESSIONS: usize = 8;
const CAP: usize = 3;

#[derive(Debug, Clone)]
struct Hold {
    session: usize,
    start: Instant,
    end: Instant,
    killed: bool,
    pid: u32,
}

#[derive(Debug, Default)]
struct Tally {
    holds: Vec<Hold>,
    not_owned: usize,
    capacity: usize,
    other: Vec<String>,
}

fn rand_u64() -> u64 {
    lease::address::ids::random_u64().expect("randomness")
}

fn first_line(child: &mut Child, within: Duration) -> Option<String> {
    let out = child.stdout.take()?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(within).ok()
}

fn worker(id: usize, home: std::path::PathBuf, until: Instant) -> Tally {
    let mut tally = Tally::default();
    let mut n = 0;
    while Instant::now() < until {
        n += 1;
        let session = (rand_u64() % SESSIONS as u64) as usize;
        let child = Command::new(env!("CARGO_BIN_EXE_leasectl"))
            .arg("--home")
            .arg(&home)
            .args(["--lock-timeout", "20", "hold", &format!("S{session}"), "--max", &CAP.to_string()])
            .args(["--surface", &format!("w{id}"), "--live-id", &format!("{id}-{n}"), "--json"])
            .env_remove("HERMES_HOME")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        let mut child = Reaped(child.expect("spawn leasectl hold"));
        let pid = child.id();
        let Some(line) = first_line(&mut child, Duration::from_secs(30)) else {
            tally.other.push(format!("holder {pid} printed nothing in 30 s"));
            continue;
        };
        let v: serde_json::Value = match serde_json::from_str(line.trim()) {
            Ok(v) => v,
            Err(e) => {
                tally.other.push(format!("holder {pid} printed {line:?}: {e}"));
                continue;
            }
        };
        if v["granted"] == serde_json::Value::Bool(true) {
            let start = Instant::now();
            std::thread::sleep(Duration::from_millis(5 + rand_u64() % 60));
            let killed = rand_u64().is_multiple_of(10);
            let end = Instant::now();
            let sig = if killed { libc::SIGKILL } else { libc::SIGTERM };
            let _ = common::signals::kill(pid, sig);
            let status = child.wait().expect("wait");
            if !killed && status.code() != Some(0) {
                tally.other.push(format!("holder {pid} exited {status} after SIGTERM"));
            }
            tally.holds.push(Hold { session, start, end, killed, pid });
        } else {
            let status = child.wait().expect("wait");
            match (v["reason"].as_str(), status.code()) {
                (Some("SESSION_NOT_OWNED"), Some(3)) => tally.not_owned += 1,
                (Some("MAX_CONCURRENT_SESSIONS"), Some(4)) => tally.capacity += 1,
                other => tally.other.push(format!("holder {pid}: unexpected refusal {other:?}: {line}")),
            }
            std::thread::sleep(Duration::from_millis(5 + rand_u64() % 30));
        }
    }
    tally
}

#[test]
fn mutual_exclusion_under_load_with_kills() {
    let secs: u64 = std::env::var("LEASECTL_STRESS_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(30);
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    std::fs::create_dir(&home).expect("create the home");
    let until = Instant::now() + Duration::from_secs(secs);
    let handles: Vec<_> = (0..WORKERS)
        .map(|id| {
            let home = home.clone();
            std::thread::spawn(move || worker(id, home, until))
        })
        .collect();
    let mut all = Tally::default();
    for h in handles {
        let t = h.join().expect("worker thread");
        all.holds.extend(t.holds);
        all.not_owned += t.not_owned;
        all.capacity += t.capacity;
        all.other.extend(t.other);
    }
    assert!(all.other.is_empty(), "unexpected outcomes: {:#?}", all.other);
    let killed = all.holds.iter().filter(|h| h.killed).count();
    eprintln!(
        "{} holds ({} killed), {} SESSION_NOT_OWNED, {} MAX_CONCURRENT_SESSIONS refusals in {secs} s",
        all.holds.len(),
        killed,
        all.not_owned,
        all.capacity
    );
    assert!(all.holds.len() >= 50, "too little traffic to prove anything: {}", all.holds.len());
    assert!(killed >= 1 && all.not_owned >= 1 && all.capacity >= 1, "every path exercised");

    // No two holds of one session overlap.
    for s in 0..SESSIONS {
        let mut holds: Vec<&Hold> = all.holds.iter().filter(|h| h.session == s).collect();
        holds.sort_by_key(|h| h.start);
        for pair in holds.windows(2) {
            assert!(
                pair[1].start >= pair[0].end,
                "session S{s}: holder {} started before holder {} ended",
                pair[1].pid,
                pair[0].pid
            );
        }
    }
    // Never more than CAP holds at once.
    let mut edges: Vec<(Instant, i32)> = all.holds.iter().flat_map(|h| [(h.start, 1), (h.end, -1)]).collect();
    edges.sort_by_key(|(t, d)| (*t, *d));
    let (mut now, mut peak) = (0, 0);
    for (_, d) in edges {
        now += d;
        peak = peak.max(now);
    }
    assert!(peak <= CAP as i32, "{peak} holds at once with a cap of {CAP}");

    // The registry parses and holds no live owner (every holder has stopped); any
    // entry left belongs to a killed holder.
    let reg = Registry::new("root", &home);
    let file = store::read(&reg.path()).expect("registry parses after the run");
    let killed_pids: std::collections::HashSet<u64> =
        all.holds.iter().filter(|h| h.killed).map(|h| u64::from(h.pid)).collect();
    let mut prober = lease::Prober::new();
    for e in &file.entries {
        assert_ne!(prober.judge(e), Liveness::Alive, "a live entry after every holder stopped: {e:?}");
        assert!(killed_pids.contains(&e.pid()), "entry of a holder that was not killed: {e:?}");
    }
    assert!(store::leftover_temp_files(&reg.runtime_dir()).is_empty(), "temp files left");
}
