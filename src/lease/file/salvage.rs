//! `doctor --repair`: turn an invalid registry back into a valid one, keeping every
//! valid entry, dropping only the invalid ones (each listed), never dropping a live
//! owner's lease, with a timestamped 0600 backup of the exact old bytes beside it.

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use super::registry;
use crate::lease::doctor::repair::{Dropped, RepairOptions, RepairPlan, RepairReport, Restored};
use crate::lease::error::{Error, Guarded, LiveOwners};
use crate::lease::format::entry::Entry;
use crate::lease::format::problem::Problem;
use crate::lease::home::paths::Registry;
use crate::lease::home::safe_file::{self, Spot};
use crate::lease::owners::liveness::Prober;
use crate::lease::{format::pyjson, home::lock};

/// Plan a repair of these bytes (pure apart from liveness probes).
pub fn plan(bytes: &[u8], prober: &mut Prober) -> RepairPlan {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = String::from_utf8_lossy(bytes);
    let mut out = RepairPlan::default();
    let mut tail: Option<Map<String, Value>> = None;
    let items: Vec<Value> = match pyjson::parse(&text) {
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
            let found = salvage(&text);
            out.cut_at = found.cut_at;
            tail = found.tail;
            found.items
        }
    };
    out.found = items.len();
    let mut seen: HashSet<String> = HashSet::new();
    let mut kept_values: Vec<Value> = Vec::new();
    for (index, item) in items.into_iter().enumerate() {
        // Validate without the duplicate rule; duplicates are decided below.
        match Entry::from_value(index, item.clone(), &HashSet::<String>::new()) {
            Err(problems) => out.dropped.push(dropped(index, &item, join(&problems), prober)),
            Ok(entry) => {
                let id = entry.lease_id().to_owned();
                if !seen.contains(&id) {
                    seen.insert(id);
                    kept_values.push(item);
                    out.kept.push(entry);
                } else if kept_values.contains(&item) {
                    // The same lease stays: nothing is lost with its copy.
                    let mut d = dropped(index, &item, "an exact copy of an earlier entry".into(), prober);
                    d.may_be_live = false;
                    out.dropped.push(d);
                } else if crate::lease::view::may_be_alive(&prober.judge(&entry)) {
                    // Its owner may be alive (hidden by /proc too): dropping it would free
                    // its session to a second writer.
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
                    let why = format!("duplicate lease id, and its owner is {}", prober.judge(&entry).explain());
                    out.dropped.push(dropped(index, &item, why, prober));
                }
            }
        }
    }
    if let Some(partial) = tail {
        restore(partial, out.found, &mut out, &mut seen, prober);
    }
    out
}

/// A dropped entry, with its owner judged now as far as its fields can be read.
fn dropped(index: usize, item: &Value, why: String, prober: &mut Prober) -> Dropped {
    let text = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_owned);
    let pid = item
        .get("pid")
        .and_then(|p| p.as_u64().or_else(|| p.as_str().and_then(|s| s.trim().parse().ok())))
        .filter(|p| *p > 0);
    let session_id = text("session_id");
    let start = item.get("process_start_time").and_then(Value::as_f64);
    let verdict = pid.map(|p| prober.judge_pid(p, start));
    // A blank session fences nothing; an unreadable pid cannot be proven dead.
    let fences = session_id.as_deref().is_some_and(|s| !crate::lease::format::entry::py_is_blank(s));
    let may_be_live = fences && verdict.as_ref().is_none_or(crate::lease::view::may_be_alive);
    Dropped {
        index,
        lease_id: text("lease_id"),
        session_id,
        pid,
        owner: verdict.map(|v| v.explain()),
        may_be_live,
        why,
    }
}

