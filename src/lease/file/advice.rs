//! What to do about a refusal, with the lease to act on picked from the registry and the
//! home's state.db: a leak suspect first (its session ended, then the longest idle), never
//! a healthy, busy lease; when every holder is healthy, that is said, and waiting is the
//! advice (the CLI adds the command that waits).

use super::admin::snapshot;
use crate::lease::clock::now;
use crate::lease::home::context::{self, idle_threshold};
use crate::lease::home::paths::Registry;
use crate::lease::owners::kind::{Holdings, OwnerMove};
use crate::lease::owners::liveness::Prober;
use crate::lease::owners::owner::CommandNames;
use crate::lease::view::LeaseView;
use crate::lease::words::human;
use crate::lease::words::refusal::{Reason, Refusal};
use crate::lease::words::safe_move::advise_move;

/// A holder that looks leaked, why, and the safe move for its owner's kind.
struct Suspect {
    view: LeaseView,
    why: String,
    owner: OwnerMove,
    /// Ended sessions first (the longest ago), then the longest idle.
    rank: (bool, f64),
}

/// The leak suspects among `views` (leases of the registry; `all` the registry's whole
/// listing, for how many sessions each owner holds), the likeliest first.
fn suspects(reg: &Registry, views: &[LeaseView], all: &[LeaseView], idle: Option<std::time::Duration>) -> Vec<Suspect> {
    let sessions: Vec<&str> = views.iter().map(|v| v.entry.session_id()).collect();
    let contexts = context::read(&reg.home, &sessions);
    let (idle, _) = idle_threshold(&reg.home, idle);
    let at = now();
    let mut names = CommandNames::default();
    let mut found = Vec::new();
    let held = Holdings::of(all);
    for v in views {
        // No context, no suspect: the owner's name is read only for a lease that has one.
        let Some(ctx) = contexts.get(v.entry.session_id()) else { continue };
        let Some(why) = context::leak_reason(v, Some(ctx), idle, at, names.of(v.entry.pid())) else { continue };
        let since = ctx.ended_at().or(ctx.last_activity()).unwrap_or(at);
        let cmdline = crate::lease::owners::owner::command_line(v.pid_here());
        let owner = OwnerMove::of(v, Some(ctx), held.of_owner(v), cmdline.as_deref(), at);
        found.push(Suspect { view: v.clone(), why, owner, rank: (ctx.ended_at().is_none(), since) });
    }
    found.sort_by(|a, b| a.rank.0.cmp(&b.rank.0).then(a.rank.1.total_cmp(&b.rank.1)));
    found
}

/// `lease ID8 (session S, pid P, KIND) looks leaked: WHY. THE SAFE MOVE.`
fn free_it(s: &Suspect) -> String {
    let id = s.view.entry.lease_id();
    format!(
        "lease {} (session {}, pid {}, {}) looks leaked: {}. {}.",
        id.chars().take(8).collect::<String>(),
        s.view.entry.session_id(),
        s.view.entry.pid(),
        human::escape(&s.owner.kind.describe()),
        s.why,
        advise_move(&s.owner, id, s.view.pid_here(), &crate::lease::words::hint::command).trim_end_matches('.')
    )
}

/// The advice for `refusal` in this registry.
pub(super) fn advice(reg: &Registry, idle: Option<std::time::Duration>, refusal: &Refusal) -> String {
    match refusal.reason {
        Reason::MaxConcurrentSessions => {
            let views = snapshot(reg).leases.unwrap_or_default();
            let found = suspects(reg, &views, &views, idle);
            match found.first() {
                Some(s) => format!(
                    "Retry when another session finishes, or raise max_concurrent_sessions. A slot is held by a \
                     leak suspect: {}",
                    free_it(s)
                ),
                None => "Every slot belongs to a live owner, and none looks leaked (state.db): wait for a slot, or \
                         raise the cap (max_concurrent_sessions in config.yaml, or --max)."
                    .to_owned(),
            }
        }
        Reason::SessionNotOwned => {
            let Some(holder) = refusal.holder.as_ref() else { return refusal.advice() };
            // The holder alone is in question: judged now, not the whole registry read again.
            let view = [LeaseView::local((**holder).clone(), Prober::new().judge(holder))];
            let all = snapshot(reg).leases.unwrap_or_default();
            match suspects(reg, &view, &all, idle).first() {
                Some(s) => format!("Its owner looks gone though its pid lives on: {}", free_it(s)),
                None => {
                    let age = holder
                        .started_at()
                        .filter(|t| *t != 0.0)
                        .map(|t| format!(", its lease {} old", human::duration(now() - t)))
                        .unwrap_or_default();
                    // An owner in a container is named by the pid this host knows too.
                    let pid = match view[0].liveness.namespaced() {
                        Some(o) => format!("pid {}, pid {} on this host in {}", holder.pid(), o.host_pid, o.place()),
                        None => format!("pid {}", holder.pid()),
                    };
                    format!(
                        "Its owner is live and in use ({pid}{age}): attach through the owning surface or close the \
                         session there, or wait for it."
                    )
                }
            }
        }
        Reason::SessionCoordinationUnavailable => refusal.advice(),
    }
}
