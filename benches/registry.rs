//! The registry file at 10,000 entries: strict read + validation (`store::read`,
//! from a file in a temp home), `store::parse` alone (bytes already in memory),
//! and `store::serialize` (the exact bytes Hermes writes). Target: < 10 ms each.
//!
//! A thread remembers the last registries it read by their exact bytes, so `read`
//! cycles over five homes holding the same bytes (more than are remembered):
//! every read parses and validates in full. `read_same_bytes_again` is the
//! remembered case (an owner's release reading what its acquire wrote).
//!
//! Baselines in the same group, on the same bytes: reading the file only;
//! serde_json scanning it without building anything (`IgnoredAny`); serde_json
//! building its `Value` tree (the first half of `store::parse`); and serde_json's
//! own compact `to_string` of that tree (same work as `serialize`, other format).
//! The crate's serde_json has `arbitrary_precision`, so the baselines do too.

mod support;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, SamplingMode, Throughput};
use leasectl::lease::{Registry, file::registry as store};
use serde::de::IgnoredAny;
use serde_json::Value;
use support::Owner;

const N: usize = 10_000;

fn main() {
    let dir = tempfile::Builder::new().prefix("leasectl-bench-registry-").tempdir().expect("tempdir");
    let reg = Registry::new("root", dir.path());
    // Owned by this process with its real start time (liveness plays no part here).
    support::fill(&reg, N, &[Owner::me()]);
    let path = reg.path();
    let bytes = std::fs::read(&path).expect("registry written");
    // Five more homes with the same bytes, read in turn: never the remembered one.
    let homes: Vec<tempfile::TempDir> = (0..5)
        .map(|_| tempfile::Builder::new().prefix("leasectl-bench-registry-").tempdir().expect("tempdir"))
        .collect();
    let cold_paths: Vec<std::path::PathBuf> = homes
        .iter()
        .map(|h| {
            let p = Registry::new("root", h.path()).path();
            std::fs::create_dir_all(p.parent().expect("runtime dir")).expect("mkdir");
            std::fs::write(&p, &bytes).expect("copy the registry");
            p
        })
        .collect();
    let mut turn = 0usize;
    let file = store::parse(&bytes).expect("valid");
    assert_eq!(file.entries.len(), N);
    assert_eq!(store::serialize(&file).as_bytes(), &bytes[..], "serialize round-trips the file byte for byte");

    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group(format!("registry/{N}"));
    group.sample_size(30).measurement_time(Duration::from_secs(4)).warm_up_time(Duration::from_secs(1));
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("read", |b| {
        b.iter(|| {
            turn = (turn + 1) % cold_paths.len();
            black_box(store::read(black_box(&cold_paths[turn])).expect("valid"))
        })
    });
    group.bench_function("read_same_bytes_again", |b| {
        b.iter(|| black_box(store::read(black_box(&path)).expect("valid")))
    });
    group.bench_function("parse", |b| b.iter(|| black_box(store::parse(black_box(&bytes)).expect("valid"))));
    group.bench_function("serialize", |b| b.iter(|| black_box(store::serialize(black_box(&file)))));
    group.bench_function("baseline/read_bytes_only", |b| {
        b.iter(|| black_box(std::fs::read(black_box(&path)).expect("read")))
    });
    group.bench_function("baseline/json_scan_only", |b| {
        b.iter(|| black_box(serde_json::from_slice::<IgnoredAny>(black_box(&bytes)).expect("json")))
    });
    group.bench_function("baseline/json_value_tree", |b| {
        b.iter(|| black_box(serde_json::from_slice::<Value>(black_box(&bytes)).expect("json")))
    });
    let value: Value = serde_json::from_slice(&bytes).expect("json");
    group.bench_function("baseline/json_value_to_string", |b| {
        b.iter(|| black_box(serde_json::to_string(black_box(&value)).expect("json")))
    });
    group.finish();
    c.final_summary();
    if support::benchmarking() {
        drop(value);
        println!("registry: {N} entries, {} bytes ({} per entry)", bytes.len(), bytes.len() / N);
        // What 10,000 parsed entries weigh in memory (the console keeps a set, or more).
        let before = vm_rss_kb();
        let held: Vec<store::RegistryFile> = (0..4).map(|_| store::parse(&bytes).expect("valid")).collect();
        let per_copy = (vm_rss_kb() - before) as f64 / 1024.0 / held.len() as f64;
        println!("registry: one parsed copy of {N} entries adds ~{per_copy:.1} MB to VmRSS");
    }
}

fn vm_rss_kb() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}
