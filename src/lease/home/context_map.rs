//! What state.db says of a session, and the contexts of many sessions found by session
//! id. A map keeps the contexts' strings in texts of 64 KiB and each context as a row
//! of places in them, times and a count, the rows sorted by id: at 50,000 sessions a
//! context of its own (its strings one allocation of their own) took 136 bytes and a
//! row takes 56 beside its strings. One text grown by doubling was copied as it grew and
//! kept up to half of itself spare. A hash map of contexts kept every id twice and a
//! quarter of its slots empty.

use serde::de::{Deserialize, Deserializer};
use serde::ser::{Serialize, SerializeMap, SerializeStruct, Serializer};

/// What `state.db` says about one session, on its own: what a test builds and what JSON
/// carries (`serve --stdio`). A map hands out [`ContextRef`]s.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SessionContext {
    pub session_id: String,
    pub title: Option<String>,
    pub source: Option<String>,
    pub started_at: Option<f64>,
    pub ended_at: Option<f64>,
    pub end_reason: Option<String>,
    /// The freshest of `last_activity_at` and the newest message, else `started_at`.
    pub last_activity: Option<f64>,
    pub messages: u64,
    /// For a messaging gateway's session key (the id its leases record): the stored
    /// session its routing row in state.db names, whose title and times these are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routed_session_id: Option<String>,
    /// For a gateway's session key: whether its routing row marks a turn running
    /// (`active_turn_token`); None for any other session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_turn: Option<bool>,
}

impl SessionContext {
    /// A context with these strings, no times and no messages (the caller sets those).
    pub fn new(session_id: &str, title: Option<&str>, source: Option<&str>, end_reason: Option<&str>) -> Self {
        SessionContext {
            session_id: session_id.to_owned(),
            title: title.map(str::to_owned),
            source: source.map(str::to_owned),
            end_reason: end_reason.map(str::to_owned),
            ..SessionContext::default()
        }
    }
}

/// One context in a map: where its strings lie in the map's texts, and the rest.
#[derive(Debug, Clone, Copy)]
struct Row {
    /// Which text its strings are in.
    text: u32,
    /// Where the id starts there; the title, source and end reason that are there follow it.
    start: u32,
    /// The byte lengths of the id, title, source and end reason.
    lens: [u32; 4],
    /// Which of the title, source and end reason are there (bits 0 to 2); bit 4: a
    /// gateway's session key (its routed session in the map's side list), bit 5: its
    /// routing row marks a turn running.
    present: u8,
    messages: u32,
    /// NaN when unknown (a known time is finite: `Option` would take 8 bytes more).
    started_at: f64,
    ended_at: f64,
    last_activity: f64,
}

impl Row {
    /// Its string `i` in the map's `texts` (0: id, 1: title, 2: source, 3: end reason).
    fn part<'t>(&self, texts: &'t [String], i: usize) -> &'t str {
        let start = self.start as usize + self.lens.iter().take(i).map(|&l| l as usize).sum::<usize>();
        let len = self.lens.get(i).map_or(0, |&l| l as usize);
        texts.get(self.text as usize).and_then(|t| t.get(start..start + len)).unwrap_or("")
    }
}

fn known(t: f64) -> Option<f64> {
    (!t.is_nan()).then_some(t)
}

/// A context of a map: what state.db says about one session.
#[derive(Debug, Clone, Copy)]
pub struct ContextRef<'a> {
    texts: &'a [String],
    row: &'a Row,
    /// A gateway's session key's routed session.
    routed: Option<&'a str>,
}

