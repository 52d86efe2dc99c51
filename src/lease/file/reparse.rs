//! Parsing a registry against the bytes this thread last saw at the same path:
//! entries in the unchanged head and tail are reused, and only the changed middle
//! is scanned and validated (another writer usually adds, removes or rewrites one
//! entry). Only for texts in Hermes' own layout; anything unexpected returns None
//! and the caller parses in full, so the verdict is always the full parse's.

use std::collections::HashMap;

use serde_json::Map;

use super::format::{HEAD, RegistryFile};
use crate::lease::format::entry::SeenIds;
use crate::lease::format::layout;
use crate::lease::format::pyjson;
use rustc_hash::FxBuildHasher as FxBuild;

/// How many entries carry each lease id hash (a duplicate check that needs no strings).
/// A lease id's hash, for counting ids without keeping them.
pub(super) fn hash_str(s: &str) -> u64 {
    use std::hash::BuildHasher;
    FxBuild.hash_one(s)
}

pub(super) type IdCounts = HashMap<u64, u32, FxBuild>;

pub(super) fn id_counts(file: &RegistryFile) -> IdCounts {
    let mut counts = IdCounts::with_capacity_and_hasher(file.entries.len(), Default::default());
    for e in &file.entries {
        *counts.entry(hash_str(e.lease_id())).or_default() += 1;
    }
    counts
}

/// `new` parsed with the help of `old`, which is exactly `{"entries": [E, …]}` for
/// `old_file`'s entries (the caller knows). None: parse `new` in full.
pub(super) fn reparse(old: &[u8], old_file: &RegistryFile, old_ids: &IdCounts, new: &[u8]) -> Option<RegistryFile> {
    if !old_file.extra.is_empty() || !new.starts_with(HEAD.as_bytes()) || !new.ends_with(b"]}") {
        return None;
    }
    // The full parse refuses such files before anything else; so must this one.
    if pyjson::too_many_values(new) {
        return None;
    }
    let n = old_file.entries.len();
    let mut starts = Vec::with_capacity(n);
    let mut at = HEAD.len();
    for e in &old_file.entries {
        starts.push(at);
        at += e.text().len() + 2;
    }
    let prefix = common_prefix(old, new);
    let suffix = common_suffix(old, new).min(old.len().min(new.len()) - prefix);
    let end_of = |i: usize| starts[i] + old_file.entries[i].text().len();
    // Old entries wholly inside the common head, then wholly inside the common tail.
    let head = (0..n).take_while(|&i| end_of(i) <= prefix).count();
    let tail = (head..n).find(|&j| starts[j] >= old.len() - suffix).unwrap_or(n);
    let pos = if head > 0 { end_of(head - 1) } else { HEAD.len() };
    let stop = if tail < n { (starts[tail] + new.len()).checked_sub(old.len())? } else { new.len() - 2 };
    let middle = std::str::from_utf8(new.get(pos..stop)?).ok()?;

    // Ids of the old entries being replaced may come back (a rewritten entry keeps its id).
    let mut replaced = IdCounts::default();
    for e in &old_file.entries[head..tail] {
        *replaced.entry(hash_str(e.lease_id())).or_default() += 1;
    }
    let mut seen = Seen { old_ids, replaced: &replaced, middle: Default::default() };
    let mut entries = Vec::with_capacity(n + 1);
    entries.extend_from_slice(&old_file.entries[..head]);
    let mut members = Vec::with_capacity(16);
    let (mut p, mut need_separator, mut ends_with_separator) = (0, head > 0, false);
    let b = middle.as_bytes();
    while p < b.len() {
        if need_separator {
            if b.get(p..p + 2) != Some(b", ") {
                return None;
            }
            p += 2;
            if p == b.len() {
                ends_with_separator = true;
                break;
            }
        }
        let (entry, end, _) = layout::canonical_at(middle, p, &seen, None, &mut members)?;
        seen.middle.insert(hash_str(entry.lease_id()), ());
        entries.push(entry);
        p = end;
        need_separator = true;
    }
    // A tail must follow a separator (or come first); the end must not.
    let tail_fits = if tail < n { ends_with_separator || (head == 0 && b.is_empty()) } else { !ends_with_separator };
    if !tail_fits {
        return None;
    }
    entries.extend_from_slice(&old_file.entries[tail..]);
    Some(RegistryFile { entries, extra: Map::new() })
}

