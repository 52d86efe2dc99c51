//! The fleet as one (issue 39): hosts everywhere profiles are, one host down blocking
//! nothing, words for why a host gives nothing, connection reuse, patterns and groups.
//! Against the tests' own sshd; the remote's leasectl is this build.

use crate::common;

use std::fs;

use common::process::{Home, Out, Proc, Sleeper, acquire_for};
use common::sshd::Sshd;

fn run(sshd: &Sshd, args: &[&str]) -> Out {
    Proc::run(&common::process::label(args), sshd.leasectl(args))
}

/// An id (or its prefix) is looked for in every profile of every host and acted on where
/// it is; the same id in two places names each with `--host H --profile P`; a refusal
/// names the host it came from.
#[test]
fn an_id_is_found_in_any_profile_of_any_host() {
    let sshd = Sshd::start();
    let (a, b) = (Home::new(), Home::new());
    b.make_profile("p1");
    let mut dead = Sleeper::new();
    let live = Sleeper::new();
    acquire_for(a.path(), None, "S-a", &live);
    let dead_id = acquire_for(b.path(), Some("p1"), "S-dead", &dead);
    let live_id = acquire_for(b.path(), Some("p1"), "S-live", &live);
    dead.kill();
    let (gw1, gw3) = (sshd.spec("gw1", a.path()), sshd.spec("gw3", b.path()));

    let out = run(&sshd, &["--host", &gw1, "--host", &gw3, "force-release", &dead_id[..8]]);
    out.expect_exit(0);
    assert!(out.stdout.contains("gw3:p1"), "the host and profile it acted in: {out:?}");
    let left = fs::read(b.path().join("profiles/p1/runtime/active_sessions.json")).expect("p1 registry");
    assert!(!String::from_utf8_lossy(&left).contains(&dead_id), "{out:?}");

    // A refusal (a live owner) says which host refused, and its override reaches that host.
    let out = run(&sshd, &["--host", &gw1, "--host", &gw3, "force-release", &live_id[..8]]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stderr.contains("gw3:p1"), "the host named: {out:?}");
    assert!(out.stderr.contains("--host") && out.stderr.contains("--profile p1"), "{out:?}");

    // The same home behind two names: the same id on two hosts; each place is named so
    // that it can be chosen.
    let gw4 = sshd.spec("gw4", b.path());
    let out = run(&sshd, &["--host", &gw3, "--host", &gw4, "force-release", &live_id[..8]]);
    out.expect_exit(2);
    assert!(out.stderr.contains("gw3:p1") && out.stderr.contains("gw4:p1"), "{out:?}");
    assert!(out.stderr.contains("--host gw4=ssh://") && out.stderr.contains("--profile p1 force-release"), "{out:?}");
    assert!(!out.stderr.contains("name one with --profile"), "a profile alone cannot choose a host: {out:?}");
}

