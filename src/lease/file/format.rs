//! A registry's text and its meaning (spec §3): strict parsing (BOM tolerated, legacy
//! list accepted, every entry validated, every problem named) and Hermes' exact bytes
//! on the way back. Pure: reading and writing the file is `registry`'s.

use std::borrow::Cow;
use std::collections::HashSet;
use std::hash::BuildHasher;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::lease::format::entry::{Entry, NothingSeen};
use crate::lease::format::layout;
use crate::lease::format::problem::{Problem, Rule};
use crate::lease::format::pyjson::{self, MAX_JSON_VALUES, not_json_detail, too_many_values};
use rustc_hash::FxBuildHasher as FxBuild;

/// A parsed, strictly valid registry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RegistryFile {
    pub entries: Vec<Entry>,
    /// Top-level keys other than `entries` (kept on rewrite, though Hermes drops them).
    pub extra: Map<String, Value>,
}

/// Validation stops listing problems after this many.
pub const MAX_PROBLEMS: usize = 100;

/// The top-level object in one pass: the entries list as borrowed text spans (no
/// tree), every other key as a value. A repeated key keeps the last, as Python does.
struct TopLevel<'a> {
    entries: Option<ListOrValue<'a>>,
    extra: Map<String, Value>,
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for TopLevel<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = TopLevel<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "an object")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<TopLevel<'a>, M::Error> {
                let mut top = TopLevel { entries: None, extra: Map::new() };
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "entries" {
                        top.entries = Some(map.next_value()?);
                    } else {
                        top.extra.insert(key.into_owned(), map.next_value()?);
                    }
                }
                Ok(top)
            }
        }
        d.deserialize_map(Visit(std::marker::PhantomData))
    }
}

