//! The CLI as operators use it (issue 14): leases found by prefix and across profiles,
//! plans before acting, hints that act on the registry the operator chose.

use crate::common;

use std::fs;
use std::process::Command;

use common::process::{BIN, Home, Proc, Sleeper, str_of};
use serde_json::Value;

/// An entry as Hermes writes it, owned by `pid` (1 is alive; a huge pid is dead).
pub(crate) fn entry(id: &str, session: &str, pid: u64) -> String {
    crate::common::planted(id, session, pid).text()
}

pub(crate) fn write_registry(home: &std::path::Path, entries: &[String]) {
    let runtime = home.join("runtime");
    fs::create_dir_all(&runtime).expect("runtime/");
    common::make_profile_if_one(home);
    fs::write(runtime.join("active_sessions.json"), format!("{{\"entries\": [{}]}}", entries.join(", ")))
        .expect("registry");
}

pub(crate) fn ids_in(home: &std::path::Path) -> Vec<String> {
    let bytes = fs::read(home.join("runtime/active_sessions.json")).unwrap_or_default();
    common::process::entries_of(&bytes).iter().map(|e| str_of(e, "lease_id").to_owned()).collect()
}

pub(crate) const DEAD: u64 = 4_000_000;

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
    assert_eq!(out.stderr.lines().count(), 3, "one line per candidate: {out:?}");
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
    crate::common::make_profile(&work);
    crate::common::make_profile(home.path().join("profiles/ops"));
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
    assert!(out.stdout.contains("would remove 1 lease") && out.stdout.contains("dead0000"), "{out:?}");
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
    crate::common::make_profile(&work);
    write_registry(&work, &[entry("dead0000000000000000000000000001", "S", DEAD)]);
    let h = home.path().to_str().expect("utf-8");
    let out = home.run(&["--profile", "work", "doctor"]);
    let expected = format!("`leasectl --home {h} --profile work prune`");
    assert!(out.stdout.contains(&expected), "doctor's hint names the registry: {out:?}");
    // A refusal's advice, in text and in JSON.
    let owner = Sleeper::new();
    home.run(&["--profile", "work", "acquire", "T", "--owner-pid", &owner.pid_arg()]).expect_exit(0);
    // A leak suspect (its session ended after the lease was taken), so that the advice
    // names a force-release.
    crate::common::backdate_leases(&work, 2.0 * 86_400.0);
    crate::common::state_db(&work, &[("T", Some(86_400.0))]);
    let out = home.run(&["--profile", "work", "acquire", "T", "--json"]);
    out.expect_exit(3);
    let advice: Value = out.json()["advice"].clone();
    assert!(
        advice.as_str().is_some_and(|a| a.contains(&format!("`leasectl --home {h} --profile work force-release"))),
        "{out:?}"
    );
}

/// An entry with a surface and start time of its own.
fn entry_at(id: &str, session: &str, pid: u64, surface: &str, started: f64) -> String {
    format!(
        "{{\"lease_id\": \"{id}\", \"metadata\": {{}}, \"pid\": {pid}, \"process_start_time\": null, \
         \"session_id\": \"{session}\", \"started_at\": {started:?}, \"surface\": \"{surface}\", \"updated_at\": {started:?}}}"
    )
}

/// A home with a cap of 2 and three live owners, two of them on one session, and a dead one.
fn crowded_home(a: &Sleeper, b: &Sleeper, c: &Sleeper) -> Home {
    let home = Home::new();
    fs::write(home.path().join("config.yaml"), "max_concurrent_sessions: 2\n").expect("config");
    write_registry(
        home.path(),
        &[
            entry_at("aaaa0000000000000000000000000001", "S1", a.pid(), "cli", 1_795_990_300.5),
            entry_at("bbbb0000000000000000000000000002", "S1", b.pid(), "tui", 1_795_990_100.5),
            entry_at("cccc0000000000000000000000000003", "S2", c.pid(), "telegram", 1_795_990_200.5),
            entry_at("dddd0000000000000000000000000004", "S3", DEAD, "cli", 1_795_990_000.5),
        ],
    );
    home
}

