//! Judging owners: N entries held by P distinct pids, with a fresh `Prober` per
//! iteration (as every fence operation and every console reload has). The prober
//! probes each distinct pid once, so the cost should follow P, not N.
//!
//! Owners: P = 1, 4, 16 are real `sleep` children with their real start times
//! (all judged alive). P = 64 is the 16 real children plus 48 pids that name no
//! process (found free below `pid_max`; judged dead: a failed open of
//! /proc/<pid>/stat). `64real` is 64 real children, for comparison.
//! N = 100 and 1,000 with P = 4 show the (small) part that does follow N.

mod support;

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion};
use leasectl::lease::{Entry, Liveness, Prober};
use support::{Owner, Sleepers};

fn judge_all(entries: &[Entry]) -> usize {
    let mut prober = Prober::new();
    entries.iter().filter(|e| prober.judge(e) == Liveness::Alive).count()
}

fn main() {
    let real64 = Sleepers::spawn(64);
    let owners64 = real64.owners();
    let real = &owners64[..16];
    let gone: Vec<Owner> =
        support::unused_pids(48).into_iter().map(|pid| Owner { pid, start_time: Some(support::NOW) }).collect();
    assert_eq!(gone.len(), 48, "found 48 unused pids");
    let mixed64: Vec<Owner> = real.iter().chain(&gone).copied().collect();

    let now = leasectl::lease::now();
    let alive_pids: Vec<u64> = owners64.iter().map(|o| o.pid).collect();
    // (label, N, owners)
    let cases: Vec<(String, usize, Vec<Owner>)> = vec![
        ("N=10000/P=1".into(), 10_000, real[..1].to_vec()),
        ("N=10000/P=4".into(), 10_000, real[..4].to_vec()),
        ("N=10000/P=16".into(), 10_000, real[..16].to_vec()),
        ("N=10000/P=64".into(), 10_000, mixed64.clone()),
        ("N=10000/P=64real".into(), 10_000, owners64.clone()),
        ("N=100/P=4".into(), 100, real[..4].to_vec()),
        ("N=1000/P=4".into(), 1_000, real[..4].to_vec()),
    ];
    let prepared: Vec<(String, Vec<Entry>, usize)> = cases
        .into_iter()
        .map(|(label, n, owners)| {
            let entries = support::registry_file(n, &owners, now).entries;
            let alive_owners = owners.iter().filter(|o| alive_pids.contains(&o.pid)).count();
            // Round-robin: entry i belongs to owner i % P.
            let expect_alive = (0..n).filter(|i| i % owners.len() < alive_owners).count();
            assert_eq!(judge_all(&entries), expect_alive, "{label}: real owners alive, unused pids dead");
            (label, entries, expect_alive)
        })
        .collect();

    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("liveness");
    group.sample_size(30).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    for (label, entries, _) in &prepared {
        group.bench_with_input(BenchmarkId::from_parameter(label), entries, |b, entries| {
            b.iter(|| black_box(judge_all(black_box(entries))))
        });
    }
    group.finish();
    c.final_summary();
    drop(real64);
}
