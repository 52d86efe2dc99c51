//! `stop`: end a lease's owner process, race-free, then leave its registry clean. Shows
//! what it will end and asks first (on a terminal; `--yes` for scripts).

use std::io::{BufRead as _, IsTerminal as _, Write as _};

use serde_json::{Value, json};

use super::args::StopArgs;
use super::hints::Hints;
use super::release::{Named, ambiguous, name_lease};
use super::{EXIT_ERROR, EXIT_OK, Failure, fail, print_json, usage};
use crate::lease::owners::kind::OwnerKind;
use crate::lease::stop::{OwnerEnding, OwnerToStop, StopOptions, StopPlan, Stopped};
use crate::lease::words::human::{duration, escape, plural};
use crate::lease::{self, LeaseStore, LeaseView, Location, Target};

/// Opens a store for a location (audited, as the command line's are).
pub(super) type Opener<'a> = dyn Fn(&Location) -> Result<Box<dyn LeaseStore>, Failure> + 'a;

pub(super) fn stop(
    mut stores: Vec<Box<dyn LeaseStore>>,
    elsewhere: &[Location],
    open: &Opener<'_>,
    a: &StopArgs,
    hints: &Hints,
) -> Result<i32, Failure> {
    let (index, target) = find(&mut stores, a, hints)?;
    // The home's other registries: where the same process may hold leases too.
    let others: Vec<Location> = stores
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != index)
        .map(|(_, s)| s.location().clone())
        .chain(elsewhere.iter().cloned())
        .collect();
    let store = &mut stores[index];
    let plan = store.stop_plan(&target)?;
    let location = store.location().clone();
    let beyond = held_elsewhere(&plan, &others);
    if a.json && a.dry_run {
        print_json(&json!({"registry": location.describe(), "profile": location.label(), "dry_run": true,
                           "owners": plan.owners.iter().map(|o| owner_json(o, &beyond)).collect::<Vec<_>>()}));
        return Ok(EXIT_OK);
    }
    if !a.json {
        preview(&location, &plan, &beyond, a);
    }
    if a.dry_run {
        say!("dry run: nothing signalled");
        return Ok(EXIT_OK);
    }
    let many = serving_many(&plan, &beyond);
    if !a.yes {
        confirm(&plan)?;
        if !many.is_empty() {
            confirm_every_session(&many)?;
        }
    } else if !many.is_empty() && !a.every_session {
        return Err(usage(format!(
            "{}: stop ends every one of them. Pass --every-session with --yes to end them all, or free the one lease \
             without ending the process (`leasectl doctor` says how, for its kind)",
            many.iter().map(|m| m.said()).collect::<Vec<_>>().join("; ")
        )));
    }
    let grace = a.grace;
    say_err!(
        "leasectl: sending SIGTERM to {}; SIGKILL after {} if {} not ended",
        pids(&plan),
        duration(grace.as_secs_f64()),
        if plan.owners.len() == 1 { "it has" } else { "they have" }
    );
    let stopped = store.stop(&plan, StopOptions { grace })?;
    for w in &stopped.warnings {
        say_err!("leasectl: warning: {}", escape(w));
    }
    let cleaned = clean_elsewhere(&stopped, &beyond, open);
    if a.json {
        let mut v = result_json(&location, &plan, &stopped);
        v["elsewhere"] = Value::Array(cleaned.iter().map(Cleaned::json).collect());
        print_json(&v);
    } else {
        report(&stopped);
        for c in &cleaned {
            say!("{}", c.said());
        }
    }
    let not_ended: Vec<String> = stopped
        .owners
        .iter()
        .filter_map(|o| match &o.ending {
            OwnerEnding::NotEnded(why) => Some(format!("pid {}: {why}", o.pid)),
            _ => None,
        })
        .collect();
    match not_ended.is_empty() {
        true => Ok(EXIT_OK),
        false => Err(Failure { code: EXIT_ERROR, message: format!("not ended: {}", not_ended.join("; ")) }),
    }
}