fn tsv_rows(out: &common::process::Out) -> Vec<Vec<String>> {
    out.stdout.lines().map(|l| l.split('\t').map(str::to_owned).collect()).collect()
}

#[test]
fn ls_filters_sorts_and_marks_conflicts_and_an_over_full_cap() {
    let (a, b, c) = (Sleeper::new(), Sleeper::new(), Sleeper::new());
    let home = crowded_home(&a, &b, &c);
    let out = home.run(&["ls"]);
    out.expect_exit(0);
    assert!(out.stdout.contains("3/2 slots  OVER CAP  1 CONFLICT\n"), "{out:?}");
    let s1_lines: Vec<&str> = out.stdout.lines().filter(|l| l.contains(" S1 ")).collect();
    assert!(s1_lines.len() == 2 && s1_lines.iter().all(|l| l.contains("CONFLICT")), "{out:?}");
    // Filters: by session, surface and liveness; TSV has one line per lease, profile first.
    let out = home.run(&["ls", "-o", "tsv", "--no-headers", "--session", "S1", "--surface", "tui"]);
    out.expect_exit(0);
    let rows = tsv_rows(&out);
    assert_eq!(rows.len(), 1, "{out:?}");
    assert_eq!(rows[0][..3], ["root", "bbbb0000000000000000000000000002", "S1"]);
    assert_eq!(rows[0][9], "CONFLICT,OVER_CAP");
    let out = home.run(&["ls", "-o", "tsv", "--liveness", "dead,recycled"]);
    let rows = tsv_rows(&out);
    assert_eq!(rows[0][0], "PROFILE", "a header line unless --no-headers");
    assert_eq!(rows.len(), 2, "{out:?}");
    assert_eq!(rows[1][1], "dddd0000000000000000000000000004");
    // Sort: age puts the oldest first; pid by number.
    let out = home.run(&["ls", "-o", "tsv", "--no-headers", "--sort", "age"]);
    let ids: Vec<String> = tsv_rows(&out).iter().map(|r| r[1][..4].to_owned()).collect();
    assert_eq!(ids, ["dddd", "bbbb", "cccc", "aaaa"], "{out:?}");
    let out = home.run(&["ls", "-o", "tsv", "--no-headers", "--sort", "session"]);
    let sessions: Vec<String> = tsv_rows(&out).iter().map(|r| r[2].clone()).collect();
    assert_eq!(sessions, ["S1", "S1", "S2", "S3"]);
    // JSON: --json and -o json agree; marks are there.
    let (j1, j2) = (home.run(&["ls", "--json"]), home.run(&["ls", "-o", "json"]));
    assert_eq!(j1.json()["registries"][0]["over_cap"], true);
    assert_eq!(j1.json()["registries"][0]["live"], 3);
    assert_eq!(j1.json()["registries"][0]["leases"][0]["conflict"], true);
    assert_eq!(j1.json()["registries"][0]["leases"][2]["conflict"], false);
    assert_eq!(
        j1.json()["registries"][0]["leases"].as_array().map(Vec::len),
        j2.json()["registries"][0]["leases"].as_array().map(Vec::len)
    );
    // wide: whole ids and the owner's command line.
    let out = home.run(&["ls", "-o", "wide"]);
    assert!(out.stdout.contains("aaaa0000000000000000000000000001") && out.stdout.contains("sleep 30"), "{out:?}");
    assert!(out.stdout.contains("COMMAND"), "{out:?}");
    let out = home.run(&["ls", "-o", "wide", "--no-headers"]);
    assert!(!out.stdout.contains("COMMAND"), "{out:?}");
    // --no-headers: the lease rows only, neither the column names nor each registry's line.
    for format in ["table", "wide"] {
        let out = home.run(&["ls", "-o", format, "--no-headers"]);
        out.expect_exit(0);
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines.len(), 4, "{format}: one line per lease: {out:?}");
        assert!(lines.iter().all(|l| l.len() >= 8 && l[..8].chars().all(|c| c.is_ascii_hexdigit())), "{out:?}");
    }
    // Two formats at once is a usage error, not one of them silently.
    let out = home.run(&["ls", "-o", "tsv", "--json"]);
    out.expect_exit(2);
    assert!(out.stderr.starts_with("leasectl: ") && out.stderr.contains("--json"), "{out:?}");
}

