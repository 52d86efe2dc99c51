//! The guided tour, driven step by step against real owner processes: every
//! refusal reason and both prunes come out of the core with the expected codes.

use std::path::PathBuf;

use leasectl::demo::tour::{Expect, steps};
use leasectl::demo::{Playground, Sandbox, Verdict};

fn playground() -> Playground {
    let sandbox = Sandbox::create_temp().expect("sandbox");
    Playground::new(sandbox, PathBuf::from(env!("CARGO_BIN_EXE_leasectl")))
}

fn pid_running(pid: u64) -> bool {
    leasectl::lease::liveness::process_start_time(pid).is_some()
}

#[test]
fn the_tour_reaches_every_reason_and_both_prunes() {
    let mut pg = playground();
    let home = pg.sandbox.home().to_path_buf();
    let mut reached = Vec::new();
    for step in steps() {
        let mut last = None;
        for action in &step.actions {
            let outcome = pg.run(action);
            assert!(!matches!(outcome.verdict, Verdict::Failed(_)), "{}: {outcome:?}", step.title);
            last = Some(outcome);
        }
        let last = last.expect("every step acts");
        match (step.expect, &last.verdict) {
            (Expect::Refused(want), Verdict::Refused { reason, message, .. }) => {
                assert_eq!(*reason, want, "{}: {message}", step.title);
                assert!(!message.is_empty());
            }
            (Expect::GrantedAfterPrune, Verdict::Granted { pruned, .. }) => {
                assert!(*pruned >= 1, "{}: nothing was pruned", step.title)
            }
            (Expect::LeakSuspect, Verdict::Done(text)) => {
                assert!(text.starts_with("LEAK?: session ended 3h0") && text.contains("still holds it"), "{text}")
            }
            (Expect::GrantedReplacing, Verdict::Granted { replaced, .. }) => {
                assert!(replaced.is_some(), "{}: not replaced", step.title)
            }
            (want, got) => panic!("{}: expected {want:?}, got {got:?}", step.title),
        }
        reached.push(step.expect);
    }
    assert_eq!(reached.len(), 7);
    // Leaving the demo kills its owners and removes the sandbox it created.
    let pids: Vec<u64> = pg.owners().iter().filter(|o| o.running).map(|o| o.pid).collect();
    assert!(!pids.is_empty());
    drop(pg);
    assert!(!home.exists(), "sandbox removed");
    for pid in pids {
        assert!(!pid_running(pid), "owner {pid} still running");
    }
}

#[test]
fn a_home_passed_by_the_operator_is_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("mine");
    let sandbox = Sandbox::at(&home).expect("sandbox");
    let mut pg = Playground::new(sandbox, PathBuf::from(env!("CARGO_BIN_EXE_leasectl")));
    let out = pg.run(&leasectl::demo::Action::SpawnOwner {
        session: "S".into(),
        surface: "cli".into(),
        live_id: "l".into(),
        track_liveness: false,
    });
    let Verdict::Granted { pid, .. } = out.verdict else { panic!("{out:?}") };
    drop(pg);
    assert!(home.join("runtime").is_dir(), "the operator's home is not removed");
    assert!(!pid_running(pid), "but the owner is killed");
}
