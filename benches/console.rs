//! One console frame at 10,000 leases (and 1,000, to show linearity), all in
//! memory as tests/common builds it: `view::render` into a ratatui `TestBackend`
//! of 200x60 through `Terminal::draw`; `App::rows()` alone; `diff::diff` of two
//! snapshots where 10 leases were released and 10 others acquired; and, for
//! context, `update(Loaded)` (diff + apply + selection clamp) as a reload brings
//! it (every entry freshly read, 10 leases replaced; the screen's old entries are
//! held by nothing else, so replacing them frees them, as in the console, where
//! the worker has already let go of them) and as a liveness tick brings it (the
//! worker still holds the same entries; each owner's CPU % changed).
//! Target: < 8 ms per frame at 10,000.
//!
//! Baselines in the same run: a frame of an empty registry (the fixed cost of a
//! frame), and `calibration`, a fixed CPU kernel (clone + sort 10,000 short
//! strings) to tell a slower machine from slower code on a shared box.

mod support;

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, SamplingMode};
use std::sync::Arc;

use leasectl::tui::event::{Event, LeaseRow, Loaded, RegistrySnapshot};
use leasectl::tui::state::App;
use leasectl::tui::{diff, update, view};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

struct Case {
    n: usize,
    app: App,
    /// The next snapshot: the first 10 leases released, 10 new ones acquired
    /// (entries shared with `app`, as in tests/common).
    next: RegistrySnapshot,
    /// The rows on screen and 10 more, for fresh copies per reload iteration.
    rows: Vec<LeaseRow>,
    /// A liveness tick: the same entries (shared), each owner's CPU % changed.
    tick: RegistrySnapshot,
}

fn case(n: usize) -> Case {
    let reg = support::registry("root");
    let entries = support::entries(n + 10);
    let rows = support::rows(&entries);
    let app = support::app_with(support::snapshot(&reg, rows[..n].to_vec()));
    let next = support::snapshot(&reg, rows[10..].to_vec());
    let mut tick_rows = rows[..n].to_vec();
    for r in &mut tick_rows {
        if let Some(o) = r.owner.as_mut() {
            std::sync::Arc::make_mut(o).cpu_percent += 0.5;
        }
    }
    let tick = support::snapshot(&reg, tick_rows);
    Case { n, app, next, rows, tick }
}

/// The rows with their entries copied: shared with nothing, as a fresh read gives them.
fn deep(rows: &[LeaseRow]) -> Vec<LeaseRow> {
    rows.iter().map(|r| LeaseRow { entry: Arc::new((*r.entry).clone()), ..r.clone() }).collect()
}

/// A fixed CPU kernel: clone and sort 10,000 short strings.
fn calibration(words: &[String]) -> usize {
    let mut v = words.to_vec();
    v.sort_unstable();
    v.len()
}

fn main() {
    let cases = [case(1_000), case(10_000)];
    let empty = support::app_with(support::snapshot(&support::registry("root"), vec![]));
    let words: Vec<String> =
        (0..10_000u64).map(|i| format!("chat-{}", i.wrapping_mul(2_654_435_761) % 100_003)).collect();
    for c in &cases {
        assert_eq!(c.app.registries[0].leases.len(), c.n);
        assert_eq!(diff::diff(&c.app.registries[0], &c.next).len(), 20, "10 released + 10 acquired");
    }

    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("console");
    group.sample_size(30).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    group.bench_function("calibration/sort_10k_strings", |b| b.iter(|| black_box(calibration(black_box(&words)))));
    let mut terminal = Terminal::new(TestBackend::new(200, 60)).expect("test terminal");
    group.bench_function("frame_200x60/0", |b| {
        b.iter(|| {
            terminal.draw(|f| view::render(&empty, f)).expect("draw");
        })
    });
    for case in &cases {
        let mut terminal = Terminal::new(TestBackend::new(200, 60)).expect("test terminal");
        group.bench_with_input(BenchmarkId::new("frame_200x60", case.n), &case.app, |b, app| {
            b.iter(|| {
                terminal.draw(|f| view::render(app, f)).expect("draw");
            })
        });
        group.bench_with_input(BenchmarkId::new("rows", case.n), &case.app, |b, app| {
            b.iter(|| black_box(black_box(app).rows()))
        });
        group.bench_with_input(BenchmarkId::new("diff_10_changed", case.n), case, |b, case| {
            b.iter(|| black_box(diff::diff(black_box(&case.app.registries[0]), black_box(&case.next))))
        });
    }
    group.finish();

    // iter_batched with a costly setup: the same number of iterations per sample.
    let mut group = c.benchmark_group("console");
    group.sample_size(20).measurement_time(Duration::from_secs(4)).warm_up_time(Duration::from_secs(1));
    group.sampling_mode(SamplingMode::Flat);
    for case in &cases {
        let reg = support::registry("root");
        group.bench_with_input(BenchmarkId::new("update_loaded_reload", case.n), case, |b, case| {
            b.iter_batched(
                || {
                    let app = support::app_with(support::snapshot(&reg, deep(&case.rows[..case.n])));
                    let next = support::snapshot(&reg, deep(&case.rows[10..]));
                    (
                        app,
                        Loaded {
                            at: support::NOW + 1.0,
                            first: 0,
                            initial: false,
                            snapshots: vec![next],
                            large_read_done: false,
                            owners_moved: None,
                        },
                    )
                },
                |(mut app, loaded)| {
                    update::update(&mut app, Event::Loaded(loaded));
                    app
                },
                BatchSize::PerIteration,
            )
        });
        group.bench_with_input(BenchmarkId::new("update_loaded_tick", case.n), case, |b, case| {
            b.iter_batched(
                || {
                    (
                        case.app.clone(),
                        Loaded {
                            at: support::NOW + 1.0,
                            first: 0,
                            initial: false,
                            snapshots: vec![case.tick.clone()],
                            large_read_done: false,
                            owners_moved: None,
                        },
                    )
                },
                |(mut app, loaded)| {
                    update::update(&mut app, Event::Loaded(loaded));
                    app
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
    c.final_summary();
}