impl<'a> ContextRef<'a> {
    fn part(&self, i: usize) -> &'a str {
        self.row.part(self.texts, i)
    }

    fn optional(&self, i: usize) -> Option<&'a str> {
        (self.row.present & (1 << (i - 1)) != 0).then(|| self.part(i))
    }

    pub fn session_id(&self) -> &'a str {
        self.part(0)
    }
    pub fn title(&self) -> Option<&'a str> {
        self.optional(1)
    }
    pub fn source(&self) -> Option<&'a str> {
        self.optional(2)
    }
    pub fn end_reason(&self) -> Option<&'a str> {
        self.optional(3)
    }
    /// For a gateway's session key, the stored session its routing row names.
    pub fn routed_session_id(&self) -> Option<&'a str> {
        self.routed
    }
    /// For a gateway's session key: whether a turn runs for it now, as its routing row
    /// in state.db marks one (None: not a gateway's session key).
    pub fn gateway_turn(&self) -> Option<bool> {
        (self.row.present & GATEWAY != 0).then_some(self.row.present & TURN != 0)
    }
    pub fn started_at(&self) -> Option<f64> {
        known(self.row.started_at)
    }
    pub fn ended_at(&self) -> Option<f64> {
        known(self.row.ended_at)
    }
    /// The freshest of `last_activity_at` and the newest message, else `started_at`.
    pub fn last_activity(&self) -> Option<f64> {
        known(self.row.last_activity)
    }
    pub fn messages(&self) -> u64 {
        u64::from(self.row.messages)
    }

    /// This context on its own.
    pub fn to_context(&self) -> SessionContext {
        SessionContext {
            session_id: self.session_id().to_owned(),
            title: self.title().map(str::to_owned),
            source: self.source().map(str::to_owned),
            started_at: self.started_at(),
            ended_at: self.ended_at(),
            end_reason: self.end_reason().map(str::to_owned),
            last_activity: self.last_activity(),
            messages: self.messages(),
            routed_session_id: self.routed_session_id().map(str::to_owned),
            gateway_turn: self.gateway_turn(),
        }
    }

    /// Everything it says, to compare by (a NaN time is no time).
    #[allow(clippy::type_complexity)]
    fn said(&self) -> (&'a str, [Option<&'a str>; 4], [Option<f64>; 3], u64, Option<bool>) {
        (
            self.session_id(),
            [self.title(), self.source(), self.end_reason(), self.routed_session_id()],
            [self.started_at(), self.ended_at(), self.last_activity()],
            self.messages(),
            self.gateway_turn(),
        )
    }
}

impl PartialEq for ContextRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.said() == other.said()
    }
}

/// As a [`SessionContext`] is: its fields, in its order.
impl Serialize for ContextRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("SessionContext", 8)?;
        s.serialize_field("session_id", self.session_id())?;
        s.serialize_field("title", &self.title())?;
        s.serialize_field("source", &self.source())?;
        s.serialize_field("started_at", &self.started_at())?;
        s.serialize_field("ended_at", &self.ended_at())?;
        s.serialize_field("end_reason", &self.end_reason())?;
        s.serialize_field("last_activity", &self.last_activity())?;
        s.serialize_field("messages", &self.messages())?;
        // Only for a gateway's session key, as a SessionContext skips them.
        match self.routed_session_id() {
            Some(id) => s.serialize_field("routed_session_id", id)?,
            None => s.skip_field("routed_session_id")?,
        }
        match self.gateway_turn() {
            Some(turn) => s.serialize_field("gateway_turn", &turn)?,
            None => s.skip_field("gateway_turn")?,
        }
        s.end()
    }
}

/// Contexts by session id, each id once.
#[derive(Debug, Clone, Default)]
pub struct ContextMap {
    /// The contexts' strings, one after another, in texts of [`TEXT_SIZE`] (or one
    /// context's strings, when longer).
    texts: Vec<String>,
    /// Sorted by id once [`ContextMap::sort`] has run.
    rows: Vec<Row>,
    /// A gateway's session keys and the stored sessions they route to, sorted by key: a
    /// few beside the rows (a row's room for them would be 8 bytes on every row).
    routed: Vec<(Box<str>, Box<str>)>,
}

/// [`Row::present`]'s bits past the optional strings': a gateway's session key, and a turn
/// running for it.
const GATEWAY: u8 = 1 << 4;
const TURN: u8 = 1 << 5;

/// How long a text of a map is.
const TEXT_SIZE: usize = 64 * 1024;

/// `s`, cut to what a row's length can say (no string SQLite holds is that long).
fn within_u32(s: &str) -> (&str, u32) {
    let mut end = s.len().min(u32::MAX as usize);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (s.get(..end).unwrap_or(""), u32::try_from(end).unwrap_or(0))
}