/// A host that prints junk (a motd, a shell rc's echo) before leasectl's hello still
/// serves; one that prints only junk was reached, and is said to answer junk, escaped,
/// never "unreachable" nor in Rust's debug form.
#[test]
fn junk_on_a_hosts_output_is_named_as_junk() {
    let sshd = Sshd::start();
    let home = Home::new();
    let owner = Sleeper::new();
    acquire_for(home.path(), None, "S1", &owner);
    let good = sshd.spec("good", home.path());
    let dir = sshd.dir();
    let remote_as = |name: &str, script: &str| -> Out {
        let path = dir.join(name);
        fs::write(&path, format!("#!/bin/sh\n{script}\n")).expect("script");
        fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        let mut cmd = sshd.leasectl(&["--host", &good, "ls", "-o", "tsv"]);
        // A host that says only junk is given up on after its connect timeout.
        cmd.env("LEASECTL_REMOTE_COMMAND", &path).env("LEASECTL_CONNECT_TIMEOUT", "2");
        Proc::run(name, cmd)
    };
    let motd = remote_as(
        "motd",
        &format!(
            "echo 'Welcome to gw1!'; printf 'Last login: \\033[31mtoday\\n'; exec {} \"$@\"",
            common::process::BIN
        ),
    );
    motd.expect_exit(0);
    assert!(motd.stdout.contains("\tS1\t"), "served after its motd: {motd:?}");

    let junk = remote_as("junk", "printf 'Welcome \\033[2J to gw1\\n'; sleep 30");
    assert_eq!(junk.status.code(), Some(1), "{junk:?}");
    let said = format!("{}{}", junk.stdout, junk.stderr);
    assert!(said.contains("host good answered junk on its output"), "{junk:?}");
    assert!(said.contains("it said: \"Welcome \\u{1b}[2J to gw1\""), "the junk shown, escaped: {junk:?}");
    assert!(!said.contains("unreachable") && !said.contains('\x1b'), "{junk:?}");

    let odd = remote_as("odd", r#"echo '{"ready":{"profiles":[],"default":"root"}}'; sleep 30"#);
    let said = format!("{}{}", odd.stdout, odd.stderr);
    assert!(said.contains("host good answered junk on its output"), "{odd:?}");
    assert!(!said.contains("Ready {") && !said.contains("unreachable"), "no debug form: {odd:?}");

    // A login the server refuses is said as that, not as a host that cannot be reached.
    let no_key = dir.join("no_key_config");
    let known = dir.join("known_hosts");
    fs::write(&no_key, format!("Host *\n  IdentityFile /nonexistent\n  IdentitiesOnly yes\n  UserKnownHostsFile {}\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n", known.display()))
        .expect("config");
    let mut cmd = sshd.leasectl(&["--host", &good, "ls", "-o", "tsv"]);
    cmd.env("LEASECTL_SSH_COMMAND", format!("ssh -F {}", no_key.display())).env_remove("SSH_AUTH_SOCK");
    let refused = Proc::run("refused", cmd);
    let said = format!("{}{}", refused.stdout, refused.stderr);
    assert!(said.contains("host good refused the login (permission denied)"), "{refused:?}");
}

/// `ssh` as leasectl starts it, each call's arguments logged to `log`.
fn logging_ssh(sshd: &Sshd, config: &std::path::Path, log: &std::path::Path) -> String {
    let path = sshd.dir().join(format!("logssh-{}", log.file_name().and_then(|n| n.to_str()).unwrap_or("x")));
    let script = format!("#!/bin/sh\necho \"$*\" >> '{}'\nexec ssh -F '{}' \"$@\"\n", log.display(), config.display());
    fs::write(&path, script).expect("script");
    fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    path.display().to_string()
}

fn connections(log: &std::path::Path) -> Vec<String> {
    fs::read_to_string(log).unwrap_or_default().lines().filter(|l| !l.contains("-G")).map(str::to_owned).collect()
}

/// Timeouts: the operator's `--connect-timeout` (or LEASECTL_CONNECT_TIMEOUT) for this
/// run; else what their ssh config says stands (leasectl's 10 s no longer beats it);
/// else 10 s. A host that never says hello holds `ls` up no longer than that.
#[test]
fn the_ssh_configs_timeouts_win_and_the_operator_can_set_one() {
    let sshd = Sshd::start();
    let home = Home::new();
    let owner = Sleeper::new();
    acquire_for(home.path(), None, "S1", &owner);
    let good = sshd.spec("good", home.path());
    let base = sshd.dir().join("ssh_config");
    let log = sshd.dir().join("plain.log");
    let mut cmd = sshd.leasectl(&["--host", &good, "ls"]);
    cmd.env("LEASECTL_SSH_COMMAND", logging_ssh(&sshd, &base, &log));
    Proc::run("plain", cmd).expect_exit(0);
    let calls = connections(&log);
    assert!(calls.iter().any(|c| c.contains("ConnectTimeout=10") && c.contains("ServerAliveInterval=10")), "{calls:?}");

    // The operator's config says: it stands.
    let own = sshd.dir().join("own_config");
    let text = fs::read_to_string(&base).expect("config");
    fs::write(&own, text.replace("Host *\n", "Host *\n  ConnectTimeout 3\n  ServerAliveInterval 20\n")).expect("write");
    let log = sshd.dir().join("own.log");
    let mut cmd = sshd.leasectl(&["--host", &good, "ls"]);
    cmd.env("LEASECTL_SSH_COMMAND", logging_ssh(&sshd, &own, &log));
    Proc::run("own config", cmd).expect_exit(0);
    let calls = connections(&log);
    assert!(
        !calls.is_empty() && !calls.iter().any(|c| c.contains("ConnectTimeout") || c.contains("ServerAlive")),
        "{calls:?}"
    );

    // The operator's word for this run beats both.
    let log = sshd.dir().join("flag.log");
    let mut cmd = sshd.leasectl(&["--host", &good, "--connect-timeout", "4", "ls"]);
    cmd.env("LEASECTL_SSH_COMMAND", logging_ssh(&sshd, &own, &log));
    Proc::run("flag", cmd).expect_exit(0);
    assert!(connections(&log).iter().any(|c| c.contains("ConnectTimeout=4")), "{:?}", connections(&log));
    let mut cmd = sshd.leasectl(&["--host", &good, "ls"]);
    cmd.env("LEASECTL_CONNECT_TIMEOUT", "0");
    let bad = Proc::run("bad", cmd);
    bad.expect_exit(2);
    assert!(bad.stderr.contains("--connect-timeout") && bad.stderr.contains("from 1 to 3600"), "{bad:?}");

    // A host that accepts and never says hello: given up after the timeout, said, and
    // the other host listed.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("addr").port();
    let held = std::thread::spawn(move || {
        let kept: Vec<_> = silent.incoming().take(2).collect();
        std::thread::sleep(std::time::Duration::from_secs(20));
        drop(kept);
    });
    let mute = format!("mute=ssh://{}@127.0.0.1:{port}/x", sshd.user);
    let started = std::time::Instant::now();
    let out = run(&sshd, &["--host", &mute, "--host", &good, "--connect-timeout", "1", "ls", "-o", "tsv"]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.contains("good\troot\t") && out.stdout.contains("\tS1\t"), "the other host listed: {out:?}");
    assert!(format!("{}{}", out.stdout, out.stderr).contains("host mute is unreachable"), "{out:?}");
    assert!(took < std::time::Duration::from_secs(8), "held up {took:?}, not the 1 s asked (+ the remote's start)");
    drop(held);
}

/// Connection reuse: a second look within the persist rides the first one's connection
/// (the remote sees the same client port), through a socket in a directory only this user
/// can enter; after the persist the socket is gone. LEASECTL_SSH_PERSIST=0 shares nothing.
#[test]
fn a_second_look_reuses_the_connection_through_a_private_socket() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let sshd = Sshd::start();
    let home = Home::new();
    let good = sshd.spec("gw1", home.path());
    let runtime = tempfile::tempdir().expect("runtime dir");
    let origin = |persist: &str| -> String {
        // Each look prunes (nothing): the remote's audit record names the connection.
        let mut dead = Sleeper::new();
        acquire_for(home.path(), None, "S-dead", &dead);
        dead.kill();
        let mut cmd = sshd.leasectl(&["--host", &good, "prune"]);
        cmd.env("XDG_RUNTIME_DIR", runtime.path()).env("LEASECTL_SSH_PERSIST", persist);
        Proc::run("prune", cmd).expect_exit(0);
        let text = fs::read_to_string(home.path().join("logs/leasectl-audit.jsonl")).expect("audit");
        let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap_or("{}")).expect("json");
        last["ssh_connection"].as_str().unwrap_or_default().to_owned()
    };
    let first = origin("4");
    let second = origin("4");
    assert!(!first.is_empty() && first == second, "one connection for both looks: {first} / {second}");
    let dir = runtime.path().join("leasectl-ssh");
    let meta = fs::symlink_metadata(&dir).expect("the socket directory");
    assert_eq!(meta.permissions().mode() & 0o777, 0o700, "private");
    assert_eq!(meta.uid(), rustix::process::geteuid().as_raw());
    let sockets = || fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
    assert_eq!(sockets(), 1, "one socket for the host");
    // Another ssh command (another config, other keys) never rides that connection.
    let mut cmd = sshd.leasectl(&["--host", &good, "ls"]);
    cmd.env("XDG_RUNTIME_DIR", runtime.path())
        .env("LEASECTL_SSH_PERSIST", "4")
        .env("LEASECTL_SSH_COMMAND", format!("{} -o LogLevel=ERROR", sshd.ssh_command()));
    Proc::run("another ssh command", cmd).expect_exit(0);
    assert_eq!(sockets(), 2, "a socket of its own");
    common::process::wait_for("the socket to go after its persist", || (sockets() == 0).then_some(()));

    let third = origin("0");
    let fourth = origin("0");
    assert_ne!(third, fourth, "no sharing: a connection each");
    assert_eq!(sockets(), 0);
}

