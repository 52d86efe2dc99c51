//! `leasectl events`: what happened, from the journal `events --follow --record` keeps
//! (`--since`), and as it happens (`--follow`).

use std::path::PathBuf;
use std::time::Duration;

use super::args::{EventsArgs, Format};
use super::watch::{Follow, follow, print_line};
use super::{EXIT_OK, Failure, fail};
use crate::lease::backend::RecordedEvents;
use crate::lease::home::history::{self, History};
use crate::lease::home::journal::{self, Unclaimed, claim_recorder};
use crate::lease::words::human::escape;
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
    // Over --host a recorder here keeps every host's events in one journal of its own.
    let over_hosts = stores.iter().any(|s| s.location().host().is_some());
    let format = a.format.format();
    // One header over both parts, the recorded events and the live ones.
    if format == Format::Tsv && !a.format.no_headers {
        say!("{}", super::watch::TSV_HEADER);
    }
    let unanswered = match a.since.or((!a.follow).then_some(DEFAULT_SINCE)) {
        Some(since) => print_recorded(stores, since, a, over_hosts, hints),
        None => 0,
    };
    if !a.follow {
        return Ok(if unanswered > 0 { super::EXIT_ERROR } else { EXIT_OK });
    }
    // One recorder per home, held while this one records.
    let mut _claims = Vec::new();
    if a.record {
        let mut homes: Vec<(PathBuf, bool)> = Vec::new();
        for store in stores.iter() {
            let Some(home) = journal::record_home(store.location()) else {
                return Err(fail(format!(
                    "no place to record {}: set XDG_STATE_HOME or HOME",
                    store.location().describe()
                )));
            };
            let own = store.location().is_remote() || store.location().host().is_some();
            if !homes.iter().any(|(h, _)| *h == home) {
                homes.push((home, own));
            }
        }
        for (home, own) in homes {
            if own && let Err(e) = journal::create_journal_home(&home) {
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

/// The recorded events since `since` ago, printed; what the journals cannot say is said on
/// stderr. Returns how many other hosts did not answer.
fn print_recorded(
    stores: &mut [Box<dyn LeaseStore>],
    since: Duration,
    a: &EventsArgs,
    over_hosts: bool,
    hints: &super::hints::Hints,
) -> usize {
    let format = a.format.format();
    // An etcd prefix's journal is in the recorder's state directory.
    let homes: Vec<PathBuf> = stores.iter().filter_map(|s| journal::journal_home(s.location())).collect();
    let from = now() - since.as_secs_f64();
    let mut history = history::since(&homes, from);
    let (unanswered, recorded_there) = add_other_hosts(stores, from, &mut history);
    if over_hosts {
        add_fleet_journal(stores, from, &recorded_there, &mut history);
    }
    let audited_any = history.audited_any;
    let mut printed = 0usize;
    for line in history.by_ref() {
        print_line(format, &line);
        printed += 1;
    }
    let journals = history.journals;
    for w in history.finish() {
        say_err!("leasectl: warning: {}", escape(&w));
    }
    if journals == 0 && unanswered == 0 && (audited_any || printed > 0) && !over_hosts {
        // Only the audit file spoke: what it cannot know is said, and how to record it.
        say_err!(
            "leasectl: no recorder's journal here: these are only the removals operators made (the audit \
             file); acquires, releases and owners dying are recorded by `{}` (run it as a service: the packages \
             install its unit, leasectl-recorder.service)",
            hints.command(Some(None), &["events", "--follow", "--record"])
        );
    } else if journals == 0 && !a.follow && !audited_any && printed == 0 && unanswered == 0 {
        match over_hosts {
            true => say_err!(
                "leasectl: no events recorded on these hosts: `leasectl events --follow --record` on each keeps \
                 its journal (run it there as a service: the packages install its unit, leasectl-recorder.service)"
            ),
            false => say_err!(
                "leasectl: no events recorded here: `{}` keeps the journal (run it as a service: the packages install its unit, leasectl-recorder.service)",
                hints.command(Some(None), &["events", "--follow", "--record"])
            ),
        }
    }
    unanswered
}

/// The fleet journal a recorder here kept (`events --follow --record` over `--host`): the
/// lines of the hosts asked for whose own recorder has no journal (or that did not
/// answer), so a fleet needs no recorder on each host; a host with its own is read there
/// (the same events are not said twice).
fn add_fleet_journal(
    stores: &[Box<dyn LeaseStore>],
    from: f64,
    recorded_there: &std::collections::HashSet<String>,
    history: &mut History,
) {
    let Some(home) = journal::fleet_home() else { return };
    let Some(fleet) = journal::read_since(&home, from) else { return };
    let wanted: std::collections::HashSet<&str> = stores
        .iter()
        .filter_map(|s| s.location().host())
        .map(|h| h.name.as_str())
        .filter(|h| !recorded_there.contains(*h))
        .collect();
    let events: Vec<Box<serde_json::value::RawValue>> = fleet
        .filter(|v| v["host"].as_str().is_some_and(|h| wanted.contains(h)))
        .filter_map(|v| serde_json::value::to_raw_value(&v).ok())
        .collect();
    history.add_read(events, 1, None);
}

/// Other hosts' recorded histories, each read there, asked of all at once and merged into
/// `history` with each line naming its host; a host that did not answer is said. Returns
/// how many did not, and the hosts that have a journal of their own.
fn add_other_hosts(
    stores: &mut [Box<dyn LeaseStore>],
    from: f64,
    history: &mut History,
) -> (usize, std::collections::HashSet<String>) {
    let mut unanswered = 0;
    let mut recorded_there = std::collections::HashSet::new();
    for (location, answer) in history::on_other_hosts(stores, from, Duration::ZERO) {
        let recorded = match answer {
            Ok(r) => r,
            Err(e) => {
                say_err!("leasectl: {}", escape(&e.to_string()));
                unanswered += 1;
                continue;
            }
        };
        let host = location.host().map(|h| h.name.clone());
        if recorded.journals > 0
            && let Some(h) = &host
        {
            recorded_there.insert(h.clone());
        }
        if recorded.left_out > 0 {
            // Only the newest travel: the older ones are read on the host itself.
            history.warn(format!(
                "{}: {} left out (a host sends its newest {}): read them on {} itself (`leasectl events --since`)",
                location.label(),
                crate::lease::words::human::plural(recorded.left_out, "older event", "older events"),
                RecordedEvents::MOST,
                host.as_deref().unwrap_or("the host")
            ));
        }
        for w in recorded.warnings {
            history.warn(format!("{}: {w}", location.label()));
        }
        history.add_read(recorded.events, recorded.journals, host);
    }
    (unanswered, recorded_there)
}
