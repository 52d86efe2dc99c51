//! `--host` against a real sshd the test starts (issue 27): several homes behind it are
//! several hosts; the remote's leasectl is this build, reached through the operator's
//! own ssh with the test's key and known host key only.

use crate::common;

use std::fs;
use std::path::Path;

use common::process::{Home, Out, Proc, Sleeper, wait_for};
use common::sshd::Sshd;
use serde_json::Value;

fn run(sshd: &Sshd, args: &[&str]) -> Out {
    Proc::run(&common::process::label(args), sshd.leasectl(args))
}

fn audit_lines(home: &Path) -> Vec<Value> {
    let text = fs::read_to_string(home.join("logs/leasectl-audit.jsonl")).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect()
}

/// Two homes behind one sshd, listed together: each lease under its host, the owner
/// named as the remote sees it, in the table, tsv and JSON.
#[test]
fn ls_lists_every_host_with_its_host_named() {
    let sshd = Sshd::start();
    let (a, b) = (Home::new(), Home::new());
    b.make_profile("work");
    let owner = Sleeper::new();
    a.acquire_ok(&["S-a", "--surface", "cli", "--owner-pid", &owner.pid_arg()]);
    b.acquire_ok(&["S-b", "--surface", "gateway", "--owner-pid", &owner.pid_arg()]);
    let (ha, hb) = (sshd.spec("gw1", a.path()), sshd.spec("gw2", b.path()));
    let out = run(&sshd, &["--host", &ha, "--host", &hb, "--all-profiles", "ls", "--json"]);
    out.expect_exit(0);
    let v = out.json();
    let regs = v["registries"].as_array().expect("registries");
    let places: Vec<(String, String)> = regs
        .iter()
        .map(|r| (r["host"].as_str().unwrap_or("?").into(), r["profile"].as_str().unwrap_or("?").into()))
        .collect();
    assert_eq!(
        places,
        [("gw1".into(), "root".into()), ("gw2".into(), "root".into()), ("gw2".into(), "work".into())],
        "{out:?}"
    );
    assert_eq!(regs[0]["leases"][0]["entry"]["session_id"], "S-a");
    assert_eq!(regs[1]["leases"][0]["entry"]["session_id"], "S-b");
    assert_eq!(regs[1]["leases"][0]["liveness"], "alive");
    assert_eq!(regs[1]["leases"][0]["owner"]["name"], "sleep", "the owner as the remote names it");

    let out = run(&sshd, &["--host", &ha, "--host", &hb, "ls", "-o", "tsv"]);
    out.expect_exit(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].starts_with("HOST\tPROFILE\tLEASE"), "{out:?}");
    assert!(lines.iter().any(|l| l.starts_with("gw1\troot\t") && l.contains("\tS-a\t")), "{out:?}");
    assert!(lines.iter().any(|l| l.starts_with("gw2\troot\t") && l.contains("\tS-b\t")), "{out:?}");

    // A profile's path names that profile, as --home does here.
    let work = sshd.spec("gw3", &b.path().join("profiles/work"));
    let out = run(&sshd, &["--host", &work, "ls", "--json"]);
    out.expect_exit(0);
    let regs = out.json()["registries"].as_array().cloned().unwrap_or_default();
    assert_eq!(regs.len(), 1, "{out:?}");
    assert_eq!((regs[0]["host"].as_str(), regs[0]["profile"].as_str()), (Some("gw3"), Some("work")), "{out:?}");

    let out = run(&sshd, &["--host", &ha, "ls"]);
    out.expect_exit(0);
    assert!(out.stdout.starts_with("gw1:root  ssh://"), "{out:?}");
    assert!(out.stdout.lines().nth(1).is_some_and(|h| h.trim_start().starts_with("HOST  LEASE")), "{out:?}");
    assert!(out.stdout.lines().nth(2).is_some_and(|r| r.trim_start().starts_with("gw1  ")), "{out:?}");
    assert!(out.stdout.contains("S-a") && out.stdout.contains("sleep"), "{out:?}");
}

