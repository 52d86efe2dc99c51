//! Hermes' state.db, the tables and columns leasectl reads (shared by the tests and,
//! through `#[path]`, the benches).

/// The sessions and messages tables as Hermes creates them.
pub const STATE_DB_SCHEMA: &str = "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, title TEXT, \
    started_at REAL, ended_at REAL, end_reason TEXT, last_activity_at REAL); \
    CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT, timestamp REAL);";

/// A state.db at `path` of sessions `chat-0` .. `chat-{n-1}` as a home of many leases has
/// them: started a day before `now`, last active an hour before, a third ended two hours
/// before (`tui_shutdown`), each with `messages` messages of its last hour.
pub fn many_sessions(path: &std::path::Path, n: usize, messages: u32, now: f64) {
    let db = rusqlite::Connection::open(path).expect("state.db");
    db.execute_batch(STATE_DB_SCHEMA).expect("schema");
    let tx = db.unchecked_transaction().expect("a transaction");
    for i in 0..n {
        let ended = (i % 3 == 0).then_some(now - 7200.0);
        tx.execute(
            "INSERT INTO sessions VALUES (?1, 'cli', ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params![
                format!("chat-{i}"),
                format!("chat number {i}"),
                now - 86_400.0,
                ended,
                ended.map(|_| "tui_shutdown"),
                now - 3600.0
            ],
        )
        .expect("a session");
        for m in 0..messages {
            tx.execute(
                "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?1, 'user', 'words', ?2)",
                rusqlite::params![format!("chat-{i}"), now - 3600.0 - f64::from(m)],
            )
            .expect("a message");
        }
    }
    tx.commit().expect("commit");
}