/// A lease id is taken when a kept old entry or an earlier new one has its hash
/// (a hash collision only sends the file to the full parse).
struct Seen<'a> {
    old_ids: &'a IdCounts,
    replaced: &'a IdCounts,
    middle: HashMap<u64, (), FxBuild>,
}

impl SeenIds for Seen<'_> {
    fn seen(&self, lease_id: &str) -> bool {
        let h = hash_str(lease_id);
        let kept =
            self.old_ids.get(&h).copied().unwrap_or(0).saturating_sub(self.replaced.get(&h).copied().unwrap_or(0));
        kept > 0 || self.middle.contains_key(&h)
    }
}

/// Length of the common prefix, compared a block at a time (memcmp), then bytewise.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 256;
    let len = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= len && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    i + a[i..len].iter().zip(&b[i..len]).take_while(|(x, y)| x == y).count()
}

fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 256;
    let len = a.len().min(b.len());
    let (a, b) = (&a[a.len() - len..], &b[b.len() - len..]);
    let mut i = 0;
    while i + BLOCK <= len && a[len - i - BLOCK..len - i] == b[len - i - BLOCK..len - i] {
        i += BLOCK;
    }
    i + a[..len - i].iter().rev().zip(b[..len - i].iter().rev()).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::super::registry;
    use super::*;

    fn entry(i: usize, id: &str) -> String {
        format!(
            "{{\"lease_id\": \"{id}\", \"metadata\": {{\"live_session_id\": \"tab-{i}\"}}, \"pid\": {pid}, \
             \"process_start_time\": 1795989978.25, \"session_id\": \"chat-{i}\", \"started_at\": 1795990758.5677974, \
             \"surface\": \"cli\", \"updated_at\": 1795990758.5677974}}",
            pid = 100 + i
        )
    }

    fn registry(entries: &[String]) -> String {
        format!("{HEAD}{}]}}", entries.join(", "))
    }

    /// reparse agrees with the full parse: the same registry, or None (never a
    /// different answer, never a registry the full parse refuses).
    fn check(old: &str, new: &str) -> Option<RegistryFile> {
        let old_file = registry::parse(old.as_bytes()).expect("old is valid");
        let got = reparse(old.as_bytes(), &old_file, &id_counts(&old_file), new.as_bytes());
        match (&got, registry::parse(new.as_bytes())) {
            (Some(g), Ok(full)) => assert_eq!(g, &full, "{new}"),
            (Some(_), Err(p)) => panic!("reparse accepted what the full parse refuses: {p:?}\n{new}"),
            (None, _) => {}
        }
        got
    }

    #[test]
    fn common_changes_reuse_the_rest_and_agree_with_a_full_parse() {
        let base: Vec<String> = (0..40).map(|i| entry(i, &format!("{i:032x}"))).collect();
        let old = registry(&base);
        let edits: Vec<(&str, Vec<String>)> = vec![
            ("append", [base.clone(), vec![entry(99, "new")]].concat()),
            ("prepend", [vec![entry(99, "new")], base.clone()].concat()),
            ("insert", [base[..7].to_vec(), vec![entry(99, "new")], base[7..].to_vec()].concat()),
            ("remove first", base[1..].to_vec()),
            ("remove last", base[..39].to_vec()),
            ("remove middle", [base[..20].to_vec(), base[21..].to_vec()].concat()),
            ("rewrite keeping the id", {
                let mut v = base.clone();
                v[13] = entry(77, &format!("{:032x}", 13));
                v
            }),
            ("replace two", [base[..5].to_vec(), vec![entry(90, "a"), entry(91, "b")], base[7..].to_vec()].concat()),
            ("empty", vec![]),
            ("same", base.clone()),
        ];
        for (what, entries) in edits {
            let new = registry(&entries);
            let got = check(&old, &new).unwrap_or_else(|| panic!("{what}: not reparsed"));
            assert_eq!(got.entries.len(), entries.len(), "{what}");
        }
        // From empty, and one entry.
        check(&registry(&[]), &registry(&base[..3])).expect("from empty");
        check(&registry(&base[..1]), &registry(&base[..2])).expect("one to two");
    }

    #[test]
    fn a_reparsed_entry_has_a_text_of_its_own() {
        // An entry borrowing the new file's text would keep all of it alive for one entry,
        // once for every change a console sees.
        let base: Vec<String> = (0..5).map(|i| entry(i, &format!("{i:032x}"))).collect();
        let old = registry(&base);
        let mut changed = base.clone();
        changed[2] = entry(9, "changed");
        let new = registry(&changed);
        let got = check(&old, &new).expect("reparsed");
        assert_eq!(got.entries[2].lease_id(), "changed");
        assert!(!super::super::format::tests::is_within(got.entries[2].text(), new.as_bytes()));
    }

    #[test]
    fn anything_off_goes_to_the_full_parse() {
        let base: Vec<String> = (0..20).map(|i| entry(i, &format!("{i:032x}"))).collect();
        let old = registry(&base);
        let dup_of_kept = [base.clone(), vec![entry(99, &format!("{:032x}", 3))]].concat();
        let dup_in_middle = [base[..5].to_vec(), vec![entry(90, "a"), entry(91, "a")], base[5..].to_vec()].concat();
        let moved_id = {
            // Entry 4's id reused by a new entry while entry 4 stays: a duplicate.
            let mut v = base.clone();
            v[10] = entry(55, &format!("{:032x}", 4));
            v
        };
        let mut refused = vec![registry(&dup_of_kept), registry(&dup_in_middle), registry(&moved_id)];
        let text = registry(&base);
        refused.push(text.replacen(", {", ",{", 1));
        refused.push(text.replacen(", {", ", , {", 1));
        refused.push(text.replacen("\"pid\": 105", "\"pid\": 0", 1));
        refused.push(text.replacen("\"pid\": 105", "\"pid\":105", 1));
        refused.push(text.replacen("tab-7", "tab-\u{7}", 1));
        refused.push(format!("{text} "));
        refused.push(text.replacen("}]}", "}, ]}", 1));
        refused.push(text.replacen("}, {", "}{", 1));
        refused.push(format!("\u{feff}{text}"));
        for new in &refused {
            assert!(check(&old, new).is_none(), "reparsed: {new}");
        }
        // Bytes that are not UTF-8 in the changed part.
        let mut bad = text.clone().into_bytes();
        let at = bad.len() / 2;
        bad[at] = 0xff;
        let old_file = registry::parse(old.as_bytes()).expect("valid");
        assert!(reparse(old.as_bytes(), &old_file, &id_counts(&old_file), &bad).is_none());
    }

    #[test]
    fn random_edits_agree_with_the_full_parse() {
        let mut seed = 0x853c_49e6_748f_ea9bu64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n.max(1) as u64) as usize
        };
        let mut entries: Vec<String> = (0..12).map(|i| entry(i, &format!("{i:032x}"))).collect();
        let (mut reparsed, mut tried) = (0, 0);
        for round in 0..3000 {
            let old = registry(&entries);
            let mut changed = entries.clone();
            match next(5) {
                0 => changed.insert(next(changed.len() + 1), entry(round, &format!("r{round}"))),
                1 if !changed.is_empty() => {
                    changed.remove(next(changed.len()));
                }
                2 if !changed.is_empty() => {
                    let i = next(changed.len());
                    let id = format!("{:032x}", next(20));
                    changed[i] = entry(round, &id);
                }
                _ => {}
            }
            let mut new = registry(&changed).into_bytes();
            if next(4) == 0 {
                // A byte flipped anywhere: usually invalid, sometimes still valid.
                let at = next(new.len());
                let bytes = b" ,:{}[]\"0a9-.e\\";
                new[at] = bytes[next(bytes.len())];
            }
            let Ok(new) = String::from_utf8(new) else { continue };
            tried += 1;
            if check(&old, &new).is_some() {
                reparsed += 1;
            }
            if registry::parse(new.as_bytes()).is_ok() && new.starts_with(HEAD) {
                entries = registry::parse(new.as_bytes())
                    .expect("valid")
                    .entries
                    .iter()
                    .map(|e| e.text().to_owned())
                    .collect();
            }
        }
        assert!(reparsed > tried / 2, "only {reparsed} of {tried} edits were reparsed");
    }

    #[test]
    fn prefix_and_suffix_lengths() {
        assert_eq!(common_prefix(b"abcdef", b"abcxef"), 3);
        assert_eq!(common_suffix(b"abcdef", b"abcxef"), 2);
        let long_a = vec![7u8; 1000];
        let mut long_b = long_a.clone();
        long_b[600] = 8;
        assert_eq!(common_prefix(&long_a, &long_b), 600);
        assert_eq!(common_suffix(&long_a, &long_b), 399);
        assert_eq!(common_prefix(&long_a, &long_a[..10]), 10);
        assert_eq!(common_suffix(&long_a[..10], &long_a), 10);
    }
}
