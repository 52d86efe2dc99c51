//! Issue 22: what leasectl says must be true at a person's pace, with pauses longer than
//! every interval an owner or the console polls at (the lease watch looks every 250 ms).

use crate::common;

use std::time::Duration;

use common::process::Home;

/// Longer than any poll interval of an owner (250 ms) or the console (1 s tick).
const PACE: Duration = Duration::from_millis(1500);

/// `hold` follows its own writer's entry: the same writer (same pid, start time and live
/// id) re-acquiring the session replaces the entry under a new id, which is not a lost
/// lease; `hold` keeps running and, on SIGTERM, releases the entry its writer holds now.
#[test]
fn hold_follows_its_writers_reacquired_entry_and_releases_it() {
    let home = Home::new();
    let mut hold = home.spawn("hold RE1", &["hold", "RE1", "--live-id", "tab-1", "--json"]);
    let grant = hold.json_line();
    let first = grant["lease_id"].as_str().expect("lease id").to_owned();
    let pid = hold.pid().to_string();
    let again = home.run(&["acquire", "RE1", "--owner-pid", &pid, "--live-id", "tab-1", "--json"]);
    again.expect_exit(0);
    assert_eq!(again.json()["replaced"], first.as_str(), "{again:?}");
    let second = again.json()["lease_id"].as_str().expect("lease id").to_owned();
    std::thread::sleep(PACE);
    assert!(hold.running(), "hold must not take its own writer's re-acquire for a lost lease");
    hold.signal(libc::SIGTERM);
    let out = hold.finish();
    assert_eq!(out.status.code(), Some(0), "hold ends as on any stop, not with 6 (lease lost): {out:?}");
    assert!(out.stderr.contains(&format!("released lease {second}")), "it names the lease it released: {out:?}");
    let left: Vec<String> =
        home.entries().into_iter().filter_map(|e| e["lease_id"].as_str().map(str::to_owned)).collect();
    assert!(!left.contains(&second) && left.is_empty(), "hold released its writer's entry: {left:?}");
}

/// A typo is not a lease: `release zzzz1234` (never a lease id) and a prefix that
/// matches nothing are exit 1 "no lease matches"; a whole lease id that is gone is the
/// owner's idempotent release (exit 0).
#[test]
fn release_of_a_typo_is_an_error_and_of_a_gone_lease_is_not() {
    let home = Home::new();
    let me = std::process::id().to_string();
    let out = home.run(&["acquire", "S", "--owner-pid", &me, "--json"]);
    let id = out.json()["lease_id"].as_str().expect("id").to_owned();
    for typo in ["zzzz1234", "beef", "0000000000000000000000000000000g"] {
        let out = home.run(&["release", typo, "--owner-pid", &me]);
        out.expect_exit(1);
        assert!(out.stderr.contains("no lease matches"), "{out:?}");
    }
    home.run(&["release", &id, "--owner-pid", &me]).expect_exit(0);
    let again = home.run(&["release", &id, "--owner-pid", &me]);
    again.expect_exit(0);
    assert!(again.stdout.contains("already gone"), "{again:?}");
}

/// A dry run writes nothing, anywhere: on a home without runtime/, prune --dry-run,
/// force-release --dry-run and doctor --repair without --yes create no file.
#[test]
fn dry_runs_create_nothing() {
    let home = Home::new();
    for args in [
        &["prune", "--dry-run"][..],
        &["force-release", "--session", "S", "--dry-run"],
        &["doctor", "--repair"],
        &["ls"],
        &["doctor"],
    ] {
        let _ = home.run(args);
        assert!(!home.runtime().exists(), "{args:?} created {}", home.runtime().display());
    }
    // With a registry but no lock file: still nothing new.
    std::fs::create_dir(home.runtime()).expect("runtime");
    std::fs::write(home.registry(), "{\"entries\": []}").expect("registry");
    for args in [&["prune", "--dry-run"][..], &["doctor", "--repair"]] {
        let _ = home.run(args);
        assert!(!home.lock_file().exists(), "{args:?} created the lock file");
    }
}

/// `run`'s stdout is CMD's: with --json the grant goes to stderr as one JSON line.
#[test]
fn run_json_leaves_stdout_to_cmd() {
    let home = Home::new();
    let out = home.run(&["run", "S", "--json", "--", "echo", "X"]);
    out.expect_exit(0);
    assert_eq!(out.stdout, "X\n", "{out:?}");
    let grant: serde_json::Value = serde_json::from_str(out.stderr.lines().next().unwrap_or_default()).expect("JSON");
    assert_eq!(grant["granted"], true);
}

