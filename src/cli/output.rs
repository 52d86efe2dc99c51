//! Output formatting: JSON shapes of the CLI contract and aligned tables.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::lease::human::{duration, escape, plural};
use crate::lease::owners::owner::OwnerInfo;
use crate::lease::{
    AcquireRequest, DoctorReport, Entry, EtcdLocation, Grant, LeaseView, Liveness, Location, Refusal, RemoteListing,
    Removal, now, owners::owner::hostname,
};

pub fn owner_json(o: Option<&OwnerInfo>) -> Value {
    match o {
        None => Value::Null,
        Some(o) => json!({
            "name": o.name,
            "cmdline": o.cmdline,
            "rss_bytes": o.rss_bytes,
            "cpu_percent": o.cpu_percent,
            "user": o.user,
        }),
    }
}

pub fn lease_json(v: &LeaseView, owner: Option<&OwnerInfo>) -> Value {
    json!({
        "entry": v.entry.to_value(),
        "liveness": v.liveness.name(),
        "liveness_detail": v.liveness.explain(),
        "owner": owner_json(owner),
    })
}

/// A grant as JSON: the file shape, or the etcd shape with its lease, TTL and fencing token.
pub fn grant_json(g: &Grant, location: &Location, req: &AcquireRequest, renewed: bool) -> Value {
    let Location::Etcd(at) = location else {
        return json!({
            "granted": true,
            "lease_id": g.lease_id,
            "recorded": g.recorded,
            "session_id": req.session_id,
            "pid": req.owner_pid,
            "path": location.describe(),
            "replaced": g.replaced,
            "pruned": g.pruned.iter().map(Entry::to_value).collect::<Vec<_>>(),
        });
    };
    let r = g.remote.as_ref();
    let etcd_lease_id = r.map_or(0, |r| r.etcd_lease_id);
    json!({
        "granted": true,
        "backend": "etcd",
        "lease_id": g.lease_id,
        "recorded": g.recorded,
        "session_id": req.session_id,
        "pid": req.owner_pid,
        "host": hostname(),
        "endpoints": at.endpoints,
        "prefix": at.prefix,
        "key": r.filter(|_| g.recorded).map(|r| &r.session_key),
        "etcd_lease_id": etcd_lease_id,
        "etcd_lease_id_hex": format!("{etcd_lease_id:x}"),
        "ttl_secs": r.map_or(0, |r| r.ttl.as_secs()),
        "renewed": renewed,
        "fencing_token": r.map_or(0, |r| r.fencing_token),
        "slot": r.and_then(|r| r.slot),
        "replaced": g.replaced,
        "pruned": [],
    })
}

/// A recorded grant for people; `renewed`: hold/run keep it alive.
pub fn grant_text(g: &Grant, location: &Location, req: &AcquireRequest, renewed: bool) -> String {
    // The session id is the caller's text: shown, never obeyed by the terminal (as refusals do).
    let session = escape(&req.session_id);
    let how = if g.replaced.is_some() { " (same writer: replaced its own entry)" } else { "" };
    let (Location::Etcd(at), Some(r)) = (location, &g.remote) else {
        let mut s = format!(
            "granted lease {} for session {} to pid {}{how}\n  registry: {}\n",
            g.lease_id,
            session,
            req.owner_pid,
            location.describe()
        );
        if !g.pruned.is_empty() {
            s.push_str(&format!("  pruned {}\n", plural(g.pruned.len(), "dead owner's lease", "dead owners' leases")));
        }
        return s;
    };
    let mut s = format!(
        "granted lease {} for session {} to pid {} on host {}{how}\n  etcd: {}  key {}\n  \
         etcd lease {:x}, TTL {}s, fencing token {}\n",
        g.lease_id,
        session,
        req.owner_pid,
        r.host,
        at.describe(),
        escape(&r.session_key),
        r.etcd_lease_id,
        r.ttl.as_secs(),
        r.fencing_token
    );
    if renewed {
        s.push_str(&format!("  renewed every {:.1}s while leasectl runs\n", r.ttl.as_secs_f64() / 3.0));
    } else {
        s.push_str(&format!(
            "  nobody renews it: it ends in {}s unless renewed (etcdctl --endpoints {} lease keep-alive {:x}); hold and \
             run renew theirs\n",
            r.ttl.as_secs(),
            at.endpoints.join(","),
            r.etcd_lease_id
        ));
    }
    s
}

