//! The console's worker on real files: what a change makes it read.

use std::time::Duration;

use leasectl::lease::{self, AcquireRequest, Location, Registry};
use leasectl::tui::worker::{Scope, Worker};
use serde_json::Map;

fn acquire(reg: &Registry, session: &str) -> String {
    acquire_for(reg, session, std::process::id())
}

fn acquire_for(reg: &Registry, session: &str, owner: u32) -> String {
    let req = AcquireRequest {
        session_id: session.into(),
        surface: Some("cli".into()),
        metadata: Map::new(),
        owner_pid: u64::from(owner),
        cap: None,
        track_liveness: true,
        lock_timeout: Duration::from_secs(5),
    };
    lease::file::acquire(reg, &req).expect("granted").lease_id
}

/// The root and every profile under it, as the console follows a home.
fn root_and_profiles(root: &Registry) -> Scope {
    Scope {
        locations: vec![Location::File(root.clone())],
        discover_root: Some(root.home.clone()),
        discover_hosts: false,
    }
}

fn sessions(loaded: &leasectl::tui::event::Loaded, index: usize) -> Result<Vec<String>, String> {
    loaded.snapshots[index]
        .leases
        .as_ref()
        .map(|ls| ls.iter().map(|l| l.entry.session_id().to_owned()).collect())
        .map_err(ToString::to_string)
}

#[test]
fn a_change_rereads_only_the_registry_it_belongs_to() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = Registry::new("root", dir.path());
    let work = Registry::new("work", dir.path().join("profiles").join("work"));
    crate::common::make_profile(&work.home);
    acquire(&root, "S-root");
    acquire(&work, "S-work");
    let scope = root_and_profiles(&root);
    let mut worker = Worker::new(scope, Duration::from_secs(3), None);
    let first = worker.reload();
    assert_eq!(first.snapshots.len(), 2);
    let (r, w) = if first.snapshots[0].location == Location::File(root.clone()) { (0, 1) } else { (1, 0) };

    // The root changes (and the watcher says so); the work profile is broken behind the
    // worker's back, with no event: it is not read again, so its last listing stands.
    acquire(&root, "S-root-2");
    std::fs::write(work.path(), b"{ not json").expect("break work's registry");
    let loaded = worker.reload_changed(&[root.path()]);
    assert_eq!(
        sessions(&loaded, r).map(|mut s| {
            s.sort();
            s
        }),
        Ok(vec!["S-root".to_owned(), "S-root-2".to_owned()])
    );
    assert_eq!(sessions(&loaded, w), Ok(vec!["S-work".to_owned()]), "work was not read again");

    // Its own change is read, and shows what is there.
    let loaded = worker.reload_changed(&[work.path()]);
    assert!(sessions(&loaded, w).is_err(), "work's registry is invalid now");
}

/// Tick the worker (as the console does) until the first lease reads LEAK?; its reason.
fn wait_for_leak(worker: &mut Worker, what: &str) -> std::sync::Arc<str> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(loaded) = worker.relive_if_changed()
            && let Some(leak) = loaded.snapshots[0].leases.as_ref().ok().and_then(|r| r[0].leak.clone())
        {
            return leak;
        }
        assert!(std::time::Instant::now() < deadline, "{what} was never judged a leak");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The worker reads the home's state.db: a live owner whose session has ended is a leak
/// suspect; a change to the database is seen by the next tick once it is due (2 s).
#[test]
fn a_state_db_change_is_read_and_leaks_are_judged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = Registry::new("root", dir.path());
    acquire(&root, "S");
    crate::common::backdate_leases(dir.path(), 3600.0);
    let db = rusqlite::Connection::open(dir.path().join("state.db")).expect("state.db");
    db.pragma_update(None, "journal_mode", "WAL").expect("WAL");
    let now = lease::now();
    db.execute_batch(&format!(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, title TEXT, started_at REAL, ended_at REAL, end_reason TEXT, \
         last_activity_at REAL); INSERT INTO sessions VALUES ('S', 'a title', {s}, NULL, NULL, {a});",
        s = now - 600.0,
        a = now - 60.0
    ))
    .expect("schema");
    let scope = Scope { locations: vec![Location::File(root.clone())], discover_root: None, discover_hosts: false };
    let mut worker = Worker::new(scope, Duration::from_secs(3), None);
    let first = worker.reload();
    let rows = first.snapshots[0].leases.as_ref().expect("leases");
    assert_eq!(rows[0].leak, None, "busy a minute ago");
    let title =
        first.snapshots[0].sessions.as_ref().and_then(|c| c.get("S")).and_then(|c| c.title().map(str::to_owned));
    assert_eq!(title.as_deref(), Some("a title"));
    // Hermes ends the session while the owner lives on.
    db.execute("UPDATE sessions SET ended_at = ?1, end_reason = 'tui_shutdown' WHERE id = 'S'", [now - 1.0])
        .expect("end it");
    let leak = wait_for_leak(&mut worker, "the ended session");
    assert!(leak.starts_with("session ended") && leak.contains("(tui_shutdown)"), "{leak}");
}

