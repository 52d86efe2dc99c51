//! The JSON the CLI prints, one typed shape each: the contract docs/commands.md's JSON section
//! states (`tests/docs.rs` holds them to it). Every shape becomes a `serde_json::Value`
//! before it is printed, so keys come out sorted, as they always have.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use crate::lease::owners::owner::OwnerInfo;
use crate::lease::view::DoctorLeases;
use crate::lease::{AcquireRequest, DoctorReport, Entry, Grant, LeaseView, Location, Refusal, Removal};

/// Any shape as a JSON value (a shape of ours always has one).
pub(super) fn value(shape: &impl Serialize) -> Value {
    serde_json::to_value(shape).unwrap_or_else(|e| Value::String(format!("leasectl could not write this as JSON: {e}")))
}

/// A lease's owner process, as this machine (or the owner's host) sees it. Fields in
/// sorted order: written directly (`ls --json`), it reads as its sorted value does.
#[derive(Serialize)]
pub(super) struct Owner<'a> {
    cmdline: &'a [String],
    cpu_percent: f32,
    name: &'a str,
    rss_bytes: u64,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    namespaced_owner: Option<NamespacedJson>,
    owner: Option<Owner<'a>>,
}

/// An owner alive in another pid namespace: its pid here, the pid its lease records,
/// its namespace and container. Only on such a lease.
#[derive(Serialize)]
pub(super) struct NamespacedJson {
    container: Option<crate::lease::owners::namespaces::Container>,
    host_pid: u64,
    pid_namespace: Option<u64>,
    recorded_pid: u64,
}

impl NamespacedJson {
    fn of(v: &LeaseView) -> Option<NamespacedJson> {
        let o = v.liveness.namespaced()?;
        Some(NamespacedJson {
            container: o.container.clone(),
            host_pid: o.host_pid,
            pid_namespace: o.namespace,
            recorded_pid: v.entry.pid(),
        })
    }
}

impl<'a> Lease<'a> {
    pub(super) fn of(v: &LeaseView, owner: Option<&'a OwnerInfo>) -> Lease<'a> {
        Lease {
            entry: v.entry.to_value(),
            liveness: v.liveness.name(),
            liveness_detail: v.liveness.explain(),
            namespaced_owner: NamespacedJson::of(v),
            owner: owner.map(Owner::of),
        }
    }
}

pub(super) fn lease(v: &LeaseView, owner: Option<&OwnerInfo>) -> Value {
    value(&Lease::of(v, owner))
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
    /// Whose words `message` repeats: the releases differ (see [`Refusal::words`]).
    message_words: &'static str,
    advice: &'a str,
    holder: Option<Value>,
}

pub(super) fn refusal(r: &Refusal, advice: &str) -> Value {
    value(&Refused {
        granted: false,
        reason: r.reason.code(),
        message: &r.message,
        message_words: r.words(),
        advice,
        holder: r.holder.as_deref().map(Entry::to_value),
    })
}

/// What an admin removal did (or would do) to one registry file, here or on a host.
/// Fields in sorted order: written directly, it reads as its sorted value did.
#[derive(Serialize)]
struct FileRemoval<'a> {
    dry_run: bool,
    host: Option<&'a str>,
    kept_clock_step: PlainLeases<'a>,
    kept_work_running: PlainLeases<'a>,
    live_owner: bool,
    #[serde(skip_serializing_if = "PlainLeases::is_empty")]
    needs_live: PlainLeases<'a>,
    path: String,
    profile: &'a str,
    removed: PlainLeases<'a>,
}

/// The same on an etcd prefix.
#[derive(Serialize)]
struct EtcdRemoval<'a> {
    backend: &'static str,
    dry_run: bool,
    endpoints: &'a [String],
    live_owner: bool,
    #[serde(skip_serializing_if = "PlainLeases::is_empty")]
    needs_live: PlainLeases<'a>,
    prefix: &'a str,
    removed: PlainLeases<'a>,
}

/// One registry's part of `prune --json` or `force-release --json`: what was (or would
/// be) removed there, or why nothing could be.
pub(super) enum RegistryOutcome<'a> {
    Removal(&'a Location, &'a Removal),
    Failed(Value),
}

