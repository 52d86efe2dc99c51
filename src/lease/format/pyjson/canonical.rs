//! Canonical text: a JSON object already exactly as [`super::to_string`] would write it,
//! recognised and taken apart without building a tree, so bytes Hermes or leasectl wrote
//! are kept as they are.

use super::MAX_INT_DIGITS;
use super::float::{canonical_float, canonical_float_with, fixed_layout_digits_at};

/// The members (key, value text) of a JSON object whose text is already exactly what
/// [`super::to_string`] would write for it, or `None` when it is not (then the caller parses
/// and re-renders it). This is the fast path for registries Hermes or leasectl wrote:
/// no tree is built and the bytes are kept as they are.
pub fn canonical_members(text: &str) -> Option<Vec<(&str, &str)>> {
    let mut members = Vec::with_capacity(10);
    canonical_members_into(text, &mut members).then_some(members)
}

/// [`canonical_members`] into a caller's buffer (cleared first): no allocation per entry.
pub fn canonical_members_into<'t>(text: &'t str, members: &mut Vec<(&'t str, &'t str)>) -> bool {
    members.clear();
    scan_object(text, 0, 0, Some(&mut |k, v| members.push((k, v)))) == Some(text.len())
}

/// In a canonical object's text, the value text of member `key` (Some(None) when
/// absent); None when the text is not canonical. No allocation.
pub fn canonical_member<'t>(text: &'t str, key: &str) -> Option<Option<&'t str>> {
    let mut found = None;
    let end = scan_object(
        text,
        0,
        0,
        Some(&mut |k, v| {
            if k == key {
                found = Some(v);
            }
        }),
    )?;
    (end == text.len()).then_some(found)
}

/// True when a canonical string's content holds no escape (no byte to decode).
pub fn is_unescaped(content: &str) -> bool {
    plain_run(content.as_bytes()) == content.len()
}

/// End of the canonical object starting at `pos` in a larger text, its members
/// collected into `members` (cleared first); None when it is not canonical.
pub fn canonical_object_at<'t>(text: &'t str, pos: usize, members: &mut Vec<(&'t str, &'t str)>) -> Option<usize> {
    members.clear();
    scan_object(text, pos, 0, Some(&mut |k, v| members.push((k, v))))
}

/// End of the canonical value of an object member at `pos` (the value a member's `": "`
/// is followed by, as [`canonical_object_at`] scans it), or None.
pub fn member_value_end(text: &str, pos: usize) -> Option<usize> {
    scan_value(text, pos, 1)
}

/// End of a string at `pos` with no escape in it (nothing to decode), or None: any
/// escape, a control byte or no closing quote.
pub fn plain_string_end(b: &[u8], pos: usize) -> Option<usize> {
    if b.get(pos) != Some(&b'"') {
        return None;
    }
    let end = pos + 1 + plain_run(b.get(pos + 1..)?);
    (b.get(end) == Some(&b'"')).then_some(end + 1)
}

/// End (just past `}`) of a canonical object at `pos`: keys plain and strictly
/// increasing, `": "` and `", "` separators, canonical values. Collects the members
/// when asked (the top level only).
fn scan_object<'t, F: FnMut(&'t str, &'t str)>(
    text: &'t str,
    pos: usize,
    depth: usize,
    mut members: Option<&mut F>,
) -> Option<usize> {
    let b = text.as_bytes();
    if depth > 64 || b.get(pos) != Some(&b'{') {
        return None;
    }
    let mut p = pos + 1;
    if b.get(p) == Some(&b'}') {
        return Some(p + 1);
    }
    let mut last_key: Option<&str> = None;
    loop {
        // Keys are plain (no escapes) and strictly increasing.
        let key_start = p + 1;
        if b.get(p) != Some(&b'"') {
            return None;
        }
        p = key_start + plain_run(&b[key_start..]);
        if b.get(p) != Some(&b'"') {
            return None;
        }
        let key = &text[key_start..p];
        p += 1;
        // Keys mostly differ in their first byte: compared inline, the rest only on a tie.
        if last_key.is_some_and(|k| match (k.as_bytes().first(), key.as_bytes().first()) {
            (Some(a), Some(b)) if a != b => a > b,
            _ => k >= key,
        }) {
            return None;
        }
        last_key = Some(key);
        if b.get(p..p + 2) != Some(b": ") {
            return None;
        }
        let value_start = p + 2;
        p = scan_value(text, value_start, depth + 1)?;
        if let Some(m) = members.as_deref_mut() {
            m(key, &text[value_start..p]);
        }
        match b.get(p) {
            Some(b'}') => return Some(p + 1),
            Some(b',') if b.get(p + 1) == Some(&b' ') => p += 2,
            _ => return None,
        }
    }
}

