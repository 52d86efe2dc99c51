//! The operator's actions on record, as sudo keeps them: every force-release, prune and
//! repair that changed a registry, from the CLI or the console, goes to the system log
//! and to `<home>/logs/leasectl-audit.jsonl` (outside Hermes' `runtime/`), one JSON
//! object a line. A record that cannot be written is reported; it never blocks or
//! undoes the action.

use rustix::fs::FileType;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::lease::address::location::Location;
use crate::lease::home::safe_file::{self, Spot};
use crate::lease::view::{LeaseView, Removal};

/// The audit file is rotated past this size; this many old files are kept (`.1` newest).
pub const MAX_BYTES: u64 = 10 * 1024 * 1024;
pub const KEEP: usize = 3;

/// Where syslog listens, unless `LEASECTL_SYSLOG_SOCKET` names another socket.
const SYSLOG: &str = "/dev/log";

/// Who acted, and through what.
#[derive(Debug, Clone)]
pub struct Actor {
    /// The command line (`leasectl prune --all-profiles`) or the console's key.
    pub command: String,
    /// The console's: each record adds what was done to `command` (a command line
    /// already says it).
    pub names_action: bool,
    /// Over --host: the operator on the other side (`alice@laptop (pid 4711)`), as their
    /// leasectl said; the SSH connection is this process's own `SSH_CONNECTION`.
    pub operator: Option<String>,
}

impl Actor {
    /// This process's own command line, as typed (each word shell-quoted when needed).
    pub fn this_command() -> Actor {
        let words: Vec<String> = std::env::args().map(|a| crate::lease::words::human::shell_word(&a)).collect();
        Actor { command: words.join(" "), names_action: false, operator: None }
    }

    /// The console: `leasectl console: prune`, `leasectl console: force-release lease 8f19a2c3`.
    pub fn console() -> Actor {
        Actor { command: "leasectl console".into(), names_action: true, operator: None }
    }

    /// The actor as recorded for `what`.
    pub fn doing(&self, what: &str) -> Actor {
        match self.names_action {
            true => Actor {
                command: format!("{}: {what}", self.command),
                names_action: false,
                operator: self.operator.clone(),
            },
            false => self.clone(),
        }
    }
}

/// The audit file of a home.
pub fn audit_file(home: &Path) -> PathBuf {
    home.join("logs").join("leasectl-audit.jsonl")
}

use crate::lease::owners::owner::user_name;

/// Who this process acts as, in a few words: `ops@gw (pid 4711)`.
pub fn who() -> String {
    let uid = rustix::process::getuid().as_raw();
    let user = user_name(uid).unwrap_or_else(|| format!("uid {uid}"));
    format!("{user}@{} (pid {})", crate::lease::owners::owner::hostname(), std::process::id())
}

/// One action as recorded.
pub fn record_of(action: &str, location: &Location, actor: &Actor, removed: &[LeaseView], live: bool) -> Value {
    let uid = rustix::process::getuid().as_raw();
    let user = user_name(uid);
    json!({
        "time": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        "action": action,
        "profile": location.name(),
        "registry": location.describe(),
        "uid": uid,
        "user": user,
        "sudo_user": std::env::var("SUDO_USER").ok(),
        "host": crate::lease::owners::owner::hostname(),
        "pid": std::process::id(),
        "command": actor.command,
        "operator": actor.operator,
        "ssh_connection": std::env::var("SSH_CONNECTION").ok(),
        "live_owner_overridden": live,
        "removed": removed.iter().map(|v| v.entry.to_value()).collect::<Vec<_>>(),
    })
}

/// Record a removal (force-release or prune) that changed a registry. Returns what
/// could not be written, in words, for the caller to report; nothing when all went.
pub fn removal(action: &str, location: &Location, actor: &Actor, r: &Removal) -> Vec<String> {
    if r.dry_run || r.removed.is_empty() {
        return vec![];
    }
    write(location, &record_of(action, location, actor, &r.removed, r.live_owner))
}

/// Record a stop: each owner, the signals it was sent and how long it took to end, and
/// every lease that went by it (its own release or the stop's removal), in `removed`.
pub fn stop(location: &Location, actor: &Actor, stopped: &crate::lease::stop::Stopped) -> Vec<String> {
    let gone: Vec<LeaseView> = stopped.leases_gone().map(|l| l.view.clone()).collect();
    let signalled = stopped.owners.iter().any(|o| !o.signals.is_empty());
    if gone.is_empty() && !signalled {
        return vec![];
    }
    let mut rec = record_of("stop", location, actor, &gone, false);
    let owners: Vec<Value> = stopped
        .owners
        .iter()
        .map(|o| {
            json!({
                "pid": o.pid,
                "name": o.name,
                "signals": o.signals.iter().map(|s| json!({"signal": s.signal, "after": s.after})).collect::<Vec<_>>(),
                "ending": o.ending.name(),
                "took": o.took,
                "family_ended": o.family_ended.iter().map(|m| json!({"pid": m.pid, "name": m.name})).collect::<Vec<_>>(),
                "leases": o.leases.iter().map(|l| json!({"lease_id": l.view.entry.lease_id(), "how": l.how.name()})).collect::<Vec<_>>(),
            })
        })
        .collect();
    if let Some(map) = rec.as_object_mut() {
        map.insert("stopped".into(), Value::Array(owners));
    }
    write(location, &rec)
}

