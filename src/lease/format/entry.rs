//! One registry entry: typed access to the fields the fence reads, and every field
//! (known or not) kept as the entry's exact text in Hermes' format, so rewrites lose
//! nothing and cost a copy.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::lease::format::problem::{Problem, Rule};
use crate::lease::format::pyjson;

/// A validated registry entry. Only the constructors here build one, so the typed
/// fields always agree with `text`. 80 bytes: a registry may hold 50,000 entries, and in
/// a one-shot process each page of them is a fault.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The whole entry as `json.dumps(entry, sort_keys=True, ensure_ascii=False)` writes it
    /// (shared: a registry read again with the same bytes reuses its entries).
    text: Text,
    lease_id: Span,
    session_id: Span,
    surface: Option<Span>,
    live_session_id: Span,
    pid: u64,
    /// NaN when unknown or null (a time is finite; `Option` would take 8 more bytes).
    process_start_time: f64,
    /// NaN when unknown.
    started_at: f64,
    track_liveness: bool,
}

/// An entry's exact text: a stretch of a shared text. Every entry of a file in Hermes'
/// layout borrows the file's text (no copy and no allocation per entry: most of a large
/// registry's read in a one-shot process), which lives while any of them does; any other
/// entry has a text of its own, followed there by its string fields when they are not
/// in it verbatim ([`OwnText`]). 16 bytes.
#[derive(Debug, Clone)]
struct Text {
    shared: Arc<String>,
    start: u32,
    end: u32,
}

impl Text {
    /// `text`, borrowed from `file` when it is a stretch of it (as a file's entries are),
    /// else a copy of its own.
    fn of(text: &str, file: Option<&Arc<String>>) -> Text {
        let lent = file.and_then(|file| {
            let start = (text.as_ptr() as usize).checked_sub(file.as_ptr() as usize)?;
            let end = start + text.len();
            (end <= file.len()).then_some(())?;
            Some(Text { shared: Arc::clone(file), start: u32::try_from(start).ok()?, end: u32::try_from(end).ok()? })
        });
        lent.unwrap_or_else(|| OwnText::new(text.to_owned()).done())
    }

    /// The text this is a stretch of, and where.
    fn stretch(&self) -> (&Arc<String>, usize, usize) {
        (&self.shared, self.start as usize, self.end as usize)
    }

    fn get(&self) -> &str {
        // In range and on character boundaries by construction.
        self.shared.get(self.start as usize..self.end as usize).unwrap_or("")
    }

    /// The string at `span`, counted from this text's start.
    fn at(&self, span: Span) -> &str {
        let start = self.start as usize;
        self.shared.get(start + span.0 as usize..start + span.1 as usize).unwrap_or("")
    }
}

/// Where a string field is, from the start of its entry's text: in the JSON when it is
/// there verbatim (no escapes: a file's ids are not copied), else after it.
#[derive(Debug, Clone, Copy)]
struct Span(u32, u32);

impl Span {
    const EMPTY: Span = Span(0, 0);

    /// `part` must be a stretch of `text`.
    fn within(text: &str, part: &str) -> Span {
        let start = part.as_ptr() as usize - text.as_ptr() as usize;
        // Within a registry (at most 64 MiB): in range of u32.
        let at = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
        Span(at(start), at(start + part.len()))
    }
}

/// An entry's own text being made: its JSON, then the string fields that are not in it
/// verbatim (decoded from escapes, or given), so every field is a [`Span`] of one text.
struct OwnText(String, usize);

impl OwnText {
    fn new(json: String) -> OwnText {
        let end = json.len();
        OwnText(json, end)
    }

    /// `field`, put after the JSON.
    fn field(&mut self, field: &str) -> Span {
        if field.is_empty() {
            return Span::EMPTY;
        }
        let start = self.0.len();
        self.0.push_str(field);
        Span::within(&self.0, &self.0[start..])
    }

    fn done(self) -> Text {
        let end = u32::try_from(self.1).unwrap_or(u32::MAX);
        Text { shared: Arc::new(self.0), start: 0, end }
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        // The typed fields are derived from the text.
        self.text() == other.text()
    }
}

/// The metadata key `run` records: its work carries `LEASECTL_LEASE_ID=<lease id>` in its
/// environment, which every process it starts inherits (setsid and double forks too).
pub const WORK_KEY: &str = "leasectl_work";

impl Entry {
    /// Validate one entry given as JSON text. Text already in Hermes' exact format
    /// (what Hermes and leasectl write) is kept as is, parsing only the known fields;
    /// anything else is parsed whole and re-rendered.
    pub fn from_text<S: SeenIds + ?Sized>(index: usize, text: &str, seen: &S) -> Result<Entry, Vec<Problem>> {
        Entry::from_text_with(index, text, seen, &mut Vec::new())
    }

