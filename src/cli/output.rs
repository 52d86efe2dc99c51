//! Output for people: aligned tables and the texts of grants, removals, doctor and
//! repair (the JSON shapes are `json.rs`'s).

use std::collections::HashMap;

use crate::lease::owners::owner::OwnerInfo;
use crate::lease::words::human::{duration, escape, plural};
use crate::lease::{
    AcquireRequest, DoctorReport, EtcdLocation, Grant, LeaseView, Liveness, Location, RemoteListing, Removal, now,
};

/// A recorded grant for people; `renewed`: hold/run keep it alive.
pub(crate) fn grant_text(g: &Grant, location: &Location, req: &AcquireRequest, renewed: bool) -> String {
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

/// What an admin removal did, for people.
pub(crate) fn print_removal(location: &Location, r: &Removal, what: &str) {
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
        say_lease_table(&r.removed);
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
        say_lease_table(&r.needs_live);
    }
    if !r.kept_clock_step.is_empty() {
        say!(
            "  kept {} flagged clock step?: the owner runs and its start time is off by whole seconds, \
             most likely the same process across a wall-clock step (--include-clock-step removes them too)",
            plural(r.kept_clock_step.len(), "lease", "leases")
        );
        say_lease_table(&r.kept_clock_step);
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
pub(crate) fn live_owner_warning(location: &Location, r: &Removal) -> String {
    let who = live_owners_text(r);
    if location.is_remote() {
        let verb = if r.dry_run { "would revoke" } else { "revoked" };
        format!(
            "WARNING: {verb} the etcd lease of a LIVE owner: {who}. It is told on its next renewal, but it may keep \
             writing until then, and a second owner can now acquire the session."
        )
    } else {
        let live: Vec<&crate::lease::LeaseView> = r
            .removed
            .iter()
            .filter(|v| {
                crate::lease::view::owner_may_be_alive(v)
                    && !r.gateway_leftovers.iter().any(|id| id == v.entry.lease_id())
            })
            .collect();
        let danger = "The owner keeps running and is not told: it may go on writing to its session, and a second \
                      owner can now acquire the session beside it, both appending to one transcript.";
        if r.dry_run {
            let stop: Vec<String> = live
                .iter()
                .map(|v| {
                    crate::lease::words::hint::hinted(
                        location,
                        &crate::lease::words::hint::command(&["stop", v.entry.lease_id()]),
                    )
                })
                .collect();
            return format!(
                "WARNING: would release the lease of a LIVE owner: {who}. {danger} The safe way ends the owner first, \
                 then frees its slot: {}.",
                stop.join(", ")
            );
        }
        let pids: Vec<String> = live.iter().map(|v| v.entry.pid().to_string()).collect();
        format!(
            "WARNING: released the lease of a LIVE owner: {who}. {danger} No lease names it now: end pid {} yourself \
             before the session is resumed (the safe way, while a lease names its owner, is `leasectl stop`, which \
             ends it first).",
            pids.join(", ")
        )
    }
}

/// Counts over every registry doctor looked at: its last line, and `summary` in JSON.
#[derive(serde::Serialize)]
pub(crate) struct DoctorSummary {
    pub registries: usize,
    pub with_problems: usize,
    pub invalid_entries: usize,
    pub conflicts: usize,
    pub stale: usize,
    pub temp_files: usize,
    pub over_cap: usize,
    pub leak_suspects: usize,
    /// Registries whose live owners run in more than one pid namespace.
    pub mixed_pid_namespaces: usize,
}

impl DoctorSummary {
    pub(crate) fn of(reports: &[DoctorReport]) -> DoctorSummary {
        let count = |f: fn(&DoctorReport) -> usize| reports.iter().map(f).sum();
        DoctorSummary {
            registries: reports.len(),
            with_problems: reports.iter().filter(|d| d.has_problems()).count(),
            invalid_entries: count(|d| d.problems.len()),
            conflicts: count(|d| d.conflicts.len()),
            stale: count(|d| d.leases.stale_count()),
            temp_files: count(|d| d.leftover_temp_files.len()),
            over_cap: reports.iter().filter(|d| d.over_cap).count(),
            leak_suspects: count(|d| d.leases.leak_suspect_count()),
            mixed_pid_namespaces: reports.iter().filter(|d| !d.pid_namespaces.is_empty()).count(),
        }
    }

    pub(crate) fn line(&self) -> String {
        // Said only where it happens: most hosts run no container.
        let mixed = match self.mixed_pid_namespaces {
            0 => String::new(),
            n => format!("; {} shared across pid namespaces", plural(n, "registry", "registries")),
        };
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
        ) + &mixed
    }
}

/// First 8 characters of a lease id: enough to tell leases apart on screen.
/// The live owners among removed leases, for the operator's warning.
pub(crate) fn live_owners_text(r: &Removal) -> String {
    let who: Vec<String> = r
        .removed
        .iter()
        .filter(|v| {
            crate::lease::view::owner_may_be_alive(v) && !r.gateway_leftovers.iter().any(|id| id == v.entry.lease_id())
        })
        .map(|v| {
            let surface = escape(v.entry.surface().unwrap_or("-"));
            format!("pid {} ({surface}, session {})", v.entry.pid(), escape(v.entry.session_id()))
        })
        .collect();
    who.join("; ")
}

pub(crate) fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
}

