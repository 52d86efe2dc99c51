//! `leasectl events` (issue 16): live changes, the recorder's journal, the metrics file.

use crate::common;

use std::fs;
use std::time::{Duration, Instant};

use common::process::{Home, Proc, Sleeper, str_of};
use serde_json::Value;

fn entry(id: &str, session: &str, pid: u64) -> String {
    crate::common::planted(id, session, pid).text()
}

/// Replace the registry as Hermes does: the whole file written beside it, then renamed.
fn hermes_write(home: &Home, entries: &[String]) {
    fs::create_dir_all(home.runtime()).expect("runtime/");
    let tmp = home.runtime().join(".active_sessions_test.tmp");
    fs::write(&tmp, format!("{{\"entries\": [{}]}}", entries.join(", "))).expect("write");
    fs::rename(&tmp, home.registry()).expect("rename");
}

fn event_of(line: &Value) -> (String, String) {
    (
        str_of(line, "event").to_owned(),
        line["lease"]["entry"]["session_id"]
            .as_str()
            .unwrap_or_else(|| line["detail"].as_str().unwrap_or(""))
            .to_owned(),
    )
}

#[test]
fn follow_shows_another_processs_write_within_200_ms() {
    let home = Home::new();
    let owner = Sleeper::new();
    hermes_write(&home, &[]);
    let events = home.spawn("events -f", &["events", "--follow", "-o", "json"]);
    assert_eq!(str_of(&events.json_line(), "event"), "following", "it says when the watch is on");
    let mut sessions: Vec<String> = Vec::new();
    let mut latencies = Vec::new();
    for round in 0..5 {
        sessions.push(entry(&format!("{round:04}0000000000000000000000000000"), &format!("S{round}"), owner.pid()));
        let written = Instant::now();
        hermes_write(&home, &sessions);
        let line = events.json_line();
        assert_eq!(event_of(&line), ("acquired".to_owned(), format!("S{round}")));
        latencies.push(written.elapsed());
    }
    latencies.sort();
    eprintln!("events --follow latency: {latencies:?}");
    assert!(latencies[2] < Duration::from_millis(200), "median {:?} ({latencies:?})", latencies[2]);
}

#[test]
fn the_recorder_keeps_a_journal_that_since_reads_back_with_who_force_released() {
    let home = Home::new();
    let owner = Sleeper::new();
    hermes_write(&home, &[]);
    let metrics = home.outside().join("leasectl.prom");
    let metrics_arg = metrics.to_str().expect("utf-8").to_owned();
    let mut recorder =
        home.spawn("recorder", &["events", "--follow", "--record", "--metrics-file", &metrics_arg, "-o", "json"]);
    assert_eq!(str_of(&recorder.json_line(), "event"), "following");
    hermes_write(&home, &[entry("a0000000000000000000000000000001", "S1", owner.pid())]);
    assert_eq!(event_of(&recorder.json_line()), ("acquired".into(), "S1".into()));
    home.run(&["force-release", "a0000000", "--live"]).expect_exit(0);
    let gone = recorder.json_line();
    assert_eq!(event_of(&gone), ("force-released".into(), "S1".into()));
    assert!(
        gone["detail"].as_str().is_some_and(|d| d.starts_with("by ") && d.contains("force-release a0000000")),
        "{gone}"
    );
    fs::write(home.path().join("config.yaml"), "max_concurrent_sessions: 3\n").expect("cap");
    hermes_write(&home, &[]);
    let cap = recorder.json_line();
    assert_eq!((str_of(&cap, "event"), str_of(&cap, "detail")), ("cap-changed", "none -> 3"));
    fs::write(home.registry(), "{ broken").expect("break it");
    assert_eq!(str_of(&recorder.json_line(), "event"), "registry-invalid");
    hermes_write(&home, &[]);
    assert_eq!(str_of(&recorder.json_line(), "event"), "registry-valid");
    common::process::wait_for("the metrics file", || {
        fs::read_to_string(&metrics).ok().filter(|t| t.ends_with("# EOF\n"))
    });
    recorder.signal(libc::SIGTERM);
    let _ = recorder.wait();
    // What happened while nobody watched: read back from the journal.
    let out = home.run(&["events", "--since", "1h", "-o", "json"]);
    out.expect_exit(0);
    let kinds: Vec<String> = out
        .stdout
        .lines()
        .map(|l| str_of(&serde_json::from_str::<Value>(l).expect("JSON"), "event").to_owned())
        .collect();
    assert_eq!(kinds, ["acquired", "force-released", "cap-changed", "registry-invalid", "registry-valid"]);
    let text = home.run(&["events", "--since", "1h"]);
    assert!(text.stdout.contains("force-released") && text.stdout.contains("— by "), "{text:?}");
    // Nothing recorded in another home: said, not an error.
    let empty = Home::new();
    let out = Proc::run("events (no journal)", empty.cmd(&["events"]));
    out.expect_exit(0);
    assert!(out.stderr.contains("no events recorded"), "{out:?}");
}