/// Patterns and groups of the hosts file, wherever a host is named (`--host`,
/// LEASECTL_HOSTS), reaching real hosts; the hint a command prints reaches the same ones.
#[test]
fn host_patterns_and_groups_name_hosts_of_the_hosts_file() {
    let sshd = Sshd::start();
    let homes: Vec<Home> = (0..3).map(|_| Home::new()).collect();
    let owner = Sleeper::new();
    for (i, home) in homes.iter().enumerate() {
        acquire_for(home.path(), None, &format!("S-{i}"), &owner);
    }
    fs::create_dir_all(sshd.dir().join("leasectl")).expect("config dir");
    let file = format!(
        "[gateways]\n{}\n{}\n[ci]\n{}\ngw2\n",
        sshd.spec("gw1", homes[0].path()),
        sshd.spec("gw2", homes[1].path()),
        sshd.spec("build", homes[2].path())
    );
    fs::write(sshd.dir().join("leasectl/hosts"), file).expect("hosts file");
    let hosts_of = |out: &Out| -> Vec<String> {
        let mut seen: Vec<String> =
            out.stdout.lines().skip(1).filter_map(|l| l.split('\t').next()).map(str::to_owned).collect();
        seen.dedup();
        seen
    };
    let out = run(&sshd, &["--host", "gw*", "ls", "-o", "tsv"]);
    out.expect_exit(0);
    assert_eq!(hosts_of(&out), ["gw1", "gw2"], "{out:?}");
    let out = run(&sshd, &["--host", "ci", "ls", "-o", "tsv"]);
    out.expect_exit(0);
    assert_eq!(hosts_of(&out), ["build", "gw2"], "{out:?}");
    let mut cmd = sshd.leasectl(&["ls", "-o", "tsv"]);
    cmd.env("LEASECTL_HOSTS", "gateways,b*");
    let out = Proc::run("LEASECTL_HOSTS", cmd);
    out.expect_exit(0);
    assert_eq!(hosts_of(&out), ["gw1", "gw2", "build"], "{out:?}");
    let out = run(&sshd, &["--host", "db*", "ls"]);
    out.expect_exit(2);
    assert!(out.stderr.contains("matches db*") && out.stderr.contains("groups: gateways, ci"), "{out:?}");
}

