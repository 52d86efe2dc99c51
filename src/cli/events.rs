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

pub fn events(stores: &mut [Box<dyn LeaseStore>], a: &EventsArgs, idle: Option<Duration>) -> Result<i32, Failure> {
    let format = a.format.format();
    let since = a.since.or((!a.follow).then_some(DEFAULT_SINCE));
    if let Some(since) = since {
        let from = now() - since.as_secs_f64();
        let mut past: Vec<Value> = Vec::new();
        let mut journals = 0;
        for store in stores.iter() {
            let Some(reg) = store.location().registry() else { continue };
            if let Some(events) = crate::lease::journal::read_since(&reg.home, from) {
                journals += 1;
                past.extend(events);
            }
        }
        past.sort_by(|x, y| x["ts"].as_f64().unwrap_or(0.0).total_cmp(&y["ts"].as_f64().unwrap_or(0.0)));
        for line in &past {
            print_line(format, line);
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
    let all = |_: &crate::lease::LeaseView| true;
    let f = Follow {
        format,
        no_headers: a.format.no_headers,
        present: false,
        selected: &all,
        record: a.record,
        metrics_file: a.metrics_file.clone(),
        idle,
    };
    follow(stores, &f)
}
