//! The fence on etcd: acquire, release, force-release. "Session free and a slot
//! free" is compared and written in one transaction; the fencing token is the
//! revision of the transaction that won. Every doubt is a refusal, never a grant.

use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse};
use serde_json::{Map, Value};

use super::queue::{self, Ticket};
use super::{Etcd, EtcdError, Held, cap_of, entry_from_map, hostname};
use crate::lease::address::ids;
use crate::lease::backend::Waiter;
use crate::lease::clock::now;
use crate::lease::error::{Error, Guarded, LiveOwners, Missing};
use crate::lease::format::entry::{Entry, float_value, live_id_string};
use crate::lease::grant::AcquireRequest;
use crate::lease::grant::{Grant, Released, RemoteGrant};
use crate::lease::owners::liveness::{Liveness, Prober};
use crate::lease::view::{ForceOptions, LeaseView, Removal, Target, may_be_alive};
use crate::lease::words::refusal::{Reason, Refusal, capacity_message, not_owned_message_with, oldest_holder};

/// A lost race (another client took the session or the slot first) is retried on a
/// fresh read at most this many times; then the acquire is refused.
const MAX_ATTEMPTS: usize = 16;
/// Transactions sent without an answer (each followed by a reading) before etcd is
/// called unavailable: a leader election loses one or two.
const MAX_UNKNOWN: u32 = 3;

/// What the transaction needs from the request.
struct Attempt<'a> {
    etcd: &'a Etcd,
    req: &'a AcquireRequest,
    lease_id: &'a str,
    etcd_lease_id: i64,
    host: &'a str,
    at: f64,
    process_start_time: Option<f64>,
    /// The requester's place in line (`--wait`), if it stands in one.
    ticket: Option<&'a Ticket>,
    /// Transactions of this attempt whose answer was lost.
    unknown: std::cell::Cell<u32>,
}

/// Acquire a session on etcd for `req.owner_pid` on this host. The new etcd lease has
/// the configured TTL and is not renewed here: `keepalive` does that for `hold`/`run`.
/// Whoever waits in line for the session (or a slot) comes first.
pub fn acquire(etcd: &Etcd, req: &AcquireRequest) -> Result<Grant, Refusal> {
    acquire_in_line(etcd, req, None)
}

/// [`acquire`] for a requester standing in line at `ticket`: only those before it come first.
pub fn acquire_in_line(etcd: &Etcd, req: &AcquireRequest, ticket: Option<&Ticket>) -> Result<Grant, Refusal> {
    let lease_id = ids::lease_id();
    let session_key = etcd.config.session_key(&req.session_id);
    let granted_at = Instant::now();
    if crate::lease::format::entry::py_is_blank(&req.session_id) {
        return Ok(Grant { lease_id, recorded: false, entry: None, replaced: None, pruned: vec![], remote: None });
    }
    let host = hostname();
    let mut attempt = Attempt {
        etcd,
        req,
        lease_id: &lease_id,
        etcd_lease_id: 0,
        host: &host,
        at: now(),
        process_start_time: Prober::new().start_time(req.owner_pid),
        ticket,
        unknown: std::cell::Cell::new(0),
    };
    // A waiter asks again on every change: most find the session still held or someone
    // before them. Said from a reading alone, such a refusal costs no lease grant and
    // revoke (two writes through etcd's log each, for each of 100 waiters at every
    // hand-over).
    if ticket.is_some()
        && let Some(refusal) = attempt.refusal_now(&session_key)
    {
        return Err(refusal);
    }
    let ttl_secs = etcd.config.ttl.as_secs() as i64;
    let granted = etcd
        .call("grant a lease", |mut c| async move { c.lease_grant(ttl_secs, None).await })
        .map_err(|e| unavailable(etcd, &e))?;
    if granted.id() == 0 || granted.ttl() <= 0 || !granted.error().is_empty() {
        return Err(unavailable(
            etcd,
            &EtcdError::Unavailable(format!("etcd refused the lease grant: {:?}", granted.error())),
        ));
    }
    attempt.etcd_lease_id = granted.id();
    let result = attempt.run();
    match result {
        Ok((entry, replaced, fencing_token, slot)) => Ok(Grant {
            lease_id,
            recorded: true,
            entry: Some(entry),
            replaced,
            pruned: vec![],
            remote: Some(RemoteGrant {
                host,
                session_key,
                etcd_lease_id: granted.id(),
                ttl: Duration::from_secs(granted.ttl() as u64),
                granted_at,
                fencing_token,
                slot,
            }),
        }),
        Err(refusal) => {
            // Whatever happened (even a transaction whose answer was lost), the keys of
            // this lease must not outlive the refusal: revoke it, and if that fails too,
            // nobody renews it and it ends within the TTL.
            let _ = etcd.revoke(granted.id());
            Err(refusal)
        }
    }
}

