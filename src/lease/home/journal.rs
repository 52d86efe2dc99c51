//! The event journal `leasectl events --follow --record` keeps in each home
//! (`<home>/logs/leasectl-events.jsonl`, rotated like the audit file): read back by
//! `events --since` and by the console when it opens.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::lease::home::safe_file::{self, Lines, Spot};

/// Where `location`'s journal is kept: a file registry's home, or for an etcd prefix
/// (which has no home) `$XDG_STATE_HOME/leasectl/etcd-<prefix>-<hash>` (by default
/// `~/.local/state/...`) of whoever runs the recorder. None when there is no such place.
pub(crate) fn journal_home(location: &crate::lease::Location) -> Option<PathBuf> {
    match location {
        crate::lease::Location::File(reg) => Some(reg.home.clone()),
        crate::lease::Location::Etcd(at) => Some(dirs::state_dir()?.join("leasectl").join(etcd_slug(&at.prefix))),
        // Another host keeps its own journal, where its recorder runs.
        crate::lease::Location::Ssh(_) => None,
    }
}

/// Where a recorder here keeps what it sees of other hosts (`events --follow --record`
/// over `--host`): one journal for the fleet, each line naming its host, in the
/// recorder's own state directory (`$XDG_STATE_HOME/leasectl/fleet`).
pub(crate) fn fleet_home() -> Option<PathBuf> {
    Some(dirs::state_dir()?.join("leasectl").join("fleet"))
}

/// Where a recorder here writes `location`'s events: its journal home, or for another
/// host's registry the fleet journal.
pub(crate) fn record_home(location: &crate::lease::Location) -> Option<PathBuf> {
    match location {
        crate::lease::Location::Ssh(_) => fleet_home(),
        _ => journal_home(location),
    }
}

/// `/leasectl/` -> `etcd-leasectl-1f2e3d4c`: readable, and two prefixes that read alike
/// (`/a_b/`, `/a-b/`) still get journals of their own.
fn etcd_slug(prefix: &str) -> String {
    use std::hash::BuildHasher;
    let readable: String = prefix.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect::<String>();
    let readable = readable.trim_matches('-');
    let hash = rustc_hash::FxBuildHasher.hash_one(prefix) as u32;
    format!("etcd-{readable}-{hash:08x}")
}

/// Make an etcd prefix's journal home (the recorder's own state directory: created
/// whole, private to its user).
pub(crate) fn create_journal_home(home: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(home)
}

/// The journal of a home.
pub(crate) fn journal_file(home: &Path) -> PathBuf {
    home.join("logs").join("leasectl-events.jsonl")
}

/// Why a home could not be claimed for recording.
#[derive(Debug)]
pub(crate) enum Unclaimed {
    /// Another recorder holds it (named): a second would record every event twice.
    Busy(String),
    /// The claim cannot be made there (logs/ planted with a link, a full disk...): the
    /// recorder goes on, and says so; recording there fails with a warning per event.
    Unusable(String),
}