impl Serialize for RegistryOutcome<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RegistryOutcome::Failed(v) => v.serialize(s),
            RegistryOutcome::Removal(Location::Etcd(at), r) => EtcdRemoval {
                backend: "etcd",
                dry_run: r.dry_run,
                endpoints: &at.endpoints,
                live_owner: r.live_owner,
                needs_live: PlainLeases(&r.needs_live),
                prefix: &at.prefix,
                removed: PlainLeases(&r.removed),
            }
            .serialize(s),
            RegistryOutcome::Removal(location, r) => FileRemoval {
                dry_run: r.dry_run,
                host: location.host().map(|h| h.name.as_str()),
                kept_clock_step: PlainLeases(&r.kept_clock_step),
                kept_work_running: PlainLeases(&r.kept_work_running),
                live_owner: r.live_owner,
                needs_live: PlainLeases(&r.needs_live),
                path: location.describe(),
                profile: location.name(),
                removed: PlainLeases(&r.removed),
            }
            .serialize(s),
        }
    }
}

pub(super) fn removal(location: &Location, r: &Removal) -> Value {
    value(&RegistryOutcome::Removal(location, r))
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

impl PlainLeases<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for PlainLeases<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|v| Lease::of(v, None)))
    }
}

/// A live owner's lease that state.db says nobody uses, and why.
#[derive(Serialize)]
struct LeakSuspect<'a> {
    lease: Lease<'static>,
    reason: std::borrow::Cow<'a, str>,
}

/// Leak suspects, each built only as it is written (13,892 of 50,000 leases on a
/// realistic home were 17 MB of JSON trees at once).
struct LeakSuspects<'a>(&'a DoctorLeases);

impl Serialize for LeakSuspects<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.leak_suspects().map(|(v, why)| LeakSuspect { lease: Lease::of(v, None), reason: why }))
    }
}

/// Stale leases, each built only as it is written.
struct StaleLeases<'a>(&'a DoctorLeases);

impl Serialize for StaleLeases<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.stale().map(|v| Lease::of(v, None)))
    }
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
    hidden: PlainLeases<'a>,
    leak_suspects: LeakSuspects<'a>,
    leftover_temp_files: &'a [std::path::PathBuf],
    live: usize,
    lock_held_after_secs: Option<f64>,
    lock_holder: Option<u32>,
    lock_holder_command: &'a Option<String>,
    lock_problem: &'a Option<String>,
    ok: bool,
    over_cap: bool,
    path: std::path::PathBuf,
    pid_namespaces: &'a [crate::lease::view::NamespaceShare],
    problems: Vec<Problem<'a>>,
    profile: &'a str,
    safe_moves: SafeMoves<'a>,
    session_context_unknown: &'a Option<String>,
    stale: StaleLeases<'a>,
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
        stale: StaleLeases(&d.leases),
        leftover_temp_files: &d.leftover_temp_files,
        lock_holder: d.lock_holder,
        lock_holder_command: &d.lock_holder_command,
        lock_held_after_secs: d.lock_watched.filter(|(_, held)| *held).map(|(w, _)| w.as_secs_f64()),
        lock_problem: &d.lock_problem,
        symlink_to: &d.symlink_to,
        live: d.live,
        over_cap: d.over_cap,
        leak_suspects: LeakSuspects(&d.leases),
        hidden: PlainLeases(&d.hidden),
        pid_namespaces: &d.pid_namespaces,
        safe_moves: SafeMoves(d),
        session_context_unknown: &d.context_unknown,
    }
}

/// Each leak suspect's owner kind and the safe move for it, in `leak_suspects`' order.
struct SafeMoves<'a>(&'a DoctorReport);

impl Serialize for SafeMoves<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct One<'a> {
            lease_id: &'a str,
            owner_kind: crate::lease::owners::kind::OwnerKind,
            owner_sessions: usize,
            safe_move: crate::lease::owners::kind::SafeMove,
        }
        let d = self.0;
        s.collect_seq(d.leases.leak_suspect_situations().map(|(v, judged)| {
            let m = d.owner_move(v, judged);
            One {
                lease_id: v.entry.lease_id(),
                owner_sessions: m.situation.sessions_held,
                safe_move: m.safe,
                owner_kind: m.kind,
            }
        }))
    }
}