type Won = (Entry, Option<String>, i64, Option<u64>);

/// One reading of what an acquire decides on, at one revision.
struct Reading {
    held: Option<Held>,
    /// Used slot indexes.
    taken: Vec<u64>,
    /// Who waits in line, in arrival order.
    line: Vec<Waiter>,
    /// The `cap` key's cap.
    cap: Option<u64>,
}

impl Attempt<'_> {
    fn run(&self) -> Result<Won, Refusal> {
        let cfg = &self.etcd.config;
        let session_key = cfg.session_key(&self.req.session_id);
        for _ in 0..MAX_ATTEMPTS {
            let reading = self.read(&session_key)?;
            let outcome = match &reading.held {
                // A transaction of ours whose answer was lost did land: the grant is ours.
                Some(holder) if holder.etcd_lease_id == self.etcd_lease_id => {
                    return Ok((holder.entry.clone(), None, holder.fencing_token, holder.slot));
                }
                Some(holder) if self.is_same_writer(holder) => self.replace(&session_key, holder, &reading)?,
                Some(holder) => return Err(self.not_owned(holder)),
                None => {
                    let slots_ahead = self.ahead(&reading)?;
                    self.take_new(&session_key, &reading, slots_ahead)?
                }
            };
            if let Some(won) = outcome {
                return Ok(won);
            }
            // Lost a race: read again and decide on what is there now.
        }
        // Not a full cap (that is read and refused above) nor a held session: etcd
        // keeps answering differently than it did a moment ago, so nothing is proven.
        Err(Refusal {
            reason: Reason::SessionCoordinationUnavailable,
            message: format!(
                "Lost the race for session {} or a free slot {MAX_ATTEMPTS} times in a row on {}: other \
                 clients keep taking them, so leasectl cannot prove a slot for this session. Nothing was \
                 granted; try again in a moment.",
                self.req.session_id,
                cfg.location()
            ),
            holder: None,
        })
    }

    /// The refusal one reading already proves (held by another, someone before this
    /// request in line, every slot taken), without a lease of its own.
    fn refusal_now(&self, session_key: &str) -> Option<Refusal> {
        let reading = match self.read(session_key) {
            Ok(r) => r,
            Err(refusal) => return Some(refusal),
        };
        match &reading.held {
            Some(holder) if self.is_same_writer(holder) => None,
            Some(holder) => Some(self.not_owned(holder)),
            None => match self.ahead(&reading) {
                Err(refusal) => Some(refusal),
                Ok(slots_ahead) => self.pick_slot(&reading.taken, None, slots_ahead).err(),
            },
        }
    }

    /// The session key (decoded), the used slot indexes, the line and the cap, at one revision.
    fn read(&self, session_key: &str) -> Result<Reading, Refusal> {
        let cfg = &self.etcd.config;
        let (key, slots, cap_key) = (session_key.to_owned(), cfg.slots_prefix(), cfg.cap_key());
        let resp = self
            .etcd
            .call("read the session", |mut c| {
                let read = Txn::new().and_then([
                    TxnOp::get(key.clone(), None),
                    TxnOp::get(slots.clone(), Some(GetOptions::new().with_prefix().with_keys_only())),
                    queue::read_op(self.etcd),
                    TxnOp::get(cap_key.clone(), None),
                ]);
                async move { c.txn(read).await }
            })
            .map_err(|e| unavailable(self.etcd, &e))?;
        let mut gets = resp.op_responses().into_iter().filter_map(|r| match r {
            TxnOpResponse::Get(g) => Some(g),
            _ => None,
        });
        let (Some(session), Some(slot_keys), Some(waiters), Some(cap)) =
            (gets.next(), gets.next(), gets.next(), gets.next())
        else {
            return Err(unavailable(
                self.etcd,
                &EtcdError::Unavailable("etcd answered a read without its ranges".into()),
            ));
        };
        let held = match session.kvs().first() {
            Some(kv) => Some(Held::decode(kv).map_err(|e| unavailable(self.etcd, &e))?),
            None => None,
        };
        let prefix = cfg.slots_prefix();
        let taken = slot_keys
            .kvs()
            .iter()
            .filter_map(|kv| String::from_utf8_lossy(kv.key()).strip_prefix(&prefix)?.parse::<u64>().ok())
            .collect();
        Ok(Reading { held, taken, line: queue::waiters_of(waiters.kvs()), cap: cap_of(cap.kvs()) })
    }

    /// Those in line before this request for the same free session refuse it; those
    /// before it for slots are counted (the free slots are theirs first).
    fn ahead(&self, reading: &Reading) -> Result<usize, Refusal> {
        let taken = &reading.taken;
        let free_under = |cap: u64| (taken.iter().filter(|s| **s < cap).count() as u64) < cap;
        let mine = self.ticket.filter(|t| t.session_id == self.req.session_id).map(|t| t.position);
        let mut prober = Prober::new();
        let ahead = queue::ahead(&reading.line, mine, &self.req.session_id, &mut prober, free_under);
        if let Some(first) = ahead.for_session {
            let before = reading
                .line
                .iter()
                .filter(|w| w.session_id == self.req.session_id && mine.is_none_or(|m| w.position < m))
                .count();
            return Err(self.queued(first, before));
        }
        if self.req.cap.is_none() || ahead.for_slots.is_empty() {
            return Ok(0);
        }
        // A waiter whose session is held waits for it, not for a slot. etcd takes at most
        // 128 operations in one transaction (its default): the first 128 are asked.
        let asked: Vec<&str> = ahead.for_slots.iter().take(128).map(|w| w.session_id.as_str()).collect();
        let held = queue::held_sessions(self.etcd, &asked).map_err(|e| unavailable(self.etcd, &e))?;
        Ok(held.iter().filter(|h| !**h).count())
    }

    /// The session is free, but promised to those waiting for it who came first.
    fn queued(&self, first: &Waiter, before: usize) -> Refusal {
        Refusal {
            reason: Reason::SessionNotOwned,
            message: format!(
                "Session {} is free, but {} for it came first (the first: pid {} on host {}, waiting for {}): it \
                 is theirs in arrival order. Nothing was granted; with --wait this request stands in line after them.",
                crate::lease::words::human::escape(&self.req.session_id),
                crate::lease::words::human::plural(before, "client waiting", "clients waiting"),
                first.pid,
                crate::lease::words::human::escape(&first.host),
                crate::lease::words::human::duration(self.at - first.since),
            ),
            holder: None,
        }
    }

    /// The same writer re-acquiring: same host, same owner pid, same non-empty live session id.
    fn is_same_writer(&self, holder: &Held) -> bool {
        let incoming = live_id_string(self.req.metadata.get("live_session_id"));
        let held = holder.entry.live_session_id();
        holder.host == self.host
            && holder.entry.pid() == self.req.owner_pid
            && !held.is_empty()
            && !incoming.is_empty()
            && held == incoming
    }

    fn entry(&self, slot: Option<u64>) -> Result<(Entry, String), Refusal> {
        let mut raw = Map::new();
        raw.insert("lease_id".into(), Value::String(self.lease_id.to_owned()));
        raw.insert("session_id".into(), Value::String(self.req.session_id.clone()));
        raw.insert("surface".into(), self.req.surface.clone().map(Value::String).unwrap_or(Value::Null));
        raw.insert("pid".into(), Value::from(self.req.owner_pid));
        raw.insert("host".into(), Value::String(self.host.to_owned()));
        raw.insert("process_start_time".into(), float_value(self.process_start_time));
        raw.insert("started_at".into(), float_value(Some(self.at)));
        raw.insert("updated_at".into(), float_value(Some(self.at)));
        if self.req.track_liveness {
            raw.insert("track_liveness".into(), Value::Bool(true));
        }
        if !self.req.metadata.is_empty() {
            raw.insert("metadata".into(), Value::Object(self.req.metadata.clone()));
        }
        raw.insert("etcd_lease_id".into(), Value::from(self.etcd_lease_id));
        raw.insert("slot".into(), slot.map(Value::from).unwrap_or(Value::Null));
        // What cap this holder was granted under: etcd keeps no config.yaml to show it from.
        if let Some(cap) = self.req.cap {
            raw.insert("cap".into(), Value::from(cap));
        }
        let text = crate::lease::format::pyjson::to_string(&Value::Object(raw.clone()));
        let entry = entry_from_map(raw).map_err(|e| Refusal {
            reason: Reason::SessionCoordinationUnavailable,
            message: format!("cannot build the entry for session {}: {e}", self.req.session_id),
            holder: None,
        })?;
        Ok((entry, text))
    }

    /// A free slot, picked at random so racing clients do not all fight for slot 0. The
    /// first `ahead` free slots are promised to those who came first.
    fn pick_slot(&self, taken: &[u64], keep: Option<u64>, ahead: usize) -> Result<Option<u64>, Refusal> {
        let Some(cap) = self.req.cap else { return Ok(None) };
        if let Some(k) = keep.filter(|k| *k < cap) {
            return Ok(Some(k));
        }
        let free: Vec<u64> = (0..cap.min(1_000_000)).filter(|i| !taken.contains(i)).take(4096).collect();
        if free.len() <= ahead {
            return Err(self.at_capacity(cap, free.len(), ahead));
        }
        // Without randomness every client starts at the first free slot: slower races, same result.
        let r = ids::random_u64().unwrap_or(0);
        Ok(Some(free[(r % free.len() as u64) as usize]))
    }

    /// The session is free: compare "session absent (and slot absent)", put both.
    fn take_new(&self, session_key: &str, reading: &Reading, slots_ahead: usize) -> Result<Option<Won>, Refusal> {
        let slot = self.pick_slot(&reading.taken, None, slots_ahead)?;
        let (entry, text) = self.entry(slot)?;
        let mut when = vec![Compare::create_revision(session_key, CompareOp::Equal, 0)];
        let mut then = vec![TxnOp::put(session_key, text, Some(self.put_opts()))];
        if let Some(s) = slot {
            let slot_key = self.etcd.config.slot_key(s);
            when.push(Compare::create_revision(slot_key.clone(), CompareOp::Equal, 0));
            then.push(TxnOp::put(slot_key, session_key, Some(self.put_opts())));
        }
        self.with_line_and_cap(&mut then, reading);
        self.commit(when, then, entry, None, slot)
    }

    /// What a won transaction also does: take this request out of the line (watchers see
    /// it leave as it is served), and write the prefix's cap when it asked another.
    fn with_line_and_cap(&self, then: &mut Vec<TxnOp>, reading: &Reading) {
        if let Some(ticket) = self.ticket {
            then.push(TxnOp::delete(ticket.key.clone(), None));
        }
        if let Some(cap) = self.req.cap.filter(|c| reading.cap != Some(*c)) {
            then.push(TxnOp::put(self.etcd.config.cap_key(), cap.to_string(), None));
        }
    }

    /// The same writer: replace its own entry (new lease), keeping its slot when it fits the cap.
    fn replace(&self, session_key: &str, holder: &Held, reading: &Reading) -> Result<Option<Won>, Refusal> {
        let slot = self.pick_slot(&reading.taken, holder.slot, 0)?;
        let (entry, text) = self.entry(slot)?;
        let mut when = vec![Compare::mod_revision(session_key, CompareOp::Equal, holder.fencing_token)];
        let mut then = vec![TxnOp::put(session_key, text, Some(self.put_opts()))];
        if let Some(s) = slot {
            let slot_key = self.etcd.config.slot_key(s);
            if holder.slot != Some(s) {
                when.push(Compare::create_revision(slot_key.clone(), CompareOp::Equal, 0));
            }
            then.push(TxnOp::put(slot_key, session_key, Some(self.put_opts())));
        }
        if let Some(old) = holder.slot.filter(|old| Some(*old) != slot) {
            let old_key = self.etcd.config.slot_key(old);
            when.push(Compare::lease(old_key.clone(), CompareOp::Equal, holder.etcd_lease_id));
            then.push(TxnOp::delete(old_key, None));
        }
        self.with_line_and_cap(&mut then, reading);
        let won = self.commit(when, then, entry, Some(holder.entry.lease_id().to_owned()), slot)?;
        if won.is_some() {
            // The old lease holds no key now; revoking it tells its keep-alive loop.
            let _ = self.etcd.revoke(holder.etcd_lease_id);
        }
        Ok(won)
    }

    fn put_opts(&self) -> PutOptions {
        PutOptions::new().with_lease(self.etcd_lease_id)
    }

    fn commit(
        &self,
        when: Vec<Compare>,
        then: Vec<TxnOp>,
        entry: Entry,
        replaced: Option<String>,
        slot: Option<u64>,
    ) -> Result<Option<Won>, Refusal> {
        let txn = Txn::new().when(when).and_then(then);
        let sent = self.etcd.call_once("write the session", |mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        });
        let resp = match sent {
            // Sent, not answered (a leader lost mid-way): the next reading tells. The
            // transaction compares before it writes, so it lands once at most, and a
            // landed one is found holding this lease.
            Err(EtcdError::OutcomeUnknown(why)) => {
                let unknown = self.unknown.get() + 1;
                self.unknown.set(unknown);
                if unknown > MAX_UNKNOWN {
                    return Err(unavailable(self.etcd, &EtcdError::Unavailable(why)));
                }
                return Ok(None);
            }
            other => other.map_err(|e| unavailable(self.etcd, &e))?,
        };
        if !resp.succeeded() {
            return Ok(None);
        }
        let Some(revision) = resp.header().map(|h| h.revision()).filter(|r| *r > 0) else {
            return Err(unavailable(
                self.etcd,
                &EtcdError::Unavailable("etcd confirmed the transaction without a revision".into()),
            ));
        };
        let mut fields = entry.fields();
        fields.insert("fencing_token".into(), Value::from(revision));
        let entry = entry_from_map(fields).unwrap_or(entry);
        Ok(Some((entry, replaced, revision, slot)))
    }

    fn not_owned(&self, holder: &Held) -> Refusal {
        // A waiter in line asks again on every change and its refusal is not shown (the
        // holder was named when it joined): no TTL request for it.
        let ttl = match self.ticket {
            Some(_) => None,
            None => self
                .etcd
                .ttls(&[holder.etcd_lease_id])
                .ok()
                .and_then(|m| m.get(&holder.etcd_lease_id).copied().flatten()),
        };
        Refusal {
            reason: Reason::SessionNotOwned,
            message: not_owned_message(&self.req.session_id, holder, ttl, self.at),
            holder: Some(Box::new(holder.entry.clone())),
        }
    }

    /// Every slot held, or the free ones (`free`) promised to `ahead` who came first.
    fn at_capacity(&self, cap: u64, free: usize, ahead: usize) -> Refusal {
        let entries: Vec<Entry> = match self.etcd.list() {
            Ok(l) => l.leases.into_iter().filter(|h| h.slot.is_some_and(|s| s < cap)).map(|h| h.entry).collect(),
            Err(_) => vec![],
        };
        let oldest = oldest_holder(&entries).cloned();
        let why = if free == 0 {
            format!("every slot/0..{} key under {} is held", cap.saturating_sub(1), self.etcd.config.prefix)
        } else {
            format!(
                "{} free under {}, promised to {} in line before this request",
                crate::lease::words::human::plural(free, "slot is", "slots are"),
                self.etcd.config.prefix,
                crate::lease::words::human::plural(ahead, "client waiting", "clients waiting")
            )
        };
        Refusal {
            reason: Reason::MaxConcurrentSessions,
            message: format!("{} ({why})", capacity_message(entries.len(), cap, &entries, self.at)),
            holder: oldest.map(Box::new),
        }
    }
}

