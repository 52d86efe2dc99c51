//! Output formatting: JSON shapes of the CLI contract and aligned tables.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::lease::owner::OwnerInfo;
use crate::lease::refusal::format_age;
use crate::lease::{DoctorReport, Entry, Grant, LeaseView, Refusal, Registry, Removal, now};

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

pub fn grant_json(g: &Grant, reg: &Registry, session: &str, pid: u64) -> Value {
    json!({
        "granted": true,
        "lease_id": g.lease_id,
        "recorded": g.recorded,
        "session_id": session,
        "pid": pid,
        "path": reg.path(),
        "replaced": g.replaced,
        "pruned": g.pruned.iter().map(Entry::to_value).collect::<Vec<_>>(),
    })
}

pub fn refusal_json(r: &Refusal) -> Value {
    json!({
        "granted": false,
        "reason": r.reason.code(),
        "message": r.message,
        "advice": r.reason.advice(),
        "holder": r.holder.as_deref().map(Entry::to_value),
    })
}

pub fn removal_json(reg: &Registry, r: &Removal) -> Value {
    json!({
        "profile": reg.profile,
        "path": reg.path(),
        "dry_run": r.dry_run,
        "live_owner": r.live_owner,
        "removed": r.removed.iter().map(|v| lease_json(v, None)).collect::<Vec<_>>(),
    })
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
        "lock_problem": d.lock_problem,
    })
}

/// First 8 characters of a lease id: enough to tell leases apart on screen.
/// The live owners among removed leases, for the operator's warning.
pub fn live_owners_text(r: &Removal) -> String {
    let who: Vec<String> = r
        .removed
        .iter()
        .filter(|v| crate::lease::admin::owner_may_be_alive(v))
        .map(|v| {
            format!("pid {} ({}, session {})", v.entry.pid(), v.entry.surface().unwrap_or("-"), v.entry.session_id())
        })
        .collect();
    who.join("; ")
}

pub fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
}

/// Columns padded to the widest cell; the last column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
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
                owners.get(&e.pid()).map(|o| o.name.clone()).unwrap_or_else(|| "-".into()),
                liveness,
                e.started_at().map(|t| format_age(at - t)).unwrap_or_else(|| "-".into()),
                Some(e.live_session_id()).filter(|s| !s.is_empty()).unwrap_or_else(|| "-".into()),
            ]
        })
        .collect()
}

pub const LEASE_HEADER: [&str; 8] = ["LEASE", "SESSION", "SURFACE", "PID", "OWNER", "LIVENESS", "AGE", "LIVE ID"];

/// The lease table on etcd: the owner's host instead of its process, the TTL with the liveness.
#[cfg(feature = "etcd")]
pub const ETCD_LEASE_HEADER: [&str; 9] =
    ["LEASE", "SESSION", "SURFACE", "HOST", "PID", "LIVENESS", "AGE", "LIVE ID", "FENCING TOKEN"];

/// Seconds left on an etcd lease, for people.
pub fn ttl_text(ttl: Option<i64>) -> String {
    match ttl {
        Some(t) => format!("ttl {t}s"),
        None => "expired".into(),
    }
}

#[cfg(feature = "etcd")]
pub fn etcd_lease_rows(views: &[(&crate::lease::etcd::Held, crate::lease::Liveness, Option<i64>)]) -> Vec<Vec<String>> {
    let at = now();
    views
        .iter()
        .map(|(h, liveness, ttl)| {
            let e = &h.entry;
            vec![
                short_id(e.lease_id()),
                e.session_id().to_owned(),
                e.surface().unwrap_or("-").to_owned(),
                h.host.clone(),
                e.pid().to_string(),
                format!("{} ({})", liveness.name(), ttl_text(*ttl)),
                e.started_at().map(|t| format_age(at - t)).unwrap_or_else(|| "-".into()),
                Some(e.live_session_id()).filter(|s| !s.is_empty()).unwrap_or_else(|| "-".into()),
                h.fencing_token.to_string(),
            ]
        })
        .collect()
}