/// The store that holds the lease or session named, and the target: one registry, or
/// the one of several (`--all-profiles`, hosts) that has it.
fn find(stores: &mut [Box<dyn LeaseStore>], a: &StopArgs, hints: &Hints) -> Result<(usize, Target), Failure> {
    let named = match (&a.lease_id, &a.session) {
        (Some(typed), None) => Target::Lease(typed.clone()),
        (None, Some(s)) => Target::Session(s.clone()),
        _ => return Err(usage("give either LEASE_ID or --session S")),
    };
    if let [store] = stores {
        return Ok((
            0,
            match named {
                Target::Lease(typed) => match name_lease(&mut **store, &typed, &[], "stop", &a.options(), hints)? {
                    Named::Id(id) => Target::Lease(id),
                    Named::Nowhere => Target::Lease(typed),
                },
                session => session,
            },
        ));
    }
    let mut hits = Vec::new();
    for (i, store) in stores.iter_mut().enumerate() {
        let Ok(views) = store.read().leases else { continue };
        let found = match &named {
            Target::Lease(typed) => match lease::address::lookup::lookup(&views, typed) {
                lease::address::lookup::Lookup::Found(id) => Some(Target::Lease(id)),
                lease::address::lookup::Lookup::Ambiguous(c) => return Err(ambiguous(typed, store.location(), &c)),
                lease::address::lookup::Lookup::Missing => None,
            },
            Target::Session(_) | Target::Stopped(_) => {
                views.iter().any(|v| named.names(&v.entry)).then(|| named.clone())
            }
        };
        hits.extend(found.map(|t| (i, t)));
    }
    match hits.len() {
        1 => Ok(hits.remove(0)),
        0 => Err(fail(format!("no lease {} in any of {} registries", what(&named), stores.len()))),
        _ => {
            let places: Vec<String> = hits.iter().map(|(i, _)| stores[*i].location().label()).collect();
            Err(usage(format!(
                "{} is held in several registries ({}): name one with --profile (and --host)",
                what(&named),
                places.join(", ")
            )))
        }
    }
}

fn what(target: &Target) -> String {
    match target {
        Target::Lease(id) => escape(id).into_owned(),
        Target::Session(s) => format!("holding session {}", escape(s)),
        Target::Stopped(ids) => format!("of {}", plural(ids.len(), "stopped owner's lease", "stopped owner's leases")),
    }
}

fn pids(plan: &StopPlan) -> String {
    let pids: Vec<String> = plan.owners.iter().map(|o| o.pid.to_string()).collect();
    format!("pid {}", pids.join(", "))
}

/// What will be ended, for the operator to decide on: who, what it runs, since when, its
/// sessions, what it started, and what else ends with it.
fn preview(location: &Location, plan: &StopPlan, beyond: &[Beyond], a: &StopArgs) {
    let now = lease::now();
    say!(
        "{} ({}): stop would end {}:",
        location.label(),
        location.describe(),
        plural(plan.owners.len(), "process", "processes")
    );
    for o in &plan.owners {
        say!("{}", owner_line(o, now));
        if let Some(info) = o.info.as_ref().filter(|i| !i.cmdline.is_empty()) {
            say!("    command: {}", escape(&info.cmdline.join(" ")));
        }
        let named = o.leases.iter().map(|v| (v, "holds", ""));
        for (v, holds, tail) in named.chain(o.also_holds.iter().map(|v| (v, "also holds", " (it ends with it)"))) {
            let session = v.entry.session_id();
            let about = session_words(o, session, now);
            say!("    {holds} lease {}  session {}{about}{tail}", short(v.entry.lease_id()), escape(session));
        }
        for b in beyond.iter().filter(|b| b.is_of(o)) {
            for v in &b.leases {
                say!(
                    "    also holds in {}: lease {}  session {} (it ends with it; removed there once it has ended)",
                    escape(&b.location.label()),
                    short(v.entry.lease_id()),
                    escape(v.entry.session_id())
                );
            }
        }
        if let Some(cost) = kind_cost(o, beyond) {
            say!("    {cost}");
        }
        if !o.family.is_empty() {
            let members: Vec<String> = o.family.iter().map(|m| format!("{} ({})", m.pid, escape(&m.name))).collect();
            say!("    processes it started (ended with it if it ends them, or by SIGKILL): {}", members.join(", "));
        }
    }
    say!(
        "SIGTERM first; SIGKILL after {} if it has not ended. Then its leases are gone by its own release, or removed \
         as a dead owner's.",
        duration(a.grace.as_secs_f64())
    );
}