/// Record a repair: every entry kept, restored, dropped and lost, and where the old
/// bytes are (the report's own JSON, the same from the CLI and the console).
pub fn repair(
    location: &Location,
    actor: &Actor,
    report: &crate::lease::doctor::repair::RepairReport,
    forced: bool,
) -> Vec<String> {
    let mut rec = record_of("repair", location, actor, &[], forced);
    if let (Some(map), Value::Object(details)) = (rec.as_object_mut(), report.to_json()) {
        map.extend(details);
    }
    write(location, &rec)
}

/// Both places; the failures, each said once.
fn write(location: &Location, rec: &Value) -> Vec<String> {
    let mut failed = Vec::new();
    let line = rec.to_string();
    if let Some(reg) = location.registry() {
        let file = audit_file(&reg.home);
        if let Err(e) = append_rotating(&file, &line, MAX_BYTES, KEEP) {
            failed.push(format!("cannot append to {}: {e}", file.display()));
        }
    }
    let socket = std::env::var_os("LEASECTL_SYSLOG_SOCKET").map(PathBuf::from).unwrap_or_else(|| SYSLOG.into());
    let sock = UnixDatagram::unbound().and_then(|s| {
        // A full receive queue is waited for briefly (a split record is a burst), never long.
        s.set_write_timeout(Some(SYSLOG_WAIT))?;
        Ok(s)
    });
    for message in syslog_messages(rec, &line) {
        match sock
            .as_ref()
            .map_err(|e| std::io::Error::new(e.kind(), e.to_string()))
            .and_then(|s| syslog(s, &socket, &message))
        {
            Ok(()) => {}
            // No system log on this machine (a container): the file is the record.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => {
                failed.push(format!("cannot reach syslog at {}: {e}", socket.display()));
                break;
            }
        }
    }
    failed
}

/// The longest syslog message body sent: RFC 5424 receivers should accept 2,048 octets
/// (rsyslog cuts at 8 KB by default, mid-JSON, with no marker), less the header's ~64.
pub const SYSLOG_BODY_MAX: usize = 1_984;

/// The record as syslog messages, each whole JSON under [`SYSLOG_BODY_MAX`]: the record
/// itself when it fits; else a summary (the lists replaced by their counts, naming the
/// audit file's record by its time and pid) and one message per listed entry.
fn syslog_messages(rec: &Value, line: &str) -> Vec<String> {
    if line.len() <= SYSLOG_BODY_MAX {
        return vec![line.to_owned()];
    }
    const LISTS: [&str; 4] = ["removed", "kept", "restored", "dropped"];
    let mut summary = rec.clone();
    for key in LISTS {
        if let Some(n) = rec[key].as_array().map(Vec::len) {
            summary[key] = serde_json::json!({ "count": n });
        }
    }
    summary["split"] = "the whole record is one line of the home's leasectl-audit.jsonl (same time and pid);                         each entry follows in a message of its own"
        .into();
    let mut out = vec![summary.to_string()];
    for key in ["removed", "restored", "dropped"] {
        for (i, entry) in rec[key].as_array().into_iter().flatten().enumerate() {
            let part = |entry: &Value| {
                serde_json::json!({"time": rec["time"], "pid": rec["pid"], "action": rec["action"],
                                   "part": key, "index": i, "entry": entry})
                .to_string()
            };
            let text = part(entry);
            out.push(if text.len() <= SYSLOG_BODY_MAX {
                text
            } else {
                // An entry longer than a message on its own: its identity, marked cut.
                part(&serde_json::json!({"lease_id": entry["lease_id"], "session_id": entry["session_id"],
                                         "pid": entry["pid"], "cut": true}))
            });
        }
    }
    out
}

/// Send one message to syslog (RFC 3164 over a datagram socket, facility authpriv,
/// severity notice, as sudo logs); a full queue is waited for at most [`SYSLOG_WAIT`].
fn syslog(sock: &UnixDatagram, socket: &Path, line: &str) -> std::io::Result<()> {
    const AUTHPRIV_NOTICE: u32 = 10 * 8 + 5;
    let stamp = jiff::Timestamp::now().to_zoned(local_zone()).strftime("%b %e %H:%M:%S").to_string();
    let message = format!("<{AUTHPRIV_NOTICE}>{stamp} leasectl[{}]: {line}", std::process::id());
    sock.send_to(message.as_bytes(), socket).map(|_| ())
}

/// The system's zone for syslog's local-time stamp, once per process. `/etc/localtime` is
/// read as the zone itself: jiff's system zone looks its name up in a database that
/// first walks all of /usr/share/zoneinfo (some 40 directories and 3.5 million
/// instructions, in every `release`). A `TZ` setting is left to jiff.
fn local_zone() -> jiff::tz::TimeZone {
    static ZONE: std::sync::OnceLock<jiff::tz::TimeZone> = std::sync::OnceLock::new();
    ZONE.get_or_init(|| {
        if std::env::var_os("TZ").is_some() {
            return jiff::tz::TimeZone::try_system().unwrap_or(jiff::tz::TimeZone::UTC);
        }
        zone_in(Path::new("/etc/localtime"))
    })
    .clone()
}