/// The console's actions are on record too: its worker writes the audit line.
#[test]
fn a_console_force_release_is_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = Registry::new("root", dir.path());
    let id = acquire(&root, "S");
    let scope = Scope { locations: vec![Location::File(root.clone())], discover_root: None, discover_hosts: false };
    let mut worker = Worker::new(scope, Duration::from_secs(3), None);
    worker.reload();
    let effect = leasectl::tui::event::Effect::ForceRelease {
        location: Location::File(root.clone()),
        target: lease::Target::Lease(id.clone()),
        allow_live: true,
    };
    worker.act(&effect).expect("an answer");
    let text = std::fs::read_to_string(lease::home::audit::audit_file(dir.path())).expect("the audit file");
    let record: serde_json::Value = serde_json::from_str(text.trim_end()).expect("one JSON line");
    assert_eq!(record["action"], "force-release");
    assert_eq!(record["live_owner_overridden"], true, "this test process is alive");
    assert_eq!(record["removed"][0]["lease_id"], id.as_str());
    assert!(record["command"].as_str().is_some_and(|c| c.starts_with("leasectl console: force-release lease")));
}

/// A session going idle past the threshold changes no file: the worker judges it again
/// when the crossing time comes, and not before.
#[test]
fn a_session_crossing_the_idle_threshold_is_judged_with_nothing_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = Registry::new("root", dir.path());
    acquire(&root, "S");
    crate::common::backdate_leases(dir.path(), 3600.0);
    let db = rusqlite::Connection::open(dir.path().join("state.db")).expect("state.db");
    let now = lease::now();
    db.execute_batch(&format!(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, started_at REAL, ended_at REAL, last_activity_at REAL); \
         INSERT INTO sessions VALUES ('S', {}, NULL, {});",
        now - 60.0,
        now - 0.5
    ))
    .expect("schema");
    drop(db);
    let scope = Scope { locations: vec![Location::File(root.clone())], discover_root: None, discover_hosts: false };
    let mut worker = Worker::new(scope, Duration::from_secs(3), None).with_idle_threshold(Some(Duration::from_secs(2)));
    let first = worker.reload();
    assert_eq!(first.snapshots[0].leases.as_ref().expect("leases")[0].leak, None, "active half a second ago");
    assert!(worker.relive_if_changed().is_none(), "nothing to show before the crossing");
    let leak = wait_for_leak(&mut worker, "the idle crossing");
    assert!(leak.starts_with("no activity for"), "{leak}");
    assert!(worker.relive_if_changed().is_none(), "judged once: an idle console stays idle");
}

/// The console's repair is on record too, with what it did.
#[test]
fn a_console_repair_is_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = Registry::new("root", dir.path());
    acquire(&root, "S");
    let good = std::fs::read_to_string(root.path()).expect("registry");
    std::fs::write(root.path(), good.replace("]}", ", {\"lease_id\": 7}]}")).expect("an invalid entry");
    let scope = Scope { locations: vec![Location::File(root.clone())], discover_root: None, discover_hosts: false };
    let mut worker = Worker::new(scope, Duration::from_secs(3), None);
    worker.reload();
    let effect = leasectl::tui::event::Effect::Repair { location: Location::File(root.clone()), force: false };
    worker.act(&effect).expect("an answer");
    let text = std::fs::read_to_string(lease::home::audit::audit_file(dir.path())).expect("the audit file");
    let record: serde_json::Value = serde_json::from_str(text.trim_end()).expect("one JSON line");
    assert_eq!(record["action"], "repair");
    assert_eq!(record["command"], "leasectl console: repair");
    // The same record as the CLI's: what was kept and dropped, and the backup.
    assert_eq!(record["dropped"].as_array().map(Vec::len), Some(1), "{record}");
    assert_eq!(record["dropped"][0]["entry"], 1, "{record}");
    assert_eq!(record["kept"].as_array().map(Vec::len), Some(1), "{record}");
    let backup = record["backup"].as_str().expect("the backup's path");
    assert!(std::path::Path::new(backup).is_file(), "{record}");
}

