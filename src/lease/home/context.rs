//! Session context from Hermes' `state.db`: is anybody really using a held session?
//!
//! Read-only and brief: the database is opened read-only (immutable when no WAL files
//! exist, so nothing is ever created beside it), never waited on (busy means "unknown
//! for now"), and read in one transaction for all leased ids. Whatever goes wrong
//! (no file, an old schema, corruption, a lock) leaves the leases as they are and says
//! why the context is missing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

pub use super::context_map::{ContextMap, ContextRef, SessionContext};
use crate::lease::view::LeaseView;
use crate::lease::words::human::duration;

/// What identifies the database's content without reading it: state.db's and its
/// WAL's stamps.
pub type Signature = [Option<FileStamp>; 2];

pub fn signature(db: &Path) -> Signature {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    [stamp(db), stamp(&PathBuf::from(wal))]
}

/// A file as `stat` sees it through any link: which file, its size, and when it last
/// changed (its ctime: a write, a chmod or a rename over it, which its owner cannot set
/// back as it can a modification time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    /// Nanoseconds since the epoch.
    pub ctime_ns: i128,
}

/// `path`'s stamp, if there is a file there.
pub fn stamp(path: &Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path).ok().map(|m| FileStamp {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
    })
}

/// The default idle threshold: a session with no activity for this long, held by a live
/// owner, is a leak suspect.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(2 * 3600);

/// How long a gateway's lease may stand before its turn is marked running: Hermes 0.22
/// claims the slot, then waits for its in-process turn lease (5 s by default) and marks
/// the turn. A lease this young with no mark may be a turn starting, not a leak.
pub const TURN_GRACE: Duration = Duration::from_secs(60);

/// Timestamps outside this window are damaged rows, not times (2000-01-01 to a day ahead).
const SANE_FROM: f64 = 946_684_800.0;

/// One home's contexts, or why there are none.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Contexts {
    /// By session id; a leased id absent here has no row in `sessions`.
    Read(ContextMap),
    /// Why the context is unknown (no state.db, locked, corrupt, an old schema...).
    Unknown(String),
}

impl Contexts {
    pub fn get(&self, session_id: &str) -> Option<ContextRef<'_>> {
        match self {
            Contexts::Read(m) => m.get(session_id),
            Contexts::Unknown(_) => None,
        }
    }
}

/// The database of a home: `<home>/state.db`.
pub fn state_db(home: &Path) -> PathBuf {
    home.join("state.db")
}

/// Read the context of `session_ids` from `<home>/state.db`.
pub fn read(home: &Path, session_ids: &[&str]) -> Contexts {
    read_at(&state_db(home), session_ids, crate::lease::now())
}

/// [`read`], with the session ids listed only once state.db is found to ask: most homes
/// have none, and 50,000 leases' ids are 800 KB.
pub fn read_found<'a>(home: &Path, session_ids: impl FnOnce() -> Vec<&'a str>) -> Contexts {
    let db = state_db(home);
    match check_files(&db) {
        Ok((owner, resolved)) => {
            // The list goes before the query runs: only its JSON is kept.
            let wanted = Wanted::of(&session_ids());
            read_checked(owner, &resolved, wanted, crate::lease::now())
        }
        Err(why) => Contexts::Unknown(why),
    }
}

pub fn read_at(db: &Path, session_ids: &[&str], now: f64) -> Contexts {
    match check_files(db) {
        Ok((owner, resolved)) => read_checked(owner, &resolved, Wanted::of(session_ids), now),
        Err(why) => Contexts::Unknown(why),
    }
}

/// The session ids asked for, as the JSON lists the query reads them from, a few
/// hundred ids each: the one copy of them the query's thread takes (the caller's list can
/// go meanwhile). SQLite copies a list it is given twice over; one list of 50,000 ids
/// was 1.9 MB of copies beside the contexts being read.
struct Wanted {
    lists: Vec<String>,
    count: usize,
}

/// How many ids a list of [`Wanted`] holds.
const IDS_PER_LIST: usize = 500;

