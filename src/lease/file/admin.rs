//! The operator's actions: a read-only snapshot, prune, force-release and doctor.

use std::collections::BTreeMap;
use std::time::Duration;

use super::registry;
use crate::lease::doctor::report::Suspects;
use crate::lease::error::{Error, Guarded, InvalidRegistry, LiveOwners, Missing};
use crate::lease::format::entry::Entry;
use crate::lease::format::problem::{Problem, Rule};
use crate::lease::home::config::read_cap;
use crate::lease::home::paths::Registry;
use crate::lease::owners::liveness::{Liveness, Prober};
use crate::lease::view::{
    DoctorLeases, DoctorReport, ForceOptions, LeaseView, PruneOptions, Removal, Target, owner_may_be_alive,
};
use crate::lease::{format::pyjson, home::lock};

/// A read-only look at one registry: never locks, never writes.
pub fn snapshot(reg: &Registry) -> crate::lease::backend::Listing {
    use crate::lease::backend::LeaseStore;
    super::FileStore::new(reg.clone(), lock::DEFAULT_LOCK_TIMEOUT).read()
}

fn judge_all(entries: Vec<Entry>) -> Vec<LeaseView> {
    let mut prober = Prober::new();
    entries.into_iter().map(|entry| LeaseView::judged(entry, &mut prober)).collect()
}

/// Remove dead and recycled owners only (an unknown verdict is kept). A "recycled" owner
/// whose start time is off by whole seconds is most likely the same process seen across a
/// wall-clock step: kept, and named, unless `include_clock_step`. (The fence keeps Hermes'
/// rule and prunes it: both must agree on who owns a session.)
///
/// Owners are probed without the lock, as Hermes 0.22 does (#115578): an exclusive lock
/// held across a probe of each owner starves every other writer. The write re-locks and
/// removes only the leases judged, still unchanged: one acquired, moved or re-acquired in
/// between is never lost.
pub fn prune(reg: &Registry, opts: PruneOptions, lock_timeout: Duration) -> Result<Removal, Error> {
    let mut suspects = Vec::new();
    let mut working = Vec::new();
    let mut removal = judge_then_edit(reg, opts.dry_run, lock_timeout, |views| {
        Ok(views
            .iter()
            .map(|v| {
                let suspect = v.liveness.clock_step_suspected() && !opts.include_clock_step;
                if suspect {
                    suspects.push(v.clone());
                }
                let work = matches!(v.liveness, Liveness::WorkRunning { .. });
                if work && !opts.include_work_running {
                    working.push(v.clone());
                }
                (matches!(v.liveness, Liveness::Dead(_) | Liveness::Recycled { .. }) && !suspect)
                    || (work && opts.include_work_running)
            })
            .collect())
    })?;
    removal.kept_clock_step = suspects;
    removal.kept_work_running = working;
    // Removing a lease whose work runs lets a second writer in beside that work.
    removal.live_owner |= removal.removed.iter().any(|v| matches!(v.liveness, Liveness::WorkRunning { .. }));
    Ok(removal)
}

/// Release leases on an operator's word. A live (or unprovable) owner's lease is
/// refused unless `allow_live`, and the result says when an owner was alive.
pub fn force_release(
    reg: &Registry,
    target: &Target,
    opts: ForceOptions,
    lock_timeout: Duration,
) -> Result<Removal, Error> {
    let ForceOptions { allow_live, dry_run } = opts;
    let path = reg.path();
    let mut needs_live = Vec::new();
    let mut leftovers: Vec<String> = Vec::new();
    let mut removal = edit(reg, dry_run, lock_timeout, |views| {
        let mut chosen: Vec<bool> = views.iter().map(|v| target.names(&v.entry)).collect();
        if !chosen.contains(&true) {
            return Err(Error::NotFound(Missing {
                target: target.clone(),
                live_only: false,
                place: format!("in {}", path.display()),
            }));
        }
        // A gateway's lease with no turn running for its chat is no live owner's: the
        // gateway holds nothing between turns and its next turn asks the fence again.
        leftovers = gateway_leftovers(reg, views, &chosen);
        let needs_word = |v: &LeaseView| owner_may_be_alive(v) && !leftovers.iter().any(|id| id == v.entry.lease_id());
        let live: Vec<&LeaseView> =
            views.iter().zip(&chosen).filter(|(v, c)| **c && needs_word(v)).map(|(v, _)| v).collect();
        // A dry run shows the plan: what goes, and what would need --live.
        if !live.is_empty() && !allow_live && dry_run {
            needs_live = live.into_iter().cloned().collect();
            for (c, v) in chosen.iter_mut().zip(views) {
                *c = *c && !needs_word(v);
            }
            return Ok(chosen);
        }
        if !live.is_empty() && !allow_live {
            let described: Vec<String> = live
                .iter()
                .map(|v| {
                    format!(
                        "lease {} (session {}, pid {}, {})",
                        v.entry.lease_id(),
                        v.entry.session_id(),
                        v.entry.pid(),
                        v.liveness.explain()
                    )
                })
                .collect();
            return Err(Error::LiveOwner(LiveOwners { action: Guarded::Release, described }));
        }
        Ok(chosen)
    })?;
    removal.needs_live = needs_live;
    removal.live_owner =
        removal.removed.iter().any(|v| owner_may_be_alive(v) && !leftovers.iter().any(|id| id == v.entry.lease_id()));
    removal.gateway_leftovers = leftovers;
    Ok(removal)
}

