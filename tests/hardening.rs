//! Fault and hostile-input tests for the hardening issue, end to end on the real binary:
//! a corpus of malformed registries (`tests/hostile/`, plus huge, deeply nested and
//! flooding files generated at run time), a crash at each step of the atomic write,
//! write failures (EFBIG, EROFS, ENOSPC), symlinks and FIFOs planted in `runtime/`,
//! a `runtime/` owned by another user, clock steps, and file modes.
//!
//! Every test has its own temp home, always passes `--home`, and removes `HERMES_HOME`
//! from every child's environment. Every wait has a deadline; every child (leasectl,
//! `sh` wrappers that `exec` it, `sleep` owners) is killed and reaped when its guard
//! drops, also when an assertion fails. tmpfs mounts are unmounted by a guard.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::common;
use common::process::{
    BIN, Home, Out, Proc, Sleeper, WAIT, entries_of, label, leasectl, registry_of, runtime_of, temp_files,
};

/// A pid no process can have here (pid_max is far below it): an owner that is dead.
const DEAD_PID: u64 = 2_147_483_646;
const UNAVAILABLE: &str = "SESSION_COORDINATION_UNAVAILABLE";
/// The four crash points of the write path (`LEASECTL_TEST_FAILPOINT`), in order.
const FAILPOINTS: [&str; 4] = ["before-temp-write", "after-temp-write", "before-rename", "after-rename"];

// ---------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------

/// The same, under `sh -c 'PRELUDE; exec leasectl ...'` (ulimit, umask, trap).
fn leasectl_wrapped(prelude: &str, home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("{prelude}; exec \"$0\" \"$@\""))
        .arg(BIN)
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("HERMES_HOME");
    cmd
}

fn me() -> u64 {
    u64::from(std::process::id())
}

/// psutil's start time of a live pid, as leasectl computes it.
fn start_time(pid: u64) -> f64 {
    leasectl::lease::owners::liveness::process_start_time(pid).unwrap_or_else(|| panic!("pid {pid} has no start time"))
}

fn epoch_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

// ---------------------------------------------------------------------------
// Homes and registries
// ---------------------------------------------------------------------------

fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display())).permissions().mode() & 0o7777
}

/// A lease id whose first 8 hex digits (the short id) are `n`.
fn lease_id(n: u32) -> String {
    format!("{n:08x}{}", "0".repeat(24))
}

/// An entry as Hermes writes one.
fn entry(lease: &str, session: &str, pid: u64, process_start_time: Option<f64>) -> Value {
    let live_id = json!({"live_session_id": format!("tab-{session}")});
    crate::common::planted(lease, session, pid)
        .start_time(process_start_time)
        .at(epoch_now() - 60.0)
        .metadata(live_id)
        .value()
}

fn registry_text(entries: &[Value]) -> String {
    json!({ "entries": entries }).to_string()
}

fn has_pid(entries: &[Value], pid: u64) -> bool {
    entries.iter().any(|e| e["pid"] == pid)
}

fn has_session(entries: &[Value], session: &str, pid: u64) -> bool {
    entries.iter().any(|e| e["session_id"] == session && e["pid"] == pid)
}

/// A registry with a few live entries (owned by this test process).
fn few_live_entries() -> String {
    let t = start_time(me());
    registry_text(&[
        entry(&lease_id(0xa), "A", me(), Some(t)),
        entry(&lease_id(0xb), "B", me(), Some(t)),
        entry(&lease_id(0xc), "C", me(), None),
    ])
}

/// Assert an acquire was refused as SESSION_COORDINATION_UNAVAILABLE (exit 5) and
/// that its message mentions `needle`.
fn expect_unavailable(out: &Out, needle: &str) {
    out.expect_exit(5);
    let v = out.json();
    assert_eq!(v["granted"], false, "{out:?}");
    assert_eq!(v["reason"], UNAVAILABLE, "{out:?}");
    let message = v["message"].as_str().unwrap_or_default();
    assert!(message.contains(needle), "the message must mention {needle:?}: {out:?}");
}

fn set_mtime_ago(path: &Path, ago: Duration) {
    let f = OpenOptions::new().write(true).open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    f.set_modified(SystemTime::now() - ago).expect("set mtime");
}

// ---------------------------------------------------------------------------
// 1. The hostile corpus
// ---------------------------------------------------------------------------

