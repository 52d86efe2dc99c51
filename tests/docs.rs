//! The documents are tests: every `--help` is a reviewed snapshot (a change to one is a
//! diff in `tests/cmd/`), the examples of the README and docs/ run, their shown output
//! compared (`[..]` stands for what differs from run to run: pids, times, paths), every
//! link between them resolves, and no page a user reads carries a commit hash or a
//! before-and-after figure.
//! `TRYCMD=overwrite` rewrites the snapshots after a deliberate change.

use crate::common::process::BIN;

/// Help differs with the etcd feature (its options show only in a build that has it).
const HELP: &str = if cfg!(feature = "etcd") { "tests/cmd/help-etcd/*.toml" } else { "tests/cmd/help/*.toml" };

#[test]
fn every_help_is_as_reviewed() {
    trycmd::TestCases::new().register_bin("leasectl", std::path::Path::new(BIN)).env("COLUMNS", "100").case(HELP);
}

/// A Hermes-like owner process (named `hermes`: a link to sleep), killed when dropped.
struct Owner(std::process::Child);

impl Owner {
    fn start(bin: &std::path::Path) -> Owner {
        let child = std::process::Command::new(bin)
            .arg("600")
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        Owner(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The home the examples of the README and docs/ run on, as they describe it: cap 4, session S1
/// held by two live owners (a conflict), S2 by a dead one, and profile `work` with a
/// dead owner's lease 0f3c9e2a...; every start time real, so liveness is judged for real.
fn readme_home(dir: &std::path::Path) -> (std::path::PathBuf, Vec<Owner>) {
    use std::fs;
    let home = dir.join("hermes");
    let bin = dir.join("bin");
    fs::create_dir_all(&bin).expect("bin");
    let sleep = ["/bin/sleep", "/usr/bin/sleep"].into_iter().find(|p| std::path::Path::new(p).exists());
    std::os::unix::fs::symlink(sleep.expect("sleep(1)"), bin.join("hermes")).expect("link hermes");
    let owners = vec![Owner::start(&bin.join("hermes")), Owner::start(&bin.join("hermes"))];
    let now = leasectl::lease::now();
    let start = |pid: u32| leasectl::lease::owners::liveness::process_start_time(u64::from(pid)).expect("start time");
    let entry = |lease: &str, session: &str, surface: &str, pid: u64, pst: Option<f64>, age: f64, live: &str| {
        serde_json::json!({"lease_id": lease, "session_id": session, "surface": surface, "pid": pid,
            "process_start_time": pst, "started_at": now - age, "updated_at": now - age,
            "metadata": {"live_session_id": live}})
    };
    let write = |home: &std::path::Path, entries: Vec<serde_json::Value>| {
        fs::create_dir_all(home.join("runtime")).expect("runtime");
        let text = serde_json::to_string_pretty(&serde_json::json!({ "entries": entries })).expect("json");
        fs::write(home.join("runtime/active_sessions.json"), text).expect("registry");
    };
    fs::create_dir_all(&home).expect("home");
    fs::write(home.join("config.yaml"), "max_concurrent_sessions: 4\n").expect("config");
    let (a, b) = (owners[0].pid(), owners[1].pid());
    write(
        &home,
        vec![
            entry("010f9e00b1c4d2e3f4a5b6c7d8e9f001", "S1", "cli", a.into(), Some(start(a)), 190.0, "t1"),
            entry("7c01aa52c3d4e5f6a7b8c9d0e1f20002", "S1", "tui", b.into(), Some(start(b)), 70.0, "t2"),
            entry("56252e84d5e6f7a8b9c0d1e2f3a40003", "S2", "desktop", 4_000_000, Some(1.0), 7_500.0, ""),
        ],
    );
    let work = home.join("profiles/work");
    crate::common::make_profile(&work);
    write(&work, vec![entry("0f3c9e2a5b7d4c1e8a6f2d9b0c4e7a13", "W1", "telegram", 4_000_001, Some(1.0), 600.0, "")]);
    (home, owners)
}

/// The pages a reader reads: the README, ARCHITECTURE.md and every file of docs/.
fn documents() -> Vec<std::path::PathBuf> {
    let mut docs: Vec<std::path::PathBuf> = std::fs::read_dir("docs")
        .expect("docs/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    assert!(docs.len() >= 9, "docs/: {docs:?}");
    docs.extend(["README.md", "ARCHITECTURE.md", "benches/README.md", "CHANGELOG.md"].map(std::path::PathBuf::from));
    docs
}

/// Every example with its output in the README and docs/ runs as shown, each page on a
/// home of its own (an example may change the home: a page reads from its own start).
#[test]
fn the_docs_examples_run_as_shown() {
    for doc in documents() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (home, owners) = readme_home(dir.path());
        let cases = trycmd::TestCases::new();
        cases
            .register_bin("leasectl", std::path::Path::new(BIN))
            .env("HERMES_HOME", home.display().to_string())
            .env("HOME", dir.path().display().to_string())
            .env("COLUMNS", "100")
            .case(&doc);
        // The cases run when dropped: while the home's owners live.
        drop(cases);
        drop(owners);
    }
}

/// The leasectl command lines in `text`'s shell examples (```sh blocks, or indented
/// `leasectl ...` lines of a help's Example section), without pipes, redirections and
/// comments, `$$` as a pid.
fn example_lines(text: &str, fenced: bool) -> Vec<String> {
    let mut lines = Vec::new();
    let mut in_sh = !fenced;
    // `E="--backend etcd ..."` then `leasectl $E ls`: the shell's expansion, unquoted.
    let mut vars: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if fenced && line.starts_with("```") {
            in_sh = line == "```sh";
            continue;
        }
        if let Some((name, value)) = line.split_once('=')
            && !name.is_empty()
            && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        {
            vars.push((format!("${name}"), value.trim_matches('"').to_owned()));
            continue;
        }
        let mut line = line.trim().trim_start_matches("$ ").to_owned();
        for (name, value) in &vars {
            line = line.replace(name.as_str(), value);
        }
        if !in_sh || !line.starts_with("leasectl") {
            continue;
        }
        let cut = [" |", " >", " &&", "  #", " #"].iter().filter_map(|c| line.find(c)).min().unwrap_or(line.len());
        lines.push(line[..cut].replace("$$", "1"));
    }
    lines
}

#[test]
fn every_command_line_the_docs_and_help_show_parses() {
    use clap::Parser as _;
    let mut lines: Vec<String> = documents()
        .iter()
        .flat_map(|d| example_lines(&std::fs::read_to_string(d).expect("a document"), true))
        .collect();
    assert!(lines.len() > 20, "the docs' examples: {lines:?}");
    let commands = ["ls", "acquire", "release", "force-release", "prune", "doctor", "run", "hold", "tui", "demo"];
    for command in commands.iter().chain(&["events", "metrics", "completions", "man", "serve", "install"]) {
        let help = crate::cli_operators::leasectl_bare(&[command, "--help"]);
        let examples = help.stdout.split("Example:").nth(1).unwrap_or_default().to_owned();
        let found = example_lines(&examples, false);
        assert!(!found.is_empty(), "{command} --help has an example: {help:?}");
        lines.extend(found);
    }
    for line in &lines {
        let words = crate::hints::shell_words(line);
        if let Err(e) = leasectl::cli::Cli::try_parse_from(&words) {
            // A build without etcd does not know its options: those examples are etcd's.
            let etcd_only = cfg!(not(feature = "etcd")) && line.contains("--backend etcd");
            assert!(etcd_only, "`{line}` does not parse: {e}");
        }
    }
}

/// The examples that acquire (the global help's, acquire's and hold's) run as printed on a
/// machine where the home does not exist yet, as on a fresh one: the fence creates it,
/// as Hermes' does (the global one failed so).
#[test]
fn the_help_examples_that_acquire_run_where_the_home_is_new() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ran = 0;
    for (i, command) in ["", "acquire", "hold"].into_iter().enumerate() {
        let args: Vec<&str> = [command, "--help"].into_iter().filter(|a| !a.is_empty()).collect();
        let help = crate::cli_operators::leasectl_bare(&args);
        let examples = help.stdout.split("Example:").nth(1).unwrap_or_default().to_owned();
        for (j, line) in example_lines(&examples, false).iter().enumerate() {
            if line.contains("--backend etcd") {
                continue;
            }
            // Both the home an example names and the default one are new, in the temp dir.
            let home = dir.path().join(format!("{i}-{j}/.hermes"));
            let line = line.replace("/tmp/h", &home.display().to_string());
            let words = crate::hints::shell_words(&line);
            let mut cmd = std::process::Command::new(BIN);
            cmd.args(&words[1..]).env("HERMES_HOME", &home).stdin(std::process::Stdio::null());
            let registry = home.join("runtime/active_sessions.json");
            if command == "hold" {
                let mut holder = crate::common::process::Proc::spawn(&line, cmd);
                crate::common::process::wait_for(&format!("`{line}` holding"), || registry.exists().then_some(()));
                holder.signal(libc::SIGTERM);
                holder.finish().expect_exit(0);
            } else {
                crate::common::process::Proc::run(&line, cmd).expect_exit(0);
            }
            assert!(registry.is_file(), "`{line}` made no registry in the new home {}", home.display());
            ran += 1;
        }
    }
    assert_eq!(ran, 3, "the global help's, acquire's and hold's examples");
}

/// The recorder's unit the packages install (the .deb's with /usr/bin, the tarball's with
/// /usr/local/bin, where the README's install lines put leasectl).
#[test]
fn the_recorders_systemd_unit_verifies_and_is_hardened() {
    let unit = std::path::Path::new("assets/leasectl-recorder.service");
    crate::common::systemd::verify_unit(unit, "/usr/local/bin/leasectl", std::path::Path::new(BIN));
}

/// ARCHITECTURE.md names every folder and file under `src/` (a file by its name, with or
/// without `.rs`; a folder as `name/`), and every path it names exists in the repository.
#[test]
fn the_architecture_names_every_source_folder_and_file() {
    let text = std::fs::read_to_string("ARCHITECTURE.md").expect("ARCHITECTURE.md");
    let files = crate::common::rust_sources(std::path::Path::new("src"));
    assert!(files.len() > 100, "read src/: {} files", files.len());
    let mut missing: Vec<String> = Vec::new();
    for p in &files {
        let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let named = match stem.as_str() {
            "mod" | "main" | "lib" => {
                text.contains(&format!("{}`", p.display())) || {
                    let folder = p.parent().and_then(|f| f.file_name()).map(|f| f.to_string_lossy().into_owned());
                    let within = folder.map(|f| format!("{f}/mod.rs"));
                    stem == "mod" && within.is_some_and(|w| text.contains(&w)) || text.contains(&format!("`{stem}.rs`"))
                }
            }
            _ => [format!("`{stem}`"), format!("`{stem}.rs`"), format!("/{stem}.rs`")].iter().any(|f| text.contains(f)),
        };
        if !named {
            missing.push(p.display().to_string());
        }
        if let Some(folder) = p.parent().filter(|f| *f != std::path::Path::new("src")) {
            let name = folder.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            if !text.contains(&format!("`{name}/`")) && !text.contains(&format!("`{}/`", folder.display())) {
                missing.push(format!("{}/", folder.display()));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(missing.is_empty(), "under src/, ARCHITECTURE.md does not name: {missing:?}");
    // Every path it names, in backticks: a file or folder of the repository, named whole
    // from the root or by its end (`link/state.rs` under the folder being described).
    let mut everything: Vec<String> = Vec::new();
    let mut stack = vec![std::path::PathBuf::from(".")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a folder").flatten() {
            let path = entry.path();
            let shown = path.strip_prefix(".").unwrap_or(&path).display().to_string();
            if ["target", ".git"].iter().any(|skip| shown == *skip) {
                continue;
            }
            if path.is_dir() {
                everything.push(format!("{shown}/"));
                stack.push(path);
            } else {
                everything.push(shown);
            }
        }
    }
    let exists = |named: &str| everything.iter().any(|p| p == named || p.ends_with(&format!("/{named}")));
    let named_paths: Vec<&str> = text
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| !t.contains(' ') && !t.starts_with(['$', '/', '-']) && !t.contains("::"))
        .filter(|t| t.contains('/') || t.ends_with(".rs") || t.ends_with(".md"))
        .collect();
    assert!(named_paths.len() > 100, "found the paths it names: {named_paths:?}");
    let absent: Vec<&&str> = named_paths.iter().filter(|t| !exists(t)).collect();
    assert!(absent.is_empty(), "ARCHITECTURE.md names paths that do not exist: {absent:?}");
}

/// The names docs/commands.md's JSON section gives for one output (its bullet starting
/// with `` - `{command}` ``): every `"name"` written there.
fn readme_json_names(bullet_start: &str) -> std::collections::BTreeSet<String> {
    let readme = std::fs::read_to_string("docs/commands.md").expect("docs/commands.md");
    let section = &readme[readme.find("## JSON").expect("a JSON section")..];
    let bullet = section
        .lines()
        .find(|l| l.starts_with(&format!("- `{bullet_start}")))
        .unwrap_or_else(|| panic!("a JSON bullet for {bullet_start}"));
    bullet.split('"').skip(1).step_by(2).map(str::to_owned).collect()
}

fn keys(v: &serde_json::Value) -> std::collections::BTreeSet<String> {
    v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()
}

/// The JSON every command prints is docs/commands.md's contract: each key an output has is
/// named in its bullet, and each name the bullet gives for an object is in the output.
#[test]
fn the_json_outputs_are_the_docs_contract() {
    use crate::common::process::{Home, Sleeper};
    let home = Home::new();
    let owner = Sleeper::new();
    let mut gone = Sleeper::new();
    let pid = owner.pid_arg();
    let check = |what: &str, bullet: &str, v: &serde_json::Value, all_named: bool| {
        let named = readme_json_names(bullet);
        let have = keys(v);
        let undocumented: Vec<&String> = have.iter().filter(|k| !named.contains(*k)).collect();
        assert!(undocumented.is_empty(), "{what}: keys docs/commands.md does not name: {undocumented:?} in {v}");
        if all_named {
            let missing: Vec<&String> = named.iter().filter(|k| !have.contains(*k)).collect();
            assert!(
                missing.is_empty(),
                "{what}: names docs/commands.md gives that the output lacks: {missing:?} in {v}"
            );
        }
    };
    let json = |args: &[&str]| home.run(args).json();
    let granted = json(&["acquire", "S", "--owner-pid", &pid, "--json"]);
    let refused = json(&["acquire", "S", "--owner-pid", "1", "--json"]);
    let acquire_keys = |v: &serde_json::Value| keys(v).into_iter().collect::<Vec<_>>();
    let both: serde_json::Value = serde_json::json!(
        acquire_keys(&granted)
            .into_iter()
            .chain(acquire_keys(&refused))
            .map(|k| (k, serde_json::Value::Null))
            .collect::<serde_json::Map<_, _>>()
    );
    check("acquire --json (granted and refused)", "acquire --json", &both, true);
    let id = granted["lease_id"].as_str().unwrap_or_default().to_owned();
    home.run(&["acquire", "T", "--owner-pid", &gone.pid_arg()]).expect_exit(0);
    gone.kill();
    let ls = json(&["ls", "--json"]);
    check("ls --json", "ls --json", &ls, false);
    let registry = &ls["registries"][0];
    let lease = &registry["leases"][0];
    let mut ls_keys = keys(registry);
    ls_keys.extend(keys(lease));
    ls_keys.extend(keys(&lease["owner"]));
    let ls_all = serde_json::Value::Object(ls_keys.into_iter().map(|k| (k, serde_json::Value::Null)).collect());
    check("ls --json, a registry, a lease and its owner", "ls --json", &ls_all, false);
    let doctor = json(&["doctor", "--json"]);
    // doctor's report is written as it is serialized, not as a JSON tree: still in the
    // order a JSON map sorts keys, as every other output (a field out of order fails).
    let written = home.run(&["doctor", "--json"]).stdout;
    let sorted = serde_json::to_string_pretty(&doctor).expect("JSON") + "\n";
    assert_eq!(written, sorted, "doctor --json's keys are in sorted order");
    check("doctor --json", "doctor --json", &doctor, false);
    check("doctor --json's summary", "doctor --json", &doctor["summary"], false);
    check("doctor --json's registry", "doctor --json", &doctor["registries"][0], false);
    // prune's and force-release's removals are written lease by lease too: sorted as well.
    for args in [&["prune", "--dry-run", "--json"][..], &["force-release", "--session", "T", "--dry-run", "--json"]] {
        let written = home.run(args).stdout;
        let value: serde_json::Value = serde_json::from_str(&written).expect("JSON");
        assert!(written.contains("\"removed\": [\n"), "{args:?} removes T's dead lease: {written}");
        let sorted = serde_json::to_string_pretty(&value).expect("JSON") + "\n";
        assert_eq!(written, sorted, "{args:?}: keys in sorted order");
    }
    let fr = json(&["force-release", "--session", "T", "--dry-run", "--json"]);
    check("force-release --json", "force-release --json", &fr, false);
    let released = json(&["release", &id, "--owner-pid", &pid, "--json"]);
    check("release --json", "release --json", &released, true);
    let stopped = Sleeper::new();
    home.run(&["acquire", "U", "--owner-pid", &stopped.pid_arg()]).expect_exit(0);
    let plan = json(&["stop", "--session", "U", "--dry-run", "--json"]);
    check("stop --dry-run --json", "stop --json", &plan, false);
    check("stop --dry-run --json's owner", "stop --json", &plan["owners"][0], false);
    check("stop --dry-run --json's owner's owner", "stop --json", &plan["owners"][0]["owner"], false);
    let done = json(&["stop", "--session", "U", "--yes", "--json"]);
    check("stop --json", "stop --json", &done, false);
    check("stop --json's owner", "stop --json", &done["owners"][0], false);
    check("stop --json's signal", "stop --json", &done["owners"][0]["signals"][0], false);
    check("stop --json's lease", "stop --json", &done["owners"][0]["leases"][0], false);
}

/// Every global option `--help` lists is in docs/commands.md's table of them.
#[test]
fn the_docs_global_options_are_every_one_help_lists() {
    let readme = std::fs::read_to_string("docs/commands.md").expect("docs/commands.md");
    let start = readme.find("Global options (every command").expect("the global options table");
    let table: String = readme[start..].lines().skip(1).take_while(|l| l.is_empty() || l.starts_with('|')).collect();
    let help = crate::common::process::Proc::run("leasectl -h", cmd(&["-h"]));
    let from = &help.stdout[help.stdout.find("Global options:").expect("a Global options heading")..];
    let global: String = from.lines().skip(1).take_while(|l| !l.trim().is_empty()).collect::<Vec<_>>().join("\n");
    let options: Vec<&str> = global
        .split_whitespace()
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.trim_end_matches(','))
        .filter(|w| !["--help", "--version"].contains(w))
        .collect();
    assert!(options.len() >= 7, "{global}");
    let missing: Vec<&&str> = options.iter().filter(|o| !table.contains(&format!("`{o}"))).collect();
    assert!(missing.is_empty(), "global options docs/commands.md's table does not name: {missing:?}");
}

/// Every environment variable leasectl reads for an operator is in the manual's
/// ENVIRONMENT (`LEASECTL_HOSTS` and `LEASECTL_NO_MOUSE` were not).
#[test]
fn the_manuals_environment_names_every_variable_read() {
    let man = crate::common::process::Proc::run("leasectl man", cmd(&["man"]));
    let env = &man.stdout[man.stdout.find(".SH ENVIRONMENT").expect("an ENVIRONMENT section")..];
    let env = &env[..env[4..].find(".SH ").map_or(env.len(), |i| i + 4)];
    // Read for the audit record or the tests, not set by an operator to change what leasectl does.
    let not_settings = [
        "TERM",
        "SUDO_USER",
        "SSH_CONNECTION",
        "LEASECTL_TEST_FAILPOINT",
        "LEASECTL_TEST_GO",
        "LEASECTL_INTERNAL_KEEPER_FOR",
    ];
    let mut read = std::collections::BTreeSet::new();
    for file in crate::common::rust_sources(std::path::Path::new("src")) {
        // `target_env = "gnu"` in a cfg names a C library, not a variable.
        let text = std::fs::read_to_string(&file).expect("source").replace("target_env = \"", "");
        for marker in ["env::var_os(\"", "env::var(\"", "env = \"", "_ENV: &str = \""] {
            for piece in text.split(marker).skip(1) {
                if let Some(name) = piece.split('"').next().filter(|n| !n.is_empty()) {
                    read.insert(name.to_owned());
                }
            }
        }
    }
    assert!(read.contains("LEASECTL_NO_MOUSE") && read.contains("HERMES_HOME"), "{read:?}");
    // etcdctl's variables are read only by a build with etcd, whose manual alone lists them.
    let built = |n: &&String| cfg!(feature = "etcd") || !n.starts_with("ETCDCTL_");
    let missing: Vec<&String> = read
        .iter()
        .filter(built)
        .filter(|n| !not_settings.contains(&n.as_str()) && !env.contains(&n.replace('_', "\\_")))
        .collect();
    let missing: Vec<&&String> = missing.iter().filter(|n| !env.contains(n.as_str())).collect();
    assert!(missing.is_empty(), "variables the manual's ENVIRONMENT does not name: {missing:?}\n{env}");
}

/// Every event a follower can print is named in `events --help` (`repaired`, `gap`,
/// `following` were not).
#[test]
fn events_help_names_every_event() {
    let help = crate::common::process::Proc::run("leasectl events --help", cmd(&["events", "--help"]));
    let text = help.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut names: Vec<&str> = vec![
        "acquired",
        "released",
        "force-released",
        "stopped",
        "pruned",
        "removed",
        "owner-died",
        "owner-recycled",
        "owner-alive",
        "updated",
        "cap-changed",
        "registry-invalid",
        "registry-valid",
        "repaired",
        "gap",
        "following",
        "expired",
        "etcd-unreachable",
        "etcd-reachable",
        "host-unreachable",
        "host-reachable",
    ];
    // The core's own names, so a new one cannot be left out here.
    use leasectl::lease::changes::EventKind;
    for kind in [
        EventKind::Acquired,
        EventKind::Released,
        EventKind::Pruned,
        EventKind::OwnerDied,
        EventKind::OwnerRecycled,
        EventKind::OwnerAlive,
        EventKind::Updated,
    ] {
        names.push(kind.name());
    }
    let missing: Vec<&&str> = names.iter().filter(|n| !text.contains(**n)).collect();
    assert!(missing.is_empty(), "events --help does not name {missing:?}:\n{text}");
}

/// `leasectl ARGS`, without HERMES_HOME.
fn cmd(args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(crate::common::process::BIN);
    c.args(args).env_remove("HERMES_HOME");
    c
}

/// Every relative link in the README, ARCHITECTURE.md and docs/ reaches a file of the
/// repository, and every `#anchor` a heading of the page it names (as GitHub makes
/// anchors: lowercase, spaces as `-`, punctuation dropped).
#[test]
fn every_link_between_the_documents_resolves() {
    let anchors = |path: &std::path::Path| -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut fenced = false;
        let mut found = Vec::new();
        for line in text.lines() {
            if line.starts_with("```") {
                fenced = !fenced;
            }
            if !fenced && line.starts_with('#') {
                let title = line.trim_start_matches('#').trim().to_lowercase();
                let slug: String = title
                    .chars()
                    .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
                    .map(|c| if c == ' ' { '-' } else { c })
                    .collect();
                found.push(slug);
            }
        }
        found
    };
    let mut broken = Vec::new();
    let mut links = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).expect("a document");
        let base = doc.parent().unwrap_or(std::path::Path::new(""));
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = &rest[..end];
            if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                continue;
            }
            links += 1;
            let (file, anchor) = target.split_once('#').map_or((target, None), |(f, a)| (f, Some(a)));
            let path = if file.is_empty() { doc.clone() } else { base.join(file) };
            if !path.exists() {
                broken.push(format!("{}: {target} (no such file)", doc.display()));
                continue;
            }
            if let Some(anchor) = anchor
                && !anchors(&path).iter().any(|a| a == anchor)
            {
                broken.push(format!("{}: {target} (no such heading)", doc.display()));
            }
        }
    }
    assert!(links > 20, "read the links: {links}");
    assert!(broken.is_empty(), "links that do not resolve:\n{}", broken.join("\n"));
}

