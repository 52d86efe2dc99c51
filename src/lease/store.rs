//! Reading and writing the registry file (spec §3): strict read, and an atomic,
//! Hermes-identical write (temp file, fsync, rename; old file kept on any error).

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;

use rustix::fs::FileType;
use std::path::{Path, PathBuf};

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::entry::{Entry, Problem, Rule};
use super::error::{Error, InvalidRegistry};
use super::lock::RegistryLock;
use super::paths::{TEMP_PREFIX, TEMP_SUFFIX};
use super::safe_file::{self, Spot};
use super::{pyjson, recent};
use rustc_hash::FxBuildHasher as FxBuild;

/// Larger files are refused unread, so a hostile registry cannot exhaust memory.
pub const MAX_REGISTRY_BYTES: u64 = 64 * 1024 * 1024;

/// A parsed, strictly valid registry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RegistryFile {
    pub entries: Vec<Entry>,
    /// Top-level keys other than `entries` (kept on rewrite, though Hermes drops them).
    pub extra: Map<String, Value>,
}

/// Read strictly. A missing file is an empty registry; anything invalid is an error
/// naming the rule and the entry.
pub fn read(path: &Path) -> Result<RegistryFile, Error> {
    let mut bytes = Vec::new();
    if !read_into(path, &mut bytes)? {
        return Ok(RegistryFile::default());
    }
    // (parsed, what to remember of it: None when it is remembered already)
    let (parsed, remember) = match recent::lookup(path, &bytes) {
        Some(recent::Found::Same(file)) => (Ok(file), None),
        Some(recent::Found::Reparsed(file)) => (Ok(file), Some(true)),
        None => {
            let (parsed, hermes_layout) = parse_noting_layout(&bytes);
            (parsed, Some(hermes_layout))
        }
    };
    match (&parsed, remember) {
        (Ok(file), Some(hermes_layout)) => recent::remember(path, bytes, file, hermes_layout),
        (Ok(_), None) => {}
        (Err(_), _) => recent::forget(path),
    }
    parsed.map_err(|problems| Error::Invalid(InvalidRegistry { path: path.to_path_buf(), problems }))
}

/// The file's bytes, or None when it does not exist. Too-large files are refused.
pub fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    let mut bytes = Vec::new();
    Ok(read_into(path, &mut bytes)?.then_some(bytes))
}

/// Read the registry into `bytes` (cleared first); false when it does not exist.
fn read_into(path: &Path, bytes: &mut Vec<u8>) -> Result<bool, Error> {
    bytes.clear();
    // Through the one door: a symlink (as the registry or as runtime/), a FIFO or a
    // device is refused unopened; the lock we may hold is never held up by it.
    let mut file = match safe_file::open_read(&Spot::in_subdir(path)) {
        Ok(Some(f)) => f,
        Ok(None) => return Ok(false),
        Err(e) if safe_file::is_refusal(&e) => return Err(Error::Invalid(unreadable(path, e.to_string()))),
        Err(e) => {
            return Err(Error::Invalid(unreadable(path, format!("cannot open: {e}"))));
        }
    };
    let size = match file.metadata() {
        Ok(m) => m.len(),
        Err(e) => return Err(Error::Invalid(unreadable(path, format!("cannot inspect: {e}")))),
    };
    // Sized up front (bounded by the limit): no regrowing copies of a large registry.
    bytes.reserve(size.min(MAX_REGISTRY_BYTES) as usize + 1);
    let limit = MAX_REGISTRY_BYTES + 1;
    if let Err(e) = (&mut file).take(limit).read_to_end(bytes) {
        return Err(Error::Invalid(unreadable(path, format!("cannot read: {e}"))));
    }
    if bytes.len() as u64 > MAX_REGISTRY_BYTES {
        return Err(Error::Invalid(unreadable(
            path,
            format!("larger than the {} MiB limit", MAX_REGISTRY_BYTES / (1024 * 1024)),
        )));
    }
    Ok(true)
}

/// More JSON values than this are refused before parsing: memory stays bounded
/// (a 64 MiB file of `{}, {}, …` would otherwise become gigabytes of tree).
pub const MAX_JSON_VALUES: usize = 1_000_000;
/// Validation stops listing problems after this many.
pub const MAX_PROBLEMS: usize = 100;

/// An upper bound on the values in JSON text without building them: separators and
/// openers, counted even inside strings (a conservative over-count that vectorizes).
pub fn too_many_values(text: &[u8]) -> bool {
    if text.len() <= MAX_JSON_VALUES {
        return false;
    }
    // Byte counters over chunks of 255 (at most one match per byte): this vectorizes.
    let mut total = 0usize;
    for chunk in text.chunks(255) {
        let mut count: u8 = 0;
        for &b in chunk {
            count += u8::from((b == b',') | (b == b':') | (b == b'[') | (b == b'{'));
        }
        total += usize::from(count);
    }
    // The over-count includes separators inside strings; only when it is over the bound
    // are they told apart, so a long string of commas Hermes reads is not refused.
    total >= MAX_JSON_VALUES && structure(text).values >= MAX_JSON_VALUES
}

