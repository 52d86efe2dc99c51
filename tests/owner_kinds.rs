//! The kind of process that owns a lease, and the safe move for each kind, everywhere
//! leasectl advises: a gateway's lease with no turn running is a leftover freed alone
//! (no `--live`), one in a turn is waited for; a `hermes chat` is ended; an app backend's
//! session is closed where it is open. Each piece of advice is run as it is given. (A real
//! 0.22 gateway and `hermes chat`: tests/hermes_releases.rs.)

use std::path::Path;

use serde_json::Value;

use crate::common::process::{Home, Out, Proc, Sleeper};

/// A gateway's lease as Hermes 0.22 writes one (gateway/run_busy.py): session id and
/// live id the session key, surface `gateway:PLATFORM`, metadata platform and chat_id.
fn gateway_lease(home: &Home, key: &str, chat: &str, owner: &Sleeper) -> String {
    home.acquire_ok(&[
        key,
        "--owner-pid",
        &owner.pid_arg(),
        "--surface",
        "gateway:telegram",
        "--live-id",
        key,
        "--meta",
        "platform=telegram",
        "--meta",
        &format!("chat_id={chat}"),
        "--meta",
        "user_id=42",
    ])
}

/// state.db's `gateway_routing` rows as the gateway keeps them (gateway/session_lifecycle.py):
/// each key's stored session, and `active_turn_token` while a turn runs; with the
/// sessions they route to.
fn routing(home: &Path, rows: &[(&str, &str, bool)]) {
    crate::common::state_db(home, &[]);
    let db = rusqlite::Connection::open(home.join("state.db")).expect("state.db");
    db.execute_batch(
        "CREATE TABLE gateway_routing (scope TEXT NOT NULL DEFAULT '', session_key TEXT NOT NULL, \
         entry_json TEXT NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (scope, session_key))",
    )
    .expect("gateway_routing");
    let now = leasectl::lease::now();
    for (key, session, turn) in rows {
        let token = if *turn { Value::from("a273e0badf014ce793021554a8586b75") } else { Value::Null };
        let entry = serde_json::json!({"session_key": key, "session_id": session, "platform": "telegram",
                                       "active_turn_token": token, "active_turn_started_at": null});
        db.execute(
            "INSERT INTO gateway_routing VALUES ('/h/sessions', ?1, ?2, ?3)",
            rusqlite::params![key, entry.to_string(), now],
        )
        .expect("a routing row");
        db.execute(
            "INSERT INTO sessions VALUES (?1, 'telegram', 'a chat', ?2, NULL, NULL, ?3)",
            rusqlite::params![session, now - 3600.0, now - 600.0],
        )
        .expect("its session");
    }
}

pub(crate) fn lease_of<'a>(ls: &'a Value, session: &str) -> &'a Value {
    ls["registries"][0]["leases"]
        .as_array()
        .and_then(|l| l.iter().find(|l| l["entry"]["session_id"] == session))
        .unwrap_or_else(|| panic!("no lease of {session} in {ls}"))
}

/// The command a line of advice gives after `after`, as it is shown between backticks.
pub(crate) fn command_after(text: &str, after: &str) -> Vec<String> {
    let at = text.find(after).unwrap_or_else(|| panic!("no {after:?} in {text}"));
    let rest = &text[at + after.len()..];
    let start = rest.find('`').expect("a command") + 1;
    let end = start + rest[start..].find('`').expect("its end");
    shell_words(&rest[start..end])
}

/// Split a pasted command as the shell would (leasectl quotes with single quotes).
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quoted, mut any) = (Vec::new(), String::new(), false, false);
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(word);
    }
    words
}

/// Run an advised command line (its first word `leasectl`).
pub(crate) fn run_advised(words: &[String]) -> Out {
    assert_eq!(words.first().map(String::as_str), Some("leasectl"), "{words:?}");
    let args: Vec<&str> = words.iter().skip(1).map(String::as_str).collect();
    let mut cmd = std::process::Command::new(crate::common::process::BIN);
    cmd.args(&args).env_remove("HERMES_HOME");
    Proc::run("the advised command", cmd)
}