impl ContextMap {
    /// An empty map with room for `rows` contexts.
    pub(super) fn with_capacity(rows: usize) -> ContextMap {
        ContextMap { texts: Vec::new(), rows: Vec::with_capacity(rows), routed: Vec::new() }
    }

    /// Add a context with these strings and times and no messages; found by id once
    /// [`ContextMap::sort`] has run.
    /// `gateway`: for a gateway's session key, whether a turn runs for it, and the stored
    /// session it routes to.
    pub(super) fn push(
        &mut self,
        strings: [Option<&str>; 4],
        times: [Option<f64>; 3],
        gateway: Option<(bool, Option<&str>)>,
    ) {
        if let (Some(key), Some((_, Some(routed)))) = (strings[0], gateway) {
            self.routed.push((key.into(), routed.into()));
        }
        let strings = strings.map(|s| s.map(within_u32));
        let needed = strings.iter().flatten().map(|(s, _)| s.len()).sum::<usize>();
        // A text is never grown (which would copy it): the next one is begun.
        if self.texts.last().is_none_or(|t| t.capacity() - t.len() < needed) {
            // What room the text it leaves has (a context longer than a text, or the few
            // bytes no other fits), given back in place.
            if let Some(full) = self.texts.last_mut() {
                full.shrink_to_fit();
            }
            self.texts.push(String::with_capacity(needed.max(TEXT_SIZE)));
        }
        let text_index = u32::try_from(self.texts.len().saturating_sub(1)).unwrap_or(u32::MAX);
        let Some(text) = self.texts.last_mut() else { return };
        // Under the text's size, or 0 in a text of one context's strings: in range of u32.
        let start = u32::try_from(text.len()).unwrap_or(u32::MAX);
        let mut lens = [0u32; 4];
        let mut present = match gateway {
            Some((true, _)) => GATEWAY | TURN,
            Some((false, _)) => GATEWAY,
            None => 0,
        };
        for (i, part) in strings.into_iter().enumerate() {
            let Some((part, len)) = part else { continue };
            text.push_str(part);
            if let Some(slot) = lens.get_mut(i) {
                *slot = len;
            }
            if i > 0 {
                present |= 1 << (i - 1);
            }
        }
        let [started_at, ended_at, last_activity] = times.map(|t| t.unwrap_or(f64::NAN));
        self.rows.push(Row {
            text: text_index,
            start,
            lens,
            present,
            messages: 0,
            started_at,
            ended_at,
            last_activity,
        });
    }

    fn add(&mut self, session_id: &str, c: &SessionContext) {
        self.push(
            [Some(session_id), c.title.as_deref(), c.source.as_deref(), c.end_reason.as_deref()],
            [c.started_at, c.ended_at, c.last_activity],
            c.gateway_turn.map(|turn| (turn, c.routed_session_id.as_deref())),
        );
        if let Some(row) = self.rows.last_mut() {
            row.messages = u32::try_from(c.messages).unwrap_or(u32::MAX);
        }
    }

    /// Sort the rows by id, in place (a stable sort would take a second list as big); of
    /// two with one id, one stays: state.db's ids are unique, so two are one row asked
    /// for twice.
    pub(super) fn sort(&mut self) {
        let texts = self.texts.as_slice();
        let id = |row: &Row| row.part(texts, 0);
        self.rows.sort_unstable_by(|a, b| id(a).cmp(id(b)));
        self.rows.dedup_by(|a, b| id(a) == id(b));
        self.rows.shrink_to_fit();
        self.routed.sort_unstable();
        self.routed.dedup_by(|a, b| a.0 == b.0);
        // The last text's spare room, given back in place (a console keeps a map for each
        // profile, most of a few sessions).
        if let Some(last) = self.texts.last_mut() {
            last.shrink_to_fit();
        }
    }

