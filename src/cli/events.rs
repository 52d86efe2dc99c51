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
        let ts = |v: &Value| v["ts"].as_f64().unwrap_or(0.0);
        loop {
            let next = heads
                .iter()
                .enumerate()
                .filter_map(|(i, (_, head))| head.as_ref().map(|v| (i, ts(v))))
                .min_by(|x, y| x.1.total_cmp(&y.1))
                .map(|(i, _)| i);
            let Some(i) = next else { break };
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
        if journals == 0 && !a.follow {
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