/// The recorder's claim on a home (`<home>/logs/.leasectl-recorder.lock`, flocked for as
/// long as it records).
pub(crate) fn claim_recorder(home: &Path) -> Result<std::fs::File, Unclaimed> {
    let logs = Spot::new(home, "logs");
    let name = ".leasectl-recorder.lock";
    let lock_path = home.join("logs").join(name);
    let file = safe_file::Dir::create(&logs)
        .and_then(|d| d.open_append(name, 0o600))
        .map_err(|e| Unclaimed::Unusable(format!("cannot claim {} for recording: {e}", lock_path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            let who = crate::lease::home::lock::lock_holder(&lock_path)
                .map(|pid| {
                    let command =
                        crate::lease::owners::owner::command_name(u64::from(pid)).unwrap_or_else(|| "?".into());
                    format!("pid {pid} ({})", crate::lease::words::human::escape(&command))
                })
                .unwrap_or_else(|| "another process".into());
            Err(Unclaimed::Busy(format!(
                "{who} records {} already (it holds {}): a second recorder would record every event twice",
                home.display(),
                lock_path.display()
            )))
        }
        Err(std::fs::TryLockError::Error(e)) => {
            Err(Unclaimed::Unusable(format!("cannot lock {}: {e}", lock_path.display())))
        }
    }
}

/// The operator's removals from a home's audit file at or after `from`, as the events a
/// recorder would have printed for them (`force-released`, `pruned`, `released` on an
/// owner's behalf, `repaired`), oldest first: what happened while no recorder ran.
/// Read a line at a time from about where its records reach `from` (the search the
/// journal's lines are found by; an older record is passed over without building its tree).
pub(crate) fn audit_since(home: &Path, from: f64) -> (Vec<Value>, Vec<String>) {
    let (mut out, mut warnings) = (Vec::new(), Vec::new());
    for (p, opened) in open_rotated(&crate::lease::home::audit::audit_file(home)) {
        let f = match opened {
            Ok(Some(f)) => f,
            Ok(None) => continue,
            Err(e) => {
                warnings.push(format!("skipped {}: {e}", p.display()));
                continue;
            }
        };
        // Audit records are appended as the removals are made: in time order, as a
        // journal's lines are, so the time is found by the same search.
        let mut lines = lines_of(f, &p, Some((from, audit_time)), &mut warnings);
        while let Some(line) = lines.next_line() {
            // An older record is passed over without building its tree (a prune's names
            // every lease it removed); any record the quick read cannot tell is read whole.
            if audit_time(line.as_bytes()).is_some_and(|ts| ts < from) {
                continue;
            }
            let Ok(rec) = serde_json::from_str::<Value>(line) else { continue };
            let Some(at) = rec["time"].as_str().and_then(|t| t.parse::<jiff::Timestamp>().ok()) else { continue };
            let ts = at.as_millisecond() as f64 / 1000.0;
            if ts < from {
                continue;
            }
            let time = crate::lease::words::human::event_time(at);
            // In the words a recorder would have used (`lease::home::remover`), said to be read
            // from the audit file.
            let (_, by) = crate::lease::home::remover::of_record(&rec);
            let detail = format!("{} (from the audit file)", by.detail().unwrap_or_default());
            if rec["action"].as_str() == Some("repair") {
                let who = format!("by {} (from the audit file)", crate::lease::home::remover::actor_of(&rec));
                out.push(serde_json::json!({"time": time, "ts": ts, "event": "repaired", "profile": rec["profile"],
                                            "detail": who}));
            }
            let key = if rec["action"].as_str() == Some("repair") { "dropped" } else { "removed" };
            for entry in rec[key].as_array().into_iter().flatten() {
                out.push(serde_json::json!({"time": time, "ts": ts, "event": by.event(), "profile": rec["profile"],
                                            "lease": {"entry": entry}, "detail": detail}));
            }
        }
        if lines.counts.bad > 0 {
            warnings.push(format!(
                "skipped {} in {}",
                crate::lease::words::human::plural(lines.counts.bad as usize, "unreadable line", "unreadable lines"),
                p.display()
            ));
        }
    }
    (out, warnings)
}

/// `file` (in a home's `logs/`) and its rotated copies, oldest first (`file.KEEP` …
/// `file.1`, then `file`), each opened to read (None: absent) through one opening of
/// their directory (`events --since` walked the home's path eight times to it).
fn open_rotated(file: &Path) -> Vec<(PathBuf, std::io::Result<Option<std::fs::File>>)> {
    let mut paths: Vec<PathBuf> =
        (1..=crate::lease::home::audit::KEEP).rev().map(|n| PathBuf::from(format!("{}.{n}", file.display()))).collect();
    paths.push(file.to_path_buf());
    let dir = Spot::in_subdir(file).dir_and_name().and_then(|(dir, _)| safe_file::Dir::open(&dir));
    paths
        .into_iter()
        .map(|p| {
            let opened = match (&dir, p.file_name()) {
                (Ok(Some(d)), Some(name)) => d.open_read(name),
                (Ok(_), _) => Ok(None),
                // Each file is said to be skipped, as when each was opened on its own.
                (Err(e), _) => Err(std::io::Error::new(e.kind(), e.to_string())),
            };
            (p, opened)
        })
        .collect()
}

/// An audit record's time (its `time`, RFC 3339) in epoch seconds, to the millisecond as
/// [`audit_since`] reads it; None when the line is not one or has none.
fn audit_time(line: &[u8]) -> Option<f64> {
    #[derive(serde::Deserialize)]
    struct AuditStamp<'a> {
        #[serde(borrow)]
        time: Option<std::borrow::Cow<'a, str>>,
    }
    let at = serde_json::from_slice::<AuditStamp>(line).ok()?.time?.parse::<jiff::Timestamp>().ok()?;
    Some(at.as_millisecond() as f64 / 1000.0)
}