    /// [`Entry::from_text`] with a reusable buffer for the members (one per file, not per entry).
    pub fn from_text_with<'t, S: SeenIds + ?Sized>(
        index: usize,
        text: &'t str,
        seen: &S,
        members: &mut Vec<(&'t str, &'t str)>,
    ) -> Result<Entry, Vec<Problem>> {
        if pyjson::canonical_members_into(text, members) {
            let members = &*members;
            if let Some(entry) = Entry::fast(members, text, seen, None) {
                return Ok(entry);
            }
            let known: Vec<(&str, Value)> = members
                .iter()
                .copied()
                .filter(|(key, _)| Member::of(key) != Member::Other)
                .filter_map(|(key, span)| cheap_value(span).map(|v| (key, v)))
                .collect();
            return Entry::validate(index, known.as_slice(), text.to_owned(), seen);
        }
        match pyjson::parse(text) {
            Ok(v) => Entry::from_value(index, v, seen),
            Err(e) => Err(vec![Problem {
                rule: Rule::NotJson,
                entry_index: Some(index),
                lease_id: None,
                detail: pyjson::not_json_detail(&e, text.as_bytes()),
            }]),
        }
    }

    /// Validate one entry against every per-entry rule (spec §3). `seen` holds the
    /// lease ids of earlier entries, for the duplicate rule. All broken rules are
    /// returned, first one first, so `doctor` can list them all.
    pub fn from_value<S: SeenIds + ?Sized>(index: usize, value: Value, seen: &S) -> Result<Entry, Vec<Problem>> {
        let Value::Object(raw) = value else {
            return Err(vec![Problem {
                rule: Rule::NonObjectEntry,
                entry_index: Some(index),
                lease_id: None,
                detail: format!("is {}, not an object", pyjson::kind_of(&value)),
            }]);
        };
        let mut text = String::with_capacity(256);
        pyjson::write_object(&mut text, &raw);
        let entry = Entry::validate(index, &raw, text, seen)?;
        // Checked after the rules, so a rule Hermes would name is reported as that rule.
        if let Some(digits) = raw.values().find_map(pyjson::find_overlong_int) {
            return Err(vec![Problem {
                rule: Rule::NotJson,
                entry_index: Some(index),
                lease_id: raw.get("lease_id").and_then(Value::as_str).map(str::to_owned),
                detail: pyjson::overlong(digits).detail,
            }]);
        }
        Ok(entry)
    }

    /// The common case without building any value: canonical text whose known fields
    /// have their usual types and pass every rule. Anything else returns None, and the
    /// general validation decides (and names the problems).
    /// `file`: the registry text `text` is a stretch of, for the entry to borrow it.
    pub(crate) fn fast<S: SeenIds + ?Sized>(
        members: &[(&str, &str)],
        text: &str,
        seen: &S,
        file: Option<&Arc<String>>,
    ) -> Option<Entry> {
        Entry::fast_members(members.iter().map(|&(key, span)| (Member::of(key), span)), text, seen, file)
    }

    /// [`Entry::fast`] over members already told apart by key.
    fn fast_members<'t, S: SeenIds + ?Sized>(
        members: impl Iterator<Item = (Member, &'t str)>,
        text: &str,
        seen: &S,
        file: Option<&Arc<String>>,
    ) -> Option<Entry> {
        let (mut lease_id, mut session_id, mut pid) = (None, None, None);
        let (mut surface, mut track_liveness, mut live_session_id) = (None, false, None);
        let (mut process_start_time, mut started_at) = (None, None);
        for (member, span) in members {
            match member {
                Member::LeaseId => lease_id = Some(plain_str(span)?),
                Member::SessionId => session_id = Some(plain_str(span)?),
                Member::Pid => pid = Some(span.parse::<u64>().ok().filter(|p| *p > 0)?),
                Member::Surface if span == "null" => surface = None,
                Member::Surface => surface = Some(plain_str(span)?),
                Member::TrackLiveness => track_liveness = track_liveness_of(span)?,
                Member::Metadata => live_session_id = live_id_in_metadata(span)?,
                Member::ProcessStartTime if span == "null" => {}
                Member::ProcessStartTime => process_start_time = Some(plain_number(span)?),
                Member::StartedAt => started_at = plain_number(span),
                Member::Other => {}
            }
        }
        let read = CommonFields {
            lease_id: lease_id?,
            session_id: session_id?,
            pid: pid?,
            surface,
            process_start_time,
            started_at,
            track_liveness,
            live_session_id,
        };
        Entry::of_common(read, text, seen, file)
    }

    /// The entry of the fields the common case read from `text`, when they pass the
    /// identity rules; None when the general validation must decide.
    pub(super) fn of_common<S: SeenIds + ?Sized>(
        read: CommonFields<'_>,
        text: &str,
        seen: &S,
        file: Option<&Arc<String>>,
    ) -> Option<Entry> {
        if py_is_blank(read.lease_id) || py_is_blank(read.session_id) || seen.seen(read.lease_id) {
            return None;
        }
        // The string fields are stretches of the text (a copy of it has them at the same places).
        Some(Entry {
            lease_id: Span::within(text, read.lease_id),
            session_id: Span::within(text, read.session_id),
            surface: read.surface.map(|s| Span::within(text, s)),
            live_session_id: read.live_session_id.map_or(Span::EMPTY, |l| Span::within(text, l)),
            text: Text::of(text, file),
            pid: read.pid,
            process_start_time: read.process_start_time.unwrap_or(f64::NAN),
            started_at: read.started_at.unwrap_or(f64::NAN),
            track_liveness: read.track_liveness,
        })
    }

    fn validate<F: Fields + ?Sized, S: SeenIds + ?Sized>(
        index: usize,
        raw: &F,
        json: String,
        seen: &S,
    ) -> Result<Entry, Vec<Problem>> {
        let mut found = Findings { index, problems: Vec::new() };
        let (lease_id, session_id, pid) = identity(raw, seen, &mut found);
        let (surface, track_liveness, process_start_time) = owner_fields(raw, lease_id, &mut found);
        match (lease_id, session_id, pid, surface, track_liveness, process_start_time) {
            (Some(lease_id), Some(session_id), Some(pid), Some(surface), Some(track_liveness), Some(pst))
                if found.problems.is_empty() =>
            {
                // A time Python reads as NaN or infinity is no time: unknown.
                let started_at = raw.field("started_at").and_then(py_float).filter(|t| t.is_finite());
                let mut own = OwnText::new(json);
                Ok(Entry {
                    lease_id: own.field(lease_id),
                    session_id: own.field(&session_id),
                    surface: surface.map(|s| own.field(&s)),
                    live_session_id: own.field(&live_session_id_of(raw)),
                    text: own.done(),
                    pid,
                    process_start_time: pst.unwrap_or(f64::NAN),
                    started_at: started_at.unwrap_or(f64::NAN),
                    track_liveness,
                })
            }
            _ => Err(found.problems),
        }
    }

    /// A fresh entry as Hermes writes one (`_lease_entry`): metadata only when
    /// non-empty, `track_liveness` only when true, `process_start_time` always.
    pub fn new_lease(new: NewLease) -> Entry {
        let mut raw = Map::new();
        raw.insert("lease_id".into(), Value::String(new.lease_id.clone()));
        raw.insert("session_id".into(), Value::String(new.session_id.clone()));
        raw.insert("surface".into(), new.surface.clone().map(Value::String).unwrap_or(Value::Null));
        raw.insert("pid".into(), Value::from(new.pid));
        raw.insert("process_start_time".into(), float_value(new.process_start_time));
        raw.insert("started_at".into(), float_value(Some(new.now)));
        raw.insert("updated_at".into(), float_value(Some(new.now)));
        if new.track_liveness {
            raw.insert("track_liveness".into(), Value::Bool(true));
        }
        if !new.metadata.is_empty() {
            raw.insert("metadata".into(), Value::Object(new.metadata));
        }
        let live_session_id = live_session_id_of(&raw);
        let mut own = OwnText::new(pyjson::to_string(&Value::Object(raw)));
        Entry {
            lease_id: own.field(&new.lease_id),
            session_id: own.field(&new.session_id),
            surface: new.surface.as_deref().map(|s| own.field(s)),
            live_session_id: own.field(&live_session_id),
            text: own.done(),
            pid: new.pid,
            process_start_time: new.process_start_time.filter(|t| t.is_finite()).unwrap_or(f64::NAN),
            started_at: if new.now.is_finite() { new.now } else { f64::NAN },
            track_liveness: new.track_liveness,
        }
    }

    pub fn lease_id(&self) -> &str {
        self.text.at(self.lease_id)
    }
    pub fn session_id(&self) -> &str {
        self.text.at(self.session_id)
    }
    pub fn pid(&self) -> u64 {
        self.pid
    }
    pub fn surface(&self) -> Option<&str> {
        self.surface.map(|s| self.text.at(s))
    }
    pub fn process_start_time(&self) -> Option<f64> {
        (!self.process_start_time.is_nan()).then_some(self.process_start_time)
    }
    pub fn started_at(&self) -> Option<f64> {
        (!self.started_at.is_nan()).then_some(self.started_at)
    }
    pub fn track_liveness(&self) -> bool {
        self.track_liveness
    }
    /// Every field as stored, unknown ones included (parsed on demand).
    pub fn fields(&self) -> Map<String, Value> {
        match pyjson::parse(self.text.get()) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        }
    }

    /// The lease id as a slice of `original`, the text this entry was read from, when
    /// the id is held verbatim there (lets a reader track ids without copying them).
    pub fn lease_id_in<'a>(&self, original: &'a str) -> Option<&'a str> {
        let Span(a, b) = self.lease_id;
        (b as usize <= self.text.get().len()).then(|| original.get(a as usize..b as usize)).flatten()
    }

    /// The text this entry's text is a stretch of (the file's, when it borrows it), and
    /// where in it the entry is.
    pub(crate) fn stretch_of_file(&self) -> (&Arc<String>, usize, usize) {
        self.text.stretch()
    }

    /// The entry's exact text as it is written to the file.
    pub fn text(&self) -> &str {
        self.text.get()
    }

    /// True when `run` recorded how to find this lease's work (see [`WORK_KEY`]).
    pub fn work_marked(&self) -> bool {
        self.text().contains(WORK_KEY) && self.fields().get("metadata").and_then(|m| m.get(WORK_KEY)).is_some()
    }

    /// `metadata.live_session_id` as Hermes stringifies it (`str(x or "")`).
    pub fn live_session_id(&self) -> String {
        self.text.at(self.live_session_id).to_owned()
    }

    /// Move the lease to another session (transfer), as Hermes does: new
    /// `session_id`, fresh `updated_at`, metadata replaced when given.
    pub fn move_to(&mut self, session_id: &str, now: f64, metadata: Option<Map<String, Value>>) {
        let mut raw = self.fields();
        raw.insert("session_id".into(), Value::String(session_id.to_owned()));
        raw.insert("updated_at".into(), float_value(Some(now)));
        if let Some(m) = metadata
            && !m.is_empty()
        {
            raw.insert("metadata".into(), Value::Object(m));
        }
        // The text is made anew: the fields go with it.
        let live_session_id = live_session_id_of(&raw);
        let mut own = OwnText::new(pyjson::to_string(&Value::Object(raw)));
        self.lease_id = own.field(self.lease_id());
        self.surface = self.surface().map(|s| own.field(s));
        self.session_id = own.field(session_id);
        self.live_session_id = own.field(&live_session_id);
        self.text = own.done();
    }

    /// The entry as a standard JSON value (every field), for leasectl's own output:
    /// a `NaN` or `Infinity` Hermes wrote (Python's json allows them) reads `null` here.
    pub fn to_value(&self) -> Value {
        pyjson::standard(Value::Object(self.fields()))
    }
}

