//! JSON text exactly as Python's `json.dumps(obj, sort_keys=True, ensure_ascii=False)`
//! writes it, so a registry rewritten by leasectl is byte-identical to Hermes' own.

use serde_json::{Map, Number, Value};

mod number;
mod read;
mod scan;
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

/// Python's `float.__repr__`: shortest round-trip digits, fixed notation for
/// decimal exponents in -4..16, otherwise `d.ddde+XX`; `.0` on integral values.
pub fn float_repr(f: f64) -> String {
    let mut buf = StackBuf::default();
    write_float_repr(f, &mut buf);
    buf.as_str().to_owned()
}

/// True when `num` is exactly how Python writes the float it denotes.
fn canonical_float(num: &str) -> bool {
    canonical_float_with(num, fixed_layout_digits(num))
}

/// [`canonical_float`], given what [`fixed_layout_digits`] says of `num`.
fn canonical_float_with(num: &str, fixed: Option<usize>) -> bool {
    if fixed.is_some_and(|sig| sig <= 15) {
        return true;
    }
    if LastFloat::value_of(num).is_some() {
        return true;
    }
    if let Some((canonical, value)) = fixed.and_then(|_| fixed_repr(num)) {
        if canonical {
            LastFloat::keep(num, value);
        }
        return canonical;
    }
    let canonical = num.parse::<f64>().ok().filter(|f| f.is_finite()).filter(|&f| {
        // ryu writes the same shortest digits, and the same fixed layout where Python's
        // repr has one (up to 16 integer digits; not `0.0000d`, Python's `de-05`); its
        // exponent form differs.
        let same_fixed = fixed.is_some() && ryu::Buffer::new().format_finite(f) == num;
        same_fixed || is_float_repr(f, num)
    });
    if let Some(value) = canonical {
        LastFloat::keep(num, value);
    }
    canonical.is_some()
}

/// 10^0 to 10^19, every power of ten a u64 holds.
const POW10: [u64; 20] = {
    let mut powers = [1u64; 20];
    let mut i = 1;
    while i < powers.len() {
        powers[i] = powers[i - 1] * 10;
        i += 1;
    }
    powers
};

/// For `num` in repr's fixed layout (`-`? digits not led by 0, `.`, digits not ending in
/// 0) worth 1 to 2^53 with at most 19 digits, as a time is: whether it is exactly
/// Python's repr of the double nearest it, and that double. None elsewhere, and on a
/// tie between two equally close decimals, for the parse-and-repr path.
///
/// In integers: the double is m * 2^-s, m of 53 bits, rounded half to even from the
/// digits d / 10^k. Repr is the shortest decimal that reads back as it, the closest of
/// those: `num` is that when no decimal of fewer digits falls in the double's rounding
/// interval (so the shortest has k decimals) and `num` is the closest with k decimals.
/// A parse and a repr took about 650 instructions for each `started_at`; this, about 400.
fn fixed_repr(num: &str) -> Option<(bool, f64)> {
    let (negative, unsigned) = match num.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    let dot = unsigned.iter().position(|&c| c == b'.')?;
    let (int, frac) = (unsigned.get(..dot)?, unsigned.get(dot + 1..)?);
    // `.0` (a whole number) is repr's decoration, not a decimal: left to the slow path.
    if int.is_empty() || int[0] == b'0' || frac.last().is_none_or(|&c| c == b'0') || int.len() + frac.len() > 19 {
        return None;
    }
    let mut d: u64 = 0;
    for &c in unsigned {
        let digit = c.wrapping_sub(b'0');
        if digit < 10 {
            d = d * 10 + u64::from(digit);
        } else if c != b'.' {
            return None;
        }
    }
    fixed_repr_of(d, frac.len(), negative)
}