/// Three leases of one gateway: a chat whose turn ended but whose lease was left
/// (no turn marked in state.db), one whose turn runs now, one state.db has no row for.
#[test]
fn a_gateway_lease_with_no_turn_running_is_freed_alone_and_one_in_a_turn_is_waited_for() {
    let home = Home::new();
    let gw = Sleeper::new();
    let (left, running, unknown) =
        ("agent:main:telegram:dm:1234", "agent:main:telegram:dm:77", "agent:main:telegram:dm:5");
    let left_id = gateway_lease(&home, left, "1234", &gw);
    let running_id = gateway_lease(&home, running, "77", &gw);
    gateway_lease(&home, unknown, "5", &gw);
    // Taken five minutes ago: long past the moment a turn marks itself.
    crate::common::backdate_leases(home.path(), 300.0);
    routing(home.path(), &[(left, "20261207_1", false), (running, "20261207_2", true)]);

    let ls = home.run(&["ls", "--json"]).json();
    let l = lease_of(&ls, left);
    assert_eq!(l["owner_kind"], serde_json::json!({"kind": "gateway", "platform": "telegram", "chat": "1234"}));
    assert_eq!((l["owner_sessions"].as_u64(), l["safe_move"].as_str()), (Some(3), Some("force-release")), "{l}");
    assert!(l["leak_suspect"].as_str().is_some_and(|w| w.contains("no turn runs for this chat")), "{l}");
    assert_eq!(l["session"]["routed_session_id"], "20261207_1", "{l}");
    let r = lease_of(&ls, running);
    assert_eq!((r["safe_move"].as_str(), &r["session"]["gateway_turn"]), (Some("wait-for-turn"), &Value::from(true)));
    assert!(r["leak_suspect"].is_null(), "a turn runs: no leak: {r}");
    assert_eq!(lease_of(&ls, unknown)["safe_move"], "wait-for-turn", "no routing row: a turn cannot be ruled out");

    let wide = home.run(&["ls", "-o", "wide"]);
    assert!(wide.stdout.contains("gateway: telegram, chat 1234") && wide.stdout.contains("KIND"), "{wide:?}");

    // doctor's advice for the leftover: the lease alone, no --live; what a stop would cost.
    let doctor = home.run(&["doctor"]);
    let line = doctor.stdout.lines().find(|l| l.contains("LEAK?") && l.contains(&left_id[..8])).expect("LEAK?");
    assert!(line.contains("gateway (telegram, chat 1234) runs no turn for this chat"), "{line}");
    assert!(line.contains("would end pid") && line.contains("2 other sessions"), "{line}");
    let advised = command_after(line, "Remove the lease alone: ");
    assert!(!advised.iter().any(|w| w == "--live"), "{advised:?}");
    let out = run_advised(&advised);
    out.expect_exit(0);
    assert!(out.stderr.contains("a gateway's leftover") && !out.stderr.contains("WARNING"), "{out:?}");
    assert!(!home.entries().iter().any(|e| e["lease_id"] == left_id.as_str()), "the leftover is gone");

    // In a turn: refused without --live, and the advice is to wait, not to stop the gateway.
    let out = home.run(&["force-release", &running_id]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stderr.contains("a turn runs for this chat now") && out.stderr.contains("Wait for it"), "{out:?}");
    assert!(!out.stderr.contains("the safe way"), "stopping a gateway is no safe way for one chat: {out:?}");
}

/// A `hermes chat` whose session went idle: the advice ends the chat (it releases its own
/// lease), never removes the lease beside it; run as given, the owner ends and its lease
/// goes. The same advice is a refusal's.
#[test]
fn a_hermes_chat_suspect_is_ended_as_the_advice_says() {
    let home = Home::new();
    // A process whose program is named `hermes` (a `sleep` by that name), surface `cli`:
    // what a `hermes chat` looks like from outside. (A real one: tests/hermes_releases.rs.)
    let bin = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink("/bin/sleep", bin.path().join("hermes")).expect("a hermes");
    let chat = std::process::Command::new(bin.path().join("hermes")).arg("30").spawn().expect("hermes (sleep)");
    let chat = crate::common::Reaped(chat);
    let pid = chat.id().to_string();
    let id = home.acquire_ok(&["CHAT", "--owner-pid", &pid, "--surface", "cli"]);
    crate::common::backdate_leases(home.path(), 60.0);
    crate::common::state_db(home.path(), &[("CHAT", None)]);
    let asker = Sleeper::new();
    let refused = home.run(&["--idle-threshold", "1s", "acquire", "CHAT", "--owner-pid", &asker.pid_arg()]);
    refused.expect_exit(3);
    assert!(
        refused.stderr.contains("is a hermes chat") && refused.stderr.contains(&format!("stop {id}")),
        "{refused:?}"
    );
    let doctor = home.run(&["--idle-threshold", "1s", "doctor"]);
    let line = doctor.stdout.lines().find(|l| l.contains("LEAK?")).expect("LEAK?");
    assert!(line.contains("(session CHAT, hermes chat)") && !line.contains("force-release"), "{line}");
    let mut advised = command_after(line, "End it: ");
    advised.push("--yes".into());
    let out = run_advised(&advised);
    out.expect_exit(0);
    assert!(home.entries().is_empty(), "ended, its lease removed: {out:?}");
}

