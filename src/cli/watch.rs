//! Following the registries as they change: `ls --watch` (like `kubectl get -w`) and
//! `events --follow` (like `journalctl -f`). A registry is read again when the change
//! feed says its files changed; every second its owners are judged again from what was
//! read (an owner that dies changes no file), and nothing is read.
//! Every change becomes one JSON object, printed in the chosen format, and (`--record`)
//! appended to the home's event journal.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::args::Format;
use super::messages::{stdout_failure, stdout_lost};
use super::output::short_id;
use super::{EXIT_ERROR, EXIT_OK, Failure, fail};
use crate::lease::changes::{self, EventKind, LeaseEvent};
use crate::lease::home::journal::journal_file;
use crate::lease::home::paths;
use crate::lease::owners::liveness::Prober;
use crate::lease::owners_at;
use crate::lease::words::human::escape;
use crate::lease::{self, LeaseStore, LeaseView, Location, WatchScope};

/// The column names over events printed as tsv.
pub(super) const TSV_HEADER: &str = "TIME\tEVENT\tPROFILE\tLEASE\tSESSION\tSURFACE\tPID\tOWNER\tLIVENESS\tDETAIL";

/// How long following waits for etcd's watch to open before its first reading (an
/// unreachable etcd is then said by the reading).
const WATCH_OPEN: Duration = Duration::from_secs(5);
/// How long a follower waits for the hosts' first listings before its first reading.
const HOSTS_FED: Duration = Duration::from_millis(300);

/// How often liveness is judged again without a file change.
const REJUDGE: Duration = Duration::from_secs(1);

/// The metrics file is rewritten after a change at most this often.
const METRICS_AFTER_CHANGE: Duration = Duration::from_secs(1);

/// What following does besides printing.
pub(super) struct Follow<'a> {
    pub format: Format,
    pub no_headers: bool,
    /// Start with every lease held now (`ls -w`), or only with what changes (`events`).
    pub present: bool,
    /// Which leases' events to show.
    pub selected: &'a dyn Fn(&LeaseView) -> bool,
    /// Append every change to the home's event journal.
    pub record: bool,
    /// Rewrite this metrics file (OpenMetrics) after every change, and at least this often
    /// (a lock stuck, an oldest lease aging, a session going idle change nothing in the file).
    pub metrics_file: Option<std::path::PathBuf>,
    pub metrics_every: Duration,
    pub idle: Option<Duration>,
    /// With --all-profiles: registries that appear later are followed too.
    pub discover: Discover,
}

/// Which registries that appear while following are followed too.
pub(super) enum Discover {
    Nothing,
    /// Profiles created under this root (opened with these options).
    Profiles(std::path::PathBuf, lease::StoreOptions),
    /// The registries the hosts followed report (--host), as they report them.
    Hosts(lease::StoreOptions),
}

/// What following knows of one registry between readings.
#[derive(Default)]
struct Seen {
    /// What it held at the last reading (None: unreadable then, or never read).
    last: Option<Vec<LeaseView>>,
    /// What it held at the last valid reading: an invalid spell is compared across, so a
    /// lease held throughout is not "acquired" again when the file is readable again.
    last_valid: Vec<LeaseView>,
    cap: Option<Option<u64>>,
    /// Read for the first time next (all at the start; a profile created later).
    read: bool,
    /// The version of the registry file the last reading read, when known exactly.
    read_version: Option<lease::FileVersion>,
    /// etcd: the revision up to which lease events are said (from the watch after it).
    said_up_to: Option<i64>,
    /// Why the last reading failed, if it did (its end is said in the same words).
    last_error: Option<lease::Error>,
    /// Read validly at least once (a host that answers only later is then first read).
    ever_valid: bool,
    /// A profile created after following began: every lease its first reading finds was
    /// acquired since, and is said (and recorded) so.
    late: bool,
}