impl Wanted {
    fn of(session_ids: &[&str]) -> Wanted {
        let lists = session_ids
            .chunks(IDS_PER_LIST)
            .map(|ids| {
                let mut json = String::with_capacity(ids.iter().map(|s| s.len() + 4).sum::<usize>() + 2);
                json.push('[');
                for (i, id) in ids.iter().enumerate() {
                    if i > 0 {
                        json.push(',');
                    }
                    crate::lease::format::pyjson::write_str(&mut json, id);
                }
                json.push(']');
                json
            })
            .collect();
        Wanted { lists, count: session_ids.len() }
    }
}

/// The query, once the database's files are checked: `owner` owns `resolved`.
fn read_checked(owner: (u32, u32), resolved: &Path, wanted: Wanted, now: f64) -> Contexts {
    if wanted.count == 0 {
        return Contexts::Read(ContextMap::default());
    }
    match query_as(owner, resolved, wanted, now) {
        Ok(found) => Contexts::Read(found),
        Err(why) => Contexts::Unknown(why),
    }
}

/// The databases whose read has not returned yet (a FIFO holds SQLite's open).
static STUCK_READS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// How long a read of state.db may take before its context is "unknown for now": a
/// FIFO swapped in after the files were checked would hold SQLite's open forever.
pub const READ_BOUND: Duration = Duration::from_secs(5);

/// Run the query on a thread of its own that acts with the file-system identity of the
/// home's owner (as the one door does when root acts in a user's home): SQLite opens
/// state.db and its -wal and -shm by path, so a home swapped for a link to a directory
/// of root's between the check and the open reaches only what that user may reach, and
/// nothing SQLite creates or chowns there is root's doing. The answer is waited for
/// [`READ_BOUND`]; a read still stuck (a FIFO) is left to itself, and the same database
/// is not read again until it returns.
fn query_as(owner: (u32, u32), db: &Path, wanted: Wanted, now: f64) -> Result<ContextMap, String> {
    let stuck = || STUCK_READS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if stuck().iter().any(|p| p == db) {
        return Err(format!(
            "{} has not answered an earlier read yet (not a regular file any more?): unknown for now",
            db.display()
        ));
    }
    stuck().push(db.to_path_buf());
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let path = db.to_path_buf();
    let spawned = std::thread::Builder::new().name("state.db".into()).spawn(move || {
        let found = {
            let _as = crate::lease::home::safe_file::ActAs::user(owner);
            query(&path, wanted, now)
        };
        stuck().retain(|p| p != &path);
        let _ = tx.send(found);
    });
    if let Err(e) = spawned {
        stuck().retain(|p| p != db);
        return Err(format!("cannot read state.db: no thread for it ({e})"));
    }
    match rx.recv_timeout(READ_BOUND) {
        Ok(found) => found,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            wake_fifos(db);
            Err(format!(
                "{} did not answer within {}s (not a regular file any more?): unknown for now",
                db.display(),
                READ_BOUND.as_secs()
            ))
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err("cannot read state.db: its reader failed".into()),
    }
}

/// A read stuck opening a FIFO swapped in for state.db (or its -wal or -shm) waits for a
/// writer: open each FIFO there for writing, without waiting, so that read gets an empty
/// file, fails and ends, and a console or recorder reads the database again later.
fn wake_fifos(db: &Path) {
    let spot = crate::lease::home::safe_file::Spot::in_home(db);
    let Ok(Some(dir)) =
        crate::lease::home::safe_file::Dir::open(&crate::lease::home::safe_file::Spot::new(&spot.home, ""))
    else {
        return;
    };
    let name = spot.rel.as_os_str().to_string_lossy().into_owned();
    for suffix in ["", "-wal", "-shm"] {
        dir.wake_fifo(format!("{name}{suffix}"));
    }
}

