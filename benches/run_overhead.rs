//! What `leasectl run S -- CMD` costs over CMD, side by side with flock(1), the tool a
//! `run` replaces: `flock FILE true`, `leasectl acquire` + `leasectl release` (two
//! processes, no keeper), `leasectl run S -- true` and `run S -- sleep 0.3`, each timed
//! as a whole process, interleaved round by round so the machine's noise falls on all
//! alike. `RUN_BASELINE_BIN=PATH` adds another build's `run -- true` (e.g. the commit
//! before a change) in the same rounds. Medians, and ratios to flock.
//!
//! Plain main (harness = false). `--quick`: 10 rounds. Without `--bench`: 2 rounds.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_leasectl");

fn timed(cmd: &mut Command) -> f64 {
    let started = Instant::now();
    let status = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status().expect("spawn");
    assert!(status.success(), "{cmd:?} failed: {status}");
    started.elapsed().as_secs_f64() * 1000.0
}

fn leasectl(bin: &str, home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin);
    c.arg("--home").arg(home).args(args).env_remove("HERMES_HOME");
    c
}

fn main() {
    let rounds = if !support::benchmarking() {
        2
    } else if support::quick() {
        10
    } else {
        30
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    std::fs::create_dir(&home).expect("home");
    let lock = dir.path().join("flock.lock");
    let baseline = std::env::var("RUN_BASELINE_BIN").ok();
    let me = std::process::id().to_string();
    let mut names = vec!["flock FILE true", "acquire + release", "run -- true", "run -- sleep 0.3"];
    if baseline.is_some() {
        names.push("baseline run -- true");
    }
    let mut samples: Vec<Vec<f64>> = vec![vec![]; names.len()];
    for _ in 0..rounds {
        samples[0].push(timed(Command::new("flock").arg(&lock).arg("true")));
        let started = Instant::now();
        let out = leasectl(BIN, &home, &["acquire", "S", "--owner-pid", &me, "--json"]).output().expect("acquire");
        let id = serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("json")["lease_id"]
            .as_str()
            .expect("lease id")
            .to_owned();
        let status = leasectl(BIN, &home, &["release", &id]).stdout(Stdio::null()).status().expect("release");
        assert!(status.success());
        samples[1].push(started.elapsed().as_secs_f64() * 1000.0);
        samples[2].push(timed(&mut leasectl(BIN, &home, &["run", "S", "--", "true"])));
        samples[3].push(timed(&mut leasectl(BIN, &home, &["run", "S", "--", "sleep", "0.3"])));
        if let Some(b) = &baseline {
            samples[4].push(timed(&mut leasectl(b, &home, &["run", "S", "--", "true"])));
        }
    }
    let flock = support::median(&samples[0]);
    println!("{rounds} rounds, interleaved; median ms (min..max), ratio to flock");
    for (name, xs) in names.iter().zip(&samples) {
        let m = support::median(xs);
        let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = xs.iter().copied().fold(0.0, f64::max);
        println!("  {name:<22} {m:>8.1} ms  ({lo:.1}..{hi:.1})  x{:.1}", m / flock);
    }
}