/// The problems found in one entry, each with the rule it breaks and where.
struct Findings {
    index: usize,
    problems: Vec<Problem>,
}

impl Findings {
    fn bad(&mut self, rule: Rule, lease: Option<&str>, detail: String) {
        self.problems.push(Problem { rule, entry_index: Some(self.index), lease_id: lease.map(str::to_owned), detail })
    }
}

/// The fields that say which lease and whose: lease id (unique), session id, pid.
fn identity<'r, F: Fields + ?Sized, S: SeenIds + ?Sized>(
    raw: &'r F,
    seen: &S,
    found: &mut Findings,
) -> (Option<&'r str>, Option<String>, Option<u64>) {
    let lease_id = match raw.field("lease_id") {
        Some(Value::String(s)) if !py_is_blank(s) => Some(s.as_str()),
        other => {
            found.bad(Rule::LeaseId, None, format!("lease_id is {}", describe(other)));
            None
        }
    };
    if let Some(id) = lease_id
        && seen.seen(id)
    {
        found.bad(Rule::DuplicateLeaseId, lease_id, "lease_id appears in an earlier entry".into());
    }
    let session_id = match raw.field("session_id") {
        Some(Value::String(s)) if !py_is_blank(s) => Some(s.clone()),
        other => {
            found.bad(Rule::SessionId, lease_id, format!("session_id is {}", describe(other)));
            None
        }
    };
    let pid = raw.field("pid").and_then(registry_pid);
    if pid.is_none() {
        let shown = describe(raw.field("pid"));
        found.bad(Rule::Pid, lease_id, format!("pid is {shown}, not a positive integer"));
    }
    (lease_id, session_id, pid)
}

