//! The JSON the CLI prints, one typed shape each: the contract the README's JSON section
//! states (`tests/docs.rs` holds them to it). Every shape becomes a `serde_json::Value`
//! before it is printed, so keys come out sorted, as they always have.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use crate::lease::owners::owner::OwnerInfo;
use crate::lease::{AcquireRequest, DoctorReport, Entry, Grant, LeaseView, Location, Refusal, Removal};

/// Any shape as a JSON value (a shape of ours always has one).
pub(super) fn value(shape: &impl Serialize) -> Value {
    serde_json::to_value(shape).unwrap_or_else(|e| Value::String(format!("leasectl could not write this as JSON: {e}")))
}

/// A lease's owner process, as this machine (or the owner's host) sees it.
#[derive(Serialize)]
pub(super) struct Owner<'a> {
    name: &'a str,
    cmdline: &'a [String],
    rss_bytes: u64,
    cpu_percent: f32,
    user: &'a Option<String>,
}

impl<'a> Owner<'a> {
    pub(super) fn of(o: &'a OwnerInfo) -> Owner<'a> {
        Owner { name: &o.name, cmdline: &o.cmdline, rss_bytes: o.rss_bytes, cpu_percent: o.cpu_percent, user: &o.user }
    }
}

/// A lease: its entry as in the file, and its owner's liveness.
#[derive(Serialize)]
pub(super) struct Lease<'a> {
    entry: Value,
    liveness: &'static str,
    liveness_detail: String,
    owner: Option<Owner<'a>>,
}

impl<'a> Lease<'a> {
    pub(super) fn of(v: &LeaseView, owner: Option<&'a OwnerInfo>) -> Lease<'a> {
        Lease {
            entry: v.entry.to_value(),
            liveness: v.liveness.name(),
            liveness_detail: v.liveness.explain(),
            owner: owner.map(Owner::of),
        }
    }
}

pub(super) fn lease(v: &LeaseView, owner: Option<&OwnerInfo>) -> Value {
    value(&Lease::of(v, owner))
}

fn leases(views: &[LeaseView]) -> Vec<Lease<'static>> {
    views.iter().map(|v| Lease::of(v, None)).collect()
}

/// A registry-file grant.
#[derive(Serialize)]
struct FileGrant<'a> {
    granted: bool,
    lease_id: &'a str,
    recorded: bool,
    session_id: &'a str,
    pid: u64,
    path: String,
    replaced: &'a Option<String>,
    pruned: Vec<Value>,
}

/// An etcd grant: its lease, TTL and fencing token.
#[derive(Serialize)]
struct EtcdGrant<'a> {
    granted: bool,
    backend: &'static str,
    lease_id: &'a str,
    recorded: bool,
    session_id: &'a str,
    pid: u64,
    host: String,
    endpoints: &'a [String],
    prefix: &'a str,
    key: Option<&'a str>,
    etcd_lease_id: i64,
    etcd_lease_id_hex: String,
    ttl_secs: u64,
    renewed: bool,
    fencing_token: i64,
    slot: Option<u64>,
    replaced: &'a Option<String>,
    pruned: [Value; 0],
}

/// A grant as JSON: the file shape, or the etcd shape; `renewed`: hold and run keep it.
pub(super) fn grant(g: &Grant, location: &Location, req: &AcquireRequest, renewed: bool) -> Value {
    let Location::Etcd(at) = location else {
        return value(&FileGrant {
            granted: true,
            lease_id: &g.lease_id,
            recorded: g.recorded,
            session_id: &req.session_id,
            pid: req.owner_pid,
            path: location.describe(),
            replaced: &g.replaced,
            pruned: g.pruned.iter().map(Entry::to_value).collect(),
        });
    };
    let r = g.remote.as_ref();
    let etcd_lease_id = r.map_or(0, |r| r.etcd_lease_id);
    value(&EtcdGrant {
        granted: true,
        backend: "etcd",
        lease_id: &g.lease_id,
        recorded: g.recorded,
        session_id: &req.session_id,
        pid: req.owner_pid,
        host: crate::lease::owners::owner::hostname(),
        endpoints: &at.endpoints,
        prefix: &at.prefix,
        key: r.filter(|_| g.recorded).map(|r| r.session_key.as_str()),
        etcd_lease_id,
        etcd_lease_id_hex: format!("{etcd_lease_id:x}"),
        ttl_secs: r.map_or(0, |r| r.ttl.as_secs()),
        renewed,
        fencing_token: r.map_or(0, |r| r.fencing_token),
        slot: r.and_then(|r| r.slot),
        replaced: &g.replaced,
        pruned: [],
    })
}