/// `SESSION_NOT_OWNED` across hosts: Hermes' message, naming the host and how long
/// the holder's etcd lease lasts without renewal.
pub fn not_owned_message(session_id: &str, holder: &Held, ttl_left: Option<i64>, now: f64) -> String {
    let ttl = ttl_left.map(|t| format!(", etcd lease ends {t}s after its last renewal")).unwrap_or_default();
    not_owned_message_with(session_id, &holder.entry, &format!(" on host {}", holder.host), &ttl, now)
}

/// Why etcd could not be used, and that nothing was granted.
pub fn unavailable_message(etcd: &Etcd, err: &EtcdError) -> String {
    // Not an outage: trying again changes nothing until the settings named are fixed.
    if let EtcdError::Refused(why) = err {
        return format!("etcd ({}) refused: {why}. Nothing was granted.", etcd.config.location());
    }
    format!(
        "leasectl could not use etcd ({}), so it cannot prove this session has no other live owner: {err}. \
         Nothing was granted. Check that etcd is reachable and healthy, and try again.",
        etcd.config.location()
    )
}

fn unavailable(etcd: &Etcd, err: &EtcdError) -> Refusal {
    Refusal { reason: Reason::SessionCoordinationUnavailable, message: unavailable_message(etcd, err), holder: None }
}

