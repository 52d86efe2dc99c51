//! What the Hermes releases in the field decide, and leasectl must not contradict: 0.22's
//! profile rules (identity files, tombstones), 0.19's temp files, an owner `/proc` hides
//! (alive, never pruned), and a lease taken after its session ended (no leak).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::process::{BIN, Home, Proc, Sleeper, leasectl, str_of};

/// `leasectl ARGS` with `HERMES_HOME=home` and no `--home`: how Hermes' own processes name
/// a profile (`HERMES_HOME=<root>/profiles/NAME`).
fn with_hermes_home(home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env("HERMES_HOME", home).stdin(Stdio::null());
    cmd
}

/// `hermes profile delete NAME` on disk: the directory goes, a tombstone is written beside it.
fn delete_profile(root: &Path, name: &str) {
    let _ = fs::remove_dir_all(root.join("profiles").join(name));
    fs::create_dir_all(root.join("profiles/.deleted")).expect("the tombstones' directory");
    fs::write(root.join("profiles/.deleted").join(name), "deleted\n").expect("the tombstone");
}

fn one_lease(session: &str, pid: u64) -> String {
    json!({"entries": [{"lease_id": "aa11", "pid": pid, "process_start_time": null, "session_id": session,
        "started_at": 1.0, "surface": "cli", "updated_at": 1.0}]})
    .to_string()
}

#[test]
fn a_claim_in_a_deleted_or_missing_profile_is_refused_in_hermes_words_and_brings_nothing_back() {
    let home = Home::new();
    let root = home.path();
    fs::write(root.join("config.yaml"), "").expect("the root's config.yaml");
    home.make_profile("gone");
    delete_profile(root, "gone");
    let gone = root.join("profiles/gone");
    let owner = Sleeper::new();
    let pid = owner.pid_arg();
    for args in [
        vec!["acquire", "S1", "--owner-pid", &pid, "--json"],
        vec!["hold", "S1", "--json"],
        vec!["run", "S1", "--json", "--", "true"],
    ] {
        let out = Proc::run(&format!("HERMES_HOME={} {args:?}", gone.display()), with_hermes_home(&gone, &args));
        out.expect_exit(5);
        // `run` keeps stdout for its command: its refusal is on stderr.
        let v = out.try_json().or_else(|| serde_json::from_str(&out.stderr).ok()).unwrap_or_default();
        assert_eq!(v["reason"], "SESSION_COORDINATION_UNAVAILABLE", "{out:?}");
        assert_eq!(v["message_words"], "Hermes 0.22", "{out:?}");
        let message = str_of(&v, "message");
        assert!(message.starts_with(&format!("Named profile home does not exist: {}.", gone.display())), "{message}");
        assert!(message.contains("Create the profile explicitly before using it."), "{message}");
        assert!(message.contains(".deleted/gone marks it deleted"), "{message}");
        assert!(!gone.exists(), "{args:?} brought the deleted profile back to disk");
    }
    // A stale process re-made the directory: still deleted, and nothing is written in it.
    fs::create_dir_all(&gone).expect("a stale mkdir");
    let out = Proc::run("acquire in the re-made dir", with_hermes_home(&gone, &["acquire", "S1", "--owner-pid", &pid]));
    out.expect_exit(5);
    assert!(out.text().contains("`hermes profile create NAME`"), "{out:?}");
    assert!(!gone.join("runtime").exists(), "the claim wrote into a deleted profile");
    // A profile that never was, under a Hermes root: refused as well, and not created.
    let never = root.join("profiles/never");
    let out = Proc::run("acquire in a missing profile", with_hermes_home(&never, &["acquire", "S1", "--json"]));
    out.expect_exit(5);
    assert!(str_of(&out.json(), "message").contains("it is not there"), "{out:?}");
    assert!(!never.exists());
    // The live profile and the root still grant.
    home.make_profile("work");
    let work = root.join("profiles/work");
    let out = Proc::run("acquire in a live profile", with_hermes_home(&work, &["acquire", "W", "--owner-pid", &pid]));
    out.expect_exit(0);
    let out = Proc::run("acquire in the root", with_hermes_home(root, &["acquire", "R", "--owner-pid", &pid]));
    out.expect_exit(0);
}