/// Columns padded to the widest cell; the last column is not padded.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    table_lines(header, rows.len(), |i| rows.get(i).cloned().unwrap_or_default()).collect::<Vec<String>>().join("\n")
}

/// The lines of [`table`] over `count` rows, the header first, each made as it is asked
/// for: `row(i)` is called twice per row (once for the widths, once to print), so a table
/// of 50,000 leases is never held whole, neither its cells nor its text. `row` must
/// give the same cells both times.
pub(crate) fn table_lines<'a>(
    header: &'a [&str],
    count: usize,
    row: impl Fn(usize) -> Vec<String> + 'a,
) -> impl Iterator<Item = String> + 'a {
    // Cells come from files other programs write: shown, never obeyed by the terminal.
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for i in 0..count {
        for (width, cell) in widths.iter_mut().zip(row(i)) {
            *width = (*width).max(escape(&cell).chars().count());
        }
    }
    let line = move |cells: &mut dyn ExactSizeIterator<Item = &str>| {
        let last = cells.len();
        let mut s = String::from("  ");
        for (i, c) in cells.enumerate() {
            let c = escape(c);
            s.push_str(&c);
            if i + 1 < last {
                let pad = widths.get(i).map_or(0, |w| w.saturating_sub(c.chars().count())) + 2;
                s.extend(std::iter::repeat_n(' ', pad));
            }
        }
        s.truncate(s.trim_end().len());
        s
    };
    let header_line = line(&mut header.iter().copied());
    std::iter::once(header_line).chain((0..count).map(move |i| line(&mut row(i).iter().map(String::as_str))))
}

/// The owners of these leases' pids, as the OWNER column names them.
fn owners_of(views: &[LeaseView]) -> HashMap<u64, OwnerInfo> {
    crate::lease::owners::owner::owner_infos(&crate::lease::distinct_pids(views.iter()))
}

/// These leases' table under [`LEASE_HEADER`], printed line by line, each row made as it
/// is printed: prune's 50,000 removed leases held as cells, then as text, took 4x the file.
fn say_lease_table(views: &[LeaseView]) {
    let (owners, at) = (owners_of(views), now());
    let row = |i: usize| views.get(i).map(|v| lease_row(v, &owners, at)).unwrap_or_default();
    for line in table_lines(&LEASE_HEADER, views.len(), row) {
        say!("{line}");
    }
}

/// One lease's row under [`LEASE_HEADER`], its age as of `at`.
pub(crate) fn lease_row(v: &LeaseView, owners: &HashMap<u64, OwnerInfo>, at: f64) -> Vec<String> {
    let e = &v.entry;
    let mut liveness = v.liveness.name().to_owned();
    if v.liveness.clock_step_suspected() {
        liveness.push_str(" (clock step?)");
    }
    vec![
        short_id(e.lease_id()),
        e.session_id().to_owned(),
        e.surface().unwrap_or("-").to_owned(),
        pid_text(v),
        crate::lease::owners::owner::owner_label(
            v.liveness.name(),
            v.liveness.clock_step_suspected(),
            v.owner_pid_here().and_then(|p| owners.get(&p)).map(|o| o.name.as_str()),
        ),
        liveness,
        e.started_at().map(|t| duration(at - t)).unwrap_or_else(|| "-".into()),
        Some(e.live_session_id()).filter(|s| !s.is_empty()).unwrap_or_else(|| "-".into()),
    ]
}

/// The owner's pid as the lease records it, and for an owner in another pid namespace
/// its pid on this host too: `1 (host 13906)`.
pub(crate) fn pid_text(v: &LeaseView) -> String {
    match v.liveness.namespaced() {
        Some(o) => format!("{} (host {})", v.entry.pid(), o.host_pid),
        None => v.entry.pid().to_string(),
    }
}

