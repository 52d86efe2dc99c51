//! An entry read as Hermes' `_lease_entry` lays one out: its members sorted by key,
//! `metadata` only when not empty and `track_liveness` only when true. Read by position:
//! each key with its separator is a constant compared inline, not scanned, ordered and
//! looked up one by one, and each value is read as the kind it should be. What this
//! accepts, the general scan accepts with the same members; anything else is left to it.

use std::sync::Arc;

use crate::lease::format::entry::{CommonFields, Entry, SeenIds, live_id_in_metadata, plain_number, track_liveness_of};
use crate::lease::format::pyjson;

/// The canonical entry starting at `pos` in `text` that passes [`Entry::fast`], where it
/// ends, and its JSON values as [`pyjson::structure`] counts them (the bound on a file's
/// values, counted as it is read): read by Hermes' layout when it has it, else by its
/// keys (`members` is the reusable buffer for them). None: not canonical, or not the
/// common case.
pub(crate) fn canonical_at<'t, S: SeenIds + ?Sized>(
    text: &'t str,
    pos: usize,
    seen: &S,
    file: Option<&Arc<String>>,
    members: &mut Vec<(&'t str, &'t str)>,
) -> Option<(Entry, usize, usize)> {
    if let Some(read) = entry_at(text, pos, seen, file) {
        return Some(read);
    }
    let end = pyjson::canonical_object_at(text, pos, members)?;
    let entry_text = text.get(pos..end)?;
    Some((Entry::fast(members, entry_text, seen, file)?, end, pyjson::structure(entry_text.as_bytes()).values))
}

/// What [`pyjson::structure`] counts in an object of `members` members, outside the
/// members' values: its opening brace, a colon each, the commas between them.
const fn object_values(members: usize) -> usize {
    2 * members
}

/// The entry starting at `pos` in `text` in Hermes' layout that passes the common case's
/// rules, and where it ends; None for any other, which [`Entry::fast`] then reads by its
/// keys.
fn entry_at<S: SeenIds + ?Sized>(
    text: &str,
    pos: usize,
    seen: &S,
    file: Option<&Arc<String>>,
) -> Option<(Entry, usize, usize)> {
    let mut at = Layout { text, p: pos };
    at.key(b"{\"lease_id\": ")?;
    let lease_id = at.plain_string()?;
    // Seven members always; metadata and track_liveness when there, with their values'.
    let mut values = object_values(7);
    let live_session_id = if let Some(live_id) = at.only_live_id() {
        values += 2 + object_values(1);
        Some(live_id)
    } else {
        match at.optional_member(b", \"metadata\": ", &mut values)? {
            Some(metadata) => live_id_in_metadata(metadata)?,
            None => None,
        }
    };
    at.key(b", \"pid\": ")?;
    let pid = at.pid()?;
    at.key(b", \"process_start_time\": ")?;
    let process_start_time = match at.number()? {
        ("null", _) => None,
        (_, value) => Some(value?),
    };
    at.key(b", \"session_id\": ")?;
    let session_id = at.plain_string()?;
    at.key(b", \"started_at\": ")?;
    let (started_text, started_at) = at.number()?;
    // A time that is no number may be any value, and its values count.
    let started_values = if started_at.is_some() { 0 } else { pyjson::structure(started_text.as_bytes()).values };
    values += started_values;
    at.key(b", \"surface\": ")?;
    let surface = match at.null() {
        Some(()) => None,
        None => Some(at.plain_string()?),
    };
    // Hermes writes the member only when true: that text is read as a constant.
    let track_liveness = if at.key(b", \"track_liveness\": true").is_some() {
        values += 2;
        true
    } else {
        match at.optional_member(b", \"track_liveness\": ", &mut values)? {
            Some(track) => track_liveness_of(track)?,
            None => false,
        }
    };
    at.key(b", \"updated_at\": ")?;
    // Mostly the started_at text again, which is a canonical value: not checked twice.
    if at.key_text(started_text, b'}').is_some() {
        values += started_values;
    } else {
        values += pyjson::structure(at.value()?.as_bytes()).values;
    }
    let p = at.p;
    if text.as_bytes().get(p) != Some(&b'}') {
        return None;
    }
    let read = CommonFields {
        lease_id,
        session_id,
        pid,
        surface,
        process_start_time,
        started_at,
        track_liveness,
        live_session_id,
    };
    Some((Entry::of_common(read, text.get(pos..=p)?, seen, file)?, p + 1, values))
}

/// A reader of an entry laid out as Hermes writes one, at `p` in `text`. Each member's
/// key is a constant compared inline, not scanned; each reading moves `p` past what it
/// read, and None means the text is not read so (the general scan decides).
struct Layout<'t> {
    text: &'t str,
    p: usize,
}