/// A full read of a home with many profiles is sent in parts as it goes, so the
/// console's first tabs fill in at once (and a quit stops it at the next part).
#[test]
fn a_full_read_of_many_profiles_arrives_in_parts_in_tab_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    for n in 0..600 {
        crate::common::make_profile(root.join("profiles").join(format!("p{n:03}")));
    }
    let first = lease::home::paths::profile_registry(&root, "p000").expect("a profile");
    acquire(&first, "IN-P000");
    let scope = Scope {
        locations: vec![Location::File(lease::home::paths::registry_for_home(&root))],
        discover_root: Some(root),
        discover_hosts: false,
    };
    let mut worker = Worker::new(scope, Duration::from_secs(3), None);
    let mut parts: Vec<Vec<Location>> = Vec::new();
    let mut send = |loaded: leasectl::tui::event::Loaded| {
        assert!(!loaded.large_read_done, "601 registries: not a read whose memory is given back");
        parts.push(loaded.snapshots.into_iter().map(|s| s.location).collect());
        true
    };
    assert!(worker.reload_in_parts(&mut send));
    let sizes: Vec<usize> = parts.iter().map(Vec::len).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 601, "the root and 600 profiles, each once: {sizes:?}");
    assert!(sizes.len() >= 3 && sizes[0] < 601, "in parts: {sizes:?}");
    let names: Vec<String> = parts.iter().flatten().map(|l| l.name().to_owned()).collect();
    assert_eq!(names[0], "root");
    assert_eq!(names[1], "p000", "tab order");
    // A quit stops a read at the next part.
    worker.stopper().store(true, std::sync::atomic::Ordering::Relaxed);
    let mut none = |_| true;
    assert!(!worker.reload_in_parts(&mut none));
}

/// The last part of a full read of 1,000 registries or more says so: once the app has
/// applied it, the memory the parts used goes back to the system (at 100,000 profiles,
/// given back before the app had taken the parts still queued, it was kept).
#[test]
fn the_last_part_of_a_large_read_says_it_is_the_last() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    for n in 0..1000 {
        crate::common::make_profile(root.join("profiles").join(format!("p{n:04}")));
    }
    let scope = root_and_profiles(&lease::home::paths::registry_for_home(&root));
    let mut worker = Worker::new(scope, Duration::from_secs(3), None);
    let mut done: Vec<bool> = Vec::new();
    assert!(worker.reload_in_parts(&mut |loaded| {
        done.push(loaded.large_read_done);
        true
    }));
    assert!(done.len() >= 4, "in parts: {done:?}");
    assert_eq!(done.iter().filter(|d| **d).count(), 1, "one part says so: {done:?}");
    assert_eq!(done.last(), Some(&true), "the last: {done:?}");
}