/// A journal line's time (its `ts`); None when the line is not one or has none.
fn journal_time(line: &[u8]) -> Option<f64> {
    serde_json::from_slice::<Stamp>(line).ok()?.ts
}

/// The key an event and its audit record share: the lease and what happened to it.
pub(crate) fn removal_key(v: &Value) -> Option<(String, String)> {
    let id = v["lease"]["entry"]["lease_id"].as_str()?;
    Some((id.to_owned(), v["event"].as_str()?.to_owned()))
}

/// A recorded line longer than this is not one of ours: skipped, counted.
pub(crate) const MAX_LINE: usize = safe_file::MAX_LINE;

/// The most of one journal or audit file that is read: well above the 10 MiB at which
/// leasectl rotates them, so a larger file was not written so by leasectl (a planted
/// sparse terabyte, a file someone appends to by hand).
pub(crate) const READ_BOUND: u64 = 32 * 1024 * 1024;

/// `f`, the file at `path`, to read a line at a time from about where its events reach
/// `from` ([`time_start`]; None: from the start): one larger than [`READ_BOUND`] is read from its last
/// READ_BOUND bytes on at most (the newest lines: these files are in time order), and a
/// warning names it.
fn lines_of(mut f: std::fs::File, path: &Path, from: Option<(f64, TimeOf)>, warnings: &mut Vec<String>) -> Lines {
    use std::io::{Seek, SeekFrom};
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut floor = 0;
    if size > READ_BOUND {
        warnings.push(format!(
            "read only the last {} MiB of {} ({size} bytes; leasectl rotates its files at {} MiB)",
            READ_BOUND / (1024 * 1024),
            path.display(),
            crate::lease::home::audit::MAX_BYTES / (1024 * 1024)
        ));
        // From the byte before the bound: a line that starts exactly there is kept whole.
        floor = size - READ_BOUND - 1;
    }
    let start = from.map_or(floor, |(from, time_of)| time_start(&f, floor, size, from, time_of));
    if start == 0 {
        return Lines::new(f, MAX_LINE);
    }
    let seeked = f.seek(SeekFrom::Start(start));
    let mut lines = Lines::new(f, MAX_LINE);
    match seeked {
        Ok(_) => lines.skip_partial_line(),
        Err(e) => warnings.push(format!("stopped reading {}: {e}", path.display())),
    }
    lines
}

/// The time of a line of a file (epoch seconds), or None: [`journal_time`], [`audit_time`].
type TimeOf = fn(&[u8]) -> Option<f64>;

/// Below this many bytes a file is read from `floor` on: a search would save little.
const SEARCH_BELOW: u64 = 64 * 1024;
/// How long before `from` reading starts: lines a little out of time order (a fleet
/// journal's hosts, each stamped by its own clock, up to this far apart) are still read.
/// A time, not a stretch of bytes: a byte margin read a megabyte of lines wherever the
/// file had them, most of a quiet journal's day or a busy one's minute.
const DISORDER_SECONDS: f64 = 600.0;