/// Events carry `conflict` in their lease objects, as ls does (two live owners of a session).
#[test]
fn event_leases_say_conflict_as_ls_does() {
    let home = Home::new();
    let (a, b) = (Sleeper::new(), Sleeper::new());
    home.run(&["acquire", "S", "--owner-pid", &a.pid_arg(), "--live-id", "a"]).expect_exit(0);
    let watch = home.spawn("ls -w", &["ls", "-w", "-o", "json"]);
    let first = watch.json_line();
    assert_eq!(first["lease"]["conflict"], false, "{first}");
    // A second live owner of S (written as a second writer would, past the fence).
    let mut entries = home.entries();
    let mut second = entries[0].clone();
    second["lease_id"] = "b".repeat(32).into();
    second["pid"] = b.pid().into();
    second["process_start_time"] =
        leasectl::lease::owners::liveness::process_start_time(b.pid()).expect("start").into();
    entries.push(second);
    home.write_registry(serde_json::json!({ "entries": entries }).to_string());
    let acquired = watch.json_line();
    assert_eq!((acquired["event"].as_str(), acquired["lease"]["conflict"].as_bool()), (Some("acquired"), Some(true)));
}

/// An owner that crashes and is pruned by its successor's acquire (one write: the dead
/// owner's lease out, the new one in) is `pruned`, not `released`: nobody released it,
/// and the recorder's journal keeps what the follower says. A write that only removes a
/// live owner's lease is not a prune.
#[test]
fn a_crashed_owner_pruned_by_its_successors_acquire_is_pruned_not_released() {
    let home = Home::new();
    hermes_write(&home, &[]);
    let events = home.spawn("events -f", &["events", "--follow", "-o", "json"]);
    assert_eq!(str_of(&events.json_line(), "event"), "following");
    let mut crashed = Sleeper::new();
    home.acquire_ok(&["S-crash", "--owner-pid", &crashed.pid().to_string()]);
    assert_eq!(event_of(&events.json_line()), ("acquired".to_owned(), "S-crash".to_owned()));
    // Within the follower's re-judge interval: it last saw the owner alive.
    crashed.kill();
    let successor = Sleeper::new();
    home.acquire_ok(&["S-crash", "--owner-pid", &successor.pid().to_string()]);
    // Under load the re-judge tick may see the owner die first ("owner-died"): then too
    // its lease is pruned.
    let mut said = Vec::new();
    while said.len() < 2 {
        let line = events.json_line();
        let event = event_of(&line);
        if event.0 == "pruned" {
            assert_eq!(line["lease"]["liveness"], "dead", "said with its owner as it is now: {line}");
        }
        if event.0 != "owner-died" {
            said.push(event);
        }
    }
    said.sort();
    assert_eq!(said, [("acquired".to_owned(), "S-crash".to_owned()), ("pruned".to_owned(), "S-crash".to_owned())]);
    // A write that only removes a live owner's lease is not a prune (here the audit file
    // says who force-released it).
    let id = home.lease_ids()[0].clone();
    home.run(&["force-release", &id, "--live"]).expect_exit(0);
    assert_eq!(event_of(&events.json_line()), ("force-released".to_owned(), "S-crash".to_owned()));
}

/// `events --since` over --host carries a host's newest 100,000 events: the older ones are
/// counted and said, with where to read them (the host itself), and the newest are shown.
#[test]
fn over_a_host_the_newest_100_000_events_travel_and_the_rest_are_said() {
    use std::io::Write as _;
    let home = Home::new();
    fs::create_dir_all(home.path().join("logs")).expect("logs/");
    let now = leasectl::lease::now();
    let mut journal =
        std::io::BufWriter::new(fs::File::create(home.path().join("logs/leasectl-events.jsonl")).expect("journal"));
    for i in 0..100_003u32 {
        let ts = now - 3000.0 + f64::from(i) * 0.02;
        writeln!(
            journal,
            "{{\"time\": \"t\", \"ts\": {ts}, \"event\": \"acquired\", \"profile\": \"root\", \"lease\": {{\"entry\": \
             {{\"lease_id\": \"{i:032x}\", \"session_id\": \"S{i}\", \"pid\": 1}}}}}}"
        )
        .expect("a line");
    }
    journal.flush().expect("flush");
    let mut cmd = common::process::leasectl(home.path(), &["events", "--since", "2h", "-o", "json"]);
    cmd.arg("--host").arg(format!("w=local:{}", home.path().display()));
    let out = Proc::run("events over --host", cmd);
    out.expect_exit(0);
    let first: Value = serde_json::from_str(out.stdout.lines().next().unwrap_or_default()).expect("json");
    assert_eq!(first["lease"]["entry"]["session_id"], "S3", "the newest travel: {first}");
    assert_eq!(out.stdout.lines().count(), 100_000);
    assert!(
        out.stderr.contains("w:root: 3 older events left out") && out.stderr.contains("read them on w itself"),
        "{}",
        out.stderr
    );
}

