//! The event journal `leasectl events --follow --record` keeps in each home
//! (`<home>/logs/leasectl-events.jsonl`, rotated like the audit file): read back by
//! `events --since` and by the console when it opens.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The journal of a home.
pub fn journal_file(home: &Path) -> PathBuf {
    home.join("logs").join("leasectl-events.jsonl")
}

/// The recorded events of `home` at or after `from` (epoch seconds), oldest first,
/// rotated files included; broken lines skipped. None when nothing was ever recorded.
pub fn read_since(home: &Path, from: f64) -> Option<Vec<Value>> {
    let file = journal_file(home);
    let mut files: Vec<PathBuf> =
        (1..=super::audit::KEEP).rev().map(|n| PathBuf::from(format!("{}.{n}", file.display()))).collect();
    files.push(file);
    let mut found = false;
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else { continue };
        found = true;
        out.extend(
            text.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|v| v["ts"].as_f64().is_some_and(|t| t >= from)),
        );
    }
    found.then_some(out)
}

/// An event in a few words, for a log line: `acquired session S1 (cli, pid 4433, lease 0f3c9e2a)`.
pub fn describe(v: &Value) -> String {
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
