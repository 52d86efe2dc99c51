//! What stands out in a registry, judged on every lease before filters hide any: two
//! live owners of one session, live leases over the cap, leak suspects. ls, watch,
//! metrics and the JSON output all mark the same way.

use std::collections::{HashMap, HashSet};

use crate::lease::home::context::{self, Contexts, SessionContext};
use crate::lease::owners::owner::OwnerInfo;
use crate::lease::{LeaseView, Liveness, now};

/// What stands out in one registry: sessions with two live owners, and live leases
/// over the cap. Judged on every lease, before filters hide any.
#[derive(Debug, Default, Clone)]
pub struct Marks {
    pub conflicts: HashSet<String>,
    pub live: usize,
    /// Every lease of the registry, before filters hide any.
    pub total: usize,
    pub over_cap: bool,
    /// What state.db says of the leased sessions (None: not a registry file).
    pub context: Option<Contexts>,
    /// Leak suspects by lease id, with the reason in words.
    pub leaks: HashMap<String, String>,
}

impl Marks {
    pub fn of(views: &[LeaseView], cap: Option<u64>) -> Marks {
        let (live, twice) = crate::lease::view::held_twice(views);
        Marks {
            conflicts: twice.into_keys().map(str::to_owned).collect(),
            live,
            total: views.len(),
            over_cap: cap.is_some_and(|c| live as u64 > c),
            context: None,
            leaks: HashMap::new(),
        }
    }

    /// Read the leased sessions' context from the home's state.db (one query), and
    /// judge which live owners hold a session nobody uses.
    pub(super) fn add_context(
        &mut self,
        home: &std::path::Path,
        views: &[LeaseView],
        owners: &HashMap<u64, OwnerInfo>,
        idle: Option<std::time::Duration>,
    ) {
        if let Some(w) = self.add_context_quietly(home, views, owners, idle) {
            say_err!("leasectl: warning: {w}");
        }
    }

    /// [`Marks::add_context`], returning a bad idle threshold's warning instead of saying it.
    pub fn add_context_quietly(
        &mut self,
        home: &std::path::Path,
        views: &[LeaseView],
        owners: &HashMap<u64, OwnerInfo>,
        idle: Option<std::time::Duration>,
    ) -> Option<String> {
        let (threshold, warning) = context::idle_threshold(home, idle);
        let contexts = context::read_found(home, || {
            let mut ids: Vec<&str> = views.iter().map(|v| v.entry.session_id()).collect();
            ids.sort_unstable();
            ids.dedup();
            ids
        });
        self.judge_context(contexts, threshold, views, owners);
        warning
    }

    /// Leak suspects by `contexts` (state.db, read here or on the registry's host) and
    /// the idle `threshold`.
    pub fn judge_context(
        &mut self,
        contexts: context::Contexts,
        threshold: std::time::Duration,
        views: &[LeaseView],
        owners: &HashMap<u64, OwnerInfo>,
    ) {
        let at = now();
        for v in views {
            let owner = owners.get(&v.entry.pid()).map(|o| o.name.as_str()).unwrap_or("-");
            if let Some(why) = context::leak_reason(v, contexts.get(v.entry.session_id()), threshold, at, owner) {
                self.leaks.insert(v.entry.lease_id().to_owned(), why);
            }
        }
        self.context = Some(contexts);
    }

    /// The session's context, when state.db has it.
    pub fn context_of(&self, v: &LeaseView) -> Option<&SessionContext> {
        self.context.as_ref()?.get(v.entry.session_id())
    }

    /// True when `v` is a live owner of a session that another live owner holds too.
    pub fn in_conflict(&self, v: &LeaseView) -> bool {
        v.liveness == Liveness::Alive && self.conflicts.contains(v.entry.session_id())
    }

    /// The marks one lease carries, for people. Over its cap is the registry's state, said
    /// on its line: no one lease is the one over it.
    pub fn of_lease(&self, v: &LeaseView) -> Vec<&'static str> {
        let mut m = Vec::new();
        if self.in_conflict(v) {
            m.push("CONFLICT");
        }
        if self.leaks.contains_key(v.entry.lease_id()) {
            m.push("LEAK?");
        }
        m
    }
}
