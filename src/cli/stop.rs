//! `stop`: end a lease's owner process, race-free, then leave its registry clean. Shows
//! what it will end and asks first (on a terminal; `--yes` for scripts).

use std::io::{BufRead as _, IsTerminal as _, Write as _};

use serde_json::{Value, json};

use super::args::StopArgs;
use super::hints::Hints;
use super::release::{Named, ambiguous, name_lease};
use super::{EXIT_ERROR, EXIT_OK, Failure, fail, print_json, usage};
use crate::lease::stop::{OwnerEnding, OwnerToStop, StopOptions, StopPlan, Stopped};
use crate::lease::words::human::{duration, escape, plural};
use crate::lease::{self, LeaseStore, Location, Target};

pub(super) fn stop(mut stores: Vec<Box<dyn LeaseStore>>, a: &StopArgs, hints: &Hints) -> Result<i32, Failure> {
    let (index, target) = find(&mut stores, a, hints)?;
    let store = &mut stores[index];
    let plan = store.stop_plan(&target)?;
    let location = store.location().clone();
    if a.json && a.dry_run {
        print_json(&json!({"registry": location.describe(), "profile": location.label(), "dry_run": true,
                           "owners": plan.owners.iter().map(owner_json).collect::<Vec<_>>()}));
        return Ok(EXIT_OK);
    }
    if !a.json {
        preview(&location, &plan, a);
    }
    if a.dry_run {
        say!("dry run: nothing signalled");
        return Ok(EXIT_OK);
    }
    if !a.yes {
        confirm(&plan)?;
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
    if a.json {
        print_json(&result_json(&location, &plan, &stopped));
    } else {
        report(&stopped);
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
            Target::Session(s) => views.iter().any(|v| v.entry.session_id() == s).then(|| named.clone()),
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
    }
}

fn pids(plan: &StopPlan) -> String {
    let pids: Vec<String> = plan.owners.iter().map(|o| o.pid.to_string()).collect();
    format!("pid {}", pids.join(", "))
}

/// What will be ended, for the operator to decide on: who, what it runs, since when, its
/// sessions, what it started, and what else ends with it.
fn preview(location: &Location, plan: &StopPlan, a: &StopArgs) {
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

fn owner_json(o: &OwnerToStop) -> Value {
    json!({
        "pid": o.pid,
        "recorded_pid": o.recorded_pid,
        "start_time": o.start_time,
        "uid": o.uid,
        "owner": o.info.as_ref().map(|i| json!({"name": i.name, "user": i.user, "cmdline": i.cmdline})),
        "leases": o.leases.iter().map(|v| super::json::lease(v, None)).collect::<Vec<_>>(),
        "also_holds": o.also_holds.iter().map(|v| super::json::lease(v, None)).collect::<Vec<_>>(),
        "family": o.family.iter().map(|m| json!({"pid": m.pid, "name": m.name})).collect::<Vec<_>>(),
        "sessions": o.sessions.iter().map(|n| json!({"session_id": n.session_id, "title": n.title,
            "last_activity": n.last_activity, "ended_at": n.ended_at})).collect::<Vec<_>>(),
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