#[cfg(feature = "etcd")]
pub fn etcd_lease_json(h: &crate::lease::etcd::Held, liveness: &crate::lease::Liveness, ttl: Option<i64>) -> Value {
    json!({
        "entry": h.entry.to_value(),
        "key": h.key,
        "host": h.host,
        "etcd_lease_id": h.etcd_lease_id,
        "etcd_lease_id_hex": format!("{:x}", h.etcd_lease_id),
        "fencing_token": h.fencing_token,
        "slot": h.slot,
        "ttl_secs": ttl,
        "liveness": liveness.name(),
        "liveness_detail": liveness.explain(),
    })
}

#[cfg(feature = "etcd")]
pub fn etcd_grant_json(
    g: &crate::lease::etcd::fence::EtcdGrant,
    cfg: &crate::lease::etcd::EtcdConfig,
    req: &crate::lease::AcquireRequest,
    renewed: bool,
) -> Value {
    json!({
        "granted": true,
        "backend": "etcd",
        "lease_id": g.lease_id,
        "recorded": g.recorded,
        "session_id": req.session_id,
        "pid": req.owner_pid,
        "host": crate::lease::etcd::hostname(),
        "endpoints": cfg.endpoints,
        "prefix": cfg.prefix,
        "key": g.recorded.then_some(&g.session_key),
        "etcd_lease_id": g.etcd_lease_id,
        "etcd_lease_id_hex": format!("{:x}", g.etcd_lease_id),
        "ttl_secs": g.ttl.as_secs(),
        "renewed": renewed,
        "fencing_token": g.fencing_token,
        "slot": g.slot,
        "replaced": g.replaced,
        "pruned": [],
    })
}

pub fn repair_text(reg: &Registry, plan: &crate::lease::repair::RepairPlan) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "{} ({}): invalid", reg.profile, reg.path().display());
    if plan.salvaged {
        let _ = writeln!(s, "  the JSON is broken: {} complete entr(ies) salvaged", plan.found);
    }
    let _ = writeln!(s, "  keep {} valid lease(s)", plan.kept.len());
    for d in &plan.dropped {
        let id = d.lease_id.as_deref().unwrap_or("-");
        let _ = writeln!(s, "  drop entry {} (lease {id}): {}", d.index, d.why);
    }
    for (from, to) in &plan.rekeyed {
        let _ = writeln!(s, "  duplicate lease id {from} held by a live owner: kept under the new id {to}");
    }
    s
}

pub fn doctor_text(d: &DoctorReport) -> String {
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
    for p in &d.problems {
        let _ = writeln!(s, "  INVALID [{}] {p}", p.rule.code());
    }
    for i in &d.empty_session_ids {
        let _ = writeln!(
            s,
            "  entry {i} has an empty session id (Hermes writes these for tracked drafts); every acquire is refused until it is repaired"
        );
    }
    for (session, leases) in &d.conflicts {
        let pids: Vec<String> = leases.iter().map(|l| l.entry.pid().to_string()).collect();
        let _ =
            writeln!(s, "  CONFLICT: session {session} has {} live owners (pids {})", leases.len(), pids.join(", "));
    }
    for v in &d.stale {
        let _ = writeln!(
            s,
            "  stale: lease {} (session {}, pid {}): {} — `leasectl prune` removes it",
            short_id(v.entry.lease_id()),
            v.entry.session_id(),
            v.entry.pid(),
            v.liveness.explain()
        );
    }
    for t in &d.leftover_temp_files {
        let _ = writeln!(s, "  leftover temp file from a crashed writer: {}", t.display());
    }
    if let Some(problem) = &d.lock_problem {
        let _ = writeln!(s, "  LOCK: {problem}: {}", d.registry.lock_path().display());
    }
    if let Some(pid) = d.lock_holder {
        let _ = writeln!(s, "  lock held right now by pid {pid}");
    }
    s
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