/// No page a user reads carries a commit hash (history is in the commits and
/// CHANGELOG.md carries none either) or a figure of how a number moved (`was 12 ms`,
/// `874 → 365`): documents say what is, benches/README.md what was measured.
#[test]
fn the_documents_carry_no_commit_hash_and_no_before_and_after_figure() {
    let git = |args: &[&str]| std::process::Command::new("git").args(args).output();
    let in_git = git(&["rev-parse", "--git-dir"]).is_ok_and(|o| o.status.success());
    assert!(in_git, "the test reads the repository's commits: run it in a git checkout");
    let mut found = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).expect("a document");
        for (n, line) in text.lines().enumerate() {
            let at = format!("{}:{}", doc.display(), n + 1);
            for word in line.split(|c: char| !c.is_ascii_alphanumeric()) {
                let hexlike = word.len() >= 7 && word.len() <= 40 && word.chars().all(|c| c.is_ascii_hexdigit());
                let mixed = word.chars().any(|c| c.is_ascii_digit()) && word.chars().any(|c| c.is_ascii_alphabetic());
                if hexlike && mixed {
                    let commit = git(&["rev-parse", "--verify", "--quiet", &format!("{word}^{{commit}}")]);
                    if commit.is_ok_and(|o| o.status.success()) {
                        found.push(format!("{at}: commit {word}"));
                    }
                }
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            for w in words.windows(3) {
                let number = |t: &str| {
                    t.trim_matches(|c: char| !c.is_ascii_digit()).chars().next().is_some_and(|c| c.is_ascii_digit())
                };
                let arrow = ["→", "->"].contains(&w[1]) && number(w[0]) && number(w[2]);
                let was = ["was", "were"].contains(&w[0].to_lowercase().as_str()) && number(w[1]);
                if arrow || was {
                    found.push(format!("{at}: {}", w.join(" ")));
                }
            }
        }
    }
    assert!(found.is_empty(), "history in a document (it belongs in the commits):\n{}", found.join("\n"));
}