fn owner_line(o: &OwnerToStop, now: f64) -> String {
    let name = o.info.as_ref().map(|i| escape(&i.name).into_owned()).unwrap_or_else(|| "-".into());
    let user = o.info.as_ref().and_then(|i| i.user.clone()).unwrap_or_else(|| format!("uid {}", o.uid));
    format!("  {}  {name}  user {}  started {} ago", o.pid_text(), escape(&user), duration(now - o.start_time))
}

fn short(id: &str) -> String {
    escape(&id.chars().take(8).collect::<String>()).into_owned()
}

/// `"title", last activity 3m ago` from state.db, where it says anything.
fn session_words(o: &OwnerToStop, session: &str, now: f64) -> String {
    let Some(note) = o.sessions.iter().find(|n| n.session_id == session) else { return String::new() };
    let mut words = Vec::new();
    if let Some(t) = &note.title {
        words.push(format!("\"{}\"", escape(t)));
    }
    if let Some(at) = note.last_activity {
        words.push(format!("last activity {} ago", duration(now - at)));
    }
    if let Some(at) = note.ended_at {
        words.push(format!("ended {} ago", duration(now - at)));
    }
    match words.is_empty() {
        true => String::new(),
        false => format!("  ({})", words.join(", ")),
    }
}

/// Asked on the terminal; without one, `--yes` is the answer a script gives.
fn confirm(plan: &StopPlan) -> Result<(), Failure> {
    if !std::io::stdin().is_terminal() {
        return Err(usage(
            "stop ends processes and asks first; there is no terminal to ask on: pass --yes to end them (or \
             --dry-run to see what it would end)",
        ));
    }
    let _ = std::io::stdout().flush();
    eprint!("End {}? [y/N] ", pids(plan));
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).map_err(|e| fail(format!("cannot read the answer: {e}")))?;
    match answer.trim() {
        "y" | "Y" | "yes" | "YES" | "Yes" => Ok(()),
        _ => Err(Failure { code: EXIT_ERROR, message: "not stopped: nothing signalled".into() }),
    }
}

fn report(stopped: &Stopped) {
    for o in &stopped.owners {
        say!("stopped {}", lease::stop::said(o));
        if !o.family_left.is_empty() {
            let m: Vec<String> = o.family_left.iter().map(|m| format!("{} ({})", m.pid, escape(&m.name))).collect();
            say!("  still running, started by it: {}", m.join(", "));
        }
    }
}

fn owner_json(o: &OwnerToStop, beyond: &[Beyond]) -> Value {
    let kind = o.kind();
    let elsewhere: Vec<Value> = beyond
        .iter()
        .filter(|b| b.is_of(o))
        .map(|b| {
            json!({"profile": b.location.label(), "path": b.location.describe(),
                        "leases": b.leases.iter().map(|v| super::json::lease(v, None)).collect::<Vec<_>>()})
        })
        .collect();
    json!({
        "owner_kind": kind,
        "sessions_held": sessions_of(o, beyond),
        "elsewhere": elsewhere,
        "pid": o.pid,
        "recorded_pid": o.recorded_pid,
        "start_time": o.start_time,
        "uid": o.uid,
        "owner": o.info.as_ref().map(|i| json!({"name": i.name, "user": i.user, "cmdline": i.cmdline})),
        "leases": o.leases.iter().map(|v| super::json::lease(v, None)).collect::<Vec<_>>(),
        "also_holds": o.also_holds.iter().map(|v| super::json::lease(v, None)).collect::<Vec<_>>(),
        "family": o.family.iter().map(|m| json!({"pid": m.pid, "name": m.name})).collect::<Vec<_>>(),
        "sessions": o.sessions.iter().map(|n| json!({"session_id": n.session_id, "title": n.title,
            "last_activity": n.last_activity, "ended_at": n.ended_at, "gateway_turn": n.gateway_turn}))
            .collect::<Vec<_>>(),
    })
}