/// What a scan of JSON text outside its strings finds.
pub struct Structure {
    /// Separators and openers: an upper bound on the values.
    pub values: usize,
    /// The deepest nesting of arrays and objects.
    pub depth: usize,
}

/// The bytes of JSON text outside its strings (a string's opening quote included), with
/// their offsets: what a structural scan looks at.
pub fn outside_strings(text: &[u8]) -> impl Iterator<Item = (usize, u8)> + '_ {
    let (mut in_string, mut escaped) = (false, false);
    text.iter().enumerate().filter_map(move |(i, &b)| {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            return None;
        }
        in_string = b == b'"';
        Some((i, b))
    })
}

/// Scan JSON text, skipping strings (and the escapes in them).
pub fn structure(text: &[u8]) -> Structure {
    let (mut values, mut depth, mut deepest) = (0usize, 0usize, 0usize);
    for (_, b) in outside_strings(text) {
        match b {
            b'[' | b'{' => {
                values += 1;
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b',' | b':' => values += 1,
            _ => {}
        }
    }
    Structure { values, depth: deepest }
}

fn unreadable(path: &Path, detail: String) -> InvalidRegistry {
    InvalidRegistry {
        path: path.to_path_buf(),
        problems: vec![Problem { rule: Rule::Unreadable, entry_index: None, lease_id: None, detail }],
    }
}

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

/// Why `text` is not JSON to us, the depth named when nesting was the trouble.
pub fn not_json_detail(e: &pyjson::NotJson, text: &[u8]) -> String {
    if !e.too_deep {
        return format!("not JSON: {e}");
    }
    let depth = structure(text).depth;
    format!("nested {depth} levels deep: leasectl reads JSON nested up to 128 levels (Python's json, about 1,000)")
}

fn file_problem(rule: Rule, detail: String) -> Vec<Problem> {
    vec![Problem { rule, entry_index: None, lease_id: None, detail }]
}

/// Parse registry bytes strictly (spec §3): BOM tolerated, legacy list accepted,
/// every entry validated. Returns every problem found.
pub fn parse(bytes: &[u8]) -> Result<RegistryFile, Vec<Problem>> {
    parse_noting_layout(bytes).0
}

/// [`parse`], and whether `bytes` were exactly Hermes' layout of the entries' texts.
fn parse_noting_layout(bytes: &[u8]) -> (Result<RegistryFile, Vec<Problem>>, bool) {
    match parse_text(bytes) {
        Ok((file, hermes_layout)) => (Ok(file), hermes_layout),
        Err(problems) => (Err(problems), false),
    }
}

fn parse_text(bytes: &[u8]) -> Result<(RegistryFile, bool), Vec<Problem>> {
    let whole = bytes;
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = std::str::from_utf8(bytes).map_err(|e| file_problem(Rule::Unreadable, format!("not UTF-8 ({e})")))?;
    if too_many_values(bytes) {
        return Err(file_problem(
            Rule::Unreadable,
            format!("holds more than {MAX_JSON_VALUES} JSON values (a limit that keeps memory bounded)"),
        ));
    }
    if let Some(file) = parse_hermes_layout(text) {
        // With a BOM the bytes are not the layout itself.
        return Ok((file, whole.len() == text.len()));
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
                entries.push(entry);
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
    if problems.is_empty() { Ok((RegistryFile { entries, extra }, false)) } else { Err(problems) }
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
                Err(file_problem(Rule::WrongShape, format!("\"entries\" is {}, not a list", short_kind(&other))))
            }
            None => Err(file_problem(Rule::WrongShape, "object without an \"entries\" list".into())),
        },
        other => Err(file_problem(
            Rule::WrongShape,
            format!("top level is {}, not an object with \"entries\" or a list", short_kind(&other)),
        )),
    }
}

/// How a registry in Hermes' own layout begins.
pub const HEAD: &str = "{\"entries\": [";

