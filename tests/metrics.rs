//! `leasectl metrics` (issue 16): the registries as OpenMetrics text, parsed by
//! Prometheus' own parser (prometheus_client) to prove it is valid.

use crate::common;

use std::fs;
use std::process::{Command, Stdio};

use common::process::{Home, Sleeper};

const DEAD: u64 = 4_000_000;

fn entry(id: &str, session: &str, pid: u64, started: f64) -> String {
    crate::common::planted(id, session, pid).at(started).text()
}

/// Every sample as `name{labels} value`, as the Prometheus parser read it.
fn parsed(text: &str) -> Vec<String> {
    let script = "import sys\n\
                  from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
                  for f in text_string_to_metric_families(sys.stdin.read()):\n\
                  \x20   assert f.type == 'gauge', f\n\
                  \x20   for s in f.samples:\n\
                  \x20       labels = ','.join(f'{k}={v}' for k, v in sorted(s.labels.items()))\n\
                  \x20       print(f'{s.name}{{{labels}}} {s.value}')\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("write");
    let out = child.wait_with_output().expect("parser");
    assert!(out.status.success(), "the Prometheus parser refused it: {}\n{text}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

#[test]
fn metrics_are_valid_openmetrics_with_the_registries_numbers() {
    let home = Home::new();
    let (a, b) = (Sleeper::new(), Sleeper::new());
    fs::write(home.path().join("config.yaml"), "max_concurrent_sessions: 1\n").expect("config");
    let now = leasectl::lease::now();
    home.write_registry(format!(
        "{{\"entries\": [{}, {}, {}]}}",
        entry("aaaa0000000000000000000000000001", "S1", a.pid(), now - 600.0),
        entry("bbbb0000000000000000000000000002", "S1", b.pid(), now - 60.0),
        entry("dddd0000000000000000000000000003", "S2", DEAD, now - 7200.0),
    ));
    // A profile with a broken registry with a "hostile" name for a label.
    let odd = home.path().join("profiles").join("we\"ird");
    fs::create_dir_all(odd.join("runtime")).expect("profile");
    fs::write(odd.join("runtime/active_sessions.json"), "{ not json").expect("broken");
    fs::write(home.lock_file(), "").expect("lock file");
    let out = home.run(&["--all-profiles", "metrics"]);
    out.expect_exit(0);
    let samples = parsed(&out.stdout);
    let has = |s: &str| samples.iter().any(|x| x == s);
    assert!(has("leasectl_leases{liveness=alive,profile=root} 2"), "{samples:?}");
    assert!(has("leasectl_leases{liveness=dead,profile=root} 1"), "{samples:?}");
    assert!(has("leasectl_live_leases{profile=root} 2"));
    assert!(has("leasectl_cap{profile=root} 1"));
    assert!(has("leasectl_conflicts{profile=root} 1"));
    assert!(has("leasectl_registry_valid{profile=root} 1"));
    assert!(has("leasectl_registry_valid{profile=we\"ird} 0"), "{samples:?}");
    assert!(has("leasectl_lock_held{profile=root} 0"));
    let oldest =
        samples.iter().find(|s| s.starts_with("leasectl_oldest_lease_age_seconds{profile=root}")).expect("oldest");
    let age: f64 = oldest.rsplit(' ').next().and_then(|v| v.parse().ok()).expect("a number");
    assert!((7200.0..7300.0).contains(&age), "{oldest}");
    assert!(out.stdout.ends_with("# EOF\n"));
}

/// 120 profiles, each with a lock file and an empty registry, and p007's lock held by
/// flock(1): the holder is returned (dropped, it ends).
fn profiles_with_p007s_lock_held(home: &Home) -> common::process::Proc {
    use std::os::unix::process::CommandExt as _;
    for i in 0..120 {
        let runtime = home.make_profile(&format!("p{i:03}")).join("runtime");
        fs::create_dir_all(&runtime).expect("runtime");
        fs::write(runtime.join("active_sessions.lock"), "").expect("lock file");
        fs::write(runtime.join("active_sessions.json"), "{\"entries\": []}").expect("registry");
    }
    let held = home.path().join("profiles/p007/runtime/active_sessions.lock");
    let mut cmd = Command::new("flock");
    cmd.arg(&held).args(["sleep", "60"]).process_group(0);
    let mut flock = common::process::Proc::spawn("flock LOCK sleep 60", cmd);
    flock.group = true; // flock forks sleep, which inherits the locked descriptor: kill both
    common::process::wait_for("flock to hold p007's lock", || {
        let f = fs::OpenOptions::new().append(true).open(&held).expect("open the lock file");
        matches!(f.try_lock(), Err(std::fs::TryLockError::WouldBlock)).then_some(())
    });
    flock
}

/// `events -f --all-profiles --metrics-every EVERY --metrics-file` over `home`, under
/// strace tracing `syscalls`; with the metrics file's path and strace's output's.
fn traced_follower(
    home: &Home,
    syscalls: &str,
    every: &str,
) -> (common::process::Proc, std::path::PathBuf, std::path::PathBuf) {
    let metrics = home.outside().join("leasectl.prom");
    let traced = home.outside().join("strace.out");
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-e", &format!("trace={syscalls}"), "-o"])
        .arg(&traced)
        .arg(common::process::BIN)
        .arg("--home")
        .arg(home.path())
        .args(["--all-profiles", "events", "-f", "--metrics-every", every, "--metrics-file"])
        .arg(&metrics)
        .env_remove("HERMES_HOME");
    (common::process::Proc::spawn("strace events -f --metrics-file", cmd), metrics, traced)
}

/// The lock wait is measured by taking the lock only where the kernel lists a flock held
/// on it (/proc/locks, read once): over many profiles, taking each one's lock was most of
/// an idle `events -f --metrics-file`'s work. Counted with strace: one lock file opened,
/// the one held; every other profile still reports its lock, free.
#[test]
fn metrics_take_only_the_locks_someone_holds() {
    use common::process::BIN;
    let home = Home::new();
    let profiles: Vec<String> = (0..120).map(|i| format!("p{i:03}")).collect();
    let mut flock = profiles_with_p007s_lock_held(&home);
    let calls = home.outside().join("strace.out");
    let out = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=open,openat", "-o"])
        .arg(&calls)
        .arg(BIN)
        .arg("--home")
        .arg(home.path())
        .args(["--all-profiles", "metrics"])
        .env_remove("HERMES_HOME")
        .stdin(Stdio::null())
        .output()
        .expect("strace leasectl metrics");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let traced = fs::read_to_string(&calls).expect("strace's output");
    let opened: Vec<&str> = traced.lines().filter(|l| l.contains("\"active_sessions.lock\"")).collect();
    assert_eq!(opened.len(), 1, "lock files opened, where only p007's lock is held:\n{}", opened.join("\n"));
    let text = String::from_utf8_lossy(&out.stdout);
    let samples = parsed(&text);
    let has = |s: &str| samples.iter().any(|x| x == s);
    let of =
        |name: &str| samples.iter().filter(|s| s.contains(&format!("profile={name}}}"))).cloned().collect::<Vec<_>>();
    assert!(has("leasectl_lock_held{profile=p007} 1"), "{:?}", of("p007"));
    let waited = samples.iter().find(|s| s.starts_with("leasectl_lock_wait_seconds{profile=p007}")).expect("p007");
    let waited: f64 = waited.rsplit(' ').next().and_then(|v| v.parse().ok()).expect("a number");
    assert!(waited >= 0.9, "p007's held lock was waited for {waited} s");
    for name in profiles.iter().filter(|p| *p != "p007") {
        assert!(has(&format!("leasectl_lock_held{{profile={name}}} 0")), "{:?}", of(name));
        assert!(has(&format!("leasectl_lock_wait_seconds{{profile={name}}} 0")), "{:?}", of(name));
    }
    flock.kill_and_reap();
}

/// A follower keeps its metrics file current without reading every home's config.yaml
/// and state.db at each write: a home's are read again when one of its files changed or
/// its live sessions did. At 20,000 profiles each write read both for every home through
/// root's link checks (a second of CPU), and with a change a second a core stayed busy.
/// Counted with strace over three writes; then one home's state.db says its session
/// ended, and the next write counts the leak.
#[test]
fn the_metrics_file_reads_again_only_what_changed() {
    use common::process::wait_for;
    const PROFILES: usize = 60;
    let home = Home::new();
    let owner = Sleeper::new();
    let now = leasectl::lease::now();
    for i in 0..PROFILES {
        let profile = home.make_profile(&format!("p{i:02}"));
        crate::common::make_profile(profile.join("runtime"));
        let lease = entry(&format!("{i:04}beef000000000000000000000000"), &format!("S-{i}"), owner.pid(), now - 60.0);
        fs::write(profile.join("runtime/active_sessions.json"), format!("{{\"entries\": [{lease}]}}"))
            .expect("registry");
        fs::write(profile.join("config.yaml"), "max_concurrent_sessions: 5\n").expect("config");
        common::state_db(&profile, &[(&format!("S-{i}"), None)]);
    }
    let (mut follower, metrics, traced) = traced_follower(&home, "open,openat", "1s");
    let written = || fs::read_to_string(&metrics).ok().filter(|t| t.ends_with("# EOF\n"));
    wait_for("the first metrics file", written);
    let opened = |name: &str| {
        let text = fs::read_to_string(&traced).unwrap_or_default();
        text.lines().filter(|l| l.contains(&format!("{name}\""))).count()
    };
    // Files changed in the last two seconds are read again at the next write (a change in
    // the same timestamp tick would not show): these were all just made.
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let before = (opened("config.yaml"), opened("state.db"));
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let (configs, dbs) = (opened("config.yaml") - before.0, opened("state.db") - before.1);
    assert!(configs < 10 && dbs < 10, "over three writes: {configs} config.yaml and {dbs} state.db opened");
    let suspects =
        |text: &str| text.lines().find(|l| l.starts_with("leasectl_leak_suspects{profile=\"p07\"}")).map(str::to_owned);
    assert_eq!(written().and_then(|t| suspects(&t)).as_deref(), Some("leasectl_leak_suspects{profile=\"p07\"} 0"));
    let db = rusqlite::Connection::open(home.path().join("profiles/p07/state.db")).expect("p07's state.db");
    db.execute("UPDATE sessions SET ended_at = ?1, end_reason = 'cli_close' WHERE id = 'S-7'", [now - 30.0])
        .expect("end S-7");
    drop(db);
    wait_for("p07's ended session counted as a leak", || {
        written().and_then(|t| suspects(&t)).filter(|l| l.ends_with(" 1"))
    });
    follower.kill_and_reap();
}

/// README and `--help`: after a change the metrics file is rewritten, at most once a second.
/// A registry changing ten times a second for three seconds gets a few rewrites, not thirty,
/// and the file says the last change within a second and a half of it.
#[test]
fn after_changes_the_metrics_file_is_rewritten_at_most_once_a_second_and_says_the_last() {
    use common::process::wait_for;
    let home = Home::new();
    let owner = Sleeper::new();
    let now = leasectl::lease::now();
    let runtime = home.make_profile("p1").join("runtime");
    fs::create_dir_all(&runtime).expect("runtime");
    let leases = |n: usize| {
        let all: Vec<String> = (0..n)
            .map(|i| entry(&format!("{i:04}cafe000000000000000000000000"), &format!("S-{i}"), owner.pid(), now))
            .collect();
        format!("{{\"entries\": [{}]}}", all.join(", "))
    };
    fs::write(runtime.join("active_sessions.json"), leases(1)).expect("registry");
    let (mut follower, metrics, traced) = traced_follower(&home, "rename,renameat,renameat2", "60s");
    let written = || fs::read_to_string(&metrics).ok().filter(|t| t.ends_with("# EOF\n"));
    let live =
        |text: &str| text.lines().find(|l| l.starts_with("leasectl_live_leases{profile=\"p1\"}")).map(str::to_owned);
    wait_for("the first metrics file", || written().and_then(|t| live(&t)).filter(|l| l.ends_with(" 1")));
    // Past the first write's "after a change" second.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let rewrites = || {
        let text = fs::read_to_string(&traced).unwrap_or_default();
        text.lines().filter(|l| l.contains("rename") && l.contains("leasectl.prom\"")).count()
    };
    let before = rewrites();
    let started = std::time::Instant::now();
    for n in 2..=31 {
        let tmp = runtime.join(".active_sessions_t.tmp");
        fs::write(&tmp, leases(n)).expect("the temp file");
        fs::rename(&tmp, runtime.join("active_sessions.json")).expect("rename");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let churned = started.elapsed();
    let wanted = " 31";
    let said = std::time::Instant::now();
    wait_for("the last change in the metrics file", || {
        written().and_then(|t| live(&t)).filter(|l| l.ends_with(wanted))
    });
    let took = said.elapsed();
    let during = rewrites() - before;
    follower.kill_and_reap();
    let most = churned.as_secs() as usize + 2;
    assert!(during >= 2, "30 changes over {churned:?}: the metrics file was rewritten {during} times");
    assert!(during <= most, "30 changes over {churned:?}: rewritten {during} times, more than once a second");
    assert!(took < std::time::Duration::from_millis(1500), "the last change took {took:?} to reach the file");
}

/// A follower's metrics file does not look at every profile's lock file at each write:
/// a lock file nobody holds is free, and whether one is there changes only with a change
/// the follower reads (at 20,000 profiles those looks were a third of its work with a
/// change a second). Counted with strace over three writes; then a profile made with
/// only a lock file, and a lock file removed, are both in the next writes.
#[test]
fn a_followers_metrics_file_looks_at_the_lock_files_only_of_what_changed() {
    use common::process::wait_for;
    let home = Home::new();
    let mut flock = profiles_with_p007s_lock_held(&home);
    let (mut follower, metrics, traced) = traced_follower(&home, "stat,lstat,newfstatat,statx,open,openat", "1s");
    let written = || fs::read_to_string(&metrics).ok().filter(|t| t.ends_with("# EOF\n"));
    let sample = |text: &str, name: &str| text.lines().find(|l| l.starts_with(name)).map(str::to_owned);
    wait_for("the first metrics file", written);
    let looks = || {
        let text = fs::read_to_string(&traced).unwrap_or_default();
        text.lines().filter(|l| l.contains("active_sessions.lock\"")).count()
    };
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let before = looks();
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let during = looks() - before;
    assert!(during < 40, "over three writes, lock files were looked at {during} times (120 profiles, one held)");
    let text = written().expect("the metrics file");
    assert_eq!(
        sample(&text, "leasectl_lock_held{profile=\"p007\"}").as_deref(),
        Some("leasectl_lock_held{profile=\"p007\"} 1")
    );
    assert_eq!(
        sample(&text, "leasectl_lock_held{profile=\"p008\"}").as_deref(),
        Some("leasectl_lock_held{profile=\"p008\"} 0")
    );
    // A profile made with only its lock file (a refused first acquire leaves one), and a
    // lock file removed by hand: the writes after say so.
    let made = home.make_profile("p200").join("runtime");
    fs::create_dir_all(&made).expect("runtime");
    fs::write(made.join("active_sessions.lock"), "").expect("lock file");
    fs::remove_file(home.path().join("profiles/p010/runtime/active_sessions.lock")).expect("remove p010's lock file");
    wait_for("p200's lock in the metrics file, p010's gone", || {
        let text = written()?;
        let p200 = sample(&text, "leasectl_lock_held{profile=\"p200\"}");
        let p010 = sample(&text, "leasectl_lock_held{profile=\"p010\"}");
        (p200.as_deref() == Some("leasectl_lock_held{profile=\"p200\"} 0") && p010.is_none()).then_some(())
    });
    follower.kill_and_reap();
    flock.kill_and_reap();
}
