//! The CLI as operators use it (issue 14): leases found by prefix and across profiles,
//! plans before acting, hints that act on the registry the operator chose.

mod common;

use std::fs;
use std::process::Command;

use common::process::{BIN, Home, Proc, Sleeper, str_of};
use serde_json::Value;

/// An entry as Hermes writes it, owned by `pid` (1 is alive; a huge pid is dead).
fn entry(id: &str, session: &str, pid: u64) -> String {
    format!(
        "{{\"lease_id\": \"{id}\", \"metadata\": {{}}, \"pid\": {pid}, \"process_start_time\": null, \
         \"session_id\": \"{session}\", \"started_at\": 1795990000.5, \"surface\": \"cli\", \"updated_at\": 1795990000.5}}"
    )
}

fn write_registry(home: &std::path::Path, entries: &[String]) {
    let runtime = home.join("runtime");
    fs::create_dir_all(&runtime).expect("runtime/");
    fs::write(runtime.join("active_sessions.json"), format!("{{\"entries\": [{}]}}", entries.join(", ")))
        .expect("registry");
}

fn ids_in(home: &std::path::Path) -> Vec<String> {
    let bytes = fs::read(home.join("runtime/active_sessions.json")).unwrap_or_default();
    common::process::entries_of(&bytes).iter().map(|e| str_of(e, "lease_id").to_owned()).collect()
}

const DEAD: u64 = 4_000_000;

/// The command a message quotes between backticks (the first one).
fn quoted_command(text: &str) -> Vec<String> {
    let start = text.find('`').unwrap_or_else(|| panic!("no quoted command in {text:?}"));
    let rest = &text[start + 1..];
    let end = rest.find('`').expect("closing backtick");
    rest[..end].split_whitespace().map(str::to_owned).collect()
}

#[test]
fn a_unique_prefix_of_four_names_a_lease_and_an_ambiguous_one_lists_the_candidates() {
    let home = Home::new();
    let owner = Sleeper::new();
    write_registry(
        home.path(),
        &[
            entry("0f3c9e2a5b7d4c1e8a6f2d9b0c4e7a13", "S1", DEAD),
            entry("0f3c1111111111111111111111111111", "S2", DEAD),
            entry("7a7a000000000000000000000000beef", "S3", owner.pid()),
        ],
    );
    // force-release by a unique prefix: the whole id is removed.
    let out = home.run(&["force-release", "0f3c9", "--json"]);
    out.expect_exit(0);
    assert_eq!(out.json()["removed"][0]["entry"]["lease_id"], "0f3c9e2a5b7d4c1e8a6f2d9b0c4e7a13", "{out:?}");
    // release by a prefix, for the owner named.
    home.run(&["release", "7a7a", "--owner-pid", &owner.pid_arg()]).expect_exit(0);
    assert!(!home.lease_ids().iter().any(|id| id.starts_with("7a7a")), "released by its prefix");
    // Ambiguous: exit 2, every candidate listed, nothing removed.
    write_registry(
        home.path(),
        &[entry("0f3c9e2a5b7d4c1e8a6f2d9b0c4e7a13", "S1", DEAD), entry("0f3c1111111111111111111111111111", "S2", DEAD)],
    );
    let out = home.run(&["force-release", "0f3c"]);
    out.expect_exit(2);
    for id in ["0f3c9e2a5b7d4c1e8a6f2d9b0c4e7a13", "0f3c1111111111111111111111111111"] {
        assert!(out.stderr.contains(id), "candidate {id} listed: {out:?}");
    }
    assert!(out.stderr.contains("ambiguous"), "{out:?}");
    assert_eq!(home.lease_ids().len(), 2, "nothing removed");
    // Shorter than 4: not a prefix.
    let out = home.run(&["force-release", "0f3"]);
    out.expect_exit(2);
    assert!(out.stderr.contains("at least 4"), "{out:?}");
}

#[test]
fn a_lease_in_another_profile_is_named_with_a_command_that_works_when_copied() {
    let home = Home::new();
    let work = home.path().join("profiles").join("work");
    fs::create_dir_all(&work).expect("profile");
    fs::create_dir_all(home.path().join("profiles/ops")).expect("profile");
    write_registry(&work, &[entry("cafe0000000000000000000000000001", "W1", DEAD)]);
    let out = home.run(&["force-release", "cafe00"]);
    out.expect_exit(1);
    assert!(out.stderr.contains("found in profile work"), "{out:?}");
    let hint = quoted_command(&out.stderr);
    assert_eq!(hint[..5], ["leasectl", "--home", home.path().to_str().expect("utf-8"), "--profile", "work"]);
    // The hint, run as printed (force-release of that lease there).
    let out = Proc::run("the hint", {
        let mut cmd = Command::new(BIN);
        cmd.args(&hint[1..]).env_remove("HERMES_HOME");
        cmd
    });
    out.expect_exit(0);
    assert_eq!(ids_in(&work), Vec::<String>::new(), "the copied hint acted on profile work");
}