#[test]
fn usage_errors_say_what_to_type_in_our_words() {
    let home = Home::new();
    // One prefix for every error, clap's included.
    for (args, says) in [
        (&["events", "--since", "1x"][..], "not a duration; write it as 2h, 90m"),
        (&["--idle-threshold", "10y", "ls"][..], "not a duration; write it as 2h, 90m"),
        (&["--lock-timeout", "1e300", "ls"][..], "must be between 0 and 86400 seconds"),
        (&["acquire", "S", "--wait", "1e300"][..], "must be between 0 and 31536000 seconds"),
        (&["repair", "--yes"][..], "`leasectl doctor --repair`"),
        (
            &["--all-profiles", "acquire", "S"][..],
            "works with ls, prune, doctor, force-release, stop, events and metrics",
        ),
    ] {
        let out = home.run(args);
        out.expect_exit(2);
        assert!(out.stderr.starts_with("leasectl: ") && out.stderr.contains(says), "{args:?}: {out:?}");
        assert!(!out.stderr.contains("jiff") && !out.stderr.contains("0000000000"), "{args:?}: {out:?}");
    }
    home.run(&["--idle-threshold", "2d", "ls"]).expect_exit(0);
}

#[test]
fn events_print_their_own_formats_with_one_tsv_header() {
    let home = Home::new();
    let owner = Sleeper::new();
    home.run(&["acquire", "S", "--owner-pid", &owner.pid_arg()]).expect_exit(0);
    let out = home.run(&["events", "-o", "tsv"]);
    out.expect_exit(0);
    assert!(out.stdout.starts_with("TIME\tEVENT\t"), "{out:?}");
    let out = home.run(&["events", "-o", "wide"]);
    out.expect_exit(2);
    let help = home.run(&["events", "--help"]);
    assert!(!help.stdout.contains("one table per registry") && help.stdout.contains("One line per event"), "{help:?}");
}

#[test]
fn tsv_fields_never_split_on_hostile_text() {
    let home = Home::new();
    write_registry(home.path(), &[entry_at("eeee0000000000000000000000000005", "a\\tb\\nc", DEAD, "x\\ty", 1.5)]);
    let out = home.run(&["ls", "-o", "tsv", "--no-headers"]);
    out.expect_exit(0);
    let rows = tsv_rows(&out);
    assert_eq!(rows.len(), 1, "one line: {out:?}");
    assert_eq!(rows[0].len(), 12, "twelve fields: {out:?}");
    assert_eq!(rows[0][2], "a\\u{9}b\\u{a}c");
}

#[test]
fn doctor_flags_an_over_full_cap_and_ends_with_a_summary() {
    let (a, b, c) = (Sleeper::new(), Sleeper::new(), Sleeper::new());
    let home = crowded_home(&a, &b, &c);
    crate::common::make_profile(home.path().join("profiles/work"));
    let out = home.run(&["--all-profiles", "doctor"]);
    out.expect_exit(1);
    assert!(out.stdout.contains("OVER CAP: 3 live leases, cap 2"), "{out:?}");
    let last = out.stdout.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        "2 registries, 1 with problems: 0 invalid, 1 conflict, 1 over cap, 1 stale owner, 0 temp files; 0 leak \
         suspects",
        "{out:?}"
    );
    let out = home.run(&["--all-profiles", "doctor", "--json"]);
    let summary = &out.json()["summary"];
    assert_eq!(
        (summary["registries"].as_u64(), summary["over_cap"].as_u64(), summary["stale"].as_u64()),
        (Some(2), Some(1), Some(1))
    );
}