impl<'t> Layout<'t> {
    /// Past `key` (with the separator ahead of it) when the text has it here.
    #[inline(always)]
    fn key<const N: usize>(&mut self, key: &[u8; N]) -> Option<()> {
        let here = self.text.as_bytes().get(self.p..self.p + N)?;
        (here == key).then(|| self.p += N)
    }

    /// Past `value` when the text has it here, followed by `then`.
    fn key_text(&mut self, value: &str, then: u8) -> Option<()> {
        let end = self.p + value.len();
        let b = self.text.as_bytes();
        (b.get(self.p..end) == Some(value.as_bytes()) && b.get(end) == Some(&then)).then(|| self.p = end)
    }

    /// The value of the member `key` names when the text has it here (its colon, the comma
    /// before it and the values in it counted into `values`); Some(None) when it has not.
    fn optional_member<const N: usize>(&mut self, key: &[u8; N], values: &mut usize) -> Option<Option<&'t str>> {
        if self.key(key).is_none() {
            return Some(None);
        }
        let value = self.value()?;
        *values += 2 + pyjson::structure(value.as_bytes()).values;
        Some(Some(value))
    }

    /// The live session id of metadata that holds it alone as a plain string, as Hermes
    /// writes it: read in one pass, where the general reading scans it four times (its
    /// end, its values, the member, the string). None, with nothing moved, for any other.
    fn only_live_id(&mut self) -> Option<&'t str> {
        let start = self.p;
        let read = self.key(b", \"metadata\": {\"live_session_id\": ").and_then(|()| self.plain_string());
        match read {
            Some(live_id) if self.key(b"}").is_some() => Some(live_id),
            _ => {
                self.p = start;
                None
            }
        }
    }

    /// Past `null`.
    fn null(&mut self) -> Option<()> {
        self.key(b"null")
    }

    /// Any canonical value's text.
    fn value(&mut self) -> Option<&'t str> {
        let start = self.p;
        self.p = pyjson::member_value_end(self.text, start)?;
        self.text.get(start..self.p)
    }

    /// A string's content when it holds no escape.
    fn plain_string(&mut self) -> Option<&'t str> {
        let start = self.p;
        self.p = pyjson::plain_string_end(self.text.as_bytes(), start)?;
        self.text.get(start + 1..self.p - 1)
    }

    /// A canonical value's text, and the finite number it is (None when it is none).
    /// A number is read in one pass where it can be.
    fn number(&mut self) -> Option<(&'t str, Option<f64>)> {
        let start = self.p;
        if let Some(number) = pyjson::number_at(self.text.as_bytes(), start) {
            self.p = number.end;
            return Some((self.text.get(start..self.p)?, Some(number.value)));
        }
        let span = self.value()?;
        Some((span, plain_number(span)))
    }

    /// A pid: a whole number over 0.
    fn pid(&mut self) -> Option<u64> {
        let pid = match pyjson::number_at(self.text.as_bytes(), self.p) {
            Some(number) => {
                self.p = number.end;
                number.unsigned
            }
            None => self.value()?.parse::<u64>().ok(),
        };
        pid.filter(|&p| p > 0)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// An entry's text as Hermes lays one out, or nearly: its members in sorted order
    /// (sometimes not), each usual key present or not, values of the usual kind or not.
    fn nearly_hermes(next: &mut impl FnMut() -> u64) -> String {
        const STRINGS: [&str; 7] =
            ["\"0123456789abcdef0123456789abcdef\"", "\"S\"", "\" \"", "\"\"", "\"tab\\tx\"", "\"é😀\"", "\"\\u0001\""];
        const OTHERS: [&str; 22] = [
            "null",
            "true",
            "false",
            "0",
            "7",
            "-3",
            "1.5",
            "1796275786.6322465",
            "1796275786.63224650",
            "1796275786.6322464",
            "1E5",
            "NaN",
            "[]",
            "{}",
            "{\"live_session_id\": \"tab-1\"}",
            "{\"a\": [1, {\"b\": null}]}",
            // Metadata near the shape read in one pass: an escape, a character Python would
            // escape, no string, a second member, an empty id.
            "{\"live_session_id\": \"tab\\u0001\"}",
            "{\"live_session_id\": \"\u{e9}\"}",
            "{\"live_session_id\": null}",
            "{\"live_session_id\": 7}",
            "{\"live_session_id\": \"tab-1\", \"z\": 1}",
            "{\"live_session_id\": \"\"}",
        ];
        // Mostly the usual value, so that many whole entries are Hermes' own.
        let mut pick = |usual: &str, list: &[&str]| {
            let r = next();
            if r % 5 < 3 { usual.to_owned() } else { list[(r / 5) as usize % list.len()].to_owned() }
        };
        let mut members: Vec<(&str, String)> = vec![
            ("lease_id", pick("\"0123456789abcdef0123456789abcdef\"", &STRINGS)),
            ("metadata", pick("{\"live_session_id\": \"tab-1\"}", &OTHERS)),
            ("pid", pick("20834", &["20834", "1", "0", "-5", "18446744073709551616", "\"7\"", "020834"])),
            ("process_start_time", pick("1795989978.25", &OTHERS)),
            ("session_id", pick("\"S\"", &STRINGS)),
            ("started_at", pick("1796275786.6322465", &OTHERS)),
            ("surface", pick("\"tui\"", &["\"tui\"", "null", "\"\\n\"", "3"])),
            ("track_liveness", pick("true", &["true", "false", "null", "1"])),
            ("updated_at", pick("1796275786.6322465", &OTHERS)),
            ("zz", pick("null", &OTHERS)),
        ];
        // Any member may be missing; the metadata, track_liveness and a key Hermes does not
        // write, often.
        members.retain(|(key, _)| {
            let r = next() % 8;
            match *key {
                "metadata" | "track_liveness" => r < 4,
                "zz" => r == 0,
                _ => r != 0,
            }
        });
        if next().is_multiple_of(11) && members.len() > 1 {
            let at = next() as usize % (members.len() - 1);
            members.swap(at, at + 1);
        }
        let sep = if next().is_multiple_of(17) { "," } else { ", " };
        let fields: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
        format!("{{{}}}", fields.join(sep))
    }

    /// What the layout reader accepts, the general scan accepts too, with the same entry
    /// (every field) and the same end; and it accepts Hermes' own entries, with and without
    /// metadata and track_liveness.
    #[test]
    fn an_entry_read_by_its_layout_is_the_entry_read_by_its_keys() {
        let mut next = crate::lease::format::pyjson::xorshift(0x3c6e_f372_fe94_f82b);
        let seen: HashSet<String> = ["seen-before".to_owned()].into();
        let mut accepted = 0;
        for _ in 0..20_000 {
            let text = format!("{}, ", nearly_hermes(&mut next));
            let mut members = Vec::new();
            let general = crate::lease::format::pyjson::canonical_object_at(&text, 0, &mut members)
                .and_then(|end| Entry::fast(&members, &text[..end], &seen, None).map(|e| (e, end)));
            let Some((entry, end, values)) = entry_at(&text, 0, &seen, None) else { continue };
            accepted += 1;
            let (want, want_end) = general.unwrap_or_else(|| panic!("read by layout only: {text}"));
            assert_eq!(end, want_end, "{text}");
            assert_eq!(values, crate::lease::format::pyjson::structure(&text.as_bytes()[..end]).values, "{text}");
            let fields = |e: &Entry| {
                (
                    e.text().to_owned(),
                    e.lease_id().to_owned(),
                    e.session_id().to_owned(),
                    e.pid(),
                    e.surface().map(str::to_owned),
                    e.process_start_time().map(f64::to_bits),
                    e.started_at().map(f64::to_bits),
                    e.track_liveness(),
                    e.live_session_id(),
                )
            };
            assert_eq!(fields(&entry), fields(&want), "{text}");
        }
        assert!(accepted > 500, "the layout reader read {accepted} entries of 20,000");
        for hermes in [
            "{\"lease_id\": \"0123456789abcdef0123456789abcdef\", \"metadata\": {\"live_session_id\": \"tab-1\"}, \"pid\": 20834, \"process_start_time\": 1795989978.25, \"session_id\": \"S\", \"started_at\": 1795989978.5677974, \"surface\": \"tui\", \"updated_at\": 1795989978.5677974}",
            "{\"lease_id\": \"a\", \"pid\": 9, \"process_start_time\": null, \"session_id\": \"S\", \"started_at\": 1.5, \"surface\": \"cli\", \"track_liveness\": true, \"updated_at\": 1.5}",
        ] {
            let read = entry_at(hermes, 0, &seen, None).map(|(e, end, _)| (e.lease_id().to_owned(), end));
            assert_eq!(
                read,
                Some((
                    if hermes.contains("\"a\"") { "a" } else { "0123456789abcdef0123456789abcdef" }.to_owned(),
                    hermes.len()
                ))
            );
        }
        let again = "{\"lease_id\": \"seen-before\", \"pid\": 9, \"process_start_time\": null, \"session_id\": \"S\", \"started_at\": 1.5, \"surface\": \"cli\", \"updated_at\": 1.5}";
        assert!(entry_at(again, 0, &seen, None).is_none(), "a lease id seen before");
    }
}