/// A refusal: the reason (the contract), the message, the advice, and who holds it.
#[derive(Serialize)]
struct Refused<'a> {
    granted: bool,
    reason: &'static str,
    message: &'a str,
    advice: &'a str,
    holder: Option<Value>,
}

pub(super) fn refusal(r: &Refusal, advice: &str) -> Value {
    value(&Refused {
        granted: false,
        reason: r.reason.code(),
        message: &r.message,
        advice,
        holder: r.holder.as_deref().map(Entry::to_value),
    })
}

/// What an admin removal did (or would do) to one registry file, here or on a host.
#[derive(Serialize)]
struct FileRemoval<'a> {
    host: Option<&'a str>,
    profile: &'a str,
    path: String,
    dry_run: bool,
    live_owner: bool,
    removed: Vec<Lease<'static>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    needs_live: Vec<Lease<'static>>,
    kept_clock_step: Vec<Lease<'static>>,
    kept_work_running: Vec<Lease<'static>>,
}

/// The same on an etcd prefix.
#[derive(Serialize)]
struct EtcdRemoval<'a> {
    backend: &'static str,
    endpoints: &'a [String],
    prefix: &'a str,
    dry_run: bool,
    live_owner: bool,
    removed: Vec<Lease<'static>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    needs_live: Vec<Lease<'static>>,
}

pub(super) fn removal(location: &Location, r: &Removal) -> Value {
    match location {
        Location::Etcd(at) => value(&EtcdRemoval {
            backend: "etcd",
            endpoints: &at.endpoints,
            prefix: &at.prefix,
            dry_run: r.dry_run,
            live_owner: r.live_owner,
            removed: leases(&r.removed),
            needs_live: leases(&r.needs_live),
        }),
        Location::File(_) | Location::Ssh(_) => value(&FileRemoval {
            host: location.host().map(|h| h.name.as_str()),
            profile: location.name(),
            path: location.describe(),
            dry_run: r.dry_run,
            live_owner: r.live_owner,
            removed: leases(&r.removed),
            needs_live: leases(&r.needs_live),
            kept_clock_step: leases(&r.kept_clock_step),
            kept_work_running: leases(&r.kept_work_running),
        }),
    }
}

/// One invalid entry doctor found.
#[derive(Serialize)]
struct Problem<'a> {
    detail: &'a str,
    entry: Option<usize>,
    lease_id: &'a Option<String>,
    message: String,
    rule: &'static str,
}

/// Two live owners of one session.
#[derive(Serialize)]
struct Conflict<'a> {
    leases: PlainLeases<'a>,
    session_id: &'a str,
}

/// Leases as `ls --json` shows them, without owners, each built only as it is written
/// (doctor's stale leases at 50,000 entries were 15,000 JSON trees at once).
struct PlainLeases<'a>(&'a [LeaseView]);

impl Serialize for PlainLeases<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|v| Lease::of(v, None)))
    }
}

/// A live owner's lease that state.db says nobody uses, and why.
#[derive(Serialize)]
struct LeakSuspect<'a> {
    lease: Lease<'static>,
    reason: &'a str,
}