#[test]
fn ls_watch_prints_each_change_as_a_line() {
    let home = Home::new();
    let owner = Sleeper::new();
    write_registry(home.path(), &[entry("f00d0000000000000000000000000001", "OLD", owner.pid())]);
    let mut watch = home.spawn("ls --watch", &["ls", "--watch", "-o", "json"]);
    let event = |watch: &Proc| -> (String, String) {
        let v = watch.json_line();
        (str_of(&v, "event").to_owned(), v["lease"]["entry"]["session_id"].as_str().unwrap_or_default().to_owned())
    };
    assert_eq!(event(&watch), ("present".into(), "OLD".into()));
    let mut dying = Sleeper::new();
    home.run(&["acquire", "NEW", "--owner-pid", &dying.pid_arg()]).expect_exit(0);
    assert_eq!(event(&watch), ("acquired".into(), "NEW".into()));
    dying.kill();
    assert_eq!(event(&watch), ("owner-died".into(), "NEW".into()));
    home.run(&["prune"]).expect_exit(0);
    assert_eq!(event(&watch), ("pruned".into(), "NEW".into()));
    home.run(&["release", "f00d", "--owner-pid", &owner.pid_arg()]).expect_exit(0);
    assert_eq!(event(&watch), ("released".into(), "OLD".into()));
    // SIGTERM, not SIGINT: a shell that starts the tests in the background (`.ci/run &`)
    // leaves SIGINT ignored, and `ls -w` rightly keeps a disposition it inherited.
    watch.signal(libc::SIGTERM);
    let _ = watch.wait();
}

#[test]
fn run_wait_retries_until_the_holder_ends_and_names_it_once() {
    let home = Home::new();
    let mut holder = home.spawn("hold S", &["hold", "S", "--json"]);
    let grant = holder.json_line();
    assert_eq!(grant["granted"], true);
    let marker = home.outside().join("ran");
    let script = format!("touch {}", marker.display());
    let mut waiter = home.spawn("run --wait", &["run", "S", "--wait", "20", "--", "sh", "-c", &script]);
    // The waiter keeps trying (and says once who holds the session) while the holder runs.
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert!(!marker.exists(), "CMD must not run while the session is held");
    holder.signal(libc::SIGTERM);
    holder.finish().expect_exit(0);
    let out = waiter.finish();
    out.expect_exit(0);
    assert!(marker.exists(), "CMD ran once the holder released");
    let named = out.stderr.matches("is held by pid").count();
    assert_eq!(named, 1, "the holder is named once: {out:?}");
    assert!(out.stderr.contains(&format!("held by pid {}", grant["pid"])), "{out:?}");
}

/// A waiter wakes when the registry changes, but a holder that dies changes nothing:
/// its own timer still finds the session free (the dead owner's lease pruned on the way).
#[test]
fn run_wait_gets_a_session_whose_holder_died_without_a_word() {
    let home = Home::new();
    let mut owner = Sleeper::new();
    home.run(&["acquire", "S", "--owner-pid", &owner.pid_arg()]).expect_exit(0);
    let marker = home.outside().join("ran");
    let script = format!("touch {}", marker.display());
    let mut waiter = home.spawn("run --wait", &["run", "S", "--wait", "20", "--", "sh", "-c", &script]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!marker.exists(), "CMD must not run while the session is held");
    owner.kill();
    waiter.finish().expect_exit(0);
    assert!(marker.exists(), "CMD ran once the holder was gone");
}

