//! The worker's view of each home's state.db: read again only when the database (or
//! its WAL) changed, or other sessions are leased, and at most every 2 s; leak suspects
//! judged from it on every snapshot.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::lease::context::{self, Contexts};
use crate::lease::{LeaseView, Liveness};

/// At most one read of a home's state.db this often: Hermes may write it many times a second.
pub const READ_EVERY: Duration = Duration::from_secs(2);
/// How often leak verdicts are judged again with no change at all: an idle session
/// crosses the threshold with nothing written anywhere.
pub const JUDGE_EVERY: Duration = Duration::from_secs(30);

/// What identifies the database's content without reading it: state.db's and its
/// WAL's size and modification time.
type Signature = [Option<(u64, SystemTime)>; 2];

fn signature(db: &Path) -> Signature {
    let look = |p: &Path| std::fs::metadata(p).ok().and_then(|m| Some((m.len(), m.modified().ok()?)));
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    [look(db), look(&PathBuf::from(wal))]
}

struct HomeContext {
    signature: Signature,
    ids: Vec<String>,
    read_at: Instant,
    contexts: Arc<Contexts>,
    idle: Duration,
}

#[derive(Default)]
pub struct SessionCache {
    homes: HashMap<PathBuf, HomeContext>,
    judged_at: Option<Instant>,
    /// The idle threshold given on the command line, if any.
    pub idle_given: Option<Duration>,
}

impl SessionCache {
    /// The contexts of `views`' sessions in `home`: read again when the database changed
    /// (at most every [`READ_EVERY`]) or other sessions are leased now.
    pub fn contexts(&mut self, home: &Path, views: &[LeaseView]) -> (Arc<Contexts>, Duration) {
        let mut ids: Vec<String> = views.iter().map(|v| v.entry.session_id().to_owned()).collect();
        ids.sort_unstable();
        ids.dedup();
        let sig = signature(&context::state_db(home));
        if let Some(h) = self.homes.get(home) {
            let fresh = h.signature == sig || h.read_at.elapsed() < READ_EVERY;
            if fresh && h.ids == ids {
                return (Arc::clone(&h.contexts), h.idle);
            }
        }
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let contexts = Arc::new(context::read(home, &refs));
        let (idle, _) = context::idle_threshold(home, self.idle_given);
        self.homes.insert(
            home.to_path_buf(),
            HomeContext { signature: sig, ids, read_at: Instant::now(), contexts: Arc::clone(&contexts), idle },
        );
        (contexts, idle)
    }

    /// True when a snapshot would show something new: a database changed (and may be
    /// read again), or verdicts are due to be judged against the clock.
    pub fn due(&self) -> bool {
        self.judged_at.is_none_or(|t| t.elapsed() >= JUDGE_EVERY)
            || self.homes.iter().any(|(home, h)| {
                h.read_at.elapsed() >= READ_EVERY && h.signature != signature(&context::state_db(home))
            })
    }

    pub fn judged(&mut self) {
        self.judged_at = Some(Instant::now());
    }
}

/// Why `v` looks leaked, given its session's context; `owner` names the process.
pub fn leak(v: &LeaseView, contexts: &Contexts, idle: Duration, now: f64, owner: Option<&str>) -> Option<Arc<str>> {
    if v.liveness != Liveness::Alive {
        return None;
    }
    context::leak_reason(v, contexts.get(v.entry.session_id()), idle, now, owner.unwrap_or("-")).map(Arc::from)
}