#[test]
fn all_profiles_lists_live_profiles_and_marks_a_registry_left_where_no_profile_is() {
    let home = Home::new();
    let root = home.path();
    let owner = Sleeper::new();
    home.make_profile("live");
    // A directory with no identity file (a cron side effect): no profile, and empty.
    fs::create_dir_all(root.join("profiles/ghost/logs")).expect("a ghost shell");
    // One with no identity whose registry still holds a lease, and a deleted one that does.
    for name in ["shell", "gone"] {
        fs::create_dir_all(root.join("profiles").join(name).join("runtime")).expect("runtime/");
        fs::write(root.join("profiles").join(name).join("runtime/active_sessions.json"), one_lease("S", owner.pid()))
            .expect("a registry");
    }
    fs::write(root.join("profiles/gone/SOUL.md"), "").expect("an identity file");
    delete_profile(root, "gone");
    fs::create_dir_all(root.join("profiles/gone/runtime")).expect("re-made by a stale process");
    fs::write(root.join("profiles/gone/runtime/active_sessions.json"), one_lease("S", owner.pid())).expect("registry");
    // A name that is no profile id.
    fs::create_dir_all(root.join("profiles/Caps")).expect("mkdir");
    fs::write(root.join("profiles/Caps/config.yaml"), "").expect("config.yaml");

    let out = Proc::run("ls --all-profiles --json", leasectl(root, &["--all-profiles", "ls", "--json"]));
    out.expect_exit(0);
    let registries = out.json()["registries"].as_array().cloned().unwrap_or_default();
    let listed: Vec<(String, Value)> =
        registries.iter().map(|r| (str_of(r, "profile").to_owned(), r["profile_standing"].clone())).collect();
    assert_eq!(
        listed,
        vec![
            ("root".to_owned(), Value::Null),
            ("gone".to_owned(), json!("deleted")),
            ("live".to_owned(), Value::Null),
            ("shell".to_owned(), json!("no-identity")),
        ],
        "{registries:?}"
    );
    for r in &registries[1..] {
        if r["profile_standing"].is_string() {
            assert_eq!(r["leases"].as_array().map(Vec::len), Some(1), "its lease is shown: {r}");
        }
    }
    let out = Proc::run("ls --all-profiles", leasectl(root, &["--all-profiles", "ls"]));
    let text = out.text();
    assert!(text.contains("gone (deleted)  "), "{text}");
    assert!(text.contains("shell (no identity)  "), "{text}");
    assert!(text.contains("not a live profile: profile gone was deleted"), "{text}");
    assert!(!text.contains("ghost") && !text.contains("Caps"), "{text}");
    // Completion offers the live profiles only.
    let out = Proc::run("complete profiles", with_hermes_home(root, &["__complete", "profiles"]));
    assert_eq!(out.text().split_whitespace().collect::<Vec<_>>(), ["live"], "{out:?}");
    // A deleted profile named on its own is listed, marked, too.
    let out = Proc::run("ls --profile gone", leasectl(root, &["--profile", "gone", "ls", "--json"]));
    assert_eq!(out.json()["registries"][0]["profile_standing"], "deleted", "{out:?}");
}