/// SQLite opens state.db by its path, so its files are looked at first through the one
/// door: the database must be a regular file, and each of its -wal, -shm and -journal
/// a regular file or absent (a symlink or FIFO planted there is never opened). The
/// home's owner, whose identity the read takes, and state.db's path with no symlink in
/// it (SQLite is told to refuse any: a swap after this check is refused, not followed).
fn check_files(db: &Path) -> Result<((u32, u32), PathBuf), String> {
    use rustix::fs::FileType;
    let spot = crate::lease::home::safe_file::Spot::in_home(db);
    let dir = match crate::lease::home::safe_file::Dir::open(&crate::lease::home::safe_file::Spot::new(&spot.home, ""))
    {
        Ok(Some(d)) => d,
        Ok(None) => return Err("no state.db".into()),
        Err(e) => return Err(format!("cannot read {}: {e}", db.display())),
    };
    let name = spot.rel.as_os_str().to_string_lossy().into_owned();
    for (suffix, must_exist) in [("", true), ("-wal", false), ("-shm", false), ("-journal", false)] {
        let file = format!("{name}{suffix}");
        match dir.kind(&file) {
            Ok(Some(FileType::RegularFile)) => {}
            Ok(None) if must_exist => return Err("no state.db".into()),
            Ok(None) => {}
            Ok(Some(t)) => {
                return Err(format!(
                    "{} is {}, not a regular file: not read",
                    dir.path().join(&file).display(),
                    crate::lease::home::safe_file::kind_name(t)
                ));
            }
            Err(e) => return Err(format!("cannot read {}: {e}", dir.path().join(&file).display())),
        }
    }
    let resolved = dir.resolved_path().map_err(|e| format!("cannot read {}: {e}", db.display()))?;
    Ok((dir.owner(), resolved.join(&name)))
}

fn open(db: &Path) -> Result<Connection, String> {
    let side = |suffix: &str| {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p).exists()
    };
    // A rollback journal beside it: a writer is in a transaction (or crashed in one,
    // which only a writer may roll back). Unknown for now, not a wait.
    if side("-journal") {
        return Err("state.db is locked by a writer right now".into());
    }
    // A WAL database with its -wal and -shm (a writer has it open): read through them. A
    // WAL database without them: a plain open would create them, so it is read as the
    // file stands (immutable; nobody is writing it). A rollback-journal database: a plain
    // read-only open, which creates nothing and honours its locks.
    let immutable = wal_mode(db) && !(side("-wal") && side("-shm"));
    let uri = format!("file:{}{}", uri_path(db), if immutable { "?immutable=1" } else { "" });
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    if crate::lease::failpoint::chosen("state-db-open") {
        // A test swaps the home or state.db here, between the check and SQLite's open.
        std::thread::sleep(Duration::from_secs(1));
    }
    // one door: SQLite opens by path; check_files has vetted state.db and its side files,
    // and this thread acts as the home's owner (query_as).
    let conn = Connection::open_with_flags(&uri, flags).map_err(|e| describe(&e))?;
    // Busy means "unknown for now", never a wait that would hold Hermes up.
    conn.busy_timeout(Duration::ZERO).map_err(|e| describe(&e))?;
    // Each leased session is read once: 256 KB of pages serve that as well as the 2 MB
    // default, which was 2 MB of an `ls`'s peak over a state.db of 50,000 sessions.
    conn.pragma_update(None, "cache_size", -256).map_err(|e| describe(&e))?;
    Ok(conn)
}

/// True when the database header says WAL (file format versions at bytes 18 and 19 are 2).
fn wal_mode(db: &Path) -> bool {
    use std::io::Read;
    let mut header = [0u8; 20];
    let spot = crate::lease::home::safe_file::Spot::in_home(db);
    let read = match crate::lease::home::safe_file::open_read(&spot) {
        Ok(Some(mut f)) => f.read_exact(&mut header).is_ok(),
        _ => false,
    };
    read && header[18] == 2 && header[19] == 2
}

