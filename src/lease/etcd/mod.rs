//! The fence across hosts, on etcd (v3 API): configuration, the connection, the
//! key layout and the entry encoding. `fence` holds the transactions, `keepalive`
//! the owner's renewal loop.
//!
//! Keys under the prefix (default `/leasectl/`):
//! - `session/<session id>`: one per held session, its value the entry (JSON with the
//!   file entry's fields plus `host`, `etcd_lease_id` and `slot`);
//! - `slot/<i>` for `i` in `0..cap`: one per used slot, its value the session key;
//! - `wait/<etcd lease id>`: one per client in line (`--wait`), see `queue`;
//! - `ended/<lease id>`: how a lease ended, for watchers;
//! - `cap`: the `--max` capped clients last acquired with (not attached to a lease).
//!
//! Session and slot keys are attached to the owner's etcd lease, so they vanish
//! together when the owner stops renewing it. Callers stay synchronous: every call runs on a
//! current-thread tokio runtime owned by [`Etcd`], bounded by a timeout.

pub(crate) mod access;
pub(crate) mod endpoints;
pub mod fence;
pub(crate) mod keepalive;
pub(crate) mod queue;
pub(crate) mod store;
pub(crate) mod watch;

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions, GetOptions, KeyValue};

use endpoints::{Endpoints, Resend};
use serde_json::{Map, Value};

pub use super::address::location::EtcdLocation;
pub(crate) use super::address::location::{DEFAULT_TTL, lease_ttl};
use super::error::Error;
use super::format::entry::Entry;
use super::owners::liveness::{Liveness, Prober};
pub use super::owners::owner::hostname;
use super::view::{LeaseView, RemoteLease};
use super::words::unusable::Unusable;

/// The bound on one etcd request (connecting included, every endpoint tried): etcdctl's
/// own default, and room for an election on a busy disk (3 s was not, under fsync load).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The bound on connecting to one endpoint.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long members may answer after the first did before they are called not answering:
/// a healthy member answers a count in milliseconds, even under load.
const MEMBER_GRACE: Duration = Duration::from_millis(300);

/// Where the fence lives and how long a lease lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdConfig {
    pub endpoints: Vec<String>,
    /// Always ends with `/`.
    pub prefix: String,
    pub ttl: Duration,
    /// The bound on each request.
    pub timeout: Duration,
}

impl EtcdConfig {
    /// Parse `--endpoints URL[,URL]`, `--prefix P` and `--ttl SECS`; every problem is named.
    pub fn new(endpoints: &str, prefix: Option<&str>, ttl_secs: Option<u64>) -> Result<EtcdConfig, Unusable> {
        let location = EtcdLocation::parse_with(endpoints, prefix, access::tls())?;
        Ok(EtcdConfig::at(&location, lease_ttl(ttl_secs)?))
    }

    /// The configuration for a location, with this lease TTL.
    pub fn at(location: &EtcdLocation, ttl: Duration) -> EtcdConfig {
        EtcdConfig {
            endpoints: location.endpoints.clone(),
            prefix: location.prefix.clone(),
            ttl,
            timeout: access::command_timeout().unwrap_or(DEFAULT_TIMEOUT),
        }
    }

    /// `etcd http://a:2379,http://b:2379 /leasectl/`: what messages and the console show.
    pub fn location(&self) -> String {
        format!("etcd {} {}", self.endpoints.join(","), self.prefix)
    }

    pub fn session_key(&self, session_id: &str) -> String {
        format!("{}session/{session_id}", self.prefix)
    }
    pub fn sessions_prefix(&self) -> String {
        format!("{}session/", self.prefix)
    }
    pub fn slot_key(&self, slot: u64) -> String {
        format!("{}slot/{slot}", self.prefix)
    }
    pub fn slots_prefix(&self) -> String {
        format!("{}slot/", self.prefix)
    }
    /// `ended/<lease id>`: how a lease was ended and by whom, written attached to the
    /// lease as it ends, so a watcher tells a release from a revoke from an expiry.
    pub fn ended_key(&self, lease_id: &str) -> String {
        format!("{}ended/{lease_id}", self.prefix)
    }
    pub fn ended_prefix(&self) -> String {
        format!("{}ended/", self.prefix)
    }
    /// `wait/<etcd lease id>`: a client's place in line, attached to its own lease.
    pub fn waiter_key(&self, etcd_lease_id: i64) -> String {
        format!("{}wait/{etcd_lease_id:016x}", self.prefix)
    }
    pub fn waiters_prefix(&self) -> String {
        format!("{}wait/", self.prefix)
    }
    /// `cap`: the prefix's cap, as capped clients last acquired with it.
    pub fn cap_key(&self) -> String {
        format!("{}cap", self.prefix)
    }