/// A crashed owner's lease that its successor's acquire pruned (one write: that lease out,
/// the successor's in) is logged `pruned`, not `released`: the worker counts the writes a
/// reading spans from the change feed's replaced versions (found reading the demo tour:
/// its log said released beside "GRANTED after pruning 1 dead owner").
#[test]
fn a_crashed_owner_pruned_by_an_acquire_is_logged_pruned() {
    use leasectl::tui::event::Event;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = Registry::new("root", dir.path());
    let mut crashed = std::process::Command::new("sleep").arg("600").spawn().expect("an owner");
    let req = |pid: u32| AcquireRequest {
        session_id: "S-crash".into(),
        surface: Some("cli".into()),
        metadata: Map::new(),
        owner_pid: u64::from(pid),
        cap: None,
        track_liveness: true,
        lock_timeout: Duration::from_secs(5),
    };
    lease::file::acquire(&root, &req(crashed.id())).expect("granted");
    let location = Location::File(root.clone());
    let scope = Scope { locations: vec![location.clone()], discover_root: None, discover_hosts: false };
    let mut worker = Worker::new(scope, Duration::from_secs(2), None);
    let (tx, rx) = std::sync::mpsc::channel();
    let watch =
        lease::WatchScope { locations: vec![location.clone()], discover_root: None, debounce: leasectl::tui::DEBOUNCE };
    leasectl::tui::sources::spawn_watcher(&watch, tx, worker.replaced()).expect("the change feed");
    std::thread::sleep(Duration::from_millis(200));
    let mut app = leasectl::tui::state::App::new(vec![location], lease::now(), jiff::tz::TimeZone::UTC);
    leasectl::tui::update::update(&mut app, Event::Loaded(worker.reload()));

    let _ = crashed.kill();
    let _ = crashed.wait();
    let successor = std::process::Command::new("sleep").arg("600").spawn().expect("a successor");
    lease::file::acquire(&root, &req(successor.id())).expect("granted after pruning the dead owner");
    let changed = loop {
        match rx.recv_timeout(Duration::from_secs(5)).expect("the change's event") {
            Event::FsChanged(paths) => break paths,
            _ => continue,
        }
    };
    leasectl::tui::update::update(&mut app, Event::Loaded(worker.reload_changed(&changed)));
    let log: Vec<&str> = app.log.iter().map(|l| l.text.as_str()).collect();
    assert!(log.iter().any(|l| l.starts_with("pruned: session S-crash")), "{log:?}");
    assert!(!log.iter().any(|l| l.starts_with("released")), "{log:?}");
    let mut successor = successor;
    let _ = successor.kill();
    let _ = successor.wait();
}

#[test]
fn a_change_sends_what_it_touched_and_the_registries_holding_leases_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = |name: &str| Registry::new(name, dir.path().join("profiles").join(name));
    let root = Registry::new("root", dir.path());
    let (busy, quiet, idle) = (profile("busy"), profile("quiet"), profile("idle"));
    for p in [&busy, &quiet, &idle] {
        crate::common::make_profile(p.runtime_dir());
    }
    acquire(&busy, "S-busy");
    let scope = root_and_profiles(&root);
    let mut worker = Worker::new(scope, Duration::from_secs(3), None);
    assert_eq!(worker.reload().snapshots.len(), 4);
    let sent = |loaded: &leasectl::tui::event::Loaded| {
        let mut names: Vec<String> = loaded.snapshots.iter().map(|s| s.location.label()).collect();
        names.sort();
        names
    };

    // A write in one empty profile: it is read; the one holding a lease is judged again
    // (its owner may have died); the root and the other empty profile cannot have changed.
    acquire(&quiet, "S-quiet");
    let loaded = worker.reload_changed(&[quiet.path()]);
    assert_eq!(sent(&loaded), ["busy", "quiet"]);
    let shown = loaded.snapshots.iter().find(|s| s.location == Location::File(quiet.clone())).expect("quiet sent");
    assert_eq!(shown.leases.as_ref().map(Vec::len).ok(), Some(1), "the write is read");

    // A profile made since: opened, read and sent, with the ones holding leases.
    let new = profile("new");
    crate::common::make_profile(&new.home);
    let loaded = worker.reload_changed(std::slice::from_ref(&new.home));
    assert_eq!(sent(&loaded), ["busy", "new", "quiet"]);
}

#[test]
fn an_owner_dying_sends_the_registries_holding_leases_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = |name: &str| Registry::new(name, dir.path().join("profiles").join(name));
    let root = Registry::new("root", dir.path());
    let (busy, idle) = (profile("busy"), profile("idle"));
    for p in [&busy, &idle] {
        crate::common::make_profile(p.runtime_dir());
    }
    let mut owner = std::process::Command::new("sleep").arg("100").spawn().expect("start an owner");
    acquire_for(&busy, "S-dies", owner.id());
    let scope = root_and_profiles(&root);
    let mut worker = Worker::new(scope, Duration::from_secs(3), None);
    assert_eq!(worker.reload().snapshots.len(), 3);
    owner.kill().expect("kill the owner");
    owner.wait().expect("reap it");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let loaded = loop {
        if let Some(loaded) = worker.relive_if_changed() {
            break loaded;
        }
        assert!(std::time::Instant::now() < deadline, "the owner's death was not noticed");
        std::thread::sleep(Duration::from_millis(100));
    };
    let sent: Vec<String> = loaded.snapshots.iter().map(|s| s.location.label()).collect();
    assert_eq!(sent, ["busy"], "only the registry holding a lease is judged again");
    let dead = loaded.snapshots[0].leases.as_ref().expect("a listing")[0].liveness.clone();
    assert!(matches!(dead, lease::Liveness::Dead(_)), "{dead:?}");
}