/// A path as an SQLite URI path: only the characters a URI gives meaning to are encoded.
fn uri_path(p: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in p.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn describe(e: &rusqlite::Error) -> String {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            "state.db is locked by a writer right now".into()
        }
        Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt) => {
            format!("state.db is not a readable database ({e})")
        }
        _ => format!("cannot read state.db: {e}"),
    }
}

/// The columns of `sessions` and `messages` this schema has.
fn columns(conn: &Connection) -> Result<HashMap<String, Vec<String>>, String> {
    let sql = "SELECT m.name, p.name FROM sqlite_schema m JOIN pragma_table_info(m.name) p \
               WHERE m.type = 'table' AND m.name IN ('sessions', 'messages', 'gateway_routing')";
    let mut stmt = conn.prepare(sql).map_err(|e| describe(&e))?;
    let rows =
        stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).map_err(|e| describe(&e))?;
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for row in rows {
        let (table, column) = row.map_err(|e| describe(&e))?;
        out.entry(table).or_default().push(column);
    }
    Ok(out)
}

fn query(db: &Path, wanted: Wanted, now: f64) -> Result<ContextMap, String> {
    let conn = open(db)?;
    // One read transaction, so one consistent view: the schema, the leased sessions' rows,
    // then their messages.
    let view = conn.unchecked_transaction().map_err(|e| describe(&e))?;
    let schema = columns(&view)?;
    let Some(sessions) = schema.get("sessions") else {
        return Err("state.db has no sessions table (not a Hermes database, or too old)".into());
    };
    let has = |c: &str| sessions.iter().any(|s| s == c);
    if !has("id") {
        return Err("state.db's sessions table has no id column".into());
    }
    let col = |c: &str| if has(c) { format!("s.{c}") } else { "NULL".into() };
    let columns =
        [col("source"), col("title"), col("started_at"), col("ended_at"), col("end_reason"), col("last_activity_at")]
            .join(", ");
    let sql = format!(
        "WITH wanted(id) AS (SELECT value FROM json_each(?1)) \
         SELECT s.id, {columns} FROM sessions s JOIN wanted ON s.id = wanted.id"
    );
    // A messaging gateway's leases record its session key (`agent:main:telegram:dm:42`),
    // not a stored session's id: its routing row in state.db names the session, and marks
    // the turn running for it (Hermes 0.22's gateway/session_lifecycle.py).
    let routing = schema
        .get("gateway_routing")
        .filter(|c| c.iter().any(|c| c == "session_key") && c.iter().any(|c| c == "entry_json"))
        .map(|_| {
            // The key is second in the table's primary key (scope, session_key): an IN list
            // is one pass over the table; a join looked it up by a scan per id (5 s at
            // 10,000 keys).
            "SELECT g.session_key, \
                    CASE WHEN json_valid(g.entry_json) THEN json_extract(g.entry_json, '$.session_id') END, \
                    CASE WHEN json_valid(g.entry_json) THEN json_extract(g.entry_json, '$.active_turn_token') END \
             FROM gateway_routing g WHERE g.session_key IN (SELECT value FROM json_each(?1))"
        });
    let mut found = ContextMap::with_capacity(wanted.count);
    let mut routed: Vec<Routed> = Vec::new();
    // Where each key is in `routed`: a key in several scopes is merged into one.
    let mut routed_at: HashMap<String, usize> = HashMap::new();
    {
        let mut stmt = view.prepare(&sql).map_err(|e| describe(&e))?;
        let mut routes = routing.map(|sql| view.prepare(sql)).transpose().map_err(|e| describe(&e))?;
        // Each list goes once it is read.
        for list in wanted.lists {
            let mut rows = stmt.query([&list]).map_err(|e| describe(&e))?;
            while let Some(r) = rows.next().map_err(|e| describe(&e))? {
                let value = |i: usize| r.get_ref(i).map_err(|e| describe(&e));
                let time = |v: ValueRef<'_>| sane(number_ref(v), now);
                let Some(id) = text(value(0)?)? else { continue };
                let (source, title, end_reason) = (text(value(1)?)?, text(value(2)?)?, text(value(5)?)?);
                // The session's own heartbeat (last_activity_at); its messages are counted next.
                let times = [time(value(3)?), time(value(4)?), time(value(6)?)];
                found.push([Some(id), title, source, end_reason], times, None);
            }
            if let Some(routes) = routes.as_mut() {
                let mut rows = routes.query([&list]).map_err(|e| describe(&e))?;
                while let Some(r) = rows.next().map_err(|e| describe(&e))? {
                    let value = |i: usize| r.get_ref(i).map_err(|e| describe(&e));
                    let Some(key) = text(value(0)?)? else { continue };
                    let session = text(value(1)?).ok().flatten().filter(|s| !s.is_empty()).map(str::to_owned);
                    let turn = !matches!(value(2)?, ValueRef::Null) && text(value(2)?).ok().flatten() != Some("");
                    // One key in several scopes (stores with other sessions dirs): a turn
                    // marked in any of them runs.
                    match routed_at.get(key).and_then(|&i| routed.get_mut(i)) {
                        Some(r) => {
                            r.turn |= turn;
                            r.session = r.session.take().or(session);
                        }
                        None => {
                            routed_at.insert(key.to_owned(), routed.len());
                            routed.push(Routed { key: key.to_owned(), session, turn });
                        }
                    }
                }
            }
        }
        if !routed.is_empty() {
            add_routed(&mut found, &mut stmt, &routed, now)?;
        }
    }
    found.sort();
    let messages =
        schema.get("messages").filter(|m| m.iter().any(|c| c == "session_id") && m.iter().any(|c| c == "timestamp"));
    if messages.is_some() && !found.is_empty() {
        count_messages(&view, &mut found, now)?;
    }
    found.last_activity_or_start();
    Ok(found)
}