/// The zone a TZif file describes; UTC when it cannot be read as one (as jiff falls back).
fn zone_in(tzif_file: &Path) -> jiff::tz::TimeZone {
    // one door: the system's zone file, not a file in a home (jiff reads it so too).
    std::fs::read(tzif_file)
        .ok()
        .and_then(|tzif| jiff::tz::TimeZone::tzif("localtime", &tzif).ok())
        .unwrap_or(jiff::tz::TimeZone::UTC)
}

/// How long one syslog message may wait for room in the receiver's queue.
const SYSLOG_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Append `line` and a newline in one write (O_APPEND: whole lines even with several
/// writers; cut back on a short write); past `max` bytes the file is first rotated
/// (`.1` … `.keep`), under a lock taken only if free, so an audit never waits. Everything
/// goes through [`safe_file`]: `logs/` is created (as the home's owner) inside an
/// existing home only, and a symlink or FIFO planted there is refused, never used.
pub fn append_rotating(file: &Path, line: &str, max: u64, keep: usize) -> std::io::Result<()> {
    let spot = Spot::in_subdir(file);
    let (dir_spot, name) = spot.dir_and_name()?;
    let dir = safe_file::Dir::create(&dir_spot)?;
    let name = name.to_string_lossy().into_owned();
    let size = dir.stat(&name)?.filter(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile);
    if size.is_some_and(|st| st.st_size as u64 >= max) {
        let lock = dir.open_append(".leasectl-audit.lock", 0o600)?;
        let still_full = || dir.stat(&name).ok().flatten().is_some_and(|st| st.st_size as u64 >= max);
        if lock.try_lock().is_ok() && still_full() {
            for n in (1..keep).rev() {
                let _ = dir.rename(format!("{name}.{n}"), format!("{name}.{}", n + 1));
            }
            dir.rename(&name, format!("{name}.1"))?;
        }
    }
    dir.append_line(&name, line.as_bytes(), 0o600)
}

/// The audit file's last records (its tail: the removal just seen is among the newest),
/// read through the one door (a FIFO or symlink there is not read).
pub fn recent_records(file: &Path) -> Vec<serde_json::Value> {
    use std::io::{Seek, SeekFrom};
    let Ok(Some(mut f)) = safe_file::open_read(&Spot::in_subdir(file)) else {
        return vec![];
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(256 * 1024)));
    let mut lines = safe_file::Lines::new(f, safe_file::MAX_LINE);
    let mut out = Vec::new();
    while let Some(l) = lines.next_line() {
        if let Ok(v) = serde_json::from_str(l) {
            out.push(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_syslog_zone_keeps_the_systems_offsets() {
        // Read without jiff's database, it must still be the zone jiff finds by name: this
        // machine's (UTC here), and one with summer time, whose offsets tell a zone file
        // read as such from a fallback to UTC.
        let days = [-400i64, -200, 0, 100, 200, 3000];
        let same = |ours: &jiff::tz::TimeZone, named: &jiff::tz::TimeZone| {
            for d in days {
                let at = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * d);
                assert_eq!(ours.to_offset(at), named.to_offset(at), "{d} days from now");
            }
        };
        same(&local_zone(), &jiff::tz::TimeZone::try_system().unwrap_or(jiff::tz::TimeZone::UTC));
        let berlin = jiff::tz::TimeZone::get("Europe/Berlin").expect("the system's zone database has Europe/Berlin");
        let read = zone_in(Path::new("/usr/share/zoneinfo/Europe/Berlin"));
        same(&read, &berlin);
        let (winter, summer) =
            (jiff::Timestamp::from_second(1_796_256_000), jiff::Timestamp::from_second(1_782_864_000));
        assert_ne!(read.to_offset(winter.expect("a time")), read.to_offset(summer.expect("a time")), "summer time");
    }

    #[test]
    fn the_file_is_rotated_past_its_bound_and_keeps_whole_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("logs").join("audit.jsonl");
        for i in 0..40 {
            append_rotating(&file, &format!("{{\"n\": {i}, \"pad\": \"{}\"}}", "x".repeat(40)), 500, 2)
                .expect("append");
        }
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let one = PathBuf::from(format!("{}.1", file.display()));
        let two = PathBuf::from(format!("{}.2", file.display()));
        let three = PathBuf::from(format!("{}.3", file.display()));
        assert!(size(&file) < 500 + 100 && size(&one) >= 500 && size(&two) >= 500, "rotated");
        assert!(!three.exists(), "only 2 old files kept");
        for p in [&file, &one, &two] {
            let text = std::fs::read_to_string(p).expect("read");
            assert!(text.lines().all(|l| serde_json::from_str::<Value>(l).is_ok()), "whole JSON lines in {p:?}");
        }
        let newest = std::fs::read_to_string(&file).expect("read");
        assert!(newest.trim_end().ends_with("\"n\": 39, \"pad\": \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"));
    }
}
