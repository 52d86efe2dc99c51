//! JSON text exactly as Python's `json.dumps(obj, sort_keys=True, ensure_ascii=False)`
//! writes it, so a registry rewritten by leasectl is byte-identical to Hermes' own.

use serde_json::{Map, Number, Value};

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

/// Python's `float.__repr__`: shortest round-trip digits, fixed notation for
/// decimal exponents in -4..16, otherwise `d.ddde+XX`; `.0` on integral values.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    // `{:e}` gives the shortest round-trip digits, like Python's repr.
    let sci = format!("{:e}", f);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                for _ in digits.len()..int_len {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.abs()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_match_python_repr() {
        // Expected strings are what CPython 3.11 prints for repr(x).
        let cases: &[(f64, &str)] = &[
            (1.0, "1.0"),
            (1795989978.5677974, "1795989978.5677974"),
            (1795989978.25, "1795989978.25"),
            (0.1, "0.1"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.2345e22, "1.2345e+22"),
            (123456789012345.6, "123456789012345.6"),
            (-2.5, "-2.5"),
            (-0.0, "-0.0"),
            (1e300, "1e+300"),
            (5e-324, "5e-324"),
        ];
        for (value, expected) in cases {
            assert_eq!(float_repr(*value), *expected, "repr of {value:e}");
        }
    }

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