/// The fields about the owner and its lease: surface, track_liveness, metadata, start time.
#[allow(clippy::type_complexity)]
fn owner_fields<F: Fields + ?Sized>(
    raw: &F,
    lease_id: Option<&str>,
    found: &mut Findings,
) -> (Option<Option<String>>, Option<bool>, Option<Option<f64>>) {
    let surface = match raw.field("surface") {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(s)) => Some(Some(s.clone())),
        other => {
            found.bad(Rule::Surface, lease_id, format!("surface is {}, not a string or null", describe(other)));
            None
        }
    };
    let track_liveness = match raw.field("track_liveness") {
        None | Some(Value::Null) => Some(false),
        Some(Value::Bool(b)) => Some(*b),
        other => {
            found.bad(Rule::TrackLiveness, lease_id, format!("track_liveness is {}, not a bool", describe(other)));
            None
        }
    };
    match raw.field("metadata") {
        None | Some(Value::Null) | Some(Value::Object(_)) => {}
        other => found.bad(Rule::Metadata, lease_id, format!("metadata is {}, not an object", describe(other))),
    }
    let process_start_time = match raw.field("process_start_time") {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(s)) if s.is_empty() => Some(None),
        Some(v) => match py_float(v) {
            Some(f) if f.is_finite() => Some(Some(f)),
            _ => {
                let detail = format!("process_start_time is {}, not null or a finite number", describe(Some(v)));
                found.bad(Rule::ProcessStartTime, lease_id, detail);
                None
            }
        },
    };
    (surface, track_liveness, process_start_time)
}