pub(super) fn follow(stores: &mut Vec<Box<dyn LeaseStore>>, f: &Follow) -> Result<i32, Failure> {
    let (tx, rx) = channel::<lease::Change>();
    let scope = WatchScope {
        locations: stores.iter().map(|s| s.location().clone()).collect(),
        discover_root: match &f.discover {
            Discover::Profiles(root, _) => Some(root.clone()),
            _ => None,
        },
        debounce: Duration::from_millis(20),
    };
    lease::watch(&scope, Arc::new(move |change| tx.send(change).is_ok()))?;
    // etcd: read only once the watch is open, so every change after the first reading
    // comes as a watch event (those before it, up to the reading's revision, are skipped).
    if stores.iter().any(|s| s.location().is_remote()) {
        let _ = rx.recv_timeout(WATCH_OPEN);
    }
    // Other hosts: their first listings come with the subscription; asking for them
    // again as well would send each twice. Waited for a moment only: a slow host's
    // registries are said when it answers, and hold no other up.
    let deadline = Instant::now() + HOSTS_FED;
    for store in stores.iter() {
        if let Some(host) = store.location().host() {
            lease::wait_for_first_listings(host, deadline);
        }
    }
    let mut noted = Noted::default();
    if f.format == Format::Tsv && !f.no_headers {
        say!("{TSV_HEADER}");
    }
    let mut seen: Vec<Seen> = stores.iter().map(|_| Seen::default()).collect();
    let mut metrics_written: Option<Instant> = None;
    let mut metrics_behind = false;
    let mut contexts = lease::home::context_cache::ContextCache::default();
    let hosts_followed: Vec<Location> = stores.iter().map(|s| s.location().clone()).collect();
    let mut followed: HashSet<Location> = hosts_followed.iter().cloned().collect();
    // The first round looks for every profile (one made before the feed was armed).
    let mut first_round = true;
    loop {
        let files = std::mem::take(&mut noted.files);
        let everything = std::mem::take(&mut noted.everything) || first_round;
        first_round = false;
        let found = match &f.discover {
            Discover::Nothing => vec![],
            Discover::Profiles(root, options) => discover(&followed, root, *options, &files, everything),
            Discover::Hosts(options) => discover_on_hosts(&followed, &hosts_followed, *options),
        };
        let late = matches!(f.discover, Discover::Profiles(..));
        for store in found {
            followed.insert(store.location().clone());
            stores.push(store);
            seen.push(Seen { late, ..Seen::default() });
        }
        let changed = read_round(stores, &mut seen, &mut noted, (&files, everything), &rx, f)?;
        // After a change, at most once a second: each write covers every registry (20,000
        // profiles each changing now and then kept a core busy rewriting it).
        metrics_behind |= changed;
        let due = metrics_written.is_none_or(|at| {
            (metrics_behind && at.elapsed() >= METRICS_AFTER_CHANGE) || at.elapsed() >= f.metrics_every
        });
        if let Some(path) = &f.metrics_file
            && due
        {
            metrics_written = Some(Instant::now());
            metrics_behind = false;
            if let Err(e) = super::metrics::write_file(stores, path, f.idle, &mut contexts) {
                say_err!("leasectl: warning: cannot write {}: {e}", path.display());
            }
        }
        // Nobody reads any more (`| head` exited): stop quietly, whether or not a write
        // failed yet. Output lost otherwise (a full disk) is an error.
        if stdout_lost().is_some() {
            return Ok(EXIT_ERROR);
        }
        if stdout_failure().is_some() || reader_gone() {
            return Ok(EXIT_OK);
        }
        wait_for_change(&rx, &mut noted)?;
    }
}