/// A gateway's session key found in `gateway_routing`: the session it names, and
/// whether a turn is marked running for it.
struct Routed {
    key: String,
    session: Option<String>,
    turn: bool,
}

/// A stored session's source, title and end reason, and its three times.
type SessionRow = ([Option<String>; 3], [Option<f64>; 3]);

/// Each routed key's context, under the key: its session's row (`stmt` reads rows by id),
/// or none when state.db has no such session; a key that is a stored session's own id
/// too keeps that session's context.
fn add_routed(
    found: &mut ContextMap,
    stmt: &mut rusqlite::Statement<'_>,
    routed: &[Routed],
    now: f64,
) -> Result<(), String> {
    let ids: Vec<&str> = routed.iter().filter_map(|r| r.session.as_deref()).collect();
    let list = serde_json::to_string(&ids).map_err(|e| e.to_string())?;
    let mut sessions: HashMap<String, SessionRow> = HashMap::new();
    let mut rows = stmt.query([&list]).map_err(|e| describe(&e))?;
    while let Some(r) = rows.next().map_err(|e| describe(&e))? {
        let value = |i: usize| r.get_ref(i).map_err(|e| describe(&e));
        let time = |v: ValueRef<'_>| sane(number_ref(v), now);
        let Some(id) = text(value(0)?)? else { continue };
        let owned = |v: Option<&str>| v.map(str::to_owned);
        let strings = [owned(text(value(1)?)?), owned(text(value(2)?)?), owned(text(value(5)?)?)];
        sessions.insert(id.to_owned(), (strings, [time(value(3)?), time(value(4)?), time(value(6)?)]));
    }
    let stored: std::collections::HashSet<&str> = found.values().map(|c| c.session_id()).collect();
    let fresh: Vec<&Routed> = routed.iter().filter(|r| !stored.contains(r.key.as_str())).collect();
    drop(stored);
    for r in fresh {
        let (strings, times) = r.session.as_ref().and_then(|s| sessions.get(s)).cloned().unwrap_or_default();
        let [source, title, end_reason] = strings;
        found.push(
            [Some(&r.key), title.as_deref(), source.as_deref(), end_reason.as_deref()],
            times,
            Some((r.turn, r.session.as_deref())),
        );
    }
    Ok(())
}