/// prune and force-release over hosts, one of them down: they act on every host that
/// answers, name the one that did not with why, end with one line a host, and exit 5.
#[test]
fn an_action_over_hosts_ends_with_a_line_a_host_and_one_down_blocks_nothing() {
    let sshd = Sshd::start();
    let (a, b) = (Home::new(), Home::new());
    b.make_profile("p1");
    let mut dead = Sleeper::new();
    acquire_for(a.path(), None, "S-a", &dead);
    acquire_for(b.path(), None, "S-b", &dead);
    acquire_for(b.path(), Some("p1"), "S-b1", &dead);
    dead.kill();
    let (gw1, gw2, closed) = (sshd.spec("gw1", a.path()), sshd.spec("gw2", b.path()), sshd.closed_spec());
    let out = run(&sshd, &["--host", &gw1, "--host", &closed, "--host", &gw2, "--all-profiles", "prune", "--dry-run"]);
    out.expect_exit(5);
    let recap: Vec<&str> = out.stdout.lines().skip_while(|l| *l != "prune, host by host:").collect();
    assert_eq!(recap.len(), 4, "{out:?}");
    assert!(recap[1].starts_with("  gw1     would remove 1 lease in 1 registry"), "{out:?}");
    assert!(recap[2].starts_with("  closed  not reached: host closed is unreachable"), "{out:?}");
    assert!(recap[3].starts_with("  gw2     would remove 2 leases in 2 registries"), "{out:?}");
    assert!(b.entries().len() == 1 && a.entries().len() == 1, "a dry run");

    let out = run(&sshd, &["--host", &gw1, "--host", &closed, "--host", &gw2, "force-release", "--session", "S-b"]);
    out.expect_exit(5);
    assert!(b.entries().is_empty(), "released where it is: {out:?}");
    assert!(out.stdout.contains("force-release, host by host:"), "{out:?}");
    assert!(out.stdout.contains("  gw2     removed 1 lease in 1 registry"), "{out:?}");
    assert!(out.stdout.contains("  closed  not reached: host closed is unreachable"), "{out:?}");
    assert!(out.stdout.contains("  gw1     removed 0 leases in 1 registry"), "{out:?}");
}