/// doctor's report on one registry. Written as it is (not built as a JSON tree first),
/// so the fields are in the order a JSON map sorts them, as every other output's are.
#[derive(Serialize)]
pub(super) struct DoctorRegistry<'a> {
    cap: Option<u64>,
    cap_warnings: &'a [String],
    conflicts: Vec<Conflict<'a>>,
    empty_session_ids: &'a [usize],
    exists: bool,
    leak_suspects: Vec<LeakSuspect<'a>>,
    leftover_temp_files: &'a [std::path::PathBuf],
    live: usize,
    lock_held_after_secs: Option<f64>,
    lock_holder: Option<u32>,
    lock_holder_command: &'a Option<String>,
    lock_problem: &'a Option<String>,
    ok: bool,
    over_cap: bool,
    path: std::path::PathBuf,
    problems: Vec<Problem<'a>>,
    profile: &'a str,
    session_context_unknown: &'a Option<String>,
    stale: PlainLeases<'a>,
    symlink_to: &'a Option<std::path::PathBuf>,
}

pub(super) fn doctor(d: &DoctorReport) -> Value {
    value(&doctor_registry(d))
}

pub(super) fn doctor_registry(d: &DoctorReport) -> DoctorRegistry<'_> {
    DoctorRegistry {
        profile: &d.registry.profile,
        path: d.registry.path(),
        exists: d.exists,
        ok: !d.has_problems(),
        cap: d.cap.cap,
        cap_warnings: &d.cap.warnings,
        problems: d
            .problems
            .iter()
            .map(|p| Problem {
                rule: p.rule.code(),
                entry: p.entry_index,
                lease_id: &p.lease_id,
                detail: &p.detail,
                message: p.to_string(),
            })
            .collect(),
        empty_session_ids: &d.empty_session_ids,
        conflicts: d.conflicts.iter().map(|(s, v)| Conflict { session_id: s, leases: PlainLeases(v) }).collect(),
        stale: PlainLeases(&d.stale),
        leftover_temp_files: &d.leftover_temp_files,
        lock_holder: d.lock_holder,
        lock_holder_command: &d.lock_holder_command,
        lock_held_after_secs: d.lock_watched.filter(|(_, held)| *held).map(|(w, _)| w.as_secs_f64()),
        lock_problem: &d.lock_problem,
        symlink_to: &d.symlink_to,
        live: d.live,
        over_cap: d.over_cap,
        leak_suspects: d
            .leak_suspects
            .iter()
            .map(|(v, why)| LeakSuspect { lease: Lease::of(v, None), reason: why })
            .collect(),
        session_context_unknown: &d.context_unknown,
    }
}

/// A session's context from state.db, as `ls --json` shows it.
#[derive(Serialize)]
struct Context<'a> {
    id: &'a str,
    title: &'a Option<String>,
    source: &'a Option<String>,
    started_at: Option<f64>,
    ended_at: Option<f64>,
    end_reason: &'a Option<String>,
    last_activity: Option<f64>,
    messages: u64,
}

pub(super) fn context(c: &crate::lease::home::context::SessionContext) -> Value {
    value(&Context {
        id: &c.session_id,
        title: &c.title,
        source: &c.source,
        started_at: c.started_at,
        ended_at: c.ended_at,
        end_reason: &c.end_reason,
        last_activity: c.last_activity,
        messages: c.messages,
    })
}

/// An etcd lease: its entry, key, owner host, etcd lease, fencing token and slot.
#[derive(Serialize)]
struct EtcdLease<'a> {
    entry: Value,
    key: Option<&'a str>,
    host: Option<&'a str>,
    etcd_lease_id: Option<i64>,
    etcd_lease_id_hex: Option<String>,
    fencing_token: Option<i64>,
    slot: Option<u64>,
    ttl_secs: Option<i64>,
    liveness: &'static str,
    liveness_detail: String,
}

fn etcd_lease_of(v: &LeaseView) -> EtcdLease<'_> {
    let r = v.remote.as_ref();
    EtcdLease {
        entry: v.entry.to_value(),
        key: r.map(|r| r.key.as_str()),
        host: r.map(|r| r.host.as_str()),
        etcd_lease_id: r.map(|r| r.etcd_lease_id),
        etcd_lease_id_hex: r.map(|r| format!("{:x}", r.etcd_lease_id)),
        fencing_token: r.map(|r| r.fencing_token),
        slot: r.and_then(|r| r.slot),
        ttl_secs: r.and_then(|r| r.ttl_left),
        liveness: v.liveness.name(),
        liveness_detail: v.liveness.explain(),
    }
}