#[test]
fn force_release_all_profiles_finds_the_lease_and_releases_a_session_everywhere_or_nowhere() {
    let home = Home::new();
    let (work, ops) = (home.path().join("profiles/work"), home.path().join("profiles/ops"));
    let owner = Sleeper::new();
    write_registry(&work, &[entry("cafe0000000000000000000000000001", "S", DEAD)]);
    write_registry(&ops, &[entry("beef0000000000000000000000000002", "S", DEAD)]);
    write_registry(home.path(), &[entry("d00d0000000000000000000000000003", "S", owner.pid())]);
    // By id: found in the one profile that has it.
    home.run(&["--all-profiles", "force-release", "beef0000"]).expect_exit(0);
    assert_eq!(ids_in(&ops), Vec::<String>::new());
    // By session: the root's owner is alive, so without --live nothing goes anywhere.
    let out = home.run(&["--all-profiles", "force-release", "--session", "S"]);
    out.expect_exit(1);
    assert!(out.stderr.contains("live owner"), "{out:?}");
    assert_eq!(ids_in(&work).len(), 1, "work's dead lease stays: all or nothing");
    // With --live, every registry's leases of S go (with the warning).
    let out = home.run(&["--all-profiles", "force-release", "--session", "S", "--live", "--json"]);
    out.expect_exit(0);
    assert_eq!(out.json()["registries"].as_array().map(Vec::len), Some(2), "{out:?}");
    assert!(out.stderr.contains("WARNING"), "{out:?}");
    assert!(ids_in(&work).is_empty() && ids_in(home.path()).is_empty());
}

#[test]
fn force_release_session_dry_run_shows_what_goes_and_what_would_need_live() {
    let home = Home::new();
    let owner = Sleeper::new();
    write_registry(
        home.path(),
        &[
            entry("dead0000000000000000000000000001", "S", DEAD),
            entry("a11e0000000000000000000000000002", "S", owner.pid()),
        ],
    );
    let before = fs::read(home.registry()).expect("registry");
    let out = home.run(&["force-release", "--session", "S", "--dry-run"]);
    out.expect_exit(0);
    assert!(out.stdout.contains("would remove 1 lease(s)") && out.stdout.contains("dead0000"), "{out:?}");
    assert!(out.stdout.contains("would need --live") && out.stdout.contains("a11e0000"), "{out:?}");
    let out = home.run(&["force-release", "--session", "S", "--dry-run", "--json"]);
    out.expect_exit(0);
    let plan = out.json();
    assert_eq!(plan["removed"][0]["entry"]["lease_id"], "dead0000000000000000000000000001");
    assert_eq!(plan["needs_live"][0]["entry"]["lease_id"], "a11e0000000000000000000000000002");
    assert_eq!(fs::read(home.registry()).expect("registry"), before, "a dry run changes nothing");
}

#[test]
fn hints_carry_the_home_and_profile_the_operator_used() {
    let home = Home::new();
    let work = home.path().join("profiles/work");
    fs::create_dir_all(&work).expect("profile");
    write_registry(&work, &[entry("dead0000000000000000000000000001", "S", DEAD)]);
    let h = home.path().to_str().expect("utf-8");
    let out = home.run(&["--profile", "work", "doctor"]);
    let expected = format!("`leasectl --home {h} --profile work prune`");
    assert!(out.stdout.contains(&expected), "doctor's hint names the registry: {out:?}");
    // A refusal's advice, in text and in JSON.
    let owner = Sleeper::new();
    home.run(&["--profile", "work", "acquire", "T", "--owner-pid", &owner.pid_arg()]).expect_exit(0);
    let out = home.run(&["--profile", "work", "acquire", "T", "--json"]);
    out.expect_exit(3);
    let advice: Value = out.json()["advice"].clone();
    assert!(
        advice.as_str().is_some_and(|a| a.contains(&format!("`leasectl --home {h} --profile work force-release"))),
        "{out:?}"
    );
}
