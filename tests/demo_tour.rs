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
    leasectl::lease::owners::liveness::process_start_time(pid).is_some()
}

#[test]
fn the_tour_reaches_every_reason_and_both_prunes() {
    let mut pg = playground();
    let home = pg.sandbox.home().to_path_buf();
    let mut reached = Vec::new();
    for step in steps() {
        let mut last = None;
        let scene = step.scene.iter().flat_map(|s| s.actions.iter());
        for action in scene.chain(&step.actions) {
            let outcome = pg.run(action);
            assert!(!matches!(outcome.verdict, Verdict::Failed(_)), "{}: {outcome:?}", step.title);
            last = Some(outcome);
        }
        let last = last.expect("every step acts");
        match (step.expect, &last.verdict) {
            (Expect::Refused(want), Verdict::Refused { reason, message, advice, .. }) => {
                assert_eq!(*reason, want, "{}: {message}", step.title);
                assert!(!message.is_empty());
                // Every hint names the sandbox: pasted, it acts on the demo's registry.
                let said = format!("{message} {advice}");
                let hints: Vec<&str> =
                    said.split('`').skip(1).step_by(2).filter(|q| q.starts_with("leasectl")).collect();
                for hint in hints {
                    let words: Vec<&str> = hint.split(' ').collect();
                    let at = words.iter().position(|w| *w == "--home").map(|i| words[i + 1].trim_matches('\''));
                    assert_eq!(at.map(PathBuf::from), Some(home.clone()), "{}: `{hint}`", step.title);
                }
            }
            (Expect::GrantedAfterPrune, Verdict::Granted { pruned, .. }) => {
                assert!(*pruned >= 1, "{}: nothing was pruned", step.title)
            }
            (Expect::LeakSuspect, Verdict::Done(text)) => {
                assert!(text.starts_with("LEAK?: session ended 0s ago") && text.contains("still holds it"), "{text}")
            }
            (Expect::GrantedReplacing, Verdict::Granted { replaced, .. }) => {
                assert!(replaced.is_some(), "{}: not replaced", step.title)
            }
            (Expect::SecondWriter, Verdict::Granted { session, .. }) => {
                let running = pg.owners().iter().filter(|o| o.running && o.session == *session).count();
                assert_eq!(running, 2, "{}: the force-released owner runs beside the new one", step.title)
            }
            (Expect::GrantedAfterStop, Verdict::Granted { session, pruned, .. }) => {
                assert_eq!(*pruned, 0, "{}: the stop left nothing to prune", step.title);
                let running = pg.owners().iter().filter(|o| o.running && o.session == *session).count();
                assert_eq!(running, 1, "{}: the stopped owner is gone, one writer", step.title)
            }
            (want, got) => panic!("{}: expected {want:?}, got {got:?}", step.title),
        }
        reached.push(step.expect);
    }
    assert_eq!(reached.len(), 9);
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

/// On an operator's home that holds other owners' leases (`demo --home DIR --tour` on a
/// real-shaped home), the tour's steps would come out as the home decides, and it would
/// set a cap and corrupt that registry: it does not start, and says why; nothing changes.
#[test]
fn the_tour_does_not_start_on_a_home_with_other_owners_leases() {
    use leasectl::demo::state::{DemoDone, DemoJob};
    use leasectl::tui::event::Job;
    use leasectl::tui::extension::Runner;
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    std::fs::create_dir(&home).expect("home");
    std::fs::write(home.join("config.yaml"), "max_concurrent_sessions: 8\n").expect("config");
    let owner = std::process::Command::new("sleep").arg("30").spawn().expect("sleep");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_leasectl"))
        .arg("--home")
        .arg(&home)
        .args(["acquire", "THEIRS", "--owner-pid", &owner.id().to_string()])
        .output()
        .expect("acquire");
    assert!(out.status.success());
    let before = std::fs::read(home.join("runtime/active_sessions.json")).expect("registry");
    let mut pg = Playground::new(Sandbox::at(&home).expect("sandbox"), PathBuf::from(env!("CARGO_BIN_EXE_leasectl")));
    let first = leasectl::demo::tour::beats()[0];
    let done = Runner::run(&mut pg, &Job::new(DemoJob::Tour { beat: first, reset_first: false })).expect("an answer");
    let done = done.0.downcast::<DemoDone>().expect("demo's answer");
    assert!(done.tour.is_none(), "the tour did not start");
    match &done.outcomes[0].verdict {
        Verdict::Failed(why) => assert!(why.contains("holds 1 lease of other owners"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read(home.join("runtime/active_sessions.json")).expect("registry"), before);
    assert_eq!(std::fs::read_to_string(home.join("config.yaml")).expect("config"), "max_concurrent_sessions: 8\n");
    drop(pg);
    let mut owner = owner;
    let _ = owner.kill();
    let _ = owner.wait();
}

/// An owner the demo already runs, tried on a session another owner holds: the refusal
/// comes from the core in this process (not from a `hold` child given `--home`), and its
/// hints still name the sandbox.
#[test]
fn a_refusal_for_an_existing_owner_hints_at_the_sandbox() {
    use leasectl::demo::{Action, OwnerChoice};
    let mut pg = playground();
    let home = pg.sandbox.home().to_path_buf();
    let spawn = |session: &str| Action::SpawnOwner {
        session: session.into(),
        surface: "cli".into(),
        live_id: format!("live-{session}"),
        track_liveness: false,
    };
    for session in ["S-held", "S-other"] {
        let outcome = pg.run(&spawn(session));
        assert!(matches!(outcome.verdict, Verdict::Granted { .. }), "{outcome:?}");
    }
    // Its session ended in state.db: a leak suspect, whose force-release the advice gives.
    pg.run(&Action::EndSession { session: "S-held".into(), hours_ago: 0 });
    let outcome = pg.run(&Action::TryAcquire {
        session: "S-held".into(),
        surface: "cli".into(),
        live_id: "live-x".into(),
        cap: None,
        owner: OwnerChoice::Nth(1),
    });
    let Verdict::Refused { advice, .. } = &outcome.verdict else { panic!("{outcome:?}") };
    let hint = advice.split('`').nth(1).unwrap_or_default();
    assert!(hint.starts_with("leasectl --home "), "{advice}");
    assert!(hint.contains(&home.display().to_string()), "`{hint}` names {}", home.display());
}

/// The sandbox's state.db is written only when it is a file: a symlink planted there
/// (to a file outside) or a FIFO is refused and left alone, the target unchanged, and
/// nothing waits on the FIFO.
#[test]
fn a_symlink_or_fifo_planted_as_the_sandboxs_state_db_is_refused() {
    use leasectl::demo::Action;
    let dir = tempfile::tempdir().expect("tempdir");
    let outside = dir.path().join("outside.db");
    std::fs::write(&outside, b"not yours").expect("outside file");
    let home = dir.path().join("home");
    let mut pg = Playground::new(Sandbox::at(&home).expect("sandbox"), PathBuf::from(env!("CARGO_BIN_EXE_leasectl")));
    std::os::unix::fs::symlink(&outside, home.join("state.db")).expect("symlink");
    let out = pg.run(&Action::EndSession { session: "S".into(), hours_ago: 3 });
    assert!(matches!(&out.verdict, Verdict::Failed(why) if why.contains("not a file")), "{out:?}");
    assert_eq!(std::fs::read(&outside).expect("outside"), b"not yours");
    std::fs::remove_file(home.join("state.db")).expect("unplant");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        home.join("state.db"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
    let started = std::time::Instant::now();
    let out = pg.run(&Action::EndSession { session: "S".into(), hours_ago: 3 });
    assert!(matches!(&out.verdict, Verdict::Failed(why) if why.contains("not a file")), "{out:?}");
    let out = pg.run(&Action::Reset);
    assert!(matches!(&out.verdict, Verdict::Failed(why) if why.contains("not a file")), "{out:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "nothing waited on the FIFO");
}