pub fn refusal_json(r: &Refusal, advice: &str) -> Value {
    json!({
        "granted": false,
        "reason": r.reason.code(),
        "message": r.message,
        "advice": advice,
        "holder": r.holder.as_deref().map(Entry::to_value),
    })
}

pub fn removal_json(location: &Location, r: &Removal) -> Value {
    let removed = r.removed.iter().map(|v| lease_json(v, None)).collect::<Vec<_>>();
    let mut v = removal_json_of(location, r, removed);
    if !r.needs_live.is_empty()
        && let Some(map) = v.as_object_mut()
    {
        map.insert("needs_live".into(), r.needs_live.iter().map(|v| lease_json(v, None)).collect());
    }
    v
}

fn removal_json_of(location: &Location, r: &Removal, removed: Vec<Value>) -> Value {
    match location {
        Location::Etcd(at) => json!({
            "backend": "etcd",
            "endpoints": at.endpoints,
            "prefix": at.prefix,
            "dry_run": r.dry_run,
            "live_owner": r.live_owner,
            "removed": removed,
        }),
        Location::File(_) | Location::Ssh(_) => json!({
            "host": location.host().map(|h| h.name.as_str()),
            "profile": location.name(),
            "path": location.describe(),
            "dry_run": r.dry_run,
            "live_owner": r.live_owner,
            "removed": removed,
            "kept_clock_step": r.kept_clock_step.iter().map(|v| lease_json(v, None)).collect::<Vec<_>>(),
            "kept_work_running": r.kept_work_running.iter().map(|v| lease_json(v, None)).collect::<Vec<_>>(),
        }),
    }
}

/// What an admin removal did, for people.
pub fn print_removal(location: &Location, r: &Removal, what: &str) {
    if location.is_remote() {
        let verb = if r.dry_run { "would revoke" } else { "revoked" };
        say!("{}: {what} {verb} {}", location.describe(), plural(r.removed.len(), "lease", "leases"));
        for v in &r.removed {
            say!("  {}  session {}  pid {}", escape(v.entry.lease_id()), escape(v.entry.session_id()), v.entry.pid());
        }
        for v in &r.needs_live {
            say!(
                "  would need --live (a LIVE owner): {}  session {}  pid {}",
                escape(v.entry.lease_id()),
                escape(v.entry.session_id()),
                v.entry.pid()
            );
        }
        return;
    }
    let verb = if r.dry_run { "would remove" } else { "removed" };
    say!(
        "{} ({}): {what} {verb} {}",
        location.label(),
        location.describe(),
        plural(r.removed.len(), "lease", "leases")
    );
    if !r.removed.is_empty() {
        say!("{}", table(&LEASE_HEADER, &lease_rows(&r.removed, &owners_of(&r.removed))));
    }
    let working = r.removed.iter().filter(|v| matches!(v.liveness, crate::lease::Liveness::WorkRunning { .. })).count();
    if working > 0 {
        say_err!(
            "leasectl: warning: {working} of them marked WORK RUNNING: processes of a dead leasectl run still \
             write that session, and a second owner may now start beside them"
        );
    }
    if !r.needs_live.is_empty() {
        say!(
            "  and {} of LIVE owners would need --live (a run without it removes nothing and refuses):",
            plural(r.needs_live.len(), "lease", "leases")
        );
        say!("{}", table(&LEASE_HEADER, &lease_rows(&r.needs_live, &owners_of(&r.needs_live))));
    }
    if !r.kept_clock_step.is_empty() {
        say!(
            "  kept {} flagged clock step?: the owner runs and its start time is off by whole seconds, \
             most likely the same process across a wall-clock step (--include-clock-step removes them too)",
            plural(r.kept_clock_step.len(), "lease", "leases")
        );
        say!("{}", table(&LEASE_HEADER, &lease_rows(&r.kept_clock_step, &owners_of(&r.kept_clock_step))));
    }
    if !r.kept_work_running.is_empty() {
        say!(
            "  kept {} marked WORK RUNNING: the leasectl run that held it died, but processes it \
             started still run and write the session (--force removes them too)",
            plural(r.kept_work_running.len(), "lease", "leases")
        );
        for v in &r.kept_work_running {
            say!(
                "  {}  session {}  {}",
                escape(v.entry.lease_id()),
                escape(v.entry.session_id()),
                v.liveness.explain()
            );
        }
    }
}

