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
    /// Granted while the force-released owner of the session still runs: two writers.
    SecondWriter,
    /// Granted after a stop ended the session's owner: one writer.
    GrantedAfterStop,
}

/// A step's first beat: actions that set the scene, shown before the acquire that
/// answers it (the dead owner shown dead, the full cap shown full).
#[derive(Debug, Clone)]
pub struct Scene {
    pub actions: Vec<Action>,
    /// What to look at now, and what the next `t` will do.
    pub shows: &'static str,
}

#[derive(Debug, Clone)]
pub struct Step {
    pub title: &'static str,
    pub why: &'static str,
    pub scene: Option<Scene>,
    /// The beat whose last action comes to `expect`.
    pub actions: Vec<Action>,
    pub expect: Expect,
}

/// One `t` of the tour: a step's scene, its outcome, or the ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beat {
    Scene(usize),
    Outcome(usize),
    End,
}

impl Beat {
    /// The step this beat belongs to (none for the ending).
    pub fn step(self) -> Option<usize> {
        match self {
            Beat::Scene(i) | Beat::Outcome(i) => Some(i),
            Beat::End => None,
        }
    }
}

/// Every beat of the tour, in order: each step's scene (when it has one), then its outcome,
/// then the ending.
pub fn beats() -> Vec<Beat> {
    let mut out = Vec::new();
    for (i, step) in steps().iter().enumerate() {
        if step.scene.is_some() {
            out.push(Beat::Scene(i));
        }
        out.push(Beat::Outcome(i));
    }
    out.push(Beat::End);
    out
}

/// The ending's lines: each reason the tour showed, with its code, the exit code the CLI
/// gives it, and the real command an operator answers it with; then how to go again.
pub fn summary(sandbox: &crate::lease::Location) -> Vec<String> {
    let reach = crate::lease::words::hint::Reach::of(sandbox);
    let run = |args: &[&str]| format!("`{}`", reach.line(None, args));
    let code = |r: Reason| format!("{} (exit {})", r.code(), r.exit_code());
    vec![
        "The tour is over. What you saw, and what an operator runs for it:".into(),
        format!(
            "{}: another live owner holds the session. Attach through it; a leaked holder is ended with {} (S in \
             the console), which frees its session.",
            code(Reason::SessionNotOwned),
            run(&["stop", "ID"])
        ),
        format!(
            "{}: the cap is full. Retry later, or raise max_concurrent_sessions; {} shows who holds the slots.",
            code(Reason::MaxConcurrentSessions),
            run(&["ls"])
        ),
        format!(
            "Dead and recycled owners: the next acquire prunes them, or {} now (p in the console).",
            run(&["prune"])
        ),
        format!(
            "LEAK?: a live owner whose session ended. Nothing removes it by itself: {} says why, then {} ends \
             the owner and frees its slot (S in the console).",
            run(&["ls"]),
            run(&["stop", "ID"])
        ),
        format!(
            "Force-release of a live owner ({}, x) leaves it running and writing beside the next owner: \
             stop first.",
            run(&["force-release", "ID", "--live"])
        ),
        format!(
            "{}: the registry cannot be read, so nobody is granted. {} (F in the console) keeps a backup and \
             every valid entry.",
            code(Reason::SessionCoordinationUnavailable),
            run(&["doctor", "--repair"])
        ),
        "Press t to start again: the playground stops its owners, empties the registry and clears the cap.".into(),
    ]
}

fn spawn(session: &str, surface: &str, live: &str) -> Action {
    Action::SpawnOwner { session: session.into(), surface: surface.into(), live_id: live.into(), track_liveness: false }
}

fn acquire(session: &str, surface: &str, live: &str, owner: OwnerChoice) -> Action {
    Action::TryAcquire { session: session.into(), surface: surface.into(), live_id: live.into(), cap: None, owner }
}