/// An app backend (the desktop app, `hermes --tui`, the dashboard) holds a lease per
/// attached session: an idle one is closed in the app (removing its lease would leave it
/// writing); one whose session has ended is no longer attached, and its lease goes alone.
#[test]
fn an_app_backends_session_is_closed_in_the_app_and_an_ended_ones_lease_goes_alone() {
    let home = Home::new();
    let app = Sleeper::new();
    let pid = app.pid_arg();
    let desktop =
        ["--owner-pid", &pid, "--surface", "desktop", "--track-liveness", "--meta", "bot_live_delivery_consumer=true"];
    let open = home.acquire_ok(&[&["OPEN", "--live-id", "d18ddbf1"], &desktop[..]].concat());
    let ended = home.acquire_ok(&[&["ENDED", "--live-id", "3216536f"], &desktop[..]].concat());
    crate::common::backdate_leases(home.path(), 3.0 * 3600.0);
    crate::common::state_db(home.path(), &[("OPEN", None), ("ENDED", Some(60.0))]);
    let doctor = home.run(&["--idle-threshold", "1s", "doctor"]);
    let line = |id: &str| doctor.stdout.lines().find(|l| l.contains(&id[..8])).unwrap_or_default().to_owned();
    let idle = line(&open);
    assert!(idle.contains("app backend (desktop)") && idle.contains("close the session in the app"), "{idle}");
    assert!(idle.contains("would end pid") && idle.contains("1 other session"), "what stopping costs: {idle}");
    let gone = line(&ended);
    let advised = command_after(&gone, "Remove the lease alone: ");
    assert!(advised.iter().any(|w| w == "--live"), "a live process: said with --live: {advised:?}");
    run_advised(&advised).expect_exit(0);
    let left: Vec<String> = home.entries().iter().map(|e| e["session_id"].as_str().unwrap_or("").to_owned()).collect();
    assert_eq!(left, ["OPEN"], "the open session's lease stays");
}

/// `stop` of an owner of more than one session asks again (a script says
/// --every-session), names every session, here and in the home's other profiles, and
/// removes the ended owner's leases in one write per registry.
#[test]
fn stop_of_an_owner_of_many_sessions_names_them_and_cleans_every_profile_in_one_write_each() {
    let home = Home::new();
    let work = home.make_profile("work");
    let gw = Sleeper::new();
    let keys = ["agent:main:telegram:dm:1", "agent:main:telegram:dm:2", "agent:main:telegram:dm:3"];
    let first = gateway_lease(&home, keys[0], "1", &gw);
    for key in &keys[1..] {
        gateway_lease(&home, key, "x", &gw);
    }
    let mut cmd = std::process::Command::new(crate::common::process::BIN);
    cmd.args(["--home", &home.path().to_string_lossy(), "--profile", "work", "acquire", "W1", "--owner-pid"])
        .arg(gw.pid_arg())
        .env_remove("HERMES_HOME");
    Proc::run("acquire in work", cmd).expect_exit(0);
    // Listed alone, the root counts what the gateway holds in every profile.
    let ls = home.run(&["ls", "--json"]).json();
    assert_eq!(lease_of(&ls, keys[0])["owner_sessions"], 4, "{ls}");

    let dry = home.run(&["stop", &first, "--dry-run"]);
    dry.expect_exit(0);
    assert!(dry.stdout.contains("also holds in work: lease") && dry.stdout.contains("session W1"), "{dry:?}");
    assert!(dry.stdout.contains("it is the gateway (telegram)") && dry.stdout.contains("4 chats"), "{dry:?}");

    let refused = home.run(&["stop", &first, "--yes"]);
    refused.expect_exit(2);
    for session in keys.iter().chain(&["W1 (in work)"]) {
        assert!(refused.stderr.contains(session), "each session named: {refused:?}");
    }
    assert!(refused.stderr.contains("--every-session"), "{refused:?}");
    assert_eq!(home.entries().len(), 3, "nothing signalled, nothing removed");

    // Each registry written once: one rename over each active_sessions.json.
    let trace = tempfile::NamedTempFile::new().expect("a trace file");
    let mut cmd = std::process::Command::new("strace");
    // -y: each descriptor with its path, so a rename is known by the directory it is in.
    cmd.args(["-f", "-y", "-e", "trace=rename,renameat,renameat2", "-o"])
        .arg(trace.path())
        .arg(crate::common::process::BIN)
        .args(["--home", &home.path().to_string_lossy(), "stop", &first, "--yes", "--every-session", "--json"])
        .env_remove("HERMES_HOME");
    let out = Proc::run("stop under strace", cmd);
    out.expect_exit(0);
    let v: Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(v["owners"][0]["leases"].as_array().map(Vec::len), Some(3), "{v}");
    assert!(v["owners"][0]["leases"].as_array().is_some_and(|l| l.iter().all(|l| l["how"] == "pruned")), "{v}");
    assert_eq!(v["elsewhere"][0]["profile"], "work", "{v}");
    assert_eq!(v["elsewhere"][0]["leases"][0]["session_id"], "W1", "{v}");
    let renames = std::fs::read_to_string(trace.path()).expect("the trace");
    let into = |registry: &Path| {
        let dir = format!("<{}>", registry.join("runtime").display());
        let into_dir = |l: &&str| l.matches(&dir).count() == 2 && l.contains("\"active_sessions.json\")");
        renames.lines().filter(into_dir).filter(|l| !l.contains("= -1")).count()
    };
    assert_eq!((into(home.path()), into(&work)), (1, 1), "one write per registry:\n{renames}");
    assert!(home.entries().is_empty(), "the root is clean");
    let work_registry = std::fs::read(work.join("runtime/active_sessions.json")).expect("work's registry");
    assert!(crate::common::process::entries_of(&work_registry).is_empty(), "work is clean");
}