/// `hold` says what it released on every stop, Ctrl-C (SIGINT) included.
#[test]
fn hold_says_what_it_released_on_ctrl_c() {
    let home = Home::new();
    for (sig, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM")] {
        let mut hold = home.spawn("hold", &["hold", "H", "--json"]);
        let id = hold.json_line()["lease_id"].as_str().expect("id").to_owned();
        hold.signal(sig);
        let out = hold.finish();
        out.expect_exit(0);
        assert!(out.stderr.contains(&format!("{name}: released lease {id}")), "{out:?}");
        assert!(home.entries().is_empty());
    }
}

/// After the registry is unreadable for a while and readable again, a lease held
/// throughout is not reported `acquired` a second time: the feed compares with the last
/// valid reading.
#[test]
fn a_lease_held_through_an_invalid_spell_is_not_acquired_again() {
    let home = Home::new();
    let owner = common::process::Sleeper::new();
    home.acquire_ok(&["HELD", "--owner-pid", &owner.pid_arg()]);
    let good = home.registry_bytes();
    let watch = home.spawn("ls --watch", &["ls", "--watch", "-o", "json"]);
    let event = |w: &common::process::Proc| w.json_line()["event"].as_str().unwrap_or_default().to_owned();
    assert_eq!(event(&watch), "present");
    std::fs::write(home.registry(), b"{ broken").expect("break it");
    assert_eq!(event(&watch), "registry-invalid");
    std::thread::sleep(PACE);
    std::fs::write(home.registry(), &good).expect("as it was");
    assert_eq!(event(&watch), "registry-valid");
    home.acquire_ok(&["NEW", "--owner-pid", &owner.pid_arg()]);
    let next = watch.json_line();
    assert_eq!(
        (next["event"].as_str(), next["lease"]["entry"]["session_id"].as_str()),
        (Some("acquired"), Some("NEW")),
        "the next event is the new lease, not HELD again: {next}"
    );
}

fn line_until(
    w: &common::process::Proc,
    what: &str,
    mut found: impl FnMut(&serde_json::Value) -> bool,
) -> serde_json::Value {
    for _ in 0..20 {
        let v = w.json_line();
        if found(&v) {
            return v;
        }
    }
    panic!("no line with {what} in 20 lines");
}

/// `--all-profiles events --follow --record --metrics-file` (the README's service) follows
/// a profile created after it started: its events are printed, recorded in its journal,
/// and it has metrics.
#[test]
fn the_recorder_follows_a_profile_created_after_it_started() {
    let home = Home::new();
    home.make_profile("a");
    let metrics = home.outside().join("leasectl.prom");
    let metrics_arg = metrics.to_string_lossy().into_owned();
    let recorder = home.spawn(
        "recorder",
        &["--all-profiles", "events", "--follow", "--record", "-o", "json", "--metrics-file", &metrics_arg],
    );
    line_until(&recorder, "following a", |v| v["event"] == "following" && v["profile"] == "a");
    std::thread::sleep(PACE);
    home.make_profile("b");
    std::thread::sleep(PACE);
    let owner = common::process::Sleeper::new();
    home.acquire_ok(&["--profile", "b", "LATE", "--owner-pid", &owner.pid_arg()]);
    line_until(&recorder, "LATE acquired in b", |v| {
        v["event"] == "acquired" && v["profile"] == "b" && v["lease"]["entry"]["session_id"] == "LATE"
    });
    let journal =
        std::fs::read_to_string(home.path().join("profiles/b/logs/leasectl-events.jsonl")).expect("b's journal");
    assert!(journal.contains("\"LATE\""), "{journal}");
    common::process::wait_for("b in the metrics", || {
        std::fs::read_to_string(&metrics).ok().filter(|t| t.contains("profile=\"b\""))
    });
}

/// The metrics file is rewritten on a timer even when no registry changes: an oldest
/// lease's age grows in it, as `leasectl metrics` by hand shows.
#[test]
fn the_metrics_file_is_refreshed_while_nothing_changes() {
    let home = Home::new();
    let owner = common::process::Sleeper::new();
    home.acquire_ok(&["AGING", "--owner-pid", &owner.pid_arg()]);
    let metrics = home.outside().join("leasectl.prom");
    let metrics_arg = metrics.to_string_lossy().into_owned();
    let _recorder =
        home.spawn("recorder", &["events", "--follow", "--metrics-file", &metrics_arg, "--metrics-every", "1s"]);
    let age = |text: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.starts_with("leasectl_oldest_lease_age_seconds{"))?;
        line.rsplit(' ').next()?.parse().ok()
    };
    let first =
        common::process::wait_for("the metrics file", || std::fs::read_to_string(&metrics).ok().and_then(|t| age(&t)));
    std::thread::sleep(Duration::from_millis(2500));
    let later = std::fs::read_to_string(&metrics).ok().and_then(|t| age(&t)).expect("still there");
    assert!(later >= first + 1.0, "the oldest lease aged from {first} to {later} in the file");
}