/// One round of following: the registries whose files the feed said changed are read
/// again, the others' owners judged again from what was read; true when a line was said.
fn read_round(
    stores: &mut [Box<dyn LeaseStore>],
    seen: &mut [Seen],
    noted: &mut Noted,
    (files, everything): (&[PathBuf], bool),
    rx: &Receiver<lease::Change>,
    f: &Follow,
) -> Result<bool, Failure> {
    // The homes whose files the feed said changed: only their registries are read again.
    let homes: HashSet<&Path> = files.iter().flat_map(|p| paths::homes_touched(p)).collect();
    let mut changed = false;
    // One look at each owner process this round, however many registries it holds leases in.
    let mut prober = Prober::new();
    for (store, seen) in stores.iter_mut().zip(seen.iter_mut()) {
        let lines = match step_for(store.as_mut(), seen, (&homes, noted, everything), &mut prober) {
            Step::Skip => continue,
            Step::Rejudge => seen.events(store.rejudge(&mut prober), 0, false, f),
            Step::Read => {
                let (listing, gap, one_write) = read_counting_writes(store.as_mut(), seen, rx, noted)?;
                if store.location().is_remote() {
                    seen.remote_events(listing, std::mem::take(&mut noted.remote), f)
                } else {
                    seen.events(listing, gap, one_write, f)
                }
            }
        };
        for line in &lines {
            emit(store.location(), line, f);
        }
        changed |= !lines.is_empty();
    }
    Ok(changed)
}

/// What a round does with one registry.
enum Step {
    Skip,
    /// Judge its owners again from what was read.
    Rejudge,
    Read,
}

/// What a round does with `store`: read a registry when it was never read, when the
/// feed named its home or noted its replacement (or named nothing), or when an owner
/// changed and its file is not the version read (replaced, its event still on the way);
/// else judge its owners again, if it has any and they changed.
fn step_for(
    store: &mut dyn LeaseStore,
    seen: &Seen,
    (homes, noted, everything): (&HashSet<&Path>, &Noted, bool),
    prober: &mut Prober,
) -> Step {
    let Some((path, named)) = store.location().registry().map(|reg| {
        let path = reg.path();
        let named = homes.contains(reg.home.as_path()) || noted.replaced.contains_key(&path);
        (path, named)
    }) else {
        // Another host sends each change it sees: nothing sent, nothing to read again.
        if seen.read && store.location().host().is_some() && !store.rejudge_needed(prober) {
            return Step::Skip;
        }
        return Step::Read;
    };
    if !seen.read || everything || named {
        return Step::Read;
    }
    // Nothing of its home changed: only its owners can have (one that dies changes no
    // file), and a registry without a lease has none.
    if seen.last.as_ref().is_none_or(|views| views.is_empty()) {
        return Step::Skip;
    }
    // Owners as they were: nothing to say until the feed names the file.
    if !store.rejudge_needed(prober) {
        return Step::Skip;
    }
    // The feed gathers a change for 20 ms: an owner that released its lease and ended at
    // once would be judged dead on what it held before. Looked at only when an owner
    // changed: a look at each of 20,000 files a second was most of an idle follower's work.
    if lease::FileVersion::of(&path) != seen.read_version { Step::Read } else { Step::Rejudge }
}

/// What the change feed said since the last reading.
#[derive(Default)]
struct Noted {
    /// Versions of each registry file replaced since it was last read: more than one means
    /// the ones between were never seen (a file gives its latest version only).
    replaced: HashMap<PathBuf, Vec<Option<lease::FileVersion>>>,
    /// etcd's watch events since the last reading, in revision order.
    remote: Vec<lease::RemoteChange>,
    /// Paths in the homes that changed (a registry, a config.yaml, a profile made).
    files: Vec<PathBuf>,
    /// The feed named no path (more than it names, an overflow, another host's news):
    /// anything may have changed.
    everything: bool,
    /// When a reading last waited for a note that never came ([`await_noted`]).
    gave_up: Option<Instant>,
}

/// Stores for the registries the hosts of `hosts` have reported since the last look.
fn discover_on_hosts(
    followed: &HashSet<Location>,
    hosts: &[Location],
    options: lease::StoreOptions,
) -> Vec<Box<dyn LeaseStore>> {
    lease::known_registries(hosts)
        .into_iter()
        .filter(|location| !followed.contains(location))
        .filter_map(|location| lease::open(&location, options).ok())
        .collect()
}

