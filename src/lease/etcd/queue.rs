//! The line `--wait` stands in on etcd: one key per waiter, `wait/<etcd lease id>`,
//! attached to a lease of its own that it renews while it waits. Its create revision is
//! its place, as in etcdctl's lock: whoever came first is served first, for a session
//! and for the slots of a full cap, and everyone can list who waits.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use etcd_client::{GetOptions, KeyValue, PutOptions, Txn, TxnOp, TxnOpResponse};
use serde_json::Value;

use super::keepalive::KeepAlive;
use super::{Etcd, EtcdError, hostname};
use crate::lease::backend::Waiter;
use crate::lease::clock::now;
use crate::lease::grant::AcquireRequest;
use crate::lease::owners::liveness::{Liveness, Prober, judge_state};

/// A place in line, held while its holder waits. Leaving (or dropping it) ends its lease.
pub struct Ticket {
    pub key: String,
    /// The revision the key was created at: its place.
    pub position: i64,
    pub etcd_lease_id: i64,
    pub session_id: String,
    keep: Option<KeepAlive>,
    /// Set by the renewal loop when the lease could not be kept: the place is lost.
    lost: Arc<AtomicBool>,
}

impl Ticket {
    /// The lease of this place ended (not renewed in time, or revoked by someone).
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }
}

/// Join the line for `req`: a key created now, after everyone already in it.
pub(crate) fn join(etcd: &Etcd, req: &AcquireRequest) -> Result<Ticket, EtcdError> {
    let ttl_secs = etcd.config.ttl.as_secs() as i64;
    let granted_at = Instant::now();
    let granted =
        etcd.call("grant a lease to wait with", |mut c| async move { c.lease_grant(ttl_secs, None).await })?;
    if granted.id() == 0 || granted.ttl() <= 0 {
        return Err(EtcdError::Unavailable("etcd refused a lease to wait with".into()));
    }
    let id = granted.id();
    let key = etcd.config.waiter_key(id);
    let value = serde_json::json!({
        "session_id": req.session_id,
        "pid": req.owner_pid,
        "host": hostname(),
        "surface": req.surface,
        "since": now(),
        "cap": req.cap,
    })
    .to_string();
    let put = etcd.call("join the line", |mut c| {
        let (key, value) = (key.clone(), value.clone());
        async move { c.put(key, value, Some(PutOptions::new().with_lease(id))).await }
    });
    let position = match put.map(|r| r.header().map(|h| h.revision()).unwrap_or(0)) {
        Ok(p) if p > 0 => p,
        Ok(_) => {
            let _ = etcd.revoke(id);
            return Err(EtcdError::Unavailable("etcd took the place in line without a revision".into()));
        }
        Err(e) => {
            let _ = etcd.revoke(id);
            return Err(e);
        }
    };
    let lost = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&lost);
    let ttl = std::time::Duration::from_secs(granted.ttl() as u64);
    let keep = KeepAlive::start(etcd.config.clone(), id, ttl, granted_at, move |_| flag.store(true, Ordering::Relaxed))
        .map_err(|e| {
            let _ = etcd.revoke(id);
            EtcdError::Unavailable(format!("cannot renew the place in line: {e}"))
        })?;
    Ok(Ticket { key, position, etcd_lease_id: id, session_id: req.session_id.clone(), keep: Some(keep), lost })
}

/// Leave the line: stop renewing and end the place's lease (its key goes with it).
pub(crate) fn leave(etcd: Option<&Etcd>, mut ticket: Ticket) {
    if let Some(keep) = ticket.keep.take() {
        keep.stop();
    }
    if let Some(etcd) = etcd {
        let _ = etcd.revoke(ticket.etcd_lease_id);
    }
}

/// The read of the line: every waiter's key, in arrival order.
pub(crate) fn read_op(etcd: &Etcd) -> TxnOp {
    TxnOp::get(etcd.config.waiters_prefix(), Some(GetOptions::new().with_prefix()))
}