/// The owner's release of a lease found by its leasectl lease id. Idempotent.
pub fn release(etcd: &Etcd, lease_id: &str) -> Result<Released, EtcdError> {
    let listing = etcd.list()?;
    match listing.leases.iter().find(|h| h.entry.lease_id() == lease_id) {
        Some(h) => release_held(etcd, h),
        None => Ok(Released { removed: false, pruned: vec![], lease_id: None }),
    }
}

/// Delete the session key and its slot key in one transaction guarded by the
/// lease (so a successor's keys are never touched), then revoke the lease.
pub fn release_held(etcd: &Etcd, held: &Held) -> Result<Released, EtcdError> {
    release_keys(etcd, &held.key, held.entry.lease_id(), held.slot, held.etcd_lease_id)
}

/// [`release_held`] for a grant this process holds.
pub fn release_grant(etcd: &Etcd, grant: &Grant) -> Result<Released, EtcdError> {
    match &grant.remote {
        Some(r) if grant.recorded => release_keys(etcd, &r.session_key, &grant.lease_id, r.slot, r.etcd_lease_id),
        _ => Ok(Released { removed: false, pruned: vec![], lease_id: None }),
    }
}

fn release_keys(
    etcd: &Etcd,
    session_key: &str,
    lease_id: &str,
    slot: Option<u64>,
    etcd_lease_id: i64,
) -> Result<Released, EtcdError> {
    let mut when = vec![Compare::lease(session_key, CompareOp::Equal, etcd_lease_id)];
    // The mark says "released" to watchers; it goes with the lease when that is revoked.
    let mark = ended_mark("released");
    let mut then = vec![
        TxnOp::delete(session_key, None),
        TxnOp::put(etcd.config.ended_key(lease_id), mark, Some(PutOptions::new().with_lease(etcd_lease_id))),
    ];
    if let Some(s) = slot {
        let slot_key = etcd.config.slot_key(s);
        when.push(Compare::lease(slot_key.clone(), CompareOp::Equal, etcd_lease_id));
        then.push(TxnOp::delete(slot_key, None));
    }
    // Guarded by the owner's own lease: sent again after a lost answer, it finds the keys
    // gone and revokes the lease, which is already what the first one did.
    let txn = Txn::new().when(when).and_then(then);
    let resp = etcd.call("release the session", |mut c| {
        let txn = txn.clone();
        async move { c.txn(txn).await }
    })?;
    if resp.succeeded() {
        // The lease holds nothing now; revoking it only ends it early (it expires anyway).
        let _ = etcd.revoke(etcd_lease_id);
        return Ok(Released { removed: true, pruned: vec![], lease_id: None });
    }
    // The keys are not (all) ours as written: whatever is still attached to our lease goes with it.
    let revoked = etcd.revoke(etcd_lease_id)?;
    Ok(Released { removed: revoked, pruned: vec![], lease_id: None })
}