/// Stores for the profiles created under `root` that the changed `files` name, or (any
/// other directory came or went, or `everything`) for every profile not followed yet:
/// listing 20,000 profiles every second was most of an idle follower's CPU.
fn discover(
    followed: &HashSet<Location>,
    root: &Path,
    options: lease::StoreOptions,
    files: &[PathBuf],
    everything: bool,
) -> Vec<Box<dyn LeaseStore>> {
    let new = |location: &Location| !followed.contains(location);
    let open = |location: Location| lease::open(&location, options).ok();
    let known = |p: &Path| paths::is_home_file(p) || paths::is_runtime_dir(p) || paths::is_in_profiles_of(root, p);
    if everything || !files.iter().all(|p| known(p)) {
        return paths::all_registries(root).into_iter().map(Location::File).filter(new).filter_map(open).collect();
    }
    // A profile made: a real directory (never a link, as the listing takes none).
    files
        .iter()
        .filter(|p| paths::is_profile_of(root, p) && std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .filter_map(|dir| Some(Location::File(lease::Registry::new(dir.file_name()?.to_str()?, dir.as_path()))))
        .filter(new)
        .filter_map(open)
        .collect()
}

impl Seen {
    /// The events of a registry's first reading: every lease acquired (a profile created
    /// since following began), present (`ls -w`), or none, with a line that says the
    /// watch is on (a script can wait for it; never recorded).
    fn first_events(
        &self,
        location: &Location,
        views: &[LeaseView],
        f: &Follow,
        lines: &mut Vec<Value>,
    ) -> Vec<LeaseEvent> {
        if self.late {
            return changes::between(&[], views);
        }
        // An empty registry says it is being watched too (a silent `ls -w` looked hung).
        if f.present && !views.is_empty() {
            return changes::present(views);
        }
        let held = crate::lease::words::human::plural(views.len(), "lease", "leases");
        lines.push(registry_event(location, "following", &format!("{held} now")));
        vec![]
    }

    /// A `cap-changed` line when the cap read now is not the one read last.
    fn cap_change(&mut self, location: &Location, cap: Option<u64>) -> Option<Value> {
        let before = self.cap.replace(cap)?;
        let show = |c: Option<u64>| c.map(|c| c.to_string()).unwrap_or_else(|| "none".into());
        (before != cap).then(|| registry_event(location, "cap-changed", &format!("{} -> {}", show(before), show(cap))))
    }

    /// How many versions of the file were never read, of those replaced since the last
    /// reading ([`lease::FileVersion::unseen`]).
    fn unseen(&self, replaced: &[Option<lease::FileVersion>]) -> usize {
        lease::FileVersion::unseen(self.read_version, replaced)
    }

    /// The lines one reading gives: versions missed (`unseen`), a cap changed, the
    /// file turning invalid or valid, and each lease event `f` selects.
    fn events(&mut self, listing: lease::Listing, unseen: usize, one_write: bool, f: &Follow) -> Vec<Value> {
        let location = listing.location;
        let mut lines: Vec<Value> = Vec::new();
        if unseen > 0 {
            let mut gap = registry_event(
                &location,
                "gap",
                &format!(
                    "at least {} of the registry written since it was last read never seen: a lease \
                     acquired and released within them is not shown",
                    crate::lease::words::human::plural(unseen, "version", "versions")
                ),
            );
            if let Some(map) = gap.as_object_mut() {
                map.insert("unseen".into(), unseen.into());
            }
            lines.push(gap);
        }
        // A host not answered yet says nothing of its registry, nor of its cap: a session
        // still being opened is said once it answers (or fails).
        let unanswered =
            matches!(listing.leases, Err(lease::Error::Unreachable { .. } | lease::Error::Connecting { .. }));
        if matches!(listing.leases, Err(lease::Error::Connecting { .. }))
            && !self.ever_valid
            && self.last_error.is_none()
        {
            return lines;
        }
        if !unanswered {
            lines.extend(self.cap_change(&location, listing.cap.cap));
        }
        let first = !self.read;
        self.read = true;
        let views = match listing.leases {
            Err(e) => {
                if self.last.is_some() || first {
                    let (invalid, _) = changes::unreadable_names(&location, Some(&e));
                    lines.push(registry_event(&location, invalid, &e.to_string()));
                }
                self.last = None;
                self.last_error = Some(e);
                return lines;
            }
            Ok(views) => views,
        };
        let was = self.last_error.take();
        // The first valid reading after a start it could not be read at (a host that
        // answered late): what it holds was there before, not acquired now.
        let first = first || !self.ever_valid;
        self.ever_valid = true;
        if first && was.is_some() {
            let (_, valid) = changes::unreadable_names(&location, was.as_ref());
            lines.push(registry_event(&location, valid, changes::again_words(&location, was.as_ref())));
        }
        let events = match self.last.as_ref() {
            None if first => self.first_events(&location, &views, f, &mut lines),
            None => {
                let (_, valid) = changes::unreadable_names(&location, was.as_ref());
                lines.push(registry_event(&location, valid, changes::again_words(&location, was.as_ref())));
                changes::between(&self.last_valid, &views)
            }
            Some(old) => changes::between(old, &views),
        };
        let mut events = events;
        let fenced = if one_write {
            let mut prober = lease::Prober::new();
            changes::prunes_of_an_acquire(&mut events, |v| prober.judge(&v.entry))
        } else {
            vec![]
        };
        // Filtered after the diff: an owner dying is shown under --liveness dead.
        let events: Vec<LeaseEvent> = events.into_iter().filter(|e| (f.selected)(&e.view)).collect();
        lines.extend(lease_events(&location, &events, &views, &fenced));
        self.last_valid.clone_from(&views);
        self.last = Some(views);
        lines
    }
}

mod remote;

/// One line out: recorded first (a reader who has seen the line can find it in the
/// journal), then printed.
fn emit(location: &Location, line: &Value, f: &Follow) {
    if f.record
        && line["event"] != "present"
        && line["event"] != "following"
        && let Some(home) = lease::home::journal::record_home(location)
        && let Err(e) = lease::home::audit::append_rotating(
            &journal_file(&home),
            &line.to_string(),
            lease::home::audit::MAX_BYTES,
            lease::home::audit::KEEP,
        )
    {
        say_err!("leasectl: warning: cannot record the event in {}: {e}", journal_file(&home).display());
    }
    print_line(f.format, line);
}

/// Wait for the next change (or the re-judge interval), counting the registry versions
/// replaced meanwhile.
/// Read `store`; with it, how many versions of its file were never read (`unseen`) and
/// whether the reading spans exactly one write.
fn read_counting_writes(
    store: &mut dyn LeaseStore,
    seen: &mut Seen,
    rx: &Receiver<lease::Change>,
    noted: &mut Noted,
) -> Result<(lease::Listing, usize, bool), Failure> {
    let path = store.location().registry().map(|r| r.path());
    let mut before = path.as_deref().and_then(lease::FileVersion::of);
    // Replaced before its event came (a re-judge tick reads it first): the event is
    // awaited a moment, so the reading knows how many writes it spans.
    if let Some(p) = path.as_deref()
        && seen.read_version.is_some()
        && before.is_some()
        && before != seen.read_version
        && !noted.replaced.contains_key(p)
    {
        await_noted(rx, noted, p)?;
        before = lease::FileVersion::of(p);
    }
    let listing = store.read();
    let after = path.as_deref().and_then(lease::FileVersion::of);
    let versions = path.as_ref().and_then(|p| noted.replaced.remove(p)).unwrap_or_default();
    let gap = seen.unseen(&versions);
    // Every version but the one read now was read before: one write between.
    let one_write = gap == 0 && !versions.is_empty();
    // Known exactly only when nothing replaced the file while it was read.
    seen.read_version = before.filter(|_| before == after);
    Ok((listing, gap, one_write))
}

/// How long a reading waits for the event of a replacement it found.
const FEED_WAIT: Duration = Duration::from_millis(150);

/// Note what the feed sends until it has noted a replacement of `path`, for at most
/// [`FEED_WAIT`].
/// A wait that ended without its note makes the readings of the next second not wait:
/// the feed named no file (a burst of more than it names, an overflow), and each registry
/// changed would otherwise wait its turn (20 s for 200).
fn await_noted(rx: &Receiver<lease::Change>, noted: &mut Noted, path: &std::path::Path) -> Result<(), Failure> {
    if noted.gave_up.is_some_and(|at| at.elapsed() < NO_WAIT_AFTER_GIVING_UP) {
        return Ok(());
    }
    let until = Instant::now() + FEED_WAIT;
    while !noted.replaced.contains_key(path) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            noted.gave_up = Some(Instant::now());
            break;
        }
        match rx.recv_timeout(left) {
            Ok(change) => note(change, noted),
            Err(RecvTimeoutError::Timeout) => {
                noted.gave_up = Some(Instant::now());
                break;
            }
            Err(RecvTimeoutError::Disconnected) => return Err(fail("the change feed stopped")),
        }
    }
    Ok(())
}