/// The lease ids among the `chosen` of `views` that are a live gateway's leftovers: no
/// turn runs for their chat, as the home's state.db marks turns (read only when a
/// gateway's live lease is chosen).
fn gateway_leftovers(reg: &Registry, views: &[LeaseView], chosen: &[bool]) -> Vec<String> {
    use crate::lease::owners::kind::{OwnerKind, gateway_leftover};
    let candidates: Vec<&LeaseView> = views
        .iter()
        .zip(chosen)
        .filter(|(v, c)| **c && v.liveness.is_alive())
        .map(|(v, _)| v)
        .filter(|v| matches!(OwnerKind::of(&v.entry, None), OwnerKind::Gateway { .. }))
        .collect();
    if candidates.is_empty() {
        return vec![];
    }
    let sessions: Vec<&str> = candidates.iter().map(|v| v.entry.session_id()).collect();
    let contexts = crate::lease::home::context::read(&reg.home, &sessions);
    let at = crate::lease::clock::now();
    candidates
        .into_iter()
        .filter(|v| {
            let turn = contexts.get(v.entry.session_id()).and_then(|c| c.gateway_turn());
            gateway_leftover(&v.entry, turn, at)
        })
        .map(|v| v.entry.lease_id().to_owned())
        .collect()
}

/// Under the lock: read strictly, judge, let `choose` pick what goes, write if anything does.
fn edit(
    reg: &Registry,
    dry_run: bool,
    lock_timeout: Duration,
    choose: impl FnOnce(&[LeaseView]) -> Result<Vec<bool>, Error>,
) -> Result<Removal, Error> {
    let path = reg.path();
    // A dry run only looks, and a reader that only looks needs no lock (the registry is
    // replaced whole by rename): it creates nothing, not even the lock file.
    let guard = if dry_run { None } else { Some(lock::lock(&reg.lock_path(), lock_timeout)?) };
    let file = registry::read(&path)?;
    let views = judge_all(file.entries);
    let chosen = choose(&views)?;
    let (mut removed, mut kept) = (Vec::new(), Vec::new());
    for (view, go) in views.into_iter().zip(chosen) {
        if go { removed.push(view) } else { kept.push(view.entry) }
    }
    let live_owner = removed.iter().any(owner_may_be_alive);
    if let Some(guard) = guard.filter(|_| !removed.is_empty()) {
        registry::write(&guard, &path, &registry::RegistryFile { entries: kept, extra: file.extra })?;
    }
    Ok(Removal { removed, dry_run, live_owner, ..Removal::default() })
}

/// Read and judge without the lock, let `choose` pick what goes, then under the lock
/// remove what was chosen and is unchanged since (same lease id, owner and session).
fn judge_then_edit(
    reg: &Registry,
    dry_run: bool,
    lock_timeout: Duration,
    choose: impl FnOnce(&[LeaseView]) -> Result<Vec<bool>, Error>,
) -> Result<Removal, Error> {
    let path = reg.path();
    let views = judge_all(registry::read(&path)?.entries);
    let chosen = choose(&views)?;
    let chosen: Vec<LeaseView> = views.into_iter().zip(chosen).filter(|(_, go)| *go).map(|(v, _)| v).collect();
    if dry_run || chosen.is_empty() {
        let live_owner = chosen.iter().any(owner_may_be_alive);
        return Ok(Removal { removed: chosen, dry_run, live_owner, ..Removal::default() });
    }
    let guard = lock::lock(&reg.lock_path(), lock_timeout)?;
    let file = registry::read(&path)?;
    let by_id: std::collections::HashMap<&str, usize> =
        chosen.iter().enumerate().map(|(i, v)| (v.entry.lease_id(), i)).collect();
    let unchanged = |e: &Entry| by_id.get(e.lease_id()).copied().filter(|i| chosen[*i].entry == *e);
    let mut found = vec![false; chosen.len()];
    let mut kept = Vec::with_capacity(file.entries.len());
    for entry in file.entries {
        match unchanged(&entry) {
            Some(i) => found[i] = true,
            None => kept.push(entry),
        }
    }
    let removed: Vec<LeaseView> = chosen.into_iter().zip(found).filter(|(_, f)| *f).map(|(v, _)| v).collect();
    if !removed.is_empty() {
        registry::write(&guard, &path, &registry::RegistryFile { entries: kept, extra: file.extra })?;
    }
    let live_owner = removed.iter().any(owner_may_be_alive);
    Ok(Removal { removed, dry_run, live_owner, ..Removal::default() })
}

