//! The operator's actions on record (issue 16): every force-release, prune and repair,
//! from the CLI and the console, in `<home>/logs/leasectl-audit.jsonl` and in syslog.

use crate::common;

use std::fs;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::Duration;

use common::process::{Home, Sleeper};
use serde_json::Value;

const DEAD: u64 = 4_000_000;

/// With metadata the audit record must keep verbatim.
fn entry(id: &str, session: &str, pid: u64) -> String {
    crate::common::planted(id, session, pid).metadata(serde_json::json!({"note": "kept verbatim"})).text()
}

fn audit_lines(home: &Path) -> Vec<Value> {
    let text = fs::read_to_string(home.join("logs/leasectl-audit.jsonl")).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect()
}

/// A syslog socket of the test's own: what leasectl sends, read back.
struct Syslog {
    socket: UnixDatagram,
    path: std::path::PathBuf,
}

impl Syslog {
    fn new(dir: &Path) -> Syslog {
        let path = dir.join("syslog.sock");
        let socket = UnixDatagram::bind(&path).expect("bind a syslog socket");
        socket.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        Syslog { socket, path }
    }

    fn next(&self) -> String {
        let mut buf = vec![0u8; 65_536];
        let n = self.socket.recv(&mut buf).expect("a syslog record");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

#[test]
fn force_release_and_prune_are_recorded_in_the_file_and_in_syslog() {
    let home = Home::new();
    let owner = Sleeper::new();
    let syslog = Syslog::new(home.outside());
    fs::create_dir_all(home.runtime()).expect("runtime");
    let dead = entry("dead0000000000000000000000000001", "S1", DEAD);
    let live = entry("a11e0000000000000000000000000002", "S2", owner.pid());
    let stale = entry("5a1e0000000000000000000000000003", "S3", DEAD);
    home.write_registry(format!("{{\"entries\": [{dead}, {live}, {stale}]}}"));
    let run = |args: &[&str]| {
        let mut cmd = home.cmd(args);
        cmd.env("LEASECTL_SYSLOG_SOCKET", &syslog.path);
        common::process::Proc::run(&args.join(" "), cmd)
    };
    // A dry run changes nothing and records nothing.
    run(&["force-release", "dead0000", "--dry-run"]).expect_exit(0);
    assert!(audit_lines(home.path()).is_empty());
    run(&["force-release", "dead0000"]).expect_exit(0);
    let records = audit_lines(home.path());
    assert_eq!(records.len(), 1);
    let r = &records[0];
    assert_eq!(r["action"], "force-release");
    assert_eq!(r["profile"], "root");
    assert_eq!(r["live_owner_overridden"], false);
    assert_eq!(r["uid"], rustix::process::getuid().as_raw());
    assert!(r["user"].is_string() && r["host"].is_string() && r["time"].is_string(), "{r}");
    assert!(r["command"].as_str().is_some_and(|c| c.contains("force-release dead0000")), "{r}");
    let verbatim: Value = serde_json::from_str(&dead).expect("entry");
    assert_eq!(r["removed"], Value::Array(vec![verbatim]), "the entry removed, verbatim");
    let sent = syslog.next();
    assert!(
        sent.starts_with("<85>") && sent.contains(" leasectl[") && sent.contains("\"action\":\"force-release\""),
        "{sent}"
    );
    // The live owner's lease, overridden with --live: said so.
    run(&["force-release", "a11e0000", "--live"]).expect_exit(0);
    assert_eq!(audit_lines(home.path())[1]["live_owner_overridden"], true);
    assert!(syslog.next().contains("\"live_owner_overridden\":true"));
    // A prune.
    run(&["prune"]).expect_exit(0);
    let prune = &audit_lines(home.path())[2];
    assert_eq!(prune["action"], "prune");
    assert_eq!(prune["removed"][0]["lease_id"], "5a1e0000000000000000000000000003");
    assert!(syslog.next().contains("\"action\":\"prune\""));
}

#[test]
fn a_repair_is_recorded_with_what_it_dropped_and_the_backup() {
    let home = Home::new();
    let dead = entry("dead0000000000000000000000000001", "S1", DEAD);
    home.write_registry(format!("{{\"entries\": [{dead}, {{\"lease_id\": 7}}]}}"));
    home.run(&["doctor", "--repair", "--yes"]).expect_exit(0);
    let records = audit_lines(home.path());
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["action"], "repair");
    assert_eq!(records[0]["dropped"][0]["entry"], 1);
    assert_eq!(records[0]["kept"][0], "dead0000000000000000000000000001", "{records:?}");
    assert!(records[0]["backup"].as_str().is_some_and(|b| b.contains("active_sessions.json.bak-")), "{records:?}");
}

#[test]
fn an_audit_that_cannot_be_written_is_reported_and_the_action_stands() {
    let home = Home::new();
    home.write_registry(format!("{{\"entries\": [{}]}}", entry("dead0000000000000000000000000001", "S1", DEAD)));
    fs::write(home.path().join("logs"), "a file where the directory would be").expect("block logs/");
    // A syslog socket nobody reads any more: sending is refused.
    let gone = home.outside().join("gone.sock");
    drop(UnixDatagram::bind(&gone).expect("bind"));
    let mut cmd = home.cmd(&["force-release", "dead0000"]);
    cmd.env("LEASECTL_SYSLOG_SOCKET", &gone);
    let out = common::process::Proc::run("force-release", cmd);
    out.expect_exit(0);
    assert!(out.stderr.contains("warning: audit: cannot append to"), "{out:?}");
    assert!(out.stderr.contains("warning: audit: cannot reach syslog"), "{out:?}");
    assert_eq!(home.entries(), Vec::<Value>::new(), "the release stands");
}

/// A large prune (60 leases, about 15 KB of record) reaches syslog as messages that each
/// fit in 2,048 octets and are whole JSON: a summary with the counts, then one message
/// per removed lease; the audit file keeps the whole record on one line.
#[test]
fn a_large_record_reaches_syslog_in_messages_that_fit() {
    let home = Home::new();
    let syslog = Syslog::new(home.outside());
    let entries: Vec<String> =
        (0..60).map(|i| entry(&format!("{i:032x}"), &format!("session-with-a-longish-name-{i:03}"), DEAD)).collect();
    home.write_registry(format!("{{\"entries\": [{}]}}", entries.join(", ")));
    let mut cmd = home.cmd(&["prune"]);
    cmd.env("LEASECTL_SYSLOG_SOCKET", &syslog.path);
    // Read while it sends, as a syslog daemon does (a datagram queue holds few messages).
    let mut prune = common::process::Proc::spawn("prune", cmd);
    let messages: Vec<String> = (0..61).map(|_| syslog.next()).collect();
    prune.finish().expect_exit(0);
    let whole = &audit_lines(home.path())[0];
    assert_eq!(whole["removed"].as_array().map(Vec::len), Some(60));
    assert!(whole.to_string().len() > 8192, "the record is larger than rsyslog's default 8 KB");
    let mut parts = 0;
    let mut summary = None;
    for message in messages {
        assert!(message.len() <= 2048, "{} octets: {message}", message.len());
        let body = &message[message.find("]: ").expect("a syslog header") + 3..];
        let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("not whole JSON ({e}): {body}"));
        if v.get("part").is_some() {
            assert_eq!(v["entry"]["lease_id"].as_str(), Some(format!("{parts:032x}").as_str()));
            parts += 1;
        } else {
            summary = Some(v);
        }
    }
    assert_eq!(parts, 60);
    let summary = summary.expect("a summary");
    assert_eq!(summary["removed"]["count"], 60);
    assert_eq!((summary["time"].clone(), summary["pid"].clone()), (whole["time"].clone(), whole["pid"].clone()));
}