    fn at(&self, i: usize) -> Option<ContextRef<'_>> {
        self.rows.get(i).map(|row| self.context(row))
    }

    fn context<'a>(&'a self, row: &'a Row) -> ContextRef<'a> {
        let routed = match row.present & GATEWAY {
            0 => None,
            _ => {
                let key = row.part(&self.texts, 0);
                let at = self.routed.binary_search_by(|(k, _)| (**k).cmp(key)).ok();
                at.and_then(|i| self.routed.get(i)).map(|(_, r)| &**r)
            }
        };
        ContextRef { texts: &self.texts, row, routed }
    }

    pub fn get(&self, session_id: &str) -> Option<ContextRef<'_>> {
        self.position(session_id).and_then(|i| self.at(i))
    }

    fn position(&self, session_id: &str) -> Option<usize> {
        self.rows.binary_search_by(|row| row.part(&self.texts, 0).cmp(session_id)).ok()
    }

    /// The id the messages of the context at `i` carry: a gateway's session key's are
    /// its routed session's.
    pub(super) fn messages_id_at(&self, i: usize) -> &str {
        self.at(i).map_or("", |c| c.routed_session_id().unwrap_or(c.session_id()))
    }

    /// One message more for the context at `i`, and its time (when known) taken into its
    /// last activity.
    pub(super) fn count_message(&mut self, i: usize, at: Option<f64>) {
        let Some(row) = self.rows.get_mut(i) else { return };
        row.messages = row.messages.saturating_add(1);
        if let Some(t) = at {
            row.last_activity = known(row.last_activity).map_or(t, |n| n.max(t));
        }
    }

    /// Each context's start taken as its last activity where it has none.
    pub(super) fn last_activity_or_start(&mut self) {
        for row in &mut self.rows {
            if row.last_activity.is_nan() {
                row.last_activity = row.started_at;
            }
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Every context, in session id order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = ContextRef<'_>> + '_ {
        self.rows.iter().map(|row| self.context(row))
    }
}

/// Two maps with the same contexts, however their texts are laid out.
impl PartialEq for ContextMap {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.values().zip(other.values()).all(|(a, b)| a == b)
    }
}

impl FromIterator<SessionContext> for ContextMap {
    fn from_iter<I: IntoIterator<Item = SessionContext>>(iter: I) -> ContextMap {
        let mut map = ContextMap::default();
        for c in iter {
            map.add(&c.session_id, &c);
        }
        map.sort();
        map
    }
}

/// (id, context) pairs, as a map was built: the context is found by the pair's id.
impl FromIterator<(String, SessionContext)> for ContextMap {
    fn from_iter<I: IntoIterator<Item = (String, SessionContext)>>(iter: I) -> ContextMap {
        let mut map = ContextMap::default();
        for (id, c) in iter {
            map.add(&id, &c);
        }
        map.sort();
        map
    }
}