/// Where to start reading `f` (at or after `floor`, before `size`) for the events at or
/// after `from`: a binary search over byte offsets on the time of the first whole line
/// after each, for the last offset whose line is older than `from` by more than
/// [`DISORDER_SECONDS`] (`events --since 1m` read a 100 MB journal from its start). Every
/// doubt (a line without a time, a read that fails) moves the start earlier, never
/// later: at worst the file is read from `floor`, as before.
fn time_start(f: &std::fs::File, floor: u64, size: u64, from: f64, time_of: TimeOf) -> u64 {
    let before = from - DISORDER_SECONDS;
    let mut buf = vec![0u8; PROBE_BYTES];
    let (mut lo, mut hi) = (floor, size);
    while hi - lo > SEARCH_BELOW {
        let mid = lo + (hi - lo) / 2;
        match first_time_after(f, mid, &mut buf, time_of) {
            Some(t) if t < before => lo = mid,
            _ => hi = mid,
        }
    }
    lo
}

/// How much a probe of the search reads: a line of ours is far shorter.
const PROBE_BYTES: usize = 64 * 1024;

/// The time (`time_of`) of the first whole line that starts after `offset` (read with
/// `pread` into `buf`, the file's position untouched); None when there is none in the
/// next [`PROBE_BYTES`] or it has none.
fn first_time_after(f: &std::fs::File, offset: u64, buf: &mut [u8], time_of: TimeOf) -> Option<f64> {
    use std::os::unix::fs::FileExt;
    let n = f.read_at(buf, offset).ok()?;
    let buf = buf.get(..n)?;
    let start = buf.iter().position(|b| *b == b'\n')? + 1;
    let rest = buf.get(start..)?;
    time_of(rest.get(..rest.iter().position(|b| *b == b'\n')?)?)
}

/// The recorded events of a home at or after a time, oldest first, rotated files
/// included, read a line at a time (memory stays bounded whatever the files hold).
/// Broken lines (not JSON, not UTF-8, too long) are skipped and counted; a file that is
/// not a regular file (a FIFO, a symlink) is skipped with a warning, never opened.
pub(crate) struct Journal {
    files: std::collections::VecDeque<(PathBuf, std::fs::File)>,
    current: Option<(PathBuf, Lines)>,
    from: f64,
    /// Lines of the file being read that were not JSON events.
    bad_in_current: u64,
    /// What could not be read, in words.
    pub warnings: Vec<String>,
}

/// Only the time of a line: most lines of a long journal are older than asked for, and
/// are passed over without building their whole tree.
#[derive(serde::Deserialize)]
struct Stamp {
    ts: Option<f64>,
}

/// The journal of `home` from `from` (epoch seconds); None when nothing was ever
/// recorded there (no journal file at all).
pub(crate) fn read_since(home: &Path, from: f64) -> Option<Journal> {
    let mut found = false;
    let mut journal = Journal { files: Default::default(), current: None, from, bad_in_current: 0, warnings: vec![] };
    for (p, opened) in open_rotated(&journal_file(home)) {
        match opened {
            Ok(Some(f)) => {
                found = true;
                journal.files.push_back((p, f));
            }
            Ok(None) => {}
            Err(e) => {
                found = true;
                journal.warnings.push(format!("skipped {}: {e}", p.display()));
            }
        }
    }
    found.then_some(journal)
}

impl Journal {
    /// The warnings (files skipped, unreadable lines, each naming its file), once the
    /// journal has been read.
    pub(crate) fn finish(mut self) -> Vec<String> {
        self.close_current();
        self.warnings
    }

    fn close_current(&mut self) {
        if let Some((path, lines)) = self.current.take() {
            let bad = lines.counts.bad + std::mem::take(&mut self.bad_in_current);
            if bad > 0 {
                self.warnings.push(format!(
                    "skipped {} in {}",
                    crate::lease::words::human::plural(bad as usize, "unreadable line", "unreadable lines"),
                    path.display()
                ));
            }
            if let Some(e) = lines.error {
                self.warnings.push(format!("stopped reading {}: {e}", path.display()));
            }
        }
    }
}

impl Iterator for Journal {
    type Item = Value;