/// `metadata.live_session_id` as Hermes stringifies it (`str(x or "")`).
fn live_session_id_of<F: Fields + ?Sized>(raw: &F) -> String {
    live_id_string(raw.field("metadata").and_then(|m| m.get("live_session_id")))
}

/// A live session id as Hermes stringifies it, `str(x or "")`: for an entry's
/// metadata and for an acquire's alike, so writer identity compares like with like.
pub(crate) fn live_id_string(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(false)) => String::new(),
        Some(Value::Bool(true)) => "True".into(),
        Some(Value::Number(n)) if n.as_f64() == Some(0.0) => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The lease ids of earlier entries, for the duplicate rule.
pub trait SeenIds {
    fn seen(&self, lease_id: &str) -> bool;
}

/// No lease id seen: for a caller that finds duplicates itself.
pub(crate) struct NothingSeen;

impl SeenIds for NothingSeen {
    fn seen(&self, _lease_id: &str) -> bool {
        false
    }
}

impl<H: std::hash::BuildHasher> SeenIds for std::collections::HashSet<String, H> {
    fn seen(&self, lease_id: &str) -> bool {
        self.contains(lease_id)
    }
}

impl<H: std::hash::BuildHasher> SeenIds for std::collections::HashSet<&str, H> {
    fn seen(&self, lease_id: &str) -> bool {
        self.contains(lease_id)
    }
}

impl<H: std::hash::BuildHasher> SeenIds for std::collections::HashSet<std::borrow::Cow<'_, str>, H> {
    fn seen(&self, lease_id: &str) -> bool {
        self.contains(lease_id)
    }
}

/// Field lookup over a full map or the few known fields of the fast path.
pub(crate) trait Fields {
    fn field(&self, key: &str) -> Option<&Value>;
}

impl Fields for Map<String, Value> {
    fn field(&self, key: &str) -> Option<&Value> {
        self.get(key)
    }
}

impl Fields for [(&str, Value)] {
    fn field(&self, key: &str) -> Option<&Value> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

/// The content of a canonical string without escapes.
/// What a member of an entry is to [`Entry::fast`]: the keys validation reads (only
/// these are parsed on the fast path), and the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Member {
    LeaseId,
    Metadata,
    Pid,
    ProcessStartTime,
    SessionId,
    StartedAt,
    Surface,
    TrackLiveness,
    Other,
}

impl Member {
    fn of(key: &str) -> Member {
        match key {
            "lease_id" => Member::LeaseId,
            "metadata" => Member::Metadata,
            "pid" => Member::Pid,
            "process_start_time" => Member::ProcessStartTime,
            "session_id" => Member::SessionId,
            "started_at" => Member::StartedAt,
            "surface" => Member::Surface,
            "track_liveness" => Member::TrackLiveness,
            _ => Member::Other,
        }
    }
}