    /// How long a member may take to take a connection: `--dial-timeout`, else a second
    /// (never longer than a request may take).
    pub(crate) fn dial_timeout(&self) -> Duration {
        access::dial_timeout().unwrap_or(CONNECT_TIMEOUT).min(self.timeout)
    }

    pub(crate) fn connect_options(&self) -> ConnectOptions {
        ConnectOptions::new()
            // A node that does not take the connection within a second is passed over for
            // the next endpoint; the request's own bound is the caller's.
            .with_connect_timeout(self.dial_timeout())
            .with_timeout(self.timeout)
            .with_keep_alive(Duration::from_secs(2), self.timeout)
            // A member cut off from its leader says so at once ("no leader") instead of
            // holding the request: the next endpoint is tried.
            .with_require_leader(true)
    }
}

/// Why etcd could not be used. Never a grant: the caller refuses with
/// `SESSION_COORDINATION_UNAVAILABLE` (exit code 5).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EtcdError {
    /// No answer in time, a connection error, or an answer that cannot be trusted.
    #[error("{0}")]
    Unavailable(String),
    /// A write was sent but no answer came: it may or may not have been applied.
    #[error("{0}")]
    OutcomeUnknown(String),
    /// etcd refused what was asked in a way trying again will not change (a certificate,
    /// a password, a role, a size): said in words, not as an outage.
    #[error("{0}")]
    Refused(String),
    /// A key under the prefix holds something that is not an entry.
    #[error("etcd key {key} does not hold a leasectl entry: {detail}")]
    BadData { key: String, detail: String },
}

// The core's callers see one error type: etcd not answering is "unavailable" (exit 5).
impl From<EtcdError> for Error {
    fn from(e: EtcdError) -> Error {
        match e {
            EtcdError::Refused(why) => Error::Refused(why),
            e => Error::Unavailable(e.to_string()),
        }
    }
}

/// A connection: a current-thread runtime and a client per endpoint that only runs inside it.
pub struct Etcd {
    rt: tokio::runtime::Runtime,
    endpoints: Endpoints,
    pub config: EtcdConfig,
}