/// End of a canonical value starting at `pos`, or None.
fn scan_value(text: &str, pos: usize, depth: usize) -> Option<usize> {
    let b = text.as_bytes();
    if depth > 64 {
        return None;
    }
    match *b.get(pos)? {
        b'"' => scan_string(b, pos),
        b'{' => scan_object(text, pos, depth, None::<&mut fn(&str, &str)>),
        b'[' => {
            let mut p = pos + 1;
            if b.get(p) == Some(&b']') {
                return Some(p + 1);
            }
            loop {
                p = scan_value(text, p, depth + 1)?;
                match b.get(p) {
                    Some(b']') => return Some(p + 1),
                    Some(b',') if b.get(p + 1) == Some(&b' ') => p += 2,
                    _ => return None,
                }
            }
        }
        b't' => text[pos..].starts_with("true").then_some(pos + 4),
        b'f' => text[pos..].starts_with("false").then_some(pos + 5),
        b'n' => text[pos..].starts_with("null").then_some(pos + 4),
        // Python's constants, exactly as its json writes them.
        b'N' => text[pos..].starts_with("NaN").then_some(pos + 3),
        b'I' => text[pos..].starts_with("Infinity").then_some(pos + 8),
        b'-' if text[pos..].starts_with("-Infinity") => Some(pos + 9),
        b'-' | b'0'..=b'9' => {
            // The common shapes in runs of digits: `-`? digits, and `.` digits after.
            let digits_from = |mut at: usize| {
                while b.get(at).is_some_and(u8::is_ascii_digit) {
                    at += 1;
                }
                at
            };
            let unsigned = pos + usize::from(b[pos] == b'-');
            let mut end = digits_from(unsigned);
            let mut dot = None;
            if b.get(end) == Some(&b'.') {
                dot = Some(end - unsigned);
                end = digits_from(end + 1);
            }
            if matches!(b.get(end), Some(b'+' | b'-' | b'.' | b'e' | b'E')) {
                // Anything else of a number (an exponent, a stray sign or point): its whole
                // extent, checked as a float.
                end +=
                    b[end..].iter().take_while(|c| matches!(c, b'0'..=b'9' | b'+' | b'-' | b'.' | b'e' | b'E')).count();
                return canonical_float(&text[pos..end]).then_some(end);
            }
            let num = &text[pos..end];
            let canonical = match dot {
                Some(dot) => canonical_float_with(num, fixed_layout_digits_at(&b[unsigned..end], dot)),
                None => {
                    let digits = &text[unsigned..end];
                    !digits.is_empty()
                        && digits.len() <= MAX_INT_DIGITS
                        && (digits == "0" && unsigned == pos || !digits.starts_with('0'))
                }
            };
            canonical.then_some(end)
        }
        _ => None,
    }
}

/// The length of the leading run of bytes that are not `"`, `\\` or a control
/// byte, eight bytes at a time (strings are most of a registry's text).
pub(super) fn plain_run(b: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // High bit set in each byte that is zero (exact for the lowest such byte).
    let zero_bytes = |w: u64| w.wrapping_sub(ONES) & !w & HIGHS;
    let mut i = 0;
    while let Some(chunk) = b.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let hits = zero_bytes(w ^ (ONES * u64::from(b'"')))
            | zero_bytes(w ^ (ONES * u64::from(b'\\')))
            | (w.wrapping_sub(ONES * 0x20) & !w & HIGHS);
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + b[i..].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20).unwrap_or(b.len() - i)
}

