//! What stands out in a registry, judged on every lease before filters hide any: two
//! live owners of one session, live leases over the cap, leak suspects. ls, watch,
//! metrics and the JSON output all mark the same way.

use std::collections::HashSet;

use crate::lease::home::context::{self, ContextRef, Contexts};
use crate::lease::owners::owner::OwnerInfo;
use crate::lease::{LeaseView, now};

/// What stands out in one registry: sessions with two live owners, and live leases
/// over the cap. Judged on every lease, before filters hide any.
#[derive(Debug, Default, Clone)]
pub(crate) struct Marks {
    pub conflicts: HashSet<String>,
    pub live: usize,
    /// Every lease of the registry, before filters hide any.
    pub total: usize,
    pub over_cap: bool,
    /// What state.db says of the leased sessions (None: not a registry file).
    pub context: Option<Contexts>,
    /// How many leases are leak suspects.
    pub leak_suspects: usize,
    /// The idle threshold leaks were judged by, and when, once a context was read. Each
    /// suspect's reason is worded when it is shown: 11,000 reasons of a 50,000-lease
    /// listing, kept by lease id beside the listing and its context, were 2.3 MB.
    judged: Option<(std::time::Duration, f64)>,
    /// How many leases each owner holds, over every listing read (set by the caller that
    /// read them all; else this registry's).
    pub holdings: crate::lease::owners::kind::Holdings,
}

impl Marks {
    pub(crate) fn of(views: &[LeaseView], cap: Option<u64>) -> Marks {
        let (live, twice) = crate::lease::view::held_twice(views);
        Marks {
            conflicts: twice.into_keys().map(str::to_owned).collect(),
            live,
            total: views.len(),
            over_cap: cap.is_some_and(|c| live as u64 > c),
            context: None,
            leak_suspects: 0,
            judged: None,
            holdings: crate::lease::owners::kind::Holdings::of(views),
        }
    }

    /// The owner of `v` (its process `owner`, where known) as advice needs it: its kind,
    /// what state.db says, the safe move.
    pub(crate) fn owner_move(&self, v: &LeaseView, owner: Option<&OwnerInfo>) -> crate::lease::owners::kind::OwnerMove {
        let at = self.judged.map_or_else(now, |(_, at)| at);
        let cmdline = owner.map(|o| o.cmdline.as_slice());
        crate::lease::owners::kind::OwnerMove::of(v, self.context_of(v), self.holdings.of_owner(v), cmdline, at)
    }

    /// Read the leased sessions' context from the home's state.db (one query), and
    /// judge which live owners hold a session nobody uses.
    pub(super) fn add_context(
        &mut self,
        home: &std::path::Path,
        views: &[LeaseView],
        idle: Option<std::time::Duration>,
    ) {
        if let Some(w) = self.add_context_quietly(home, views, idle) {
            say_err!("leasectl: warning: {w}");
        }
    }

    /// [`Marks::add_context`], returning a bad idle threshold's warning instead of saying it.
    pub(crate) fn add_context_quietly(
        &mut self,
        home: &std::path::Path,
        views: &[LeaseView],
        idle: Option<std::time::Duration>,
    ) -> Option<String> {
        let (threshold, warning) = context::idle_threshold(home, idle);
        let contexts = context::read_found(home, || {
            let mut ids: Vec<&str> = views.iter().map(|v| v.entry.session_id()).collect();
            ids.sort_unstable();
            ids.dedup();
            ids
        });
        self.judge_context(contexts, threshold, views);
        warning
    }

    /// Leak suspects by `contexts` (state.db, read here or on the registry's host) and
    /// the idle `threshold`.
    pub(crate) fn judge_context(
        &mut self,
        contexts: context::Contexts,
        threshold: std::time::Duration,
        views: &[LeaseView],
    ) {
        let at = now();
        self.leak_suspects =
            views.iter().filter(|v| context::is_leak(v, contexts.get(v.entry.session_id()), threshold, at)).count();
        self.judged = Some((threshold, at));
        self.context = Some(contexts);
    }

    /// Why `v` looks leaked, in words (`owner`: its owner's facts), or None.
    pub(crate) fn leak_of(&self, v: &LeaseView, owner: Option<&OwnerInfo>) -> Option<String> {
        let (threshold, at) = self.judged?;
        let owner = owner.map_or("-", |o| o.name.as_str());
        context::leak_reason(v, self.context_of(v), threshold, at, owner)
    }

    /// Whether `v` looks leaked.
    pub(crate) fn is_leak(&self, v: &LeaseView) -> bool {
        self.judged.is_some_and(|(threshold, at)| context::is_leak(v, self.context_of(v), threshold, at))
    }

    /// The session's context, when state.db has it.
    pub(crate) fn context_of(&self, v: &LeaseView) -> Option<ContextRef<'_>> {
        self.context.as_ref()?.get(v.entry.session_id())
    }

    /// True when `v` is a live owner of a session that another live owner holds too.
    pub(crate) fn in_conflict(&self, v: &LeaseView) -> bool {
        v.liveness.counts_as_live() && self.conflicts.contains(v.entry.session_id())
    }

    /// The marks one lease carries, for people. Over its cap is the registry's state, said
    /// on its line: no one lease is the one over it.
    pub(crate) fn of_lease(&self, v: &LeaseView) -> Vec<&'static str> {
        let mut m = Vec::new();
        if self.in_conflict(v) {
            m.push("CONFLICT");
        }
        if self.is_leak(v) {
            m.push("LEAK?");
        }
        m
    }
}