/// A journal and an audit file leasectl did not write at that size (a planted sparse
/// terabyte; leasectl rotates at 10 MiB) are read from their last 32 MiB only, said in a
/// warning naming each: `events --since` answers at once with the newest events (it was
/// still reading after 60 s). The fastest of three runs is what is held to a second, so
/// a busy machine does not decide it.
#[test]
fn a_sparse_terabyte_journal_is_read_from_its_tail_and_said() {
    use std::io::{Seek, SeekFrom, Write};
    let home = Home::new();
    let logs = home.path().join("logs");
    fs::create_dir_all(&logs).expect("logs");
    let now = leasectl::lease::now();
    let event = serde_json::json!({"ts": now - 60.0, "time": "t", "event": "acquired", "profile": "root",
        "lease": {"entry": {"lease_id": "ab", "session_id": "S-newest", "pid": 1}}});
    for name in ["leasectl-events.jsonl", "leasectl-audit.jsonl"] {
        let mut f = fs::File::create(logs.join(name)).expect("create");
        f.set_len(1 << 40).expect("a sparse terabyte");
        f.seek(SeekFrom::End(0)).expect("seek");
        if name == "leasectl-events.jsonl" {
            writeln!(f, "\n{event}").expect("the newest event");
        }
    }
    let mut fastest = Duration::MAX;
    for _ in 0..3 {
        let started = Instant::now();
        let out = home.run(&["events", "--since", "1h"]);
        fastest = fastest.min(started.elapsed());
        out.expect_exit(0);
        assert!(out.stdout.contains("S-newest"), "the newest event is read: {out:?}");
        for name in ["leasectl-events.jsonl", "leasectl-audit.jsonl"] {
            let said = format!("read only the last 32 MiB of {}", logs.join(name).display());
            assert!(out.stderr.contains(&said), "{name} is said: {out:?}");
        }
    }
    assert!(fastest < Duration::from_secs(1), "events --since over a sparse terabyte took {fastest:?}");
}

/// The read system calls `pid` has made so far (/proc/PID/io's syscr).
fn reads_of(pid: u32) -> u64 {
    let io = fs::read_to_string(format!("/proc/{pid}/io")).expect("/proc/PID/io of a child of ours");
    io.lines().find_map(|l| l.strip_prefix("syscr: ")).and_then(|n| n.trim().parse().ok()).expect("syscr")
}

/// An idle follower of many profiles reads no registry: only those the feed says changed
/// are read, and an owner's death (which changes no file) is judged from what was read.
/// Every registry read again every second took 62 % of a core at 20,000 profiles.
#[test]
fn an_idle_follower_of_many_profiles_reads_nothing_and_still_sees_an_owner_die() {
    const PROFILES: usize = 300;
    let home = Home::new();
    let mut owner = Sleeper::new();
    for i in 0..PROFILES {
        let runtime = home.path().join(format!("profiles/p{i:03}/runtime"));
        crate::common::make_profile(&runtime);
        let entries =
            if i == 7 { entry("0007beef000000000000000000000000", "S-dies", owner.pid()) } else { String::new() };
        fs::write(runtime.join("active_sessions.json"), format!("{{\"entries\": [{entries}]}}")).expect("registry");
    }
    let watch = home.spawn("ls -w", &["--all-profiles", "ls", "-w", "-o", "json"]);
    // One line for each registry: the root's and each empty profile's "following", and
    // p007's lease.
    for _ in 0..=PROFILES {
        watch.json_line();
    }
    // A second and a half for the first round's re-judging, then three idle seconds.
    std::thread::sleep(Duration::from_millis(1500));
    let before = reads_of(watch.pid());
    std::thread::sleep(Duration::from_secs(3));
    let reads = reads_of(watch.pid()) - before;
    assert!(reads < 30, "an idle follower of {PROFILES} profiles made {reads} read calls in 3 s");
    // The owner dies: no file changes, and the follower says so.
    owner.kill();
    let line = watch.json_line();
    assert_eq!(event_of(&line), ("owner-died".to_owned(), "S-dies".to_owned()), "{line}");
}

