//! Session context from Hermes' state.db (issue 15): real SQLite databases made here, in
//! WAL mode, with other connections writing and locking while leasectl reads.

use crate::common;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use common::process::{Home, Sleeper};
use rusqlite::Connection;
use serde_json::Value;

fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// A state.db as Hermes makes it (WAL mode); `heartbeat`: the newer schema's last_activity_at.
fn state_db(home: &Path, heartbeat: bool) -> Connection {
    let db = Connection::open(home.join("state.db")).expect("create state.db");
    db.pragma_update(None, "journal_mode", "WAL").expect("WAL");
    let extra = if heartbeat { ", last_activity_at REAL" } else { "" };
    db.execute_batch(&format!(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, title TEXT, started_at REAL, ended_at REAL, \
         end_reason TEXT{extra}); \
         CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT, timestamp REAL);"
    ))
    .expect("schema");
    db
}

fn add_session(db: &Connection, id: &str, started: f64, ended: Option<(f64, &str)>, heartbeat: Option<f64>) {
    let has_heartbeat = db.prepare("SELECT last_activity_at FROM sessions").is_ok();
    if has_heartbeat {
        db.execute(
            "INSERT INTO sessions VALUES (?1, 'cli', ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params![id, format!("chat {id}"), started, ended.map(|e| e.0), ended.map(|e| e.1), heartbeat],
        )
    } else {
        db.execute(
            "INSERT INTO sessions VALUES (?1, 'cli', ?2, ?3, ?4, ?5)",
            rusqlite::params![id, format!("chat {id}"), started, ended.map(|e| e.0), ended.map(|e| e.1)],
        )
    }
    .expect("insert session");
}

fn add_message(db: &Connection, session: &str, at: f64) {
    db.execute(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?1, 'user', '...', ?2)",
        rusqlite::params![session, at],
    )
    .expect("insert message");
}

fn lease_of<'a>(ls: &'a Value, session: &str) -> &'a Value {
    ls["registries"][0]["leases"]
        .as_array()
        .and_then(|l| l.iter().find(|x| x["entry"]["session_id"] == session))
        .unwrap_or_else(|| panic!("no lease of {session} in {ls}"))
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).expect("read dir").flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn ended_and_idle_sessions_of_live_owners_are_leak_suspects_with_the_reason() {
    let home = Home::new();
    let owner = Sleeper::new();
    let t = now();
    {
        let db = state_db(home.path(), true);
        add_session(&db, "busy", t - 7200.0, None, Some(t - 60.0));
        add_session(&db, "ended", t - 7200.0, Some((t - 3.0 * 3600.0, "tui_shutdown")), Some(t - 3.0 * 3600.0));
        add_session(&db, "idle", t - 9000.0, None, Some(t - 5.0 * 3600.0));
        // A heartbeat far in the future is a damaged row: ignored, the message counts.
        add_session(&db, "damaged", t - 9000.0, None, Some(1e12));
        add_message(&db, "damaged", t - 4.0 * 3600.0);
        add_message(&db, "busy", t - 30.0);
        add_message(&db, "busy", t - 20.0);
    }
    for s in ["busy", "ended", "idle", "damaged", "unknown-to-state-db"] {
        home.run(&["acquire", s, "--owner-pid", &owner.pid_arg()]).expect_exit(0);
    }
    // Taken before the sessions ended or went idle (a lease taken after is no leak).
    crate::common::backdate_leases(home.path(), 86_400.0);
    let before = files_in(home.path());
    let ls = home.run(&["ls", "--json"]);
    ls.expect_exit(0);
    let ls = ls.json();
    assert_eq!(files_in(home.path()), before, "nothing created beside state.db");
    let busy = lease_of(&ls, "busy");
    assert_eq!(busy["leak_suspect"], Value::Null);
    assert_eq!(busy["session"]["title"], "chat busy");
    assert_eq!(busy["session"]["messages"], 2);
    assert!((busy["session"]["last_activity"].as_f64().unwrap_or(0.0) - (t - 20.0)).abs() < 1.0, "{busy}");
    let ended = lease_of(&ls, "ended")["leak_suspect"].as_str().unwrap_or_default().to_owned();
    assert!(ended.starts_with("session ended 3h0") && ended.contains("(tui_shutdown) but pid"), "{ended}");
    let idle = lease_of(&ls, "idle")["leak_suspect"].as_str().unwrap_or_default().to_owned();
    assert!(idle.starts_with("no activity for 5h0") && idle.ends_with("(sleep) still holds it"), "{idle}");
    let damaged = lease_of(&ls, "damaged");
    assert!(damaged["leak_suspect"].as_str().is_some_and(|r| r.starts_with("no activity for 4h0")), "{damaged}");
    assert_eq!(lease_of(&ls, "unknown-to-state-db")["session"], Value::Null);
    // The threshold: on the command line, then in config.yaml.
    let ls = home.run(&["--idle-threshold", "6h", "ls", "--json"]).json();
    assert_eq!(lease_of(&ls, "idle")["leak_suspect"], Value::Null, "5h idle is under 6h");
    fs::write(home.path().join("config.yaml"), "leasectl:\n  idle_threshold: 10m\n").expect("config");
    let ls = home.run(&["ls", "--json"]).json();
    assert_eq!(lease_of(&ls, "busy")["leak_suspect"], Value::Null, "1 minute idle is under 10m");
    fs::write(home.path().join("config.yaml"), "leasectl:\n  idle_threshold: 10s\n").expect("config");
    let ls = home.run(&["ls", "--json"]).json();
    assert!(lease_of(&ls, "busy")["leak_suspect"].is_string(), "20s idle is over 10s");
    // The table marks them; doctor lists them (worth a look, not a failure).
    fs::remove_file(home.path().join("config.yaml")).expect("rm config");
    let table = home.run(&["ls"]);
    assert_eq!(table.stdout.matches("LEAK?").count(), 3, "{table:?}");
    let doctor = home.run(&["doctor"]);
    doctor.expect_exit(0);
    assert_eq!(doctor.stdout.matches("LEAK?:").count(), 3, "{doctor:?}");
    assert!(doctor.stdout.contains("3 leak suspects"), "{doctor:?}");
}