/// The warning printed when a force-release removed (or would remove) a live owner's lease.
pub fn live_owner_warning(location: &Location, r: &Removal) -> String {
    let who = live_owners_text(r);
    if location.is_remote() {
        let verb = if r.dry_run { "would revoke" } else { "revoked" };
        format!(
            "WARNING: {verb} the etcd lease of a LIVE owner: {who}. It is told on its next renewal, but it may keep \
             writing until then, and a second owner can now acquire the session."
        )
    } else {
        let verb = if r.dry_run { "would release" } else { "released" };
        format!(
            "WARNING: {verb} the lease of a LIVE owner: {who}. It may keep writing to its session, and a second owner \
             can now acquire it."
        )
    }
}

pub fn doctor_json(d: &DoctorReport) -> Value {
    json!({
        "profile": d.registry.profile,
        "path": d.registry.path(),
        "exists": d.exists,
        "ok": !d.has_problems(),
        "cap": d.cap.cap,
        "cap_warnings": d.cap.warnings,
        "problems": d.problems.iter().map(|p| json!({
            "rule": p.rule.code(),
            "entry": p.entry_index,
            "lease_id": p.lease_id,
            "detail": p.detail,
            "message": p.to_string(),
        })).collect::<Vec<_>>(),
        "empty_session_ids": d.empty_session_ids,
        "conflicts": d.conflicts.iter().map(|(s, v)| json!({
            "session_id": s,
            "leases": v.iter().map(|l| lease_json(l, None)).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "stale": d.stale.iter().map(|l| lease_json(l, None)).collect::<Vec<_>>(),
        "leftover_temp_files": d.leftover_temp_files,
        "lock_holder": d.lock_holder,
        "lock_holder_command": d.lock_holder_command,
        "lock_held_after_secs": d.lock_watched.filter(|(_, held)| *held).map(|(w, _)| w.as_secs_f64()),
        "lock_problem": d.lock_problem,
        "symlink_to": d.symlink_to,
        "live": d.live,
        "over_cap": d.over_cap,
        "leak_suspects": d.leak_suspects.iter().map(|(v, why)| json!({
            "lease": lease_json(v, None),
            "reason": why,
        })).collect::<Vec<_>>(),
        "session_context_unknown": d.context_unknown,
    })
}

/// A session's context from state.db, as `ls --json` shows it.
pub fn context_json(c: &crate::lease::home::context::SessionContext) -> Value {
    json!({
        "id": c.session_id,
        "title": c.title,
        "source": c.source,
        "started_at": c.started_at,
        "ended_at": c.ended_at,
        "end_reason": c.end_reason,
        "last_activity": c.last_activity,
        "messages": c.messages,
    })
}

/// Counts over every registry doctor looked at: its last line, and `summary` in JSON.
pub struct DoctorSummary {
    pub registries: usize,
    pub with_problems: usize,
    pub invalid_entries: usize,
    pub conflicts: usize,
    pub stale: usize,
    pub temp_files: usize,
    pub over_cap: usize,
    pub leak_suspects: usize,
}

impl DoctorSummary {
    pub fn of(reports: &[DoctorReport]) -> DoctorSummary {
        let count = |f: fn(&DoctorReport) -> usize| reports.iter().map(f).sum();
        DoctorSummary {
            registries: reports.len(),
            with_problems: reports.iter().filter(|d| d.has_problems()).count(),
            invalid_entries: count(|d| d.problems.len()),
            conflicts: count(|d| d.conflicts.len()),
            stale: count(|d| d.stale.len()),
            temp_files: count(|d| d.leftover_temp_files.len()),
            over_cap: reports.iter().filter(|d| d.over_cap).count(),
            leak_suspects: count(|d| d.leak_suspects.len()),
        }
    }

    pub fn line(&self) -> String {
        format!(
            "{}, {} with problems: {} invalid, {}, {} over cap, {}, {}; {}",
            plural(self.registries, "registry", "registries"),
            self.with_problems,
            self.invalid_entries,
            plural(self.conflicts, "conflict", "conflicts"),
            self.over_cap,
            plural(self.stale, "stale owner", "stale owners"),
            plural(self.temp_files, "temp file", "temp files"),
            plural(self.leak_suspects, "leak suspect", "leak suspects")
        )
    }

    pub fn json(&self) -> Value {
        json!({
            "registries": self.registries,
            "with_problems": self.with_problems,
            "invalid_entries": self.invalid_entries,
            "conflicts": self.conflicts,
            "over_cap": self.over_cap,
            "stale": self.stale,
            "temp_files": self.temp_files,
            "leak_suspects": self.leak_suspects,
        })
    }
}

/// First 8 characters of a lease id: enough to tell leases apart on screen.
/// The live owners among removed leases, for the operator's warning.
pub fn live_owners_text(r: &Removal) -> String {
    let who: Vec<String> = r
        .removed
        .iter()
        .filter(|v| crate::lease::view::owner_may_be_alive(v))
        .map(|v| {
            let surface = escape(v.entry.surface().unwrap_or("-"));
            format!("pid {} ({surface}, session {})", v.entry.pid(), escape(v.entry.session_id()))
        })
        .collect();
    who.join("; ")
}

pub fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
}

/// Columns padded to the widest cell; the last column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    // Cells come from files other programs write: shown, never obeyed by the terminal.
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| escape(c).into_owned()).collect()).collect();
    let rows = &rows;
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::from("  ");
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&" ".repeat(widths[i] - c.chars().count() + 2));
            }
        }
        s.trim_end().to_owned()
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push('\n');
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// The owners of these leases' pids, as the OWNER column names them.
fn owners_of(views: &[LeaseView]) -> HashMap<u64, OwnerInfo> {
    let pids: Vec<u64> = views.iter().map(|v| v.entry.pid()).collect();
    crate::lease::owners::owner::owner_infos(&pids)
}