/// [`fixed_repr`] of the text whose digits, read as an integer, are `d` (at most 19 of
/// them), with `k` after the point. Outside `fixed_repr`'s layout (a whole number, a value
/// under 1) it may refuse a text that is repr's; it never takes one that is not.
fn fixed_repr_of(d: u64, k: usize, negative: bool) -> Option<(bool, f64)> {
    const HIDDEN: u128 = 1 << 52;
    let ten_k = u128::from(*POW10.get(k)?);
    // The scale s that puts d / 10^k * 2^s in [2^52, 2^53): from the bit lengths, then
    // one step either way at most.
    let bits = |x: u128| 128 - x.leading_zeros() as i32;
    let mut s = 53 + bits(ten_k) - bits(u128::from(d));
    // The quotient's range is told by products (under 2^117), so one division is made.
    let n = loop {
        if !(0..=60).contains(&s) {
            return None;
        }
        let n = u128::from(d) << s;
        if n >= 2 * HIDDEN * ten_k {
            s -= 1;
        } else if n < HIDDEN * ten_k {
            s += 1;
        } else {
            break n;
        }
    };
    let q = n / ten_k;
    let r = n - q * ten_k;
    // Rounded half to even; 2^53 is 2^52 at the next scale down.
    let mut m = q;
    if 2 * r > ten_k || (2 * r == ten_k && m & 1 == 1) {
        m += 1;
    }
    if m == 2 * HIDDEN {
        m = HIDDEN;
        s -= 1;
    }
    if s < 0 {
        return None;
    }
    // m is under 2^53: exact as a double, and so is the division by a power of two.
    let magnitude = u64::try_from(m).ok()? as f64 / (1u64 << s) as f64;
    let value = if negative { -magnitude } else { magnitude };
    // Closest with k decimals: |d/10^k - m/2^s| under half of 10^-k; a tie is left to repr.
    let off = (u128::from(d) << s).abs_diff(m * ten_k);
    if 2 * off == 1 << s {
        return None;
    }
    if 2 * off > 1 << s {
        return Some((false, value));
    }
    // Fewer decimals: a multiple of 10^-(k-1) in the rounding interval [4m - 2, 4m + 2],
    // in units of a quarter of the double's spacing. Its ends need no care here: an end
    // has s + 1 decimals, and when k - 1 is that many, the double's own value (s decimals)
    // is a shorter decimal inside. A power of two (a narrower gap below) is a whole number
    // here, `.0`, which the closest test above has already told apart from `num`.
    let ten = u128::from(*POW10.get(k - 1)?);
    let unit = s + 2;
    let (first, last) = (((4 * m - 2) * ten).div_ceil(1 << unit), ((4 * m + 2) * ten) >> unit);
    Some((first > last, value))
}

/// The finite number `num` denotes (canonical number text): the value the canonical check
/// just parsed when it was that text, else parsed now.
pub fn finite_number(num: &str) -> Option<f64> {
    LastFloat::value_of(num)
        .or_else(|| short_decimal(num))
        .or_else(|| num.parse::<f64>().ok().filter(|f| f.is_finite()))
}

/// A number of at most 15 digits without an exponent (an owner's start time), exactly:
/// its digits as an integer over a power of ten, both exact doubles, and one correctly
/// rounded division (Clinger's fast path, which the standard parser takes after a slower
/// walk over the text).
fn short_decimal(num: &str) -> Option<f64> {
    const POWERS_OF_TEN: [f64; 16] =
        [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];
    let (negative, unsigned) = match num.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    let (mut digits, mut mantissa, mut dot) = (0usize, 0u64, None);
    for &c in unsigned {
        match c {
            b'0'..=b'9' => {
                digits += 1;
                mantissa = mantissa * 10 + u64::from(c - b'0');
                if digits > 15 {
                    return None;
                }
            }
            b'.' if dot.is_none() => dot = Some(digits),
            _ => return None,
        }
    }
    let scale = *POWERS_OF_TEN.get(digits - dot.unwrap_or(digits))?;
    if digits == 0 {
        return None;
    }
    let value = mantissa as f64 / scale;
    Some(if negative { -value } else { value })
}

/// The last float text of more than 15 digits found canonical on this thread, and its
/// value. Checking one is a parse and a repr; an entry's `updated_at` usually repeats
/// its `started_at`, and the entry's reader then wants the value the check parsed.
#[derive(Clone, Copy)]
struct LastFloat {
    text: [u8; 32],
    len: u8,
    value: f64,
}

thread_local! {
    static LAST_FLOAT: std::cell::Cell<LastFloat> =
        const { std::cell::Cell::new(LastFloat { text: [0; 32], len: 0, value: 0.0 }) };
}

impl LastFloat {
    fn value_of(num: &str) -> Option<f64> {
        let last = LAST_FLOAT.with(std::cell::Cell::get);
        (last.len > 0 && last.text.get(..usize::from(last.len)) == Some(num.as_bytes())).then_some(last.value)
    }

    /// Only a text found canonical, and short enough to hold whole.
    fn keep(num: &str, value: f64) {
        let mut text = [0; 32];
        if let (Some(slot), Ok(len)) = (text.get_mut(..num.len()), u8::try_from(num.len())) {
            slot.copy_from_slice(num.as_bytes());
            LAST_FLOAT.with(|last| last.set(LastFloat { text, len, value }));
        }
    }
}