#[test]
fn doctor_names_hermes_0_19s_temp_leftovers_and_repair_removes_them() {
    let home = Home::new();
    home.write_registry(r#"{"entries": []}"#);
    let hex = "0123456789abcdef0123456789abcdef";
    let old_019 = home.runtime().join(format!("active_sessions.json.4242.{hex}.tmp"));
    let old_022 = home.runtime().join(".active_sessions_k2j3h4l5.tmp");
    for t in [&old_019, &old_022] {
        fs::write(t, "{\"entries\": [").expect("a crashed writer's temp file");
        let status = Command::new("touch").args(["-d", "1 minute ago"]).arg(t).status().expect("touch");
        assert!(status.success());
    }
    let out = Proc::run("doctor --json", leasectl(home.path(), &["doctor", "--json"]));
    let v = out.json();
    let listed: Vec<&str> =
        v["registries"][0]["leftover_temp_files"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    assert_eq!(listed.len(), 2, "{v}");
    assert!(listed.iter().any(|p| p.ends_with(&format!("active_sessions.json.4242.{hex}.tmp"))), "{v}");
    let out = Proc::run("doctor", leasectl(home.path(), &["doctor"]));
    let text = out.text();
    assert!(text.contains("(Hermes 0.19): "), "{text}");
    assert!(text.contains("(Hermes 0.21+ or leasectl): "), "{text}");
    assert!(text.contains("`doctor --repair` removes it under the registry's lock"), "{text}");
    let out = Proc::run("doctor --repair --yes", leasectl(home.path(), &["doctor", "--repair", "--yes"]));
    out.expect_exit(0);
    assert!(!old_019.exists() && !old_022.exists(), "{out:?}");
    assert_eq!(home.registry_bytes(), br#"{"entries": []}"#, "the registry is untouched");
}

#[test]
fn a_lease_taken_after_its_session_ended_is_no_leak_suspect() {
    let home = Home::new();
    crate::common::state_db(home.path(), &[("resumed", Some(8.0)), ("leaked", Some(8.0))]);
    let owner = Sleeper::new();
    let pid = owner.pid_arg();
    let start = leasectl::lease::owners::liveness::process_start_time(owner.pid()).expect("the owner's start time");
    let now = leasectl::lease::now();
    // Held from before the end: a leak suspect. Held again after it (to resume it): not.
    let before = json!({"lease_id": "bb22", "pid": owner.pid(), "process_start_time": start, "session_id": "leaked",
        "started_at": now - 100.0, "surface": "cli", "updated_at": now - 100.0});
    home.write_registry(json!({"entries": [before]}).to_string());
    let out = Proc::run("acquire resumed", leasectl(home.path(), &["acquire", "resumed", "--owner-pid", &pid]));
    out.expect_exit(0);
    let out = Proc::run("ls --json", leasectl(home.path(), &["ls", "--json"]));
    let leases = out.json()["registries"][0]["leases"].as_array().cloned().unwrap_or_default();
    let suspect =
        |session: &str| leases.iter().find(|l| l["entry"]["session_id"] == session).map(|l| l["leak_suspect"].clone());
    assert_eq!(suspect("resumed"), Some(Value::Null), "{leases:?}");
    let leaked = suspect("leaked").and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
    assert!(leaked.starts_with("session ended 8s ago (cli_close)"), "{leaked}");
}

// ---------------------------------------------------------------------------
// Hidden is not dead: /proc mounted with hidepid, leasectl run as a second user
// ---------------------------------------------------------------------------

const NOBODY: u32 = 65534;

/// `leasectl --home HOME ARGS` as uid 65534 in a mount namespace whose /proc is mounted
/// `hidepid=invisible`: root's processes are not in it, and kill(pid, 0) answers EPERM.
fn as_nobody_behind_hidepid(home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(
            "mount -t proc -o hidepid=invisible proc /proc && \
             exec setpriv --reuid=65534 --regid=65534 --clear-groups \"$0\" \"$@\"",
        )
        .arg(BIN)
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("HERMES_HOME")
        .stdin(Stdio::null());
    cmd
}

fn chown_tree(dir: &Path) {
    let status = Command::new("chown").args(["-R", "65534:65534"]).arg(dir).status().expect("chown");
    assert!(status.success(), "chown -R {}", dir.display());
}

#[test]
#[ignore = "needs root: mounts /proc with hidepid in a mount namespace and runs leasectl as uid 65534 (.ci/run runs it)"]
fn an_owner_proc_hides_is_hidden_counted_and_never_pruned() {
    let home = Home::new();
    fs::set_permissions(home.outside(), fs::Permissions::from_mode(0o755)).expect("chmod the temp dir");
    // Root's owners, which uid 65534 cannot see: one untracked, one liveness-tracked.
    let hidden = Sleeper::new();
    let start = leasectl::lease::owners::liveness::process_start_time(hidden.pid()).expect("start time");
    let mut gone = Sleeper::new();
    let gone_pid = gone.pid();
    gone.kill();
    let entry = |id: &str, session: &str, pid: u64, tracked: bool| {
        let mut e = json!({"lease_id": id, "pid": pid, "process_start_time": start, "session_id": session,
            "started_at": 1.0, "surface": "gateway", "updated_at": 1.0});
        if tracked {
            e["track_liveness"] = json!(true);
        }
        e
    };
    home.write_registry(
        json!({"entries": [
            entry("a1", "H", hidden.pid(), false),
            entry("b2", "T", hidden.pid(), true),
            entry("d4", "D", gone_pid, false),
        ]})
        .to_string(),
    );
    fs::write(home.path().join("config.yaml"), "max_concurrent_sessions: 3\n").expect("config.yaml");
    chown_tree(home.path());
    // An owner uid 65534 can see: its own process.
    let mut own = Command::new("sleep");
    own.arg("30").uid(NOBODY).gid(NOBODY).stdout(Stdio::null()).stderr(Stdio::null());
    let own = Proc::spawn("sleep 30 as uid 65534", own);
    let own_pid = own.pid().to_string();
    let run = |args: &[&str]| {
        Proc::run(&format!("{args:?} as uid 65534 behind hidepid"), as_nobody_behind_hidepid(home.path(), args))
    };

    let out = run(&["ls", "--json"]);
    out.expect_exit(0);
    let leases = out.json()["registries"][0]["leases"].as_array().cloned().unwrap_or_default();
    let of = |id: &str| leases.iter().find(|l| l["entry"]["lease_id"] == id).cloned().unwrap_or_default();
    assert_eq!(of("a1")["liveness"], "hidden", "{leases:?}");
    let detail = str_of(&of("a1"), "liveness_detail").to_owned();
    assert!(detail.contains("hidepid=invisible") && detail.contains("run as root"), "{detail}");
    assert_eq!(of("d4")["liveness"], "dead", "a pid that is gone is still dead: {leases:?}");
    let text = run(&["ls"]).text();
    assert!(text.contains("2 owners are hidden, kept and counted toward the cap"), "{text}");

    let out = run(&["doctor"]);
    let text = out.text();
    assert!(text.contains("hidden: lease a1") && text.contains("never pruned as dead"), "{text}");

    // prune removes the dead owner's lease only.
    let out = run(&["prune", "--json"]);
    out.expect_exit(0);
    let ids: Vec<String> = home.entries().iter().map(|e| str_of(e, "lease_id").to_owned()).collect();
    assert_eq!(ids, ["a1", "b2"], "{out:?}");

    // The fence: the hidden owners hold their sessions and count toward the cap (3).
    let out = run(&["acquire", "H", "--owner-pid", &own_pid, "--json"]);
    out.expect_exit(3);
    // A tracked owner that cannot be judged refuses a claim of its own session only
    // (Hermes 0.22's scoping); another session is granted beside it.
    let out = run(&["acquire", "T", "--owner-pid", &own_pid, "--json"]);
    out.expect_exit(5);
    assert!(str_of(&out.json(), "message").contains("b2"), "{out:?}");
    let out = run(&["acquire", "S2", "--owner-pid", &own_pid, "--json"]);
    out.expect_exit(0);
    let out = run(&["acquire", "S3", "--owner-pid", &own_pid, "--json"]);
    out.expect_exit(4);
    let ids: Vec<String> = home.entries().iter().map(|e| str_of(e, "session_id").to_owned()).collect();
    assert_eq!(ids, ["H", "T", "S2"], "the hidden owners' leases are kept");

    // stop refuses an owner /proc hides: nothing it cannot tell from another process is signalled.
    let out = run(&["stop", "a1", "--yes"]);
    out.expect_exit(1);
    assert!(out.stderr.contains("cannot be seen from this user") && out.stderr.contains("`sudo leasectl"), "{out:?}");
    assert!(leasectl::lease::owners::liveness::process_start_time(hidden.pid()).is_some(), "not signalled");
    // force-release of a hidden owner's lease needs --live, as a live owner's does.
    let out = run(&["force-release", "a1"]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(home.entries().iter().any(|e| e["lease_id"] == "a1"));
    // Root, who sees every process, sees them alive.
    let out = Proc::run("ls as root", leasectl(home.path(), &["ls", "--json"]));
    let leases = out.json()["registries"][0]["leases"].as_array().cloned().unwrap_or_default();
    assert!(
        leases.iter().filter(|l| l["entry"]["pid"] == hidden.pid()).all(|l| l["liveness"] == "alive"),
        "{leases:?}"
    );
    drop(own);
}