pub(crate) const LEASE_HEADER: [&str; 8] =
    ["LEASE", "SESSION", "SURFACE", "PID", "OWNER", "LIVENESS", "AGE", "LIVE ID"];

/// The lease table on etcd: the owner's host, the TTL with the liveness, the fencing token.
pub(crate) const ETCD_LEASE_HEADER: [&str; 10] =
    ["LEASE", "SESSION", "SURFACE", "HOST", "PID", "OWNER", "LIVENESS", "AGE", "LIVE ID", "FENCING TOKEN"];
/// `-o wide` adds the etcd lease and the slot (whole lease ids, too).
pub(crate) const ETCD_WIDE_COLUMNS: [&str; 2] = ["ETCD LEASE", "SLOT"];

/// Seconds left on an etcd lease, for people.
pub(crate) fn ttl_text(ttl: Option<i64>) -> String {
    match ttl {
        Some(t) => format!("ttl {t}s"),
        None => "expired".into(),
    }
}

/// The rows of the etcd table; `wide`: whole lease ids, the etcd lease and the slot. An
/// owner on this host is named by its process (`owners`), one elsewhere is `-`.
pub(crate) fn etcd_lease_rows(views: &[LeaseView], owners: &HashMap<u64, OwnerInfo>, wide: bool) -> Vec<Vec<String>> {
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

/// `ls` on etcd, as a table or JSON.
pub(crate) fn etcd_listing(
    at: &EtcdLocation,
    views: &[LeaseView],
    remote: &RemoteListing,
    owners: &HashMap<u64, OwnerInfo>,
    format: super::args::Format,
) {
    if format == super::args::Format::Json {
        super::print_json(&super::json::etcd_listing(at, views, remote));
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
    if !remote.waiting.is_empty() {
        say!("{}", waiting_text(&remote.waiting, crate::lease::now()));
    }
    for b in &remote.bad {
        say!("  warning: {b}");
    }
}

/// Who waits in line, in the order they will be served: `3 waiting` and a line each.
pub(crate) fn waiting_text(line: &[crate::lease::Waiter], now: f64) -> String {
    let mut s = format!("{} waiting, served in this order:", line.len());
    for (i, w) in line.iter().enumerate() {
        let cap = w.cap.map(|c| format!(" (--max {c})")).unwrap_or_default();
        s.push_str(&format!(
            "\n  {}. session {}{cap}: pid {} on {} ({}), waiting {}",
            i + 1,
            escape(&w.session_id),
            w.pid,
            escape(&w.host),
            escape(w.surface.as_deref().unwrap_or("-")),
            crate::lease::words::human::duration(now - w.since)
        ));
    }
    s
}

/// What a repair would do; `forced`: `--force` was given, so its need is not said again.
pub(crate) fn repair_text(
    location: &Location,
    plan: &crate::lease::doctor::repair::RepairPlan,
    forced: bool,
) -> String {
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
        let need = if forced { "--force given" } else { "NEEDS --force" };
        let _ = writeln!(s, "  {need}: leases whose owners may be alive would be lost");
    }
    for (from, to) in &plan.rekeyed {
        let _ = writeln!(s, "  duplicate lease id {from} held by a live owner: kept under the new id {to}");
    }
    s
}

/// Text for standard output, written in pieces of 64 KiB as it is made (each escaped as
/// `say_raw!` escapes it): doctor's report on 50,000 leases is never held whole.
pub(super) struct StdoutText(String);

impl StdoutText {
    const PIECE: usize = 64 * 1024;

    pub(super) fn new() -> StdoutText {
        StdoutText(String::new())
    }

    fn write_out(&mut self) {
        if !self.0.is_empty() {
            say_raw!("{}", self.0);
            self.0.clear();
        }
    }
}

impl std::fmt::Write for StdoutText {
    fn write_str(&mut self, piece: &str) -> std::fmt::Result {
        self.0.push_str(piece);
        if self.0.len() >= Self::PIECE {
            self.write_out();
        }
        Ok(())
    }
}

impl Drop for StdoutText {
    fn drop(&mut self) {
        self.write_out();
    }
}

/// doctor's report on one registry, for a person.
pub(super) fn doctor_text(d: &DoctorReport, hints: &super::hints::Hints, s: &mut dyn std::fmt::Write) {
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
    doctor_validity(d, s);
    if !d.problems.is_empty() || !d.empty_session_ids.is_empty() {
        // Every other finding has its command: so does an invalid registry.
        let is_profile = d.registry.home != crate::lease::home::paths::root_of(&d.registry.home);
        let profile = is_profile.then_some(d.registry.profile.as_str());
        let _ = writeln!(
            s,
            "  `{}` repairs it: it asks first, keeps a backup and every valid entry",
            hints.command(Some(profile), &["doctor", "--repair"])
        );
    }
    doctor_leases(d, s, hints);
    doctor_files(d, s);
}

/// What makes the registry unusable or over-full: broken rules, empty session ids, the
/// cap exceeded, sessions with two live owners.
fn doctor_validity(d: &DoctorReport, s: &mut dyn std::fmt::Write) {
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
fn doctor_leases(d: &DoctorReport, s: &mut dyn std::fmt::Write, hints: &super::hints::Hints) {
    // Named by profile: with --all-profiles a bare `leasectl prune` would act on the root only.
    let is_profile = d.registry.home != crate::lease::home::paths::root_of(&d.registry.home);
    let profile = is_profile.then_some(d.registry.profile.as_str());
    let here = |args: &[&str]| hints.command(Some(profile), args);
    for v in d.leases.stale() {
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
    for (v, why, judged) in d.leases.leak_suspects_judged() {
        let id = short_id(v.entry.lease_id());
        // The safe move for its owner's kind, as doctor judged its situation.
        let m = d.owner_move(v, judged);
        let kind = format!(", {}", escape(&m.kind.describe()));
        let advice = crate::lease::words::safe_move::advise_move(&m, &id, v.pid_here(), &|a| format!("`{}`", here(a)));
        let _ = writeln!(
            s,
            "  LEAK?: lease {} (session {}{kind}): {} — {advice}",
            escape(&id),
            escape(v.entry.session_id()),
            escape(&why),
        );
    }
    for v in &d.hidden {
        let explained = v.liveness.explain();
        let _ = writeln!(
            s,
            "  hidden: lease {} (session {}): {} — kept and counted toward the cap, never pruned as dead",
            escape(&short_id(v.entry.lease_id())),
            escape(v.entry.session_id()),
            escape(explained.strip_prefix("hidden: ").unwrap_or(&explained)),
        );
    }
    if !d.pid_namespaces.is_empty() {
        let _ =
            writeln!(s, "  PID NAMESPACES: {}", escape(&crate::lease::view::pid_namespaces_text(&d.pid_namespaces)));
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
fn doctor_files(d: &DoctorReport, s: &mut dyn std::fmt::Write) {
    for t in &d.leftover_temp_files {
        let name = t.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
        let writer = crate::lease::file::registry::temp_file_writer(&name).unwrap_or("a writer");
        let _ = writeln!(
            s,
            "  leftover temp file from a crashed writer ({writer}): {}; `doctor --repair` removes it under the \
             registry's lock, where no writer can be mid-write",
            escape(&t.display().to_string())
        );
    }
    if let Some(target) = &d.symlink_to {
        let path = d.registry.path();
        let _ = writeln!(
            s,
            "  SYMLINK: the registry is a symlink to {}: every write refuses to go through it, so every acquire \
             fails; make it a regular file: `cp --remove-destination {} {}`",
            escape(&target.display().to_string()),
            crate::lease::words::human::shell_word(&target.to_string_lossy()),
            crate::lease::words::human::shell_word(&path.to_string_lossy())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_table_makes_each_row_twice_and_pads_as_the_whole_one() {
        let rows = [vec!["xxx".to_owned(), "y".to_owned()], vec!["z\u{1b}".to_owned(), "w".to_owned()]];
        let asked = std::cell::Cell::new(0);
        let lines: Vec<String> = table_lines(&["A", "BB"], rows.len(), |i| {
            asked.set(asked.get() + 1);
            rows[i].clone()
        })
        .collect();
        assert_eq!(asked.get(), 4, "once for the widths, once to print");
        // The escaped cell (`z\u{1b}`, seven characters shown) sets its column's width.
        assert_eq!(lines, ["  A        BB", "  xxx      y", "  z\\u{1b}  w"]);
        assert_eq!(table(&["A", "BB"], &rows), lines.join("\n"));
    }

    #[test]
    fn tables_align() {
        let t = table(&["A", "BB"], &[vec!["xxx".into(), "y".into()], vec!["z".into(), "w".into()]]);
        assert_eq!(t, "  A    BB\n  xxx  y\n  z    w");
    }
}
