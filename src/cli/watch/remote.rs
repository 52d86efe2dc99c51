//! Following an etcd prefix: leases coming and going are etcd's watch events (each once,
//! in order, named as they ended); its readings add what the watch cannot see.

use serde_json::Value;

use super::{Follow, Seen, lease_events, registry_event};
use crate::lease::changes::{EventKind, LeaseEvent};
use crate::lease::{self, LeaseView};

impl Seen {
    /// The lines one reading of an etcd prefix gives. Leases coming and going are etcd's
    /// watch events after the revision said last (each once, in order: a lease acquired
    /// and released between two readings is said too); owners' liveness comes from the
    /// readings, as on files. After a watch that lost history, the reading is compared.
    pub(super) fn remote_events(
        &mut self,
        listing: lease::Listing,
        changes: Vec<lease::RemoteChange>,
        f: &Follow,
    ) -> Vec<Value> {
        let location = listing.location.clone();
        let revision = listing.remote.as_ref().map(|r| r.revision);
        let resync = changes.contains(&lease::RemoteChange::Resync);
        let from = self.said_up_to;
        let mut lines: Vec<Value> = Vec::new();
        if resync || from.is_none() {
            // From this reading on, the watch's events say the rest.
            self.said_up_to = revision.or(self.said_up_to);
            let before = self.last.clone();
            let mut compared = self.events(listing, 0, false, f);
            if resync && before.is_some() {
                lines.push(registry_event(
                    &location,
                    "gap",
                    "etcd's watch lost history (compacted, or reconnected too late): what changed meanwhile is \
                     compared between two readings",
                ));
            }
            lines.append(&mut compared);
            return lines;
        }
        let held_now: Vec<LeaseView> = listing.leases.clone().unwrap_or_default();
        // What had been said: a later comparison (after a gap) starts from it.
        let before = self.last.clone().unwrap_or_else(|| self.last_valid.clone());
        let mut said = from.unwrap_or(0);
        let mut watched: Vec<(LeaseEvent, Option<(&'static str, String)>)> = Vec::new();
        for change in changes {
            // The line and the cap are read, not said as lease events.
            if matches!(change, lease::RemoteChange::Line { .. }) || change.revision() <= said {
                continue;
            }
            said = change.revision();
            watched.push(match change {
                lease::RemoteChange::Put { view, created, .. } => {
                    let kind = if created { EventKind::Acquired } else { EventKind::Updated };
                    (LeaseEvent { kind, view }, None)
                }
                lease::RemoteChange::Deleted { view, ended, .. } => {
                    let (kind, named) = match ended {
                        lease::Ending::Released => (EventKind::Released, None),
                        lease::Ending::ForceReleased { by } => (EventKind::Released, Some(("force-released", by))),
                        lease::Ending::Stopped { by } => (EventKind::Released, Some(("stopped", by))),
                        lease::Ending::Pruned { by } => (EventKind::Pruned, Some(("pruned", by))),
                        lease::Ending::Expired => (
                            EventKind::Released,
                            Some(("expired", "its etcd lease ran out: the owner stopped renewing it".to_owned())),
                        ),
                    };
                    (LeaseEvent { kind, view }, named)
                }
                lease::RemoteChange::Resync | lease::RemoteChange::Line { .. } => continue,
            });
        }
        // Only the watch moves this on: a reading can be at a revision whose events are
        // still on their way, and they must be said when they come.
        self.said_up_to = Some(said);
        // Liveness from the reading (an owner on this host dying); leases from the watch.
        let reading_ok = listing.leases.is_ok();
        let mut compared = self.events(listing, 0, false, f);
        // The baseline is what has been said (the last baseline and the watch's events),
        // not the reading: its leases the watch has not said yet must be said after a gap
        // (a lease acquired while the follower was cut off, then history compacted).
        if reading_ok {
            let baseline = said_after(&before, &watched, &held_now);
            self.last = Some(baseline.clone());
            self.last_valid = baseline;
        }
        compared.retain(|line| {
            let kind = line["event"].as_str().unwrap_or("");
            !["acquired", "released", "pruned", "updated", "force-released"].contains(&kind)
        });
        let selected: Vec<(LeaseEvent, Option<(&'static str, String)>)> =
            watched.into_iter().filter(|(e, _)| (f.selected)(&e.view)).collect();
        let events: Vec<LeaseEvent> = selected.iter().map(|(e, _)| e.clone()).collect();
        let mut said_lines = lease_events(&location, &events, &held_now, &[]);
        for (line, (_, named)) in said_lines.iter_mut().zip(&selected) {
            if let (Some((kind, detail)), Some(map)) = (named, line.as_object_mut()) {
                map.insert("event".into(), (*kind).into());
                let detail = if *kind == "expired" { detail.clone() } else { format!("by {detail}") };
                map.insert("detail".into(), detail.into());
            }
        }
        lines.append(&mut said_lines);
        lines.append(&mut compared);
        lines
    }
}

/// The leases said to be held: `before`, and the watch's events since, in order; each
/// with what the reading knows of it now (its owner's liveness).
fn said_after(
    before: &[LeaseView],
    watched: &[(LeaseEvent, Option<(&'static str, String)>)],
    reading: &[LeaseView],
) -> Vec<LeaseView> {
    let mut held: Vec<LeaseView> = before.to_vec();
    for (event, _) in watched {
        let id = event.view.entry.lease_id();
        held.retain(|v| v.entry.lease_id() != id);
        if matches!(event.kind, EventKind::Acquired | EventKind::Updated) {
            held.push(event.view.clone());
        }
    }
    for v in &mut held {
        if let Some(now) = reading.iter().find(|r| r.entry.lease_id() == v.entry.lease_id()) {
            v.clone_from(now);
        }
    }
    held
}
