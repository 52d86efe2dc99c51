//! What state.db says of a session, and the contexts of many sessions found by session
//! id: one list sorted by id. A hash map of them kept every id twice (its key and the
//! context's own) and a quarter of its slots empty, and those slots were touched: at
//! 50,000 sessions 14 MB against 7.6 MB.

use serde::de::{Deserialize, Deserializer};
use serde::ser::{Serialize, SerializeMap, Serializer};

/// What `state.db` says about one session. Its strings are one text (the id, then the
/// title, source and end reason that are there): a listing may hold 50,000 contexts, and
/// each string of its own was an allocation of 32 bytes or more.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(from = "ContextFields", into = "ContextFields")]
pub struct SessionContext {
    strings: Box<str>,
    /// Where the id, the title and the source end in `strings`; the end reason runs to
    /// its end.
    ends: [u32; 3],
    /// Which of the title, source and end reason are there (bits 0, 1 and 2).
    present: u8,
    pub started_at: Option<f64>,
    pub ended_at: Option<f64>,
    /// The freshest of `last_activity_at` and the newest message, else `started_at`.
    pub last_activity: Option<f64>,
    pub messages: u64,
}

impl SessionContext {
    /// A context with these strings, no times and no messages (the caller sets those).
    pub fn new(session_id: &str, title: Option<&str>, source: Option<&str>, end_reason: Option<&str>) -> Self {
        let mut strings = String::with_capacity(
            session_id.len() + [title, source, end_reason].iter().flatten().map(|s| s.len()).sum::<usize>(),
        );
        let mut ends = [0u32; 3];
        let mut present = 0u8;
        // Within a row of state.db (SQLite's strings are under 2^31 bytes): in range of u32.
        let end = |s: &String| u32::try_from(s.len()).unwrap_or(u32::MAX);
        strings.push_str(session_id);
        ends[0] = end(&strings);
        for (i, part) in [title, source, end_reason].into_iter().enumerate() {
            if let Some(part) = part {
                strings.push_str(part);
                present |= 1 << i;
            }
            if let Some(slot) = ends.get_mut(i + 1) {
                *slot = end(&strings);
            }
        }
        SessionContext {
            strings: strings.into_boxed_str(),
            ends,
            present,
            started_at: None,
            ended_at: None,
            last_activity: None,
            messages: 0,
        }
    }

    /// The string `i` (0: id, 1: title, 2: source, 3: end reason).
    fn part(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends.get(i - 1).map_or(0, |&e| e as usize) };
        let end = self.ends.get(i).map_or(self.strings.len(), |&e| e as usize);
        self.strings.get(start..end).unwrap_or("")
    }

    fn optional(&self, i: usize) -> Option<&str> {
        (self.present & (1 << (i - 1)) != 0).then(|| self.part(i))
    }

    pub fn session_id(&self) -> &str {
        self.part(0)
    }
    pub fn title(&self) -> Option<&str> {
        self.optional(1)
    }
    pub fn source(&self) -> Option<&str> {
        self.optional(2)
    }
    pub fn end_reason(&self) -> Option<&str> {
        self.optional(3)
    }

    /// The title, changed (a session renamed).
    pub fn set_title(&mut self, title: Option<&str>) {
        let renamed = SessionContext::new(self.session_id(), title, self.source(), self.end_reason());
        self.strings = renamed.strings;
        self.ends = renamed.ends;
        self.present = renamed.present;
    }

    /// This context under another session id.
    fn with_id(self, session_id: &str) -> SessionContext {
        SessionContext {
            started_at: self.started_at,
            ended_at: self.ended_at,
            last_activity: self.last_activity,
            messages: self.messages,
            ..SessionContext::new(session_id, self.title(), self.source(), self.end_reason())
        }
    }
}

/// A context as its fields, as JSON carries it (`serve --stdio`).
#[derive(serde::Serialize, serde::Deserialize)]
struct ContextFields {
    session_id: String,
    title: Option<String>,
    source: Option<String>,
    started_at: Option<f64>,
    ended_at: Option<f64>,
    end_reason: Option<String>,
    last_activity: Option<f64>,
    messages: u64,
}

impl From<ContextFields> for SessionContext {
    fn from(f: ContextFields) -> SessionContext {
        SessionContext {
            started_at: f.started_at,
            ended_at: f.ended_at,
            last_activity: f.last_activity,
            messages: f.messages,
            ..SessionContext::new(&f.session_id, f.title.as_deref(), f.source.as_deref(), f.end_reason.as_deref())
        }
    }
}

impl From<SessionContext> for ContextFields {
    fn from(c: SessionContext) -> ContextFields {
        ContextFields {
            session_id: c.session_id().to_owned(),
            title: c.title().map(str::to_owned),
            source: c.source().map(str::to_owned),
            started_at: c.started_at,
            ended_at: c.ended_at,
            end_reason: c.end_reason().map(str::to_owned),
            last_activity: c.last_activity,
            messages: c.messages,
        }
    }
}