#[test]
fn an_owners_moved_figures_are_sent_without_judging_a_registry_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = |name: &str| Registry::new(name, dir.path().join("profiles").join(name));
    let root = Registry::new("root", dir.path());
    let (busy, calm) = (profile("busy"), profile("calm"));
    for p in [&busy, &calm] {
        crate::common::make_profile(p.runtime_dir());
    }
    // One owner's details differ from one look at them (every 5 s) to the next, as a busy
    // owner's CPU figure does; the other's stay as they were.
    let sleeper = std::process::Command::new("sleep").arg("100").spawn().expect("start an owner");
    let owners_of_leases = [crate::common::owner_whose_memory_moves(), crate::common::Reaped(sleeper)];
    acquire_for(&busy, "S-busy", owners_of_leases[0].id());
    acquire_for(&calm, "S-calm", owners_of_leases[1].id());
    let scope = root_and_profiles(&root);
    let mut worker = Worker::new(scope, Duration::from_secs(3), None);
    assert_eq!(worker.reload().snapshots.len(), 3);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let loaded = loop {
        if let Some(loaded) = worker.relive_if_changed() {
            break Some(loaded);
        }
        if std::time::Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let loaded = loaded.expect("the owner's details changed in 20 s");
    // Only figures moved: no registry is judged again, the owners' figures are sent as now.
    let sent: Vec<String> = loaded.snapshots.iter().map(|s| s.location.label()).collect();
    assert!(sent.is_empty(), "judged again for an owner's figures: {sent:?}");
    let owners = loaded.owners_moved.expect("the owners' figures");
    let moved = owners.get(&u64::from(owners_of_leases[0].id())).expect("the changed owner's");
    assert_eq!(moved.name, "python3");
    assert!(owners.contains_key(&u64::from(owners_of_leases[1].id())), "every owner here, as now");
}

#[test]
fn a_profiles_first_acquire_is_read_from_the_runtime_directory_it_made() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = Registry::new("root", dir.path());
    let later = Registry::new("later", dir.path().join("profiles").join("later"));
    crate::common::make_profile(&later.home);
    let mut worker = Worker::new(root_and_profiles(&root), Duration::from_secs(3), None);
    assert_eq!(worker.reload().snapshots.len(), 2);
    // The acquire makes runtime/: the watcher reports that directory (the registry in it
    // may come before its watch does).
    acquire(&later, "S-later");
    let loaded = worker.reload_changed(&[later.runtime_dir()]);
    let shown = loaded.snapshots.iter().find(|s| s.location == Location::File(later.clone())).expect("later sent");
    assert_eq!(shown.leases.as_ref().map(Vec::len).ok(), Some(1));
}

/// A profile made is opened on its own, from the path the watcher reported: the others
/// are not listed (that cost 4 s of CPU at 100,000 profiles). A full reload finds any.
#[test]
fn a_profile_made_is_opened_on_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = |name: &str| Registry::new(name, dir.path().join("profiles").join(name));
    let root = Registry::new("root", dir.path());
    crate::common::make_profile(&profile("old").home);
    let mut worker = Worker::new(root_and_profiles(&root), Duration::from_secs(3), None);
    assert_eq!(worker.reload().snapshots.len(), 2);
    let (new, unreported) = (profile("new"), profile("unreported"));
    crate::common::make_profile(&new.home);
    crate::common::make_profile(&unreported.home);
    acquire(&new, "S-new");
    let loaded = worker.reload_changed(std::slice::from_ref(&new.home));
    let sent: Vec<String> = loaded.snapshots.iter().map(|s| s.location.label()).collect();
    assert_eq!(sent, ["new"]);
    assert_eq!(loaded.snapshots[0].leases.as_ref().map(Vec::len).ok(), Some(1), "its registry is read");
    // Removed: read again (it shows gone), and nothing else is opened.
    std::fs::remove_dir_all(&new.home).expect("remove the profile");
    let loaded = worker.reload_changed(std::slice::from_ref(&new.home));
    let sent: Vec<String> = loaded.snapshots.iter().map(|s| s.location.label()).collect();
    assert_eq!(sent, ["new"]);
    assert_eq!(worker.reload().snapshots.len(), 4, "root, old, new (gone) and unreported");
}