/// Who waits in line now, in arrival order.
pub(crate) fn line(etcd: &Etcd) -> Result<Vec<Waiter>, EtcdError> {
    let key = etcd.config.waiters_prefix();
    let resp = etcd.call("read the line", |mut c| {
        let key = key.clone();
        async move { c.get(key, Some(GetOptions::new().with_prefix())).await }
    })?;
    Ok(waiters_of(resp.kvs()))
}

/// The waiters of a range read, in arrival order; keys that are not a waiter are left out.
pub(crate) fn waiters_of(kvs: &[KeyValue]) -> Vec<Waiter> {
    let mut line: Vec<Waiter> = kvs.iter().filter_map(decode).collect();
    line.sort_by_key(|w| w.position);
    line
}

fn decode(kv: &KeyValue) -> Option<Waiter> {
    let v: Value = serde_json::from_slice(kv.value()).ok()?;
    Some(Waiter {
        session_id: v["session_id"].as_str()?.to_owned(),
        pid: v["pid"].as_u64()?,
        host: v["host"].as_str().unwrap_or_default().to_owned(),
        surface: v["surface"].as_str().map(str::to_owned),
        since: v["since"].as_f64().unwrap_or(0.0),
        cap: v["cap"].as_u64(),
        position: kv.create_revision(),
        key: String::from_utf8_lossy(kv.key()).into_owned(),
    })
}

/// Who stands before a request in line. A waiter on this host whose process is gone does
/// not count: its key only lasts until its lease runs out.
pub(crate) struct Ahead<'a> {
    /// The first who came earlier for the same session.
    pub for_session: Option<&'a Waiter>,
    /// Those who came earlier for other sessions and wait for a slot only.
    pub for_slots: Vec<&'a Waiter>,
}

/// `mine`: the requester's place (None: not in line, so after everyone). `free_under`
/// says whether a waiter's own cap has a slot free now (one that has none takes nothing,
/// so it does not hold others up); `held` whether a session is held.
pub(crate) fn ahead<'a>(
    line: &'a [Waiter],
    mine: Option<i64>,
    session_id: &str,
    prober: &mut Prober,
    free_under: impl Fn(u64) -> bool,
) -> Ahead<'a> {
    let here = hostname();
    // Probed only as far as needed: with 100 waiters on one host, probing every one on
    // every wake of every waiter was 10,000 process probes per hand-over.
    let mut present = |w: &Waiter| w.host != here || !gone(prober, w.pid);
    let earlier = line.iter().take_while(|w| mine.is_none_or(|m| w.position < m));
    let mut firsts: Vec<&str> = Vec::new();
    let mut for_slots = Vec::new();
    for w in earlier {
        if w.session_id == session_id {
            if present(w) {
                return Ahead { for_session: Some(w), for_slots };
            }
            continue;
        }
        // Only the first in line for its session can take a slot when one frees.
        if firsts.contains(&w.session_id.as_str()) || !w.cap.is_some_and(&free_under) || !present(w) {
            continue;
        }
        firsts.push(&w.session_id);
        for_slots.push(w);
    }
    Ahead { for_session: None, for_slots }
}

fn gone(prober: &mut Prober, pid: u64) -> bool {
    matches!(judge_state(&prober.state(pid), None), Liveness::Dead(_))
}

/// Which of `sessions` are held now (their session keys exist), read at one revision.
pub(crate) fn held_sessions(etcd: &Etcd, sessions: &[&str]) -> Result<Vec<bool>, EtcdError> {
    let ops: Vec<TxnOp> = sessions
        .iter()
        .map(|s| TxnOp::get(etcd.config.session_key(s), Some(GetOptions::new().with_count_only())))
        .collect();
    let txn = Txn::new().and_then(ops);
    let resp = etcd.call("read who holds the sessions waited for", |mut c| {
        let txn = txn.clone();
        async move { c.txn(txn).await }
    })?;
    Ok(resp
        .op_responses()
        .into_iter()
        .map(|r| match r {
            TxnOpResponse::Get(g) => g.count() > 0,
            _ => true,
        })
        .collect())
}