/// End (past the closing quote) of a string written with Python's escapes only.
fn scan_string(b: &[u8], pos: usize) -> Option<usize> {
    if b.get(pos) != Some(&b'"') {
        return None;
    }
    let mut p = pos + 1;
    loop {
        // Skip the plain run in one go; stop at a quote, a backslash or a control byte.
        p += plain_run(b.get(p..)?);
        match *b.get(p)? {
            b'"' => return Some(p + 1),
            c if c < 0x20 => return None,
            b'\\' => {
                match *b.get(p + 1)? {
                    b'"' | b'\\' | b'n' | b'r' | b't' | b'b' | b'f' => p += 2,
                    b'u' => {
                        // Only \u00xx for control characters without a short form, lowercase hex.
                        let hex = b.get(p + 2..p + 6)?;
                        if &hex[..2] != b"00"
                            || !hex[2..].iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
                        {
                            return None;
                        }
                        let code = u8::from_str_radix(std::str::from_utf8(&hex[2..]).ok()?, 16).ok()?;
                        if code >= 0x20 || matches!(code, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                            return None;
                        }
                        p += 6;
                    }
                    _ => return None,
                }
            }
            _ => p += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::format::pyjson::to_string;
    use crate::lease::format::pyjson::xorshift;
    use serde_json::Value;

    #[test]
    fn plain_runs_stop_where_the_byte_loop_stops() {
        let naive = |b: &[u8]| b.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20).unwrap_or(b.len());
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let alphabet = [b'a', b'"', b'\\', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xc3, 0xff, b'!', b'#', b'[', b']'];
        for len in 0..80 {
            for _ in 0..200 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        let seed = next();
                        // Mostly plain bytes, so the stops land anywhere in a word.
                        if seed.is_multiple_of(16) {
                            alphabet[(seed >> 8) as usize % alphabet.len()]
                        } else {
                            b'a' + (seed % 26) as u8
                        }
                    })
                    .collect();
                assert_eq!(plain_run(&bytes), naive(&bytes), "{bytes:?}");
            }
        }
    }

    #[test]
    fn numbers_are_told_apart_as_one_loop_over_their_extent_would() {
        // The reference: the number's whole extent in one loop, an integer when it has no
        // sign but a leading one and no point or exponent, else the float check.
        let reference = |t: &str| -> bool {
            let b = t.as_bytes();
            let (mut end, mut integer) = (0, true);
            while let Some(&c) = b.get(end) {
                match c {
                    b'0'..=b'9' => {}
                    b'-' if end == 0 => {}
                    b'+' | b'-' | b'.' | b'e' | b'E' => integer = false,
                    _ => break,
                }
                end += 1;
            }
            let num = &t[..end];
            let ok = if integer {
                let digits = num.strip_prefix('-').unwrap_or(num);
                !digits.is_empty()
                    && digits.len() <= MAX_INT_DIGITS
                    && (digits == "0" && !num.starts_with('-') || !digits.starts_with('0'))
            } else {
                canonical_float(num)
            };
            ok && end == t.len()
        };
        let mut next = xorshift(0x51_7cc1_b727_220a);
        const ALPHABET: &[u8] = b"0123456789012345678901234567890123456789.-+eE";
        let mut texts: Vec<String> = [
            "-",
            "-.5",
            "1.",
            "1.5.3",
            "1-2",
            "01.5",
            "-0",
            "0",
            "-0.0",
            "1e-05",
            "1.5e-07",
            "1e+16",
            "12345678901234567890",
            "1795989978.5677974",
            "1795989978.25",
            "0.0001",
            "0.00001",
        ]
        .iter()
        .map(|t| t.to_string())
        .collect();
        for _ in 0..20_000 {
            let len = 1 + (next() % 22) as usize;
            let mut t: String = (0..len).map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize] as char).collect();
            if !t.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
                t.insert(0, '1');
            }
            texts.push(t);
        }
        for t in &texts {
            let object = format!("{{\"a\": {t}}}");
            assert_eq!(canonical_members(&object).is_some(), reference(t), "{t:?}");
        }
    }

    #[test]
    fn canonical_text_is_recognised_and_anything_else_is_not() {
        let good = r#"{"a": [1, 2.5, null, true, {"x": "\u0001\n"}], "b": "é", "c": {}, "d": -3, "e": 1e-05}"#;
        let m = canonical_members(good).expect("canonical");
        assert_eq!(m.iter().map(|(k, _)| *k).collect::<Vec<_>>(), ["a", "b", "c", "d", "e"]);
        assert_eq!(m[0].1, r#"[1, 2.5, null, true, {"x": "\u0001\n"}]"#);
        let v: Value = serde_json::from_str(good).expect("json");
        assert_eq!(to_string(&v), good, "the scanner agrees with the writer");
        for bad in [
            r#"{"b": 1, "a": 2}"#,
            r#"{"a":1}"#,
            r#"{"a": 1,"b": 2}"#,
            r#"{"a": 1.50}"#,
            r#"{"a": 1E5}"#,
            r#"{"a": -0}"#,
            r#"{"a": 01}"#,
            r#"{"a": "\u00e9"}"#,
            r#"{"a": "\/"}"#,
            r#"{"a": "\u000A"}"#,
            r#"{"a": 1, "a": 2}"#,
            r#"{"a": [1,2]}"#,
            r#"{"a": 1} "#,
            r#"{"a": {"z": 1, "b": 2}}"#,
            r#"{"a": [{"b": 1, "a": 2}]}"#,
            r#" {"a": 1}"#,
        ] {
            assert!(canonical_members(bad).is_none(), "{bad}");
        }
    }
}