pub fn lease_rows(views: &[LeaseView], owners: &HashMap<u64, OwnerInfo>) -> Vec<Vec<String>> {
    let at = now();
    views
        .iter()
        .map(|v| {
            let e = &v.entry;
            let mut liveness = v.liveness.name().to_owned();
            if v.liveness.clock_step_suspected() {
                liveness.push_str(" (clock step?)");
            }
            vec![
                short_id(e.lease_id()),
                e.session_id().to_owned(),
                e.surface().unwrap_or("-").to_owned(),
                e.pid().to_string(),
                crate::lease::owners::owner::owner_label(
                    v.liveness.name(),
                    v.liveness.clock_step_suspected(),
                    owners.get(&e.pid()).map(|o| o.name.as_str()),
                ),
                liveness,
                e.started_at().map(|t| duration(at - t)).unwrap_or_else(|| "-".into()),
                Some(e.live_session_id()).filter(|s| !s.is_empty()).unwrap_or_else(|| "-".into()),
            ]
        })
        .collect()
}

pub const LEASE_HEADER: [&str; 8] = ["LEASE", "SESSION", "SURFACE", "PID", "OWNER", "LIVENESS", "AGE", "LIVE ID"];

/// The lease table on etcd: the owner's host, the TTL with the liveness, the fencing token.
pub const ETCD_LEASE_HEADER: [&str; 10] =
    ["LEASE", "SESSION", "SURFACE", "HOST", "PID", "OWNER", "LIVENESS", "AGE", "LIVE ID", "FENCING TOKEN"];