/// Every file of `tests/hostile/`: (file, `problems[0].rule`, `problems[0].entry`,
/// a phrase the one-line error must contain). tests/hostile/README.md says what each breaks.
const CORPUS: &[(&str, &str, Option<usize>, &str)] = &[
    ("truncated_empty_file.json", "not_json", None, "EOF while parsing"),
    ("truncated_open_brace.json", "not_json", None, "EOF while parsing"),
    ("truncated_in_key.json", "not_json", None, "EOF while parsing"),
    ("truncated_in_string.json", "not_json", None, "EOF while parsing"),
    ("truncated_in_number.json", "not_json", None, "EOF while parsing"),
    ("truncated_in_escape.json", "not_json", None, "EOF while parsing"),
    ("truncated_after_comma.json", "not_json", None, "EOF while parsing"),
    ("truncated_before_close.json", "not_json", None, "EOF while parsing"),
    ("not_json_text.json", "not_json", None, "not JSON"),
    ("nested_200_deep.json", "not_json", Some(0), "202 levels deep"),
    ("not_json_python_repr.json", "not_json", None, "key must be a string"),
    ("not_json_trailing_comma.json", "not_json", None, "trailing comma"),
    ("not_json_comment.json", "not_json", None, "not JSON"),
    ("not_json_raw_control_char.json", "not_json", None, "control character"),
    ("not_json_nul_after_document.json", "not_json", None, "trailing characters"),
    // Python's json reads these constants; Hermes then refuses a start time that is not finite.
    ("literal_nan.json", "invalid_process_start_time", Some(0), "process_start_time is a number (\"NaN\")"),
    ("literal_infinity.json", "invalid_process_start_time", Some(0), "(\"Infinity\"), not null or a finite"),
    ("literal_negative_infinity.json", "invalid_process_start_time", Some(0), "(\"-Infinity\")"),
    ("lone_high_surrogate.json", "not_json", Some(0), "escape"),
    ("lone_low_surrogate.json", "not_json", Some(0), "surrogate"),
    ("bom_then_garbage.json", "not_json", None, "not JSON"),
    ("bom_twice.json", "not_json", None, "not JSON"),
    ("bom_only.json", "not_json", None, "EOF while parsing"),
    ("trailing_garbage.json", "not_json", None, "trailing characters"),
    ("two_documents.json", "not_json", None, "trailing characters"),
    ("invalid_utf8_byte.json", "unreadable", None, "not UTF-8"),
    ("invalid_utf8_overlong.json", "unreadable", None, "not UTF-8"),
    ("invalid_utf8_cut_sequence.json", "unreadable", None, "not UTF-8"),
    ("invalid_utf8_latin1.json", "unreadable", None, "not UTF-8"),
    ("utf16le_with_bom.json", "unreadable", None, "not UTF-8"),
    ("shape_empty_object.json", "wrong_shape", None, "without an \"entries\" list"),
    ("shape_misspelled_entries.json", "wrong_shape", None, "without an \"entries\" list"),
    ("shape_entries_null.json", "wrong_shape", None, "\"entries\" is null"),
    ("shape_entries_object.json", "wrong_shape", None, "\"entries\" is an object"),
    ("shape_entries_string.json", "wrong_shape", None, "\"entries\" is a string"),
    ("shape_entries_number.json", "wrong_shape", None, "\"entries\" is a number"),
    ("shape_number.json", "wrong_shape", None, "top level is a number"),
    ("shape_string.json", "wrong_shape", None, "top level is a string"),
    ("shape_null.json", "wrong_shape", None, "top level is null"),
    ("shape_bool.json", "wrong_shape", None, "top level is a bool"),
    ("entry_string.json", "non_object_entry", Some(0), "not an object"),
    ("entry_null_after_valid.json", "non_object_entry", Some(1), "not an object"),
    ("entry_list_in_legacy_list.json", "non_object_entry", Some(0), "not an object"),
    ("lease_id_blank.json", "invalid_lease_id", Some(0), "lease_id is blank"),
    ("lease_id_empty.json", "invalid_lease_id", Some(0), "lease_id is blank"),
    ("lease_id_missing.json", "invalid_lease_id", Some(0), "lease_id is missing"),
    ("lease_id_number.json", "invalid_lease_id", Some(0), "lease_id is a number"),
    ("lease_id_null.json", "invalid_lease_id", Some(0), "lease_id is null"),
    ("lease_id_duplicate.json", "duplicate_lease_id", Some(1), "earlier entry"),
    ("lease_id_duplicate_later.json", "duplicate_lease_id", Some(2), "earlier entry"),
    ("session_id_blank.json", "invalid_session_id", Some(0), "session_id is blank"),
    ("session_id_empty.json", "invalid_session_id", Some(0), "session_id is blank"),
    ("session_id_unicode_blank.json", "invalid_session_id", Some(0), "session_id is blank"),
    ("session_id_separator_blank.json", "invalid_session_id", Some(0), "session_id is blank"),
    ("session_id_number.json", "invalid_session_id", Some(0), "session_id is a number"),
    ("session_id_null.json", "invalid_session_id", Some(0), "session_id is null"),
    ("session_id_list.json", "invalid_session_id", Some(0), "session_id is a list"),
    ("session_id_missing.json", "invalid_session_id", Some(0), "session_id is missing"),
    ("legacy_list_empty_session_id.json", "invalid_session_id", Some(0), "session_id is blank"),
    ("pid_bool.json", "invalid_pid", Some(0), "pid is a bool"),
    ("pid_zero.json", "invalid_pid", Some(0), "pid is a number"),
    ("pid_negative.json", "invalid_pid", Some(0), "pid is a number"),
    ("pid_float.json", "invalid_pid", Some(0), "pid is a number"),
    ("pid_exponent.json", "invalid_pid", Some(0), "pid is a number"),
    ("pid_string_non_numeric.json", "invalid_pid", Some(0), "pid is a string"),
    ("pid_string_negative.json", "invalid_pid", Some(0), "pid is a string"),
    ("pid_string_float.json", "invalid_pid", Some(0), "pid is a string"),
    ("pid_object.json", "invalid_pid", Some(0), "pid is an object"),
    ("pid_list.json", "invalid_pid", Some(0), "pid is a list"),
    ("pid_null.json", "invalid_pid", Some(0), "pid is null"),
    ("pid_missing.json", "invalid_pid", Some(0), "pid is missing"),
    ("second_entry_pid_string.json", "invalid_pid", Some(1), "pid is a string"),
    ("surface_number.json", "invalid_surface", Some(0), "surface is a number"),
    ("surface_list.json", "invalid_surface", Some(0), "surface is a list"),
    ("surface_bool.json", "invalid_surface", Some(0), "surface is a bool"),
    ("surface_object.json", "invalid_surface", Some(0), "surface is an object"),
    ("track_liveness_string.json", "invalid_track_liveness", Some(0), "track_liveness is a string"),
    ("track_liveness_number.json", "invalid_track_liveness", Some(0), "track_liveness is a number"),
    ("track_liveness_list.json", "invalid_track_liveness", Some(0), "track_liveness is a list"),
    ("metadata_list.json", "invalid_metadata", Some(0), "metadata is a list"),
    ("metadata_string.json", "invalid_metadata", Some(0), "metadata is a string"),
    ("metadata_bool.json", "invalid_metadata", Some(0), "metadata is a bool"),
    ("pst_nan_string.json", "invalid_process_start_time", Some(0), "process_start_time is a string"),
    ("pst_inf_string.json", "invalid_process_start_time", Some(0), "process_start_time is a string"),
    ("pst_negative_infinity_string.json", "invalid_process_start_time", Some(0), "process_start_time is a string"),
    ("pst_object.json", "invalid_process_start_time", Some(0), "process_start_time is an object"),
    ("pst_list.json", "invalid_process_start_time", Some(0), "process_start_time is a list"),
    ("pst_non_numeric_string.json", "invalid_process_start_time", Some(0), "process_start_time is a string"),
    ("pst_blank_string.json", "invalid_process_start_time", Some(0), "process_start_time is blank"),
    ("pst_overflow.json", "invalid_process_start_time", Some(0), "process_start_time is a number"),
    ("every_entry_rule_at_once.json", "invalid_lease_id", Some(0), "lease_id is blank"),
];

fn hostile_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("hostile")
}

/// What one hostile file must produce. `prelude` wraps each command (e.g. a ulimit).
struct Expect<'a> {
    name: &'a str,
    rule: &'a str,
    entry: Option<usize>,
    phrase: &'a str,
    prelude: Option<&'a str>,
}

/// Put `bytes` at the registry path of a fresh home, then check (a) `ls --json` exits
/// 1 with a precise error, (b) `acquire S --json` exits 5 with SESSION_COORDINATION_UNAVAILABLE
/// and the same error, (c) `doctor --json` exits 1 naming the rule (and entry),
/// (d) the file is byte-identical and no temp file appeared. Returns what failed.
fn check_hostile(x: &Expect, bytes: &[u8]) -> Vec<String> {
    let home = Home::new();
    home.write_registry(bytes);
    let path = home.registry();
    let run_one = |args: &[&str]| {
        let cmd = match x.prelude {
            Some(p) => leasectl_wrapped(p, home.path(), args),
            None => home.cmd(args),
        };
        Proc::run(&format!("[{}] {}", x.name, label(args)), cmd)
    };
    let mut failed = Vec::new();
    let mut fail = |what: String| failed.push(format!("{}: {what}", x.name));

    // (c) first: its message is the precise text the other two must carry.
    let doctor = run_one(&["doctor", "--json"]);
    let mut first_problem = String::new();
    match doctor.try_json() {
        Some(v) if doctor.status.code() == Some(1) && v["ok"] == false => {
            let p = &v["registries"][0]["problems"][0];
            if p["rule"] != x.rule {
                fail(format!("doctor rule {} != {}: {doctor:?}", p["rule"], x.rule));
            }
            if p["entry"] != json!(x.entry) {
                fail(format!("doctor entry {} != {:?}: {doctor:?}", p["entry"], x.entry));
            }
            first_problem = p["message"].as_str().unwrap_or_default().to_owned();
            if first_problem.is_empty() {
                fail(format!("doctor problem without a message: {doctor:?}"));
            }
        }
        _ => fail(format!("doctor must exit 1 with ok=false JSON: {doctor:?}")),
    }

    // (a)
    let ls = run_one(&["ls", "--json"]);
    let mut error = String::new();
    match ls.try_json() {
        Some(v) if ls.status.code() == Some(1) => {
            error = v["registries"][0]["error"].as_str().unwrap_or_default().to_owned();
            let mut must = vec![path.display().to_string(), x.phrase.to_owned(), first_problem.clone()];
            if let Some(i) = x.entry {
                must.push(format!("entry {i}"));
            }
            for m in must.iter().filter(|m| !error.contains(m.as_str())) {
                fail(format!("ls error {error:?} does not contain {m:?}"));
            }
            if v["registries"][0]["leases"] != json!([]) {
                fail(format!("ls listed leases of an invalid registry: {ls:?}"));
            }
        }
        _ => fail(format!("ls must exit 1 with JSON: {ls:?}")),
    }

    // (b)
    let acquire = run_one(&["acquire", "S", "--json"]);
    match acquire.try_json() {
        Some(v) if acquire.status.code() == Some(5) => {
            let message = v["message"].as_str().unwrap_or_default();
            if v["granted"] != false || v["reason"] != UNAVAILABLE {
                fail(format!("acquire must be refused with {UNAVAILABLE}: {acquire:?}"));
            }
            if error.is_empty() || !message.contains(&error) {
                fail(format!("acquire message does not carry the ls error {error:?}: {acquire:?}"));
            }
        }
        _ => fail(format!("acquire must exit 5 with JSON: {acquire:?}")),
    }

    // (d)
    match fs::read(&path) {
        Ok(after) if after == bytes => {}
        Ok(after) => fail(format!("registry changed: {} bytes before, {} after", bytes.len(), after.len())),
        Err(e) => fail(format!("registry unreadable afterwards: {e}")),
    }
    if !home.temp_files().is_empty() {
        fail(format!("temp files left: {:?}", home.temp_files()));
    }
    failed
}