/// A directory made in profiles/ is no profile until its identity file is written (as
/// `hermes profile create` makes it: the directory first, then its files): it is opened
/// when the watcher reports that file, not before. A deleted profile's directory that a
/// registry with leases appears in is opened too, marked.
#[test]
fn a_directory_becomes_a_profile_when_its_identity_file_appears() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = Registry::new("root", dir.path());
    let mut worker = Worker::new(root_and_profiles(&root), Duration::from_secs(3), None);
    assert_eq!(worker.reload().snapshots.len(), 1);
    let shell = dir.path().join("profiles/fresh");
    std::fs::create_dir_all(&shell).expect("the directory first");
    let loaded = worker.reload_changed(std::slice::from_ref(&shell));
    assert!(loaded.snapshots.is_empty(), "a directory with no identity file is no profile");
    std::fs::write(shell.join("config.yaml"), "").expect("then its config.yaml");
    let loaded = worker.reload_changed(&[shell.join("config.yaml")]);
    let sent: Vec<String> = loaded.snapshots.iter().map(|s| s.location.label()).collect();
    assert_eq!(sent, ["fresh"]);
    // Deleted, and a stale process writes a lease there: shown, marked.
    let gone = Registry::new("gone", dir.path().join("profiles/gone"));
    std::fs::create_dir_all(dir.path().join("profiles/.deleted")).expect("tombstones");
    std::fs::write(dir.path().join("profiles/.deleted/gone"), "deleted\n").expect("tombstone");
    std::fs::create_dir_all(gone.runtime_dir()).expect("re-made by a stale process");
    let owner = std::process::id();
    std::fs::write(
        gone.path(),
        format!(
            r#"{{"entries": [{{"lease_id": "a1", "pid": {owner}, "process_start_time": null, "session_id": "S"}}]}}"#
        ),
    )
    .expect("its registry");
    let loaded = worker.reload_changed(&[gone.path()]);
    let sent: Vec<String> = loaded.snapshots.iter().map(|s| s.location.label()).collect();
    assert_eq!(sent, ["gone (deleted)"]);
}

/// Once the change feed is armed, the registries changed since their last reading (made,
/// or replaced) are read again and the profiles made meanwhile opened; the rest is not
/// read (a look at each file's version, not a read of 100,000 profiles).
#[test]
fn once_the_feed_is_armed_what_changed_unwatched_is_read_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = |name: &str| Registry::new(name, dir.path().join("profiles").join(name));
    let root = Registry::new("root", dir.path());
    let (work, quiet, made) = (profile("work"), profile("quiet"), profile("made"));
    for p in [&work, &quiet] {
        crate::common::make_profile(&p.home);
    }
    acquire(&work, "S-work");
    acquire(&quiet, "S-quiet");
    let mut worker = Worker::new(root_and_profiles(&root), Duration::from_secs(3), None);
    assert_eq!(worker.reload().snapshots.len(), 3);
    // Changed before any watch was in place: the root's first file, a second lease in
    // work, a profile made with a lease.
    acquire(&root, "S-root");
    acquire(&work, "S-work-2");
    crate::common::make_profile(&made.home);
    acquire(&made, "S-made");
    let loaded = worker.reload_stale();
    let mut sent: Vec<(String, usize)> = loaded
        .snapshots
        .iter()
        .map(|s| (s.location.label(), s.leases.as_ref().map(Vec::len).unwrap_or(usize::MAX)))
        .collect();
    sent.sort();
    let expected = [("made", 1), ("root", 1), ("work", 2)].map(|(l, n)| (l.to_owned(), n));
    assert_eq!(sent, expected, "quiet did not change: not read");
    // Nothing changed since: nothing is read.
    assert!(worker.reload_stale().snapshots.is_empty());
}
