//! A number read in one pass where Hermes writes one (a pid, a time): where it ends, the
//! double it denotes, and that its text is Python's own, without scanning it once to
//! check it and again to read it. What one pass cannot tell, it leaves to the scan.

use super::float::{POW10, fixed_layout_digits_at, fixed_repr_of};

/// A canonical number read by [`number_at`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadNumber {
    /// Just past its last byte.
    pub end: usize,
    /// The double it denotes, as `finite_number` reads it.
    pub value: f64,
    /// Its value as an integer when it is one without a sign (a pid).
    pub unsigned: Option<u64>,
}

/// The number at `pos` when it is exactly as Python writes it and one pass can tell so:
/// an integer of up to 19 digits, or a float in repr's fixed layout that is repr's own.
/// None for anything else, canonical or not (an exponent, more digits, a text that is
/// not repr's): the scan, then the parse, decide those.
pub fn number_at(b: &[u8], pos: usize) -> Option<ReadNumber> {
    const POWERS_OF_TEN: [f64; 16] =
        [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];
    let negative = b.get(pos) == Some(&b'-');
    let start = pos + usize::from(negative);
    // The digits as one integer, the point skipped: exact for up to 19 of them (wrapping
    // past that, when the count below refuses the number anyway).
    let mut d: u64 = 0;
    let int_end = digits_from(b, start, &mut d);
    let (end, frac_len) = match b.get(int_end) {
        Some(b'.') => {
            let end = digits_from(b, int_end + 1, &mut d);
            (end, Some(end - int_end - 1))
        }
        _ => (int_end, None),
    };
    let int_len = int_end - start;
    if int_len == 0 || int_len + frac_len.unwrap_or(0) > 19 {
        return None;
    }
    // An exponent, a sign or a second point: the scan's.
    if matches!(b.get(end), Some(b'+' | b'-' | b'.' | b'e' | b'E')) {
        return None;
    }
    let signed = |v: f64| if negative { -v } else { v };
    let Some(frac_len) = frac_len else {
        // An integer: no leading zero, and 0 only unsigned.
        if b[start] == b'0' && (int_len > 1 || negative) {
            return None;
        }
        // u64 to f64 rounds to nearest, ties to even: the parse's double.
        return Some(ReadNumber { end, value: signed(d as f64), unsigned: (!negative).then_some(d) });
    };
    if frac_len == 0 {
        return None;
    }
    let significant = fixed_layout_digits_at(b.get(start..end)?, int_len)?;
    let value = if significant <= 15 {
        // Any decimal of up to 15 significant digits is its double's repr. Its value:
        // digits and power of ten both exact doubles, one correctly rounded division
        // (Clinger's fast path); more digits in all (leading zeros) are the parse's.
        if int_len + frac_len > 15 {
            return None;
        }
        d as f64 / POWERS_OF_TEN[frac_len]
    } else {
        // The integer test says "repr's" only when it is. A whole number (`.0`), or a
        // time under 1 (the gap below a power of two is narrower than it assumes), it
        // may refuse: the scan then decides.
        match fixed_repr_of(d, frac_len, false)? {
            (true, value) => value,
            (false, _) => return None,
        }
    };
    Some(ReadNumber { end, value: signed(value), unsigned: None })
}

/// Where the run of digits from `at` ends; `d` takes them on (times ten, plus each).
/// Eight bytes at a time: which are digits in a few operations on the word, and their
/// value by two multiplications (the method of fast_float's eight-digit parse).
#[inline(always)]
fn digits_from(b: &[u8], mut at: usize, d: &mut u64) -> usize {
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    const HIGH_NIBBLES: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const SIXES: u64 = 0x0606_0606_0606_0606;
    while let Some(chunk) = b.get(at..at + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        // A digit's high nibble is 3, and stays 3 with 6 added (0x3A to 0x3F do not). A
        // carry out of a byte reaches only the bytes after it: past the first non-digit.
        let not_digits = ((w & HIGH_NIBBLES) ^ ZEROS) | ((w.wrapping_add(SIXES) & HIGH_NIBBLES) ^ ZEROS);
        let n = (not_digits.trailing_zeros() / 8) as usize;
        if n > 0 {
            // The first digit is the lowest byte: shifted up, the n digits are led by
            // 8 - n zeros, and the bytes after them are gone (a borrow only goes up).
            let digits = w.wrapping_sub(ZEROS) << (8 * (8 - n));
            *d = d.wrapping_mul(POW10[n]).wrapping_add(eight_digits(digits));
        }
        at += n;
        if n < 8 {
            return at;
        }
    }
    while let Some(digit) = b.get(at).map(|c| c.wrapping_sub(b'0')).filter(|&digit| digit < 10) {
        *d = d.wrapping_mul(10).wrapping_add(u64::from(digit));
        at += 1;
    }
    at
}

