//! `leasectl events`: what happened, from the journal `events --follow --record` keeps
//! (`--since`), and as it happens (`--follow`).

use std::time::Duration;

use serde_json::Value;

use super::args::EventsArgs;
use super::watch::{Follow, follow, print_line};
use super::{EXIT_OK, Failure};
use crate::lease::{LeaseStore, now};

/// Without --follow and --since: the last day.
const DEFAULT_SINCE: Duration = Duration::from_secs(24 * 3600);

pub fn events(
    stores: &mut Vec<Box<dyn LeaseStore>>,
    a: &EventsArgs,
    idle: Option<Duration>,
    discover: Option<(std::path::PathBuf, crate::lease::StoreOptions)>,
) -> Result<i32, Failure> {
    let format = a.format.format();
    let since = a.since.or((!a.follow).then_some(DEFAULT_SINCE));
    if let Some(since) = since {
        let from = now() - since.as_secs_f64();
        // Each journal is in time order: merged a line at a time, so memory stays
        // bounded whatever the journals hold.
        let mut heads: Vec<(crate::lease::journal::Journal, Option<Value>)> = Vec::new();
        for store in stores.iter() {
            let Some(reg) = store.location().registry() else { continue };
            if let Some(mut journal) = crate::lease::journal::read_since(&reg.home, from) {
                let first = journal.next();
                heads.push((journal, first));
            }
        }
        let journals = heads.len();
        // What the audit files hold for the window: removals made while no recorder ran
        // are shown too; those a recorder saw are shown once, from its journal.
        let mut audited: Vec<Value> = Vec::new();
        for store in stores.iter() {
            let Some(reg) = store.location().registry() else { continue };
            let (events, warnings) = crate::lease::journal::audit_since(&reg.home, from);
            audited.extend(events);
            for w in warnings {
                say_err!("leasectl: warning: {}", crate::lease::human::escape(&w));
            }
        }
        if !audited.is_empty() {
            let wanted: std::collections::HashSet<(String, String)> =
                audited.iter().filter_map(crate::lease::journal::removal_key).collect();
            let mut seen = std::collections::HashSet::new();
            for store in stores.iter() {
                let Some(reg) = store.location().registry() else { continue };
                for v in crate::lease::journal::read_since(&reg.home, from).into_iter().flatten() {
                    if let Some(key) = crate::lease::journal::removal_key(&v).filter(|k| wanted.contains(k)) {
                        seen.insert(key);
                    }
                }
            }
            audited.retain(|v| crate::lease::journal::removal_key(v).is_none_or(|k| !seen.contains(&k)));
            audited.sort_by(|x, y| x["ts"].as_f64().unwrap_or(0.0).total_cmp(&y["ts"].as_f64().unwrap_or(0.0)));
        }
        let printed_audit = !audited.is_empty();
        let mut audited = audited.into_iter().peekable();
        let ts = |v: &Value| v["ts"].as_f64().unwrap_or(0.0);
        loop {
            let next = heads
                .iter()
                .enumerate()
                .filter_map(|(i, (_, head))| head.as_ref().map(|v| (i, ts(v))))
                .min_by(|x, y| x.1.total_cmp(&y.1));
            if let Some(a) = audited.peek()
                && next.is_none_or(|(_, t)| ts(a) <= t)
            {
                if let Some(line) = audited.next() {
                    print_line(format, &line);
                }
                continue;
            }
            let Some((i, _)) = next else { break };
            let (journal, head) = &mut heads[i];
            if let Some(line) = head.take() {
                print_line(format, &line);
            }
            *head = journal.next();
        }
        for (journal, _) in heads {
            for w in journal.finish() {
                say_err!("leasectl: warning: {}", crate::lease::human::escape(&w));
            }
        }
        if journals == 0 && !a.follow && !printed_audit {
            say_err!(
                "leasectl: no events recorded here: `leasectl events --follow --record` keeps the journal \
                 (run it as a service; see the README)"
            );
        }
    }
    if !a.follow {
        return Ok(EXIT_OK);
    }
    // One recorder per home, held while this one records.
    let mut _claims = Vec::new();
    if a.record {
        for store in stores.iter() {
            let Some(reg) = store.location().registry() else { continue };
            use crate::lease::journal::{Unclaimed, claim_recorder};
            match claim_recorder(&reg.home) {
                Ok(claim) => _claims.push(claim),
                Err(Unclaimed::Busy(message)) => return Err(Failure { code: super::EXIT_ERROR, message }),
                // One home's broken logs/ is that home's problem: the others are recorded.
                Err(Unclaimed::Unusable(why)) => say_err!("leasectl: warning: {}", crate::lease::human::escape(&why)),
            }
        }
    }
    let all = |_: &crate::lease::LeaseView| true;
    let f = Follow {
        format,
        no_headers: a.format.no_headers,
        present: false,
        selected: &all,
        record: a.record,
        metrics_file: a.metrics_file.clone(),
        metrics_every: a.metrics_every,
        discover,
        idle,
    };
    follow(stores, &f)
}
