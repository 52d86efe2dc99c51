//! The worker's view of each home's state.db: read again only when the database (or
//! its WAL) changed, or other sessions are leased, and at most every 2 s; leak suspects
//! judged from it on every snapshot, and again when a session's idle time crosses the
//! threshold (the one change that happens with nothing written anywhere).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::lease::LeaseView;
use crate::lease::home::context::{self, Contexts};

/// At most one read of a home's state.db this often: Hermes may write it many times a second.
pub(crate) const READ_EVERY: Duration = Duration::from_secs(2);

/// How many homes' state.db a look for changes checks (two `stat`s each), the next ones
/// the next time: every home each second was 60 % of an idle console's work at 20,000
/// profiles holding leases. With more homes than this, a change is seen within a few
/// looks (20 at 20,000 homes), where a session going idle is timed to the second still.
const SIGNATURES_PER_LOOK: usize = 1_000;

struct HomeContext {
    signature: context::Signature,
    /// A fingerprint of the leased session ids read for (10,000 ids need not be kept).
    ids: u64,
    read_at: Instant,
    contexts: Arc<Contexts>,
    idle: Duration,
    /// When the next open session goes idle past the threshold (epoch seconds), if any.
    next_crossing: Option<f64>,
    /// A look ([`SessionCache::due`]) found the database changed since it was read.
    changed: bool,
}

#[derive(Default)]
pub(crate) struct SessionCache {
    homes: HashMap<PathBuf, HomeContext>,
    /// The idle threshold given on the command line, if any.
    pub idle_given: Option<Duration>,
    /// What every registry without a lease is given: one shared value, not one each.
    nothing_leased: Option<Arc<Contexts>>,
    /// Where the next look for changed databases starts, counted in `homes`' order.
    next_look: usize,
}

/// The sorted, distinct session ids of `views`, and their fingerprint.
fn leased_ids(views: &[LeaseView]) -> (Vec<&str>, u64) {
    let mut ids: Vec<&str> = views.iter().map(|v| v.entry.session_id()).collect();
    ids.sort_unstable();
    ids.dedup();
    (ids.clone(), rustc_hash::FxBuildHasher.hash_one(&ids))
}

impl SessionCache {
    /// The contexts of `views`' sessions in `home`: read again when a look found the
    /// database changed ([`SessionCache::due`], at most every [`READ_EVERY`]) or other
    /// sessions are leased now. Not looked at here: a snapshot of every store (an owner
    /// came or went) looked at 20,000 homes' databases each time.
    pub(crate) fn contexts(&mut self, home: &Path, views: &[LeaseView], now: f64) -> (Arc<Contexts>, Duration) {
        // Nothing leased, nothing to judge or show: a home with 100,000 empty profiles
        // spent a third of its load reading each one's state.db and config.yaml.
        if views.is_empty() {
            self.homes.remove(home);
            let nothing = self.nothing_leased.get_or_insert_with(|| Arc::new(Contexts::Read(Default::default())));
            return (Arc::clone(nothing), self.idle_given.unwrap_or_default());
        }
        let (ids, fingerprint) = leased_ids(views);
        if let Some(h) = self.homes.get(home)
            && !h.changed
            && h.ids == fingerprint
        {
            return (Arc::clone(&h.contexts), h.idle);
        }
        // Its version before the read: a change during it is seen by the next look.
        let sig = context::signature(&context::state_db(home));
        let contexts = Arc::new(context::read(home, &ids));
        let (idle, _) = context::idle_threshold(home, self.idle_given);
        let next_crossing = next_crossing(&contexts, idle, now);
        self.homes.insert(
            home.to_path_buf(),
            HomeContext {
                signature: sig,
                ids: fingerprint,
                read_at: Instant::now(),
                contexts: Arc::clone(&contexts),
                idle,
                next_crossing,
                changed: false,
            },
        );
        (contexts, idle)
    }

    /// True when a snapshot would show something new: a database changed (and may be
    /// read again), or a session has just gone idle past the threshold.
    /// Each call checks the databases of [`SIGNATURES_PER_LOOK`] homes, from where the last
    /// one stopped, and marks those changed for the next snapshot to read.
    pub(crate) fn due(&mut self, now: f64) -> bool {
        if self.homes.values().any(|h| h.next_crossing.is_some_and(|at| at <= now)) {
            return true;
        }
        let homes = self.homes.len();
        if homes == 0 {
            return false;
        }
        let start = self.next_look % homes;
        let looked = SIGNATURES_PER_LOOK.min(homes);
        self.next_look = start + looked;
        let mut any = false;
        for (i, (home, h)) in self.homes.iter_mut().enumerate() {
            let in_look = (i + homes - start) % homes < looked;
            if in_look
                && h.read_at.elapsed() >= READ_EVERY
                && h.signature != context::signature(&context::state_db(home))
            {
                h.changed = true;
                any = true;
            }
        }
        any
    }

    /// The verdicts as of `now` are shown: wait for the crossing after it.
    pub(crate) fn judged(&mut self, now: f64) {
        for h in self.homes.values_mut() {
            if h.next_crossing.is_some_and(|at| at <= now) {
                h.next_crossing = next_crossing(&h.contexts, h.idle, now);
            }
        }
    }
}

/// When the next open session's idle time passes `idle` after `now` (epoch seconds).
fn next_crossing(contexts: &Contexts, idle: Duration, now: f64) -> Option<f64> {
    match contexts {
        Contexts::Read(found) => found
            .values()
            .filter(|c| c.ended_at().is_none())
            .filter_map(|c| c.last_activity().map(|t| t + idle.as_secs_f64()))
            .filter(|at| *at > now)
            .min_by(f64::total_cmp),
        Contexts::Unknown(_) => None,
    }
}

/// Why `v` looks leaked, given its session's context; `owner` names the process.
pub(crate) fn leak(
    v: &LeaseView,
    contexts: &Contexts,
    idle: Duration,
    now: f64,
    owner: Option<&str>,
) -> Option<Arc<str>> {
    context::leak_reason(v, contexts.get(v.entry.session_id()), idle, now, owner.unwrap_or("-")).map(Arc::from)
}