/// The significant digits of `num` when it has Python repr's fixed layout
/// (`-`? int `.` frac, no needless zeros, decimal exponent in -4..16); None otherwise.
/// With at most 15 such digits the text is repr's own: any decimal of up to 15
/// significant digits survives the round trip through a double, so no other
/// string as short maps to the same double.
fn fixed_layout_digits(num: &str) -> Option<usize> {
    let unsigned = num.as_bytes().strip_prefix(b"-").unwrap_or(num.as_bytes());
    let mut dot = None;
    for (i, &c) in unsigned.iter().enumerate() {
        match c {
            b'0'..=b'9' => {}
            b'.' if dot.is_none() => dot = Some(i),
            _ => return None,
        }
    }
    fixed_layout_digits_at(unsigned, dot?)
}

/// [`fixed_layout_digits`] of `unsigned`, digits with one `.` at `dot` and nothing else
/// (the scanner found them so: no second pass over the text).
fn fixed_layout_digits_at(unsigned: &[u8], dot: usize) -> Option<usize> {
    let (int, frac) = (unsigned.get(..dot)?, unsigned.get(dot + 1..)?);
    if int.is_empty() || frac.is_empty() || int.len() > 16 || (int.len() > 1 && int[0] == b'0') {
        return None;
    }
    let zeros = |digits: &mut dyn Iterator<Item = &u8>| digits.take_while(|&&c| c == b'0').count();
    match (int, frac) {
        (b"0", b"0") => Some(0),
        (_, b"0") => Some(int.len() - zeros(&mut int.iter().rev())),
        _ if frac.last() == Some(&b'0') => None,
        (b"0", _) => {
            let zeros = zeros(&mut frac.iter());
            (zeros <= 3).then_some(frac.len() - zeros)
        }
        _ => Some(int.len() + frac.len()),
    }
}

/// True when `text` is exactly `float_repr(f)` (no allocation: used on every read).
fn is_float_repr(f: f64, text: &str) -> bool {
    let mut buf = StackBuf::default();
    write_float_repr(f, &mut buf);
    buf.as_str() == text
}

/// A small stack buffer for formatting floats (repr is at most 24 bytes).
struct StackBuf {
    bytes: [u8; 48],
    len: usize,
}

impl Default for StackBuf {
    fn default() -> Self {
        StackBuf { bytes: [0; 48], len: 0 }
    }
}

impl StackBuf {
    fn push(&mut self, s: &str) {
        let end = (self.len + s.len()).min(self.bytes.len());
        let n = end - self.len;
        self.bytes[self.len..end].copy_from_slice(&s.as_bytes()[..n]);
        self.len = end;
    }
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or("")
    }
}

impl std::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.push(s);
        Ok(())
    }
}

