//! `doctor --repair`: turn an invalid registry back into a valid one, keeping every
//! valid entry, dropping only the invalid ones (each listed), never dropping a live
//! owner's lease, with a timestamped 0600 backup of the exact old bytes beside it.

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use super::entry::{Entry, Problem};
use super::error::Error;
use super::liveness::{Liveness, Prober};
use super::paths::Registry;
use super::safe_file::{self, Spot};
use super::{lock, store};

/// One entry repair leaves out, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Dropped {
    pub index: usize,
    pub lease_id: Option<String>,
    pub why: String,
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
    extra: Map<String, Value>,
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

/// Plan a repair of these bytes (pure apart from liveness probes).
pub fn plan(bytes: &[u8], prober: &mut Prober) -> RepairPlan {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = String::from_utf8_lossy(bytes);
    let mut out = RepairPlan::default();
    let items: Vec<Value> = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(list)) => list,
        Ok(Value::Object(mut map)) => {
            let list = match map.remove("entries") {
                Some(Value::Array(list)) => list,
                _ => vec![],
            };
            out.extra = map;
            list
        }
        Ok(_) => vec![],
        Err(_) => {
            out.salvaged = true;
            salvage(&text)
        }
    };
    out.found = items.len();
    let mut seen: HashSet<String> = HashSet::new();
    let mut kept_values: Vec<Value> = Vec::new();
    for (index, item) in items.into_iter().enumerate() {
        let lease_id = item.get("lease_id").and_then(Value::as_str).map(str::to_owned);
        // Validate without the duplicate rule; duplicates are decided below.
        match Entry::from_value(index, item.clone(), &HashSet::<String>::new()) {
            Err(problems) => out.dropped.push(Dropped { index, lease_id, why: join(&problems) }),
            Ok(entry) => {
                let id = entry.lease_id().to_owned();
                if !seen.contains(&id) {
                    seen.insert(id);
                    kept_values.push(item);
                    out.kept.push(entry);
                } else if kept_values.contains(&item) {
                    out.dropped.push(Dropped { index, lease_id, why: "an exact copy of an earlier entry".into() });
                } else if prober.judge(&entry) == Liveness::Alive {
                    // Its owner is alive: dropping it would free its session to a second writer.
                    let fresh = rekeyed_id(&id, index, &item, &seen);
                    let mut raw = entry.fields();
                    raw.insert("lease_id".into(), Value::String(fresh.clone()));
                    if let Ok(e) = Entry::from_value(index, Value::Object(raw.clone()), &HashSet::<String>::new()) {
                        out.rekeyed.push((id, fresh.clone()));
                        seen.insert(fresh);
                        kept_values.push(Value::Object(raw));
                        out.kept.push(e);
                    }
                } else {
                    out.dropped.push(Dropped {
                        index,
                        lease_id,
                        why: format!("duplicate lease id, and its owner is {}", prober.judge(&entry).explain()),
                    });
                }
            }
        }
    }
    out
}

/// The new id for a live duplicate: a function of the entry (its old id, place and
/// text), so the preview and the repair that follows it under the lock name the same id.
/// 128 bits of two differently seeded hashes, written as 32 hex digits like Hermes' ids.
fn rekeyed_id(old: &str, index: usize, item: &Value, taken: &HashSet<String>) -> String {
    use std::hash::BuildHasher;
    let text = item.to_string();
    (0u64..)
        .map(|salt| {
            let h = |seed: u64| rustc_hash::FxBuildHasher.hash_one((seed, salt, old, index, text.as_str()));
            format!("{:016x}{:016x}", h(0x5eed_0001), h(0x5eed_0002))
        })
        .find(|id| !taken.contains(id))
        .unwrap_or_default()
}

fn join(problems: &[Problem]) -> String {
    problems.iter().map(|p| p.detail.clone()).collect::<Vec<_>>().join("; ")
}

/// Complete entry objects from broken JSON (e.g. truncated): parse them one by one
/// after the entries list opens, stopping at the first that does not parse.
fn salvage(text: &str) -> Vec<Value> {
    let start = match text.find("\"entries\"") {
        Some(at) => text[at..].find('[').map(|i| at + i + 1),
        None => text.find('[').map(|i| i + 1),
    };
    let Some(mut pos) = start else { return vec![] };
    let mut out = Vec::new();
    loop {
        let rest = text[pos..].trim_start_matches(|c: char| c.is_whitespace() || c == ',');
        pos = text.len() - rest.len();
        if !rest.starts_with('{') {
            break;
        }
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v)) => {
                pos += stream.byte_offset();
                out.push(v);
            }
            _ => break,
        }
    }
    out
}