/// What Hermes and leasectl write, `{"entries": [E, E, …]}` with every entry in
/// canonical form and valid, split and validated in one pass by the canonical
/// scanner. None for anything else, even a valid file: the general path decides,
/// and names any problem.
fn parse_hermes_layout(text: &str) -> Option<RegistryFile> {
    let b = text.as_bytes();
    let mut pos = HEAD.len();
    if !text.starts_with(HEAD) {
        return None;
    }
    let mut entries = Vec::with_capacity((text.len() / 256).min(65_536));
    if &b[pos..] == b"]}" {
        return Some(RegistryFile { entries, extra: Map::new() });
    }
    let mut seen: HashSet<&str, FxBuild> =
        HashSet::with_capacity_and_hasher((text.len() / 256).min(65_536), Default::default());
    let mut members = Vec::with_capacity(16);
    loop {
        let end = pyjson::canonical_object_at(text, pos, &mut members)?;
        let item = &text[pos..end];
        let entry = Entry::fast(&members, item, &seen)?;
        seen.insert(entry.lease_id_in(item)?);
        entries.push(entry);
        match &b[end..] {
            b"]}" => return Some(RegistryFile { entries, extra: Map::new() }),
            [b',', b' ', ..] => pos = end + 2,
            _ => return None,
        }
    }
}

fn short_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
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
    out.push('{');
    let mut first = true;
    let mut entries_written = false;
    let put_entries = |out: &mut String, first: &mut bool| {
        if !*first {
            out.push_str(", ");
        }
        *first = false;
        out.push_str("\"entries\": [");
        for (i, e) in file.entries.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(e.text());
        }
        out.push(']');
    };
    for (key, value) in &file.extra {
        if !entries_written && key.as_str() > "entries" {
            put_entries(out, &mut first);
            entries_written = true;
        }
        if !first {
            out.push_str(", ");
        }
        first = false;
        pyjson::write_str(out, key);
        out.push_str(": ");
        pyjson::write_value(out, value);
    }
    if !entries_written {
        put_entries(out, &mut first);
    }
    out.push('}');
}

/// Replace the registry atomically. The lock guard proves the caller holds the lock.
pub fn write(_lock: &RegistryLock, path: &Path, file: &RegistryFile) -> Result<(), Error> {
    let mut text = String::new();
    serialize_into(file, &mut text);
    let written = write_bytes(path, text.as_bytes());
    match &written {
        Ok(()) => recent::remember(path, text.into_bytes(), file, true),
        Err(_) => recent::forget(path),
    }
    written
}

/// Replace the registry with exact bytes (the demo's corrupt/repair, a restored
/// backup), with the same atomic write as [`write`].
pub fn write_raw(_lock: &RegistryLock, path: &Path, bytes: &[u8]) -> Result<(), Error> {
    recent::forget(path);
    write_bytes(path, bytes)
}

/// Temp file in the same directory, the registry's mode kept (a new one gets
/// `0666 & ~umask`; the temp file is never wider than that), write, fsync, rename.
/// On any error the temp file is removed and the old registry is untouched. Only
/// `runtime/` is created, inside an existing home; root writes as the directory's owner.
fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let spot = Spot::in_subdir(path);
    let (dir_spot, name) = spot.dir_and_name().map_err(|e| Error::io("write", path, e))?;
    let dir = safe_file::Dir::create(&dir_spot).map_err(|e| {
        if safe_file::is_refusal(&e) {
            Error::Refused(format!("{e}: refusing to write the registry"))
        } else {
            Error::io("create the runtime directory", &dir_spot.path(), e)
        }
    })?;
    check_owner(&dir)?;
    let existing_mode = match dir.stat(name) {
        Ok(Some(st)) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
            return Err(Error::Refused(format!(
                "{} is a symlink: refusing to write through it or replace it (make it a regular file)",
                path.display()
            )));
        }
        Ok(Some(st)) => Some(st.st_mode & 0o7777),
        Ok(None) => None,
        Err(e) => return Err(Error::io("inspect the registry", path, e)),
    };
    let (tmp_name, mut tmp) = dir
        .create_temp(TEMP_PREFIX, TEMP_SUFFIX, existing_mode.unwrap_or(0o666) & 0o666)
        .map_err(|e| Error::io("create a temp file in", dir.path(), e))?;
    let tmp_path = dir.path().join(&tmp_name);
    let result = (|| {
        if let Some(mode) = existing_mode {
            // The umask may have narrowed the temp file: give it exactly the registry's mode.
            tmp.set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(|e| Error::io("set the mode of", &tmp_path, e))?;
        }
        failpoint("before-temp-write");
        tmp.write_all(bytes).map_err(|e| Error::io("write", &tmp_path, e))?;
        failpoint("after-temp-write");
        tmp.sync_all().map_err(|e| Error::io("fsync", &tmp_path, e))?;
        failpoint("before-rename");
        dir.rename(&tmp_name, name).map_err(|e| Error::io("rename the temp file over", path, e))?;
        failpoint("after-rename");
        Ok(())
    })();
    if result.is_err() {
        let _ = dir.remove(&tmp_name);
    }
    result
}