/// How long after a wait for a note that never came no reading waits for one.
const NO_WAIT_AFTER_GIVING_UP: Duration = Duration::from_secs(1);

fn note(change: lease::Change, noted: &mut Noted) {
    match change {
        lease::Change::Replaced(path, versions) => noted.replaced.entry(path).or_default().extend(versions),
        lease::Change::Remote(changes) => noted.remote.extend(changes),
        lease::Change::Files(paths) if paths.is_empty() => noted.everything = true,
        lease::Change::Files(paths) => {
            // Bounded: under churn the same paths come again; past the bound, read all.
            for p in paths {
                if noted.files.len() >= MAX_NOTED_FILES {
                    noted.everything = true;
                } else if !noted.files.contains(&p) {
                    noted.files.push(p);
                }
            }
        }
    }
}

/// The changed paths noted between readings, at most; more, and every registry is read.
const MAX_NOTED_FILES: usize = 1024;

fn wait_for_change(rx: &Receiver<lease::Change>, noted: &mut Noted) -> Result<(), Failure> {
    match rx.recv_timeout(REJUDGE) {
        Ok(change) => {
            note(change, noted);
            while let Ok(change) = rx.try_recv() {
                note(change, noted);
            }
            Ok(())
        }
        Err(RecvTimeoutError::Timeout) => Ok(()),
        Err(RecvTimeoutError::Disconnected) => Err(fail("the change feed stopped")),
    }
}