/// What the common case reads of an entry: its strings are stretches of its text.
pub(super) struct CommonFields<'t> {
    pub(super) lease_id: &'t str,
    pub(super) session_id: &'t str,
    pub(super) pid: u64,
    pub(super) surface: Option<&'t str>,
    pub(super) process_start_time: Option<f64>,
    pub(super) started_at: Option<f64>,
    pub(super) track_liveness: bool,
    pub(super) live_session_id: Option<&'t str>,
}

/// `track_liveness`'s value: true, or false when false or null; None for anything else.
pub(super) fn track_liveness_of(span: &str) -> Option<bool> {
    match span {
        "true" => Some(true),
        "false" | "null" => Some(false),
        _ => None,
    }
}

/// The live session id in `metadata`'s value (None when it has none); None when the
/// value is not what the common case reads.
pub(super) fn live_id_in_metadata(span: &str) -> Option<Option<&str>> {
    if span == "null" {
        return Some(None);
    }
    match pyjson::canonical_member(span, "live_session_id")? {
        None | Some("null" | "false") => Some(None),
        Some(v) => Some(Some(plain_str(v)?)),
    }
}

fn plain_str(span: &str) -> Option<&str> {
    let inner = span.strip_prefix('"')?.strip_suffix('"')?;
    pyjson::is_unescaped(inner).then_some(inner)
}

/// A finite number from canonical number text.
pub(super) fn plain_number(span: &str) -> Option<f64> {
    let first = *span.as_bytes().first()?;
    if !(first == b'-' || first.is_ascii_digit()) {
        return None;
    }
    pyjson::finite_number(span)
}

/// A value from canonical text, without serde for the common shapes (plain strings,
/// literals, numbers, flat objects); anything else goes through serde_json.
fn cheap_value(span: &str) -> Option<Value> {
    match span.as_bytes().first()? {
        b'"' if !span.contains('\\') && span.len() >= 2 => Some(Value::String(span[1..span.len() - 1].to_owned())),
        b'n' if span == "null" => Some(Value::Null),
        b't' if span == "true" => Some(Value::Bool(true)),
        b'f' if span == "false" => Some(Value::Bool(false)),
        b'N' | b'I' | b'-' if matches!(span, "NaN" | "Infinity" | "-Infinity") => {
            Some(Value::Number(pyjson::constant(span)))
        }
        b'-' | b'0'..=b'9' => span.parse::<serde_json::Number>().ok().map(Value::Number),
        b'{' => {
            let members = pyjson::canonical_members(span)?;
            let mut map = Map::new();
            for (k, v) in members {
                map.insert(k.to_owned(), cheap_value(v)?);
            }
            Some(Value::Object(map))
        }
        _ => pyjson::parse(span).ok(),
    }
}

/// What a fresh lease is made of.
#[derive(Debug, Clone)]
pub struct NewLease {
    pub lease_id: String,
    pub session_id: String,
    pub surface: Option<String>,
    pub pid: u64,
    pub process_start_time: Option<f64>,
    pub now: f64,
    pub track_liveness: bool,
    pub metadata: Map<String, Value>,
}

/// A float as a JSON value (`null` when absent or not finite).
pub(crate) fn float_value(f: Option<f64>) -> Value {
    f.and_then(|f| serde_json::Number::from_f64(f).map(Value::Number)).unwrap_or(Value::Null)
}

/// Hermes' `_registry_pid`: an int (not a bool) or a string `int()` accepts; > 0.
fn registry_pid(v: &Value) -> Option<u64> {
    let parsed = match v {
        Value::Number(n) => {
            let text = n.to_string();
            if text.contains(['.', 'e', 'E']) {
                return None; // a Python float is not an int
            }
            text.parse::<i128>().ok()?
        }
        Value::String(s) => py_int(s)?,
        _ => return None,
    };
    u64::try_from(parsed).ok().filter(|p| *p > 0)
}

/// Python `int(str)`: surrounding whitespace, an optional sign, digits with
/// single underscores between them.
fn py_int(s: &str) -> Option<i128> {
    let t = py_strip(s);
    let (neg, digits) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let clean = strip_digit_underscores(digits)?;
    let n: i128 = clean.parse().ok()?;
    Some(if neg { -n } else { n })
}

