//! Floats as Python writes them: `repr(float)`, and whether a number's text is already
//! exactly that (read on every entry's `started_at`, so without parsing where it can).

/// Python's `float.__repr__`: shortest round-trip digits, fixed notation for
/// decimal exponents in -4..16, otherwise `d.ddde+XX`; `.0` on integral values.
pub fn float_repr(f: f64) -> String {
    let mut buf = StackBuf::default();
    write_float_repr(f, &mut buf);
    buf.as_str().to_owned()
}

/// True when `num` is exactly how Python writes the float it denotes.
pub(super) fn canonical_float(num: &str) -> bool {
    canonical_float_with(num, fixed_layout_digits(num))
}

/// [`canonical_float`], given what [`fixed_layout_digits`] says of `num`.
pub(super) fn canonical_float_with(num: &str, fixed: Option<usize>) -> bool {
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
pub(super) const POW10: [u64; 20] = {
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
pub(super) fn fixed_repr_of(d: u64, k: usize, negative: bool) -> Option<(bool, f64)> {
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
pub(super) fn fixed_layout_digits_at(unsigned: &[u8], dot: usize) -> Option<usize> {
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::lease::format::pyjson::xorshift;

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
    pub(in crate::lease::format::pyjson) fn float_texts() -> Vec<String> {
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
}