/// The tour, in order.
pub fn steps() -> Vec<Step> {
    let mut all = refusals();
    all.extend(dead_owners());
    all.extend(what_pruning_cannot_see());
    // The leaked owner's fix (steps 7-8) before the registry nobody can read (step 9).
    let unreadable = all.pop();
    all.extend(ending_a_live_owner());
    all.extend(unreadable);
    all
}

fn unwatching(session: &str, surface: &str, live: &str) -> Action {
    Action::SpawnUnwatchingOwner { session: session.into(), surface: surface.into(), live_id: live.into() }
}

/// Steps 7-8: a live owner nobody needs, freed the unsafe way and the safe way.
fn ending_a_live_owner() -> Vec<Step> {
    vec![
        Step {
            title: "7/9 Force-release alone leaves the writer running",
            why: "A hermes chat does not watch its lease. Force-releasing a live owner's lease (x, or `leasectl \
                  force-release --live`) takes the lease and leaves the process running, untold: the next owner of \
                  tour-7 is granted beside it, and two writers append to one transcript, the very thing the fence \
                  exists to stop.",
            scene: Some(Scene {
                actions: vec![unwatching("tour-7", "tui", "tab-7")],
                shows: "A process that does not watch its lease (as a hermes chat) holds tour-7: ● alive. Press t: \
                        its lease is force-released with --live, then a cli process asks for tour-7.",
            }),
            actions: vec![
                Action::ForceReleaseLive { session: "tour-7".into() },
                acquire("tour-7", "cli", "cli-7", OwnerChoice::New),
            ],
            expect: Expect::SecondWriter,
        },
        Step {
            title: "8/9 Stop ends the owner, then frees its slot",
            why: "Stop ends the process itself (S in the console, `leasectl stop` on the command line): SIGTERM \
                  through a pidfd that names that very process (a reused pid is never signalled), SIGKILL after a \
                  grace; only then is its lease gone, by its own release or removed as a dead owner's. The next owner of tour-8 is its only \
                  writer.",
            scene: Some(Scene {
                actions: vec![unwatching("tour-8", "tui", "tab-8")],
                shows: "Another process that does not watch its lease holds tour-8: ● alive. Press t: it is stopped, \
                        then a cli process asks for tour-8.",
            }),
            actions: vec![
                Action::Stop { session: "tour-8".into() },
                acquire("tour-8", "cli", "cli-8", OwnerChoice::New),
            ],
            expect: Expect::GrantedAfterStop,
        },
    ]
}

/// Steps 1-3: who may hold a session, and how many may run.
fn refusals() -> Vec<Step> {
    vec![
        Step {
            title: "1/9 Two owners of one session: SESSION_NOT_OWNED",
            why: "A tui owner holds tour-1; a desktop process asks for it too. Two owners of one session would each \
                  reason from a transcript without the other's in-flight turn and append replies that never saw \
                  each other, so the second is refused, with or without a cap.",
            scene: Some(Scene {
                actions: vec![spawn("tour-1", "tui", "tab-1")],
                shows: "A tui owner now holds tour-1: its lease is in the table, ● alive. Press t: a desktop \
                        process asks for tour-1.",
            }),
            actions: vec![acquire("tour-1", "desktop", "win-9", OwnerChoice::New)],
            expect: Expect::Refused(Reason::SessionNotOwned),
        },
        Step {
            title: "2/9 The same writer may re-acquire its own lease",
            why: "The owner of tour-1 asks again with the same pid and live id (a session whose record was rebuilt \
                  in place): that is re-entrancy, not a second writer, so its entry is replaced, not doubled. \
                  Another live id in the same process would still be a second writer.",
            scene: None,
            actions: vec![acquire("tour-1", "tui", "tab-1", OwnerChoice::Nth(0))],
            expect: Expect::GrantedReplacing,
        },
        Step {
            title: "3/9 Capacity is a different refusal: MAX_CONCURRENT_SESSIONS",
            why: "With max_concurrent_sessions: 2 and two live owners, a third session is refused for capacity. \
                  Clients retry a capacity refusal later; they never retry an ownership refusal the same way, \
                  so the two reasons must never be confused.",
            scene: Some(Scene {
                actions: vec![Action::SetCap(Some(2)), spawn("tour-2", "cli", "cli-1")],
                shows: "config.yaml now says max_concurrent_sessions: 2, and a cli owner holds tour-2: the header \
                        reads slots 2/2 FULL. Press t: a gateway asks for a third session, tour-3.",
            }),
            actions: vec![acquire("tour-3", "gateway", "gw-1", OwnerChoice::New)],
            expect: Expect::Refused(Reason::MaxConcurrentSessions),
        },
    ]
}