/// The value of eight digits, one a byte (0 to 9), the first in the lowest byte.
fn eight_digits(v: u64) -> u64 {
    const MASK: u64 = 0x0000_00FF_0000_00FF;
    // 100 + (1,000,000 << 32) and 1 + (10,000 << 32).
    const MUL1: u64 = 0x000F_4240_0000_0064;
    const MUL2: u64 = 0x0000_2710_0000_0001;
    // Pairs: each byte becomes 10 * itself + the next (at most 99, no carry).
    let v = v.wrapping_mul(10).wrapping_add(v >> 8);
    let v1 = (v & MASK).wrapping_mul(MUL1);
    let v2 = ((v >> 16) & MASK).wrapping_mul(MUL2);
    u64::from((v1.wrapping_add(v2) >> 32) as u32)
}

#[cfg(test)]
mod tests {
    use super::super::{finite_number, member_value_end};
    use super::*;

    /// Eight at a time, the digits end where a byte-by-byte loop ends them, with the same
    /// value: any byte after runs of every length, from any start, at a buffer's end too.
    #[test]
    fn digits_end_and_add_up_as_one_at_a_time() {
        let naive = |b: &[u8], mut at: usize| {
            let mut d: u64 = 0;
            while let Some(&c) = b.get(at).filter(|c| c.is_ascii_digit()) {
                d = d.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
                at += 1;
            }
            (at, d)
        };
        for stop in 0..=255u8 {
            for len in 0..20 {
                let mut bytes: Vec<u8> = (0..len).map(|i| b"7310598642"[i % 10]).collect();
                bytes.push(stop);
                bytes.extend_from_slice(b"99999999");
                for start in [0, len / 2] {
                    for b in [&bytes[..], &bytes[..len]] {
                        let mut d = 0;
                        let end = digits_from(b, start, &mut d);
                        assert_eq!((end, d), naive(b, start), "{b:?} from {start}");
                    }
                }
            }
        }
    }

    /// Whatever the one pass reads, the scan accepts with the same end, and the reader of
    /// a canonical number gives the same double; and it reads most times and pids.
    #[test]
    fn a_number_read_in_one_pass_is_the_scans_and_the_parses() {
        let mut texts = super::super::float::tests::float_texts();
        let mut next = super::super::xorshift(0x1f83_d9ab_fb41_bd6b);
        for _ in 0..5_000 {
            let n = next();
            texts.push(format!("{}", n % 100_000_000));
            texts.push(format!("-{}", n % 1_000));
            texts.push(format!("{}", n));
        }
        texts.extend(
            ["0", "-0", "00", "012", "-", "", "1e5", "1.5e3", "10000000000000000000", "99999999999999999999", "1.2.3"]
                .map(String::from),
        );
        let mut read = 0;
        for t in &texts {
            for after in ["}", ", ", ""] {
                let text = format!("{t}{after}");
                let scanned = member_value_end(&text, 0);
                let Some(number) = number_at(text.as_bytes(), 0) else {
                    continue;
                };
                read += 1;
                assert_eq!(Some(number.end), scanned, "{text:?}: the scan's end");
                let span = &text[..number.end];
                assert_eq!(
                    Some(number.value.to_bits()),
                    finite_number(span).map(f64::to_bits),
                    "{text:?}: the reader's double"
                );
                assert_eq!(number.unsigned, span.parse::<u64>().ok(), "{text:?}: as an integer");
            }
        }
        assert!(read > 100_000, "read in one pass: {read} of {}", texts.len() * 3);
        let hermes = number_at(b"1796275786.6322465}", 0).map(|n| (n.end, n.value));
        assert_eq!(hermes, Some((18, 1796275786.6322465)));
        assert_eq!(number_at(b"20834, ", 0).and_then(|n| n.unsigned), Some(20834));
    }
}
