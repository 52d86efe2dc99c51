//! `leasectl events`: what happened, from the journal `events --follow --record` keeps
//! (`--since`), and as it happens (`--follow`).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::args::{EventsArgs, Format};
use super::watch::{Follow, follow, print_line};
use super::{EXIT_OK, Failure, fail, usage};
use crate::lease::human::escape;
use crate::lease::journal::{self, Unclaimed, claim_recorder};
use crate::lease::{LeaseStore, now};

/// Without --follow and --since: the last day.
const DEFAULT_SINCE: Duration = Duration::from_secs(24 * 3600);

pub(super) fn events(
    stores: &mut Vec<Box<dyn LeaseStore>>,
    a: &EventsArgs,
    idle: Option<Duration>,
    discover: super::watch::Discover,
    hints: &super::hints::Hints,
) -> Result<i32, Failure> {
    // Each host keeps its own journal, where its recorder runs.
    if stores.iter().any(|s| s.location().host().is_some()) {
        if a.record {
            return Err(usage(
                "--record keeps the journal beside the registry: over --host run `leasectl events --follow --record` \
                 on each host",
            ));
        }
        if a.since.is_some() || !a.follow {
            return Err(usage(
                "recorded events are kept on each host, by its recorder: read them there (`ssh HOST leasectl events \
                 --since 1h`); over --host, `events --follow` shows them as they happen",
            ));
        }
    }
    let format = a.format.format();
    // One header over both parts, the recorded events and the live ones.
    if format == Format::Tsv && !a.format.no_headers {
        say!("{}", super::watch::TSV_HEADER);
    }
    if let Some(since) = a.since.or((!a.follow).then_some(DEFAULT_SINCE)) {
        // An etcd prefix's journal is in the recorder's state directory.
        let homes: Vec<PathBuf> = stores.iter().filter_map(|s| journal::journal_home(s.location())).collect();
        let from = now() - since.as_secs_f64();
        let audited = unrecorded_removals(&homes, from);
        let (journals, printed_audit) = print_merged(&homes, from, audited, format);
        if journals == 0 && !a.follow && !printed_audit {
            say_err!(
                "leasectl: no events recorded here: `{} events --follow --record` keeps the journal (run it as \
                 a service; see the README)",
                hints.in_profile(None)
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
            let Some(home) = journal::journal_home(store.location()) else {
                return Err(fail(format!(
                    "no place to record {}: set XDG_STATE_HOME or HOME",
                    store.location().describe()
                )));
            };
            if store.location().is_remote()
                && let Err(e) = journal::create_journal_home(&home)
            {
                return Err(fail(format!("cannot create {} to record in: {e}", home.display())));
            }
            match claim_recorder(&home) {
                Ok(claim) => _claims.push(claim),
                Err(Unclaimed::Busy(message)) => return Err(fail(message)),
                // One home's broken logs/ is that home's problem: the others are recorded.
                Err(Unclaimed::Unusable(why)) => say_err!("leasectl: warning: {}", escape(&why)),
            }
        }
    }
    let all = |_: &crate::lease::LeaseView| true;
    let f = Follow {
        format,
        no_headers: true,
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

/// The removals the homes' audit files hold from `from` on that no recorder saw (those
/// a recorder saw are shown once, from its journal), in time order.
fn unrecorded_removals(homes: &[PathBuf], from: f64) -> Vec<Value> {
    let mut audited: Vec<Value> = Vec::new();
    for home in homes {
        let (events, warnings) = journal::audit_since(home, from);
        audited.extend(events);
        for w in warnings {
            say_err!("leasectl: warning: {}", escape(&w));
        }
    }
    if audited.is_empty() {
        return audited;
    }
    let wanted: HashSet<(String, String)> = audited.iter().filter_map(journal::removal_key).collect();
    let mut seen = HashSet::new();
    for home in homes {
        for v in journal::read_since(home, from).into_iter().flatten() {
            if let Some(key) = journal::removal_key(&v).filter(|k| wanted.contains(k)) {
                seen.insert(key);
            }
        }
    }
    audited.retain(|v| journal::removal_key(v).is_none_or(|k| !seen.contains(&k)));
    audited.sort_by(|x, y| ts(x).total_cmp(&ts(y)));
    audited
}

fn ts(v: &Value) -> f64 {
    v["ts"].as_f64().unwrap_or(0.0)
}

/// Print every journal's events from `from` on and `audited`, merged in time order a
/// line at a time (each journal is in time order: memory stays bounded whatever they
/// hold). Returns how many journals there were, and whether any audit line was printed.
fn print_merged(homes: &[PathBuf], from: f64, audited: Vec<Value>, format: Format) -> (usize, bool) {
    let mut heads: Vec<(journal::Journal, Option<Value>)> = Vec::new();
    for home in homes {
        if let Some(mut journal) = journal::read_since(home, from) {
            let first = journal.next();
            heads.push((journal, first));
        }
    }
    let journals = heads.len();
    let printed_audit = !audited.is_empty();
    let mut audited = audited.into_iter().peekable();
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
            say_err!("leasectl: warning: {}", escape(&w));
        }
    }
    (journals, printed_audit)
}