/// The operator's release: revoke the etcd lease of each chosen entry, which
/// deletes its session and slot keys at once. Every listed owner renews its lease
/// (or its TTL has not run out), so it counts as live unless it runs on this host
/// and its pid is provably dead: those are refused without `allow_live`.
pub fn force_release(etcd: &Etcd, target: &Target, opts: ForceOptions) -> Result<Removal, Error> {
    let ForceOptions { allow_live, dry_run } = opts;
    let listing = etcd.list()?;
    let host = hostname();
    let mut prober = Prober::new();
    let chosen: Vec<&Held> = listing.leases.iter().filter(|h| target.names(&h.entry)).collect();
    if chosen.is_empty() {
        return Err(Error::NotFound(Missing {
            target: target.clone(),
            live_only: false,
            place: format!("under {}", etcd.config.location()),
        }));
    }
    let views: Vec<(LeaseView, i64)> =
        chosen.iter().map(|h| (h.view(h.liveness(&mut prober, &host), None), h.etcd_lease_id)).collect();
    let live: Vec<&LeaseView> = views.iter().map(|(v, _)| v).filter(|v| may_be_alive(&v.liveness)).collect();
    if !live.is_empty() && !allow_live && dry_run {
        // The plan: what would go, and what would need --live.
        let (needs_live, removed): (Vec<LeaseView>, Vec<LeaseView>) =
            views.into_iter().map(|(v, _)| v).partition(|v| may_be_alive(&v.liveness));
        return Ok(Removal { removed, dry_run, needs_live, ..Removal::default() });
    }
    if !live.is_empty() && !allow_live {
        return Err(Error::LiveOwner(LiveOwners {
            action: Guarded::ReleaseRenewed,
            described: live
                .iter()
                .map(|v| {
                    format!("lease {} (session {}, pid {})", v.entry.lease_id(), v.entry.session_id(), v.entry.pid())
                })
                .collect(),
        }));
    }
    if !dry_run {
        // A stop's removal of its ended owner's leases is a stop's, not an operator's revoke.
        let how = if matches!(target, Target::Stopped(_)) { "stopped" } else { "force-released" };
        for held in &chosen {
            mark_and_revoke(etcd, held, how)?;
        }
    }
    let live_owner = !live.is_empty();
    Ok(Removal { removed: views.into_iter().map(|(v, _)| v).collect(), dry_run, live_owner, ..Removal::default() })
}