/// A fleet recorder: one `events --follow --record` over --host keeps every host's events
/// in one journal here (host on each line); `events --since` over the fleet then needs no
/// recorder on any host, and still has a host's events while that host is down.
#[test]
fn one_recorder_here_records_the_whole_fleet() {
    let sshd = Sshd::start();
    let (a, b) = (Home::new(), Home::new());
    let (gw1, gw2) = (sshd.spec("gw1", a.path()), sshd.spec("gw2", b.path()));
    let state = tempfile::tempdir().expect("state dir");
    let with_state = |args: &[&str]| {
        let mut cmd = sshd.leasectl(args);
        cmd.env("XDG_STATE_HOME", state.path());
        cmd
    };
    let recorder = Proc::spawn(
        "recorder",
        with_state(&["--host", &gw1, "--host", &gw2, "events", "--follow", "--record", "-o", "json"]),
    );
    let owner = Sleeper::new();
    let mut followed = 0;
    while followed < 2 {
        if recorder.line().contains("\"following\"") {
            followed += 1;
        }
    }
    acquire_for(a.path(), None, "S-on-gw1", &owner);
    acquire_for(b.path(), None, "S-on-gw2", &owner);
    common::process::wait_for("both acquires recorded", || {
        let text = fs::read_to_string(state.path().join("leasectl/fleet/logs/leasectl-events.jsonl")).ok()?;
        (text.contains("S-on-gw1") && text.contains("S-on-gw2")).then_some(())
    });
    // A second fleet recorder would record every event twice: refused, naming the first.
    let second = Proc::run("second", with_state(&["--host", &gw1, "events", "--follow", "--record"]));
    assert_eq!(second.status.code(), Some(1), "{second:?}");
    drop(recorder);
    assert!(!a.path().join("logs/leasectl-events.jsonl").exists(), "nothing recorded on the host");

    let out =
        Proc::run("since", with_state(&["--host", &gw1, "--host", &gw2, "events", "--since", "1h", "-o", "json"]));
    out.expect_exit(0);
    let lines: Vec<serde_json::Value> = out.stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let acquired: Vec<(&str, &str)> = lines
        .iter()
        .filter(|v| v["event"] == "acquired")
        .map(|v| (v["host"].as_str().unwrap_or("?"), v["lease"]["entry"]["session_id"].as_str().unwrap_or("?")))
        .collect();
    assert_eq!(acquired, [("gw1", "S-on-gw1"), ("gw2", "S-on-gw2")], "{out:?}");

    // gw2's history while it is down: from the fleet journal, and the host said.
    let closed = format!("gw2=ssh://{}@127.0.0.1:1/x", sshd.user);
    let out = Proc::run("since, one down", with_state(&["--host", &gw1, "--host", &closed, "events", "--since", "1h"]));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.contains("S-on-gw2") && out.stderr.contains("host gw2 is unreachable"), "{out:?}");
}