#[test]
fn run_wait_gives_up_in_time_and_conflict_exit_code_replaces_3_and_4() {
    let home = Home::new();
    let owner = Sleeper::new();
    home.run(&["acquire", "S", "--owner-pid", &owner.pid_arg()]).expect_exit(0);
    let started = std::time::Instant::now();
    let out = home.run(&["run", "S", "--wait", "0.5", "--", "true"]);
    out.expect_exit(3);
    assert!(started.elapsed() >= std::time::Duration::from_millis(500), "it waited: {:?}", started.elapsed());
    assert!(out.stderr.contains("waiting up to"), "{out:?}");
    // Every slot taken is not "held by": the session is free, the cap is full.
    let out = home.run(&["run", "T", "--max", "1", "--wait", "0.3", "--", "true"]);
    out.expect_exit(4);
    assert!(out.stderr.contains("every slot is taken") && !out.stderr.contains("is held by"), "{out:?}");
    // -q: no waiting line either; the refusal itself is still said.
    let out = home.run(&["run", "S", "--wait", "0.3", "-q", "--", "true"]);
    out.expect_exit(3);
    assert!(!out.stderr.contains("waiting") && out.stderr.contains("SESSION_NOT_OWNED"), "{out:?}");
    home.run(&["run", "S", "--conflict-exit-code", "75", "--", "true"]).expect_exit(75);
    // The cap full: 4 becomes N too.
    home.run(&["run", "T", "--max", "1", "--conflict-exit-code", "75", "--", "true"]).expect_exit(75);
    // Not a conflict (an unreadable registry): the usual 5.
    fs::write(home.registry(), "{not json").expect("break the registry");
    home.run(&["run", "S", "--conflict-exit-code", "75", "--", "true"]).expect_exit(5);
}

pub(crate) fn leasectl_bare(args: &[&str]) -> common::process::Out {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env_remove("HERMES_HOME").env("HOME", "/nonexistent-home-for-this-test");
    Proc::run(&args.join(" "), cmd)
}

#[test]
fn completions_load_in_bash_and_name_every_command() {
    let out = leasectl_bare(&["completions", "bash"]);
    out.expect_exit(0);
    for sub in ["ls", "force-release", "doctor", "run", "completions", "man"] {
        assert!(out.stdout.contains(sub), "{sub} completes: {}", &out.stdout[..200.min(out.stdout.len())]);
    }
    // bash loads the script and registers it for leasectl (no home needed to print it).
    let script = format!("{}\ncomplete -p leasectl", out.stdout);
    let loaded = Proc::run("bash", {
        let mut cmd = Command::new("bash");
        cmd.args(["--norc", "-c", &script]);
        cmd
    });
    loaded.expect_exit(0);
    assert!(loaded.stdout.contains("leasectl"), "{loaded:?}");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = leasectl_bare(&["completions", shell]);
        out.expect_exit(0);
        assert!(out.stdout.contains("force-release"), "{shell}: {out:?}");
    }
    leasectl_bare(&["completions", "tcsh"]).expect_exit(2);
}

