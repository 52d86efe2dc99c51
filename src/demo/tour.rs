//! The guided tour: each refusal reason and each prune, in order, with why the
//! rule exists. A step is a list of playground actions and what they should show.

use super::playground::{Action, CorruptKind, OwnerChoice};
use crate::lease::Reason;

/// What a step's last action must come to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    Refused(Reason),
    /// Granted after pruning at least one dead or recycled owner.
    GrantedAfterPrune,
    /// Granted by replacing the same writer's own entry.
    GrantedReplacing,
    /// A live owner's lease marked LEAK? (its session ended in state.db).
    LeakSuspect,
}

#[derive(Debug, Clone)]
pub struct Step {
    pub title: &'static str,
    pub why: &'static str,
    pub actions: Vec<Action>,
    pub expect: Expect,
}

fn spawn(session: &str, surface: &str, live: &str) -> Action {
    Action::SpawnOwner { session: session.into(), surface: surface.into(), live_id: live.into(), track_liveness: false }
}

fn acquire(session: &str, surface: &str, live: &str, owner: OwnerChoice) -> Action {
    Action::TryAcquire { session: session.into(), surface: surface.into(), live_id: live.into(), cap: None, owner }
}

/// The tour, in order.
pub fn steps() -> Vec<Step> {
    vec![
        Step {
            title: "1/7 Two owners of one session: SESSION_NOT_OWNED",
            why: "A tui owner holds tour-1; a desktop process asks for it too. Two owners of one session would each \
                  reason from a transcript without the other's in-flight turn and append replies that never saw \
                  each other, so the second is refused, with or without a cap.",
            actions: vec![spawn("tour-1", "tui", "tab-1"), acquire("tour-1", "desktop", "win-9", OwnerChoice::New)],
            expect: Expect::Refused(Reason::SessionNotOwned),
        },
        Step {
            title: "2/7 The same writer may re-acquire its own lease",
            why: "The owner of tour-1 asks again with the same pid and live id (a session whose record was rebuilt \
                  in place): that is re-entrancy, not a second writer, so its entry is replaced, not doubled. \
                  Another live id in the same process would still be a second writer.",
            actions: vec![acquire("tour-1", "tui", "tab-1", OwnerChoice::Nth(0))],
            expect: Expect::GrantedReplacing,
        },
        Step {
            title: "3/7 Capacity is a different refusal: MAX_CONCURRENT_SESSIONS",
            why: "With max_concurrent_sessions: 2 and two live owners, a third session is refused for capacity. \
                  Clients retry a capacity refusal later; they never retry an ownership refusal the same way, \
                  so the two reasons must never be confused.",
            actions: vec![
                Action::SetCap(Some(2)),
                spawn("tour-2", "cli", "cli-1"),
                acquire("tour-3", "gateway", "gw-1", OwnerChoice::New),
            ],
            expect: Expect::Refused(Reason::MaxConcurrentSessions),
        },
        Step {
            title: "4/7 A dead owner must not hold a session hostage",
            why: "The tui owner of tour-1 is SIGKILLed, as a crash would. Its lease is still in the file, but the \
                  next acquire prunes it and a successor takes tour-1: the fence survives crashes.",
            actions: vec![
                Action::KillOwner { owner: OwnerChoice::Nth(0) },
                acquire("tour-1", "desktop", "win-2", OwnerChoice::New),
            ],
            expect: Expect::GrantedAfterPrune,
        },
        Step {
            title: "5/7 A recycled pid is not the owner",
            why: "An entry names a pid that is alive, but that process started at another time: the number was \
                  handed to somebody else. Identity is (pid, start time), so the entry is dead and is pruned.",
            actions: vec![
                Action::SetCap(None),
                Action::FakeRecycled { session: "tour-5".into() },
                acquire("tour-5", "cli", "cli-5", OwnerChoice::New),
            ],
            expect: Expect::GrantedAfterPrune,
        },
        Step {
            title: "6/7 A live owner nobody uses: LEAK?",
            why: "The cli owner of tour-2 is alive, but Hermes ended its session 3 hours ago (state.db says \
                  tui_shutdown). By pid and start time the lease looks healthy and would hold tour-2 and a slot \
                  forever; leasectl reads state.db and marks it LEAK? with the reason. Nothing is removed by \
                  itself: select it, read why, and release it with x if nobody uses it.",
            actions: vec![Action::EndSession { session: "tour-2".into(), hours_ago: 3 }],
            expect: Expect::LeakSuspect,
        },
        Step {
            title: "7/7 \"Cannot tell\" never becomes \"no owner\": SESSION_COORDINATION_UNAVAILABLE",
            why: "The registry is truncated. leasectl cannot prove tour-6 has no live owner, so it refuses and \
                  leaves the file exactly as it was. Press R to repair it.",
            actions: vec![Action::Corrupt(CorruptKind::Truncated), acquire("tour-6", "cli", "cli-6", OwnerChoice::New)],
            expect: Expect::Refused(Reason::SessionCoordinationUnavailable),
        },
    ]
}