fn write_float_repr(f: f64, out: &mut StackBuf) {
    use std::fmt::Write as _;
    if f.is_nan() {
        return out.push("NaN");
    }
    if f.is_infinite() {
        return out.push(if f > 0.0 { "Infinity" } else { "-Infinity" });
    }
    if f == 0.0 {
        return out.push(if f.is_sign_negative() { "-0.0" } else { "0.0" });
    }
    // ryu gives the shortest round-trip digits, as Python's repr does; only the layout differs.
    let mut ryu_buf = ryu::Buffer::new();
    let shortest = ryu_buf.format_finite(f.abs());
    let (mantissa, exp_part) = shortest.split_once('e').unwrap_or((shortest, "0"));
    let exp_part: i32 = exp_part.parse().unwrap_or(0);
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    // All significant digits, and the decimal exponent of the first one.
    let mut digits = StackBuf::default();
    digits.push(int_part);
    digits.push(frac_part);
    let all = digits.as_str();
    let lead = all.len() - all.trim_start_matches('0').len();
    let sig = all[lead..].trim_end_matches('0');
    let sig = if sig.is_empty() { "0" } else { sig };
    let exp = int_part.len() as i32 - 1 - lead as i32 + exp_part;
    if f < 0.0 {
        out.push("-");
    }
    if (-4..16).contains(&exp) {
        if exp < 0 {
            out.push("0.");
            for _ in 0..(-exp - 1) {
                out.push("0");
            }
            out.push(sig);
        } else {
            let int_len = exp as usize + 1;
            if sig.len() <= int_len {
                out.push(sig);
                for _ in sig.len()..int_len {
                    out.push("0");
                }
                out.push(".0");
            } else {
                out.push(&sig[..int_len]);
                out.push(".");
                out.push(&sig[int_len..]);
            }
        }
    } else {
        out.push(&sig[..1]);
        if sig.len() > 1 {
            out.push(".");
            out.push(&sig[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
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

    /// Float texts for the canonical check: fixed cases, and for random doubles (any
    /// bits, times, short decimals, near powers of two, a time's neighbours) their repr
    /// and near misses of it.
    pub(super) fn float_texts() -> Vec<String> {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut texts: Vec<String> = vec![
            "0.0",
            "-0.0",
            "1.0",
            "10.0",
            "100000.0",
            "0.0001",
            "0.00001",
            "1e-05",
            "1e+16",
            "1e16",
            "9999999999999998.0",
            "1234567890123456.0",
            "0.1",
            "0.10",
            "1.50",
            "01.5",
            "1.",
            ".5",
            "1795989978.25",
            "1795989978.5677974",
            "1795989978.56779741",
            "2.5e-05",
            "123456789012345.6",
            // Integers of 17 to 21 digits: ryu writes them out, Python's repr in exponent form.
            "10000000000000000.0",
            "100000000000000000000.0",
            "123456789012345680.0",
            "1e+20",
            "1.2345678901234568e+17",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        for _ in 0..40_000 {
            let r = next();
            let f = match r % 6 {
                0 => f64::from_bits(next()),
                1 => 1.7e9 + (next() % 1_000_000_000) as f64 / 1e7,
                2 => (next() % 100_000) as f64 / 10f64.powi((next() % 12) as i32),
                3 => (next() % 10_000_000_000_000_000) as f64 / 10f64.powi((next() % 20) as i32),
                // Around powers of two, where the spacing of doubles halves below.
                4 => {
                    let p = 2f64.powi((next() % 53) as i32);
                    let f = if next().is_multiple_of(2) { p.next_down() } else { p.next_up() };
                    if next().is_multiple_of(3) { p } else { f }
                }
                // A time's neighbours: the doubles just above and below.
                _ => {
                    let t = 1.7e9 + (next() % 1_000_000_000) as f64 / 1e7;
                    if next().is_multiple_of(2) { t.next_up() } else { t.next_down() }
                }
            };
            if f.is_finite() {
                let repr = float_repr(f);
                // Near misses: one digit changed or dropped, a zero appended.
                let mut near = repr.clone().into_bytes();
                let at = (next() as usize) % near.len();
                if near[at].is_ascii_digit() {
                    near[at] = b'0' + ((near[at] - b'0' + 1) % 10);
                }
                texts.push(String::from_utf8(near).unwrap_or_default());
                texts.push(format!("{repr}0"));
                // Longer than repr: a digit more, still the same double or the next.
                texts.push(format!("{repr}{}", 1 + next() % 9));
                if let Some(head) = repr.get(..repr.len() - 1) {
                    let last = repr.as_bytes()[repr.len() - 1];
                    if last.is_ascii_digit() && last > b'0' {
                        // The last digit one lower, and a 9 or 5 after it: the other side.
                        texts.push(format!(
                            "{head}{}{}",
                            char::from(last - 1),
                            if next().is_multiple_of(2) { '9' } else { '5' }
                        ));
                    }
                }
                texts.push(repr[..repr.len() - 1].to_owned());
                texts.push(repr);
            }
        }
        texts
    }

    #[test]
    fn the_canonical_float_shortcuts_agree_with_repr() {
        // The oracle: parse, write repr, compare. The shortcuts must never accept
        // anything it rejects, nor reject what it accepts.
        let oracle = |t: &str| t.parse::<f64>().ok().filter(|f| f.is_finite()).is_some_and(|f| float_repr(f) == t);
        let texts = float_texts();
        // The integer test decides most texts of 16 to 19 digits on its own, and as repr.
        let mut decided = [0, 0];
        for t in &texts {
            if let Some((canonical, value)) = fixed_repr(t) {
                assert_eq!(canonical, oracle(t), "{t:?} by the integer test");
                assert_eq!(Ok(value.to_bits()), t.parse::<f64>().map(f64::to_bits), "{t:?}'s double");
                decided[usize::from(canonical)] += 1;
            }
        }
        assert!(decided[0] > 10_000 && decided[1] > 10_000, "decided (not repr, repr): {decided:?}");
        for t in &texts {
            assert_eq!(canonical_float(t), oracle(t), "{t:?}");
            // The value kept from the check is the text's own, as is any other.
            let parsed = t.parse::<f64>().ok().filter(|f| f.is_finite());
            assert_eq!(finite_number(t).map(f64::to_bits), parsed.map(f64::to_bits), "{t:?}");
        }
    }

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

/// The members (key, value text) of a JSON object whose text is already exactly what
/// [`to_string`] would write for it, or `None` when it is not (then the caller parses
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
fn plain_run(b: &[u8]) -> usize {
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
mod canonical_tests {
    use super::*;

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
