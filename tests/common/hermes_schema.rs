//! Hermes' state.db, the tables and columns leasectl reads (shared by the tests and,
//! through `#[path]`, the benches).

/// The sessions and messages tables as Hermes creates them.
pub const STATE_DB_SCHEMA: &str = "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, title TEXT, \
    started_at REAL, ended_at REAL, end_reason TEXT, last_activity_at REAL); \
    CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT, timestamp REAL);";