/// One slot of an etcd prefix and the session key that holds it.
#[derive(Serialize)]
struct Slot<'a> {
    slot: &'a u64,
    session_key: &'a str,
}

/// `ls` on an etcd prefix.
#[derive(Serialize)]
struct EtcdListing<'a> {
    backend: &'static str,
    endpoints: &'a [String],
    prefix: &'a str,
    revision: i64,
    slots_used: Vec<Slot<'a>>,
    leases: Vec<EtcdLease<'a>>,
    bad_keys: &'a [String],
    /// Who waits in line, in the order they will be served.
    waiting: &'a [crate::lease::Waiter],
    /// The prefix's cap (`P/cap`), when a capped client recorded one.
    cap: Option<u64>,
}

pub(super) fn etcd_listing(
    at: &crate::lease::EtcdLocation,
    views: &[LeaseView],
    remote: &crate::lease::RemoteListing,
) -> Value {
    value(&EtcdListing {
        backend: "etcd",
        endpoints: &at.endpoints,
        prefix: &at.prefix,
        revision: remote.revision,
        slots_used: remote.slots.iter().map(|(slot, key)| Slot { slot, session_key: key }).collect(),
        leases: views.iter().map(etcd_lease_of).collect(),
        bad_keys: &remote.bad,
        waiting: &remote.waiting,
        cap: remote.cap,
    })
}

/// `ls --json`, serialized as it is written: `{"registries": [{cap, cap_warnings, error,
/// leases, path, profile}, …]}` with keys in the order a JSON map sorts them, each lease
/// built as a value only while it is written.
pub struct LsJson<'a> {
    pub listings: &'a [crate::lease::Listing],
    /// Per listing: who its owners are (looked up where they run).
    pub owners: &'a [HashMap<u64, OwnerInfo>],
    /// Per listing: its conflicts and whether it is over its cap.
    pub marks: &'a [super::marks::Marks],
}

struct LsRegistries<'a>(&'a LsJson<'a>);
struct OneRegistry<'a>(&'a crate::lease::Listing, &'a HashMap<u64, OwnerInfo>, &'a super::marks::Marks);
struct Leases<'a>(&'a [LeaseView], &'a HashMap<u64, OwnerInfo>, &'a super::marks::Marks);

impl serde::Serialize for LsJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("registries", &LsRegistries(self))?;
        m.end()
    }
}

impl serde::Serialize for LsRegistries<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.listings.len()))?;
        let none = super::marks::Marks::default();
        let nobody = HashMap::new();
        for (i, l) in self.0.listings.iter().enumerate() {
            let owners = self.0.owners.get(i).unwrap_or(&nobody);
            seq.serialize_element(&OneRegistry(l, owners, self.0.marks.get(i).unwrap_or(&none)))?;
        }
        seq.end()
    }
}

impl serde::Serialize for OneRegistry<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let l = self.0;
        let mut m = s.serialize_map(Some(8))?;
        m.serialize_entry("cap", &l.cap.cap)?;
        m.serialize_entry("cap_warnings", &l.cap.warnings)?;
        m.serialize_entry("error", &l.leases.as_ref().err().map(|e| e.to_string()))?;
        if let Some(host) = l.location.host() {
            m.serialize_entry("host", &host.name)?;
        }
        m.serialize_entry("leases", &Leases(l.leases.as_deref().unwrap_or_default(), self.1, self.2))?;
        // Counted over every lease, before any filter.
        m.serialize_entry("live", &self.2.live)?;
        m.serialize_entry("over_cap", &self.2.over_cap)?;
        m.serialize_entry("path", &l.location.describe())?;
        m.serialize_entry("profile", l.location.name())?;
        let unknown = match &self.2.context {
            Some(crate::lease::home::context::Contexts::Unknown(why)) => Some(why.as_str()),
            _ => None,
        };
        m.serialize_entry("session_context_unknown", &unknown)?;
        m.end()
    }
}

