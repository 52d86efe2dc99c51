//! What removed a lease, in the one vocabulary every surface speaks (the console's log,
//! `ls -w`, `events --follow` and `--since`, the recorder's journal): its owner, an
//! operator's force-release, a prune, the fence of an acquire, a repair, a stop of its
//! owner. Decided from the
//! home's audit file (what an operator did, and who) and, where it says nothing, from how
//! the lease was seen to go.

use serde_json::Value;

/// Who or what removed a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remover {
    /// Its owner released it (nothing on record says otherwise, and it was alive).
    Owner,
    /// `leasectl release` on the owner's behalf: by whom.
    ForOwner(String),
    /// An operator's force-release: by whom.
    Operator(String),
    /// An operator's prune: by whom.
    Prune(String),
    /// An acquire pruned it in the same write (its owner dead or its pid reused).
    Fence,
    /// Its owner was gone; nothing on record says who pruned it (Hermes' own acquire, say).
    OwnerGone,
    /// Dropped by `doctor --repair` (an invalid entry): by whom.
    Repair(String),
    /// Its owner was ended by an operator's `stop` (then released it, or it was removed): by whom.
    Stop(String),
}

impl Remover {
    /// The event's name: `released`, `force-released`, `pruned` or `removed`.
    pub fn event(&self) -> &'static str {
        match self {
            Remover::Owner | Remover::ForOwner(_) => "released",
            Remover::Operator(_) => "force-released",
            Remover::Prune(_) | Remover::Fence | Remover::OwnerGone => "pruned",
            Remover::Repair(_) => "removed",
            Remover::Stop(_) => "stopped",
        }
    }

    /// By whom or by what, where that is known.
    pub fn detail(&self) -> Option<String> {
        match self {
            Remover::Owner | Remover::OwnerGone => None,
            Remover::ForOwner(who) | Remover::Operator(who) | Remover::Prune(who) => Some(format!("by {who}")),
            Remover::Stop(who) => Some(format!("its owner ended by {who}")),
            Remover::Fence => Some("by an acquire (the fence prunes dead and recycled owners first)".into()),
            Remover::Repair(who) => Some(format!("by a repair, by {who}")),
        }
    }
}

/// `USER on HOST: COMMAND`: who acted, as an audit record names them.
pub fn actor_of(record: &Value) -> String {
    let who = record["user"].as_str().or(record["uid"].as_u64().map(|_| "uid")).unwrap_or("?");
    format!("{who} on {}: {}", record["host"].as_str().unwrap_or("?"), record["command"].as_str().unwrap_or("?"))
}

/// What one audit record says it did to the leases it names: (lease ids, remover).
pub fn of_record(record: &Value) -> (Vec<&str>, Remover) {
    let who = actor_of(record);
    let ids = |key: &str| -> Vec<&str> {
        record[key].as_array().into_iter().flatten().filter_map(|e| e["lease_id"].as_str()).collect()
    };
    match record["action"].as_str() {
        Some("repair") => (ids("dropped"), Remover::Repair(who)),
        Some("prune") => (ids("removed"), Remover::Prune(who)),
        Some("release-for-owner") => (ids("removed"), Remover::ForOwner(who)),
        Some("stop") => (ids("removed"), Remover::Stop(format!("{who}{}", how_stopped(record)))),
        _ => (ids("removed"), Remover::Operator(who)),
    }
}

/// ` (SIGTERM, ended after 0.6 s)`: the signals a stop record says it sent, and how long
/// its owner took to end.
fn how_stopped(record: &Value) -> String {
    let owners = record["stopped"].as_array().map(Vec::as_slice).unwrap_or_default();
    let each: Vec<String> = owners
        .iter()
        .map(|o| {
            let signals: Vec<&str> =
                o["signals"].as_array().into_iter().flatten().filter_map(|s| s["signal"].as_str()).collect();
            let signals = if signals.is_empty() { "no signal".to_owned() } else { signals.join(" then ") };
            match o["took"].as_f64() {
                Some(t) => format!("{signals}, ended after {}", crate::lease::stop::seconds(t)),
                None => format!("{signals}, {}", o["ending"].as_str().unwrap_or("?")),
            }
        })
        .collect();
    match each.is_empty() {
        true => String::new(),
        false => format!(" ({})", each.join("; ")),
    }
}

/// What the audit file says removed `lease_id` (the newest record naming it), if anything.
pub fn from_audit(lease_id: &str, records: &[Value]) -> Option<Remover> {
    records.iter().rev().find_map(|r| {
        let (ids, remover) = of_record(r);
        ids.contains(&lease_id).then_some(remover)
    })
}

/// What removed a lease seen to go while its owner was alive (`owner_alive`) or not: the
/// audit file's word first, then the fence (`fence_pruned`: gone in the write of an
/// acquire), then how its owner was.
pub fn remover(owner_alive: bool, lease_id: &str, records: &[Value], fence_pruned: bool) -> Remover {
    from_audit(lease_id, records).unwrap_or(match (owner_alive, fence_pruned) {
        (_, true) => Remover::Fence,
        (false, false) => Remover::OwnerGone,
        (true, false) => Remover::Owner,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(action: &str, key: &str, id: &str) -> Value {
        let mut r = serde_json::json!({"action": action, "user": "root", "host": "gw1", "command": "leasectl x",
                           key: [{"lease_id": id}]});
        if action == "stop" {
            r["stopped"] = serde_json::json!([{"signals": [{"signal": "SIGTERM", "after": 0.0}], "took": 0.25,
                                                "ending": "terminated"}]);
        }
        r
    }

    #[test]
    fn the_audit_file_names_who_and_the_feed_the_rest() {
        let records = [
            record("force-release", "removed", "a"),
            record("prune", "removed", "b"),
            record("repair", "dropped", "c"),
            record("release-for-owner", "removed", "d"),
            record("stop", "removed", "f"),
        ];
        let by = |id: &str, alive: bool, fence: bool| {
            let r = remover(alive, id, &records, fence);
            (r.event(), r.detail())
        };
        let root = Some("by root on gw1: leasectl x".to_owned());
        assert_eq!(by("a", true, false), ("force-released", root.clone()));
        assert_eq!(by("b", false, false), ("pruned", root.clone()));
        assert_eq!(by("c", true, false), ("removed", Some("by a repair, by root on gw1: leasectl x".into())));
        assert_eq!(by("d", true, false), ("released", root));
        let ended = Some("its owner ended by root on gw1: leasectl x (SIGTERM, ended after 250 ms)".to_owned());
        assert_eq!(by("f", true, false), ("stopped", ended.clone()), "released by its owner as it ended");
        assert_eq!(by("f", false, false), ("stopped", ended), "removed once its owner was dead");
        assert_eq!(by("e", true, false), ("released", None), "its owner's own release");
        assert_eq!(by("e", false, false), ("pruned", None));
        assert_eq!(by("e", false, true).0, "pruned");
        assert!(by("e", false, true).1.is_some_and(|d| d.starts_with("by an acquire")));
    }
}
