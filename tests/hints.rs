//! Every command leasectl suggests (`` `leasectl ...` `` in its messages) is one an
//! operator can paste: it parses as a leasectl command line, carries the registry options
//! and every option that changes what the command does, and does what the message says
//! when a shell runs it as printed.

use std::fs;
use std::path::Path;
use std::process::Command;

use clap::Parser as _;
use leasectl::cli::{Cli, Command as Sub};

use crate::cli_operators::{DEAD, entry, ids_in, write_registry};
use crate::common::process::{BIN, Home, Out, Proc, Sleeper};

/// The quoted commands in `text`, each as the shell would split it (single quotes and
/// backslashes: that is how leasectl quotes).
fn hints_in(text: &str) -> Vec<(String, Vec<String>)> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|quoted| quoted.starts_with("leasectl"))
        .map(|quoted| (quoted.to_owned(), shell_words(quoted)))
        .collect()
}

pub(crate) fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quoted, mut any) = (Vec::new(), String::new(), false, false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' if !quoted => (word, any) = (word + &chars.next().map(String::from).unwrap_or_default(), true),
            '\'' => (quoted, any) = (!quoted, true),
            ' ' if !quoted => {
                if any {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => (word, any) = (word + &c.to_string(), true),
        }
    }
    if any {
        words.push(word);
    }
    words
}

/// Every hint in `out` parses as a leasectl command line and names `home`; returns them.
fn parsed_hints(out: &Out, home: &Path) -> Vec<(String, Cli)> {
    let all = hints_in(&format!("{}\n{}", out.stdout, out.stderr));
    assert!(!all.is_empty(), "no hint in {out:?}");
    all.into_iter()
        .map(|(text, words)| {
            let cli = Cli::try_parse_from(&words).unwrap_or_else(|e| panic!("hint `{text}` does not parse: {e}"));
            assert_eq!(cli.global.home.as_deref(), Some(home), "hint `{text}` names the home used: {out:?}");
            (text, cli)
        })
        .collect()
}

/// Run a hint as a shell would, with leasectl on PATH and no HERMES_HOME or real home to
/// fall back on: it acts where it says or not at all.
fn run_as_printed(hint: &str, home: &Home) -> Out {
    let bin_dir = Path::new(BIN).parent().expect("bin dir");
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(hint).env("PATH", path).env_remove("HERMES_HOME").env("HOME", home.outside());
    Proc::run(hint, cmd)
}

#[test]
fn a_refusals_advice_names_the_holder_and_runs_as_printed() {
    let home = Home::new();
    let owner = Sleeper::new();
    let id = home.acquire_ok(&["S", "--owner-pid", &owner.pid_arg()]);
    crate::common::backdate_leases(home.path(), 2.0 * 86_400.0);
    // Its session ended a day ago (state.db): a leak suspect, which the advice names.
    crate::common::state_db(home.path(), &[("S", Some(86_400.0)), ("A", Some(86_400.0))]);
    let out = home.run(&["acquire", "S"]);
    out.expect_exit(3);
    let hints = parsed_hints(&out, home.path());
    let (text, cli) = hints.iter().find(|(t, _)| t.contains("force-release")).expect("a force-release hint");
    match &cli.command {
        Some(Sub::ForceRelease(a)) => assert!(a.lease_id.as_deref() == Some(id.as_str()) && a.live, "{text}"),
        other => panic!("{text}: {other:?}"),
    }
    run_as_printed(text, &home).expect_exit(0);
    assert!(home.entries().is_empty(), "the advice, pasted, removed the holder's lease");
    // Capacity: the leak suspect is named the same way; JSON's advice too.
    home.acquire_ok(&["A", "--owner-pid", &owner.pid_arg(), "--live-id", "a"]);
    crate::common::backdate_leases(home.path(), 2.0 * 86_400.0);
    let out = home.run(&["acquire", "B", "--max", "1", "--json"]);
    out.expect_exit(4);
    let advice = out.json()["advice"].as_str().unwrap_or_default().to_owned();
    let hints = hints_in(&advice);
    assert!(hints.iter().any(|(t, _)| t.contains("force-release") && t.ends_with("--live")), "{advice}");
    for (text, words) in hints {
        Cli::try_parse_from(&words).unwrap_or_else(|e| panic!("`{text}`: {e}"));
    }
}