#[test]
fn an_old_schema_a_corrupt_file_and_no_file_leave_the_leases_as_they_are() {
    let home = Home::new();
    let owner = Sleeper::new();
    let t = now();
    {
        let db = state_db(home.path(), false);
        add_session(&db, "S", t - 9000.0, None, None);
        add_message(&db, "S", t - 3.0 * 3600.0);
    }
    home.run(&["acquire", "S", "--owner-pid", &owner.pid_arg()]).expect_exit(0);
    crate::common::backdate_leases(home.path(), 86_400.0);
    let ls = home.run(&["ls", "--json"]).json();
    let s = lease_of(&ls, "S");
    assert!((s["session"]["last_activity"].as_f64().unwrap_or(0.0) - (t - 10800.0)).abs() < 1.0, "{s}");
    assert!(s["leak_suspect"].is_string(), "idle 3h by its newest message, without last_activity_at: {s}");
    fs::write(home.path().join("state.db"), b"this is not an sqlite database, just bytes, quite a few of them....")
        .expect("corrupt it");
    let out = home.run(&["ls", "--json"]);
    out.expect_exit(0);
    let ls = out.json();
    assert_eq!(lease_of(&ls, "S")["liveness"], "alive", "the lease view is unaffected");
    assert_eq!(lease_of(&ls, "S")["session"], Value::Null);
    let why = ls["registries"][0]["session_context_unknown"].as_str().unwrap_or_default();
    assert!(why.contains("not a readable database"), "{why}");
    fs::remove_file(home.path().join("state.db")).expect("rm");
    let ls = home.run(&["ls", "--json"]).json();
    assert_eq!(ls["registries"][0]["session_context_unknown"], "no state.db");
}

#[test]
fn a_database_being_written_is_read_and_one_locked_exclusively_is_unknown_at_once() {
    let home = Home::new();
    let owner = Sleeper::new();
    let t = now();
    let db = state_db(home.path(), true);
    add_session(&db, "S", t - 600.0, None, Some(t - 60.0));
    home.run(&["acquire", "S", "--owner-pid", &owner.pid_arg()]).expect_exit(0);
    // Another connection keeps writing (WAL mode): leasectl reads between its commits.
    let path = home.path().join("state.db");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (first, wrote) = std::sync::mpsc::channel();
    let writer = {
        let (stop, path) = (std::sync::Arc::clone(&stop), path.clone());
        std::thread::spawn(move || {
            let w = Connection::open(&path).expect("writer");
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                w.execute(
                    "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('S', 'user', 'x', ?1)",
                    [now()],
                )
                .expect("write");
                n += 1;
                let _ = first.send(());
            }
            n
        })
    };
    wrote.recv_timeout(Duration::from_secs(10)).expect("the writer writes");
    for _ in 0..5 {
        let ls = home.run(&["ls", "--json"]).json();
        let s = lease_of(&ls, "S");
        assert!(s["session"]["messages"].as_u64().is_some(), "read while written: {ls}");
        assert_eq!(s["leak_suspect"], Value::Null);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().expect("writer thread");
    assert!(written > 0);
    // An exclusive lock (rollback journal): no wait, the context is unknown for now.
    drop(db);
    let locker = Connection::open(&path).expect("locker");
    locker.pragma_update(None, "journal_mode", "DELETE").expect("rollback journal");
    locker
        .execute_batch("BEGIN EXCLUSIVE; INSERT INTO messages (session_id, timestamp) VALUES ('S', 1.0);")
        .expect("lock");
    let started = Instant::now();
    let out = home.run(&["ls", "--json"]);
    out.expect_exit(0);
    let ls = out.json();
    assert!(started.elapsed() < Duration::from_secs(5), "no waiting on the lock: {:?}", started.elapsed());
    let why = ls["registries"][0]["session_context_unknown"].as_str().unwrap_or_default();
    assert!(why.contains("locked"), "{why}");
    assert_eq!(lease_of(&ls, "S")["liveness"], "alive");
    locker.execute_batch("ROLLBACK").expect("unlock");
}