fn assert_none_failed(failed: &[String]) {
    assert!(failed.is_empty(), "{} check(s) failed:\n\n{}", failed.len(), failed.join("\n\n"));
}

/// Every hostile file of the committed corpus is refused precisely and never touched:
/// `ls` exits 1 with an error naming the file, the rule's detail and the entry; `acquire`
/// exits 5 (SESSION_COORDINATION_UNAVAILABLE) carrying that error; `doctor` exits 1 with the
/// expected rule code and entry index as its first problem; the bytes are identical after.
/// What Python's json (and so Hermes) reads but standard JSON has not: NaN, Infinity,
/// -Infinity and a number beyond a double (Python's infinity), in metadata, a time, an
/// unknown field and the top level. leasectl reads the registry, shows such a time as
/// unknown, prints standard JSON (null) itself, and every rewrite keeps the constants as
/// Hermes writes them.
#[test]
fn python_constants_in_a_registry_are_read_kept_and_shown_as_unknown() {
    let home = Home::new();
    let owner = Sleeper::new();
    let live = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let dead = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    home.write_registry(format!(
        r#"{{"entries": [{{"lease_id": "{live}", "metadata": {{"live_session_id": "t", "ratio": NaN}}, "pid": {}, "process_start_time": null, "session_id": "S1", "started_at": NaN, "surface": "cli", "updated_at": Infinity, "x_future": Infinity}}, {{"lease_id": "{dead}", "pid": {DEAD_PID}, "process_start_time": null, "session_id": "S9", "started_at": 1795989978.5, "surface": "cli", "x": 1e400}}], "written_by": -Infinity}}"#,
        owner.pid()
    ));
    let kept = format!(
        r#"{{"lease_id": "{live}", "metadata": {{"live_session_id": "t", "ratio": NaN}}, "pid": {}, "process_start_time": null, "session_id": "S1", "started_at": NaN, "surface": "cli", "updated_at": Infinity, "x_future": Infinity}}"#,
        owner.pid()
    );

    let ls = home.run(&["ls", "--json"]);
    ls.expect_exit(0);
    let v = ls.json();
    let leases = v["registries"][0]["leases"].as_array().cloned().unwrap_or_default();
    assert_eq!(leases.len(), 2, "{ls:?}");
    assert_eq!(leases[0]["entry"]["metadata"]["ratio"], Value::Null, "standard JSON out: {ls:?}");
    assert_eq!(leases[0]["entry"]["started_at"], Value::Null, "{ls:?}");
    assert_eq!(leases[1]["entry"]["x"], Value::Null, "1e400 is Python's infinity: {ls:?}");
    let table = home.run(&["ls"]);
    table.expect_exit(0);
    let row = table.stdout.lines().find(|l| l.contains("aaaaaaaa")).unwrap_or_default().to_owned();
    assert!(row.contains(" - ") && !row.contains("0s"), "a NaN start is an unknown age: {table:?}");
    home.run(&["doctor"]).expect_exit(0);

    // A rewrite by the fence (the dead owner pruned, a lease added) keeps every constant.
    let s2 = Sleeper::new();
    let grant = home.run(&["acquire", "S2", "--owner-pid", &s2.pid_arg(), "--json"]);
    grant.expect_exit(0);
    let text = String::from_utf8(home.registry_bytes()).expect("utf-8");
    assert!(text.starts_with(&format!(r#"{{"entries": [{kept}, {{"lease_id": ""#)), "{text}");
    assert!(text.ends_with(r#"}], "written_by": -Infinity}"#), "{text}");
    assert!(!text.contains(dead), "the dead owner's lease was pruned: {text}");
    let python = Command::new("python3")
        .args(["-c", "import json,sys; d=json.load(open(sys.argv[1])); print(len(d['entries']), d['written_by'])"])
        .arg(home.registry())
        .output()
        .expect("python3 runs");
    assert_eq!(String::from_utf8_lossy(&python.stdout).trim(), "2 -inf", "Python reads what leasectl wrote");
}

#[test]
fn hostile_corpus_is_refused_precisely_and_left_byte_identical() {
    let dir = hostile_dir();
    let mut on_disk: Vec<String> = fs::read_dir(&dir)
        .expect("tests/hostile exists")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    on_disk.sort();
    let mut in_table: Vec<String> = CORPUS.iter().map(|c| c.0.to_owned()).collect();
    in_table.sort();
    assert_eq!(on_disk, in_table, "tests/hostile/*.json and the CORPUS table must list the same files");
    assert!(CORPUS.len() >= 30, "at least 30 hostile files");
    let readme = fs::read_to_string(dir.join("README.md")).expect("tests/hostile/README.md");
    for (name, rule, ..) in CORPUS {
        assert!(readme.contains(&format!("`{name}` | `{rule}`")), "README.md must list {name} with {rule}");
    }

    // Two workers: each file gets its own home; the table is checked in two halves.
    let (left, right) = CORPUS.split_at(CORPUS.len() / 2);
    let check_all = |part: &'static [(&'static str, &'static str, Option<usize>, &'static str)]| {
        let dir = dir.clone();
        thread::spawn(move || {
            let mut failed = Vec::new();
            for (name, rule, entry, phrase) in part {
                let bytes = fs::read(dir.join(name)).expect("read hostile file");
                let x = Expect { name, rule, entry: *entry, phrase, prelude: None };
                failed.extend(check_hostile(&x, &bytes));
            }
            failed
        })
    };
    let (a, b) = (check_all(left), check_all(right));
    let mut failed = a.join().expect("worker");
    failed.extend(b.join().expect("worker"));
    assert_none_failed(&failed);
}

/// Extra promises of two corpus files: doctor lists every broken rule of an entry in
/// Hermes' order (not just the first), and flags an empty session id as such.
#[test]
fn doctor_lists_every_broken_rule_in_hermes_order() {
    let home = Home::new();
    home.write_registry(fs::read(hostile_dir().join("every_entry_rule_at_once.json")).expect("read"));
    let out = home.run(&["doctor", "--json"]);
    out.expect_exit(1);
    let rules: Vec<Value> = out.json()["registries"][0]["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .map(|p| p["rule"].clone())
        .collect();
    let want = [
        "invalid_lease_id",
        "invalid_session_id",
        "invalid_pid",
        "invalid_surface",
        "invalid_track_liveness",
        "invalid_metadata",
        "invalid_process_start_time",
    ];
    assert_eq!(rules, want.map(Value::from).to_vec(), "{out:?}");

    let home = Home::new();
    home.write_registry(fs::read(hostile_dir().join("session_id_empty.json")).expect("read"));
    let out = home.run(&["doctor", "--json"]);
    out.expect_exit(1);
    assert_eq!(out.json()["registries"][0]["empty_session_ids"], json!([0]), "{out:?}");
}

/// A 100 MB registry (a valid prefix, then a 100 MB string) is refused by the 64 MiB
/// limit without being read whole: under a 200 MB virtual-memory limit, `ls`, `acquire`
/// and `doctor` still exit 1/5/1 (no crash, no abort) with a message naming the size
/// limit, and the file is byte-identical afterwards.
#[test]
fn hundred_megabyte_registry_is_refused_within_bounded_memory() {
    let mut bytes = Vec::with_capacity(100 * 1024 * 1024 + 200);
    bytes.extend_from_slice(
        br#"{"entries": [{"lease_id": "0123456789abcdef0123456789abcdef", "session_id": "S1", "pid": 4242, "pad": ""#,
    );
    bytes.resize(bytes.len() + 100 * 1024 * 1024, b'x');
    bytes.extend_from_slice(br#""}]}"#);
    let x = Expect {
        name: "generated 100 MB registry",
        rule: "unreadable",
        entry: None,
        phrase: "larger than the 64 MiB limit",
        prelude: Some("ulimit -v 200000"),
    };
    assert_none_failed(&check_hostile(&x, &bytes));
}

/// 100,000 nested `[` (and 100,000 nested `{"a": ` inside "entries"), unclosed or
/// closed, are refused as not JSON (end of input, or the parser's recursion limit)
/// without a stack overflow, precisely and without touching the file.
#[test]
fn deeply_nested_registries_are_refused_without_overflowing_the_stack() {
    let mut failed = Vec::new();
    let brackets = vec![b'['; 100_000];
    let x = Expect {
        name: "generated 100,000 [",
        rule: "not_json",
        entry: None,
        phrase: "EOF while parsing",
        prelude: Some("ulimit -v 200000"),
    };
    failed.extend(check_hostile(&x, &brackets));
    // Closed: the outer list is read, and the one deep entry is refused naming its depth.
    let mut closed = vec![b'['; 100_000];
    closed.extend(vec![b']'; 100_000]);
    let deep = Expect { name: "generated 100,000 [ closed", entry: Some(0), phrase: "99999 levels deep", ..x };
    failed.extend(check_hostile(&deep, &closed));
    let mut objects = b"{\"entries\": [".to_vec();
    for _ in 0..100_000 {
        objects.extend_from_slice(b"{\"a\": ");
    }
    let x = Expect { name: "generated 100,000 {\"a\": ", ..x };
    failed.extend(check_hostile(&x, &objects));
    assert_none_failed(&failed);
}

/// A registry UNDER the 64 MiB size limit cannot exhaust memory either: a 60 MB flood of
/// `{}` entries is refused (ls 1, acquire 5, doctor 1) within 400 MB of virtual memory,
/// and the file is left as it was.
#[test]
fn flood_of_empty_entries_under_the_size_limit_is_refused_within_bounded_memory() {
    let n = 60 * 1024 * 1024 / 4;
    let mut bytes = Vec::with_capacity(n * 4 + 16);
    bytes.extend_from_slice(b"{\"entries\": [");
    for i in 0..n {
        bytes.extend_from_slice(if i + 1 == n { b"{}]}" } else { b"{}, " });
    }
    let x = Expect {
        name: "generated 60 MB of {} entries",
        rule: "unreadable",
        entry: None,
        phrase: "JSON values",
        prelude: Some("ulimit -v 400000"),
    };
    // Counted before parsing: more than store::MAX_JSON_VALUES values are refused, so
    // 15.7 M entries never become a tree (that would take gigabytes).
    assert_none_failed(&check_hostile(&x, &bytes));
}

/// Non-regular files at the registry path are refused, bounded in time: a directory
/// ("is a directory") and a symlink to /dev/zero ("not a regular file", under a 200 MB
/// ulimit) make ls exit 1, acquire exit 5 and doctor exit 1 naming `unreadable`.
#[test]
fn directory_or_endless_device_at_the_registry_path_is_refused() {
    let home = Home::new();
    fs::create_dir_all(home.registry()).expect("a directory as the registry");
    let out = home.run(&["ls", "--json"]);
    out.expect_exit(1);
    assert!(out.json()["registries"][0]["error"].as_str().unwrap_or_default().contains("is a directory"), "{out:?}");
    expect_unavailable(&home.run(&["acquire", "S", "--json"]), "is a directory");
    let out = home.run(&["doctor", "--json"]);
    out.expect_exit(1);
    assert_eq!(out.json()["registries"][0]["problems"][0]["rule"], "unreadable", "{out:?}");
    assert!(home.registry().is_dir() && home.temp_files().is_empty());

    let home = Home::new();
    fs::create_dir_all(home.runtime()).expect("runtime/");
    symlink("/dev/zero", home.registry()).expect("symlink to /dev/zero");
    let limited = |args: &[&str]| Proc::run(&label(args), leasectl_wrapped("ulimit -v 200000", home.path(), args));
    let out = limited(&["ls", "--json"]);
    out.expect_exit(1);
    assert!(
        out.json()["registries"][0]["error"].as_str().unwrap_or_default().contains("is a symlink to /dev/zero"),
        "{out:?}"
    );
    expect_unavailable(&limited(&["acquire", "S", "--json"]), "is a symlink to /dev/zero");
    let out = limited(&["doctor", "--json"]);
    out.expect_exit(1);
    assert_eq!(out.json()["registries"][0]["problems"][0]["rule"], "unreadable", "{out:?}");
    assert_eq!(fs::read_link(home.registry()).expect("still the symlink"), Path::new("/dev/zero"));
}

/// A FIFO planted at the registry path, or as the lock file, cannot hang leasectl: `ls`,
/// `acquire --lock-timeout 1` and `doctor` each finish within 5 s with exit 1/5/1 (a FIFO
/// has no writer, so opening or reading it would block forever; an acquire blocked there
/// also holds the registry lock, and Hermes waits for that lock without a bound).
#[test]
fn fifo_planted_as_registry_or_lock_file_does_not_hang() {
    let fifo = |path: &Path| {
        fs::create_dir_all(path.parent().expect("parent")).expect("runtime/");
        let made = common::signals::mkfifo(path);
        assert!(made.is_ok(), "mkfifo {}: {made:?}", path.display());
    };
    let reg_home = Home::new();
    fifo(&reg_home.registry());
    let lock_home = Home::new();
    fifo(&lock_home.lock_file());

    // All at once, so the whole test is bounded by one 5 s deadline.
    let cases: [(&Home, &str, &[&str], i32); 4] = [
        (&reg_home, "registry", &["ls", "--json"], 1),
        (&reg_home, "registry", &["--lock-timeout", "1", "acquire", "S", "--json"], 5),
        (&reg_home, "registry", &["doctor", "--json"], 1),
        (&lock_home, "lock file", &["--lock-timeout", "1", "acquire", "S", "--json"], 5),
    ];
    let mut running: Vec<(String, Proc, i32)> = cases
        .iter()
        .map(|(home, planted, args, code)| {
            let what = format!("{} with a FIFO as the {planted}", label(args));
            let child = Proc::spawn(&what, home.cmd(args));
            (what, child, *code)
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut failed = Vec::new();
    for (what, child, code) in &mut running {
        match child.finish_within(deadline.saturating_duration_since(Instant::now())) {
            Ok(out) if out.status.code() == Some(*code) => {}
            Ok(out) => failed.push(format!("{what}: wanted exit {code}: {out:?}")),
            Err(out) => failed.push(format!("{what}: HUNG for 5 s and was killed: {out:?}")),
        }
    }
    // Fixed: the registry and the lock file are opened O_NONBLOCK and refused unless
    // fstat shows a regular file, so none of these can block.
    assert_none_failed(&failed);
}

// ---------------------------------------------------------------------------
// 2. A crash at each step of the write
// ---------------------------------------------------------------------------

/// SIGKILL at `step` during an acquire (a `sleep 30` as owner) on a registry holding a
/// dead owner and a live one; then check old-or-new bytes, the lock, doctor's view of
/// the leftover temp file, and that the next acquire prunes the dead owner.
fn crash_at(step: &str) {
    let home = Home::new();
    let dead = entry(&lease_id(0xdead), "D", DEAD_PID, None);
    let live = entry(&lease_id(0x11fe), "L", me(), Some(start_time(me())));
    home.write_registry(registry_text(&[dead, live]));
    let old = home.registry_bytes();
    let reg_mode = mode_of(&home.registry());
    let owner = Sleeper::new();
    let pid = owner.pid_arg();

    let mut cmd = home.cmd(&["acquire", "S", "--owner-pid", &pid, "--json"]);
    cmd.env("LEASECTL_TEST_FAILPOINT", step);
    let out = Proc::run(&format!("acquire S crashing at {step}"), cmd);
    assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{step}: must die by SIGKILL: {out:?}");
    assert!(out.stdout.is_empty(), "{step}: nothing printed before the crash: {out:?}");

    let after = home.registry_bytes();
    let renamed = step == "after-rename";
    if renamed {
        let entries = entries_of(&after);
        assert!(has_session(&entries, "S", owner.pid()), "{step}: the new registry holds the new lease: {entries:?}");
        assert!(has_session(&entries, "L", me()), "{step}: the live entry survives: {entries:?}");
        assert!(!has_pid(&entries, DEAD_PID), "{step}: the new registry is pruned: {entries:?}");
    } else {
        assert!(after == old, "{step}: the registry must be byte-identical to the old one");
    }

    // A temp file is left only by a crash before the rename; it holds nothing or the
    // complete new registry, and is never wider than the registry's mode.
    let temps = home.temp_files();
    if renamed {
        assert!(temps.is_empty(), "{step}: {temps:?}");
    } else {
        assert_eq!(temps.len(), 1, "{step}: one leftover temp file: {temps:?}");
        let tmp = &temps[0];
        let content = fs::read(tmp).expect("read temp");
        if step == "before-temp-write" {
            assert!(content.is_empty(), "{step}: nothing written yet");
        } else {
            let entries = entries_of(&content);
            assert!(has_session(&entries, "S", owner.pid()) && !has_pid(&entries, DEAD_PID), "{step}: {entries:?}");
        }
        assert_eq!(mode_of(tmp), reg_mode, "{step}: temp mode");
    }

    // doctor: a fresh temp file may be a write in progress; only one older than 10 s is reported.
    let doctor = |want: i32| {
        let out = home.run(&["doctor", "--json"]);
        out.expect_exit(want);
        out.json()["registries"][0]["leftover_temp_files"].clone()
    };
    assert_eq!(doctor(0), json!([]), "{step}: a fresh temp file is not reported");
    if let Some(tmp) = temps.first() {
        set_mtime_ago(tmp, Duration::from_secs(5));
        assert_eq!(doctor(0), json!([]), "{step}: a 5 s old temp file is not reported");
        set_mtime_ago(tmp, Duration::from_secs(60));
        assert_eq!(doctor(1), json!([tmp.display().to_string()]), "{step}: a 60 s old temp file is reported");
    }

    // The lock died with the crashed writer: the next acquire gets it within 0.5 s
    // and prunes the dead owner (already gone from the renamed registry).
    let next = home.run(&["--lock-timeout", "0.5", "acquire", "T", "--json"]);
    next.expect_exit(0);
    let v = next.json();
    assert_eq!(v["granted"], true, "{next:?}");
    let pruned: Vec<u64> = v["pruned"].as_array().expect("pruned").iter().filter_map(|e| e["pid"].as_u64()).collect();
    assert_eq!(pruned, if renamed { vec![] } else { vec![DEAD_PID] }, "{step}: {next:?}");
    let entries = home.entries();
    assert!(!has_pid(&entries, DEAD_PID), "{step}: {entries:?}");
    assert!(has_session(&entries, "T", me()) && has_session(&entries, "L", me()), "{step}: {entries:?}");
    assert_eq!(
        has_pid(&entries, owner.pid()),
        renamed,
        "{step}: the crashed acquire's owner is recorded only after the rename: {entries:?}"
    );
}

/// A SIGKILL just after the temp file is created (nothing written) leaves the old
/// registry byte-identical, the lock free, an empty temp file doctor reports only once
/// older than 10 s, and the next acquire prunes the dead owner.
#[test]
#[cfg_attr(not(feature = "failpoints"), ignore = "needs --features failpoints")]
fn crash_before_temp_write_keeps_the_old_registry() {
    crash_at(FAILPOINTS[0]);
}

/// A SIGKILL after the temp file is written (not yet fsynced) leaves the old registry
/// byte-identical, the lock free, a complete temp file, and the next acquire prunes.
#[test]
#[cfg_attr(not(feature = "failpoints"), ignore = "needs --features failpoints")]
fn crash_after_temp_write_keeps_the_old_registry() {
    crash_at(FAILPOINTS[1]);
}

/// A SIGKILL after the fsync, just before the rename, leaves the old registry
/// byte-identical, the lock free, a complete temp file, and the next acquire prunes.
#[test]
#[cfg_attr(not(feature = "failpoints"), ignore = "needs --features failpoints")]
fn crash_before_rename_keeps_the_old_registry() {
    crash_at(FAILPOINTS[2]);
}

/// A SIGKILL just after the rename leaves the complete new registry (with the crashed
/// acquire's owner, the dead owner pruned), no temp file, and the lock free.
#[test]
#[cfg_attr(not(feature = "failpoints"), ignore = "needs --features failpoints")]
fn crash_after_rename_leaves_the_new_registry() {
    crash_at(FAILPOINTS[3]);
}

// ---------------------------------------------------------------------------
// 3. Write failures
// ---------------------------------------------------------------------------

/// An exceeded file-size limit (EFBIG; SIGXFSZ ignored) while writing the temp file
/// refuses the acquire with SESSION_COORDINATION_UNAVAILABLE naming "File too large",
/// leaves the registry byte-identical and removes the temp file.
#[test]
fn file_size_limit_on_write_refuses_and_keeps_the_old_registry() {
    let home = Home::new();
    home.write_registry(few_live_entries());
    let old = home.registry_bytes();
    let owner = Sleeper::new();
    let pid = owner.pid_arg();
    let args = ["acquire", "S", "--owner-pid", &pid, "--json"];
    let out = Proc::run(&label(&args), leasectl_wrapped("trap '' XFSZ; ulimit -f 0", home.path(), &args));
    expect_unavailable(&out, "File too large");
    assert!(home.registry_bytes() == old, "registry must be byte-identical");
    assert_eq!(home.temp_files(), Vec::<PathBuf>::new(), "temp file removed");
}

/// A tmpfs mounted for one test, unmounted (lazily if busy) when dropped.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mount; None (after a loud message) when mounting is not permitted here.
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        fs::create_dir_all(dir).expect("mount point");
        let mut cmd = Command::new("mount");
        cmd.args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(dir);
        let out = Proc::run("mount tmpfs", cmd);
        if out.status.success() {
            return Some(Tmpfs { dir: dir.to_path_buf() });
        }
        let why = out.stderr.to_lowercase();
        if why.contains("permission denied") || why.contains("not permitted") || why.contains("superuser") {
            eprintln!("\n!!!!!!!! SKIPPED: mount refused (EPERM), this test did NOT run: {out:?}\n");
            return None;
        }
        panic!("mount failed: {out:?}");
    }

    fn remount_read_only(&self) {
        let mut cmd = Command::new("mount");
        cmd.args(["-o", "remount,ro"]).arg(&self.dir);
        let out = Proc::run("remount ro", cmd);
        assert!(out.status.success(), "{out:?}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let mut cmd = Command::new("umount");
        cmd.arg(&self.dir);
        let ok = Proc::spawn("umount", cmd).finish_within(WAIT).is_ok_and(|o| o.status.success());
        if !ok {
            let mut cmd = Command::new("umount");
            cmd.arg("-l").arg(&self.dir);
            let _ = Proc::spawn("umount -l", cmd).finish_within(WAIT);
        }
    }
}

/// On a read-only file system (tmpfs remounted ro) acquire refuses with
/// SESSION_COORDINATION_UNAVAILABLE naming "Read-only file system" (the lock file cannot
/// even be opened for writing there), the registry is byte-identical, no temp file;
/// the read-only commands still work.
#[test]
fn read_only_file_system_refuses_and_keeps_the_old_registry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(fs_ro) = Tmpfs::mount(&dir.path().join("mnt"), "1m") else { return };
    let home = fs_ro.dir.join("home");
    fs::create_dir_all(runtime_of(&home)).expect("runtime/");
    fs::write(registry_of(&home), few_live_entries()).expect("registry");
    File::create(runtime_of(&home).join("active_sessions.lock")).expect("lock file");
    let old = fs::read(registry_of(&home)).expect("read");
    fs_ro.remount_read_only();
    let owner = Sleeper::new();
    let pid = owner.pid_arg();
    let args = ["acquire", "S", "--owner-pid", &pid, "--json"];
    expect_unavailable(&Proc::run(&label(&args), leasectl(&home, &args)), "Read-only file system");
    assert!(fs::read(registry_of(&home)).expect("read") == old, "registry must be byte-identical");
    assert_eq!(temp_files(&runtime_of(&home)), Vec::<PathBuf>::new());
    let ls = Proc::run("ls", leasectl(&home, &["ls", "--json"]));
    ls.expect_exit(0);
    assert_eq!(ls.json()["registries"][0]["leases"].as_array().map(Vec::len), Some(3), "{ls:?}");
    Proc::run("doctor", leasectl(&home, &["doctor", "--json"])).expect_exit(0);
    drop(fs_ro);
}

/// With the file system full (a 16 KiB tmpfs filled by a filler file) writing the temp
/// file fails with ENOSPC: acquire refuses with SESSION_COORDINATION_UNAVAILABLE naming
/// "No space left on device", the registry is byte-identical and the temp file is removed.
#[test]
fn full_file_system_refuses_and_keeps_the_old_registry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(full) = Tmpfs::mount(&dir.path().join("mnt"), "16k") else { return };
    let home = full.dir.join("home");
    fs::create_dir_all(runtime_of(&home)).expect("runtime/");
    fs::write(registry_of(&home), few_live_entries()).expect("registry");
    File::create(runtime_of(&home).join("active_sessions.lock")).expect("lock file");
    let old = fs::read(registry_of(&home)).expect("read");
    let mut filler = File::create(full.dir.join("filler")).expect("filler");
    for chunk in [4096, 1] {
        let buf = vec![b'f'; chunk];
        let err = loop {
            if let Err(e) = filler.write_all(&buf) {
                break e;
            }
        };
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "filling: {err}");
    }
    drop(filler);
    let owner = Sleeper::new();
    let pid = owner.pid_arg();
    let args = ["acquire", "S", "--owner-pid", &pid, "--json"];
    expect_unavailable(&Proc::run(&label(&args), leasectl(&home, &args)), "No space left on device");
    assert!(fs::read(registry_of(&home)).expect("read") == old, "registry must be byte-identical");
    assert_eq!(temp_files(&runtime_of(&home)), Vec::<PathBuf>::new(), "temp file removed");
    drop(full);
}

// ---------------------------------------------------------------------------
// 4. Symlinks planted in runtime/
// ---------------------------------------------------------------------------

/// The registry is a symlink to a valid registry outside runtime/: acquire (and prune)
/// refuse, naming the symlink, and the outside file is byte-identical and still the
/// link's target. `ls` does not read through it either (exit 1, naming the symlink):
/// nothing in a home is opened through a symlink.
#[test]
fn registry_symlink_is_never_written_through() {
    let home = Home::new();
    fs::create_dir_all(home.runtime()).expect("runtime/");
    let outside = home.outside().join("elsewhere.json");
    let text = registry_text(&[
        entry(&lease_id(0x11fe), "L", me(), Some(start_time(me()))),
        entry(&lease_id(0xdead), "D", DEAD_PID, None),
    ]);
    fs::write(&outside, &text).expect("outside registry");
    symlink(&outside, home.registry()).expect("plant the symlink");

    // Not even read through: the one door never follows a symlink in a home.
    let ls = home.run(&["ls", "--json"]);
    ls.expect_exit(1);
    assert!(ls.json()["registries"][0]["error"].as_str().unwrap_or_default().contains("is a symlink"), "{ls:?}");

    expect_unavailable(&home.run(&["acquire", "S", "--json"]), "symlink");
    let prune = home.run(&["prune", "--json"]);
    prune.expect_exit(5);
    assert!(prune.text().contains("symlink"), "{prune:?}");

    assert_eq!(fs::read_to_string(&outside).expect("outside"), text, "outside file untouched");
    assert_eq!(fs::read_link(home.registry()).expect("still a symlink"), outside);
    assert_eq!(home.temp_files(), Vec::<PathBuf>::new());
}

/// The lock file is a symlink to a path outside runtime/ (missing, or an existing
/// file): acquire refuses with a message naming the symlink, never creates or changes
/// the outside file, and writes no registry.
#[test]
fn lock_file_symlink_is_never_followed() {
    for existing in [false, true] {
        let home = Home::new();
        fs::create_dir_all(home.runtime()).expect("runtime/");
        let outside = home.outside().join("planted.lock");
        if existing {
            fs::write(&outside, "keep").expect("outside file");
        }
        symlink(&outside, home.lock_file()).expect("plant the symlink");
        expect_unavailable(&home.run(&["acquire", "S", "--json"]), "symlink");
        if existing {
            assert_eq!(fs::read_to_string(&outside).expect("outside"), "keep");
        } else {
            assert!(fs::symlink_metadata(&outside).is_err(), "the outside target must not be created");
        }
        assert!(!home.registry().exists(), "no registry written");
        assert_eq!(fs::read_link(home.lock_file()).expect("still a symlink"), outside);
    }
}

/// The C source of an LD_PRELOAD shim: the first $HARDENING_ZERO_TEMP_NAMES 8-byte
/// getrandom() calls (leasectl's temp names; lease ids take 16) return zeros, which
/// names the temp file `.active_sessions_aaaaaaaa.tmp`: a planted collision, for sure.
const ZERO_TEMP_NAME_SHIM: &str = r#"
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>
static long zeroed = 0;
ssize_t getrandom(void *buf, size_t len, unsigned int flags) {
    const char *n = getenv("HARDENING_ZERO_TEMP_NAMES");
    if (len == 8 && n && zeroed < atol(n)) { zeroed++; memset(buf, 0, len); return (ssize_t)len; }
    return syscall(SYS_getrandom, buf, len, flags);
}
"#;

/// Symlinks planted under temp-file names, pointing outside runtime/, are never
/// followed: a normal acquire succeeds and the outside targets are neither created nor
/// changed. With the temp name forced to collide (getrandom shim): one collision, and
/// O_EXCL makes it try another name and succeed; only collisions, and it refuses
/// ("File exists") with the registry byte-identical. Never through the link.
#[test]
fn symlink_planted_as_temp_file_is_never_followed() {
    let home = Home::new();
    home.write_registry(registry_text(&[entry(&lease_id(0x11fe), "L", me(), Some(start_time(me())))]));
    let victim = home.outside().join("victim");
    let existing = home.outside().join("existing");
    fs::write(&existing, "keep").expect("outside file");
    let forced = home.runtime().join(".active_sessions_aaaaaaaa.tmp");
    symlink(&victim, &forced).expect("plant");
    symlink(&existing, home.runtime().join(".active_sessions_zzzzzzzz.tmp")).expect("plant");
    let untouched = || {
        assert!(fs::symlink_metadata(&victim).is_err(), "the outside target must not be created");
        assert_eq!(fs::read_to_string(&existing).expect("outside"), "keep");
        assert_eq!(fs::read_link(&forced).expect("still a symlink"), victim);
    };

    let out = home.run(&["acquire", "S", "--json"]);
    out.expect_exit(0);
    untouched();

    // Force the collision with an LD_PRELOAD shim built here.
    let src = home.outside().join("shim.c");
    let so = home.outside().join("shim.so");
    fs::write(&src, ZERO_TEMP_NAME_SHIM).expect("shim source");
    let mut cc = Command::new("cc");
    cc.args(["-shared", "-fPIC", "-O2", "-o"]).arg(&so).arg(&src);
    // cargo links with `cc`: wherever the tests build, there is one.
    let Some(built) = Proc::try_run("cc (getrandom shim)", cc) else {
        panic!("no C compiler (cc): the forced temp-name collision cannot be tested");
    };
    assert!(built.status.success(), "building the getrandom shim failed: {built:?}");
    let with_shim = |session: &str, zeros: &str| {
        let mut cmd = home.cmd(&["acquire", session, "--json"]);
        cmd.env("LD_PRELOAD", &so).env("HARDENING_ZERO_TEMP_NAMES", zeros);
        Proc::run(&format!("acquire {session} with {zeros} colliding temp name(s)"), cmd)
    };
    let out = with_shim("T", "1");
    out.expect_exit(0);
    untouched();
    let before = home.registry_bytes();
    expect_unavailable(&with_shim("U", "1000"), "File exists");
    untouched();
    assert!(home.registry_bytes() == before, "registry must be byte-identical after the refusal");
    let sessions: Vec<Value> = home.entries().iter().map(|e| e["session_id"].clone()).collect();
    assert_eq!(sessions, vec![json!("L"), json!("S"), json!("T")]);
}

// ---------------------------------------------------------------------------
// 5. runtime/ owned by another user
// ---------------------------------------------------------------------------

/// leasectl running as uid 65534 refuses to rewrite a registry in a runtime/ owned by
/// uid 0 (even one that is mode 0777): acquire fails (exit 5) saying the directory
/// belongs to uid 0 and refusing; the registry is byte-identical, no temp file.
#[test]
fn runtime_owned_by_another_user_is_not_written() {
    let home = Home::new();
    // The temp dir is 0700: let uid 65534 reach the home.
    fs::set_permissions(home.outside(), fs::Permissions::from_mode(0o755)).expect("chmod tmp");
    home.write_registry(registry_text(&[entry(&lease_id(0x11fe), "L", me(), Some(start_time(me())))]));
    fs::set_permissions(home.runtime(), fs::Permissions::from_mode(0o777)).expect("chmod runtime");
    fs::set_permissions(home.registry(), fs::Permissions::from_mode(0o644)).expect("chmod registry");
    let old = home.registry_bytes();
    let as_nobody = |args: &[&str]| {
        let mut cmd = home.cmd(args);
        cmd.uid(65534).gid(65534);
        Proc::run(&format!("{} as uid 65534", label(args)), cmd)
    };
    let ls = as_nobody(&["ls", "--json"]);
    ls.expect_exit(0);

    let out = as_nobody(&["acquire", "S", "--json"]);
    assert!(matches!(out.status.code(), Some(5 | 1)), "{out:?}");
    let text = out.text();
    assert!(text.contains("belongs to uid 0") && text.contains("refusing"), "{out:?}");
    if out.status.code() == Some(5) {
        assert_eq!(out.json()["reason"], UNAVAILABLE, "{out:?}");
    }
    assert!(home.registry_bytes() == old, "registry must be byte-identical");
    assert_eq!(home.temp_files(), Vec::<PathBuf>::new());
}

// ---------------------------------------------------------------------------
// 6. Clock step
// ---------------------------------------------------------------------------

/// An owner whose recorded start time is its real one + 3.0 s (whole seconds) is
/// recycled with "clock step?" (JSON detail and the human table's
/// "recycled (clock step?)"); +3.5 s is recycled without it; and an acquire of the
/// same session prunes the clock-stepped owner (Hermes' rule decides, not the hint).
#[test]
fn clock_step_is_flagged_but_judged_by_hermes_rule() {
    let (stepped, off) = (Sleeper::new(), Sleeper::new());
    let (step_id, off_id) = (lease_id(0x5e9_0001), lease_id(0x0ff_0002));
    let home = Home::new();
    home.write_registry(registry_text(&[
        entry(&step_id, "S", stepped.pid(), Some(start_time(stepped.pid()) + 3.0)),
        entry(&off_id, "R", off.pid(), Some(start_time(off.pid()) + 3.5)),
    ]));

    let ls = home.run(&["ls", "--json"]);
    ls.expect_exit(0);
    let leases = ls.json()["registries"][0]["leases"].clone();
    let lease = |id: &str| {
        leases.as_array().expect("leases").iter().find(|l| l["entry"]["lease_id"] == id).cloned().expect("listed")
    };
    let (s, r) = (lease(&step_id), lease(&off_id));
    assert_eq!(s["liveness"], "recycled", "{s}");
    assert!(s["liveness_detail"].as_str().unwrap_or_default().contains("clock step?"), "{s}");
    assert_eq!(r["liveness"], "recycled", "{r}");
    assert!(!r["liveness_detail"].as_str().unwrap_or_default().contains("clock step"), "{r}");

    let human = home.run(&["ls"]);
    human.expect_exit(0);
    let row = |id: &str| human.stdout.lines().find(|l| l.contains(&id[..8])).unwrap_or_default().to_owned();
    assert!(row(&step_id).contains("recycled (clock step?)"), "{human:?}");
    assert!(row(&off_id).contains("recycled") && !row(&off_id).contains("clock step"), "{human:?}");

    let out = home.run(&["acquire", "S", "--json"]);
    out.expect_exit(0);
    let v = out.json();
    assert_eq!(v["granted"], true, "{out:?}");
    assert!(v["pruned"].as_array().expect("pruned").iter().any(|e| e["lease_id"] == step_id.as_str()), "{out:?}");
    let entries = home.entries();
    assert!(!has_pid(&entries, stepped.pid()) && has_session(&entries, "S", me()), "{entries:?}");
}

// ---------------------------------------------------------------------------
// 7. File modes
// ---------------------------------------------------------------------------

/// Under umask 077 a new registry, its temp file and the lock file are created 0600
/// (and runtime/ 0700); an existing 0640 (or 0600) registry keeps its mode when
/// rewritten under umask 000, and its temp file (seen by crashing before the write and
/// before the rename) is never wider than the registry.
#[test]
#[cfg_attr(not(feature = "failpoints"), ignore = "needs --features failpoints")]
fn file_modes_are_never_wider_than_the_registry_or_umask_allows() {
    let owner = Sleeper::new();
    let pid = owner.pid_arg();
    let args = ["acquire", "S", "--owner-pid", &pid, "--json"];

    // A new registry under umask 077.
    let home = Home::new();
    let out = Proc::run(&label(&args), leasectl_wrapped("umask 077", home.path(), &args));
    out.expect_exit(0);
    assert_eq!(mode_of(&home.registry()), 0o600, "new registry");
    assert_eq!(mode_of(&home.lock_file()), 0o600, "new lock file");
    assert_eq!(mode_of(&home.runtime()), 0o700, "new runtime/");
    // Its temp file, caught by a crash before anything is written to it.
    let home = Home::new();
    let mut cmd = leasectl_wrapped("umask 077", home.path(), &args);
    cmd.env("LEASECTL_TEST_FAILPOINT", "before-temp-write");
    let out = Proc::run("acquire crashing before the temp write", cmd);
    assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{out:?}");
    let temps = home.temp_files();
    assert_eq!(temps.len(), 1, "{temps:?}");
    assert_eq!(mode_of(&temps[0]), 0o600, "temp file of a new registry");

    // An existing registry's mode, kept under umask 000.
    for mode in [0o640, 0o600] {
        let home = Home::new();
        home.write_registry(few_live_entries());
        fs::set_permissions(home.registry(), fs::Permissions::from_mode(mode)).expect("chmod");
        for step in ["before-temp-write", "before-rename"] {
            let mut cmd = leasectl_wrapped("umask 000", home.path(), &args);
            cmd.env("LEASECTL_TEST_FAILPOINT", step);
            let out = Proc::run(&format!("acquire crashing at {step}"), cmd);
            assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{out:?}");
            let temps = home.temp_files();
            assert_eq!(temps.len(), 1, "{temps:?}");
            assert_eq!(mode_of(&temps[0]), mode, "{mode:o}: temp file at {step}");
            fs::remove_file(&temps[0]).expect("remove the crashed writer's temp file");
        }
        let out = Proc::run(&label(&args), leasectl_wrapped("umask 000", home.path(), &args));
        out.expect_exit(0);
        assert_eq!(mode_of(&home.registry()), mode, "{mode:o}: registry mode kept on rewrite");
        assert!(has_session(&home.entries(), "S", owner.pid()));
        assert_eq!(home.temp_files(), Vec::<PathBuf>::new());
    }
}

/// Root acting on another user's home keeps what it finds: a rewritten registry keeps
/// its owner, group and mode, and a runtime/ and lock file root creates there belong to
/// the home's owner, so the user's own Hermes and leasectl go on working.
#[test]
fn root_does_not_lock_the_owner_out() {
    use std::os::unix::fs::{MetadataExt, chown};
    assert_eq!(rustix::process::geteuid().as_raw(), 0, "this test needs root (CI runs as root)");
    let home = Home::new();
    fs::set_permissions(home.outside(), fs::Permissions::from_mode(0o755)).expect("chmod tmp");
    let user = 65534;
    let dead = entry(&lease_id(0xdead), "D", DEAD_PID, None);
    home.write_registry(registry_text(&[dead]));
    for p in [home.path().to_path_buf(), home.runtime(), home.registry()] {
        chown(&p, Some(user), Some(user)).expect("chown to the user");
    }
    fs::set_permissions(home.registry(), fs::Permissions::from_mode(0o640)).expect("chmod registry");
    home.run(&["prune"]).expect_exit(0);
    let meta = fs::metadata(home.registry()).expect("registry");
    assert_eq!((meta.uid(), meta.gid(), meta.mode() & 0o7777), (user, user, 0o640), "rewritten as it was");
    let lock = fs::metadata(home.lock_file()).expect("the lock file");
    assert_eq!((lock.uid(), lock.gid()), (user, user), "a lock file root creates belongs to the home's owner");

    // A profile home of the user's with no runtime/ yet: root's acquire creates it for the user.
    let profile = home.path().join("profiles").join("work");
    crate::common::make_profile(&profile);
    for p in [home.path().join("profiles"), profile.clone()] {
        chown(&p, Some(user), Some(user)).expect("chown");
    }
    let owner = Sleeper::new();
    home.run(&["acquire", "S", "--profile", "work", "--owner-pid", &owner.pid_arg()]).expect_exit(0);
    for p in [profile.join("runtime"), registry_of(&profile), profile.join("runtime").join("active_sessions.lock")] {
        let m = fs::metadata(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!((m.uid(), m.gid()), (user, user), "{} belongs to the home's owner", p.display());
    }
    // And the user can go on: as uid 65534, acquire in both.
    let mut cmd = home.cmd(&["acquire", "S2", "--owner-pid", &owner.pid_arg(), "--json"]);
    cmd.uid(user).gid(user);
    Proc::run("acquire as the user", cmd).expect_exit(0);
}

/// Started with standard output and error closed (by a parent that closed them), leasectl
/// opens /dev/null in their place: what it prints goes nowhere, never into a file it
/// opened (the lock file, the registry's temp file), and the registry stays JSON.
#[test]
fn closed_standard_descriptors_never_become_a_file_it_writes() {
    let home = Home::new();
    let owner = Sleeper::new();
    for session in ["S-closed-1", "S-closed-2"] {
        let args = ["acquire", session, "--owner-pid", &owner.pid_arg(), "--json"];
        let out = Proc::run("acquire, 1 and 2 closed", leasectl_wrapped("exec 1>&- 2>&-", home.path(), &args));
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    let text = fs::read_to_string(home.registry()).expect("the registry");
    let sessions: Vec<String> =
        home.entries().iter().map(|e| e["session_id"].as_str().unwrap_or("?").to_owned()).collect();
    assert_eq!(sessions, ["S-closed-1", "S-closed-2"], "{text}");
    let lock = fs::read(home.runtime().join("active_sessions.lock")).unwrap_or_default();
    assert!(lock.is_empty(), "the lock file holds {}", String::from_utf8_lossy(&lock));
}