/// Refuse to write into a runtime directory owned by another user (unless root):
/// their registry is theirs to change.
fn check_owner(dir: &safe_file::Dir) -> Result<(), Error> {
    let me = rustix::process::geteuid().as_raw();
    let (uid, _) = dir.owner();
    if me != 0 && uid != me {
        return Err(Error::Refused(format!(
            "{} belongs to uid {uid}, and leasectl runs as uid {me}: refusing to write another user's registry",
            dir.path().display(),
        )));
    }
    Ok(())
}

/// A test-only crash point: when `LEASECTL_TEST_FAILPOINT` names this step, the
/// process kills itself there (SIGKILL), so tests can prove a crash at any step of
/// the write leaves either the old or the new registry.
fn failpoint(step: &str) {
    static CHOSEN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let chosen = CHOSEN.get_or_init(|| std::env::var("LEASECTL_TEST_FAILPOINT").ok());
    if chosen.as_deref() == Some(step) {
        let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

/// Leftover Hermes/leasectl temp files in a runtime directory (a crashed writer's).
pub fn leftover_temp_files(runtime_dir: &Path) -> Vec<PathBuf> {
    let names = match safe_file::Dir::open(&Spot::in_home(runtime_dir)) {
        Ok(Some(dir)) => dir.names().unwrap_or_default(),
        _ => vec![],
    };
    let mut out: Vec<PathBuf> = names
        .into_iter()
        .filter(|n| {
            let n = n.to_string_lossy();
            n.starts_with(TEMP_PREFIX) && n.ends_with(TEMP_SUFFIX)
        })
        .map(|n| runtime_dir.join(n))
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "{\"entries\": [{\"lease_id\": \"0123456789abcdef0123456789abcdef\", \"metadata\": {\"live_session_id\": \"tab-1\"}, \"pid\": 20834, \"process_start_time\": 1795989978.25, \"session_id\": \"S\", \"started_at\": 1795989978.5677974, \"surface\": \"tui\", \"updated_at\": 1795989978.5677974}]}";

    #[test]
    fn round_trip_is_byte_identical() {
        let file = parse(SAMPLE.as_bytes()).expect("valid");
        assert_eq!(serialize(&file), SAMPLE);
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
            assert!(parse_hermes_layout(&text).is_some(), "{text}");
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
            assert!(parse_hermes_layout(text).is_none(), "{text}");
            assert_eq!(parse_verdicts(text), parse_general(text), "{text}");
        }
        assert_eq!(parse(dup.as_bytes()).expect_err("duplicate")[0].rule, Rule::DuplicateLeaseId);
    }

    #[test]
    fn remembered_registries_never_hide_a_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("active_sessions.json");
        let lock = crate::lease::lock::lock(&dir.path().join("lock"), std::time::Duration::from_secs(5)).expect("lock");
        let file = parse(SAMPLE.as_bytes()).expect("valid");
        write(&lock, &path, &file).expect("write");
        assert_eq!(read(&path).expect("read back"), file);
        // Another writer changes one byte (same length): the change is seen.
        let other = SAMPLE.replace("\"S\"", "\"T\"");
        std::fs::write(&path, &other).expect("external write");
        assert_eq!(read(&path).expect("changed").entries[0].session_id(), "T");
        // Broken bytes are an error, never the remembered registry.
        std::fs::write(&path, &SAMPLE[..SAMPLE.len() - 1]).expect("external write");
        assert!(read(&path).is_err());
        // And the first bytes again read as the first registry.
        std::fs::write(&path, SAMPLE).expect("external write");
        assert_eq!(read(&path).expect("restored"), file);
        // A raw write is not mistaken for the last structured one.
        write_raw(&lock, &path, other.as_bytes()).expect("raw write");
        assert_eq!(read(&path).expect("raw").entries[0].session_id(), "T");
        std::fs::remove_file(&path).expect("remove");
        assert_eq!(read(&path).expect("missing"), RegistryFile::default());
    }

    #[test]
    fn every_registry_a_thread_reads_is_remembered_however_many() {
        // A console reads the root and every profile in turn: with 12 of them, the
        // first is still remembered when its turn comes again (it was once 4 slots).
        let dir = tempfile::tempdir().expect("tempdir");
        let paths: Vec<PathBuf> = (0..12).map(|i| dir.path().join(format!("r{i}.json"))).collect();
        for p in &paths {
            std::fs::write(p, SAMPLE).expect("write");
            read(p).expect("valid");
        }
        assert_eq!(recent::remembered_count(), 12);
        assert!(matches!(recent::lookup(&paths[0], SAMPLE.as_bytes()), Some(recent::Found::Same(_))));
    }

    #[test]
    fn empty_registry_serializes_like_hermes() {
        assert_eq!(serialize(&RegistryFile::default()), "{\"entries\": []}");
    }
}