impl Etcd {
    /// Build the clients. etcd-client connects lazily: an unreachable server shows on the first call.
    pub fn connect(config: &EtcdConfig) -> Result<Etcd, EtcdError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| EtcdError::Unavailable(format!("cannot start the etcd client runtime: {e}")))?;
        let endpoints = rt
            .block_on(async { tokio::time::timeout(config.timeout, Endpoints::connect(config)).await })
            .map_err(|_| unreachable(config, "connect", "timed out"))?
            .map_err(|e| unreachable(config, "connect", &endpoints::in_words(&e)))?;
        rt.block_on(endpoints.prefer_first_to_answer(&config.prefix, config.dial_timeout()));
        Ok(Etcd { rt, endpoints, config: config.clone() })
    }

    /// Run one request that may be sent again (a read, a grant, a revoke, a release
    /// guarded by the owner's lease) on any endpoint that answers, bounded by the timeout.
    pub(crate) fn call<T, F>(&self, what: &str, make: impl Fn(Client) -> F) -> Result<T, EtcdError>
    where
        F: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.send(what, Resend::Safe, make)
    }

    /// Run one write that must not land twice: it goes to another endpoint only when it
    /// never reached the one tried; an unknown outcome is an error.
    pub(crate) fn call_once<T, F>(&self, what: &str, make: impl Fn(Client) -> F) -> Result<T, EtcdError>
    where
        F: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.send(what, Resend::IfNotSent, make)
    }

    fn send<T, F>(&self, what: &str, resend: Resend, make: impl Fn(Client) -> F) -> Result<T, EtcdError>
    where
        F: Future<Output = Result<T, etcd_client::Error>>,
    {
        let answer = self.rt.block_on(self.endpoints.run(resend, self.config.timeout, make));
        // etcd's refusals that trying again will not change, in words, once.
        if let Err((none, e)) = &answer {
            let text = e.as_ref().map(endpoints::in_words).unwrap_or_else(|| none.describe());
            if let Some(why) = access::refusal(&text, &self.config.prefix) {
                return Err(EtcdError::Refused(why));
            }
        }
        match answer {
            Ok(v) => Ok(v),
            // A refusal etcd answered keeps its words (callers look for "lease not found").
            Err((_, Some(e))) if !matches!(e, etcd_client::Error::GRpcStatus(ref s) if s.code() == tonic::Code::Unavailable) => {
                Err(EtcdError::Unavailable(format!("cannot {what} on etcd: {}", endpoints::in_words(&e))))
            }
            Err((none, _)) if none.outcome_unknown => {
                Err(EtcdError::OutcomeUnknown(format!("cannot {what} on etcd: {}", none.describe())))
            }
            Err((none, _)) => Err(EtcdError::Unavailable(format!(
                "cannot {what} on etcd: no endpoint answered ({})",
                none.describe()
            ))),
        }
    }

    /// Every session key and slot key under the prefix, the line and the cap, read at
    /// one revision.
    pub fn list(&self) -> Result<PrefixRead, EtcdError> {
        let sessions = self.config.sessions_prefix();
        let slots = self.config.slots_prefix();
        let txn = etcd_client::Txn::new().and_then([
            etcd_client::TxnOp::get(sessions, Some(GetOptions::new().with_prefix())),
            etcd_client::TxnOp::get(slots, Some(GetOptions::new().with_prefix())),
            queue::read_op(self),
            etcd_client::TxnOp::get(self.config.cap_key(), None),
        ]);
        let resp = self.call("list the leases", |mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        })?;
        let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
        let mut gets = resp.op_responses().into_iter().filter_map(|r| match r {
            etcd_client::TxnOpResponse::Get(g) => Some(g),
            _ => None,
        });
        let (Some(session_kvs), Some(slot_kvs), Some(wait_kvs), Some(cap_kv)) =
            (gets.next(), gets.next(), gets.next(), gets.next())
        else {
            return Err(EtcdError::Unavailable("etcd answered the listing without its four ranges".into()));
        };
        let mut leases = Vec::new();
        let mut bad = Vec::new();
        for kv in session_kvs.kvs() {
            match Held::decode(kv) {
                Ok(h) => leases.push(h),
                Err(e) => bad.push(e),
            }
        }
        let slots_prefix = self.config.slots_prefix();
        let slots = slot_kvs
            .kvs()
            .iter()
            .filter_map(|kv| {
                let key = String::from_utf8_lossy(kv.key());
                let index = key.strip_prefix(&slots_prefix)?.parse::<u64>().ok()?;
                Some((index, String::from_utf8_lossy(kv.value()).into_owned()))
            })
            .collect();
        let waiting = queue::waiters_of(wait_kvs.kvs());
        let cap = cap_of(cap_kv.kvs());
        Ok(PrefixRead { revision, leases, slots, bad, waiting, cap })
    }

    /// Each member that did not answer a read now, and why (see
    /// [`Endpoints::check_members`]); the first to answer is tried first from now on.
    pub fn members_not_answering(&self) -> Vec<(String, String)> {
        let (bound, grace) = (self.config.dial_timeout(), MEMBER_GRACE);
        let said = self.rt.block_on(self.endpoints.check_members(&self.config.prefix, bound, grace));
        said.into_iter().filter_map(|(member, why)| Some((member, why?))).collect()
    }

    /// Seconds left on each etcd lease (`None`: gone). One request per lease.
    pub fn ttls(&self, lease_ids: &[i64]) -> Result<HashMap<i64, Option<i64>>, EtcdError> {
        let mut out = HashMap::new();
        for id in lease_ids {
            if out.contains_key(id) {
                continue;
            }
            let id = *id;
            let resp = self.call("read a lease's TTL", |mut c| async move { c.lease_time_to_live(id, None).await })?;
            out.insert(id, Some(resp.ttl()).filter(|t| *t >= 0));
        }
        Ok(out)
    }

    /// Revoke an etcd lease (its keys go with it). A lease already gone is not an error.
    pub fn revoke(&self, etcd_lease_id: i64) -> Result<bool, EtcdError> {
        match self.call("revoke the lease", |mut c| async move { c.lease_revoke(etcd_lease_id).await }) {
            Ok(_) => Ok(true),
            Err(EtcdError::Unavailable(why)) if why.contains("lease not found") => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn unreachable(config: &EtcdConfig, what: &str, why: &str) -> EtcdError {
    if let Some(refused) = access::refusal(why, &config.prefix) {
        return EtcdError::Refused(refused);
    }
    EtcdError::Unavailable(format!("cannot {what} on etcd at {}: {why}", config.endpoints.join(",")))
}

/// The value of the `cap` key, when it holds a cap.
pub(crate) fn cap_of(kvs: &[KeyValue]) -> Option<u64> {
    std::str::from_utf8(kvs.first()?.value()).ok()?.trim().parse().ok().filter(|c| *c > 0)
}

/// Everything under the prefix at one revision, as read (judged, it becomes a
/// `backend::Listing`).
#[derive(Debug, Clone)]
pub struct PrefixRead {
    pub revision: i64,
    pub leases: Vec<Held>,
    /// Used slots: index and the session key holding it.
    pub slots: Vec<(u64, String)>,
    /// Session keys whose value is not an entry (shown, never trusted).
    pub bad: Vec<EtcdError>,
    /// Who waits in line, in arrival order.
    pub waiting: Vec<crate::lease::backend::Waiter>,
    /// The `cap` key's cap.
    pub cap: Option<u64>,
}

/// One held session as read from etcd.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    /// The entry: the file entry's fields plus `host`, `etcd_lease_id`, `slot` and
    /// `fencing_token` (the revision of the transaction that wrote it).
    pub entry: Entry,
    pub key: String,
    pub host: String,
    pub etcd_lease_id: i64,
    pub slot: Option<u64>,
    /// The cap (`--max`) its acquire asked for, if any: the console shows it.
    pub cap: Option<u64>,
    /// The key's mod revision: the revision of the winning acquire transaction.
    pub fencing_token: i64,
}

impl Held {
    /// Decode a session key. Its value must be an entry attached to the lease it names.
    pub fn decode(kv: &KeyValue) -> Result<Held, EtcdError> {
        let key = String::from_utf8_lossy(kv.key()).into_owned();
        let bad = |detail: String| EtcdError::BadData { key: key.clone(), detail };
        let text = std::str::from_utf8(kv.value()).map_err(|e| bad(format!("not UTF-8: {e}")))?;
        let value = crate::lease::format::pyjson::parse(text).map_err(|e| bad(format!("not JSON: {e}")))?;
        let Value::Object(mut map) = value else {
            return Err(bad("not a JSON object".into()));
        };
        map.insert("fencing_token".into(), Value::from(kv.mod_revision()));
        let host = map.get("host").and_then(Value::as_str).unwrap_or("").to_owned();
        let etcd_lease_id = map.get("etcd_lease_id").and_then(Value::as_i64).unwrap_or(0);
        if etcd_lease_id != kv.lease() {
            return Err(bad(format!(
                "the entry names etcd lease {etcd_lease_id:x} but the key is attached to lease {:x}",
                kv.lease()
            )));
        }
        let slot = map.get("slot").and_then(Value::as_u64);
        let cap = map.get("cap").and_then(Value::as_u64);
        let entry = entry_from_map(map).map_err(bad)?;
        Ok(Held { entry, key, host, etcd_lease_id, slot, cap, fencing_token: kv.mod_revision() })
    }

    /// This lease as the core reports it, with the TTL left when it was read.
    pub fn view(&self, liveness: Liveness, ttl_left: Option<i64>) -> LeaseView {
        LeaseView {
            entry: self.entry.clone(),
            liveness,
            remote: Some(Box::new(RemoteLease {
                key: self.key.clone(),
                host: self.host.clone(),
                etcd_lease_id: self.etcd_lease_id,
                slot: self.slot,
                fencing_token: self.fencing_token,
                ttl_left,
            })),
        }
    }

    /// Alive while the key exists (its lease is being renewed); an owner on this host
    /// is also judged by its pid, so a dead local owner shows before its TTL runs out.
    pub fn liveness(&self, prober: &mut Prober, this_host: &str) -> Liveness {
        if self.host == this_host { prober.judge(&self.entry) } else { Liveness::Alive }
    }
}

/// Validate an entry map with the file backend's rules (unknown fields kept).
pub(crate) fn entry_from_map(map: Map<String, Value>) -> Result<Entry, String> {
    Entry::from_value(0, Value::Object(map), &std::collections::HashSet::<String>::new())
        .map_err(|problems| problems.first().map(|p| p.detail.clone()).unwrap_or_else(|| "invalid entry".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_names_what_is_wrong() {
        let c = EtcdConfig::new("http://127.0.0.1:2379, http://h2:2379", Some("/x"), None).expect("valid");
        assert_eq!(c.endpoints, vec!["http://127.0.0.1:2379", "http://h2:2379"]);
        assert_eq!(c.prefix, "/x/");
        assert_eq!(c.session_key("S1"), "/x/session/S1");
        assert_eq!(c.slot_key(3), "/x/slot/3");
        assert_eq!(c.ttl, DEFAULT_TTL);
        assert!(EtcdConfig::new("", None, None).unwrap_err().0.contains("--endpoints is empty"));
        assert!(EtcdConfig::new("ftp://127.0.0.1:2379", None, None).unwrap_err().0.contains("not an http:// URL"));
        assert!(EtcdConfig::new("https://h:2379", None, None).unwrap_err().0.contains("--cacert"));
        assert!(EtcdConfig::new("http://h:1", Some(""), None).unwrap_err().0.contains("--prefix is empty"));
        assert!(EtcdConfig::new("http://h:1", None, Some(1)).unwrap_err().0.contains("--ttl must be between"));
        assert_eq!(EtcdConfig::new("http://h:1", None, Some(30)).map(|c| c.ttl), Ok(Duration::from_secs(30)));
    }

    #[test]
    fn hostname_is_not_empty() {
        assert!(!hostname().is_empty());
    }
}