/// Temp files younger than this may belong to a write in progress.
const TEMP_GRACE: Duration = Duration::from_secs(10);

/// Inspect a registry without locking or writing.
pub fn doctor(reg: &Registry) -> DoctorReport {
    doctor_with(reg, None)
}

/// [`doctor`], with leak suspects judged against `idle` (else the home's config).
pub(crate) fn doctor_with(reg: &Registry, idle: Option<Duration>) -> DoctorReport {
    let path = reg.path();
    let mut report = DoctorReport {
        registry: reg.clone(),
        exists: path.exists(),
        cap: read_cap(&reg.config_path()),
        problems: vec![],
        empty_session_ids: vec![],
        conflicts: BTreeMap::new(),
        leases: DoctorLeases::default(),
        leftover_temp_files: old_temp_files(reg),
        lock_holder: lock::lock_holder(&reg.lock_path()),
        lock_holder_command: None,
        lock_watched: None,
        lock_problem: lock_problem(reg),
        symlink_to: symlink_target(&path),
        live: 0,
        over_cap: false,
        context_unknown: None,
        idle_warning: None,
        hidden: vec![],
        pid_namespaces: vec![],
        suspect_owners: vec![],
    };
    if let Some(pid) = report.lock_holder {
        report.lock_holder_command = crate::lease::owners::owner::command_name(u64::from(pid))
            .map(|c| crate::lease::words::human::escape(&c).into_owned());
        // Watched for a moment: an instant's hold is a writer at work; one that outlasts
        // the watch is held by something stuck (the lock-timeout error says the same).
        let started = std::time::Instant::now();
        let got = lock::lock(&reg.lock_path(), crate::lease::view::LOCK_WATCH);
        report.lock_watched = Some((started.elapsed(), got.is_err()));
    }
    match registry::read_bytes(&path) {
        Err(Error::Invalid(InvalidRegistry { problems, .. })) => report.problems = problems,
        Err(other) => report.problems.push(Problem {
            rule: Rule::Unreadable,
            entry_index: None,
            lease_id: None,
            detail: other.to_string(),
        }),
        Ok(None) => {}
        // Parsed in place (the entries borrow the file's text rather than copy it), each
        // entry judged as it is read: the entries are never all held beside their views.
        Ok(Some(bytes)) => {
            let mut prober = Prober::new();
            match registry::parse_owned_into(bytes, &mut |entry| LeaseView::judged(entry, &mut prober)) {
                registry::ParsedInto { result: Err(problems), text } => {
                    report.empty_session_ids = empty_session_ids(match &text {
                        Ok(text) => text.as_bytes(),
                        Err(bytes) => bytes,
                    });
                    report.problems = problems;
                }
                registry::ParsedInto { result: Ok((views, _)), .. } => judge_valid(&mut report, views, idle),
            }
        }
    }
    report
}

/// What doctor says of a valid registry's leases: live owners by session (conflicts,
/// over the cap), leak suspects, and the stale leases of dead and recycled owners.
fn judge_valid(report: &mut DoctorReport, views: Vec<LeaseView>, idle: Option<Duration>) {
    // Only a conflict's leases are copied.
    let (live, twice) = crate::lease::view::held_twice(&views);
    report.live = live;
    report.over_cap = report.cap.cap.is_some_and(|c| report.live as u64 > c);
    report.hidden = views.iter().filter(|v| v.liveness.name() == "hidden").cloned().collect();
    report.pid_namespaces = crate::lease::view::pid_namespaces(&views);
    report.conflicts = twice
        .into_iter()
        .map(|(session, held)| (session.to_owned(), held.iter().map(|i| views[*i].clone()).collect()))
        .collect();
    let suspects = leak_suspects(report, &views, idle);
    report.leases = suspects.keep(views);
}

