//! `leasectl metrics`: the registries as Prometheus/OpenMetrics text, for a scraper or
//! node_exporter's textfile collector.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::time::Duration;

use super::marks::Marks;
use crate::lease::home::context;
use crate::lease::home::context_cache::ContextCache;
use crate::lease::home::lock::HeldFlocks;
use crate::lease::owners::liveness::Prober;
use crate::lease::{LeaseStore, now};

/// How long `metrics` waits for a registry lock to measure the wait.
const LOCK_PROBE: Duration = Duration::from_secs(1);

/// The samples of one metric family: labels and value.
struct Family {
    name: &'static str,
    help: &'static str,
    samples: Vec<(Labels, f64)>,
}

fn family(name: &'static str, help: &'static str) -> Family {
    Family { name, help, samples: vec![] }
}

/// OpenMetrics label values: backslash, double quote and newline escaped.
fn label_value(v: &str) -> String {
    v.replace('\\', r"\\").replace('"', "\\\"").replace('\n', r"\n")
}

/// `leasectl metrics`: the text on standard output.
pub(super) fn print(stores: &mut [Box<dyn LeaseStore>], idle: Option<Duration>) -> Result<i32, super::Failure> {
    use std::io::Write as _;
    let text = render(stores, idle, &mut ContextCache::default());
    super::note_stdout(std::io::stdout().write_all(text.as_bytes()));
    Ok(super::EXIT_OK)
}

/// How many wait in line, and how long the first has waited.
fn line_samples(line: &[crate::lease::Waiter], profile: &Labels, at: f64, [count, longest]: [&mut Family; 2]) {
    count.samples.push((profile.clone(), line.len() as f64));
    if let Some(first) = line.iter().map(|w| w.since).min_by(f64::total_cmp) {
        longest.samples.push((profile.clone(), (at - first).max(0.0)));
    }
}

/// A sample's labels as written, `k="v",...`: a registry's are written once and shared
/// by its samples (20,000 profiles' labels made and joined again for each sample were
/// most of a write's own work).
type Labels = std::rc::Rc<str>;

/// `pairs` as labels; each value is escaped already ([`label_value`]).
fn labels(pairs: &[(&str, String)]) -> Labels {
    let text: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    Labels::from(text.join(","))
}

/// The metrics text for `stores`; `idle` is the leak threshold given on the command line.
/// Each store is judged again from its last reading (read now if it has none): a follower
/// has just read the registries that changed, and reading 20,000 again for every write
/// of the file was most of its work.
pub(super) fn render(
    stores: &mut [Box<dyn LeaseStore>],
    idle: Option<Duration>,
    contexts: &mut ContextCache,
) -> String {
    let mut leases = family("leasectl_leases", "Leases in the registry, by owner liveness.");
    let mut live = family("leasectl_live_leases", "Leases whose owner is alive: the slots in use.");
    let mut cap = family("leasectl_cap", "max_concurrent_sessions (absent: no cap).");
    let mut conflicts = family("leasectl_conflicts", "Sessions held by more than one live owner.");
    let mut leaks = family("leasectl_leak_suspects", "Live owners whose session ended or went idle (state.db).");
    let mut valid = family("leasectl_registry_valid", "1 when the registry reads as valid, 0 when not.");
    let mut oldest = family("leasectl_oldest_lease_age_seconds", "Age of the oldest lease.");
    let mut waited = family(
        "leasectl_lock_wait_seconds",
        "How long taking the registry lock took (1 s at most; 0 where no one held it).",
    );
    let mut held = family("leasectl_lock_held", "1 when the lock stayed held for the whole probe.");
    let mut up = family("leasectl_host_up", "1 when the host (--host) answered, 0 when it could not be reached.");
    let mut waiters = family("leasectl_waiters", "Clients waiting in line (--wait) under an etcd prefix.");
    let mut longest = family("leasectl_longest_wait_seconds", "How long the first in line has waited (etcd).");
    let mut hosts: Vec<(String, bool)> = Vec::new();
    let at = now();
    let held_flocks = HeldFlocks::now();
    let mut homes_asked = HashSet::new();
    // One look at each owner process a write, however many registries it holds leases in.
    let mut prober = Prober::new();
    for store in stores.iter_mut() {
        let listing = store.rejudge(&mut prober);
        // A host that did not answer: down, and nothing is known of its registries (not
        // an invalid one).
        if !host_answered(&listing, &mut hosts) {
            continue;
        }
        let profile = profile_labels(&listing.location);
        valid.samples.push((profile.clone(), f64::from(u8::from(listing.leases.is_ok()))));
        if let Some(remote) = &listing.remote {
            line_samples(&remote.waiting, &profile, at, [&mut waiters, &mut longest]);
        }
        if let Some(c) = listing.cap.cap {
            cap.samples.push((profile.clone(), c as f64));
        }
        if let Ok(views) = &listing.leases {
            let mut by_state: HashMap<&str, usize> = ["alive", "dead", "recycled", "unknown"].map(|s| (s, 0)).into();
            for v in views {
                *by_state.entry(v.liveness.name()).or_default() += 1;
            }
            let mut states: Vec<(&str, usize)> = by_state.into_iter().collect();
            states.sort();
            for (state, n) in states {
                leases.samples.push((Labels::from(format!("{profile},liveness=\"{state}\"")), n as f64));
            }
            let mut marks = Marks::of(views, listing.cap.cap);
            if let Some(reg) = listing.location.registry() {
                marks.leak_suspects = leak_suspects(&reg.home, views, (idle, at), contexts, &mut homes_asked);
            }
            live.samples.push((profile.clone(), marks.live as f64));
            conflicts.samples.push((profile.clone(), marks.conflicts.len() as f64));
            leaks.samples.push((profile.clone(), marks.leak_suspects as f64));
            if let Some(first) = views.iter().filter_map(|v| v.entry.started_at()).min_by(f64::total_cmp) {
                oldest.samples.push((profile.clone(), (at - first).max(0.0)));
            }
        }
        // The wait is measured only where the lock file exists: metrics creates nothing.
        if let Some(probe) = store.probe_lock(LOCK_PROBE, &held_flocks) {
            waited.samples.push((profile.clone(), probe.waited.as_secs_f64()));
            held.samples.push((profile, f64::from(u8::from(probe.held))));
        }
    }
    contexts.keep_only(&homes_asked);
    for (host, answered) in hosts {
        up.samples.push((labels(&[("host", label_value(&host))]), f64::from(u8::from(answered))));
    }
    let mut out = String::new();
    // Families only some backends have are left out where none is.
    let optional = [waiters, longest, up].into_iter().filter(|f| !f.samples.is_empty());
    for f in [leases, live, cap, conflicts, leaks, valid, oldest, waited, held].into_iter().chain(optional) {
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} gauge", f.name);
        for (labels, value) in f.samples {
            let _ = writeln!(out, "{}{{{labels}}} {value}", f.name);
        }
    }
    out.push_str("# EOF\n");
    out
}