/// Count each found session's messages and take the newest sane time among them into its
/// last activity. Hermes has no index on messages.session_id, so SQLite would scan them
/// anyway; counting them here, by a hash of the found ids, costs a third of an IN list
/// and a GROUP BY. The index holds positions in `contexts` (4 bytes a session).
fn count_messages(conn: &Connection, contexts: &mut ContextMap, now: f64) -> Result<(), String> {
    use std::hash::BuildHasher as _;
    let hash = |id: &[u8]| rustc_hash::FxBuildHasher.hash_one(id);
    let mut index = hashbrown::HashTable::<u32>::with_capacity(contexts.len());
    for i in 0..contexts.len() {
        let Ok(i) = u32::try_from(i) else { break };
        index.insert_unique(hash(contexts.messages_id_at(i as usize).as_bytes()), i, |&j| {
            hash(contexts.messages_id_at(j as usize).as_bytes())
        });
    }
    let mut stmt = conn.prepare("SELECT session_id, timestamp FROM messages").map_err(|e| describe(&e))?;
    let mut rows = stmt.query([]).map_err(|e| describe(&e))?;
    while let Some(r) = rows.next().map_err(|e| describe(&e))? {
        let Ok(ValueRef::Text(id)) = r.get_ref(0) else { continue };
        let at = r.get_ref(1).ok().and_then(number_ref).and_then(|t| sane(Some(t), now));
        let Some(&j) = index.find(hash(id), |&j| contexts.messages_id_at(j as usize).as_bytes() == id) else {
            continue;
        };
        contexts.count_message(j as usize, at);
    }
    Ok(())
}

fn number_ref(v: ValueRef<'_>) -> Option<f64> {
    match v {
        ValueRef::Real(f) => Some(f),
        ValueRef::Integer(i) => Some(i as f64),
        _ => None,
    }
}

/// A text value as text, anything else (NULL, a number, a blob) as none; text that is
/// not UTF-8 fails the read, as a damaged database does.
fn text(v: ValueRef<'_>) -> Result<Option<&str>, String> {
    match v {
        ValueRef::Text(s) => std::str::from_utf8(s).map(Some).map_err(|e| format!("cannot read state.db: {e}")),
        _ => Ok(None),
    }
}

/// How far ahead of this clock a time from state.db may be and still be believed (two
/// clocks a little apart); later is not "now" but unknown.
const CLOCK_SKEW: f64 = 60.0;

fn sane(t: Option<f64>, now: f64) -> Option<f64> {
    t.filter(|t| t.is_finite() && *t >= SANE_FROM && *t <= now + CLOCK_SKEW)
}

/// The idle threshold for a home: `given` (the command line), else its config.yaml's
/// `leasectl.idle_threshold`, else [`DEFAULT_IDLE`]; with a warning for a bad setting.
pub fn idle_threshold(home: &Path, given: Option<Duration>) -> (Duration, Option<String>) {
    if let Some(d) = given {
        return (d, None);
    }
    match crate::lease::home::config::read_idle_threshold(&home.join("config.yaml")) {
        Ok(d) => (d.unwrap_or(DEFAULT_IDLE), None),
        Err(e) => (DEFAULT_IDLE, Some(format!("{e}; using {}", duration(DEFAULT_IDLE.as_secs_f64())))),
    }
}

/// Why a lease looks leaked, in words, or None: its owner is alive but its session has
/// ended, or has seen no activity for longer than `idle`. `owner` names the process.
pub fn leak_reason(
    view: &LeaseView,
    ctx: Option<ContextRef<'_>>,
    idle: Duration,
    now: f64,
    owner: &str,
) -> Option<String> {
    leak(view, ctx, idle, now).map(|l| l.worded(view.entry.pid(), owner, now))
}

/// Whether [`leak_reason`] has a reason, without wording it.
pub fn is_leak(view: &LeaseView, ctx: Option<ContextRef<'_>>, idle: Duration, now: f64) -> bool {
    leak(view, ctx, idle, now).is_some()
}

