//! JSON text exactly as Python's `json.dumps(obj, sort_keys=True, ensure_ascii=False)`
//! writes it, so a registry rewritten by leasectl is byte-identical to Hermes' own.
//! Writing is here; floats as `repr` writes them in `float`, text already canonical
//! recognised without parsing in `canonical`, reading in `read`, `number` and `scan`.

use serde_json::{Map, Number, Value};

mod canonical;
mod float;
mod number;
mod read;
mod scan;
pub use canonical::{
    canonical_member, canonical_members, canonical_members_into, canonical_object_at, is_unescaped, member_value_end,
    plain_string_end,
};
pub use float::{finite_number, float_repr};
pub use number::{ReadNumber, number_at};
pub use read::{
    MAX_INT_DIGITS, NotJson, constant, find_overlong_int, is_non_finite, may_hold_constants, overlong, parse, standard,
};
pub use scan::{MAX_JSON_VALUES, Structure, not_json_detail, outside_strings, structure, too_many_values};

/// Serialize `value` the way Hermes does (sorted keys, `", "` / `": "`, raw UTF-8).
pub fn to_string(value: &Value) -> String {
    let mut out = String::with_capacity(256);
    write_value(&mut out, value);
    out
}

/// Append `value` to `out` in Hermes' format.
pub fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(out, map),
    }
}

pub fn write_object(out: &mut String, map: &Map<String, Value>) {
    // serde_json's default Map is a BTreeMap: byte order of UTF-8 keys equals
    // Python's code-point order, so iteration order is already sort_keys order.
    out.push('{');
    for (i, (key, item)) in map.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_str(out, key);
        out.push_str(": ");
        write_value(out, item);
    }
    out.push('}');
}

/// What kind of JSON value `v` is, in the words of an error message ("a list").
pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A JSON string with Python's escapes: `\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`,
/// other C0 controls as `\u00xx`; everything else raw (ensure_ascii=False).
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    let mut start = 0;
    for (i, ch) in s.char_indices() {
        let escape = match ch {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            '\u{08}' => "\\b",
            '\u{0c}' => "\\f",
            c if (c as u32) < 0x20 => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            out.push_str(&format!("\\u{:04x}", ch as u32));
        } else {
            out.push_str(escape);
        }
        start = i + ch.len_utf8();
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Numbers keep their source text (serde_json's `arbitrary_precision`), so an
/// integer of any size round-trips like a Python int; a float is re-rendered
/// as Python's `repr(float)`.
fn write_number(out: &mut String, n: &Number) {
    let text = n.to_string();
    let is_integer = !text.contains(['.', 'e', 'E']);
    if is_integer {
        // Python parses `-0` to the int 0.
        if text.trim_start_matches('-').bytes().all(|b| b == b'0') {
            out.push('0');
        } else {
            out.push_str(&text);
        }
        return;
    }
    match text.parse::<f64>() {
        Ok(f) => out.push_str(&float_repr(f)),
        // Unreachable for text serde_json accepted; keep the source text rather than lose it.
        Err(_) => out.push_str(&text),
    }
}

/// A small repeatable generator for the crate's randomized tests (xorshift64).
#[cfg(test)]
pub(crate) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_escape_like_python() {
        let mut out = String::new();
        write_str(&mut out, "a\"b\\c\nd\te\u{1}f\u{7f}é😀\u{2028}");
        assert_eq!(out, "\"a\\\"b\\\\c\\nd\\te\\u0001f\u{7f}é😀\u{2028}\"");
    }

    #[test]
    fn objects_sorted_with_python_separators() {
        let v = json!({"b": [1, 2.0, null, true], "a": {"z": "x", "é": 1, "B": false}});
        assert_eq!(to_string(&v), "{\"a\": {\"B\": false, \"z\": \"x\", \"é\": 1}, \"b\": [1, 2.0, null, true]}");
    }

    #[test]
    fn numbers_keep_python_semantics() {
        let v: Value =
            serde_json::from_str("[123456789012345678901234567890, -0, 1e5, 1E-7, 2.50, 1795989978.5677974]")
                .expect("valid json");
        assert_eq!(to_string(&v), "[123456789012345678901234567890, 0, 100000.0, 1e-07, 2.5, 1795989978.5677974]");
    }
}
