//! Scans of JSON text without parsing it: how many values it could hold, where its
//! strings are, how deep it nests; and why a text is not JSON, in an operator's words.

use super::NotJson;

/// More JSON values than this are refused before parsing: memory stays bounded
/// (a 64 MiB file of `{}, {}, …` would otherwise become gigabytes of tree).
pub const MAX_JSON_VALUES: usize = 1_000_000;
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
            // `[` and `{` differ only in the bit 0x20: one compare for both.
            count += u8::from(b == b',') + u8::from(b == b':') + u8::from((b | 0x20) == b'{');
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

/// Why `text` is not JSON to us, the depth named when nesting was the trouble.
pub fn not_json_detail(e: &NotJson, text: &[u8]) -> String {
    if !e.too_deep {
        return format!("not JSON: {e}");
    }
    let depth = structure(text).depth;
    format!("nested {depth} levels deep: leasectl reads JSON nested up to 128 levels (Python's json, about 1,000)")
}