/// `-o wide` adds the etcd lease and the slot (whole lease ids, too).
pub const ETCD_WIDE_COLUMNS: [&str; 2] = ["ETCD LEASE", "SLOT"];

/// Seconds left on an etcd lease, for people.
pub fn ttl_text(ttl: Option<i64>) -> String {
    match ttl {
        Some(t) => format!("ttl {t}s"),
        None => "expired".into(),
    }
}

/// The rows of the etcd table; `wide`: whole lease ids, the etcd lease and the slot. An
/// owner on this host is named by its process (`owners`), one elsewhere is `-`.
pub fn etcd_lease_rows(views: &[LeaseView], owners: &HashMap<u64, OwnerInfo>, wide: bool) -> Vec<Vec<String>> {
    let at = now();
    let here = crate::lease::owners::owner::hostname();
    views
        .iter()
        .filter_map(|v| {
            let r = v.remote.as_ref()?;
            let e = &v.entry;
            let owner = owners.get(&e.pid()).filter(|_| r.host == here).map(|o| o.name.as_str());
            let mut row = vec![
                if wide { e.lease_id().to_owned() } else { short_id(e.lease_id()) },
                e.session_id().to_owned(),
                e.surface().unwrap_or("-").to_owned(),
                r.host.clone(),
                e.pid().to_string(),
                crate::lease::owners::owner::owner_label(v.liveness.name(), v.liveness.clock_step_suspected(), owner),
                format!("{} ({})", v.liveness.name(), ttl_text(r.ttl_left)),
                e.started_at().map(|t| duration(at - t)).unwrap_or_else(|| "-".into()),
                Some(e.live_session_id()).filter(|s| !s.is_empty()).unwrap_or_else(|| "-".into()),
                r.fencing_token.to_string(),
            ];
            if wide {
                row.push(format!("{:x}", r.etcd_lease_id));
                row.push(r.slot.map(|s| s.to_string()).unwrap_or_else(|| "-".into()));
            }
            Some(row)
        })
        .collect()
}

pub fn etcd_lease_json(v: &LeaseView) -> Value {
    let r = v.remote.as_ref();
    json!({
        "entry": v.entry.to_value(),
        "key": r.map(|r| &r.key),
        "host": r.map(|r| &r.host),
        "etcd_lease_id": r.map(|r| r.etcd_lease_id),
        "etcd_lease_id_hex": r.map(|r| format!("{:x}", r.etcd_lease_id)),
        "fencing_token": r.map(|r| r.fencing_token),
        "slot": r.and_then(|r| r.slot),
        "ttl_secs": r.and_then(|r| r.ttl_left),
        "liveness": v.liveness.name(),
        "liveness_detail": v.liveness.explain(),
    })
}