/// SQLite is handed state.db's path with no symlink in it and told to refuse any (so a
/// path swapped after leasectl's check is refused, not followed): a home reached through
/// a symlink of its own user, the usual `~/.hermes -> /data/hermes`, is still read.
#[test]
fn a_home_reached_through_a_symlink_is_read() {
    let home = Home::new();
    let owner = Sleeper::new();
    {
        let db = state_db(home.path(), true);
        add_session(&db, "S", now() - 60.0, None, Some(now() - 30.0));
    }
    home.run(&["acquire", "S", "--owner-pid", &owner.pid_arg()]).expect_exit(0);
    let link = home.outside().join("linked-home");
    std::os::unix::fs::symlink(home.path(), &link).expect("symlink");
    let mut cmd = std::process::Command::new(common::process::BIN);
    cmd.arg("--home").arg(&link).args(["ls", "--json"]).env_remove("HERMES_HOME");
    let ls = common::process::Proc::run("ls through a link", cmd);
    ls.expect_exit(0);
    let ls = ls.json();
    assert_eq!(lease_of(&ls, "S")["session"]["title"], "chat S", "{ls}");
}

/// Peak resident memory of `leasectl --home HOME ARGS` (GNU time), in kB.
fn peak_kb(home: &Path, args: &[&str]) -> f64 {
    let measured = home.join("peak-kb");
    let mut cmd = std::process::Command::new("/usr/bin/time");
    cmd.args(["-f", "%M", "-o"]).arg(&measured).arg(common::process::BIN).arg("--home").arg(home).args(args);
    let out = cmd.env_remove("HERMES_HOME").stdin(std::process::Stdio::null()).output().expect("GNU time");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    fs::read_to_string(&measured).expect("GNU time's output").trim().parse().expect("kB")
}

/// A real home's shape at 50,000 leases: state.db holds every leased session, and some
/// messages. Listing it (and doctor) reads every leased session's context: that may
/// cost up to half a `prune --dry-run` more, not twice it. The contexts were a hash map
/// of 14 MB (each id kept twice, a quarter of the slots empty), with a second map of 4 MB
/// to count messages and a copy of every id for the query's thread: 1.8x.
#[test]
fn a_listing_with_a_state_db_of_50000_sessions_holds_less_than_one_and_a_half_prunes() {
    let home = Home::new();
    let n = 50_000;
    let t = now();
    fs::create_dir_all(home.path().join("runtime")).expect("runtime/");
    common::write_live_registry(&home.path().join("runtime/active_sessions.json"), n);
    {
        let mut db = state_db(home.path(), true);
        let tx = db.transaction().expect("one transaction");
        for i in 0..n {
            tx.execute(
                "INSERT INTO sessions VALUES (?1, 'cli', ?2, ?3, NULL, NULL, ?4)",
                rusqlite::params![format!("chat-{i}"), format!("a chat about item {i}"), t - 7200.0, t - 60.0],
            )
            .expect("a session");
            if i % 10 == 0 {
                tx.execute(
                    "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?1, 'user', '...', ?2)",
                    rusqlite::params![format!("chat-{i}"), t - 30.0],
                )
                .expect("a message");
            }
        }
        tx.commit().expect("commit");
    }
    let ls = home.run(&["ls", "--json"]);
    ls.expect_exit(0);
    let ls = ls.json();
    assert_eq!(lease_of(&ls, "chat-40")["session"]["messages"], 1, "the contexts are read");
    assert_eq!(lease_of(&ls, "chat-41")["session"]["title"], "a chat about item 41");
    let prune = peak_kb(home.path(), &["prune", "--dry-run"]);
    for args in [&["ls"][..], &["ls", "-o", "json"], &["doctor"]] {
        let kb = peak_kb(home.path(), args);
        assert!(kb < 1.5 * prune, "{args:?}: {kb} kB against prune --dry-run's {prune} kB ({:.2}x)", kb / prune);
    }
}