    fn next(&mut self) -> Option<Value> {
        loop {
            if self.current.is_none() {
                let (path, f) = self.files.pop_front()?;
                let lines = lines_of(f, &path, Some((self.from, journal_time)), &mut self.warnings);
                self.current = Some((path, lines));
            }
            let from = self.from;
            let mut bad = 0;
            let mut got = None;
            if let Some((_, lines)) = self.current.as_mut() {
                while let Some(line) = lines.next_line() {
                    match serde_json::from_str::<Stamp>(line) {
                        Ok(Stamp { ts: Some(t) }) if t >= from => match serde_json::from_str::<Value>(line) {
                            Ok(v) => {
                                got = Some(v);
                                break;
                            }
                            Err(_) => bad += 1,
                        },
                        Ok(_) => {}
                        Err(_) => bad += 1,
                    }
                }
            }
            self.bad_in_current += bad;
            if got.is_some() {
                return got;
            }
            self.close_current();
        }
    }
}

/// An event in a few words, for a log line: `acquired session S1 (cli, pid 4433, lease 0f3c9e2a)`.
pub(crate) fn describe(v: &Value) -> String {
    let event = v["event"].as_str().unwrap_or("?");
    let entry = &v["lease"]["entry"];
    let detail = v["detail"].as_str();
    if entry.is_null() {
        return format!("{event}: {}", detail.unwrap_or(""));
    }
    let id: String = entry["lease_id"].as_str().unwrap_or("-").chars().take(8).collect();
    let tail = detail.map(|d| format!(" — {d}")).unwrap_or_default();
    format!(
        "{event} session {} ({}, pid {}, lease {id}){tail}",
        entry["session_id"].as_str().unwrap_or("-"),
        entry["surface"].as_str().unwrap_or("-"),
        entry["pid"].as_u64().map(|p| p.to_string()).unwrap_or_else(|| "-".into())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A journal of `n` events a second apart from t=1000 (each padded to ~200 bytes),
    /// with a line that is not an event every 97 lines; `late` events are written out of
    /// order by up to 5 s, as a fleet journal's hosts may be.
    fn journal(dir: &Path, n: u64, late: bool) -> Vec<f64> {
        std::fs::create_dir_all(dir.join("logs")).expect("logs");
        let mut text = String::new();
        let mut stamps = Vec::new();
        for i in 0..n {
            let ts = if late && i % 50 == 0 { 1000.0 + i as f64 - 5.0 } else { 1000.0 + i as f64 };
            stamps.push(ts);
            text.push_str(&format!("{{\"event\":\"acquired\",\"ts\":{ts},\"pad\":\"{}\"}}\n", "x".repeat(160)));
            if i % 97 == 0 {
                text.push_str("not an event\n");
            }
        }
        std::fs::write(journal_file(dir), text).expect("journal");
        stamps
    }

    fn read(dir: &Path, from: f64) -> Vec<f64> {
        read_since(dir, from).expect("a journal").filter_map(|v| v["ts"].as_f64()).collect()
    }

    #[test]
    fn since_reads_what_a_whole_read_would_from_where_the_time_is() {
        let dir = tempfile::tempdir().expect("dir");
        let stamps = journal(dir.path(), 40_000, false);
        for from in [0.0, 999.5, 1000.0, 1001.0, 20_000.0, 40_998.0, 40_999.0, 41_000.0, 99_999.0] {
            let expected: Vec<f64> = stamps.iter().copied().filter(|t| *t >= from).collect();
            assert_eq!(read(dir.path(), from), expected, "from {from}");
        }
        // The last minute of an 8 MB file is found without reading from its start: from
        // the search's last step before the line DISORDER_SECONDS before it, and no more.
        let f = std::fs::File::open(journal_file(dir.path())).expect("open");
        let size = f.metadata().expect("size").len();
        let start = time_start(&f, 0, size, 40_940.0, journal_time);
        let text = std::fs::read_to_string(journal_file(dir.path())).expect("read");
        let margin_line =
            text.find(&format!("\"ts\":{},", 40_940 - DISORDER_SECONDS as u64)).expect("that line") as u64;
        assert!(
            start <= margin_line && margin_line - start <= SEARCH_BELOW,
            "started at {start}, the margin's line at {margin_line}"
        );
        // A time before the first event, or a file whose lines have no time, is read whole.
        assert_eq!(time_start(&f, 0, size, 0.0, journal_time), 0);
    }

    /// An audit file of `n` prunes a second apart from t=1,000,000,000, each removing one
    /// lease (its line padded to ~600 bytes, as a prune's names its leases), with a line
    /// that is not a record every 89 lines and one over [`MAX_LINE`] after the 101st; the
    /// times of the events they are read as.
    fn audit(dir: &Path, n: u64) -> Vec<f64> {
        std::fs::create_dir_all(dir.join("logs")).expect("logs");
        let mut text = String::new();
        let mut stamps = Vec::new();
        for i in 0..n {
            let at = jiff::Timestamp::from_second(1_000_000_000 + i as i64).expect("a time");
            stamps.push(at.as_millisecond() as f64 / 1000.0);
            text.push_str(&format!(
                "{{\"action\":\"prune\",\"profile\":\"root\",\"removed\":[{{\"lease_id\":\"{i:032x}\",\"pid\":7,\
                 \"session_id\":\"S{i}\",\"pad\":\"{}\"}}],\"time\":\"{at}\",\"user\":\"op\"}}\n",
                "x".repeat(480)
            ));
            if i % 89 == 0 {
                text.push_str("not a record\n");
            }
            if i == 100 {
                // A line too long to be one of ours: skipped and counted when it is read.
                text.push_str(&format!("{}\n", "y".repeat(MAX_LINE + 1)));
            }
        }
        std::fs::write(crate::lease::home::audit::audit_file(dir), text).expect("audit file");
        stamps
    }

    #[test]
    fn the_audit_files_removals_since_a_time_are_found_by_the_search_too() {
        let dir = tempfile::tempdir().expect("dir");
        let stamps = audit(dir.path(), 15_000);
        let read = |from: f64| -> (Vec<f64>, Vec<String>) {
            let (events, warnings) = audit_since(dir.path(), from);
            (events.iter().filter_map(|v| v["ts"].as_f64()).collect(), warnings)
        };
        for from in [0.0, 1_000_000_000.0, 1_000_000_000.5, 1_000_007_000.0, 1_000_014_940.0, 1_000_014_999.0, 2e9] {
            let expected: Vec<f64> = stamps.iter().copied().filter(|t| *t >= from).collect();
            let (events, warnings) = read(from);
            assert_eq!(events, expected, "from {from}");
            // The long line near the start is read (and counted) only when reading starts
            // before it: not for a time hours after it.
            let long_line_read = warnings.iter().any(|w| w.contains("skipped 1 unreadable line"));
            assert_eq!(long_line_read, from < 1_000_001_000.0, "from {from}: {warnings:?}");
        }
        // The last minute of a 9 MB file: from the search's last step before the line
        // DISORDER_SECONDS before it, and no more.
        let path = crate::lease::home::audit::audit_file(dir.path());
        let f = std::fs::File::open(&path).expect("open");
        let size = f.metadata().expect("size").len();
        let from = 1_000_014_940.0;
        let start = time_start(&f, 0, size, from, audit_time);
        let text = std::fs::read_to_string(&path).expect("read");
        let margin = jiff::Timestamp::from_second((from - DISORDER_SECONDS) as i64).expect("a time");
        let margin_line = text.find(&format!("\"time\":\"{margin}\"")).expect("that line") as u64;
        assert!(
            start <= margin_line && margin_line - start <= SEARCH_BELOW + 1024,
            "started at {start}, the margin's record at {margin_line}"
        );
    }

    #[test]
    fn lines_a_little_out_of_time_order_are_still_read() {
        let dir = tempfile::tempdir().expect("dir");
        let stamps = journal(dir.path(), 40_000, true);
        for from in [20_003.0, 30_001.0, 40_996.0] {
            let expected: Vec<f64> = stamps.iter().copied().filter(|t| *t >= from).collect();
            assert_eq!(read(dir.path(), from), expected, "from {from}");
        }
    }
}