/// A gateway of 10,000 chats: state.db's routing rows are read in one pass (looked up by
/// a scan per key, the read ran past its 5 s bound and every context was unknown).
#[test]
fn ten_thousand_gateway_chats_are_judged_from_state_db_within_its_read_bound() {
    let home = Home::new();
    let gw = Sleeper::new();
    let start = leasectl::lease::owners::liveness::process_start_time(gw.pid()).expect("its start time");
    let now = leasectl::lease::now();
    let key = |i: usize| format!("agent:main:telegram:dm:{}", 100_000 + i);
    let entries: Vec<Value> = (0..10_000)
        .map(|i| {
            serde_json::json!({"lease_id": format!("{i:08x}beefcafe0123456789abcdef"), "pid": gw.pid(),
                "process_start_time": start, "session_id": key(i), "started_at": now - 600.0,
                "surface": "gateway:telegram", "updated_at": now - 600.0,
                "metadata": {"platform": "telegram", "chat_id": (100_000 + i).to_string(), "live_session_id": key(i)}})
        })
        .collect();
    let registry = home.path().join("runtime/active_sessions.json");
    std::fs::create_dir_all(registry.parent().expect("runtime")).expect("runtime");
    std::fs::write(&registry, serde_json::json!({"entries": entries}).to_string()).expect("the registry");
    crate::common::state_db(home.path(), &[]);
    let mut db = rusqlite::Connection::open(home.path().join("state.db")).expect("state.db");
    db.execute_batch(
        "CREATE TABLE gateway_routing (scope TEXT NOT NULL DEFAULT '', session_key TEXT NOT NULL, \
         entry_json TEXT NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (scope, session_key))",
    )
    .expect("gateway_routing");
    let tx = db.transaction().expect("a transaction");
    for i in 0..10_000 {
        let turn = if i % 10 == 0 { Value::from("a273e0ba") } else { Value::Null };
        let entry =
            serde_json::json!({"session_key": key(i), "session_id": format!("s{i}"), "active_turn_token": turn});
        tx.execute(
            "INSERT INTO gateway_routing VALUES ('/s', ?1, ?2, 0)",
            rusqlite::params![key(i), entry.to_string()],
        )
        .expect("a row");
    }
    tx.commit().expect("commit");
    let ls = home.run(&["ls", "--json"]).json();
    assert_eq!(ls["registries"][0]["session_context_unknown"], Value::Null, "read within its bound");
    let leases = ls["registries"][0]["leases"].as_array().expect("leases");
    let count = |m: &str| leases.iter().filter(|l| l["safe_move"] == m).count();
    assert_eq!((count("force-release"), count("wait-for-turn")), (9_000, 1_000));
    assert!(leases.iter().all(|l| l["owner_sessions"] == 10_000), "one gateway holds them all");
}