/// A registry's labels: its profile, its host over --host, its prefix on etcd.
fn profile_labels(location: &crate::lease::Location) -> Labels {
    let mut pairs = vec![("profile", label_value(location.name()))];
    // Over --host: each host's registries under its name.
    if let Some(host) = location.host() {
        pairs.insert(0, ("host", label_value(&host.name)));
    }
    // Every etcd prefix is profile "etcd": its prefix tells two fences apart.
    if let crate::lease::Location::Etcd(fence) = location {
        pairs.push(("prefix", label_value(&fence.prefix)));
    }
    labels(&pairs)
}

/// How many of `views` (the registry of `home`) look leaked at `at`, by the idle threshold
/// given or the home's, and its state.db as `contexts` keeps it. Only a live owner's lease
/// can be one: a home without one is not asked (nor noted in `asked`).
fn leak_suspects(
    home: &std::path::Path,
    views: &[crate::lease::LeaseView],
    (idle, at): (Option<Duration>, f64),
    contexts: &mut ContextCache,
    asked: &mut HashSet<std::path::PathBuf>,
) -> usize {
    let mut alive: Vec<&str> = views.iter().filter(|v| v.liveness.is_alive()).map(|v| v.entry.session_id()).collect();
    if alive.is_empty() {
        return 0;
    }
    alive.sort_unstable();
    alive.dedup();
    asked.insert(home.to_path_buf());
    let (threshold, found) = contexts.get(home, idle, &alive);
    views.iter().filter(|v| context::is_leak(v, found.get(v.entry.session_id()), threshold, at)).count()
}

/// Whether `listing`'s host (if on one) answered; each host counted once in `hosts`,
/// up when any of its registries answered.
fn host_answered(listing: &crate::lease::Listing, hosts: &mut Vec<(String, bool)>) -> bool {
    let Some(host) = listing.location.host() else { return true };
    let down = listing.leases.as_ref().is_err_and(crate::lease::Error::unanswered);
    match hosts.iter_mut().find(|(name, _)| *name == host.name) {
        Some((_, answered)) => *answered |= !down,
        None => hosts.push((host.name.clone(), !down)),
    }
    !down
}

/// The metrics file, replaced whole: a temp file created exclusively at an unguessable
/// name beside it (a textfile collector's directory may be writable by others: a planted
/// symlink is never followed), made readable by the collector, then renamed over it.
pub(super) fn write_file(
    stores: &mut [Box<dyn LeaseStore>],
    path: &std::path::Path,
    idle: Option<Duration>,
    contexts: &mut ContextCache,
) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt;
    let text = render(stores, idle, contexts);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let mut tmp = tempfile::Builder::new().prefix(".leasectl-metrics-").tempfile_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().set_permissions(std::fs::Permissions::from_mode(0o644))?;
    tmp.persist(path).map(|_| ()).map_err(|e| e.error)
}