/// `ls` on etcd, as a table or JSON.
pub fn etcd_listing(
    at: &EtcdLocation,
    views: &[LeaseView],
    remote: &RemoteListing,
    owners: &HashMap<u64, OwnerInfo>,
    format: super::args::Format,
) {
    if format == super::args::Format::Json {
        let v = json!({
            "backend": "etcd",
            "endpoints": at.endpoints,
            "prefix": at.prefix,
            "revision": remote.revision,
            "slots_used": remote.slots.iter().map(|(i, k)| json!({"slot": i, "session_key": k})).collect::<Vec<_>>(),
            "leases": views.iter().map(etcd_lease_json).collect::<Vec<_>>(),
            "bad_keys": remote.bad,
        });
        super::print_json(&v);
        return;
    }
    say!(
        "{}  {}, {} used  (revision {})",
        at.describe(),
        plural(views.len(), "lease", "leases"),
        plural(remote.slots.len(), "slot", "slots"),
        remote.revision
    );
    if !views.is_empty() {
        let wide = format == super::args::Format::Wide;
        let mut header: Vec<&str> = ETCD_LEASE_HEADER.to_vec();
        if wide {
            header.extend(ETCD_WIDE_COLUMNS);
        }
        say!("{}", table(&header, &etcd_lease_rows(views, owners, wide)));
    }
    for b in &remote.bad {
        say!("  warning: {b}");
    }
}

pub fn repair_text(location: &Location, plan: &crate::lease::repair::RepairPlan) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "{} ({}): invalid", location.label(), location.describe());
    if plan.salvaged {
        let _ =
            writeln!(s, "  the JSON is broken: {} salvaged", plural(plan.found, "complete entry", "complete entries"));
    }
    let _ = writeln!(s, "  keep {}", plural(plan.kept.len(), "valid lease", "valid leases"));
    for r in &plan.restored {
        let _ = writeln!(
            s,
            "  restore entry {} (lease {}, session {}), cut short: rebuilt {}",
            r.index,
            escape(&r.lease_id),
            escape(&r.session_id),
            r.rebuilt.join(", ")
        );
    }
    for d in &plan.dropped {
        let id = d.lease_id.as_deref().unwrap_or("-");
        let _ = writeln!(
            s,
            "  drop entry {} (lease {}, session {}, pid {}, owner {}): {}",
            d.index,
            escape(id),
            escape(d.session_id.as_deref().unwrap_or("-")),
            d.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            d.owner.as_deref().unwrap_or("unknown"),
            escape(&d.why)
        );
    }
    if let Some(at) = plan.cut_at {
        let _ = writeln!(s, "  unreadable from byte {at} on: the entries that stood there are lost, whoever held them");
    }
    let risks = plan.live_risks();
    if !risks.is_empty() {
        let _ = writeln!(s, "  NEEDS --force: leases whose owners may be alive would be lost");
    }
    for (from, to) in &plan.rekeyed {
        let _ = writeln!(s, "  duplicate lease id {from} held by a live owner: kept under the new id {to}");
    }
    s
}

pub(super) fn doctor_text(d: &DoctorReport, hints: &super::hints::Hints) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let status = if d.has_problems() { "PROBLEMS" } else { "ok" };
    let _ = writeln!(s, "{} ({}): {status}", d.registry.profile, d.registry.path().display());
    if !d.exists {
        let _ = writeln!(s, "  registry file does not exist yet (no leases)");
    }
    match d.cap.cap {
        Some(c) => {
            let _ = writeln!(s, "  cap: {c} ({})", d.cap.key.as_deref().unwrap_or("config"));
        }
        None => {
            let _ = writeln!(s, "  cap: none");
        }
    }
    for w in &d.cap.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    doctor_validity(d, &mut s);
    doctor_leases(d, &mut s, hints);
    doctor_files(d, &mut s);
    s
}

/// What makes the registry unusable or over-full: broken rules, empty session ids, the
/// cap exceeded, sessions with two live owners.
fn doctor_validity(d: &DoctorReport, s: &mut String) {
    use std::fmt::Write;
    for p in &d.problems {
        let _ = writeln!(s, "  {} [{}] {}", p.rule.heading(), p.rule.code(), escape(&p.to_string()));
    }
    for i in &d.empty_session_ids {
        let _ = writeln!(
            s,
            "  entry {i} has an empty session id (Hermes writes these for tracked drafts); every acquire is refused until it is repaired"
        );
    }
    if d.over_cap {
        let _ = writeln!(
            s,
            "  OVER CAP: {} live leases, cap {}: no new session is granted until {}",
            d.live,
            d.cap.cap.unwrap_or_default(),
            match d.live as u64 - d.cap.cap.unwrap_or_default() + 1 {
                1 => "one of them ends".to_owned(),
                n => format!("{n} of them end"),
            }
        );
    }
    for (session, leases) in &d.conflicts {
        let pids: Vec<String> = leases.iter().map(|l| l.entry.pid().to_string()).collect();
        let _ = writeln!(
            s,
            "  CONFLICT: session {} has {} live owners (pids {})",
            escape(session),
            leases.len(),
            pids.join(", ")
        );
    }
}

