//! One story on every surface: a scripted morning on a home (the root and, later, a new
//! profile) — leases acquired, an owner killed, a CLI force-release, a console prune, a
//! repair, a fence prune, a profile created — read at once by the console's worker and
//! log, `ls -w`, `events --follow` (the recorder), and afterwards by `events --since` and
//! the audit file. Every surface must tell the same lease events in the same words, with
//! the same actor.

use std::path::Path;
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use leasectl::lease::{Location, Registry};
use leasectl::tui::event::{Effect, Event};
use leasectl::tui::state::App;
use leasectl::tui::update::update;
use leasectl::tui::worker::{Scope, Worker};
use serde_json::Value;

use crate::common::process::{Proc, Sleeper, leasectl};

/// Between steps: longer than every interval a follower reads at (1 s).
const PAUSE: Duration = Duration::from_millis(1600);

/// One lease event as a surface tells it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Told {
    profile: String,
    event: String,
    lease: String,
    detail: String,
}

const LEASE_EVENTS: [&str; 6] = ["acquired", "released", "force-released", "pruned", "removed", "owner-died"];

/// A JSON event line of `ls -w`, `events -f` or `events --since`, when it is a lease's.
fn told_json(v: &Value) -> Option<Told> {
    let event = v["event"].as_str()?;
    if !LEASE_EVENTS.contains(&event) {
        return None;
    }
    Some(Told {
        profile: v["profile"].as_str()?.to_owned(),
        event: event.to_owned(),
        lease: v["lease"]["entry"]["lease_id"].as_str()?.chars().take(8).collect(),
        detail: v["detail"].as_str().unwrap_or_default().to_owned(),
    })
}

/// A console log line, when it is a lease event: `EVENT: session S (SURFACE, pid P, lease ID)[ — DETAIL]`.
fn told_console(profile: &str, text: &str) -> Option<Told> {
    let (event, rest) = text.split_once(": session ")?;
    if !LEASE_EVENTS.contains(&event) {
        return None;
    }
    let (head, detail) = rest.split_once(" — ").unwrap_or((rest, ""));
    let lease = head.rsplit_once("lease ")?.1.trim_end_matches(')').to_owned();
    Some(Told { profile: profile.to_owned(), event: event.to_owned(), lease, detail: detail.to_owned() })
}

/// The console's worker and log, fed as the console feeds them: a full reading after
/// each step (the watcher would ask for one) and the liveness ticks.
struct Console {
    worker: Worker,
    app: App,
}

impl Console {
    fn start(root: &Path) -> Console {
        let scope = Scope {
            locations: vec![Location::File(Registry::new("root", root))],
            discover_root: Some(root.to_path_buf()),
            discover_hosts: false,
        };
        let mut worker = Worker::new(scope, Duration::from_secs(3), None);
        // The console's change feed, as it runs: it notes the versions each write replaced
        // (how the worker tells one acquire's write from a release and a later acquire).
        let (tx, rx) = std::sync::mpsc::channel();
        let watch = leasectl::lease::WatchScope {
            locations: vec![Location::File(Registry::new("root", root))],
            discover_root: Some(root.to_path_buf()),
            debounce: Duration::from_millis(20),
        };
        leasectl::tui::sources::spawn_watcher(&watch, tx, worker.replaced()).expect("the change feed");
        std::thread::spawn(move || while rx.recv().is_ok() {});
        let regs = vec![Location::File(Registry::new("root", root))];
        let mut app = App::new(regs, leasectl::lease::now(), jiff::tz::TimeZone::UTC);
        let first = worker.reload();
        update(&mut app, Event::Loaded(first));
        Console { worker, app }
    }

    /// Read as the console does after a change, then a tick later.
    fn look(&mut self) {
        let loaded = self.worker.reload();
        update(&mut self.app, Event::Loaded(loaded));
        if let Some(loaded) = self.worker.relive_if_changed() {
            update(&mut self.app, Event::Loaded(loaded));
        }
    }

    /// `p` then `y` on the root's tab: the worker runs the prune, as the console does.
    fn prune(&mut self, root: &Path) {
        let effect = Effect::Prune { location: Location::File(Registry::new("root", root)) };
        if let Some(done) = self.worker.act(&effect) {
            update(&mut self.app, done);
        }
        self.look();
    }

    fn told(&self) -> Vec<Told> {
        self.app.log.iter().filter_map(|l| told_console(&l.profile, &l.text)).collect()
    }
}

fn acquire(root: &Path, profile: Option<&str>, session: &str, owner: &Sleeper) -> String {
    crate::common::process::acquire_for(root, profile, session, owner)
}

