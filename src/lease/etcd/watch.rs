//! The change feed of an etcd prefix: etcd's watch API, whose events are the changes
//! themselves (each put and delete, with its revision and the key's last value), not a
//! hint to re-read and compare. A broken watch is re-made from the revision after the
//! last one seen, so nothing is missed and nothing comes twice; a deleted lease is
//! named by the mark its ender left (`ended/<lease id>`), or expired when none did.

use std::collections::HashMap;
use std::time::Duration;

use etcd_client::{EventType, WatchOptions, WatchResponse};
use serde_json::Value;

use super::endpoints::{Endpoints, Resend};
use super::{EtcdConfig, Held};
use crate::lease::address::location::EtcdLocation;
use crate::lease::backend::{Ending, MAX_GATHER, RemoteChange};
use crate::lease::owners::liveness::Liveness;

/// Marks kept for deletes still to come (a force-release marks, then revokes).
const MARKS_KEPT: usize = 4096;

/// Watch the etcd prefix; every burst of changes (gathered like file events) is reported
/// in revision order. `report` gets an empty list when the watch opens or re-opens with
/// nothing missed, and [`RemoteChange::Resync`] when history was lost. It returns false
/// when nobody listens any more: the watcher then stops.
pub(crate) fn spawn(at: EtcdLocation, debounce: Duration, report: impl Fn(Vec<RemoteChange>) -> bool + Send + 'static) {
    let config = EtcdConfig::at(&at, super::DEFAULT_TTL);
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
            report(vec![RemoteChange::Resync]);
            return;
        };
        let Ok(endpoints) = rt.block_on(Endpoints::connect(&config)) else {
            report(vec![RemoteChange::Resync]);
            return;
        };
        let mut feed = Feed { config: &config, last_revision: None, marks: HashMap::new() };
        while rt.block_on(feed.watch_once(&endpoints, &report, debounce)) {
            std::thread::sleep(Duration::from_secs(1));
        }
    });
}

struct Feed<'a> {
    config: &'a EtcdConfig,
    /// The last revision reported: a re-made watch starts after it.
    last_revision: Option<i64>,
    /// `ended/` marks seen, by leasectl lease id: how and by whom.
    marks: HashMap<String, Ending>,
}

