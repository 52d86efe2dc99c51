//! What happened since a time, recorded: each home's journal (kept by `events --follow
//! --record`) and the removals its audit file holds that no recorder saw, merged in time
//! order a line at a time. `events --since` prints it here; `serve --stdio` sends a
//! home's for `events --since` over `--host`, where it is merged with other hosts'.

use std::collections::HashSet;
use std::path::PathBuf;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::lease::address::location::Location;
use crate::lease::backend::{LeaseStore, RecordedEvents};
use crate::lease::error::Error;
use crate::lease::home::journal::{self, Journal};

/// How many registries on other hosts are asked for their history at once: a host may
/// have thousands of profiles (a thread each while asked).
const ASKED_AT_ONCE: usize = 16;

/// Other hosts' recorded histories from `from` on, each read there, asked a few at a time
/// (stores whose journal is read here are skipped). A host whose session is still being
/// opened is asked again for up to `patience`.
pub(crate) fn on_other_hosts(
    stores: &mut [Box<dyn LeaseStore>],
    from: f64,
    patience: std::time::Duration,
) -> Vec<(Location, Result<RecordedEvents, Error>)> {
    let mut answers = Vec::new();
    // Only a store on another host answers: no thread is started for any other.
    let mut remote: Vec<&mut Box<dyn LeaseStore>> =
        stores.iter_mut().filter(|s| s.location().host().is_some()).collect();
    for some in remote.chunks_mut(ASKED_AT_ONCE) {
        answers.extend(std::thread::scope(|scope| {
            let asked: Vec<_> = some
                .iter_mut()
                .map(|store| {
                    scope.spawn(move || {
                        let location = store.location().clone();
                        let answer = until_connected(patience, || store.recorded_since(from).transpose());
                        answer.transpose().map(|a| (location, a))
                    })
                })
                .collect();
            asked.into_iter().filter_map(|t| t.join().ok().flatten()).collect::<Vec<_>>()
        }));
    }
    answers
}

/// `ask`, again while its host's session is still being opened (a subscription of the
/// console's own opens it), for at most `patience`.
pub(crate) fn until_connected<T>(
    patience: std::time::Duration,
    mut ask: impl FnMut() -> Result<T, Error>,
) -> Result<T, Error> {
    let deadline = std::time::Instant::now() + patience;
    loop {
        match ask() {
            Err(Error::Connecting { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            other => return other,
        }
    }
}

/// A source of events, each in time order.
enum Source {
    Journal(Box<Journal>),
    /// Read elsewhere (another host's, sent as JSON text): parsed one at a time, each
    /// given `host`.
    Read {
        events: std::vec::IntoIter<Box<RawValue>>,
        host: Option<String>,
    },
}

impl Source {
    fn next(&mut self) -> Option<Value> {
        match self {
            Source::Journal(j) => j.next(),
            Source::Read { events, host } => events.find_map(|raw| {
                let mut v: Value = serde_json::from_str(raw.get()).ok()?;
                if let (Some(fields), Some(host)) = (v.as_object_mut(), host.as_ref()) {
                    fields.insert("host".into(), host.clone().into());
                }
                Some(v)
            }),
        }
    }
}

/// The merged history; iterate it, then [`History::finish`] for what could not be read.
pub(crate) struct History {
    heads: Vec<(Source, Option<Value>)>,
    audited: std::iter::Peekable<std::vec::IntoIter<Value>>,
    warnings: Vec<String>,
    /// How many journals there were (none: no recorder ever ran there).
    pub journals: usize,
    /// Whether the audit files added any removal no recorder saw.
    pub audited_any: bool,
}

/// The history of `homes` from `from` (epoch seconds) on.
pub(crate) fn since(homes: &[PathBuf], from: f64) -> History {
    let mut warnings = Vec::new();
    let audited = unrecorded_removals(homes, from, &mut warnings);
    let mut history = History {
        heads: Vec::new(),
        audited_any: !audited.is_empty(),
        audited: audited.into_iter().peekable(),
        warnings,
        journals: 0,
    };
    for home in homes {
        if let Some(mut journal) = journal::read_since(home, from) {
            let first = journal.next();
            history.heads.push((Source::Journal(Box::new(journal)), first));
            history.journals += 1;
        }
    }
    history
}

impl History {
    /// Merge in events read elsewhere (in time order, as JSON text), each named with
    /// `host`, and count their journals.
    pub(crate) fn add_read(&mut self, events: Vec<Box<RawValue>>, journals: usize, host: Option<String>) {
        self.journals += journals;
        let mut source = Source::Read { events: events.into_iter(), host };
        let first = source.next();
        self.heads.push((source, first));
    }

    /// Say what could not be read (another host's, say), with the rest.
    pub(crate) fn warn(&mut self, warning: String) {
        self.warnings.push(warning);
    }

    /// The warnings (files skipped, unreadable lines, each naming its file).
    pub(crate) fn finish(self) -> Vec<String> {
        let mut warnings = self.warnings;
        for (source, _) in self.heads {
            if let Source::Journal(j) = source {
                warnings.extend(j.finish());
            }
        }
        warnings
    }
}

impl Iterator for History {
    type Item = Value;

    fn next(&mut self) -> Option<Value> {
        let next = self
            .heads
            .iter()
            .enumerate()
            .filter_map(|(i, (_, head))| head.as_ref().map(|v| (i, ts(v))))
            .min_by(|x, y| x.1.total_cmp(&y.1));
        if let Some(a) = self.audited.peek()
            && next.is_none_or(|(_, t)| ts(a) <= t)
        {
            return self.audited.next();
        }
        let (i, _) = next?;
        let (source, head) = &mut self.heads[i];
        let line = head.take();
        *head = source.next();
        line
    }
}

fn ts(v: &Value) -> f64 {
    v["ts"].as_f64().unwrap_or(0.0)
}

/// The removals the homes' audit files hold from `from` on that no recorder saw (those
/// a recorder saw are shown once, from its journal), in time order.
fn unrecorded_removals(homes: &[PathBuf], from: f64, warnings: &mut Vec<String>) -> Vec<Value> {
    let mut audited: Vec<Value> = Vec::new();
    for home in homes {
        let (events, unread) = journal::audit_since(home, from);
        audited.extend(events);
        warnings.extend(unread);
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