fn run_ok(root: &Path, args: &[&str]) {
    let out = leasectl(root, args).stdin(Stdio::null()).output().expect("leasectl");
    assert!(out.status.success(), "leasectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Everything a follower printed so far, as lease events.
fn drain(follower: &Proc, until_quiet: Duration) -> Vec<Value> {
    let mut lines = Vec::new();
    let deadline = Instant::now() + until_quiet;
    while Instant::now() < deadline {
        if let Some(line) = follower.try_line(Duration::from_millis(100)) {
            lines.push(
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("{}: not JSON ({e}): {line}", follower.label)),
            );
        }
    }
    lines
}

#[test]
fn a_scripted_morning_reads_the_same_on_every_surface() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("home");
    std::fs::create_dir_all(root.join("runtime")).expect("home");
    std::fs::write(root.join("config.yaml"), "max_concurrent_sessions: 8\n").expect("config");
    let owners: Vec<Sleeper> = (0..6).map(|_| Sleeper::new()).collect();
    let mut console = Console::start(&root);
    let watch = |args: &[&str]| {
        let mut cmd = leasectl(&root, args);
        cmd.stdout(Stdio::piped());
        Proc::spawn(&format!("leasectl {}", args.join(" ")), cmd)
    };
    let ls_w = watch(&["--all-profiles", "ls", "-w", "-o", "json"]);
    let recorder = watch(&["--all-profiles", "events", "--follow", "--record", "-o", "json"]);
    // Both are on before the morning starts: an empty registry is said to be followed.
    for f in [&ls_w, &recorder] {
        let first = f.json_line();
        assert_eq!(first["event"], "following", "{}: {first}", f.label);
    }
    let start = leasectl::lease::now();
    thread::sleep(PAUSE);

    // Sessions open.
    let s1 = acquire(&root, None, "S1", &owners[0]);
    let s2 = acquire(&root, None, "S2", &owners[1]);
    let s3 = acquire(&root, None, "S3", &owners[2]);
    let s4 = acquire(&root, None, "S4", &owners[3]);
    thread::sleep(PAUSE);
    console.look();
    // S1's owner crashes.
    let mut owners = owners;
    owners[0].kill();
    thread::sleep(PAUSE);
    console.look();
    // An operator force-releases S2 from the CLI (its owner lives: --live).
    run_ok(&root, &["force-release", &s2, "--live"]);
    thread::sleep(PAUSE);
    console.look();
    // The console prunes S1's dead lease.
    console.prune(&root);
    thread::sleep(PAUSE);
    console.look();
    // S3's entry is broken by hand; `doctor --repair --force` drops it.
    let path = root.join("runtime/active_sessions.json");
    let text = std::fs::read_to_string(&path).expect("registry");
    std::fs::write(&path, text.replace("\"S3\"", "\"\"")).expect("break S3's entry");
    thread::sleep(PAUSE);
    console.look();
    run_ok(&root, &["doctor", "--repair", "--yes", "--force"]);
    thread::sleep(PAUSE);
    console.look();
    // S4's owner crashes; a new session's acquire prunes its lease (the fence).
    owners[3].kill();
    thread::sleep(PAUSE);
    console.look();
    let s5 = acquire(&root, None, "S5", &owners[4]);
    thread::sleep(PAUSE);
    console.look();
    // A profile is created and a session opens there.
    crate::common::make_profile(root.join("profiles/p2"));
    let s6 = acquire(&root, Some("p2"), "S6", &owners[5]);
    thread::sleep(PAUSE);
    console.look();
    thread::sleep(PAUSE);
    console.look();

    let from_ls = drain(&ls_w, Duration::from_secs(2));
    let from_events = drain(&recorder, Duration::from_secs(1));
    let since = leasectl(&root, &["--all-profiles", "events", "--since", "1h", "-o", "json"])
        .stdin(Stdio::null())
        .output()
        .expect("events --since");
    let from_since: Vec<Value> = String::from_utf8_lossy(&since.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .filter(|v: &Value| v["ts"].as_f64().is_none_or(|t| t >= start - 1.0))
        .collect();

    let surfaces: Vec<(&str, Vec<Told>)> = vec![
        ("console", console.told()),
        ("ls -w", from_ls.iter().filter_map(told_json).collect()),
        ("events -f", from_events.iter().filter_map(told_json).collect()),
        ("events --since", from_since.iter().filter_map(told_json).collect()),
    ];
    let short = |id: &str| id.chars().take(8).collect::<String>();
    // What happened, as it happened: every surface tells it whole.
    let (_, reference) = &surfaces[2];
    let said = |event: &str, id: &str| reference.iter().find(|t| t.event == event && t.lease == short(id)).cloned();
    for (event, id) in [
        ("acquired", &s1),
        ("owner-died", &s1),
        ("force-released", &s2),
        ("pruned", &s1),
        ("removed", &s3),
        ("pruned", &s4),
        ("acquired", &s5),
        ("acquired", &s6),
    ] {
        assert!(said(event, id).is_some(), "events -f never said {event} {}: {reference:#?}", short(id));
    }
    let detail = |event: &str, id: &str| said(event, id).map(|t| t.detail).unwrap_or_default();
    assert!(
        detail("force-released", &s2).starts_with("by ") && detail("force-released", &s2).contains("force-release")
    );
    assert!(detail("pruned", &s1).contains("leasectl console"), "{}", detail("pruned", &s1));
    assert!(
        detail("removed", &s3).starts_with("by a repair, by ") && detail("removed", &s3).contains("doctor --repair")
    );
    assert!(detail("pruned", &s4).starts_with("by an acquire"), "{}", detail("pruned", &s4));
    assert_eq!(said("acquired", &s6).map(|t| t.profile).as_deref(), Some("p2"), "the new profile's first lease");

    for (name, told) in &surfaces {
        let mut mine = told.clone();
        let mut theirs = reference.clone();
        mine.sort();
        theirs.sort();
        assert_eq!(mine, theirs, "{name} tells another story than events -f");
    }

    // The audit file names the same removals, by the same actor.
    let audit = std::fs::read_to_string(leasectl::lease::home::audit::audit_file(&root)).expect("audit file");
    let mut audited = Vec::new();
    for line in audit.lines() {
        let rec: Value = serde_json::from_str(line).expect("an audit record");
        let (ids, by) = leasectl::lease::home::remover::of_record(&rec);
        for id in ids {
            audited.push((by.event().to_owned(), short(id), by.detail().unwrap_or_default()));
        }
    }
    for (event, id) in [("force-released", &s2), ("pruned", &s1), ("removed", &s3)] {
        let from_audit = audited.iter().find(|(e, l, _)| e == event && *l == short(id));
        assert_eq!(
            from_audit.map(|(_, _, d)| d.clone()),
            Some(detail(event, id)),
            "the audit file and the feed disagree on {event} {}: {audited:#?}",
            short(id)
        );
    }
}