/// A session's context from state.db, as `ls --json` shows it. Fields in sorted order
/// (see [`Owner`]).
#[derive(Serialize)]
struct Context<'a> {
    end_reason: Option<&'a str>,
    ended_at: Option<f64>,
    /// For a gateway's session key: whether its routing row marks a turn running.
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway_turn: Option<bool>,
    id: &'a str,
    last_activity: Option<f64>,
    messages: u64,
    /// For a gateway's session key: the stored session it routes to.
    #[serde(skip_serializing_if = "Option::is_none")]
    routed_session_id: Option<&'a str>,
    source: Option<&'a str>,
    started_at: Option<f64>,
    title: Option<&'a str>,
}

impl<'a> Context<'a> {
    fn of(c: crate::lease::home::context::ContextRef<'a>) -> Context<'a> {
        Context {
            end_reason: c.end_reason(),
            ended_at: c.ended_at(),
            gateway_turn: c.gateway_turn(),
            id: c.session_id(),
            last_activity: c.last_activity(),
            messages: c.messages(),
            routed_session_id: c.routed_session_id(),
            source: c.source(),
            started_at: c.started_at(),
            title: c.title(),
        }
    }
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

/// An entry as `ls --json` shows it: every field, keys sorted, standard JSON (`NaN` and
/// the infinities as `null`): the bytes of [`Entry::to_value`]. Written from the entry's
/// text when that is canonical (as read: Hermes' own layout, or rendered anew), as
/// every entry went through a value tree before (half of `ls --json`'s time).
struct EntryJson<'a>(&'a Entry);

impl serde::Serialize for EntryJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = self.0.text();
        match crate::lease::format::pyjson::canonical_members(text) {
            Some(_) => Canonical(text).serialize(s),
            None => self.0.to_value().serialize(s),
        }
    }
}

/// A canonical value's text (see [`crate::lease::format::pyjson::canonical_members`]),
/// written as its standard value is: objects member by member, keys already sorted;
/// strings decoded; numbers as their text; an array through its value (rare here).
struct Canonical<'a>(&'a str);

impl serde::Serialize for Canonical<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use crate::lease::format::pyjson;
        use serde::ser::{Error as _, SerializeMap};
        let v = self.0;
        match v {
            "true" => s.serialize_bool(true),
            "false" => s.serialize_bool(false),
            "null" | "NaN" | "Infinity" | "-Infinity" => s.serialize_unit(),
            _ if v.starts_with('{') => {
                let members = pyjson::canonical_members(v).ok_or_else(|| S::Error::custom("not a canonical object"))?;
                let mut m = s.serialize_map(Some(members.len()))?;
                for (key, value) in members {
                    m.serialize_entry(key, &Canonical(value))?;
                }
                m.end()
            }
            _ if v.starts_with('[') => pyjson::standard(pyjson::parse(v).map_err(S::Error::custom)?).serialize(s),
            _ if v.starts_with('"') => match v.get(1..v.len() - 1).filter(|c| pyjson::is_unescaped(c)) {
                Some(plain) => s.serialize_str(plain),
                None => s.serialize_str(&serde_json::from_str::<String>(v).map_err(S::Error::custom)?),
            },
            // A canonical number: its text is what the value would print.
            _ => serde_json::from_str::<&serde_json::value::RawValue>(v).map_err(S::Error::custom)?.serialize(s),
        }
    }
}

/// `ls --json`, serialized as it is written: `{"registries": [{cap, cap_warnings, error,
/// leases, path, profile}, …]}` with keys in the order a JSON map sorts them, each lease
/// written as it is serialized.
pub(crate) struct LsJson<'a> {
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
        // Only where the directory is no profile by Hermes 0.22's rules (deleted, no
        // identity): its registry is listed while it holds leases, and says why.
        if let Some(standing) = l.location.registry().map(|r| r.standing).filter(|s| !s.is_live()) {
            m.serialize_entry("profile_standing", &standing)?;
            m.serialize_entry("profile_standing_detail", &standing.explain(l.location.name()))?;
        }
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
            seq.serialize_element(&LsLease {
                v,
                owner: v.owner_pid_here().and_then(|p| self.1.get(&p)),
                marks: self.2,
            })?;
        }
        seq.end()
    }
}

/// One lease of `ls --json`: a [`Lease`] with its marks and session, written directly
/// with its keys in sorted order (it was a value tree first: four fifths of the time).
struct LsLease<'a> {
    v: &'a LeaseView,
    owner: Option<&'a OwnerInfo>,
    marks: &'a super::marks::Marks,
}