/// force-release and prune act through the remote's own leasectl, with its guards, and
/// are recorded in the remote home's audit file with the operator and the SSH connection.
#[test]
fn force_release_and_prune_keep_their_guards_and_are_audited_on_the_remote() {
    let sshd = Sshd::start();
    let home = Home::new();
    let mut dead = Sleeper::new();
    let live = Sleeper::new();
    home.acquire_ok(&["S-dead", "--owner-pid", &dead.pid_arg()]);
    let live_id = home.acquire_ok(&["S-live", "--owner-pid", &live.pid_arg()]);
    dead.kill();
    let h = sshd.spec("gw1", home.path());

    let plan = run(&sshd, &["--host", &h, "prune", "--dry-run"]);
    plan.expect_exit(0);
    assert!(plan.stdout.contains("S-dead") && !plan.stdout.contains("S-live"), "{plan:?}");
    assert!(
        plan.stdout.contains("ssh://") && plan.stdout.contains("would remove"),
        "the plan names the host: {plan:?}"
    );
    assert_eq!(home.entries().len(), 2, "a dry run changes nothing");

    let out = run(&sshd, &["--host", &h, "prune", "--json"]);
    out.expect_exit(0);
    let left: Vec<Value> = home.entries();
    assert_eq!(left.len(), 1, "{out:?}");
    assert_eq!(left[0]["session_id"], "S-live");

    // A live owner's lease needs --live, there as here.
    let refused = run(&sshd, &["--host", &h, "force-release", "--session", "S-live"]);
    assert_ne!(refused.status.code(), Some(0), "{refused:?}");
    assert!(refused.stderr.contains("live owner") && refused.stderr.contains("--live"), "{refused:?}");
    assert_eq!(home.entries().len(), 1);
    let out = run(&sshd, &["--host", &h, "force-release", &live_id[..8], "--live"]);
    out.expect_exit(0);
    assert!(home.entries().is_empty(), "{out:?}");

    let records = audit_lines(home.path());
    let actions: Vec<&str> = records.iter().map(|r| r["action"].as_str().unwrap_or("?")).collect();
    assert_eq!(actions, ["prune", "force-release"], "{records:?}");
    for r in &records {
        let command = r["command"].as_str().unwrap_or_default();
        assert!(command.contains("over --host") && command.contains("--host gw1=ssh://"), "{r}");
        let connection = r["ssh_connection"].as_str().unwrap_or_default();
        assert!(connection.starts_with("127.0.0.1 ") && connection.ends_with(&format!(" {}", sshd.port)), "{r}");
        let operator = r["operator"].as_str().unwrap_or_default();
        assert!(operator.starts_with(&format!("{}@", sshd.user)) && operator.contains("(pid "), "passed along: {r}");
        assert_eq!(r["user"], sshd.user.as_str(), "the remote user: {r}");
    }
    assert_eq!(records[1]["live_owner_overridden"], true);
}