/// Contexts sorted by session id, each id once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextMap(Vec<SessionContext>);

impl ContextMap {
    /// `contexts` sorted by id, in place (a stable sort would take a second list as big);
    /// of two with one id, one stays: state.db's ids are unique, so two are one row asked
    /// for twice.
    pub fn from_list(mut contexts: Vec<SessionContext>) -> ContextMap {
        contexts.sort_unstable_by(|a, b| a.session_id().cmp(b.session_id()));
        contexts.dedup_by(|a, b| a.session_id() == b.session_id());
        contexts.shrink_to_fit();
        ContextMap(contexts)
    }

    pub fn get(&self, session_id: &str) -> Option<&SessionContext> {
        self.position(session_id).and_then(|i| self.0.get(i))
    }

    pub fn get_mut(&mut self, session_id: &str) -> Option<&mut SessionContext> {
        self.position(session_id).and_then(|i| self.0.get_mut(i))
    }

    fn position(&self, session_id: &str) -> Option<usize> {
        self.0.binary_search_by(|c| c.session_id().cmp(session_id)).ok()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every context, in session id order.
    pub fn values(&self) -> std::slice::Iter<'_, SessionContext> {
        self.0.iter()
    }

    /// The list, to be filled in place (counts and times) without changing any id.
    pub(super) fn contexts_mut(&mut self) -> &mut [SessionContext] {
        &mut self.0
    }
}

impl FromIterator<SessionContext> for ContextMap {
    fn from_iter<I: IntoIterator<Item = SessionContext>>(iter: I) -> ContextMap {
        ContextMap::from_list(iter.into_iter().collect())
    }
}

/// (id, context) pairs, as a map was built: the context is found by the pair's id.
impl FromIterator<(String, SessionContext)> for ContextMap {
    fn from_iter<I: IntoIterator<Item = (String, SessionContext)>>(iter: I) -> ContextMap {
        ContextMap::from_list(
            iter.into_iter().map(|(id, c)| if c.session_id() == id { c } else { c.with_id(&id) }).collect(),
        )
    }
}

/// As the map it replaces: an object of session id to context (what `serve --stdio`
/// sends, so hosts of either build read each other).
impl Serialize for ContextMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for c in &self.0 {
            map.serialize_entry(c.session_id(), c)?;
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

    /// Each string comes back as given, absent or empty or not, in every combination;
    /// JSON carries a context as its fields, and back.
    #[test]
    fn a_contexts_strings_in_one_text_are_each_as_given() {
        let choices = [None, Some(""), Some("é 😀 \"x\""), Some("tui_shutdown")];
        for title in choices {
            for source in choices {
                for end_reason in choices {
                    for id in ["", "chat-1", "a b é"] {
                        let mut c = SessionContext::new(id, title, source, end_reason);
                        c.ended_at = Some(2.5);
                        c.messages = 3;
                        let got = (c.session_id(), c.title(), c.source(), c.end_reason());
                        assert_eq!(got, (id, title, source, end_reason));
                        let json = serde_json::to_value(&c).expect("serializes");
                        assert_eq!(
                            json,
                            serde_json::json!({"session_id": id, "title": title, "source": source,
                                "started_at": null, "ended_at": 2.5, "end_reason": end_reason,
                                "last_activity": null, "messages": 3})
                        );
                        assert_eq!(serde_json::from_value::<SessionContext>(json).expect("reads back"), c);
                    }
                }
            }
        }
    }

    #[test]
    fn a_context_is_found_by_its_id_once() {
        let map: ContextMap =
            ["b", "a", "c", "a", "é", "a b"].iter().enumerate().map(|(i, id)| ctx(id, i as u64)).collect();
        assert_eq!(map.len(), 5);
        assert!(matches!(map.get("a").map(|c| c.messages), Some(1 | 3)), "one of the two");
        assert_eq!(map.get("b").map(|c| c.messages), Some(0));
        assert_eq!(map.get("é").map(|c| c.messages), Some(4));
        assert_eq!(map.get("a b").map(|c| c.messages), Some(5));
        assert!(map.get("d").is_none() && map.get("").is_none());
        let ids: Vec<&str> = map.values().map(SessionContext::session_id).collect();
        assert_eq!(ids, ["a", "a b", "b", "c", "é"]);
    }

    #[test]
    fn it_travels_as_the_map_it_replaced() {
        let map: ContextMap = ["x", "y"].iter().map(|id| ctx(id, 2)).collect();
        let text = serde_json::to_string(&map).expect("serialize");
        let as_map: std::collections::HashMap<String, SessionContext> =
            serde_json::from_str(&text).expect("an object of id to context");
        assert_eq!(as_map.len(), 2);
        assert_eq!(as_map.get("y"), map.get("y"));
        let sent = serde_json::to_string(&as_map).expect("the map serialized");
        let back: ContextMap = serde_json::from_str(&sent).expect("read back");
        assert_eq!(back, map);
    }
}
