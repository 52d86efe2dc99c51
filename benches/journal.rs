//! `leasectl events --since 24h` and `--since 1m` over a recorder's journal of 40 MB,
//! 100 MB, 128 MB, 512 MB and 1 GB (the file and its three rotations, as `events --follow
//! --record` leaves them; a third of the events within the last day, the newest a minute
//! old), the real binary under GNU time: peak RSS (target < 50 MB whatever the size) and
//! wall time. `--since` seeks to its time in each file, so `1m` reads next to nothing
//! (it read every file from its start). `JOURNAL_BASELINE_BIN=PATH` runs another build
//! in the same rounds, alternating. Output goes to /dev/null.
//!
//! Plain main (harness = false). `--quick`: 40 MB and 100 MB. Without `--bench` (under
//! `cargo test --benches`): one 8 MB run as a smoke test.

mod support;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_leasectl");
const MB: u64 = 1024 * 1024;

/// A journal of `bytes` split over the current file and three rotations, oldest first.
fn write_journal(home: &Path, bytes: u64) {
    let logs = home.join("logs");
    std::fs::create_dir_all(&logs).expect("logs");
    let now = leasectl::lease::now();
    let line = |i: u64, ts: f64| {
        format!(
            "{{\"event\":\"acquired\",\"lease\":{{\"entry\":{{\"lease_id\":\"{i:032x}\",\"metadata\":{{\"live_session_id\":\"tab-{i}\"}},\"pid\":{},\"process_start_time\":1795989978.25,\"session_id\":\"session-{i}\",\"started_at\":{ts},\"surface\":\"cli\",\"updated_at\":{ts}}},\"liveness\":\"alive\",\"owner\":{{\"name\":\"hermes\"}}}},\"profile\":\"root\",\"time\":\"2026-11-30T10:00:00.000Z\",\"ts\":{ts}}}\n",
            1000 + i % 30000
        )
    };
    let per_line = line(0, now).len() as u64;
    let total = bytes / per_line;
    let names =
        ["leasectl-events.jsonl.3", "leasectl-events.jsonl.2", "leasectl-events.jsonl.1", "leasectl-events.jsonl"];
    let mut i = 0u64;
    for (k, name) in names.iter().enumerate() {
        let mut out = BufWriter::new(File::create(logs.join(name)).expect("journal"));
        let end = total * (k as u64 + 1) / names.len() as u64;
        while i < end {
            // Three days, oldest first, to a minute ago: the last third is within 24 h.
            let ts = now - 60.0 - 3.0 * 86_400.0 * (1.0 - i as f64 / total as f64);
            out.write_all(line(i, ts).as_bytes()).expect("write");
            i += 1;
        }
        out.flush().expect("flush");
    }
}

/// (peak RSS in MB, wall seconds) of `bin events --since SINCE` on `home`.
fn measure(bin: &str, home: &Path, since: &str) -> (f64, f64) {
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M %e", bin, "--home"])
        .arg(home)
        .args(["events", "--since", since, "-o", "json"])
        .env_remove("HERMES_HOME")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("GNU time (apt-get install time)");
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().last().unwrap_or_default().to_owned();
    let mut f = last.split_whitespace().map(|x| x.parse::<f64>().unwrap_or(f64::NAN));
    let (kb, secs) = (f.next().unwrap_or(f64::NAN), f.next().unwrap_or(f64::NAN));
    assert!(out.status.success(), "events failed: {err}");
    (kb / 1024.0, secs)
}

fn main() {
    let sizes: Vec<u64> = if !support::benchmarking() {
        vec![8 * MB]
    } else if support::quick() {
        vec![40 * MB, 100 * MB]
    } else {
        vec![40 * MB, 100 * MB, 128 * MB, 512 * MB, 1024 * MB]
    };
    let runs = if support::benchmarking() { 5 } else { 1 };
    let mut bins = vec![("this build".to_owned(), BIN.to_owned())];
    if let Ok(baseline) = std::env::var("JOURNAL_BASELINE_BIN") {
        bins.push(("baseline".to_owned(), baseline));
    }
    println!("{runs} runs alternating, medians; peak RSS the largest");
    println!("{:>8}  {:>6}  {:>10}  {:>10}  {:>8}", "journal", "since", "build", "peak RSS", "seconds");
    for size in sizes {
        let dir = tempfile::tempdir().expect("tempdir");
        write_journal(dir.path(), size);
        for since in ["24h", "1m"] {
            let mut taken: Vec<Vec<(f64, f64)>> = bins.iter().map(|_| Vec::new()).collect();
            for _ in 0..runs {
                for (b, (_, bin)) in bins.iter().enumerate() {
                    taken[b].push(measure(bin, dir.path(), since));
                }
            }
            for ((name, _), runs) in bins.iter().zip(&taken) {
                let rss = runs.iter().map(|r| r.0).fold(0.0, f64::max);
                let secs = support::median(&runs.iter().map(|r| r.1).collect::<Vec<_>>());
                println!("{:>6} MB  {since:>6}  {name:>10}  {rss:>7.1} MB  {secs:>8.2}", size / MB);
                assert!(rss < 50.0, "peak RSS {rss:.1} MB over 50 MB for a {} MB journal", size / MB);
            }
        }
    }
}