/// The value of an `ended/<lease id>` key: how, and by whom.
fn ended_mark(how: &str) -> String {
    serde_json::json!({"how": how, "by": crate::lease::home::audit::who()}).to_string()
}

/// Mark `held` as ended `how` (attached to its lease), then revoke the lease: a watcher
/// sees the mark before the keys go. A mark that cannot be written (the lease ended
/// meanwhile) does not stop the revoke.
fn mark_and_revoke(etcd: &Etcd, held: &Held, how: &str) -> Result<bool, EtcdError> {
    let key = etcd.config.ended_key(held.entry.lease_id());
    let (mark, id) = (ended_mark(how), held.etcd_lease_id);
    let _ = etcd.call("mark the lease ended", |mut c| {
        let (key, mark) = (key.clone(), mark.clone());
        async move { c.put(key, mark, Some(PutOptions::new().with_lease(id))).await }
    });
    etcd.revoke(id)
}

/// Revoke the leases of owners on this host whose pid is dead or recycled (the
/// console's prune; etcd expiry does the rest).
pub fn prune_local(etcd: &Etcd, dry_run: bool) -> Result<Removal, EtcdError> {
    let listing = etcd.list()?;
    let host = hostname();
    let mut prober = Prober::new();
    let mut removed = Vec::new();
    for h in &listing.leases {
        let liveness = h.liveness(&mut prober, &host);
        if matches!(liveness, Liveness::Dead(_) | Liveness::Recycled { .. }) {
            if !dry_run {
                mark_and_revoke(etcd, h, "pruned")?;
            }
            removed.push(h.view(liveness, None));
        }
    }
    Ok(Removal { removed, dry_run, ..Removal::default() })
}