/// The prune that removes a stale owner's lease: a plain prune keeps the two kinds it
/// must not judge alone (the verdicts prune itself gives them).
fn stale_remedy(here: &dyn Fn(&[&str]) -> String, liveness: &Liveness) -> String {
    if liveness.clock_step_suspected() {
        format!(
            "most likely the same, live process seen across a wall-clock step, so a plain prune keeps it; \
             `{}` removes it",
            here(&["prune", "--include-clock-step"])
        )
    } else if matches!(liveness, Liveness::WorkRunning { .. }) {
        format!("its work still runs, so a plain prune keeps it; `{}` removes it", here(&["prune", "--force"]))
    } else {
        format!("`{}` removes it", here(&["prune"]))
    }
}

/// Leases worth an operator's look: stale owners (prune) and leak suspects, with the
/// command that deals with each; and why state.db could not tell.
fn doctor_leases(d: &DoctorReport, s: &mut String, hints: &super::hints::Hints) {
    use std::fmt::Write;
    // Named by profile: with --all-profiles a bare `leasectl prune` would act on the root only.
    let is_profile = d.registry.home != crate::lease::home::paths::root_of(&d.registry.home);
    let profile = is_profile.then_some(d.registry.profile.as_str());
    let here = |args: &[&str]| hints.command(Some(profile), args);
    for v in &d.stale {
        let _ = writeln!(
            s,
            "  stale: lease {} (session {}, pid {}): {} — {}",
            escape(&short_id(v.entry.lease_id())),
            escape(v.entry.session_id()),
            v.entry.pid(),
            v.liveness.explain(),
            stale_remedy(&here, &v.liveness)
        );
    }
    for (v, why) in &d.leak_suspects {
        let _ = writeln!(
            s,
            "  LEAK?: lease {} (session {}): {} — if nobody uses it, `{}`",
            escape(&short_id(v.entry.lease_id())),
            escape(v.entry.session_id()),
            escape(why),
            here(&["force-release", &short_id(v.entry.lease_id()), "--live"])
        );
    }
    if let Some(w) = &d.idle_warning {
        let _ = writeln!(s, "  warning: {w}");
    }
    // Without state.db there is simply nothing to read; anything else is worth a word.
    if let Some(why) = d.context_unknown.as_deref().filter(|w| *w != "no state.db") {
        let _ = writeln!(s, "  session context unknown: {}", escape(why));
    }
}

/// The files around the registry: a crashed writer's temp files, a registry that is a
/// symlink, a lock file that is not a regular file, and who holds the lock now.
fn doctor_files(d: &DoctorReport, s: &mut String) {
    use std::fmt::Write;
    for t in &d.leftover_temp_files {
        let _ = writeln!(s, "  leftover temp file from a crashed writer: {}", t.display());
    }
    if let Some(target) = &d.symlink_to {
        let path = d.registry.path();
        let _ = writeln!(
            s,
            "  SYMLINK: the registry is a symlink to {}: every write refuses to go through it, so every acquire \
             fails; make it a regular file: `cp --remove-destination {} {}`",
            escape(&target.display().to_string()),
            crate::lease::human::shell_word(&target.to_string_lossy()),
            crate::lease::human::shell_word(&path.to_string_lossy())
        );
    }
    if let Some(problem) = &d.lock_problem {
        let _ = writeln!(s, "  LOCK: {problem}: {}", d.registry.lock_path().display());
    }
    if let Some(pid) = d.lock_holder {
        let command = d.lock_holder_command.as_deref().map(|c| format!(" ({c})")).unwrap_or_default();
        let watched = match d.lock_watched {
            Some((for_, true)) => format!(", still held after {:.1}s of watching", for_.as_secs_f64()),
            Some((after, false)) => format!(", released within {:.1}s", after.as_secs_f64()),
            None => String::new(),
        };
        let _ = writeln!(s, "  lock held right now by pid {pid}{command}{watched}");
    }
}