impl Feed<'_> {
    /// One watch stream, until it breaks (true: make another) or nobody listens (false).
    async fn watch_once(
        &mut self,
        endpoints: &Endpoints,
        report: &impl Fn(Vec<RemoteChange>) -> bool,
        debounce: Duration,
    ) -> bool {
        // The first watch (and the first after lost history) starts from the revision
        // etcd is at now, counted: a watch re-made after a break then resumes from there
        // (it restarted "from now" and missed, unsaid, what came while it was cut off).
        if self.last_revision.is_none() {
            let now = endpoints.run(Resend::Safe, self.config.timeout, |mut c| {
                let prefix = self.config.prefix.clone();
                async move { c.get(prefix, Some(etcd_client::GetOptions::new().with_prefix().with_count_only())).await }
            });
            match now.await.ok().and_then(|r| r.header().map(|h| h.revision())) {
                Some(revision) => self.last_revision = Some(revision),
                // Not answered: a reader re-reads (and shows etcd unreachable); tried again.
                None => return report(vec![]),
            }
        }
        let mut options = WatchOptions::new().with_prefix().with_prev_key();
        if let Some(last) = self.last_revision {
            options = options.with_start_revision(last + 1);
        }
        let setup = endpoints.run(Resend::Safe, self.config.timeout, |mut c| {
            let (prefix, options) = (self.config.prefix.clone(), options.clone());
            async move { c.watch(prefix, Some(options)).await }
        });
        // Not open: a reader re-reads (and shows etcd unreachable); tried again in a second.
        let Ok(mut stream) = setup.await else { return report(vec![]) };
        // Open: from the revision after the last one seen, nothing was missed; the first
        // time, a reader reads now and counts from there.
        if !report(vec![]) {
            return false;
        }
        loop {
            let first = match next_or_probe(&mut stream).await {
                Heard::Message(resp) => resp,
                Heard::Broken => return true,
                // Its member stopped answering (the stream stays open, and silent): move
                // to one that answers; the watch resumes after the last revision seen.
                Heard::Silent => {
                    endpoints.prefer_first_to_answer(&self.config.prefix, self.config.timeout).await;
                    return true;
                }
            };
            let mut changes = match self.changes_of(&first) {
                Some(c) => c,
                None => return self.lost_history(report),
            };
            // Gather until quiet for `debounce`, never longer than MAX_GATHER.
            let started = tokio::time::Instant::now();
            let mut broken = false;
            loop {
                let left = MAX_GATHER.saturating_sub(started.elapsed());
                if left.is_zero() {
                    break;
                }
                match tokio::time::timeout(debounce.min(left), stream.message()).await {
                    Ok(Ok(Some(resp))) => match self.changes_of(&resp) {
                        Some(more) => changes.extend(more),
                        None => {
                            if !changes.is_empty() && !report(changes) {
                                return false;
                            }
                            return self.lost_history(report);
                        }
                    },
                    Ok(_) => {
                        broken = true;
                        break;
                    }
                    Err(_) => break,
                }
            }
            if !changes.is_empty() && !report(changes) {
                return false;
            }
            if broken {
                return true;
            }
        }
    }

    /// History was compacted away, or a delete came without the key's last value: say so
    /// (a reader re-reads) and start again from now.
    fn lost_history(&mut self, report: &impl Fn(Vec<RemoteChange>) -> bool) -> bool {
        self.last_revision = None;
        report(vec![RemoteChange::Resync])
    }

    /// The changes to session keys in one watch response, in order, and a `Line` for a
    /// waiter or the cap key changing; None when history was lost (the watch was cancelled as compacted, or a delete lacks its last value).
    fn changes_of(&mut self, resp: &WatchResponse) -> Option<Vec<RemoteChange>> {
        if resp.canceled() {
            return if resp.compact_revision() > 0 { None } else { Some(vec![]) };
        }
        let sessions = self.config.sessions_prefix();
        let ended = self.config.ended_prefix();
        let (line, cap) = (self.config.waiters_prefix(), self.config.cap_key());
        // A release writes its mark in the same transaction as the deletes, after them:
        // every mark of the response is known before its deletes are named.
        for event in resp.events() {
            let Some(kv) = event.kv() else { continue };
            let key = String::from_utf8_lossy(kv.key());
            if event.event_type() == EventType::Put
                && let Some(lease_id) = key.strip_prefix(&ended)
            {
                if self.marks.len() >= MARKS_KEPT {
                    self.marks.clear();
                }
                self.marks.insert(lease_id.to_owned(), ending_of(kv.value()));
            }
        }
        let mut out = Vec::new();
        for event in resp.events() {
            let Some(kv) = event.kv() else { continue };
            let revision = kv.mod_revision();
            self.last_revision = Some(self.last_revision.map_or(revision, |r| r.max(revision)));
            let key = String::from_utf8_lossy(kv.key());
            if key.starts_with(&line) || key == cap {
                out.push(RemoteChange::Line { revision });
                continue;
            }
            if !key.starts_with(&sessions) {
                continue;
            }
            match event.event_type() {
                EventType::Put => {
                    // Not an entry: shown by a re-read as a bad key, never trusted here.
                    let Ok(held) = Held::decode(kv) else { continue };
                    let created = kv.create_revision() == kv.mod_revision();
                    out.push(RemoteChange::Put { revision, view: held.view(Liveness::Alive, None), created });
                }
                EventType::Delete => {
                    let held = event.prev_kv().and_then(|prev| Held::decode(prev).ok())?;
                    let ended = self.marks.remove(held.entry.lease_id()).unwrap_or(Ending::Expired);
                    out.push(RemoteChange::Deleted { revision, view: held.view(Liveness::Alive, None), ended });
                }
            }
        }
        Some(out)
    }
}

/// A watch quiet this long is asked for its progress: a member that stopped answering
/// (frozen, cut off) keeps its connection open and says nothing, so silence alone does
/// not tell a quiet prefix from a dead watch.
const QUIET_BEFORE_PROBE: Duration = Duration::from_secs(2);
/// A member answers a progress request in milliseconds; one that has not within this
/// is taken as not answering and the watch is re-made on another.
const PROBE_ANSWER_WITHIN: Duration = Duration::from_secs(1);

enum Heard {
    Message(WatchResponse),
    /// The stream ended or failed.
    Broken,
    /// Its member did not answer a progress request.
    Silent,
}

/// The next message on the watch; after [`QUIET_BEFORE_PROBE`] of quiet, the member is
/// asked for its progress (etcd answers with an empty response) and any message counts.
async fn next_or_probe(stream: &mut etcd_client::WatchStream) -> Heard {
    let heard = |message: Result<Option<WatchResponse>, etcd_client::Error>| match message {
        Ok(Some(resp)) => Heard::Message(resp),
        Ok(None) | Err(_) => Heard::Broken,
    };
    if let Ok(message) = tokio::time::timeout(QUIET_BEFORE_PROBE, stream.message()).await {
        return heard(message);
    }
    if stream.request_progress().await.is_err() {
        return Heard::Broken;
    }
    match tokio::time::timeout(PROBE_ANSWER_WITHIN, stream.message()).await {
        Ok(message) => heard(message),
        Err(_) => Heard::Silent,
    }
}

/// An `ended/` mark's value: `{"how": "released"|"force-released"|"stopped"|"pruned", "by": ...}`.
fn ending_of(value: &[u8]) -> Ending {
    let v: Value = serde_json::from_slice(value).unwrap_or(Value::Null);
    let by = v["by"].as_str().unwrap_or("someone").to_owned();
    match v["how"].as_str() {
        Some("force-released") => Ending::ForceReleased { by },
        Some("stopped") => Ending::Stopped { by },
        Some("pruned") => Ending::Pruned { by },
        _ => Ending::Released,
    }
}