/// An idle follower of many registries that hold live owners' leases looks at none of
/// their files: only when an owner changed is its file looked at (a release still on
/// its way in the feed). Each looked at every second was most of an idle follower's work
/// at 20,000 profiles. Counted with strace; then an owner dies, and it is said.
#[test]
fn an_idle_follower_looks_at_no_registry_whose_owners_are_as_they_were() {
    const PROFILES: usize = 200;
    let home = Home::new();
    let (mut dies, lives) = (Sleeper::new(), Sleeper::new());
    for i in 0..PROFILES {
        let runtime = home.path().join(format!("profiles/p{i:03}/runtime"));
        crate::common::make_profile(&runtime);
        let (id, session, owner) = match i {
            7 => ("0007beef000000000000000000000000".to_owned(), "S-dies".to_owned(), &dies),
            _ => (format!("{i:04}cafe000000000000000000000000"), format!("S-{i}"), &lives),
        };
        let entries = entry(&id, &session, owner.pid());
        fs::write(runtime.join("active_sessions.json"), format!("{{\"entries\": [{entries}]}}")).expect("registry");
    }
    let traced = home.outside().join("strace.out");
    let mut cmd = std::process::Command::new("strace");
    cmd.args(["-f", "-qq", "-e", "trace=stat,lstat,newfstatat,statx", "-o"])
        .arg(&traced)
        .arg(common::process::BIN)
        .arg("--home")
        .arg(home.path())
        .args(["--all-profiles", "events", "-f", "-o", "json"])
        .env_remove("HERMES_HOME");
    let mut follower = Proc::spawn("strace events -f", cmd);
    // "following" for the root and for each profile, with its one lease.
    for _ in 0..=PROFILES {
        assert_eq!(str_of(&follower.json_line(), "event"), "following");
    }
    let looks = || {
        let text = fs::read_to_string(&traced).unwrap_or_default();
        text.lines().filter(|l| l.contains("active_sessions.json\"")).count()
    };
    // Two seconds for the first rounds, then three idle ones.
    std::thread::sleep(Duration::from_secs(2));
    let before = looks();
    std::thread::sleep(Duration::from_secs(3));
    let looked = looks() - before;
    assert!(looked < 20, "an idle follower of {PROFILES} registries looked at their files {looked} times in 3 s");
    dies.kill();
    let line = follower.json_line();
    assert_eq!(event_of(&line), ("owner-died".to_owned(), "S-dies".to_owned()), "{line}");
    follower.kill_and_reap();
}

/// An owner that releases its lease and ends at once (`run`) is said to have released
/// it, not to have died holding it: a follower that judges owners again between reads
/// looks at the file first. `sleep 1` puts the release about where the follower's next
/// re-judging falls (a second after the round that said the acquire), within the 20 ms
/// the feed gathers the release's change.
#[test]
fn an_owner_that_releases_and_ends_at_once_is_said_to_release() {
    let home = Home::new();
    hermes_write(&home, &[]);
    let events = home.spawn("events -f", &["events", "--follow", "-o", "json"]);
    assert_eq!(str_of(&events.json_line(), "event"), "following");
    for round in 0..3 {
        let session = format!("S-run-{round}");
        let out = home.run(&["run", &session, "--", "sleep", "1"]);
        assert!(out.status.success(), "{out:?}");
        let said: Vec<(String, String)> = (0..2).map(|_| event_of(&events.json_line())).collect();
        assert_eq!(
            said,
            vec![("acquired".to_owned(), session.clone()), ("released".to_owned(), session.clone())],
            "round {round}"
        );
    }
}

/// More registries written in one burst than the change feed names (64 paths a burst):
/// the follower reads them all, at once. Each waited 150 ms for a note of its
/// replacement that the feed had not kept (200 took 20 s).
#[test]
fn registries_written_in_one_burst_past_the_feeds_count_are_all_followed_at_once() {
    const PROFILES: usize = 200;
    let home = Home::new();
    let owner = Sleeper::new();
    let runtime = |i: usize| home.path().join(format!("profiles/p{i:03}/runtime"));
    for i in 0..PROFILES {
        crate::common::make_profile(runtime(i));
        fs::write(runtime(i).join("active_sessions.json"), "{\"entries\": []}").expect("an empty registry");
    }
    let events = home.spawn("events -f", &["--all-profiles", "events", "--follow", "-o", "json"]);
    for _ in 0..=PROFILES {
        assert_eq!(str_of(&events.json_line(), "event"), "following");
    }
    let written = Instant::now();
    for i in 0..PROFILES {
        let tmp = runtime(i).join(".active_sessions_burst.tmp");
        let id = format!("{i:032x}");
        fs::write(&tmp, format!("{{\"entries\": [{}]}}", entry(&id, &format!("burst-{i}"), owner.pid())))
            .expect("temp");
        fs::rename(&tmp, runtime(i).join("active_sessions.json")).expect("rename over the registry");
    }
    for _ in 0..PROFILES {
        assert_eq!(str_of(&events.json_line(), "event"), "acquired");
    }
    let took = written.elapsed();
    assert!(took < Duration::from_secs(5), "{PROFILES} registries written in one burst were all said after {took:?}");
}