#[test]
fn a_lease_found_elsewhere_is_named_with_every_option_given() {
    let home = Home::new();
    let p3 = home.path().join("profiles/p3");
    crate::common::make_profile(&p3);
    write_registry(&p3, &[entry("8f190000000000000000000000000001", "W", DEAD)]);
    let out = home.run(&["force-release", "8f19", "--dry-run"]);
    out.expect_exit(1);
    let hints = parsed_hints(&out, home.path());
    let (text, cli) = &hints[0];
    assert_eq!(cli.global.profile.as_deref(), Some("p3"), "{text}");
    assert!(matches!(&cli.command, Some(Sub::ForceRelease(a)) if a.dry_run), "a dry run stays one: {text}");
    run_as_printed(text, &home).expect_exit(0);
    assert_eq!(ids_in(&p3).len(), 1, "pasted, it changed nothing");
    // release keeps --owner-pid and --json.
    let out = home.run(&["release", "8f19", "--owner-pid", "1", "--json"]);
    out.expect_exit(1);
    let hints = parsed_hints(&out, home.path());
    assert!(matches!(&hints[0].1.command, Some(Sub::Release(a)) if a.json && a.owner_pid == Some(1)), "{out:?}");
}

#[test]
fn doctors_and_releases_hints_run_as_printed() {
    let home = Home::new();
    let work = home.path().join("profiles/work");
    crate::common::make_profile(&work);
    write_registry(&work, &[entry("dead0000000000000000000000000001", "S", DEAD)]);
    let out = home.run(&["--all-profiles", "doctor"]);
    let hints = parsed_hints(&out, home.path());
    let (prune, _) = hints.iter().find(|(t, _)| t.ends_with(" prune")).expect("a prune hint");
    run_as_printed(prune, &home).expect_exit(0);
    assert!(ids_in(&work).is_empty(), "the prune hint, pasted, pruned profile work");
    // A live owner's lease, released by someone else: the hint is force-release --live.
    let owner = Sleeper::new();
    let id = home.acquire_ok(&["T", "--owner-pid", &owner.pid_arg()]);
    let out = home.run(&["release", &id]);
    out.expect_exit(1);
    let hints = parsed_hints(&out, home.path());
    run_as_printed(&hints[0].0, &home).expect_exit(0);
    assert!(home.entries().is_empty(), "{out:?}");
}

#[test]
fn hints_for_an_unusable_registry_and_without_a_terminal_parse() {
    let home = Home::new();
    fs::create_dir_all(home.runtime()).expect("runtime");
    fs::write(home.registry(), "{not json").expect("break it");
    let out = home.run(&["acquire", "S"]);
    out.expect_exit(5);
    parsed_hints(&out, home.path());
    let out = home.run(&["tui"]);
    out.expect_exit(2);
    parsed_hints(&out, home.path());
    let out = home.run(&["events"]);
    parsed_hints(&out, home.path());
}

#[test]
fn a_hint_quotes_a_home_with_spaces_and_quotes() {
    let home = Home::new();
    let odd = home.outside().join("it's a home");
    fs::create_dir_all(odd.join("runtime")).expect("odd home");
    write_registry(&odd, &[entry("dead0000000000000000000000000001", "S", DEAD)]);
    let out = Proc::run("doctor", {
        let mut cmd = Command::new(BIN);
        cmd.arg("--home").arg(&odd).arg("doctor").env_remove("HERMES_HOME");
        cmd
    });
    let hints = parsed_hints(&out, &odd);
    run_as_printed(&hints[0].0, &home).expect_exit(0);
}