/// `ls --json`, serialized as it is written: `{"registries": [{cap, cap_warnings, error,
/// leases, path, profile}, …]}` with keys in the order a JSON map sorts them, each lease
/// built as a value only while it is written.
pub struct LsJson<'a> {
    pub listings: &'a [crate::lease::Listing],
    /// Per listing: who its owners are (looked up where they run).
    pub owners: &'a [HashMap<u64, OwnerInfo>],
    /// Per listing: its conflicts and whether it is over its cap.
    pub marks: &'a [super::marks::Marks],
}

struct Registries<'a>(&'a LsJson<'a>);
struct OneRegistry<'a>(&'a crate::lease::Listing, &'a HashMap<u64, OwnerInfo>, &'a super::marks::Marks);
struct Leases<'a>(&'a [LeaseView], &'a HashMap<u64, OwnerInfo>, &'a super::marks::Marks);

impl serde::Serialize for LsJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("registries", &Registries(self))?;
        m.end()
    }
}

impl serde::Serialize for Registries<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.listings.len()))?;
        let none = super::marks::Marks::default();
        let nobody = HashMap::new();
        for (i, l) in self.0.listings.iter().enumerate() {
            let owners = self.0.owners.get(i).unwrap_or(&nobody);
            seq.serialize_element(&OneRegistry(l, owners, self.0.marks.get(i).unwrap_or(&none)))?;
        }
        seq.end()
    }
}

impl serde::Serialize for OneRegistry<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let l = self.0;
        let mut m = s.serialize_map(Some(8))?;
        m.serialize_entry("cap", &l.cap.cap)?;
        m.serialize_entry("cap_warnings", &l.cap.warnings)?;
        m.serialize_entry("error", &l.leases.as_ref().err().map(|e| e.to_string()))?;
        if let Some(host) = l.location.host() {
            m.serialize_entry("host", &host.name)?;
        }
        m.serialize_entry("leases", &Leases(l.leases.as_deref().unwrap_or_default(), self.1, self.2))?;
        // Counted over every lease, before any filter.
        m.serialize_entry("live", &self.2.live)?;
        m.serialize_entry("over_cap", &self.2.over_cap)?;
        m.serialize_entry("path", &l.location.describe())?;
        m.serialize_entry("profile", l.location.name())?;
        let unknown = match &self.2.context {
            Some(crate::lease::home::context::Contexts::Unknown(why)) => Some(why.as_str()),
            _ => None,
        };
        m.serialize_entry("session_context_unknown", &unknown)?;
        m.end()
    }
}

impl serde::Serialize for Leases<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for v in self.0 {
            let mut lease = lease_json(v, self.1.get(&v.entry.pid()));
            if let Some(map) = lease.as_object_mut() {
                map.insert("conflict".into(), self.2.of_lease(v).contains(&"CONFLICT").into());
                map.insert("leak_suspect".into(), self.2.leaks.get(v.entry.lease_id()).cloned().into());
                map.insert("session".into(), self.2.context_of(v).map(context_json).unwrap_or(Value::Null));
            }
            seq.serialize_element(&lease)?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align() {
        let t = table(&["A", "BB"], &[vec!["xxx".into(), "y".into()], vec!["z".into(), "w".into()]]);
        assert_eq!(t, "  A    BB\n  xxx  y\n  z    w");
    }
}
