//! What a repair of a registry plans and did (the file backend salvages; etcd has
//! nothing to repair): shared by every backend and the audit record.

use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::lease::format::entry::Entry;

/// One entry repair leaves out, and why, with its owner as far as it can be read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Dropped {
    pub index: usize,
    pub lease_id: Option<String>,
    pub session_id: Option<String>,
    pub pid: Option<u64>,
    /// The owner's liveness now, in words, when its pid could be read.
    pub owner: Option<String>,
    /// Its owner is or may be alive and it fences a session: dropping it could let a
    /// second writer in, so the repair needs `--force`.
    pub may_be_live: bool,
    pub why: String,
}

/// An entry the file cut short after its identifying fields (lease id, session id,
/// pid, start time), restored with the fields Hermes writes that it lacked.
#[derive(Debug, Clone, PartialEq)]
pub struct Restored {
    pub index: usize,
    pub lease_id: String,
    pub session_id: String,
    /// The fields rebuilt (surface as null, started_at/updated_at as now).
    pub rebuilt: Vec<String>,
}

/// What a repair is asked to do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RepairOptions {
    /// Plan only: change nothing, take no lock.
    pub dry_run: bool,
    /// Repair even when a lease whose owner may be alive would be lost.
    pub force: bool,
}

/// What a repair keeps, drops and changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RepairPlan {
    pub kept: Vec<Entry>,
    pub dropped: Vec<Dropped>,
    /// A duplicate lease id whose owner is alive gets a fresh id rather than being dropped.
    pub rekeyed: Vec<(String, String)>,
    /// Entries found in the file at all (a truncated file may hold fewer than it did).
    pub found: usize,
    /// True when the JSON itself was broken and entries were salvaged one by one.
    pub salvaged: bool,
    /// Entries cut short and restored (also in `kept`).
    pub restored: Vec<Restored>,
    /// Where the file stops being readable, when something unreadable follows the last
    /// entry read: whatever entries stood there are unknown, and may be live owners'.
    pub cut_at: Option<usize>,
    pub(crate) extra: Map<String, Value>,
}

impl RepairPlan {
    /// Why this repair could lose a live owner's lease (empty when it cannot): such a
    /// repair is refused without `--force`.
    pub fn live_risks(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .dropped
            .iter()
            .filter(|d| d.may_be_live)
            .map(|d| {
                format!(
                    "entry {} (session {}, pid {}) is dropped and its owner is {}",
                    d.index,
                    d.session_id.as_deref().unwrap_or("?"),
                    d.pid.map(|p| p.to_string()).unwrap_or_else(|| "?".into()),
                    d.owner.as_deref().unwrap_or("unknown")
                )
            })
            .collect();
        if let Some(at) = self.cut_at {
            out.push(format!(
                "the file is unreadable from byte {at} on: the entries that stood there are lost, and nobody can \
                 tell whose they were"
            ));
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RepairReport {
    pub plan: RepairPlan,
    /// Temp files of crashed writers in `runtime/`, removed (or, on a dry run, to remove).
    /// Under the lock none can be a live write's: a writer holds it while its file exists.
    pub temp_files: Vec<PathBuf>,
    /// None on a dry run or when there was nothing to repair.
    pub backup: Option<PathBuf>,
    /// The registry itself was invalid (else only temp files, if anything, needed doing).
    pub invalid: bool,
    pub needed: bool,
}

impl RepairReport {
    /// The whole report as JSON: what `doctor --repair --json` prints and the audit
    /// record keeps (one shape for the CLI and the console).
    pub fn to_json(&self) -> Value {
        let p = &self.plan;
        serde_json::json!({
            "backup": self.backup.as_ref().map(|b| b.display().to_string()),
            "kept": p.kept.iter().map(|e| e.lease_id().to_owned()).collect::<Vec<_>>(),
            "restored": p.restored.iter().map(|r| serde_json::json!({
                "entry": r.index, "lease_id": r.lease_id, "session_id": r.session_id, "rebuilt": r.rebuilt,
            })).collect::<Vec<_>>(),
            "dropped": p.dropped.iter().map(|d| serde_json::json!({
                "entry": d.index, "lease_id": d.lease_id, "session_id": d.session_id, "pid": d.pid,
                "owner": d.owner, "may_be_live": d.may_be_live, "why": d.why,
            })).collect::<Vec<_>>(),
            "lost_after_byte": p.cut_at,
            "rekeyed": p.rekeyed.iter().map(|(a, b)| serde_json::json!({"from": a, "to": b})).collect::<Vec<_>>(),
            "removed_temp_files": self.temp_files.iter().map(|t| t.display().to_string()).collect::<Vec<_>>(),
        })
    }
}
