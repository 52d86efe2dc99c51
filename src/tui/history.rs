//! The console's event log before it opened: what the recorders (`events --follow
//! --record`) saw in the last day, read from this host's journals at once and from other
//! hosts' (`--host`), read there, as they answer.

use std::path::PathBuf;
use std::time::Duration;

use super::event;
use super::state::{App, HISTORY_EVENTS};
use crate::lease::Location;
use crate::lease::home::history::until_connected;

/// How far back the event log starts, from the recorder's journals.
pub(super) const HISTORY: f64 = 24.0 * 3600.0;

/// Put what the recorder (`events --follow --record`) saw in the last day at the top of
/// the event log, marked as from before this console opened.
pub fn load_history(app: &mut App, locations: &[Location], discover_root: Option<&std::path::Path>) {
    let history = read_history(&history_homes(locations, discover_root), app.now);
    app.prepend_history(history);
}

/// The homes whose journals hold the console's history: the locations', and every
/// profile's under `discover_root`.
pub fn history_homes(locations: &[Location], discover_root: Option<&std::path::Path>) -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = locations.iter().filter_map(crate::lease::home::journal::journal_home).collect();
    if let Some(root) = discover_root {
        homes.extend(crate::lease::home::paths::all_registries(root).into_iter().map(|r| r.into_place().home));
    }
    homes.sort();
    homes.dedup();
    homes
}

/// The newest [`HISTORY_EVENTS`] recorded in `homes`' journals in the day before `now`.
pub fn read_history(homes: &[PathBuf], now: f64) -> event::History {
    let from = now - HISTORY;
    let mut history = event::History::default();
    // The newest HISTORY_EVENTS of each journal, read a line at a time (bounded memory).
    let mut past: Vec<serde_json::Value> = Vec::new();
    // Only homes with a logs/ directory can have a journal: one lstat each, where reading
    // each (its path checked for planted links) cost 15 s for 100,000 profiles.
    for home in homes.iter().filter(|h| std::fs::symlink_metadata(h.join("logs")).is_ok()) {
        let Some(mut journal) = crate::lease::home::journal::read_since(home, from) else { continue };
        let mut newest = std::collections::VecDeque::with_capacity(HISTORY_EVENTS);
        for v in journal.by_ref() {
            if newest.len() == HISTORY_EVENTS {
                newest.pop_front();
            }
            newest.push_back(v);
        }
        past.extend(newest);
        history.warnings.extend(journal.finish());
    }
    history.lines = newest_lines(past, now);
    history
}

/// The newest [`HISTORY_EVENTS`] of `past`, in time order, as log lines.
fn newest_lines(mut past: Vec<serde_json::Value>, now: f64) -> Vec<event::HistoryLine> {
    past.sort_by(|a, b| a["ts"].as_f64().unwrap_or(0.0).total_cmp(&b["ts"].as_f64().unwrap_or(0.0)));
    let skip = past.len().saturating_sub(HISTORY_EVENTS);
    past.iter()
        .skip(skip)
        .map(|v| event::HistoryLine {
            at: v["ts"].as_f64().unwrap_or(now),
            profile: v["profile"].as_str().unwrap_or("?").to_owned(),
            text: crate::lease::home::journal::describe(v),
        })
        .collect()
}

/// How long the history thread waits for a host whose session is still being opened.
const HOST_HISTORY_WAIT: Duration = Duration::from_secs(20);

/// What the recorders of the hosts in `locations` (`--host`) saw in the day before `now`,
/// read there (with `every_profile`, each profile the host reports), asked of all at once;
/// each line named `host:profile`. None without hosts.
pub fn hosts_history(locations: &[Location], every_profile: bool, now: f64) -> Option<event::History> {
    let mut asked: Vec<Location> = locations.iter().filter(|l| l.host().is_some()).cloned().collect();
    if asked.is_empty() {
        return None;
    }
    if every_profile {
        let mut hosts: Vec<_> = asked.iter().filter_map(|l| l.host().cloned()).collect();
        hosts.sort_by(|a, b| a.name.cmp(&b.name));
        hosts.dedup();
        for host in hosts {
            let profiles =
                until_connected(HOST_HISTORY_WAIT, || crate::lease::host_registries(&host, true)).unwrap_or_default();
            asked.extend(profiles.into_iter().map(|profile| Location::on_host(host.clone(), profile)));
        }
        asked.sort_by_key(Location::label);
        asked.dedup();
    }
    let mut history = event::History::default();
    let mut stores = Vec::new();
    for location in &asked {
        match crate::lease::open(location, crate::lease::StoreOptions::default()) {
            Ok(store) => stores.push(store),
            Err(e) => history.warnings.push(format!("{}: no recorded history: {e}", location.label())),
        }
    }
    let answers = crate::lease::home::history::on_other_hosts(&mut stores, now - HISTORY, HOST_HISTORY_WAIT);
    let mut past = Vec::new();
    for (location, answer) in answers {
        match answer {
            Ok(recorded) => {
                history.warnings.extend(recorded.warnings.iter().map(|w| format!("{}: {w}", location.label())));
                // The newest only: each parsed, then given its tab's name.
                let newest = recorded.events.len().saturating_sub(HISTORY_EVENTS);
                past.extend(recorded.events[newest..].iter().filter_map(|raw| {
                    let mut v: serde_json::Value = serde_json::from_str(raw.get()).ok()?;
                    v.as_object_mut()?.insert("profile".into(), location.label().into());
                    Some(v)
                }));
            }
            Err(e) => history.warnings.push(format!("{}: no recorded history: {e}", location.label())),
        }
    }
    history.lines = newest_lines(past, now);
    Some(history)
}