/// Live owners whose session ended or went idle in the home's state.db, or why it could not tell.
fn leak_suspects(report: &mut DoctorReport, views: &[LeaseView], idle: Option<Duration>) -> Suspects {
    use crate::lease::home::context;
    let home = report.registry.home.clone();
    let (threshold, warning) = context::idle_threshold(&home, idle);
    report.idle_warning = warning;
    let at = crate::lease::clock::now();
    let live = || views.iter().filter(|v| v.liveness.is_alive());
    let contexts = match context::read_found(&home, || live().map(|v| v.entry.session_id()).collect()) {
        context::Contexts::Unknown(why) => {
            report.context_unknown = Some(why);
            return Suspects::judged_at(at, 0);
        }
        contexts => contexts,
    };
    let mut suspects = Suspects::judged_at(at, report.live);
    let mut names = crate::lease::owners::owner::CommandNames::default();
    let mut found = Vec::new();
    for (i, v) in views.iter().enumerate().filter(|(_, v)| v.liveness.is_alive()) {
        let Some(ctx) = contexts.get(v.entry.session_id()) else { continue };
        if let Some(leak) = context::leak(v, Some(ctx), threshold, at) {
            suspects.add(i, leak, names.of(v.entry.pid()));
            found.push(i);
        }
    }
    report.suspect_owners = suspect_owners(views, &found);
    suspects
}

/// The owners of the leases at `found` in `views` (leak suspects), each once: how many
/// leases it holds and its command line.
fn suspect_owners(views: &[LeaseView], found: &[usize]) -> Vec<crate::lease::doctor::report::SuspectOwner> {
    if found.is_empty() {
        return vec![];
    }
    let held = crate::lease::owners::kind::Holdings::of(views);
    let mut owners: Vec<&LeaseView> = Vec::new();
    for v in found.iter().filter_map(|&i| views.get(i)) {
        let same = |w: &&LeaseView| {
            w.entry.pid() == v.entry.pid()
                && w.entry.process_start_time().map(f64::to_bits) == v.entry.process_start_time().map(f64::to_bits)
        };
        if !owners.iter().any(same) {
            owners.push(v);
        }
    }
    owners
        .into_iter()
        .map(|v| crate::lease::doctor::report::SuspectOwner {
            pid: v.entry.pid(),
            process_start_time: v.entry.process_start_time(),
            sessions: held.of_owner(v),
            cmdline: crate::lease::owners::owner::command_line(v.pid_here()).unwrap_or_default(),
        })
        .collect()
}

/// The lock file when it is anything but a regular file: no acquire can work.
fn lock_problem(reg: &Registry) -> Option<String> {
    match std::fs::symlink_metadata(reg.lock_path()) {
        Ok(m) if m.is_file() => None,
        Ok(m) if m.file_type().is_symlink() => Some("the lock file is a symlink (leasectl refuses it)".into()),
        Ok(_) => Some("the lock file is not a regular file (a FIFO, socket, device or directory)".into()),
        Err(_) => None,
    }
}

/// Where the registry points when it is a symlink: resolved, so the fix can be pasted
/// from anywhere; a dangling link as written.
fn symlink_target(path: &std::path::Path) -> Option<std::path::PathBuf> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.file_type().is_symlink())
        .map(|_| std::fs::canonicalize(path).or_else(|_| std::fs::read_link(path)).unwrap_or_default())
}

/// Temp files a crashed writer left (older than a write in progress could be).
fn old_temp_files(reg: &Registry) -> Vec<std::path::PathBuf> {
    registry::leftover_temp_files(&reg.runtime_dir())
        .into_iter()
        .filter(|p| {
            std::fs::metadata(p)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= TEMP_GRACE)
        })
        .collect()
}

fn empty_session_ids(bytes: &[u8]) -> Vec<usize> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if pyjson::too_many_values(bytes) {
        return vec![];
    }
    let Ok(value) = std::str::from_utf8(bytes).map_err(|_| ()).and_then(|t| pyjson::parse(t).map_err(|_| ())) else {
        return vec![];
    };
    let list = match &value {
        serde_json::Value::Array(l) => l,
        serde_json::Value::Object(m) => match m.get("entries") {
            Some(serde_json::Value::Array(l)) => l,
            _ => return vec![],
        },
        _ => return vec![],
    };
    list.iter()
        .enumerate()
        .filter(|(_, e)| e.get("session_id").and_then(|s| s.as_str()) == Some(""))
        .map(|(i, _)| i)
        .collect()
}
