//! Memory held at the peak of a read, counted by this binary's allocator per thread (the
//! tests of this binary run in parallel: each span counts only its own thread's).

use std::time::Duration;

use leasectl::lease::backend::LeaseStore;
use leasectl::lease::file::FileStore;
use leasectl::lease::{PruneOptions, Registry};

#[global_allocator]
static ALLOCATOR: alloc_tracker::Allocator<std::alloc::System> = alloc_tracker::Allocator::system();

/// What `f` returned, and the most it held at once on this thread beyond what was live
/// before it began (bytes).
fn peak_of<R>(f: impl FnOnce() -> R) -> (R, f64) {
    let session = alloc_tracker::Session::new().no_stdout().no_file();
    let operation = session.operation("peak");
    let span = operation.measure_thread().iterations(1);
    let out = f();
    drop(span);
    drop(operation);
    let report = session.to_report();
    let peak = report.operations().find_map(|(_, op)| op.peak_outstanding_bytes()).expect("a thread span's peak");
    (out, peak)
}

/// A home whose registry holds `n` entries in Hermes' layout, owned by this live process.
fn home_of(n: usize) -> (tempfile::TempDir, Registry) {
    let dir = tempfile::tempdir().expect("temp home");
    let reg = Registry::new("root", dir.path());
    std::fs::create_dir_all(reg.runtime_dir()).expect("runtime/");
    crate::common::write_live_registry(&reg.path(), n);
    (dir, reg)
}

/// The peak of a `prune --dry-run` of `reg`, whose owners all live (bytes).
fn prune_peak(reg: &Registry) -> f64 {
    let opts = PruneOptions { dry_run: true, ..PruneOptions::default() };
    let (removed, peak) = peak_of(|| {
        leasectl::lease::file::prune(reg, opts, Duration::from_secs(5)).expect("prune --dry-run").removed.len()
    });
    assert_eq!(removed, 0, "every owner is this live process");
    peak
}

/// The peak of a listing of `reg` made by `read`, with its owners looked up (bytes).
fn listing_peak(reg: &Registry, read: fn(&mut FileStore) -> leasectl::lease::Listing) -> f64 {
    let ((listed, owners), peak) = peak_of(|| {
        let listing = read(&mut FileStore::new(reg.clone(), Duration::from_secs(5)));
        let owners = leasectl::lease::owners_of_listing(&listing);
        (listing.leases.map(|l| l.len()), owners.len())
    });
    assert_eq!((listed, owners), (Ok(50_000), 1));
    peak
}

/// The yardstick: `ls` reads a listing and looks its owners up, and at 50,000
/// leases (one owner) that may hold no more than a `prune --dry-run` of the same registry.
/// Both gathered every lease's pid in a list first, and `BTreeSet`'s `collect` does so too
/// (400 KB, and as much again to sort it).
#[test]
fn a_listing_and_its_owners_hold_no_more_than_a_prune_at_50000_leases() {
    let (_dir, reg) = home_of(50_000);
    let prune_peak = prune_peak(&reg);
    let listing_peak = listing_peak(&reg, FileStore::read);
    // Small allocations (paths, the location, one owner's facts) may differ: 64 KB.
    assert!(
        listing_peak <= prune_peak + 64.0 * 1024.0,
        "a listing with its owners held {listing_peak} bytes at its peak, a prune {prune_peak}"
    );
}

/// A one-shot listing (`ls`, nothing remembered) judges each entry as it is read and
/// keeps only its view, and doctor does the same: neither holds the entries beside
/// their views, as a prune does (its peak is the file's text, the entries and their
/// views; the entries are a fifth of it).
#[test]
fn a_one_shot_listing_and_doctor_hold_less_than_a_prune_at_50000_leases() {
    let (_dir, reg) = home_of(50_000);
    let prune_peak = prune_peak(&reg);
    let listing_peak = listing_peak(&reg, FileStore::read_once);
    let (live, doctor_peak) = peak_of(|| leasectl::lease::file::doctor(&reg).live);
    assert_eq!(live, 50_000);
    for (what, peak) in [("a one-shot listing with its owners", listing_peak), ("doctor", doctor_peak)] {
        assert!(peak < 0.9 * prune_peak, "{what} held {peak} bytes at its peak, a prune {prune_peak}");
    }
}

/// What a one-shot listing finds is what a remembered read finds: every view, the
/// problems of an invalid file, the cap; in Hermes' layout and out of it.
#[test]
fn a_one_shot_listing_reads_as_a_remembered_read_does() {
    let (_dir, reg) = home_of(300);
    let timeout = Duration::from_secs(5);
    let text = std::fs::read_to_string(reg.path()).expect("registry");
    let dead = text.replacen("\"pid\": ", "\"pid\": 4000000", 40);
    let spaced = text.replace("\", \"", "\",\"");
    let invalid = text.replacen("\"session_id\": \"chat-7\"", "\"session_id\": 7", 1);
    std::fs::write(reg.config_path(), "max_concurrent_sessions: 5\n").expect("config.yaml");
    for (what, variant) in
        [("Hermes' layout", &text), ("dead owners", &dead), ("another layout", &spaced), ("invalid", &invalid)]
    {
        std::fs::write(reg.path(), variant).expect("registry");
        let once = FileStore::new(reg.clone(), timeout).read_once();
        let remembered = FileStore::new(reg.clone(), timeout).read();
        match (&once.leases, &remembered.leases) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{what}"),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{what}"),
            (a, b) => panic!("{what}: one-shot {a:?}, remembered {b:?}"),
        }
        assert_eq!((once.exists, once.modified, &once.cap), (remembered.exists, remembered.modified, &remembered.cap));
    }
}