/// Two recorders on one home would record every event twice: the second is refused,
/// naming the first's pid.
#[test]
fn a_second_recorder_on_a_home_is_refused_naming_the_first() {
    let home = Home::new();
    let first = home.spawn("recorder 1", &["events", "--follow", "--record", "-o", "json"]);
    line_until(&first, "following", |v| v["event"] == "following");
    let second = home.run(&["events", "--follow", "--record"]);
    second.expect_exit(1);
    assert!(second.stderr.contains(&format!("pid {}", first.pid())) && second.stderr.contains("twice"), "{second:?}");
}

/// With no recorder running, `events --since 1h` shows the hour's force-releases and
/// prunes from the audit file, rather than "no events recorded here"; with a recorder
/// they are shown once.
#[test]
fn events_since_shows_the_audit_files_removals_when_nothing_was_recorded() {
    let home = Home::new();
    let mut owner = common::process::Sleeper::new();
    let live = home.acquire_ok(&["TAKEN", "--owner-pid", &owner.pid_arg()]);
    let mut dying = common::process::Sleeper::new();
    home.acquire_ok(&["DIED", "--owner-pid", &dying.pid_arg()]);
    dying.kill();
    home.run(&["force-release", &live, "--live"]).expect_exit(0);
    home.run(&["prune"]).expect_exit(0);
    owner.kill();
    let out = home.run(&["events", "--since", "1h", "-o", "json"]);
    out.expect_exit(0);
    assert!(!out.stderr.contains("no events recorded"), "{out:?}");
    let events: Vec<(String, String)> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON"))
        .map(|v| {
            (
                v["event"].as_str().unwrap_or_default().to_owned(),
                v["lease"]["entry"]["session_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(events, [("force-released".to_owned(), "TAKEN".to_owned()), ("pruned".to_owned(), "DIED".to_owned())]);
    assert!(out.stdout.contains("from the audit file"), "{out:?}");
}

/// A file gives its latest version only: 200 acquire/release cycles back to back are
/// faster than any reader. What the feed misses it says: a `gap` event with how many
/// versions were never seen, so acquired events plus skipped versions cover every cycle.
#[test]
fn the_feed_says_how_many_versions_it_did_not_see() {
    use std::io::BufRead;
    let home = Home::new();
    let mut child = std::process::Command::new(common::process::BIN)
        .arg("--home")
        .arg(home.path())
        .args(["events", "--follow", "-o", "json"])
        .env_remove("HERMES_HOME")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("events --follow");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(10)).expect("following");
    assert!(first.contains("following"), "{first}");
    let reg = leasectl::lease::Registry::new("root", home.path());
    let me = u64::from(std::process::id());
    for n in 0..200 {
        let mut metadata = serde_json::Map::new();
        metadata.insert("live_session_id".into(), format!("tab-{n}").into());
        let req = leasectl::lease::AcquireRequest {
            session_id: format!("S{n}"),
            surface: Some("cli".into()),
            metadata,
            owner_pid: me,
            cap: None,
            track_liveness: false,
            lock_timeout: Duration::from_secs(5),
        };
        let grant = leasectl::lease::file::acquire(&reg, &req).expect("granted");
        leasectl::lease::file::release(&reg, &grant.lease_id, Duration::from_secs(5)).expect("released");
    }
    let mut lines = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_millis(1500)) {
        lines.push(serde_json::from_str::<serde_json::Value>(&line).expect("JSON"));
    }
    let _ = child.kill();
    let _ = child.wait();
    let count = |kind: &str| lines.iter().filter(|v| v["event"] == kind).count();
    let skipped: usize =
        lines.iter().filter(|v| v["event"] == "gap").filter_map(|v| v["unseen"].as_u64()).map(|n| n as usize).sum();
    let (acquired, released) = (count("acquired"), count("released"));
    eprintln!(
        "{acquired} acquired, {released} released, {} gap event(s) for {skipped} unseen version(s)",
        count("gap")
    );
    if acquired < 200 {
        assert!(count("gap") > 0, "versions were missed and nothing said so");
    }
    assert!(acquired + skipped >= 200, "{acquired} acquired + {skipped} unseen < 200 cycles");
    assert!(released + skipped >= 200, "{released} released + {skipped} unseen < 200 cycles");
}