/// The console's hints name the registry of the tab they are about (`--home` and
/// `--profile`), in its own words and in the core's: pasted, they act there, not on
/// ~/.hermes (the console knows the registry, not how the operator named it).
#[test]
fn the_consoles_hints_name_the_tabs_registry_and_run_as_printed() {
    use leasectl::lease::{Location, Registry};
    use leasectl::tui::event::Event;
    use leasectl::tui::worker::{Scope, Worker};
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let home = Home::new();
    let work = home.path().join("profiles/work");
    crate::common::make_profile(work.join("runtime"));
    fs::write(work.join("runtime/active_sessions.json"), "{not json").expect("break it");
    let root = Location::File(Registry::new("root", home.path()));
    let scope =
        Scope { locations: vec![root.clone()], discover_root: Some(home.path().to_path_buf()), discover_hosts: false };
    let mut worker = Worker::new(scope, std::time::Duration::from_secs(2), None);
    let mut app = leasectl::tui::state::App::new(vec![root], leasectl::lease::now(), jiff::tz::TimeZone::UTC);
    leasectl::tui::update::update(&mut app, Event::Loaded(worker.reload()));
    app.tab = app.registries.iter().position(|r| r.location.name() == "work").expect("the work tab");
    leasectl::tui::update::update(&mut app, Event::Key(KeyEvent::new(KeyCode::Char('p'), KeyModifiers::NONE)));
    let refused =
        app.log.iter().rev().find(|l| l.text.starts_with("prune refused")).expect("prune refused").text.clone();
    let hints = hints_in(&refused);
    assert!(!hints.is_empty(), "a hint in: {refused}");
    for (text, words) in hints {
        let cli = Cli::try_parse_from(&words).unwrap_or_else(|e| panic!("hint `{text}` does not parse: {e}"));
        assert_eq!(cli.global.home.as_deref(), Some(home.path()), "`{text}` names the home");
        assert_eq!(cli.global.profile.as_deref(), Some("work"), "`{text}` names the profile");
        assert!(matches!(cli.command, Some(Sub::Doctor(_))), "`{text}`");
        // Run as printed (without --yes, no terminal): it looks at profile work's registry.
        let out = run_as_printed(&text, &home);
        let said = format!("{}{}", out.stdout, out.stderr);
        assert!(said.contains("profiles/work/runtime/active_sessions.json"), "`{text}` acted on work: {out:?}");
    }
    // The core's own hints, in an error shown on the console, get the options too.
    let shown = leasectl::lease::words::hint::hinted(
        &app.registries[app.tab].location,
        "(and 2 more problems; run `leasectl doctor`)",
    );
    let (text, words) = hints_in(&shown).remove(0);
    let cli = Cli::try_parse_from(&words).unwrap_or_else(|e| panic!("hint `{text}` does not parse: {e}"));
    assert_eq!(
        (cli.global.home.as_deref(), cli.global.profile.as_deref()),
        (Some(home.path()), Some("work")),
        "{shown}"
    );
}

