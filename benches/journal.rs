//! `leasectl events --since 24h` over a recorder's journal of 128 MB, 256 MB, 512 MB and
//! 1 GB (the file and its three rotations, as `events --follow --record` leaves them;
//! a third of the events within the last day), the real binary under GNU time: peak RSS
//! (target < 50 MB whatever the size) and wall time (target: linear in size, so the
//! seconds per GB stay flat). Output goes to /dev/null.
//!
//! Plain main (harness = false). `--quick`: 32 MB to 256 MB. Without `--bench` (under
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
            // Three days, oldest first: the last third is within 24 h.
            let ts = now - 3.0 * 86_400.0 * (1.0 - i as f64 / total as f64);
            out.write_all(line(i, ts).as_bytes()).expect("write");
            i += 1;
        }
        out.flush().expect("flush");
    }
}

/// (peak RSS in MB, wall seconds) of `events --since 24h` on `home`.
fn measure(home: &Path) -> (f64, f64) {
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M %e", BIN, "--home"])
        .arg(home)
        .args(["events", "--since", "24h", "-o", "json"])
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
        vec![32 * MB, 64 * MB, 128 * MB, 256 * MB]
    } else {
        vec![128 * MB, 256 * MB, 512 * MB, 1024 * MB]
    };
    println!("{:>8}  {:>10}  {:>8}  {:>8}", "journal", "peak RSS", "seconds", "s per GB");
    for size in sizes {
        let dir = tempfile::tempdir().expect("tempdir");
        write_journal(dir.path(), size);
        let runs: Vec<(f64, f64)> = (0..3).map(|_| measure(dir.path())).collect();
        let rss = runs.iter().map(|r| r.0).fold(0.0, f64::max);
        let secs = support::median(&runs.iter().map(|r| r.1).collect::<Vec<_>>());
        println!(
            "{:>6} MB  {:>7.1} MB  {:>8.2}  {:>8.2}",
            size / MB,
            rss,
            secs,
            secs / (size as f64 / (1024.0 * MB as f64))
        );
        assert!(rss < 50.0, "peak RSS {rss:.1} MB over 50 MB for a {} MB journal", size / MB);
    }
}