#[test]
fn the_manual_page_renders_with_man() {
    let out = leasectl_bare(&["man"]);
    out.expect_exit(0);
    assert!(out.stdout.starts_with(".ie") || out.stdout.contains(".TH leasectl"), "roff: {out:?}");
    let page = std::env::temp_dir().join(format!("leasectl-{}.1", std::process::id()));
    fs::write(&page, &out.stdout).expect("write the page");
    let rendered = Proc::run("man -l", {
        let mut cmd = Command::new("man");
        cmd.arg("-l").arg(&page).env("MANPAGER", "cat").env("PAGER", "cat").env("COLUMNS", "100");
        cmd
    });
    let _ = fs::remove_file(&page);
    rendered.expect_exit(0);
    // Every section a manual page has, every command with its own options, and the
    // files and variables leasectl reads.
    let page = &rendered.stdout;
    let sections = ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "EXIT STATUS", "ENVIRONMENT", "FILES"];
    for section in sections.iter().chain(&["SEE ALSO"]) {
        assert!(page.lines().any(|l| l.trim_end() == *section), "section {section} in the page: {page}");
    }
    for command in ["ls", "acquire", "release", "force-release", "prune", "doctor", "run", "hold", "tui", "demo"]
        .iter()
        .chain(&["events", "metrics", "completions", "man"])
    {
        assert!(page.contains(&format!("leasectl {command}\n")), "command {command}: {page}");
    }
    for text in ["--include-clock-step", "--conflict-exit-code", "--metrics-every", "SESSION_NOT_OWNED"] {
        assert!(page.contains(text), "{text} in the page");
    }
    for name in ["HERMES_HOME", "NO_COLOR", "LEASECTL_SYSLOG_SOCKET", "LEASECTL_LEASE_ID"] {
        assert!(page.contains(name), "environment {name}");
    }
    for file in ["active_sessions.json", "active_sessions.lock", "config.yaml", "state.db", "leasectl-audit.jsonl"]
        .iter()
        .chain(&["leasectl-events.jsonl"])
    {
        assert!(page.contains(file), "file {file}");
    }
    // SEE ALSO names only pages this system has.
    let see_also = page.split("SEE ALSO").nth(1).and_then(|rest| rest.split("VERSION").next()).unwrap_or_default();
    for named in see_also.split(|c: char| c == ',' || c == ';' || c.is_whitespace()).filter(|w| w.ends_with(')')) {
        let (name, section) = named.trim_end_matches(')').split_once('(').expect("name(section)");
        let found = Proc::run("man -w", {
            let mut cmd = Command::new("man");
            cmd.args(["-w", section, name]);
            cmd
        });
        found.expect_exit(0);
    }
}

#[test]
fn help_keeps_global_options_apart_and_shows_etcd_only_in_an_etcd_build() {
    let out = leasectl_bare(&["ls", "--help"]);
    out.expect_exit(0);
    let (own, global) = out.stdout.split_once("Global options:").unwrap_or_else(|| panic!("a heading: {out:?}"));
    assert!(own.contains("--session") && !own.contains("--home"), "{out:?}");
    assert!(global.contains("--home") && global.contains("--lock-timeout") && !global.contains("--sort"), "{out:?}");
    let top = leasectl_bare(&["--help"]).stdout;
    let acquire = leasectl_bare(&["acquire", "--help"]).stdout;
    for (text, option) in [(&top, "--endpoints"), (&top, "--backend"), (&acquire, "--ttl")] {
        assert_eq!(text.contains(option), cfg!(feature = "etcd"), "{option} shown only with etcd: {text}");
    }
    for command in ["acquire", "hold", "run"] {
        let help = leasectl_bare(&[command, "--help"]).stdout;
        assert_eq!(help.contains("etcd"), cfg!(feature = "etcd"), "{command} --help: {help}");
    }
    // Completions and the manual offer what help offers, in every shell.
    let man = leasectl_bare(&["man"]).stdout;
    assert_eq!(man.contains("endpoints"), cfg!(feature = "etcd"), "man page");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = leasectl_bare(&["completions", shell]).stdout;
        for option in ["--backend", "--endpoints", "--prefix", "--ttl"] {
            // fish writes `-l endpoints`; the others the option as typed.
            let offered = script.contains(option) || script.contains(&format!("-l {}", &option[2..]));
            assert_eq!(offered, cfg!(feature = "etcd"), "{shell} completes {option}");
        }
    }
}