/// What makes a lease look leaked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Leak<'a> {
    /// Its session ended at this time, for this reason.
    Ended { at: f64, reason: Option<&'a str> },
    /// Its session has seen no activity since this time, longer than the threshold.
    Idle { since: f64 },
    /// A messaging gateway's lease, taken at this time, with no turn running for its
    /// chat: the gateway holds a lease only for a turn, so this one was left behind.
    BetweenTurns { since: f64 },
}

impl Leak<'_> {
    /// In words, as judged at `now`: `pid` (named `owner`) still holds the lease.
    pub fn worded(&self, pid: u64, owner: &str, now: f64) -> String {
        let holder = format!("pid {pid} ({owner}) still holds it");
        match *self {
            Leak::Ended { at, reason } => {
                let why = reason.map(|r| format!(" ({r})")).unwrap_or_default();
                format!("session ended {} ago{why} but {holder}", duration(now - at))
            }
            Leak::Idle { since } => format!("no activity for {} but {holder}", duration(now - since)),
            Leak::BetweenTurns { since } => format!(
                "no turn runs for this chat (state.db's gateway routing), yet {holder} since {} ago: a gateway holds a \
                 lease only while a turn runs",
                duration(now - since)
            ),
        }
    }
}

/// What makes `view` look leaked, or None: its owner is alive but its session has ended,
/// or has seen no activity for longer than `idle`.
pub fn leak<'a>(view: &LeaseView, ctx: Option<ContextRef<'a>>, idle: Duration, now: f64) -> Option<Leak<'a>> {
    if !view.liveness.is_alive() {
        return None;
    }
    let ctx = ctx?;
    // A lease taken after its session ended (held again to resume it) or after its last
    // activity is judged from when it was taken: it cannot have outlived a use it began after.
    let taken = view.entry.started_at().unwrap_or(f64::NEG_INFINITY);
    // A gateway's chat with no turn running says the most: its session may have ended
    // too (a webhook's ends with each delivery).
    if ctx.gateway_turn() == Some(false) && now - taken > TURN_GRACE.as_secs_f64() {
        return Some(Leak::BetweenTurns { since: taken });
    }
    if let Some(at) = ctx.ended_at().filter(|at| *at >= taken) {
        return Some(Leak::Ended { at, reason: ctx.end_reason() });
    }
    let since = ctx.last_activity().map(|a| a.max(taken))?;
    (now - since > idle.as_secs_f64()).then_some(Leak::Idle { since })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO swapped in for state.db after its check holds a read only for the bound:
    /// it is then woken, so the next read of the same database is tried again, not told
    /// an earlier read is still stuck.
    #[test]
    fn a_read_stuck_on_a_fifo_is_woken_after_the_bound() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("state.db");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &db,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        let me = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
        let first = query_as(me, &db, Wanted::of(&["S"]), 1.0).expect_err("a FIFO cannot answer");
        assert!(first.contains("did not answer within"), "{first}");
        let woken = std::time::Instant::now();
        while STUCK_READS.lock().map(|s| !s.is_empty()).unwrap_or(false) {
            assert!(woken.elapsed() < Duration::from_secs(5), "the stuck read was not woken");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_time_in_the_future_is_unknown_not_now() {
        let now = 1_800_000_000.0;
        assert_eq!(sane(Some(now + 3600.0), now), None, "an ended_at an hour ahead has not happened");
        assert_eq!(sane(Some(now + 30.0), now), Some(now + 30.0), "a little skew is believed");
        assert_eq!(sane(Some(now - 3600.0), now), Some(now - 3600.0));
    }

    /// A state.db of 600 sessions with 0 to 3 messages each, and 300 messages of sessions
    /// with no row; times missing, ahead of `now`, before 2000 or fine; every 97th id one
    /// that JSON escapes.
    fn random_state_db(path: &Path, now: f64, id: impl Fn(u64) -> String) -> Connection {
        let db = Connection::open(path).expect("create state.db");
        db.execute_batch(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, title TEXT, started_at REAL, ended_at REAL, \
             end_reason TEXT, last_activity_at REAL); \
             CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT, timestamp REAL);",
        )
        .expect("schema");
        let mut next = crate::lease::format::pyjson::xorshift(0x5eed_c0de);
        let time = |r: u64| match r % 10 {
            0 => None,
            1 => Some(now + 7200.0),
            2 => Some(1.0),
            _ => Some(now - (r % 100_000) as f64),
        };
        let message = |db: &Connection, session: String, at: Option<f64>| {
            db.execute("INSERT INTO messages (session_id, timestamp) VALUES (?1, ?2)", rusqlite::params![session, at])
                .expect("a message");
        };
        for i in 0..600 {
            let ended = next().is_multiple_of(5).then_some((now - 50.0, "cli_close"));
            let (started, beat) = (time(next()), time(next()));
            db.execute(
                "INSERT INTO sessions VALUES (?1, 'cli', ?2, ?3, ?4, ?5, ?6)",
                rusqlite::params![id(i), format!("chat {i}"), started, ended.map(|e| e.0), ended.map(|e| e.1), beat],
            )
            .expect("a session");
            for _ in 0..next() % 4 {
                message(&db, id(i), time(next()));
            }
        }
        for _ in 0..300 {
            let at = time(next());
            message(&db, id(700 + next() % 50), at);
        }
        db
    }

    /// What one query for session `s` alone says its context is.
    fn one_by_one(db: &Connection, s: &str, now: f64) -> Option<SessionContext> {
        let sql =
            "SELECT source, title, started_at, ended_at, end_reason, last_activity_at FROM sessions WHERE id = ?1";
        let row = db.query_row(sql, [s], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, Option<f64>>(2)?,
                r.get::<_, Option<f64>>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, Option<f64>>(5)?,
            ))
        });
        let (source, title, started, ended, end_reason, beat) = row.ok()?;
        let times: Vec<Option<f64>> = db
            .prepare("SELECT timestamp FROM messages WHERE session_id = ?1")
            .and_then(|mut q| q.query_map([s], |r| r.get(0))?.collect())
            .expect("its messages");
        let newest = times.iter().chain([&beat]).filter_map(|t| sane(*t, now)).max_by(f64::total_cmp);
        let mut context = SessionContext::new(s, title.as_deref(), source.as_deref(), end_reason.as_deref());
        context.started_at = sane(started, now);
        context.ended_at = sane(ended, now);
        context.last_activity = newest.or(sane(started, now));
        context.messages = times.len() as u64;
        Some(context)
    }

    /// Each asked session's context as one query per session gives it: its row, its
    /// messages counted, its last activity the newest sane time of its heartbeat and
    /// messages (else its start). Ids asked twice, ids with no row, messages of sessions
    /// not asked for, an id that JSON escapes, and times out of range are all there.
    #[test]
    fn contexts_read_together_are_each_sessions_own() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.db");
        let now = 1_800_000_000.0;
        let id = |i: u64| if i % 97 == 3 { format!("s\"{i}\u{1}é") } else { format!("s{i}") };
        let db = random_state_db(&path, now, id);
        let mut asked: Vec<String> = (0..800).filter(|i| i % 3 != 1).map(id).collect();
        asked.extend((0..40).map(|i| id(i * 5)));
        let asked: Vec<&str> = asked.iter().map(String::as_str).collect();
        let Contexts::Read(found) = read_at(&path, &asked, now) else { panic!("state.db unread") };
        let mut with_rows = std::collections::HashSet::new();
        for &s in &asked {
            let want = one_by_one(&db, s, now);
            assert_eq!(found.get(s).map(|c| c.to_context()), want, "{s:?}");
            if want.is_some() {
                with_rows.insert(s);
            }
        }
        assert!(with_rows.len() > 300, "most asked sessions have rows: {}", with_rows.len());
        assert_eq!(found.len(), with_rows.len(), "only the asked sessions, each once");
    }
}