impl serde::Serialize for Leases<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for v in self.0 {
            let mut lease = lease(v, self.1.get(&v.entry.pid()));
            if let Some(map) = lease.as_object_mut() {
                map.insert("conflict".into(), self.2.of_lease(v).contains(&"CONFLICT").into());
                map.insert("leak_suspect".into(), self.2.leaks.get(v.entry.lease_id()).cloned().into());
                map.insert("session".into(), self.2.context_of(v).map(context).unwrap_or(Value::Null));
            }
            seq.serialize_element(&lease)?;
        }
        seq.end()
    }
}

/// Several registries' results (`prune --json`, `doctor --repair --json`, `force-release
/// --all-profiles`), and which could not be reached where a command says so.
#[derive(Serialize)]
pub(super) struct Registries<'a> {
    pub(super) registries: &'a [Value],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) not_reached: Option<&'a [String]>,
}

/// `doctor --json`: whether all is well, each registry's report, and the counts.
#[derive(Serialize)]
pub(super) struct Doctored<'a, R: Serialize> {
    pub(super) ok: bool,
    pub(super) registries: &'a [R],
    pub(super) summary: Value,
}

/// A registry an action could not reach or use, and why.
#[derive(Serialize)]
struct Failed<'a> {
    profile: &'a str,
    path: String,
    error: &'a str,
}

pub(super) fn failed(location: &Location, error: &str) -> Value {
    value(&Failed { profile: location.name(), path: location.describe(), error })
}

/// `release --json`.
#[derive(Serialize)]
struct Released<'a> {
    released: bool,
    lease_id: &'a str,
    already_gone: bool,
    pruned: Vec<Value>,
}

pub(super) fn released(lease_id: &str, r: &crate::lease::Released) -> Value {
    value(&Released {
        released: r.removed,
        lease_id,
        already_gone: !r.removed,
        pruned: r.pruned.iter().map(Entry::to_value).collect(),
    })
}

/// One registry's `doctor --repair --json` result: whether it was repaired, what the
/// repair did (its report's own fields) and, when it was, the whole entries it kept.
#[derive(Serialize)]
struct Repaired<'a> {
    profile: &'a str,
    path: &'a str,
    repaired: bool,
    #[serde(flatten)]
    report: serde_json::Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kept: Option<Vec<Value>>,
}

pub(super) fn repaired(profile: &str, path: &str, done: Option<&crate::lease::repair::RepairReport>) -> Value {
    let report = match done.map(crate::lease::repair::RepairReport::to_json) {
        Some(Value::Object(details)) => details,
        _ => serde_json::Map::new(),
    };
    value(&Repaired {
        profile,
        path,
        repaired: done.is_some_and(|d| d.needed),
        report,
        kept: done.map(|d| d.plan.kept.iter().map(Entry::to_value).collect()),
    })
}

/// One line of `ls -w -o json`, `events -o json` and the recorder's journal: a change to
/// a lease (`lease`, as `ls --json` gives it, with `conflict`) or to a registry or host
/// (`detail` only); over `--host`, the host.
#[derive(Serialize)]
struct Event<'a> {
    time: &'a str,
    ts: f64,
    event: &'a str,
    profile: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
}

/// An event about a registry or a host: what it is, in words.
pub(super) fn registry_event(at: (&str, f64), location: &Location, event: &str, detail: &str) -> Value {
    event_line(at, location, event, None, Some(detail))
}

fn event_line(at: (&str, f64), location: &Location, event: &str, lease: Option<Value>, detail: Option<&str>) -> Value {
    value(&Event {
        time: at.0,
        ts: at.1,
        event,
        profile: location.name(),
        host: location.host().map(|h| h.name.as_str()),
        lease,
        detail,
    })
}

/// An event about a lease: the lease as `ls --json` gives it and whether its session has
/// two live owners now; `detail` says by whom, where the audit file knows.
pub(super) fn lease_event(
    at: (&str, f64),
    location: &Location,
    event: &str,
    lease_now: (&LeaseView, Option<&OwnerInfo>, bool),
    detail: Option<&str>,
) -> Value {
    let (view, owner, conflict) = lease_now;
    let mut lease = lease(view, owner);
    if let Some(map) = lease.as_object_mut() {
        map.insert("conflict".into(), conflict.into());
    }
    event_line(at, location, event, Some(lease), detail)
}