impl serde::Serialize for LsLease<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (v, marks) = (self.v, self.marks);
        let mut m = s.serialize_map(Some(7))?;
        m.serialize_entry("conflict", &marks.in_conflict(v))?;
        m.serialize_entry("entry", &EntryJson(&v.entry))?;
        m.serialize_entry("leak_suspect", &marks.leak_of(v, self.owner))?;
        m.serialize_entry("liveness", v.liveness.name())?;
        m.serialize_entry("liveness_detail", &v.liveness.explain())?;
        if let Some(namespaced) = NamespacedJson::of(v) {
            m.serialize_entry("namespaced_owner", &namespaced)?;
        }
        m.serialize_entry("owner", &self.owner.map(Owner::of))?;
        let owner = marks.owner_move(v, self.owner);
        m.serialize_entry("owner_kind", &owner.kind)?;
        m.serialize_entry("owner_sessions", &owner.situation.sessions_held)?;
        // Only where there is an owner to act on: a dead one's lease is prune's.
        let safe = crate::lease::view::owner_may_be_alive(v).then_some(owner.safe);
        m.serialize_entry("safe_move", &safe)?;
        m.serialize_entry("session", &marks.context_of(v).map(Context::of))?;
        m.end()
    }
}

/// Several registries' results (`prune --json`, `doctor --repair --json`, `force-release
/// --all-profiles`), and which could not be reached where a command says so.
/// Fields in sorted order: written directly, it reads as its sorted value does.
#[derive(Serialize)]
pub(super) struct Registries<'a, R: Serialize = Value> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) not_reached: Option<&'a [String]>,
    pub(super) registries: &'a [R],
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