/// Repair under the lock: back up the exact old bytes (mode 0600), then write the plan.
/// A valid or missing registry is left alone.
pub fn repair(reg: &Registry, dry_run: bool, lock_timeout: Duration) -> Result<RepairReport, Error> {
    let path = reg.path();
    // A dry run only looks: no lock, so nothing (not even the lock file) is created.
    let guard = if dry_run { None } else { Some(lock::lock(&reg.lock_path(), lock_timeout)?) };
    let temp_files = store::leftover_temp_files(&reg.runtime_dir());
    let runtime = if dry_run {
        None
    } else {
        safe_file::Dir::open(&Spot::in_home(&reg.runtime_dir()))
            .map_err(|e| Error::io("open", &reg.runtime_dir(), e))?
    };
    if let Some(dir) = runtime {
        for t in &temp_files {
            // Removing a name, never following it (a symlink planted there goes, not its target).
            dir.remove(t.file_name().unwrap_or_default())
                .map_err(|e| Error::io("remove a leftover temp file", t, e))?;
        }
    }
    let only_temps = |temp_files: Vec<PathBuf>| RepairReport {
        plan: RepairPlan::default(),
        backup: None,
        invalid: false,
        needed: !temp_files.is_empty(),
        temp_files,
    };
    let bytes = match store::read_bytes(&path) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(only_temps(temp_files)),
        Err(e) => return Err(e),
    };
    if store::parse(&bytes).is_ok() {
        return Ok(only_temps(temp_files));
    }
    if store::too_many_values(&bytes) {
        return Err(Error::Refused(format!(
            "{} holds more than {} JSON values: too large to repair safely; move it aside and start empty",
            path.display(),
            store::MAX_JSON_VALUES
        )));
    }
    let plan = plan(&bytes, &mut Prober::new());
    let Some(guard) = guard else {
        return Ok(RepairReport { plan, backup: None, invalid: true, needed: true, temp_files });
    };
    let backup = write_backup(&path, &bytes)?;
    let file = store::RegistryFile { entries: plan.kept.clone(), extra: plan.extra.clone() };
    store::write(&guard, &path, &file)?;
    Ok(RepairReport { plan, backup: Some(backup), invalid: true, needed: true, temp_files })
}

/// The old bytes beside the registry, mode 0600, created (O_EXCL) as the runtime
/// directory's owner: the user can read their own backup after root's repair.
fn write_backup(path: &std::path::Path, bytes: &[u8]) -> Result<PathBuf, Error> {
    let stamp = jiff::Timestamp::from_second(super::now() as i64)
        .map(|t| t.strftime("%Y%m%d-%H%M%S").to_string())
        .unwrap_or_else(|_| "00000000-000000".into());
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let spot = Spot::in_subdir(path);
    let dir_spot = Spot::new(&spot.home, spot.rel.parent().unwrap_or(std::path::Path::new("")));
    let dir = safe_file::Dir::create(&dir_spot).map_err(|e| Error::io("open", &dir_spot.path(), e))?;
    for n in 0..100 {
        let suffix = if n == 0 { String::new() } else { format!(".{n}") };
        let backup_name = format!("{name}.bak-{stamp}{suffix}");
        let backup = dir.path().join(&backup_name);
        match dir.create_new(&backup_name, 0o600, rustix::fs::OFlags::empty()) {
            Ok(mut f) => {
                f.write_all(bytes).and_then(|_| f.sync_all()).map_err(|e| Error::io("write the backup", &backup, e))?;
                return Ok(backup);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io("create the backup", &backup, e)),
        }
    }
    Err(Error::Refused("no free backup name beside the registry".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salvages_complete_entries_of_a_truncated_file() {
        let text = r#"{"entries": [{"lease_id": "a", "session_id": "S", "pid": 1}, {"lease_id": "b", "session_id": "T", "pid": 2}, {"lease_id": "c", "sess"#;
        let p = plan(text.as_bytes(), &mut Prober::new());
        assert!(p.salvaged);
        assert_eq!(p.kept.iter().map(Entry::lease_id).collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn drops_invalid_and_exact_copies_and_rekeys_a_live_duplicate() {
        let me = std::process::id();
        let text = format!(
            r#"[{{"lease_id": "a", "session_id": "S", "pid": {me}}}, {{"lease_id": "a", "session_id": "S", "pid": {me}}},
               {{"lease_id": "a", "session_id": "T", "pid": {me}}}, {{"lease_id": "z", "session_id": "", "pid": {me}}},
               {{"lease_id": "a", "session_id": "U", "pid": 2147483646}}]"#
        );
        let p = plan(text.as_bytes(), &mut Prober::new());
        let sessions: Vec<&str> = p.kept.iter().map(Entry::session_id).collect();
        assert_eq!(sessions, ["S", "T"], "the live duplicate is kept under a fresh id");
        assert_eq!(p.rekeyed.len(), 1);
        let dropped: Vec<usize> = p.dropped.iter().map(|d| d.index).collect();
        assert_eq!(dropped, [1, 3, 4]);
        assert!(p.dropped[1].why.contains("session_id is blank"));
    }
}