/// Steps 4-5: owners that are gone, though their entries stay.
fn dead_owners() -> Vec<Step> {
    vec![
        Step {
            title: "4/9 A dead owner must not hold a session hostage",
            why: "The tui owner of tour-1 is SIGKILLed, as a crash would. Its lease is still in the file, but the \
                  next acquire prunes it and a successor takes tour-1: the fence survives crashes.",
            scene: Some(Scene {
                actions: vec![Action::KillOwner { owner: OwnerChoice::Nth(0) }],
                shows: "The owner of tour-1 was SIGKILLed: its lease is still in the file, ✖ dead in the table (the \
                        header counts it). Press t: a desktop process asks for tour-1.",
            }),
            actions: vec![acquire("tour-1", "desktop", "win-2", OwnerChoice::New)],
            expect: Expect::GrantedAfterPrune,
        },
        Step {
            title: "5/9 A recycled pid is not the owner",
            why: "An entry names a pid that is alive, but that process started at another time: the number was \
                  handed to somebody else. Identity is (pid, start time), so the entry is dead and is pruned. \
                  The cap from step 3 is cleared first, so that only the recycled pid decides this step.",
            scene: Some(Scene {
                actions: vec![Action::SetCap(None), Action::FakeRecycled { session: "tour-5".into() }],
                shows: "The cap is cleared (config.yaml: no cap), and an entry for tour-5 names a live pid that \
                        started after the entry was written: ♻ recycled in the table. Press t: a cli process asks \
                        for tour-5.",
            }),
            actions: vec![acquire("tour-5", "cli", "cli-5", OwnerChoice::New)],
            expect: Expect::GrantedAfterPrune,
        },
    ]
}

/// Steps 6-7: a live owner nobody uses, and a registry nobody can read.
fn what_pruning_cannot_see() -> Vec<Step> {
    vec![
        Step {
            title: "6/9 A live owner nobody uses: LEAK?",
            why: "The cli owner of tour-2 is alive, but Hermes has just ended its session (state.db says \
                  tui_shutdown). By pid and start time the lease looks healthy and would hold tour-2 and a slot \
                  forever; leasectl reads state.db and marks it LEAK? with the reason (selected in the table; \
                  Enter shows it). Nothing is removed by itself: steps 7 and 8 show the two ways to free it.",
            scene: None,
            actions: vec![Action::EndSession { session: "tour-2".into(), hours_ago: 0 }],
            expect: Expect::LeakSuspect,
        },
        Step {
            title: "9/9 \"Cannot tell\" never becomes \"no owner\": SESSION_COORDINATION_UNAVAILABLE",
            why: "The registry is truncated. leasectl cannot prove tour-6 has no live owner, so it refuses and \
                  leaves the file exactly as it was. An operator repairs it with F in the console, or \
                  `leasectl doctor --repair`: both ask first, keep a backup and every valid entry.",
            scene: Some(Scene {
                actions: vec![Action::Corrupt(CorruptKind::Truncated)],
                shows: "The registry file is cut in half: the banner says it is invalid and the table keeps the \
                        last good reading. Press t: a cli process asks for tour-6.",
            }),
            actions: vec![acquire("tour-6", "cli", "cli-6", OwnerChoice::New)],
            expect: Expect::Refused(Reason::SessionCoordinationUnavailable),
        },
    ]
}