pub(super) fn repaired(profile: &str, path: &str, done: Option<&crate::lease::doctor::repair::RepairReport>) -> Value {
    let report = match done.map(crate::lease::doctor::repair::RepairReport::to_json) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::Liveness;
    use crate::lease::format::pyjson::{self, xorshift};
    use crate::lease::home::context::{Contexts, SessionContext};
    use crate::lease::owners::liveness::DeadCause;

    /// Values of every kind, canonical as Python writes them and not.
    const VALUES: &[&str] = &[
        "\"plain\"",
        "\"\"",
        "\"é😀 and \\u2028\"",
        "\"tab\\tquote\\\"back\\\\slash\"",
        "\"\\u0001 control\"",
        "\"\\u00e9 escaped\"",
        "\"\\/ solidus\"",
        "0",
        "-1",
        "42",
        "123456789012345678901234567890",
        "1.5",
        "-0.0",
        "1e-07",
        "1e+16",
        "1.7976931348623157e+308",
        "1796275786.6322465",
        "NaN",
        "Infinity",
        "-Infinity",
        "1E5",
        "2.50",
        "-0",
        "true",
        "false",
        "null",
        "{\"a\": 1, \"b\": [NaN, \"x\"]}",
        "{\"live_session_id\": \"tab-1\"}",
        "{\"z\": {\"q\": [1, {\"r\": -Infinity}], \"é\": \"\\u0001\\n\"}, \"a\": 1E5}",
        "[1, 2.5, \"x\"]",
        "[]",
        "{}",
    ];

    /// Entries with the fields a lease needs and random others, in a file about half
    /// written canonically (sorted keys, Python's separators), half not.
    fn random_entries(n: usize) -> Vec<Entry> {
        let mut next = xorshift(0x6a09_e667_f3bc_c908);
        let keys = ["a", "b_c", "m", "x", "é"];
        let body: Vec<String> = (0..n)
            .map(|i| {
                let mut members = vec![
                    ("lease_id".to_owned(), format!("\"lease-{i}\"")),
                    ("pid".to_owned(), format!("{}", 100 + i)),
                    ("session_id".to_owned(), format!("\"s-{i}\"")),
                ];
                for key in keys {
                    if !next().is_multiple_of(3) {
                        members.push((key.to_owned(), VALUES[next() as usize % VALUES.len()].to_owned()));
                    }
                }
                let canonical = next().is_multiple_of(2);
                if canonical {
                    members.sort();
                } else {
                    let by = next() as usize % members.len();
                    members.rotate_left(by);
                }
                let sep = if canonical || next().is_multiple_of(2) { ", " } else { "," };
                let fields: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
                format!("{{{}}}", fields.join(sep))
            })
            .collect();
        let text = format!("{{\"entries\": [{}]}}", body.join(", "));
        crate::lease::file::format::parse(text.as_bytes()).expect("a valid registry").entries
    }

    #[test]
    fn an_entry_written_from_its_text_reads_as_its_value_does() {
        let entries = random_entries(3_000);
        // An entry's text is canonical once read (a file in another layout is rendered
        // anew), with objects and arrays among its values.
        let nested = |e: &&Entry| {
            pyjson::canonical_members(e.text()).is_some_and(|m| m.iter().any(|(_, v)| v.starts_with(['{', '['])))
        };
        let nested = entries.iter().filter(nested).count();
        assert!(nested > 500 && nested < 2_500, "{nested} of 3,000 with an object or array");
        for e in &entries {
            let direct = serde_json::to_string_pretty(&EntryJson(e)).expect("direct");
            let tree = serde_json::to_string_pretty(&e.to_value()).expect("value");
            assert_eq!(direct, tree, "entry {}", e.text());
        }
    }

    /// A lease of `ls --json` as it was built before: a value tree with its marks added.
    fn as_tree(v: &LeaseView, owner: Option<&OwnerInfo>, marks: &super::super::marks::Marks) -> Value {
        let mut lease = lease(v, owner);
        let map = lease.as_object_mut().expect("a lease is an object");
        map.insert("conflict".into(), marks.of_lease(v).contains(&"CONFLICT").into());
        map.insert("leak_suspect".into(), marks.leak_of(v, owner).into());
        map.insert("session".into(), marks.context_of(v).map(|c| value(&Context::of(c))).unwrap_or(Value::Null));
        let m = marks.owner_move(v, owner);
        map.insert("owner_kind".into(), value(&m.kind));
        map.insert("owner_sessions".into(), m.situation.sessions_held.into());
        let safe = crate::lease::view::owner_may_be_alive(v).then_some(m.safe);
        map.insert("safe_move".into(), value(&safe));
        lease
    }

    #[test]
    fn a_lease_of_ls_json_reads_as_its_value_tree_did() {
        let entries = random_entries(400);
        let mut marks = super::super::marks::Marks::default();
        let mut contexts = HashMap::new();
        let owner = OwnerInfo {
            name: "hermes \u{1b}[31m".into(),
            cmdline: vec!["python3".into(), "-m".into(), "hermes".into()],
            rss_bytes: 123_456,
            cpu_percent: 0.1,
            user: Some("alice".into()),
        };
        let mut views = Vec::new();
        for (i, e) in entries.into_iter().enumerate() {
            let liveness = match i % 4 {
                0 => Liveness::Alive,
                1 => Liveness::Dead(DeadCause::PidGone),
                2 => Liveness::Recycled { recorded: 1.5, actual: 3.25 },
                _ => Liveness::WorkRunning { pids: vec![7, 8] },
            };
            if i % 5 == 0 {
                marks.conflicts.insert(e.session_id().to_owned());
            }
            if i % 3 == 0 {
                let title = (i % 2 == 0).then(|| format!("title \"{i}\" é"));
                let mut c = SessionContext::new(e.session_id(), title.as_deref(), Some("cli"), None);
                c.started_at = Some(1_796_275_786.632_246_5 + i as f64);
                c.ended_at = (i % 2 == 1).then_some(f64::NAN);
                c.last_activity = Some(0.1);
                c.messages = i as u64;
                contexts.insert(e.session_id().to_owned(), c);
            }
            views.push(LeaseView::local(e, liveness));
        }
        // Live owners of sessions last active at 0.1 s or ended: leak suspects.
        marks.judge_context(Contexts::Read(contexts.into_iter().collect()), std::time::Duration::from_secs(60), &views);
        let owners: HashMap<u64, OwnerInfo> =
            views.iter().map(|v| v.entry.pid()).filter(|p| p % 2 == 0).map(|p| (p, owner.clone())).collect();
        let direct = serde_json::to_string_pretty(&Leases(&views, &owners, &marks)).expect("direct");
        let tree: Vec<Value> =
            views.iter().map(|v| as_tree(v, v.owner_pid_here().and_then(|p| owners.get(&p)), &marks)).collect();
        assert_eq!(direct, serde_json::to_string_pretty(&tree).expect("tree"));
        assert!(direct.contains("\"conflict\": true") && direct.contains("\"leak_suspect\": \"no activity for"));
        assert!(direct.contains("(hermes \\u001b[31m) still holds it"), "the owner is named, escaped");
    }
}