/// A closed port, a host without leasectl, an older leasectl and another protocol are
/// each named with why, and hold up no other host.
#[test]
fn hosts_that_cannot_serve_are_named_and_block_no_other() {
    let sshd = Sshd::start();
    let home = Home::new();
    let owner = Sleeper::new();
    home.acquire_ok(&["S1", "--owner-pid", &owner.pid_arg()]);
    let good = sshd.spec("good", home.path());
    let closed = sshd.closed_spec();
    let out = run(&sshd, &["--host", &closed, "--host", &good, "ls", "-o", "tsv"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.contains("good\troot\t") && out.stdout.contains("\tS1\t"), "the other host answers: {out:?}");
    assert!(out.stderr.contains("host closed is unreachable") && out.stderr.contains("Connection refused"), "{out:?}");
    // The table: the host that answered listed, the other's cap not claimed.
    let out = run(&sshd, &["--host", &closed, "--host", &good, "ls"]);
    let closed_line = out.stdout.lines().find(|l| l.starts_with("closed:root")).unwrap_or_default();
    assert!(closed_line.ends_with("cap unknown"), "{out:?}");

    let dir = sshd.dir();
    let answer_as = |name: &str, script: &str| -> Out {
        let path = dir.join(name);
        fs::write(&path, format!("#!/bin/sh\n{script}\n")).expect("script");
        fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        let mut cmd = sshd.leasectl(&["--host", &good, "ls"]);
        cmd.env("LEASECTL_REMOTE_COMMAND", &path);
        Proc::run(name, cmd)
    };
    let missing = {
        let mut cmd = sshd.leasectl(&["--host", &good, "ls"]);
        cmd.env("LEASECTL_REMOTE_COMMAND", "/nonexistent/leasectl");
        Proc::run("missing", cmd)
    };
    assert!(missing.stdout.contains("not on the remote's PATH"), "{missing:?}");
    let old = answer_as("old", "echo \"error: unrecognized subcommand 'serve'\" >&2; exit 2");
    assert!(old.stdout.contains("has no `serve --stdio` (older than this one)"), "{old:?}");
    let other =
        answer_as("other", r#"echo '{"hello":{"leasectl":"9.0.0","protocol":99,"host":"h","user":"u"}}'; sleep 5"#);
    assert!(
        other.stdout.contains("leasectl 9.0.0 (protocol 99)") && other.stdout.contains("(protocol 1)"),
        "both versions named: {other:?}"
    );
    assert!(other.status.code() == Some(1), "{other:?}");
    assert!(other.stdout.contains("host good answered: it runs") && !other.stdout.contains("unreachable"), "{other:?}");

    // A home the host does not have: it answered, and says so; "unreachable" was false.
    let nohome = sshd.spec("nohome", &dir.join("no-such-home"));
    let out = run(&sshd, &["--host", &nohome, "--host", &good, "ls", "-o", "tsv"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.contains("good\troot\t"), "the other host answers: {out:?}");
    let said = format!("host nohome answered: the Hermes home {}", dir.join("no-such-home").display());
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(text.contains(&said) && text.contains("does not exist"), "{out:?}");
    assert!(!text.contains("unreachable"), "{out:?}");
}

/// Session ids and a home path full of shell syntax are data on the remote, never code.
#[test]
fn hostile_ids_and_paths_never_reach_a_shell() {
    let sshd = Sshd::start();
    let outer = tempfile::tempdir().expect("dir");
    let marker = outer.path().join("pwned");
    let home_path = outer.path().join(format!("home $(touch {m}) `touch {m}`; touch {m} 'q\"", m = marker.display()));
    fs::create_dir_all(&home_path).expect("hostile home");
    let owner = Sleeper::new();
    let hostile = [
        format!("s; touch {}", marker.display()),
        format!("$(touch {})", marker.display()),
        format!("a'b\"c `touch {}`", marker.display()),
    ];
    for s in &hostile {
        let out = Proc::run(
            "acquire",
            common::process::leasectl(&home_path, &["acquire", s, "--owner-pid", &owner.pid_arg()]),
        );
        out.expect_exit(0);
    }
    let h = sshd.spec("gw1", &home_path);
    let out = run(&sshd, &["--host", &h, "ls", "--json"]);
    out.expect_exit(0);
    let sessions: Vec<String> = out.json()["registries"][0]["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .map(|l| l["entry"]["session_id"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(sessions, hostile, "{out:?}");
    for s in &hostile {
        let out = run(&sshd, &["--host", &h, "force-release", "--session", s, "--live"]);
        out.expect_exit(0);
    }
    let out = run(&sshd, &["--host", &h, "ls", "--json"]);
    assert_eq!(out.json()["registries"][0]["leases"].as_array().map(Vec::len), Some(0), "{out:?}");
    assert!(!marker.exists(), "a shell ran something it was sent as data");
}

/// `events --follow` over --host: a change on the remote home is a line naming the host.
#[test]
fn events_follow_names_the_host_on_every_line() {
    let sshd = Sshd::start();
    let home = Home::new();
    let h = sshd.spec("gw1", home.path());
    let feed = Proc::spawn("events -f", sshd.leasectl(&["--host", &h, "events", "--follow", "-o", "json"]));
    let first: Value = serde_json::from_str(&feed.line()).expect("json");
    assert_eq!((first["event"].as_str(), first["host"].as_str()), (Some("following"), Some("gw1")), "{first}");
    let owner = Sleeper::new();
    home.acquire_ok(&["S-new", "--owner-pid", &owner.pid_arg()]);
    let line = wait_for("the acquired event", || {
        let v: Value = serde_json::from_str(&feed.line()).ok()?;
        (v["event"] == "acquired").then_some(v)
    });
    assert_eq!(line["host"], "gw1");
    assert_eq!(line["lease"]["entry"]["session_id"], "S-new");
    // --record over --host records here (tests/fleet.rs); without --follow it says why.
    let out = run(&sshd, &["--host", &h, "events", "--record"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stderr.contains("--follow"), "{out:?}");
}

/// `events --since` over --host: each host's recorded history (its recorder's journal, and
/// removals its audit file holds that no recorder saw), read there and merged here in time
/// order, each line naming its host; a host that cannot be reached is said, the others shown.
#[test]
fn events_since_merges_every_hosts_recorded_history() {
    let sshd = Sshd::start();
    let (a, b) = (Home::new(), Home::new());
    let (ha, hb) = (sshd.spec("gw1", a.path()), sshd.spec("gw2", b.path()));
    // gw2 has a recorder running while a lease comes and goes.
    let recorder =
        Proc::spawn("recorder", common::process::leasectl(b.path(), &["events", "--follow", "--record", "-o", "json"]));
    let _ = recorder.line(); // following
    let mut owner = Sleeper::new();
    b.acquire_ok(&["S-recorded", "--owner-pid", &owner.pid_arg()]);
    wait_for("the recorder's acquired line", || recorder.line().contains("S-recorded").then_some(()));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    // gw1 has no recorder: a force-release there is known from its audit file.
    let mut dead = Sleeper::new();
    a.acquire_ok(&["S-audited", "--owner-pid", &dead.pid_arg()]);
    dead.kill();
    Proc::run("force-release", common::process::leasectl(a.path(), &["force-release", "--session", "S-audited"]))
        .expect_exit(0);
    owner.kill();

    let out = run(&sshd, &["--host", &ha, "--host", &hb, "events", "--since", "1h", "-o", "json"]);
    out.expect_exit(0);
    let lines: Vec<Value> = out.stdout.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
    let said: Vec<(String, String, String)> = lines
        .iter()
        .map(|v| {
            let s = |x: &Value| x.as_str().unwrap_or("-").to_owned();
            (s(&v["host"]), s(&v["event"]), s(&v["lease"]["entry"]["session_id"]))
        })
        .collect();
    assert!(said.contains(&("gw2".into(), "acquired".into(), "S-recorded".into())), "{said:?}");
    assert!(said.contains(&("gw1".into(), "force-released".into(), "S-audited".into())), "{said:?}");
    let times: Vec<f64> = lines.iter().map(|v| v["ts"].as_f64().unwrap_or(0.0)).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "in time order: {times:?}");
    let recorded = lines.iter().position(|v| v["lease"]["entry"]["session_id"] == "S-recorded");
    let audited = lines.iter().position(|v| v["lease"]["entry"]["session_id"] == "S-audited");
    assert!(recorded < audited, "gw2's acquire came first: {said:?}");
    // The table names host:profile on each line.
    let out = run(&sshd, &["--host", &ha, "--host", &hb, "events", "--since", "1h"]);
    out.expect_exit(0);
    assert!(out.stdout.lines().any(|l| l.contains("gw1:root") && l.contains("S-audited")), "{out:?}");
    assert!(out.stdout.lines().any(|l| l.contains("gw2:root") && l.contains("S-recorded")), "{out:?}");
    // A host that cannot be reached is said, and the others' history still shown (exit 1).
    let closed = sshd.closed_spec();
    let out = run(&sshd, &["--host", &closed, "--host", &hb, "events", "--since", "1h", "-o", "tsv"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.contains("gw2:root") && out.stderr.contains("host closed is unreachable"), "{out:?}");
    // A host where nothing was ever recorded: said, not an empty answer.
    let blank = Home::new();
    let out = run(&sshd, &["--host", &sshd.spec("gw3", blank.path()), "events", "--since", "1h"]);
    out.expect_exit(0);
    assert!(out.stdout.is_empty() && out.stderr.contains("no events recorded on these hosts"), "{out:?}");
    drop(recorder);
}

/// One session a host, however many registries and actions: every removal of one
/// command is recorded by the same `serve` process. A key pinned to `serve --stdio` in
/// authorized_keys (a forced command) loses nothing; an unknown host key is refused.
#[test]
fn one_session_a_host_a_forced_command_and_no_unknown_host_key() {
    let sshd = Sshd::start();
    let home = Home::new();
    let mut dead = Sleeper::new();
    let work = home.make_profile("work");
    home.acquire_ok(&["S-root", "--owner-pid", &dead.pid_arg()]);
    let out =
        Proc::run("acquire", common::process::leasectl(&work, &["acquire", "S-work", "--owner-pid", &dead.pid_arg()]));
    out.expect_exit(0);
    dead.kill();
    // Only `serve --stdio` may run with this key, whatever the client asks for.
    sshd.force_command(&format!("{} serve --stdio", common::process::BIN));
    let mut cmd = sshd.leasectl(&["--host", &sshd.spec("gw1", home.path()), "--all-profiles", "prune"]);
    cmd.env("LEASECTL_REMOTE_COMMAND", "/nonexistent/not-what-runs");
    let out = Proc::run("prune", cmd);
    out.expect_exit(0);
    let records: Vec<Value> = audit_lines(home.path()).into_iter().chain(audit_lines(&work)).collect();
    assert_eq!(records.len(), 2, "{out:?}");
    assert_eq!(records[0]["pid"], records[1]["pid"], "both removals went through one session: {records:?}");

    let mut cmd = sshd.leasectl(&["--host", &sshd.spec("gw1", home.path()), "ls"]);
    let config = sshd.dir().join("strangers_config");
    let text = fs::read_to_string(sshd.dir().join("ssh_config")).expect("config");
    fs::write(&config, text.replace("known_hosts", "empty_known_hosts")).expect("write");
    fs::write(sshd.dir().join("empty_known_hosts"), "").expect("write");
    cmd.env("LEASECTL_SSH_COMMAND", format!("ssh -F {}", config.display()));
    let out = Proc::run("unknown host key", cmd);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.contains("Host key verification failed"), "{out:?}");
    assert!(
        fs::read_to_string(sshd.dir().join("empty_known_hosts")).unwrap_or_default().is_empty(),
        "nothing accepted"
    );
}

/// doctor and metrics over --host: every host checked where it is, each named; a host
/// that is down is said and counted, and the others are checked all the same. A hint
/// names the host it is about, so it acts there when pasted.
#[test]
fn doctor_and_metrics_cover_every_host_and_name_the_one_down() {
    let sshd = Sshd::start();
    let home = Home::new();
    let mut dead = Sleeper::new();
    home.acquire_ok(&["S-stale", "--owner-pid", &dead.pid_arg()]);
    dead.kill();
    let good = sshd.spec("good", home.path());
    let closed = sshd.closed_spec();
    let out = run(&sshd, &["--host", &good, "--host", &closed, "doctor"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.contains("good:root:"), "{out:?}");
    assert!(out.stdout.contains("S-stale") || out.stdout.contains("stale"), "{out:?}");
    assert!(out.stdout.contains("closed:root (") && out.stdout.contains("cannot check"), "{out:?}");
    assert!(out.stdout.contains("1 registry could not be checked"), "{out:?}");
    assert!(!out.stdout.contains("`leasectl prune`"), "a bare hint would act on this machine: {out:?}");

    let out = run(&sshd, &["--host", &good, "--host", &closed, "doctor", "--json"]);
    let v = out.json();
    assert_eq!(v["summary"]["unchecked"], 1, "{out:?}");
    let hosts: Vec<&str> =
        v["registries"].as_array().expect("registries").iter().filter_map(|r| r["host"].as_str()).collect();
    assert_eq!(hosts, ["good", "closed"], "{out:?}");

    let out = run(&sshd, &["--host", &good, "--host", &closed, "metrics"]);
    assert!(out.stdout.contains(r#"leasectl_registry_valid{host="good",profile="root"} 1"#), "{out:?}");
    // A host not reached is down, not an invalid registry (issue 39).
    assert!(!out.stdout.contains(r#"leasectl_registry_valid{host="closed""#), "{out:?}");
    assert!(out.stdout.contains(r#"leasectl_host_up{host="closed"} 0"#), "{out:?}");
    assert!(out.stdout.contains(r#"leasectl_host_up{host="good"} 1"#), "{out:?}");
    assert!(out.stdout.contains("# TYPE leasectl_host_up gauge"), "{out:?}");
    // Without --host there is no host to be up.
    let local = Proc::run("metrics", common::process::leasectl(home.path(), &["metrics"]));
    assert!(!local.stdout.contains("leasectl_host_up"), "{local:?}");
}

/// `ls -w` over a fast host and one behind a slow link: the fast one's leases are listed
/// at once, the slow one's when it answers, as `present` (they were there before; not
/// `acquired`), and nothing says its cap changed.
#[test]
fn a_slow_host_holds_no_other_up_and_its_leases_are_present_when_it_answers() {
    use std::sync::atomic::Ordering;
    let sshd = Sshd::start();
    let proxy = common::sshd::SlowProxy::start(sshd.port);
    sshd.trust_port(proxy.port);
    proxy.delay.store(200, Ordering::Relaxed);
    let (fast, slow) = (Home::new(), Home::new());
    fs::write(slow.path().join("config.yaml"), "max_concurrent_sessions: 4\n").expect("config");
    let owner = Sleeper::new();
    fast.acquire_ok(&["S-fast", "--owner-pid", &owner.pid_arg()]);
    slow.acquire_ok(&["S-slow", "--owner-pid", &owner.pid_arg()]);
    let slow_spec = format!("slow=ssh://{}@127.0.0.1:{}{}", sshd.user, proxy.port, slow.path().display());
    let started = std::time::Instant::now();
    let feed = Proc::spawn(
        "ls -w",
        sshd.leasectl(&["--host", &slow_spec, "--host", &sshd.spec("fast", fast.path()), "ls", "-w", "-o", "json"]),
    );
    let mut lines: Vec<Value> = Vec::new();
    let fast_at = wait_for("the fast host's lease", || {
        let v: Value = serde_json::from_str(&feed.line()).ok()?;
        lines.push(v.clone());
        (v["lease"]["entry"]["session_id"] == "S-fast").then(|| started.elapsed())
    });
    assert!(!lines.iter().any(|l| l["host"] == "slow" && l["lease"].is_object()), "{lines:?}");
    let slow_line = wait_for("the slow host's lease", || {
        let v: Value = serde_json::from_str(&feed.line()).ok()?;
        lines.push(v.clone());
        (v["lease"]["entry"]["session_id"] == "S-slow").then_some(v)
    });
    assert!(started.elapsed() > fast_at, "the slow host came later");
    assert_eq!(slow_line["event"], "present", "it was there before: {lines:?}");
    assert!(!lines.iter().any(|l| l["event"] == "cap-changed" || l["event"] == "acquired"), "{lines:?}");
}

/// The hosts file names hosts for --host NAME and --all-hosts; LEASECTL_HOSTS is the
/// default list; a name nobody defined is said.
#[test]
fn the_hosts_file_and_leasectl_hosts_name_hosts() {
    let sshd = Sshd::start();
    let home = Home::new();
    let owner = Sleeper::new();
    home.acquire_ok(&["S-file", "--owner-pid", &owner.pid_arg()]);
    fs::create_dir_all(sshd.dir().join("leasectl")).expect("config dir");
    fs::write(
        sshd.dir().join("leasectl/hosts"),
        format!("# the fleet\n{}  # one host\n", sshd.spec("gw1", home.path())),
    )
    .expect("hosts file");
    let listed = |out: &Out| out.stdout.lines().any(|l| l.starts_with("gw1\troot\t") && l.contains("\tS-file\t"));
    let out = run(&sshd, &["--host", "gw1", "ls", "-o", "tsv"]);
    assert!(out.status.success() && listed(&out), "{out:?}");
    let out = run(&sshd, &["--all-hosts", "ls", "-o", "tsv"]);
    assert!(out.status.success() && listed(&out), "{out:?}");
    let mut cmd = sshd.leasectl(&["ls", "-o", "tsv"]);
    cmd.env("LEASECTL_HOSTS", "gw1");
    let out = Proc::run("LEASECTL_HOSTS", cmd);
    assert!(out.status.success() && listed(&out), "{out:?}");
    let out = run(&sshd, &["--host", "gw9", "ls"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stderr.contains("names no such host or group"), "{out:?}");
}

/// force-release over --host with a host down: a lease id or a session is acted on where
/// it is reached, the host not reached is said (its leases as they were), and the exit
/// says not everything was reached.
#[test]
fn force_release_acts_where_it_reaches_and_says_the_host_it_did_not() {
    let sshd = Sshd::start();
    let home = Home::new();
    let mut dead = Sleeper::new();
    home.acquire_ok(&["S-here", "--owner-pid", &dead.pid_arg()]);
    dead.kill();
    let good = sshd.spec("good", home.path());
    let closed = sshd.closed_spec();
    let out = run(&sshd, &["--host", &closed, "--host", &good, "force-release", "--session", "S-here"]);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(home.entries().is_empty(), "released where reached: {out:?}");
    assert!(out.stderr.contains("closed:root: not reached"), "{out:?}");
    let out = run(&sshd, &["--host", &closed, "--host", &good, "force-release", "0123abcd"]);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(out.stderr.contains("not searched: closed:root"), "{out:?}");
}

/// state.db's word travels with a remote registry: a live owner whose session ended on
/// that host is a leak suspect over --host too (ls, JSON), read where the home is.
#[test]
fn leak_suspects_on_another_host_are_judged_from_its_state_db() {
    let sshd = Sshd::start();
    let home = Home::new();
    let owner = Sleeper::new();
    home.acquire_ok(&["S-ended", "--owner-pid", &owner.pid_arg()]);
    home.acquire_ok(&["S-busy", "--owner-pid", &owner.pid_arg()]);
    crate::common::backdate_leases(home.path(), 7200.0);
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
    let db = common::process::hermes_state_db(home.path());
    for (id, ended) in [("S-ended", Some(now - 600.0)), ("S-busy", None)] {
        db.execute(
            "INSERT INTO sessions VALUES (?1, 'cli', ?2, ?3, ?4, ?5)",
            rusqlite::params![id, format!("chat {id}"), now - 3600.0, ended, ended.map(|_| "tui_shutdown")],
        )
        .expect("insert");
    }
    db.execute(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('S-busy', 'user', '.', ?1)",
        [now - 5.0],
    )
    .expect("message");
    let h = sshd.spec("gw1", home.path());
    let out = run(&sshd, &["--host", &h, "ls", "--json"]);
    out.expect_exit(0);
    let v = out.json();
    let leases = v["registries"][0]["leases"].as_array().cloned().unwrap_or_default();
    let of = |s: &str| leases.iter().find(|l| l["entry"]["session_id"] == s).cloned().unwrap_or_default();
    assert!(of("S-ended")["leak_suspect"].as_str().is_some_and(|w| w.contains("ended")), "{out:?}");
    assert!(of("S-busy")["leak_suspect"].is_null(), "{out:?}");
    assert_eq!(of("S-busy")["session"]["title"], "chat S-busy", "{out:?}");
    let out = run(&sshd, &["--host", &h, "ls"]);
    assert!(out.stdout.lines().any(|l| l.contains("S-ended") && l.contains("LEAK?")), "{out:?}");
}

/// `stop` over --host: the plan is made and the owner ended on the host it runs on, with
/// its pidfd there; the preview names it, the audit record is the remote's.
#[test]
fn stop_ends_an_owner_on_another_host_and_the_remote_records_it() {
    let sshd = Sshd::start();
    let (a, b) = (Home::new(), Home::new());
    let mut holder = b.spawn("hold S-remote", &["hold", "S-remote"]);
    let lease = b.wait_entry_for("S-remote")["lease_id"].as_str().expect("a lease id").to_owned();
    let (ha, hb) = (sshd.spec("gw1", a.path()), sshd.spec("gw2", b.path()));
    let dry = run(&sshd, &["--host", &ha, "--host", &hb, "stop", "--session", "S-remote", "--dry-run"]);
    dry.expect_exit(0);
    assert!(dry.stdout.contains(&format!("pid {}", holder.pid())) && dry.stdout.contains("gw2"), "{dry:?}");
    let out = run(&sshd, &["--host", &ha, "--host", &hb, "stop", &lease[..8], "--yes", "--json"]);
    out.expect_exit(0);
    let v = out.json();
    assert_eq!(v["owners"][0]["ending"], "terminated", "{v}");
    assert_eq!(v["owners"][0]["leases"][0]["how"], "released", "{v}");
    assert!(holder.wait().success(), "hold released its lease as it ended");
    assert!(b.entries().is_empty());
    let records = audit_lines(b.path());
    let last = records.last().expect("the remote's record");
    assert_eq!(last["action"], "stop", "{last}");
    assert!(last["operator"].as_str().is_some_and(|o| !o.is_empty()), "names the operator: {last}");
    // An owner the remote cannot end is refused there, with its words.
    let mut gone = Sleeper::new();
    b.acquire_ok(&["S-gone", "--owner-pid", &gone.pid_arg()]);
    gone.kill();
    let refused = run(&sshd, &["--host", &hb, "stop", "--session", "S-gone", "--yes"]);
    refused.expect_exit(1);
    assert!(refused.stderr.contains("not running") && refused.stderr.contains("prune`"), "{refused:?}");
}