/// The README is read in five minutes: at most 300 lines, and every page of docs/ opens
/// with what it is for (a paragraph under its title, before any section).
#[test]
fn the_readme_is_short_and_each_page_says_what_it_is_for() {
    let readme = std::fs::read_to_string("README.md").expect("README.md");
    assert!(readme.lines().count() <= 300, "README.md has {} lines", readme.lines().count());
    for doc in documents().iter().filter(|d| d.starts_with("docs")) {
        let text = std::fs::read_to_string(doc).expect("a page");
        let mut lines = text.lines();
        assert!(lines.next().is_some_and(|l| l.starts_with("# ")), "{} opens with its title", doc.display());
        let opening: Vec<&str> = lines.skip_while(|l| l.is_empty()).take_while(|l| !l.is_empty()).collect();
        assert!(
            opening.first().is_some_and(|l| !l.starts_with('#') && !l.starts_with('|') && !l.starts_with('`')),
            "{} says what it is for before anything else: {opening:?}",
            doc.display()
        );
    }
}

/// Every mark the console's help lists is in docs/console.md's table of marks.
#[test]
fn the_console_guide_names_every_mark_the_help_lists() {
    let source = std::fs::read_to_string("src/tui/dialog_view.rs").expect("src/tui/dialog_view.rs");
    let table = &source[source.find("const MARKS").expect("the console's marks")..];
    let table = &table[..table.find("];").expect("the end of the marks")];
    let marks: Vec<&str> = table.lines().filter_map(|l| l.trim().strip_prefix("(\"")?.split('"').next()).collect();
    assert!(marks.len() > 10, "read the marks: {marks:?}");
    let guide = std::fs::read_to_string("docs/console.md").expect("docs/console.md");
    let missing: Vec<&&str> = marks.iter().filter(|m| !guide.contains(&format!("| `{m}` |"))).collect();
    assert!(missing.is_empty(), "marks docs/console.md does not explain: {missing:?}");
}