/// The entry the cut ran through: restored when its identifying fields were read,
/// else dropped (named as far as it can be read).
fn restore(
    mut partial: Map<String, Value>,
    index: usize,
    out: &mut RepairPlan,
    seen: &mut HashSet<String>,
    prober: &mut Prober,
) {
    let has = |m: &Map<String, Value>, k: &str| m.get(k).is_some();
    let identified = has(&partial, "lease_id")
        && has(&partial, "session_id")
        && has(&partial, "pid")
        && has(&partial, "process_start_time");
    let mut rebuilt = Vec::new();
    if identified {
        let now = crate::lease::clock::now();
        for (key, value) in
            [("started_at", Value::from(now)), ("surface", Value::Null), ("updated_at", Value::from(now))]
        {
            if !partial.contains_key(key) {
                partial.insert(key.into(), value);
                rebuilt.push(key.to_owned());
            }
        }
    }
    let item = Value::Object(partial);
    let entry = identified.then(|| Entry::from_value(index, item.clone(), &HashSet::<String>::new()));
    match entry {
        Some(Ok(e)) if !seen.contains(e.lease_id()) => {
            seen.insert(e.lease_id().to_owned());
            out.restored.push(Restored {
                index,
                lease_id: e.lease_id().to_owned(),
                session_id: e.session_id().to_owned(),
                rebuilt,
            });
            out.kept.push(e);
        }
        Some(Ok(_)) => out.dropped.push(dropped(index, &item, "cut short, and its lease id is taken".into(), prober)),
        Some(Err(problems)) => {
            out.dropped.push(dropped(index, &item, format!("cut short: {}", join(&problems)), prober))
        }
        None => out.dropped.push(dropped(index, &item, "cut short before its identifying fields".into(), prober)),
    }
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

/// What salvage finds in broken JSON.
struct Salvaged {
    items: Vec<Value>,
    /// The complete fields of the entry the file breaks off in.
    tail: Option<Map<String, Value>>,
    /// Where the unreadable rest begins, when there is more than the list's end.
    cut_at: Option<usize>,
}

/// Complete entry objects from broken JSON (e.g. truncated): parse them one by one
/// after the entries list opens, stopping at the first that does not parse; of that
/// one, the fields that were written whole.
fn salvage(text: &str) -> Salvaged {
    let start = match text.find("\"entries\"") {
        Some(at) => text[at..].find('[').map(|i| at + i + 1),
        None => text.find('[').map(|i| i + 1),
    };
    let Some(mut pos) = start else { return Salvaged { items: vec![], tail: None, cut_at: Some(0) } };
    let mut items = Vec::new();
    loop {
        let rest = text[pos..].trim_start_matches(|c: char| c.is_whitespace() || c == ',');
        pos = text.len() - rest.len();
        if !rest.starts_with('{') {
            // The list's end (and the object's) is all that may follow without loss.
            let end = rest.trim_end();
            let clean = ["", "]", "]}"].contains(&end.replace(' ', "").as_str());
            return Salvaged { items, tail: None, cut_at: (!clean).then_some(pos) };
        }
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v)) => {
                pos += stream.byte_offset();
                items.push(v);
            }
            _ => return Salvaged { items, tail: partial_object(rest), cut_at: Some(pos) },
        }
    }
}

/// The members of a JSON object that were written whole before it broke off: the
/// longest prefix ending at a top-level comma (or the whole text) that parses once closed.
fn partial_object(text: &str) -> Option<Map<String, Value>> {
    let mut depth = 0usize;
    let mut cuts = Vec::new();
    for (i, b) in pyjson::outside_strings(text.as_bytes()) {
        match b {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => cuts.push(i),
            _ => {}
        }
    }
    cuts.push(text.len());
    cuts.iter().rev().find_map(|&cut| match pyjson::parse(&format!("{}}}", &text[..cut])) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    })
}

/// Repair under the lock: back up the exact old bytes (mode 0600), then write the plan.
/// A valid or missing registry is left alone.
pub fn repair(reg: &Registry, opts: RepairOptions, lock_timeout: Duration) -> Result<RepairReport, Error> {
    let dry_run = opts.dry_run;
    let path = reg.path();
    // A dry run only looks: no lock, so nothing (not even the lock file) is created.
    let guard = if dry_run { None } else { Some(lock::lock(&reg.lock_path(), lock_timeout)?) };
    let temp_files = registry::leftover_temp_files(&reg.runtime_dir());
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
    let bytes = match registry::read_bytes(&path) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(only_temps(temp_files)),
        Err(e) => return Err(e),
    };
    if registry::parse(&bytes).is_ok() {
        return Ok(only_temps(temp_files));
    }
    if pyjson::too_many_values(&bytes) {
        return Err(Error::Refused(format!(
            "{} holds more than {} JSON values: too large to repair safely; move it aside and start empty",
            path.display(),
            pyjson::MAX_JSON_VALUES
        )));
    }
    let plan = plan(&bytes, &mut Prober::new());
    let Some(guard) = guard else {
        return Ok(RepairReport { plan, backup: None, invalid: true, needed: true, temp_files });
    };
    let risks = plan.live_risks();
    if !risks.is_empty() && !opts.force {
        return Err(Error::LiveOwner(LiveOwners { action: Guarded::Repair { path: path.clone() }, described: risks }));
    }
    let backup = write_backup(&path, &bytes)?;
    let file = registry::RegistryFile { entries: plan.kept.clone(), extra: plan.extra.clone() };
    registry::write(&guard, &path, &file)?;
    Ok(RepairReport { plan, backup: Some(backup), invalid: true, needed: true, temp_files })
}

/// The old bytes beside the registry, mode 0600, created (O_EXCL) as the runtime
/// directory's owner: the user can read their own backup after root's repair.
fn write_backup(path: &std::path::Path, bytes: &[u8]) -> Result<PathBuf, Error> {
    let stamp = jiff::Timestamp::from_second(crate::lease::clock::now() as i64)
        .map(|t| t.strftime("%Y%m%d-%H%M%S").to_string())
        .unwrap_or_else(|_| "00000000-000000".into());
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let spot = Spot::in_subdir(path);
    let (dir_spot, _) = spot.dir_and_name().map_err(|e| Error::io("back up", path, e))?;
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