/// The entries list as borrowed text spans, in one pass; anything else as a value.
enum ListOrValue<'a> {
    List(Vec<&'a RawValue>),
    Other(Value),
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for ListOrValue<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = ListOrValue<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "a list of entries")
            }
            fn visit_seq<S: serde::de::SeqAccess<'de>>(self, mut seq: S) -> Result<ListOrValue<'a>, S::Error> {
                let mut list = Vec::new();
                while let Some(item) = seq.next_element::<&'de RawValue>()? {
                    list.push(item);
                }
                Ok(ListOrValue::List(list))
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(self, map: M) -> Result<ListOrValue<'a>, M::Error> {
                // Through Value's own visitor: it also knows serde_json's arbitrary-precision numbers.
                let v = <Value as serde::Deserialize>::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(ListOrValue::Other(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<ListOrValue<'a>, E> {
                Ok(ListOrValue::Other(Value::String(v.to_owned())))
            }
            fn visit_bool<E>(self, v: bool) -> Result<ListOrValue<'a>, E> {
                Ok(ListOrValue::Other(Value::Bool(v)))
            }
            fn visit_unit<E>(self) -> Result<ListOrValue<'a>, E> {
                Ok(ListOrValue::Other(Value::Null))
            }
            fn visit_i64<E>(self, v: i64) -> Result<ListOrValue<'a>, E> {
                Ok(ListOrValue::Other(Value::from(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<ListOrValue<'a>, E> {
                Ok(ListOrValue::Other(Value::from(v)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<ListOrValue<'a>, E> {
                Ok(ListOrValue::Other(Value::from(v)))
            }
        }
        d.deserialize_any(Visit(std::marker::PhantomData))
    }
}

/// A file that is not JSON to us, the depth named when nesting was the trouble
/// (serde_json reads 128 levels; Python's json about 1,000).
fn not_json_in(e: &pyjson::NotJson, text: &[u8]) -> Vec<Problem> {
    file_problem(Rule::NotJson, not_json_detail(e, text))
}

fn file_problem(rule: Rule, detail: String) -> Vec<Problem> {
    vec![Problem { rule, entry_index: None, lease_id: None, detail }]
}

/// Parse registry bytes strictly (spec §3): BOM tolerated, legacy list accepted,
/// every entry validated. Returns every problem found.
pub fn parse(bytes: &[u8]) -> Result<RegistryFile, Vec<Problem>> {
    parse_owned(bytes.to_vec()).result
}

/// A parse of bytes it kept.
pub struct Parsed {
    pub result: Result<RegistryFile, Vec<Problem>>,
    /// The bytes were exactly Hermes' layout of the entries' texts.
    pub hermes_layout: bool,
    /// The bytes: as text, which the entries of a file in Hermes' layout borrow, or as
    /// they were when they are not UTF-8.
    pub text: Result<Arc<String>, Vec<u8>>,
}

/// [`parse`] of bytes it keeps: the entries of a file in Hermes' layout borrow its text
/// (no copy of the file, and no allocation per entry).
pub fn parse_owned(bytes: Vec<u8>) -> Parsed {
    let whole = match text_of(bytes) {
        Ok(whole) => whole,
        Err((problems, bytes)) => return Parsed { result: Err(problems), hermes_layout: false, text: Err(bytes) },
    };
    let (result, hermes_layout) = match parse_text(&whole, &mut |e| e) {
        Ok((entries, extra, hermes_layout)) => (Ok(RegistryFile { entries, extra }), hermes_layout),
        Err(problems) => (Err(problems), false),
    };
    Parsed { result, hermes_layout, text: Ok(whole) }
}

/// [`parse_owned`] of a registry whose entries are wanted only as `each` makes them into
/// something else (a one-shot listing's views): each valid entry is handed over as it is
/// read, so the entries are never all held beside what they become. The file's other
/// top-level members come too; the text the entries borrow lives as long as they do.
pub fn parse_owned_into<T>(bytes: Vec<u8>, each: &mut impl FnMut(Entry) -> T) -> ParsedInto<T> {
    match text_of(bytes) {
        Ok(whole) => {
            ParsedInto { result: parse_text(&whole, each).map(|(items, extra, _)| (items, extra)), text: Ok(whole) }
        }
        Err((problems, bytes)) => ParsedInto { result: Err(problems), text: Err(bytes) },
    }
}

/// What a file's valid entries became, and its other top-level members.
pub(crate) type Made<T> = (Vec<T>, Map<String, Value>);

/// [`Parsed`], of entries made into something else as they were read.
pub struct ParsedInto<T> {
    /// What each valid entry became, and the file's other top-level members.
    pub result: Result<Made<T>, Vec<Problem>>,
    /// As in [`Parsed`].
    pub text: Result<Arc<String>, Vec<u8>>,
}

/// The bytes as text without a copy, or the problem with the bytes when not UTF-8.
fn text_of(bytes: Vec<u8>) -> Result<Arc<String>, (Vec<Problem>, Vec<u8>)> {
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Arc::new(text)),
        Err(e) => {
            // Named as in the text after any BOM, where the offsets count from.
            let bytes = e.into_bytes();
            let after_bom = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
            let detail = std::str::from_utf8(after_bom)
                .err()
                .map_or_else(|| "not UTF-8".to_owned(), |e| format!("not UTF-8 ({e})"));
            Err((file_problem(Rule::Unreadable, detail), bytes))
        }
    }
}

type ParsedText<T> = (Vec<T>, Map<String, Value>, bool);

