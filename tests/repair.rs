//! `doctor --repair`: asks first (or --yes), keeps every valid entry, drops only the
//! invalid ones it lists, never drops a live owner's lease, and keeps the exact old
//! bytes in a 0600 timestamped backup beside the registry.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use crate::common;
use common::process::registry_of as registry;

fn leasectl(home: &Path, args: &[&str]) -> Output {
    common::process::leasectl(home, args).stdin(Stdio::null()).output().expect("run leasectl")
}

fn backups(home: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(home.join("runtime"))
        .expect("runtime dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("active_sessions.json.bak-")))
        .collect();
    out.sort();
    out
}

fn broken(home: &Path) -> Vec<u8> {
    let me = std::process::id();
    let text = format!(
        r#"{{"entries": [{{"lease_id": "live-1", "session_id": "S", "pid": {me}}},
            {{"lease_id": "bad-1", "session_id": "", "pid": {me}}},
            {{"lease_id": "live-1", "session_id": "T", "pid": {me}}},
            {{"lease_id": "gone-1", "session_id": "U", "pid": 2147483646}},
            {{"lease_id": "bad-2", "session_id": "V", "pid": true}}]}}"#
    );
    std::fs::create_dir_all(home.join("runtime")).expect("mkdir");
    std::fs::write(registry(home), &text).expect("write");
    text.into_bytes()
}

#[test]
fn repair_without_a_terminal_or_yes_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = broken(dir.path());
    // Entry 4's pid cannot be read, so its owner may be alive: refused without --force.
    let out = leasectl(dir.path(), &["doctor", "--repair"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("leasectl --home")
            && String::from_utf8_lossy(&out.stderr).contains("doctor --repair --force`")
    );
    let plan = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        plan.contains("drop entry 1 (lease bad-1, session , pid ") && plan.contains("session_id is blank"),
        "{plan}"
    );
    assert!(plan.contains("drop entry 4 (lease bad-2, session V, pid -, owner unknown): pid is a bool"), "{plan}");
    assert!(plan.contains("NEEDS --force"), "{plan}");
    let out = leasectl(dir.path(), &["doctor", "--repair", "--force"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass --yes"));
    assert_eq!(std::fs::read(registry(dir.path())).expect("read"), old, "untouched");
    assert!(backups(dir.path()).is_empty());
}

#[test]
fn repair_keeps_valid_and_live_entries_and_backs_up_the_old_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let old = broken(home);
    let out = leasectl(home, &["doctor", "--repair", "--yes", "--force", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let r = &v["registries"][0];
    let dropped: Vec<u64> =
        r["dropped"].as_array().expect("dropped").iter().filter_map(|d| d["entry"].as_u64()).collect();
    assert_eq!(dropped, [1, 4], "only the invalid entries go");
    // Named with their owners: entry 1's (a blank session fences nothing), entry 4's unknown.
    assert_eq!(
        (r["dropped"][0]["may_be_live"].as_bool(), r["dropped"][0]["owner"].as_str()),
        (Some(false), Some("alive"))
    );
    assert_eq!((r["dropped"][1]["may_be_live"].as_bool(), r["dropped"][1]["pid"].is_null()), (Some(true), true));
    assert_eq!(r["rekeyed"][0]["from"], "live-1", "a live owner's duplicate is kept under a new id");
    // The repaired registry: valid, with S and T (live) and U (dead but valid: prune's job, not repair's).
    let after = leasectl(home, &["ls", "--json"]);
    assert_eq!(after.status.code(), Some(0));
    let ls: serde_json::Value = serde_json::from_slice(&after.stdout).expect("json");
    let sessions: Vec<&str> = ls["registries"][0]["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .filter_map(|l| l["entry"]["session_id"].as_str())
        .collect();
    assert_eq!(sessions, ["S", "T", "U"]);
    // The backup: the exact old bytes, mode 0600, named with a timestamp.
    let b = backups(home);
    assert_eq!(b.len(), 1);
    assert_eq!(std::fs::read(&b[0]).expect("backup"), old);
    assert_eq!(std::fs::metadata(&b[0]).expect("stat").permissions().mode() & 0o777, 0o600);
    assert_eq!(r["backup"].as_str(), Some(b[0].to_string_lossy().as_ref()));
    // A second repair has nothing to do and writes no second backup.
    let again = leasectl(home, &["doctor", "--repair", "--yes"]);
    assert_eq!(again.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to repair"));
    assert_eq!(backups(home).len(), 1);
    assert_eq!(leasectl(home, &["doctor"]).status.code(), Some(0), "doctor is happy afterwards");
}

#[test]
fn repair_salvages_the_complete_entries_of_a_truncated_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let me = std::process::id();
    std::fs::create_dir_all(home.join("runtime")).expect("mkdir");
    let text = format!(
        r#"{{"entries": [{{"lease_id": "a", "session_id": "S", "pid": {me}}}, {{"lease_id": "b", "session_id": "T", "pid": {me}}}, {{"lease_id": "c", "sess"#
    );
    std::fs::write(registry(home), &text).expect("write");
    // What followed the cut is unknown, and may have been a live owner's: --force only.
    let out = leasectl(home, &["doctor", "--repair", "--yes"]);
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("drop entry 2 (lease c, session -, pid -, owner unknown): cut short"), "{said}");
    assert!(said.contains("unreadable from byte"), "{said}");
    assert_eq!(std::fs::read_to_string(registry(home)).expect("read"), text, "untouched");
    let out = leasectl(home, &["doctor", "--repair", "--yes", "--force"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(registry(home)).expect("read")).expect("valid JSON now");
    let ids: Vec<&str> = v["entries"].as_array().expect("list").iter().filter_map(|e| e["lease_id"].as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
}

#[test]
fn run_execs_its_command_directly_never_through_a_shell() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = leasectl(dir.path(), &["run", "S", "--", "printf", "%s|%s", "$(id)", "a;b"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().last(), Some("$(id)|a;b"), "arguments passed literally");
}

#[test]
fn repair_writes_exactly_the_lease_ids_it_shows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let me = std::process::id();
    // Two live entries share a lease id: the second is kept under a new id.
    let text = format!(
        r#"{{"entries": [{{"lease_id": "dup-1", "session_id": "S", "pid": {me}}},
            {{"lease_id": "dup-1", "session_id": "T", "pid": {me}}},
            {{"lease_id": "bad-2", "session_id": "V", "pid": true}}]}}"#
    );
    std::fs::create_dir_all(home.join("runtime")).expect("mkdir");
    std::fs::write(registry(home), &text).expect("write");
    let preview = leasectl(home, &["doctor", "--repair"]);
    let shown = String::from_utf8_lossy(&preview.stdout).into_owned();
    let new_id = |out: &str| -> String {
        let at = out.find("kept under the new id ").unwrap_or_else(|| panic!("no new id in:\n{out}"));
        out[at + "kept under the new id ".len()..].split_whitespace().next().unwrap_or_default().to_owned()
    };
    let previewed = new_id(&shown);
    let done = leasectl(home, &["doctor", "--repair", "--yes", "--force"]);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let applied = new_id(&String::from_utf8_lossy(&done.stdout));
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(registry(home)).expect("read")).expect("json");
    let ids: Vec<&str> =
        file["entries"].as_array().expect("entries").iter().filter_map(|e| e["lease_id"].as_str()).collect();
    assert_eq!(ids, ["dup-1", previewed.as_str()], "the preview named the id the file got");
    assert_eq!(applied, previewed);
}