/// One rule for OWNER everywhere: the name while the owner lives, `-` when dead, and for a
/// recycled pid the process that has it now, marked as not the owner (ls and every plan).
#[test]
fn owner_is_named_by_one_rule_in_ls_and_in_plans() {
    let home = Home::new();
    let live = Sleeper::new();
    let reused = Sleeper::new();
    let start = leasectl::lease::owners::liveness::process_start_time(live.pid()).expect("start time");
    let with_start = |id: &str, session: &str, pid: u64, pst: f64| {
        entry(id, session, pid).replace("\"process_start_time\": null", &format!("\"process_start_time\": {pst:?}"))
    };
    write_registry(
        home.path(),
        &[
            with_start("a1110000000000000000000000000001", "S-LIVE", live.pid(), start),
            // The pid is alive, but not with the owner's start time: another process has it.
            // Not a whole number of seconds from any start time /proc can give (whole
            // seconds of btime plus hundredths): 1.5 was, one run in a hundred, and read
            // as a clock step (CI failed so on c041491).
            with_start("b2220000000000000000000000000002", "S-RECYCLED", reused.pid(), 1.505),
            entry("c3330000000000000000000000000003", "S-DEAD", DEAD),
        ],
    );
    let owner_of = |text: &str, session: &str| -> String {
        let line =
            text.lines().find(|l| l.contains(&format!(" {session} "))).unwrap_or_else(|| panic!("{session}: {text}"));
        line.split("  ").map(str::trim).filter(|c| !c.is_empty()).nth(4).unwrap_or_default().to_owned()
    };
    let ls = home.run(&["ls"]);
    assert_eq!(owner_of(&ls.stdout, "S-LIVE"), "sleep", "{ls:?}");
    assert_eq!(owner_of(&ls.stdout, "S-RECYCLED"), "not owner: sleep", "{ls:?}");
    assert_eq!(owner_of(&ls.stdout, "S-DEAD"), "-", "{ls:?}");
    // A plan names the live owner it would need --live for, not `-`.
    let plan = home.run(&["force-release", "a111", "--dry-run"]);
    plan.expect_exit(0);
    assert_eq!(owner_of(&plan.stdout, "S-LIVE"), "sleep", "{plan:?}");
    let prune = home.run(&["prune", "--dry-run"]);
    assert_eq!(owner_of(&prune.stdout, "S-RECYCLED"), "not owner: sleep", "{prune:?}");
}

/// A reader that stops reading (`| head -1`) ends the command quietly, as it ends `ls`
/// and `kubectl`: no "Broken pipe" error, exit 0, whatever the output's size.
#[test]
fn a_reader_that_closes_the_pipe_ends_the_command_quietly() {
    let home = Home::new();
    // Far more than a pipe's buffer (64 KiB) of output.
    let many: Vec<String> = (0..3000).map(|n| entry(&format!("{n:032x}"), &format!("S{n}"), DEAD)).collect();
    write_registry(home.path(), &many);
    for args in [&["ls", "-o", "json"][..], &["ls"], &["ls", "-o", "tsv"]] {
        // POSIX sh has no PIPESTATUS: leasectl's status and stderr go through files.
        let status = home.outside().join("status");
        let line = format!(
            "('{BIN}' --home '{}' {} 2>'{}.err'; echo $? > '{}') | head -1 >/dev/null",
            home.path().display(),
            args.join(" "),
            status.display(),
            status.display()
        );
        let out = Proc::run("leasectl ... | head -1", {
            let mut cmd = Command::new("sh");
            cmd.arg("-c").arg(line).env_remove("HERMES_HOME");
            cmd
        });
        out.expect_exit(0);
        let status = home.outside().join("status");
        let code = fs::read_to_string(&status).expect("status");
        let err = fs::read_to_string(format!("{}.err", status.display())).expect("stderr");
        assert_eq!(code.trim(), "0", "{args:?}: exit {code}, stderr {err}");
        assert!(err.is_empty(), "{args:?}: quiet, not {err:?}");
    }
}

/// The grant banner shows a session id as refusals do: a control character in it is
/// written visibly, never sent to the terminal.
#[test]
fn the_grant_banner_escapes_the_session_id() {
    let home = Home::new();
    let owner = Sleeper::new();
    let out = home.run(&["acquire", "E2\u{1b}[31mRED", "--owner-pid", &owner.pid_arg()]);
    out.expect_exit(0);
    assert!(!out.stdout.contains('\u{1b}'), "{out:?}");
    assert!(out.stdout.contains("E2\\u{1b}[31mRED"), "{out:?}");
}