fn parse_text<T>(whole: &Arc<String>, each: &mut impl FnMut(Entry) -> T) -> Result<ParsedText<T>, Vec<Problem>> {
    let text = whole.strip_prefix('\u{FEFF}').unwrap_or(whole);
    let bytes = text.as_bytes();
    let too_many = || {
        file_problem(
            Rule::Unreadable,
            format!("holds more than {MAX_JSON_VALUES} JSON values (a limit that keeps memory bounded)"),
        )
    };
    // In Hermes' layout the values are counted as the entries are read; any other text
    // is counted before it is parsed.
    match parse_hermes_layout(text, Some(whole), each) {
        // With a BOM the bytes are not the layout itself.
        Some(Ok(items)) => return Ok((items, Map::new(), whole.len() == text.len())),
        Some(Err(TooManyValues)) => return Err(too_many()),
        None if too_many_values(bytes) => return Err(too_many()),
        None => {}
    }
    let (list, extra) = split_general(text, bytes)?;
    let mut seen: HashSet<std::borrow::Cow<str>, FxBuild> =
        HashSet::with_capacity_and_hasher(list.len().min(65_536), Default::default());
    let mut members = Vec::with_capacity(16);
    let mut entries = Vec::with_capacity(list.len().min(65_536));
    let mut problems = Vec::new();
    for (index, item) in list.iter().enumerate() {
        match Entry::from_text_with(index, item, &seen, &mut members) {
            Ok(entry) => {
                let id = match entry.lease_id_in(item) {
                    Some(borrowed) => std::borrow::Cow::Borrowed(borrowed),
                    None => std::borrow::Cow::Owned(entry.lease_id().to_owned()),
                };
                seen.insert(id);
                entries.push(each(entry));
            }
            Err(mut p) => {
                problems.append(&mut p);
                if problems.len() >= MAX_PROBLEMS {
                    problems.push(Problem {
                        rule: problems[0].rule,
                        entry_index: None,
                        lease_id: None,
                        detail: format!("… stopped after {MAX_PROBLEMS} problems"),
                    });
                    return Err(problems);
                }
            }
        }
    }
    if problems.is_empty() { Ok((entries, extra, false)) } else { Err(problems) }
}

/// A registry's entries as texts, and its other top-level members.
type Split<'t> = (Vec<Cow<'t, str>>, Map<String, Value>);

/// The entries' texts and the other top-level members of a registry that is not in
/// Hermes' exact layout. serde_json splits it without building a tree for any entry;
/// a text only Python's json reads (its `NaN`/`Infinity` constants) is read whole by
/// [`pyjson::parse`] and each entry rendered back to text.
fn split_general<'t>(text: &'t str, bytes: &[u8]) -> Result<Split<'t>, Vec<Problem>> {
    let trimmed = text.trim_start();
    let split: Result<(Vec<&RawValue>, Map<String, Value>), serde_json::Error> = if trimmed.starts_with('[') {
        serde_json::from_str(text).map(|list| (list, Map::new()))
    } else if trimmed.starts_with('{') {
        match serde_json::from_str::<TopLevel>(text) {
            Ok(TopLevel { entries: Some(ListOrValue::List(list)), extra }) => Ok((list, extra)),
            Ok(TopLevel { entries: Some(ListOrValue::Other(v)), .. }) => return entries_of(json!({"entries": v})),
            Ok(TopLevel { entries: None, .. }) => return entries_of(json!({})),
            Err(e) => Err(e),
        }
    } else {
        return entries_of(pyjson::parse(text).map_err(|e| not_json_in(&e, bytes))?);
    };
    match split {
        Ok((list, extra)) => {
            if let Some(digits) = pyjson::find_overlong_int(&Value::Object(extra.clone())) {
                return Err(not_json_in(&pyjson::overlong(digits), bytes));
            }
            Ok((list.into_iter().map(|item| Cow::Borrowed(item.get())).collect(), extra))
        }
        Err(_) if pyjson::may_hold_constants(bytes) => {
            entries_of(pyjson::parse(text).map_err(|e| not_json_in(&e, bytes))?)
        }
        Err(e) => Err(not_json_in(&e.into(), bytes)),
    }
}

/// The entries (as canonical text) and other members of a registry read whole, or
/// the shape rule it breaks.
fn entries_of(top: Value) -> Result<Split<'static>, Vec<Problem>> {
    let texts = |list: Vec<Value>| list.iter().map(|v| Cow::Owned(pyjson::to_string(v))).collect();
    match top {
        Value::Array(list) => Ok((texts(list), Map::new())),
        Value::Object(mut map) => match map.remove("entries") {
            Some(Value::Array(list)) => Ok((texts(list), map)),
            Some(other) => {
                Err(file_problem(Rule::WrongShape, format!("\"entries\" is {}, not a list", pyjson::kind_of(&other))))
            }
            None => Err(file_problem(Rule::WrongShape, "object without an \"entries\" list".into())),
        },
        other => Err(file_problem(
            Rule::WrongShape,
            format!("top level is {}, not an object with \"entries\" or a list", pyjson::kind_of(&other)),
        )),
    }
}

/// How a registry in Hermes' own layout begins.
pub const HEAD: &str = "{\"entries\": [";