fn result_json(location: &Location, plan: &StopPlan, stopped: &Stopped) -> Value {
    let owners: Vec<Value> = stopped
        .owners
        .iter()
        .map(|o| {
            let planned = plan.owners.iter().find(|p| p.pid == o.pid && p.start_time == o.start_time);
            json!({
                "pid": o.pid,
                "recorded_pid": planned.and_then(|p| p.recorded_pid),
                "start_time": o.start_time,
                "name": o.name,
                "user": planned.and_then(|p| p.info.as_ref()).and_then(|i| i.user.clone()),
                "ending": o.ending.name(),
                "not_ended_why": match &o.ending { OwnerEnding::NotEnded(why) => Some(why.clone()), _ => None },
                "signals": o.signals.iter().map(|s| json!({"signal": s.signal, "after": s.after})).collect::<Vec<_>>(),
                "took": o.took,
                "family_ended": o.family_ended.iter().map(|m| json!({"pid": m.pid, "name": m.name})).collect::<Vec<_>>(),
                "family_left": o.family_left.iter().map(|m| json!({"pid": m.pid, "name": m.name})).collect::<Vec<_>>(),
                "leases": o.leases.iter().map(|l| json!({"lease_id": l.view.entry.lease_id(),
                    "session_id": l.view.entry.session_id(), "how": l.how.name()})).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({"registry": location.describe(), "profile": location.label(), "dry_run": false, "owners": owners,
           "warnings": stopped.warnings})
}

/// An owner's leases in another registry of the home, found by its pid and start time.
struct Beyond {
    location: Location,
    pid: u64,
    start_time: f64,
    leases: Vec<LeaseView>,
}

impl Beyond {
    fn is_of(&self, o: &OwnerToStop) -> bool {
        self.pid == o.recorded() && self.start_time == o.start_time
    }
}

/// The leases each owner of `plan` holds in `others` (registry files of the home; read
/// now): they end with it, and are removed there once it has ended.
fn held_elsewhere(plan: &StopPlan, others: &[Location]) -> Vec<Beyond> {
    let mut found = Vec::new();
    for location in others {
        let Some(reg) = location.registry() else { continue };
        let Ok(views) = lease::file::snapshot(reg).leases else { continue };
        for o in &plan.owners {
            let leases: Vec<LeaseView> =
                views.iter().filter(|v| lease::stop::held_by(v, o.recorded(), o.start_time)).cloned().collect();
            if !leases.is_empty() {
                found.push(Beyond { location: location.clone(), pid: o.recorded(), start_time: o.start_time, leases });
            }
        }
    }
    found
}

/// How many sessions `o` holds: here and in the home's other registries.
fn sessions_of(o: &OwnerToStop, beyond: &[Beyond]) -> usize {
    o.all_leases().count() + beyond.iter().filter(|b| b.is_of(o)).map(|b| b.leases.len()).sum::<usize>()
}

/// What ending `o` costs, for an owner of many sessions: `a gateway (telegram): stopping
/// it ends 14 chats, 3 running a turn`.
fn kind_cost(o: &OwnerToStop, beyond: &[Beyond]) -> Option<String> {
    let kind = o.kind();
    let n = sessions_of(o, beyond);
    if n < 2 && !matches!(kind, OwnerKind::Gateway { .. }) {
        return None;
    }
    let noun = escape(&kind.noun()).into_owned();
    Some(match kind {
        OwnerKind::Gateway { .. } => {
            let turns = o.sessions.iter().filter(|s| s.gateway_turn == Some(true)).count();
            format!(
                "it is the {noun}: stopping it ends every chat it serves, not only this one ({} leased now, {} \
                 running a turn); a lease it left between turns is freed alone by `leasectl force-release ID`",
                plural(n, "chat", "chats"),
                turns
            )
        }
        OwnerKind::AppBackend { .. } => format!(
            "it is the {noun}: stopping it ends every session attached to it ({}), and the app loses its backend",
            plural(n, "session", "sessions")
        ),
        _ => format!("stopping it ends all {n} sessions it holds"),
    })
}

/// An owner that holds more than one session, named for the question asked again.
struct Many {
    pid: u64,
    kind: OwnerKind,
    sessions: Vec<String>,
}

impl Many {
    fn said(&self) -> String {
        const SHOWN: usize = 10;
        let mut names: Vec<String> = self.sessions.iter().take(SHOWN).map(|s| escape(s).into_owned()).collect();
        if self.sessions.len() > SHOWN {
            names.push(format!("and {} more", self.sessions.len() - SHOWN));
        }
        format!(
            "pid {} ({}) holds {}: {}",
            self.pid,
            escape(&self.kind.noun()),
            plural(self.sessions.len(), "session", "sessions"),
            names.join(", ")
        )
    }
}

fn serving_many(plan: &StopPlan, beyond: &[Beyond]) -> Vec<Many> {
    plan.owners
        .iter()
        .filter(|o| sessions_of(o, beyond) > 1)
        .map(|o| {
            let here = o.all_leases().map(|v| v.entry.session_id().to_owned());
            let there = beyond
                .iter()
                .filter(|b| b.is_of(o))
                .flat_map(|b| b.leases.iter())
                .map(|v| format!("{} (in {})", v.entry.session_id(), b_label(beyond, o, v)));
            Many { pid: o.pid, kind: o.kind(), sessions: here.chain(there).collect() }
        })
        .collect()
}

fn b_label(beyond: &[Beyond], o: &OwnerToStop, v: &LeaseView) -> String {
    beyond
        .iter()
        .find(|b| b.is_of(o) && b.leases.iter().any(|w| w.entry.lease_id() == v.entry.lease_id()))
        .map(|b| b.location.label())
        .unwrap_or_default()
}

/// The second question, for an owner of more than one session: each named.
fn confirm_every_session(many: &[Many]) -> Result<(), Failure> {
    for m in many {
        eprint!("{}. End every one of them? [y/N] ", m.said());
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer).map_err(|e| fail(format!("cannot read the answer: {e}")))?;
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            return Err(Failure { code: EXIT_ERROR, message: "not stopped: nothing signalled".into() });
        }
    }
    Ok(())
}

/// What became of an ended owner's leases in another registry.
struct Cleaned {
    location: Location,
    leases: Vec<(LeaseView, &'static str)>,
    error: Option<String>,
}

impl Cleaned {
    fn said(&self) -> String {
        let place = escape(&self.location.label()).into_owned();
        if let Some(e) = &self.error {
            return format!("  in {place}: its leases were left: {}", escape(e));
        }
        let each: Vec<String> = self
            .leases
            .iter()
            .map(|(v, how)| {
                format!("lease {} (session {}) {how}", short(v.entry.lease_id()), escape(v.entry.session_id()))
            })
            .collect();
        format!("  in {place}: {}", each.join("; "))
    }

    fn json(&self) -> Value {
        json!({
            "profile": self.location.label(),
            "path": self.location.describe(),
            "error": self.error,
            "leases": self.leases.iter().map(|(v, how)| json!({"lease_id": v.entry.lease_id(),
                "session_id": v.entry.session_id(), "how": how})).collect::<Vec<_>>(),
        })
    }
}

/// The leases an ended owner held in the home's other registries, removed in one write
/// each (as a stop's: its audit record there says so).
fn clean_elsewhere(stopped: &Stopped, beyond: &[Beyond], open: &Opener<'_>) -> Vec<Cleaned> {
    let mut out = Vec::new();
    for b in beyond {
        let ended = stopped.owners.iter().any(|o| o.start_time == b.start_time && o.ending.ended());
        if !ended {
            continue;
        }
        let ids: Vec<String> = b.leases.iter().map(|v| v.entry.lease_id().to_owned()).collect();
        let opts = lease::ForceOptions { allow_live: true, dry_run: false };
        let result = open(&b.location).map_err(|f| f.message).and_then(|mut store| {
            match store.force_release(&Target::Stopped(ids), opts) {
                Ok(r) => Ok(r.removed.iter().map(|v| v.entry.lease_id().to_owned()).collect::<Vec<_>>()),
                Err(lease::Error::NotFound(_)) => Ok(vec![]),
                Err(e) => Err(e.to_string()),
            }
        });
        let (leases, error) = match result {
            Ok(gone) => (
                b.leases
                    .iter()
                    .map(|v| {
                        let how = if gone.iter().any(|id| id == v.entry.lease_id()) {
                            "removed (its owner dead)"
                        } else {
                            "released by its owner as it ended"
                        };
                        (v.clone(), how)
                    })
                    .collect(),
                None,
            ),
            Err(e) => (vec![], Some(e)),
        };
        out.push(Cleaned { location: b.location.clone(), leases, error });
    }
    out
}
