//! Session context (issue 15): one refresh of 1,000 leased sessions against a state.db
//! of 100,000 messages (target: under 20 ms), read as leasectl reads it.
//!
//! - `one_statement/live`: a writer holds the database open (its -wal and -shm exist),
//!   the console's usual case while Hermes runs;
//! - `one_statement/at_rest`: no writer (read immutable, nothing created);
//! - `per_session` (baseline): the obvious alternative, one small query per leased
//!   session on one connection, run side by side for the ratio.
//!
//! Hermes' schema has no index on messages.session_id, so counting is one pass over
//! the table either way; the baseline pays it once per session.

mod support;

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::Criterion;
use leasectl::lease::home::context::{self, Contexts};
use rusqlite::Connection;

const SESSIONS: usize = 2_000;
const MESSAGES: usize = 100_000;
const LEASED: usize = 1_000;

fn build(home: &Path) {
    let db = Connection::open(context::state_db(home)).expect("state.db");
    db.pragma_update(None, "journal_mode", "WAL").expect("WAL");
    db.execute_batch(support::STATE_DB_SCHEMA).expect("schema");
    let now = leasectl::lease::now();
    let tx = db.unchecked_transaction().expect("tx");
    for i in 0..SESSIONS {
        tx.execute(
            "INSERT INTO sessions VALUES (?1, 'cli', ?2, ?3, NULL, NULL, ?4)",
            rusqlite::params![format!("s{i:05}"), format!("chat {i}"), now - 86_400.0, now - (i as f64)],
        )
        .expect("session");
    }
    for m in 0..MESSAGES {
        tx.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?1, 'user', 'some words', ?2)",
            rusqlite::params![format!("s{:05}", m % SESSIONS), now - (m as f64)],
        )
        .expect("message");
    }
    tx.commit().expect("commit");
}

/// The statement this module used first: the wanted ids as an IN list, messages
/// counted with GROUP BY (28 ms here before; kept side by side for the ratio).
fn in_list_group_by(home: &Path, ids_json: &str) -> usize {
    let uri = format!("file:{}?immutable=1", context::state_db(home).display());
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI;
    let db = Connection::open_with_flags(uri, flags).expect("open");
    let mut stmt = db
        .prepare(
            "WITH wanted(id) AS (SELECT value FROM json_each(?1)), counts AS (SELECT session_id, COUNT(*) AS n, \
             MAX(timestamp) AS newest FROM messages WHERE session_id IN (SELECT id FROM wanted) GROUP BY session_id) \
             SELECT s.id, s.source, s.title, s.started_at, s.ended_at, s.end_reason, s.last_activity_at, counts.n, \
             counts.newest FROM sessions s JOIN wanted ON s.id = wanted.id LEFT JOIN counts ON counts.session_id = s.id",
        )
        .expect("prepare");
    let rows = stmt.query_map([ids_json], |r| r.get::<_, String>(0)).expect("query");
    rows.count()
}

/// The baseline: a query per session (count, newest message, and the session's row).
fn per_session(home: &Path, ids: &[&str]) -> usize {
    let uri = format!("file:{}?immutable=1", context::state_db(home).display());
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI;
    let db = Connection::open_with_flags(uri, flags).expect("open");
    let mut stmt = db
        .prepare(
            "SELECT s.title, s.last_activity_at, (SELECT COUNT(*) FROM messages WHERE session_id = s.id), \
             (SELECT MAX(timestamp) FROM messages WHERE session_id = s.id) FROM sessions s WHERE s.id = ?1",
        )
        .expect("prepare");
    ids.iter().filter(|id| stmt.query_row([id], |r| r.get::<_, Option<String>>(0)).is_ok()).count()
}

fn found(c: &Contexts) -> usize {
    match c {
        Contexts::Read(m) => m.len(),
        Contexts::Unknown(why) => panic!("context unknown: {why}"),
    }
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path());
    let owned: Vec<String> = (0..LEASED).map(|i| format!("s{:05}", i * 2)).collect();
    let ids: Vec<&str> = owned.iter().map(String::as_str).collect();
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("context");
    group.sample_size(20).measurement_time(Duration::from_secs(4)).warm_up_time(Duration::from_secs(1));
    assert_eq!(found(&context::read(dir.path(), &ids)), LEASED);
    group.bench_function("one_statement/at_rest", |b| b.iter(|| found(&black_box(context::read(dir.path(), &ids)))));
    {
        // A writer connection keeps -wal and -shm in place, as a running Hermes does.
        let writer = Connection::open(context::state_db(dir.path())).expect("writer");
        writer.execute("INSERT INTO messages (session_id, timestamp) VALUES ('s00000', 1.0)", []).expect("write");
        group.bench_function("one_statement/live", |b| b.iter(|| found(&black_box(context::read(dir.path(), &ids)))));
        drop(writer);
    }
    let ids_json = serde_json::to_string(&ids).expect("json");
    assert_eq!(in_list_group_by(dir.path(), &ids_json), LEASED);
    group
        .bench_function("in_list_group_by (before)", |b| b.iter(|| black_box(in_list_group_by(dir.path(), &ids_json))));
    group.sample_size(10).measurement_time(Duration::from_secs(20));
    group.bench_function("per_session (baseline)", |b| b.iter(|| black_box(per_session(dir.path(), &ids))));
    group.finish();
}