/// True when standard output is a pipe whose reader has closed it (poll reports POLLERR).
fn reader_gone() -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(&stdout, PollFlags::empty())];
    let zero = rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 };
    poll(&mut fds, Some(&zero)).is_ok_and(|n| n > 0) && fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP)
}

fn stamp() -> (String, f64) {
    let now = jiff::Timestamp::now();
    (crate::lease::words::human::event_time(now), now.as_millisecond() as f64 / 1000.0)
}

fn registry_event(location: &Location, kind: &str, detail: &str) -> Value {
    let (time, ts) = stamp();
    super::json::registry_event((&time, ts), location, kind, detail)
}

/// Lease events as JSON lines; a lease gone is named in the one vocabulary
/// ([`lease::home::remover`]): by whom, when the home's audit file recorded it, by an acquire
/// when it went in the write of one (`fenced`).
fn lease_events(location: &Location, events: &[LeaseEvent], now_held: &[LeaseView], fenced: &[String]) -> Vec<Value> {
    if events.is_empty() {
        return vec![];
    }
    // `conflict` as ls judges it: over what the registry holds now.
    let marks = super::marks::Marks::of(now_held, None);
    let pids: Vec<u64> = events.iter().map(|e| e.view.entry.pid()).collect();
    let owners = owners_at(location, &pids);
    let (time, ts) = stamp();
    let audited = match location.registry() {
        Some(reg) if events.iter().any(|e| matches!(e.kind, EventKind::Released | EventKind::Pruned)) => {
            lease::home::audit::recent_records(&lease::home::audit::audit_file(&reg.home))
        }
        _ => vec![],
    };
    events
        .iter()
        .map(|ev| {
            let id = ev.view.entry.lease_id();
            let (kind, detail) = match ev.kind {
                EventKind::Released | EventKind::Pruned => {
                    let alive = ev.kind == EventKind::Released;
                    let by = lease::home::remover::remover(alive, id, &audited, fenced.iter().any(|f| f == id));
                    (by.event().to_owned(), by.detail())
                }
                kind => (kind.name().to_owned(), None),
            };
            let conflict = marks.of_lease(&ev.view).contains(&"CONFLICT");
            let lease_now = (&ev.view, ev.view.owner_pid_here().and_then(|p| owners.get(&p)), conflict);
            super::json::lease_event((&time, ts), location, &kind, lease_now, detail.as_deref())
        })
        .collect()
}