/// A file with [`MAX_JSON_VALUES`] values or more, as [`pyjson::structure`] counts them.
struct TooManyValues;

/// What Hermes and leasectl write, `{"entries": [E, E, …]}` with every entry in
/// canonical form and valid, split and validated in one pass by the canonical
/// scanner; its values counted as they are read, and the read stopped at the bound.
/// None for anything else, even a valid file: the general path decides, and names any
/// problem.
/// `file`: the text `text` is a part of, for the entries to borrow.
/// `each`: what a valid entry becomes (itself, mostly). A file found out of the common
/// case only at its end (a lease id twice) has its entries made again by the general
/// path, so `each` must do nothing but make its result (a view judges through a cache).
fn parse_hermes_layout<T>(
    text: &str,
    file: Option<&Arc<String>>,
    each: &mut impl FnMut(Entry) -> T,
) -> Option<Result<Vec<T>, TooManyValues>> {
    let b = text.as_bytes();
    let mut pos = HEAD.len();
    if !text.starts_with(HEAD) {
        return None;
    }
    let mut entries = Vec::with_capacity((text.len() / 256).min(65_536));
    if &b[pos..] == b"]}" {
        return Some(Ok(entries));
    }
    // The top-level object, its member and the list.
    let mut values = 3;
    // Duplicate lease ids are found at the end, as equal hashes in a sorted list: 8 bytes
    // an entry, where a set of the ids took 16 (and its pages are each a fault in a one-shot
    // process). Equal hashes send the file to the general path, which tells a duplicate
    // from a collision and names the duplicate.
    let mut ids: Vec<u64> = Vec::with_capacity(entries.capacity());
    let mut members = Vec::with_capacity(16);
    loop {
        let (entry, end, entry_values) = layout::canonical_at(text, pos, &NothingSeen, file, &mut members)?;
        values += entry_values;
        if values >= MAX_JSON_VALUES {
            return Some(Err(TooManyValues));
        }
        if entries.len() == entries.capacity() {
            // Room for as many more as the entries read so far say the rest of the text
            // holds, and a little: not doubled past it (a one-shot listing holds a view
            // of each entry, and its peak is this list).
            let more = (text.len() - end) / (end / (entries.len() + 1)).max(1);
            entries.reserve_exact(more + more / 16 + 16);
            ids.reserve_exact(entries.capacity() - ids.len());
        }
        ids.push(FxBuild.hash_one(entry.lease_id()));
        entries.push(each(entry));
        match &b[end..] {
            b"]}" => break,
            [b',', b' ', ..] => {
                pos = end + 2;
                values += 1;
            }
            _ => return None,
        }
    }
    all_distinct(&ids).then_some(Ok(entries))
}