/// As the map it replaces: an object of session id to context (what `serve --stdio`
/// sends, so hosts of either build read each other).
impl Serialize for ContextMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for c in self.values() {
            map.serialize_entry(c.session_id(), &c)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ContextMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ContextMap, D::Error> {
        let by_id = std::collections::HashMap::<String, SessionContext>::deserialize(deserializer)?;
        Ok(by_id.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(id: &str, messages: u64) -> SessionContext {
        SessionContext {
            started_at: Some(1.5),
            messages,
            ..SessionContext::new(id, Some(&format!("title of {id}")), None, None)
        }
    }

    /// Each string comes back as given, absent or empty or not, in every combination,
    /// among other contexts in one text; JSON carries a context as its fields, and back.
    #[test]
    fn a_contexts_strings_in_one_text_are_each_as_given() {
        let choices = [None, Some(""), Some("é 😀 \"x\""), Some("tui_shutdown")];
        let mut all = Vec::new();
        for title in choices {
            for source in choices {
                for end_reason in choices {
                    for id in ["", "chat-1", "a b é"] {
                        let id = format!("{id}{}", all.len());
                        let mut c = SessionContext::new(&id, title, source, end_reason);
                        c.ended_at = Some(2.5);
                        c.messages = 3;
                        all.push(c);
                    }
                }
            }
        }
        let map: ContextMap = all.iter().cloned().collect();
        assert_eq!(map.len(), all.len());
        for c in &all {
            let got = map.get(&c.session_id).expect("found by its id");
            assert_eq!(
                (got.session_id(), got.title(), got.source(), got.end_reason()),
                (c.session_id.as_str(), c.title.as_deref(), c.source.as_deref(), c.end_reason.as_deref())
            );
            assert_eq!(&got.to_context(), c);
            let json = serde_json::to_value(got).expect("serializes");
            assert_eq!(
                json,
                serde_json::json!({"session_id": c.session_id, "title": c.title, "source": c.source,
                    "started_at": null, "ended_at": 2.5, "end_reason": c.end_reason,
                    "last_activity": null, "messages": 3})
            );
            assert_eq!(serde_json::from_value::<SessionContext>(json).expect("reads back"), *c);
        }
    }

    #[test]
    fn a_context_is_found_by_its_id_once() {
        let map: ContextMap =
            ["b", "a", "c", "a", "é", "a b"].iter().enumerate().map(|(i, id)| ctx(id, i as u64)).collect();
        assert_eq!(map.len(), 5);
        assert!(matches!(map.get("a").map(|c| c.messages()), Some(1 | 3)), "one of the two");
        assert_eq!(map.get("b").map(|c| c.messages()), Some(0));
        assert_eq!(map.get("é").map(|c| c.messages()), Some(4));
        assert_eq!(map.get("a b").map(|c| c.messages()), Some(5));
        assert!(map.get("d").is_none() && map.get("").is_none());
        let ids: Vec<&str> = map.values().map(|c| c.session_id()).collect();
        assert_eq!(ids, ["a", "a b", "b", "c", "é"]);
    }

    /// A message counts once and its time, when later, becomes the last activity; a
    /// context with no activity takes its start.
    #[test]
    fn messages_count_and_move_the_last_activity_on() {
        let mut map: ContextMap = [("a", Some(5.0)), ("b", None)]
            .into_iter()
            .map(|(id, started)| SessionContext { started_at: started, ..SessionContext::new(id, None, None, None) })
            .collect();
        let a = (0..map.len()).find(|&i| map.messages_id_at(i) == "a").expect("a");
        map.count_message(a, Some(7.0));
        map.count_message(a, Some(6.0));
        map.count_message(a, None);
        map.last_activity_or_start();
        let got = map.get("a").expect("a");
        assert_eq!((got.messages(), got.last_activity()), (3, Some(7.0)));
        let b = map.get("b").expect("b");
        assert_eq!((b.messages(), b.last_activity(), b.started_at()), (0, None, None));
    }

    /// A map of a few contexts keeps no spare text; one of many fills each text but the
    /// last, and a context longer than a text has one of its own.
    #[test]
    fn a_map_keeps_its_texts_without_spare_room() {
        let spare = |m: &ContextMap| m.texts.iter().map(|t| t.capacity() - t.len()).sum::<usize>();
        let few: ContextMap = ["a", "b", "c"].iter().map(|id| ctx(id, 1)).collect();
        assert_eq!((few.texts.len(), spare(&few)), (1, 0));
        let long = "é".repeat(TEXT_SIZE);
        let many: ContextMap = (0..10_000)
            .map(|i| {
                if i == 5_000 { SessionContext::new("long", Some(&long), None, None) } else { ctx(&format!("s{i}"), i) }
            })
            .collect();
        assert_eq!(spare(&many), 0, "in {} texts", many.texts.len());
        assert_eq!(many.get("long").and_then(|c| c.title()), Some(long.as_str()));
        assert_eq!(many.get("s9999").map(|c| c.messages()), Some(9999));
        assert!(many.texts.iter().any(|t| t.len() == long.len() + 4), "the long one has a text of its own");
    }

    #[test]
    fn it_travels_as_the_map_it_replaced() {
        let map: ContextMap = ["x", "y"].iter().map(|id| ctx(id, 2)).collect();
        let text = serde_json::to_string(&map).expect("serialize");
        let as_map: std::collections::HashMap<String, SessionContext> =
            serde_json::from_str(&text).expect("an object of id to context");
        assert_eq!(as_map.len(), 2);
        assert_eq!(as_map.get("y"), map.get("y").map(|c| c.to_context()).as_ref());
        let sent = serde_json::to_string(&as_map).expect("the map serialized");
        let back: ContextMap = serde_json::from_str(&sent).expect("read back");
        assert_eq!(back, map);
    }
}