/// Python `float(x)` for JSON values: numbers, bools, and numeric strings.
pub(crate) fn py_float(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::String(s) => {
            let t = py_strip(s);
            if t.is_empty() {
                return None;
            }
            let lower = t.to_ascii_lowercase();
            let body = lower.trim_start_matches(['+', '-']);
            if matches!(body, "inf" | "infinity" | "nan") {
                return t.parse::<f64>().ok().or(Some(f64::NAN));
            }
            if !t.bytes().all(|b| b.is_ascii_digit() || b"+-.eE_".contains(&b)) {
                return None;
            }
            let clean: String = if t.contains('_') {
                // underscores only between digits, as Python allows
                let b = t.as_bytes();
                for (i, c) in b.iter().enumerate() {
                    if *c == b'_'
                        && !(i > 0 && i + 1 < b.len() && b[i - 1].is_ascii_digit() && b[i + 1].is_ascii_digit())
                    {
                        return None;
                    }
                }
                t.replace('_', "")
            } else {
                t.to_owned()
            };
            clean.parse::<f64>().ok()
        }
        _ => None,
    }
}

fn strip_digit_underscores(digits: &str) -> Option<String> {
    let b = digits.as_bytes();
    if b.is_empty() || !b[0].is_ascii_digit() || !b[b.len() - 1].is_ascii_digit() {
        return None;
    }
    let mut out = String::with_capacity(b.len());
    let mut prev_underscore = false;
    for &c in b {
        match c {
            b'0'..=b'9' => {
                out.push(c as char);
                prev_underscore = false;
            }
            b'_' if !prev_underscore => prev_underscore = true,
            _ => return None,
        }
    }
    Some(out)
}

/// Python's `str.isspace` set, which `strip()` removes (wider than Rust's `trim`).
fn py_is_space(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\u{1c}'..='\u{1f}')
}

fn py_strip(s: &str) -> &str {
    s.trim_matches(py_is_space)
}

/// Hermes' `_nonblank_str` test: blank means empty after `strip()`.
pub(crate) fn py_is_blank(s: &str) -> bool {
    // Mostly led by a printable ASCII character, which strip() keeps: no walk.
    if s.as_bytes().first().is_some_and(|b| (0x21..0x80).contains(b)) {
        return false;
    }
    // What strip() leaves is empty when every character is one it strips.
    s.chars().all(py_is_space)
}

/// A short, quoted rendering of a bad value for error messages.
fn describe(v: Option<&Value>) -> String {
    match v {
        None => "missing".into(),
        Some(Value::String(s)) if py_is_blank(s) => format!("blank ({})", quote_short(s)),
        Some(v @ (Value::Array(_) | Value::Object(_))) => pyjson::kind_of(v).into(),
        Some(v) => format!("{} ({})", pyjson::kind_of(v), quote_short(&crate::lease::format::pyjson::to_string(v))),
    }
}

fn quote_short(s: &str) -> String {
    let mut t: String = s.chars().take(40).collect();
    if s.chars().count() > 40 {
        t.push('…');
    }
    format!("{t:?}")
}

/// Between hosts (`serve --stdio`) an entry travels as its text and is validated again
/// where it arrives, as if read from a registry.
impl serde::Serialize for Entry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.text())
    }
}

