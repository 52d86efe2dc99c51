//! What state.db says of a session, and the contexts of many sessions found by session
//! id: one list sorted by id. A hash map of them kept every id twice (its key and the
//! context's own) and a quarter of its slots empty, and those slots were touched: at
//! 50,000 sessions 14 MB against 7.6 MB.

use serde::de::{Deserialize, Deserializer};
use serde::ser::{Serialize, SerializeMap, Serializer};

/// What `state.db` says about one session. Its strings are boxed (16 bytes, not a
/// String's 24): a listing may hold 50,000 of these.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SessionContext {
    pub session_id: Box<str>,
    pub title: Option<Box<str>>,
    pub source: Option<Box<str>>,
    pub started_at: Option<f64>,
    pub ended_at: Option<f64>,
    pub end_reason: Option<Box<str>>,
    /// The freshest of `last_activity_at` and the newest message, else `started_at`.
    pub last_activity: Option<f64>,
    pub messages: u64,
}

/// Contexts sorted by session id, each id once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextMap(Vec<SessionContext>);

impl ContextMap {
    /// `contexts` sorted by id, in place (a stable sort would take a second list as big);
    /// of two with one id, one stays: state.db's ids are unique, so two are one row asked
    /// for twice.
    pub fn from_list(mut contexts: Vec<SessionContext>) -> ContextMap {
        contexts.sort_unstable_by(|a, b| a.session_id.cmp(&b.session_id));
        contexts.dedup_by(|a, b| a.session_id == b.session_id);
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
        self.0.binary_search_by(|c| (*c.session_id).cmp(session_id)).ok()
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
            iter.into_iter()
                .map(|(id, mut c)| {
                    c.session_id = id.into_boxed_str();
                    c
                })
                .collect(),
        )
    }
}

/// As the map it replaces: an object of session id to context (what `serve --stdio`
/// sends, so hosts of either build read each other).
impl Serialize for ContextMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for c in &self.0 {
            map.serialize_entry(&c.session_id, c)?;
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
            session_id: id.into(),
            title: Some(format!("title of {id}").into()),
            source: None,
            started_at: Some(1.5),
            ended_at: None,
            end_reason: None,
            last_activity: None,
            messages,
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
        let ids: Vec<&str> = map.values().map(|c| &*c.session_id).collect();
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