#[test]
fn repair_removes_temp_files_crashed_writers_left() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let me = std::process::id();
    std::fs::create_dir_all(home.join("runtime")).expect("mkdir");
    std::fs::write(
        registry(home),
        format!(r#"{{"entries": [{{"lease_id": "a-1", "session_id": "S", "pid": {me}}}]}}"#),
    )
    .expect("write");
    let temp = home.join("runtime").join(".active_sessions_deadbeef.tmp");
    std::fs::write(&temp, b"{\"entries\": [").expect("a crashed writer's temp file");
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options().write(true).open(&temp).and_then(|f| f.set_modified(old)).expect("age it");
    assert_eq!(leasectl(home, &["doctor"]).status.code(), Some(1), "doctor flags it");
    let preview = leasectl(home, &["doctor", "--repair"]);
    assert!(String::from_utf8_lossy(&preview.stdout).contains(".active_sessions_deadbeef.tmp"), "the preview names it");
    assert!(temp.exists(), "nothing removed without --yes");
    let done = leasectl(home, &["doctor", "--repair", "--yes"]);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    assert!(!temp.exists(), "removed under the lock");
    assert_eq!(leasectl(home, &["doctor"]).status.code(), Some(0));
    let file = std::fs::read_to_string(registry(home)).expect("read");
    assert!(file.contains("\"a-1\""), "the registry is untouched: {file}");
}

/// Issue 22's case: three live owners, the file cut by 40 bytes. The entry the cut ran
/// through is restored from its identifying fields (and says which it rebuilt); without
/// --force the repair is refused, since what followed the cut cannot be known; with it,
/// every live owner's lease is there afterwards, and the audit record lists everything.
#[test]
fn a_cut_entry_is_restored_from_its_identifying_fields_and_the_record_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let owners: Vec<common::process::Sleeper> = (0..3).map(|_| common::process::Sleeper::new()).collect();
    for (i, o) in owners.iter().enumerate() {
        let out = leasectl(home, &["acquire", &format!("CS{}", i + 1), "--owner-pid", &o.pid_arg(), "--live-id", "t"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let text = std::fs::read(registry(home)).expect("read");
    std::fs::write(registry(home), &text[..text.len() - 40]).expect("cut 40 bytes");
    let refused = leasectl(home, &["doctor", "--repair", "--yes"]);
    assert_eq!(refused.status.code(), Some(1));
    let plan = String::from_utf8_lossy(&refused.stdout);
    assert!(plan.contains("restore entry 2 (lease ") && plan.contains("session CS3), cut short: rebuilt"), "{plan}");
    let done = leasectl(home, &["doctor", "--repair", "--yes", "--force", "--json"]);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let sessions: Vec<String> = {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(registry(home)).expect("read")).expect("json");
        v["entries"]
            .as_array()
            .expect("list")
            .iter()
            .filter_map(|e| e["session_id"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(sessions, ["CS1", "CS2", "CS3"], "every live owner's lease is still there");
    let ls = leasectl(home, &["ls", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&ls.stdout).expect("json");
    assert!(v["registries"][0]["leases"].as_array().expect("leases").iter().all(|l| l["liveness"] == "alive"));
    let audit = std::fs::read_to_string(home.join("logs/leasectl-audit.jsonl")).expect("audit");
    let rec: serde_json::Value = serde_json::from_str(audit.lines().last().expect("a record")).expect("json");
    assert_eq!(rec["action"], "repair");
    assert_eq!(rec["kept"].as_array().map(Vec::len), Some(3), "{rec}");
    assert_eq!(rec["restored"][0]["session_id"], "CS3", "{rec}");
    assert!(rec["restored"][0]["rebuilt"].as_array().is_some_and(|r| !r.is_empty()), "{rec}");
    assert!(rec["lost_after_byte"].as_u64().is_some() && rec["backup"].as_str().is_some(), "{rec}");
    assert_eq!(rec["live_owner_overridden"], true, "forced");
}