/// One event as the format prints it (journal lines are printed the same way).
pub(super) fn print_line(format: Format, v: &Value) {
    let s = |v: &Value| v.as_str().map(|x| escape(x).into_owned()).unwrap_or_else(|| "-".into());
    let lease = &v["lease"];
    let entry = &lease["entry"];
    let owner = escape(&crate::lease::owners::owner::owner_label(
        lease["liveness"].as_str().unwrap_or_default(),
        lease["liveness_detail"].as_str().is_some_and(|d| d.contains("clock step?")),
        lease["owner"]["name"].as_str(),
    ))
    .into_owned();
    let detail = v["detail"].as_str().map(|d| escape(d).into_owned());
    // Over --host: `host:profile`.
    let place = match v["host"].as_str() {
        Some(h) => format!("{}:{}", escape(h), s(&v["profile"])),
        None => s(&v["profile"]),
    };
    match format {
        Format::Json => {
            use std::io::Write as _;
            super::note_stdout(writeln!(std::io::stdout(), "{v}"));
        }
        Format::Tsv => say!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            s(&v["time"]),
            s(&v["event"]),
            place,
            s(&entry["lease_id"]),
            s(&entry["session_id"]),
            s(&entry["surface"]),
            entry["pid"].as_u64().map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            owner,
            s(&lease["liveness"]),
            detail.unwrap_or_else(|| "-".into())
        ),
        Format::Table | Format::Wide if entry.is_null() => {
            say!("{}  {:<16}  {}  {}", s(&v["time"]), s(&v["event"]), place, detail.unwrap_or_default())
        }
        Format::Table | Format::Wide => {
            let tail = detail.map(|d| format!("  — {d}")).unwrap_or_default();
            // The owner's name where one is known (not `(-)` beside its liveness).
            let owner = if owner == "-" { String::new() } else { format!(" ({owner})") };
            say!(
                "{}  {:<16}  {}  lease {}  session {}  {}  pid {}{}  {}{tail}",
                s(&v["time"]),
                s(&v["event"]),
                place,
                escape(&short_id(entry["lease_id"].as_str().unwrap_or("-"))),
                s(&entry["session_id"]),
                s(&entry["surface"]),
                entry["pid"].as_u64().map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
                owner,
                s(&lease["liveness"])
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(ino: u64) -> Option<lease::FileVersion> {
        Some(lease::FileVersion { ino, ctime_ns: 0 })
    }

    #[test]
    fn a_late_event_of_the_version_read_is_no_gap() {
        // The re-judge tick read v3 before v3's rename event came; v4 followed at once.
        let seen = Seen { read_version: v(3), ..Seen::default() };
        assert_eq!(seen.unseen(&[v(3), v(4)]), 0);
        assert_eq!(seen.unseen(&[v(3)]), 0, "only the late event: nothing new");
        // v2 and v3 written, v1 read before: v2 was never seen.
        let seen = Seen { read_version: v(1), ..Seen::default() };
        assert_eq!(seen.unseen(&[v(2), v(3)]), 1);
        // Versions not looked at in time count as unseen (at least).
        assert_eq!(seen.unseen(&[None, None, v(4)]), 2);
        assert_eq!(Seen::default().unseen(&[]), 0);
        // v3 read by the tick; v3's event handled after v4 replaced it: both name v4.
        let seen = Seen { read_version: v(3), ..Seen::default() };
        assert_eq!(seen.unseen(&[v(4), v(4)]), 0, "no false gap");
        // Three events, two naming v5, v3 read before: v4 may be unseen, v3 is credited.
        assert_eq!(seen.unseen(&[v(5), v(5), v(5)]), 1);
    }
}