/// Whether no two of `hashes` are equal. Each marks its place in a bitmap of 8 places a
/// hash; only those whose place was marked twice (a few hundred of 10,000) are sorted and
/// compared. Sorting all of them was 2.4 % of an acquire at 10,000 entries.
fn all_distinct(hashes: &[u64]) -> bool {
    let places = (hashes.len() * 8).next_power_of_two().max(64);
    let shift = 64 - places.trailing_zeros();
    // The high bits of a product with an odd constant (Fibonacci hashing): every bit of
    // the hash reaches them.
    let place = |h: u64| (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize;
    let (mut once, mut twice) = (vec![0u64; places / 64], vec![0u64; places / 64]);
    for &h in hashes {
        let (word, bit) = (place(h) / 64, 1u64 << (place(h) % 64));
        twice[word] |= once[word] & bit;
        once[word] |= bit;
    }
    let mut shared: Vec<u64> =
        hashes.iter().copied().filter(|&h| twice[place(h) / 64] & (1u64 << (place(h) % 64)) != 0).collect();
    shared.sort_unstable();
    shared.windows(2).all(|pair| pair[0] != pair[1])
}

/// The text of `entries`' first entry and of those after it that follow it in the same
/// file's text, separated as written there (`, `): one stretch of that text, written as
/// one piece (a registry rewritten with most of its entries as read is a few pieces, not
/// a copy of every entry into a buffer). How many entries it covers, at least one.
fn adjacent_run(entries: &[Entry]) -> (&str, usize) {
    let Some((first, rest)) = entries.split_first() else { return ("", 0) };
    let (file, start, mut end) = first.stretch_of_file();
    let mut taken = 1;
    for next in rest {
        match next.stretch_of_file() {
            (same, next_start, next_end)
                if Arc::ptr_eq(same, file) && file.as_bytes().get(end..next_start) == Some(b", ") =>
            {
                end = next_end;
                taken += 1;
            }
            _ => break,
        }
    }
    match file.get(start..end) {
        Some(run) => (run, taken),
        None => (first.text(), 1),
    }
}

/// The exact bytes Hermes writes for these entries: one line, no trailing newline.
pub fn serialize(file: &RegistryFile) -> String {
    let mut out = String::new();
    serialize_into(file, &mut out);
    out
}

/// [`serialize`] into `out` (cleared first), reusing its buffer.
pub fn serialize_into(file: &RegistryFile, out: &mut String) {
    out.clear();
    out.reserve(64 + file.entries.iter().map(|e| e.text().len() + 2).sum::<usize>());
    serialize_to(file, &mut |piece| out.push_str(piece));
}

/// [`serialize`], piece by piece into `put`: a registry streamed to its file is never
/// whole in memory a second time.
pub fn serialize_to(file: &RegistryFile, put: &mut dyn FnMut(&str)) {
    put("{");
    let mut first = true;
    let mut entries_written = false;
    let put_entries = |put: &mut dyn FnMut(&str), first: &mut bool| {
        if !*first {
            put(", ");
        }
        *first = false;
        put("\"entries\": [");
        let mut rest = file.entries.as_slice();
        while !rest.is_empty() {
            if rest.len() < file.entries.len() {
                put(", ");
            }
            let (piece, taken) = adjacent_run(rest);
            put(piece);
            rest = &rest[taken..];
        }
        put("]");
    };
    let mut member = String::new();
    for (key, value) in &file.extra {
        if !entries_written && key.as_str() > "entries" {
            put_entries(put, &mut first);
            entries_written = true;
        }
        if !first {
            put(", ");
        }
        first = false;
        member.clear();
        pyjson::write_str(&mut member, key);
        member.push_str(": ");
        pyjson::write_value(&mut member, value);
        put(&member);
    }
    if !entries_written {
        put_entries(put, &mut first);
    }
    put("}");
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::lease::file) const SAMPLE: &str = "{\"entries\": [{\"lease_id\": \"0123456789abcdef0123456789abcdef\", \"metadata\": {\"live_session_id\": \"tab-1\"}, \"pid\": 20834, \"process_start_time\": 1795989978.25, \"session_id\": \"S\", \"started_at\": 1795989978.5677974, \"surface\": \"tui\", \"updated_at\": 1795989978.5677974}]}";

    #[test]
    fn round_trip_is_byte_identical() {
        let file = parse(SAMPLE.as_bytes()).expect("valid");
        assert_eq!(serialize(&file), SAMPLE);
    }

    /// Whether `part` lies within `whole`'s bytes.
    pub(in crate::lease::file) fn is_within(part: &str, whole: &[u8]) -> bool {
        let (start, end) = (whole.as_ptr() as usize, whole.as_ptr() as usize + whole.len());
        part.as_ptr() as usize >= start && part.as_ptr() as usize + part.len() <= end
    }

    #[test]
    fn a_files_entries_borrow_its_text_unless_it_is_rendered_anew() {
        let two = SAMPLE.replace("}]}", "}, {\"lease_id\": \"x\", \"pid\": 7, \"session_id\": \"T\"}]}");
        for (text, layout) in [(two.clone(), true), (format!("\u{feff}{two}"), false)] {
            let parsed = parse_owned(text.clone().into_bytes());
            let whole = parsed.text.expect("UTF-8");
            let file = parsed.result.expect("valid");
            assert_eq!(parsed.hermes_layout, layout);
            assert_eq!(file.entries.len(), 2);
            for e in &file.entries {
                assert!(is_within(e.text(), whole.as_bytes()), "borrowed, not copied: {}", e.text());
            }
            // What the entries borrow is the file's text, whole, and it stays with them.
            assert_eq!(whole.as_str(), text);
            drop(whole);
            assert_eq!(serialize(&file), two, "the borrowed texts outlive the parse's own handle");
        }
        // A file in another layout: each entry is its own text, rendered as Hermes writes it.
        let legacy = format!("[{}]", SAMPLE.strip_prefix(HEAD).and_then(|s| s.strip_suffix("]}")).expect("sample"));
        let parsed = parse_owned(legacy.into_bytes());
        let whole = parsed.text.expect("UTF-8");
        let file = parsed.result.expect("valid");
        assert!(!is_within(file.entries[0].text(), whole.as_bytes()));
        assert_eq!(serialize(&file), SAMPLE);
    }

    /// Entries kept as read are written as stretches of the file's text; whatever was
    /// taken out, put in, moved or read from another file, the bytes are each entry's
    /// text joined as Hermes joins them.
    #[test]
    fn entries_written_as_stretches_of_their_file_are_each_entrys_text_joined() {
        let entry = |i: usize| {
            format!(
                "{{\"lease_id\": \"{i:032x}\", \"pid\": 7, \"process_start_time\": null, \"session_id\": \"S{i}\", \"started_at\": 1.5, \"surface\": \"cli\", \"updated_at\": 1.5}}"
            )
        };
        let file_of = |ids: std::ops::Range<usize>| {
            let texts: Vec<String> = ids.map(entry).collect();
            parse_owned(format!("{HEAD}{}]}}", texts.join(", ")).into_bytes())
        };
        let (read, other) = (file_of(0..40), file_of(100..110));
        assert!(read.hermes_layout && other.hermes_layout);
        let (read, other) = (read.result.expect("valid"), other.result.expect("valid"));
        let mut next = crate::lease::format::pyjson::xorshift(0x5851_f42d_4c95_7f2d);
        for _ in 0..300 {
            let mut file = read.clone();
            for _ in 0..next() % 6 {
                let at = next() as usize % (file.entries.len() + 1);
                match next() % 4 {
                    0 if at < file.entries.len() => drop(file.entries.remove(at)),
                    1 => file.entries.insert(at, other.entries[at % other.entries.len()].clone()),
                    2 => file.entries.insert(at, Entry::from_text(0, &entry(200 + at), &NothingSeen).expect("valid")),
                    _ if at + 1 < file.entries.len() => file.entries.swap(at, at + 1),
                    _ => {}
                }
            }
            let joined: Vec<&str> = file.entries.iter().map(Entry::text).collect();
            assert_eq!(serialize(&file), format!("{HEAD}{}]}}", joined.join(", ")));
        }
    }

    /// A lease id twice in a file in Hermes' layout: the general path names it.
    #[test]
    fn equal_hashes_are_found_wherever_they_are() {
        let spread = |n: u64| (0..n).map(|i| FxBuild.hash_one(format!("{i:08x}beefcafe"))).collect::<Vec<u64>>();
        for n in [0, 1, 2, 63, 64, 1_000, 10_000] {
            let hashes = spread(n);
            assert!(all_distinct(&hashes), "{n} distinct hashes");
            for (a, b) in [(0, n / 2), (n / 3, n - 1), (n.saturating_sub(2), n - 1)] {
                if n < 2 || a == b {
                    continue;
                }
                let mut twice = hashes.clone();
                twice[b as usize] = twice[a as usize];
                assert!(!all_distinct(&twice), "{n} hashes, {a} and {b} equal");
            }
        }
        // Hashes that differ only in their low bits, or only in their high bits.
        assert!(all_distinct(&(0..5_000).collect::<Vec<u64>>()));
        assert!(all_distinct(&(0..5_000).map(|i| i << 40).collect::<Vec<u64>>()));
        assert!(!all_distinct(&[7 << 50, 1, 7 << 50]));
    }

    #[test]
    fn a_duplicate_in_hermes_layout_is_named() {
        let twice = SAMPLE.replace("}]}", &format!("}}, {}]}}", &SAMPLE[HEAD.len()..SAMPLE.len() - 2]));
        let problems = parse(twice.as_bytes()).expect_err("a duplicate");
        assert_eq!(problems[0].rule, Rule::DuplicateLeaseId, "{problems:?}");
        assert_eq!(problems[0].entry_index, Some(1));
    }

    #[test]
    fn unknown_fields_survive_and_sort() {
        let text = r#"{"zz_top": {"b": 1, "a": [1.50, "é"]}, "entries": [{"pid": 1, "lease_id": "x", "session_id": "S", "future_field": {"nested": [1e5, null]}}], "aa": true}"#;
        let file = parse(text.as_bytes()).expect("valid");
        assert_eq!(
            serialize(&file),
            r#"{"aa": true, "entries": [{"future_field": {"nested": [100000.0, null]}, "lease_id": "x", "pid": 1, "session_id": "S"}], "zz_top": {"a": [1.5, "é"], "b": 1}}"#
        );
    }

    #[test]
    fn bom_and_legacy_list_are_read_and_written_as_object() {
        let text = "\u{feff}[{\"lease_id\": \"x\", \"session_id\": \"S\", \"pid\": \"12\"}]";
        let file = parse(text.as_bytes()).expect("valid");
        assert_eq!(file.entries[0].pid(), 12);
        assert_eq!(serialize(&file), "{\"entries\": [{\"lease_id\": \"x\", \"pid\": \"12\", \"session_id\": \"S\"}]}");
    }

    #[test]
    fn shapes_are_rejected_with_their_rule() {
        let rule = |t: &str| parse(t.as_bytes()).expect_err("invalid")[0].rule;
        assert_eq!(rule("{\"entries\": [}"), Rule::NotJson);
        assert_eq!(rule("{}"), Rule::WrongShape);
        assert_eq!(rule("{\"entries\": null}"), Rule::WrongShape);
        assert_eq!(rule("\"x\""), Rule::WrongShape);
        assert_eq!(rule("[1]"), Rule::NonObjectEntry);
        assert_eq!(parse(b"\xff\xfe").expect_err("invalid")[0].rule, Rule::Unreadable);
        let dup = r#"[{"lease_id": "a", "session_id": "S", "pid": 1}, {"lease_id": "a", "session_id": "T", "pid": 1}]"#;
        let p = parse(dup.as_bytes()).expect_err("dup");
        assert_eq!((p[0].rule, p[0].entry_index), (Rule::DuplicateLeaseId, Some(1)));
    }

    /// The general path (serde split, then each entry) on the same text.
    /// Errors as (rule, entry) only: the leading space shifts the columns in details.
    fn parse_general(text: &str) -> Result<RegistryFile, Vec<(Rule, Option<usize>)>> {
        // A leading space keeps the one-pass layout check from matching.
        parse(format!(" {text}").as_bytes()).map_err(|p| p.iter().map(|p| (p.rule, p.entry_index)).collect())
    }

    fn parse_verdicts(text: &str) -> Result<RegistryFile, Vec<(Rule, Option<usize>)>> {
        parse(text.as_bytes()).map_err(|p| p.iter().map(|p| (p.rule, p.entry_index)).collect())
    }

    #[test]
    fn the_one_pass_layout_agrees_with_the_general_path() {
        let a = SAMPLE.trim_end_matches("]}");
        let two =
            format!("{a}, {}]}}", &a["{\"entries\": [".len()..].replace("0123456789abcdef0123456789abcdef", "x2"));
        for text in [SAMPLE.to_owned(), "{\"entries\": []}".to_owned(), two.clone()] {
            assert!(matches!(parse_hermes_layout(&text, None, &mut |e| e), Some(Ok(_))), "{text}");
            assert_eq!(parse_verdicts(&text), parse_general(&text));
            assert_eq!(serialize(&parse(text.as_bytes()).expect("valid")), text);
        }
        // Anything off the layout goes the general way, with the same verdicts.
        let dup = two.replace("x2", "0123456789abcdef0123456789abcdef");
        let odd = [
            dup.as_str(),
            "{\"entries\": [] }",
            "{\"entries\": [{\"session_id\": \"S\", \"pid\": 1, \"lease_id\": \"x\"}]}",
            "{\"entries\": [{\"lease_id\": \"x\", \"pid\": 0, \"session_id\": \"S\"}]}",
            "{\"entries\": [{\"lease_id\": \"x\", \"pid\": 1, \"session_id\": \"S\"}],\"b\": 1}",
            "{\"entries\": [{\"lease_id\": \"x\", \"pid\": 1, \"session_id\": \"S\"}]}x",
            "{\"entries\": [{\"lease_id\": \"x\", \"pid\": 1, \"session_id\": \"S\"},]}",
        ];
        for text in odd {
            assert!(parse_hermes_layout(text, None, &mut |e| e).is_none(), "{text}");
            assert_eq!(parse_verdicts(text), parse_general(text), "{text}");
        }
        assert_eq!(parse(dup.as_bytes()).expect_err("duplicate")[0].rule, Rule::DuplicateLeaseId);
    }

    #[test]
    fn a_file_in_hermes_layout_is_refused_at_the_values_bound_as_a_count_before_its_parse_refuses_it() {
        // 500 entries whose metadata holds a list of zeros: the last one's sets the count.
        let entry = |i: usize, zeros: usize| {
            format!(
                "{{\"lease_id\": \"{i:032x}\", \"metadata\": {{\"h\": [{}]}}, \"pid\": 7, \"process_start_time\": null, \
                 \"session_id\": \"S{i}\", \"started_at\": 1.5, \"surface\": \"cli\", \"updated_at\": 1.5}}",
                vec!["0"; zeros].join(", ")
            )
        };
        let file = |last: usize| {
            format!(
                "{HEAD}{}]}}",
                (0..500).map(|i| entry(i, if i == 499 { last } else { 1_000 })).collect::<Vec<_>>().join(", ")
            )
        };
        let values = |text: &str| pyjson::structure(text.as_bytes()).values;
        // Each zero past the first is one comma more.
        let last = MAX_JSON_VALUES - values(&file(1));
        let (under, at) = (file(last), file(last + 1));
        assert_eq!((values(&under), values(&at)), (MAX_JSON_VALUES - 1, MAX_JSON_VALUES));
        let parsed = parse_owned(under.clone().into_bytes());
        assert!(parsed.hermes_layout && !too_many_values(under.as_bytes()));
        assert_eq!(parsed.result.expect("under the bound").entries.len(), 500);
        assert!(too_many_values(at.as_bytes()));
        let refused = parse(at.as_bytes()).expect_err("at the bound");
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].rule, Rule::Unreadable);
        assert!(refused[0].detail.contains("1000000 JSON values"), "{}", refused[0].detail);
    }

    /// What the README's guarantees say of the bound: about 50,000 leases as Hermes writes
    /// them (each with its live session id, here every other one liveness-tracked).
    #[test]
    fn the_values_bound_is_about_fifty_thousand_of_hermes_leases() {
        let file = |n: usize| {
            let entries: Vec<String> = (0..n)
                .map(|i| {
                    let track = if i % 2 == 0 { ", \"track_liveness\": true" } else { "" };
                    format!(
                        "{{\"lease_id\": \"{i:032x}\", \"metadata\": {{\"live_session_id\": \"tab-{i}\"}}, \
                         \"pid\": 20834, \"process_start_time\": 1795989978.25, \"session_id\": \"S{i}\", \
                         \"started_at\": 1795989978.5677974, \"surface\": \"tui\"{track}, \"updated_at\": 1795989978.5677974}}"
                    )
                })
                .collect();
            format!("{HEAD}{}]}}", entries.join(", ")).into_bytes()
        };
        let under = parse_owned(file(49_000));
        assert!(under.hermes_layout);
        assert_eq!(under.result.expect("49,000 leases are read").entries.len(), 49_000);
        let over = parse(&file(51_000)).expect_err("51,000 are past the bound");
        assert_eq!(over[0].rule, Rule::Unreadable);
        assert!(over[0].detail.contains("1000000 JSON values"), "{}", over[0].detail);
    }

    #[test]
    fn empty_registry_serializes_like_hermes() {
        assert_eq!(serialize(&RegistryFile::default()), "{\"entries\": []}");
    }
}