impl<'de> serde::Deserialize<'de> for Entry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Entry, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(d)?;
        Entry::from_text(0, &text, &std::collections::HashSet::<String>::new()).map_err(|problems| {
            let first = problems.first().map(ToString::to_string).unwrap_or_default();
            <D::Error as serde::de::Error>::custom(format!("an entry that is not valid: {first}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashSet;

    fn check(v: Value) -> Result<Entry, Vec<Problem>> {
        Entry::from_value(0, v, &HashSet::<String>::new())
    }

    #[test]
    fn blank_is_every_character_stripped_whatever_leads() {
        // Python's str.isspace() over the ASCII range and a few beyond it.
        let python_space = |c: char| matches!(c, '\t'..='\r' | '\u{1c}'..='\u{20}' | '\u{85}' | '\u{a0}' | '\u{3000}');
        let leads = (0u8..0x80).map(char::from).chain(['\u{85}', '\u{a0}', '\u{3000}', 'é', '😀']);
        for lead in leads {
            for rest in ["", " ", "\t\n", "x", " \u{3000}", "\u{1f}a"] {
                let s = format!("{lead}{rest}");
                assert_eq!(py_is_blank(&s), s.chars().all(python_space), "{s:?}");
            }
        }
        assert!(py_is_blank(""));
    }

    #[test]
    fn an_entry_stays_small() {
        // 50,000 of them are held by ls and doctor, and twice by a listing: each 8 bytes
        // is 400 KB there. 168 bytes before the texts were shared and the fields narrowed.
        assert!(std::mem::size_of::<Entry>() <= 120, "{} bytes", std::mem::size_of::<Entry>());
    }

    #[test]
    fn an_unknown_start_and_an_empty_live_id_cost_nothing_and_read_back() {
        let entry = check(with("started_at", Value::Null)).expect("valid");
        assert_eq!(entry.started_at(), None);
        assert_eq!(entry.live_session_id(), "");
        let entry = check(base()).expect("valid");
        assert_eq!(entry.started_at(), Some(1.0));
        assert!(matches!(entry.live_session_id, Span(0, 0)), "no allocation for an empty id");
    }

    fn base() -> Value {
        json!({"lease_id": "ab", "session_id": "S", "pid": 42, "surface": "cli",
               "process_start_time": null, "started_at": 1.0, "updated_at": 1.0})
    }

    fn with(field: &str, v: Value) -> Value {
        let mut b = base();
        b[field] = v;
        b
    }

    fn rule_of(v: Value) -> Rule {
        check(v).expect_err("must be invalid")[0].rule
    }

    #[test]
    fn accepts_hermes_shapes() {
        assert!(check(base()).is_ok());
        assert_eq!(check(with("pid", json!("  17 "))).map(|e| e.pid()), Ok(17));
        assert_eq!(check(with("pid", json!("1_000"))).map(|e| e.pid()), Ok(1000));
        assert!(check(with("process_start_time", json!(""))).is_ok());
        assert_eq!(check(with("process_start_time", json!("12.5"))).map(|e| e.process_start_time()), Ok(Some(12.5)));
        assert!(check(with("surface", Value::Null)).is_ok());
        assert!(check(with("metadata", Value::Null)).is_ok());
    }

    #[test]
    fn each_rule_is_named() {
        assert_eq!(rule_of(json!(3)), Rule::NonObjectEntry);
        assert_eq!(rule_of(with("lease_id", json!("  "))), Rule::LeaseId);
        assert_eq!(rule_of(with("lease_id", json!(5))), Rule::LeaseId);
        assert_eq!(rule_of(with("session_id", json!(""))), Rule::SessionId);
        assert_eq!(rule_of(with("session_id", json!("\u{1f} "))), Rule::SessionId);
        assert_eq!(rule_of(with("pid", json!(true))), Rule::Pid);
        assert_eq!(rule_of(with("pid", json!(0))), Rule::Pid);
        assert_eq!(rule_of(with("pid", json!(-3))), Rule::Pid);
        assert_eq!(rule_of(with("pid", json!(12.0))), Rule::Pid);
        assert_eq!(rule_of(with("pid", json!("12a"))), Rule::Pid);
        assert_eq!(rule_of(with("surface", json!(1))), Rule::Surface);
        assert_eq!(rule_of(with("track_liveness", json!("yes"))), Rule::TrackLiveness);
        assert_eq!(rule_of(with("metadata", json!([]))), Rule::Metadata);
        assert_eq!(rule_of(with("process_start_time", json!("nan"))), Rule::ProcessStartTime);
        assert_eq!(rule_of(with("process_start_time", json!({}))), Rule::ProcessStartTime);
        assert_eq!(rule_of(with("process_start_time", json!("soon"))), Rule::ProcessStartTime);
        let mut seen = HashSet::new();
        seen.insert("ab".to_owned());
        let dup = Entry::from_value(4, base(), &seen).expect_err("duplicate");
        assert_eq!(dup[0].rule, Rule::DuplicateLeaseId);
        assert_eq!(dup[0].to_string(), "entry 4 (lease ab): lease_id appears in an earlier entry");
    }

    #[test]
    fn every_broken_rule_is_reported() {
        let v = json!({"lease_id": "", "session_id": "", "pid": "x", "surface": 3});
        let rules: Vec<Rule> = check(v).expect_err("invalid").iter().map(|p| p.rule).collect();
        assert_eq!(rules, vec![Rule::LeaseId, Rule::SessionId, Rule::Pid, Rule::Surface]);
    }

    #[test]
    fn live_session_id_stringifies_like_hermes() {
        assert_eq!(
            check(with("metadata", json!({"live_session_id": "t"}))).map(|e| e.live_session_id()),
            Ok("t".into())
        );
        assert_eq!(check(with("metadata", json!({"live_session_id": 7}))).map(|e| e.live_session_id()), Ok("7".into()));
        assert_eq!(check(base()).map(|e| e.live_session_id()), Ok(String::new()));
    }

    /// 80 bytes an entry: at 50,000 entries every 8 bytes more is 100 pages, each a fault
    /// in a one-shot process.
    #[test]
    fn an_entry_takes_80_bytes() {
        assert_eq!(std::mem::size_of::<Entry>(), 80);
    }
}