/// The screenshots in the README and docs/console.md are made by `assets/screenshots` from
/// the real console: it runs, and what it draws is the console on its home at each size.
#[test]
#[ignore = "needs python3 with pyte (.ci/run installs it and runs this)"]
fn the_screenshots_are_made_from_the_real_console() {
    let out = tempfile::tempdir().expect("temp dir");
    let made = std::process::Command::new("assets/screenshots").arg(BIN).arg(out.path()).output().expect("run it");
    assert!(made.status.success(), "assets/screenshots: {}", String::from_utf8_lossy(&made.stderr));
    for (name, shows) in [
        ("console-80x24.svg", &["chat-review", "CONFLICT", "LEAK?", "✖ dead", "S stop"][..]),
        ("console-200x60.svg", &["details", "owner process", "LEAK?:", "still holds it", "Customer escalation"][..]),
    ] {
        let svg = std::fs::read_to_string(out.path().join(name)).expect("the picture");
        assert!(svg.starts_with("<svg"), "{name} is an SVG");
        let text: String = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>').and_then(|(_, rest)| rest.split_once("</text>")).map(|(t, _)| t))
            .collect::<Vec<_>>()
            .join(" ");
        let missing: Vec<&&str> = shows.iter().filter(|w| !text.contains(*w)).collect();
        assert!(missing.is_empty(), "{name} does not show {missing:?}: {text}");
    }
}