/// The words a POSIX shell (the machine's `sh`) makes of `line`: each argument of
/// `set -- LINE`, NUL-separated. Quoting that fails would run what it lets through.
fn sh_words(line: &str) -> Vec<String> {
    let script = format!("set -- {line}\nprintf '%s\\0' \"$@\"");
    let out = Command::new("sh").arg("-c").arg(&script).output().expect("run sh");
    assert!(out.status.success(), "sh could not read `{line}`: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("sh printed UTF-8");
    text.split_terminator('\0').map(str::to_owned).collect()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
    /// Every hint, for any home path, profile, lease id or session (anything but a NUL,
    /// which no argument can hold), reads back through a POSIX shell as exactly the words
    /// it was made of: rendered in a core message and from the CLI's own options alike.
    #[test]
    fn every_hint_reads_back_in_sh_as_the_words_it_was_made_of(
        home in "[^\u{0}]{1,24}",
        profile in proptest::option::of("[^\u{0}]{1,12}"),
        other in proptest::option::of(proptest::option::of("[^\u{0}]{1,12}")),
        id in "[^\u{0}]{0,40}",
        session in "[^\u{0}]{0,16}",
    ) {
        use leasectl::lease::words::hint::{self, Reach};
        let mut options = vec!["--home".to_owned(), home.clone()];
        if let Some(p) = &profile {
            options.extend(["--profile".to_owned(), p.clone()]);
        }
        let reach = Reach::with(options.clone());
        let args = ["force-release", id.as_str(), "--session", session.as_str(), "--live"];
        let marked = match &other {
            Some(p) => hint::command_in_profile(p.as_deref(), &args),
            None => hint::command(&args),
        };
        let text = hint::render(&format!("advice: {marked}. done"), &reach);
        let line = text.strip_prefix("advice: `").and_then(|t| t.strip_suffix("`. done"));
        let line = line.unwrap_or_else(|| panic!("the hint is not where it was put: {text:?}"));
        let mut intended = vec!["leasectl".to_owned(), "--home".to_owned(), home.clone()];
        let chosen = match &other {
            Some(p) => p.clone(),
            None => profile.clone(),
        };
        if let Some(p) = chosen {
            intended.extend(["--profile".to_owned(), p]);
        }
        intended.extend(args.iter().map(|a| (*a).to_owned()));
        proptest::prop_assert_eq!(sh_words(line), intended);
    }
}

/// A lease id is whatever the registry says: one planted as `$(...)`, `;` and `#` is one
/// word of the refusal's advice and of the "found in profile" hint when pasted, and runs
/// nothing (before, pasting the advice ran the commands and `#` cut `--dry-run` off).
#[test]
fn a_planted_lease_id_is_one_word_of_every_hint_and_runs_nothing() {
    let home = Home::new();
    let owner = Sleeper::new();
    let pwned = home.outside().join("pwned");
    let id = format!("$(touch {0})abcdef;touch {0};#", pwned.display());
    let live = format!(
        "{{\"lease_id\": {}, \"metadata\": {{}}, \"pid\": {}, \"process_start_time\": null, \"session_id\": \"S\", \
         \"started_at\": 1795990000.5, \"surface\": \"cli\", \"updated_at\": 1795990000.5}}",
        serde_json::to_string(&id).expect("json"),
        owner.pid()
    );
    write_registry(home.path(), &[live]);
    crate::common::state_db(home.path(), &[("S", Some(86_400.0))]);
    let out = home.run(&["acquire", "S"]);
    out.expect_exit(3);
    let text = format!("{}\n{}", out.stdout, out.stderr);
    let hint = text.split('`').skip(1).step_by(2).find(|h| h.contains("force-release")).expect("a force-release hint");
    let words = sh_words(hint);
    assert!(words.contains(&id), "the id is one word of `{hint}`: {words:?}");
    assert_eq!(words.last().map(String::as_str), Some("--live"), "{words:?}");
    assert!(!pwned.exists(), "reading the hint ran a planted command");

    // Found in another profile, with --dry-run: the pasted hint keeps it and changes nothing.
    let p3 = home.path().join("profiles/p3");
    crate::common::make_profile(&p3);
    let dead = format!(
        "{{\"lease_id\": {}, \"metadata\": {{}}, \"pid\": {DEAD}, \"process_start_time\": null, \"session_id\": \"W\", \
         \"started_at\": 1795990000.5, \"surface\": \"cli\", \"updated_at\": 1795990000.5}}",
        serde_json::to_string(&format!("zz{id}")).expect("json"),
    );
    write_registry(&p3, &[dead]);
    let out = home.run(&["force-release", "zz$(touch", "--dry-run"]);
    out.expect_exit(1);
    let text = format!("{}\n{}", out.stdout, out.stderr);
    let hint = text.split('`').skip(1).step_by(2).find(|h| h.contains("p3")).expect("a found-in-p3 hint");
    assert_eq!(sh_words(hint).last().map(String::as_str), Some("--dry-run"), "{hint}");
    run_as_printed(hint, &home).expect_exit(0);
    assert!(!pwned.exists(), "pasting the hint ran a planted command");
    assert_eq!(ids_in(&p3).len(), 1, "a dry run stays a dry run when pasted");
}
