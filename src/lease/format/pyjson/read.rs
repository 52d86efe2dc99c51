//! Reading JSON text as Python's `json.loads` does (and so Hermes), where that differs
//! from serde_json: the constants `NaN`, `Infinity` and `-Infinity` are values, a number
//! too large for a double is a float that Python reads as infinity (serde_json keeps
//! its text, so that part needs no parser), and an integer of more than 4,300 digits is
//! refused (Python's `int` limit, a `ValueError` out of `json.loads`).
//!
//! serde_json reads every text first; this module's own parser runs only when serde_json
//! refused a text that holds one of the constants, so ordinary registries pay nothing.

use serde_json::{Number, Value};

/// The most digits Python's `int()` converts (`sys.get_int_max_str_digits()`, 3.11+).
pub const MAX_INT_DIGITS: usize = 4300;

/// How deep we read (serde_json's own limit, kept for both parsers so one text is
/// refused or read the same whichever of them reads it).
const MAX_DEPTH: usize = 128;

/// Why a text is not JSON to Python's `json` (or too deep for us).
#[derive(Debug, Clone, PartialEq)]
pub struct NotJson {
    pub detail: String,
    /// Nesting beyond [`MAX_DEPTH`]: the caller names the depth.
    pub too_deep: bool,
}

impl std::fmt::Display for NotJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

impl From<serde_json::Error> for NotJson {
    fn from(e: serde_json::Error) -> Self {
        let detail = e.to_string();
        NotJson { too_deep: detail.contains("recursion limit exceeded"), detail }
    }
}

/// `text` as a value, read by Python's rules: what `json.loads` accepts (strict mode)
/// and the Python constants kept as numbers whose text is `NaN`, `Infinity` or
/// `-Infinity` (the writer writes them back as Python does).
pub fn parse(text: &str) -> Result<Value, NotJson> {
    let value = match serde_json::from_str::<Value>(text) {
        Ok(v) => v,
        Err(e) if may_hold_constants(text.as_bytes()) => {
            let mut parser = Parser { text, pos: 0, depth: 0 };
            match parser.document() {
                Ok(v) => v,
                // A constant was not the trouble: serde_json's words for the real one.
                Err(ours) if ours.too_deep => return Err(e.into()),
                Err(ours) => return Err(ours),
            }
        }
        Err(e) => return Err(e.into()),
    };
    match find_overlong_int(&value) {
        Some(digits) => Err(overlong(digits)),
        None => Ok(value),
    }
}

/// True when `text` has `N` or `I` outside its strings: the only way a Python constant
/// can be there (standard JSON has no capital letter outside strings).
pub fn may_hold_constants(text: &[u8]) -> bool {
    super::outside_strings(text).any(|(_, b)| b == b'N' || b == b'I')
}

/// A number whose text is one of Python's constants (`NaN`, `Infinity`, `-Infinity`).
pub fn constant(token: &str) -> Number {
    // serde_json (with `arbitrary_precision`, on for this) keeps a number's text, and its
    // `as_f64` parses that text ("NaN" reads as NaN, then is filtered as not finite).
    // `from_string_unchecked` is its only way to hold text it would not parse; the
    // version is pinned in Cargo.lock and a unit test below fails if this changes.
    Number::from_string_unchecked(token.to_owned())
}

/// True for a number that is one of Python's constants or too large for a double:
/// what Python's `json` writes as `NaN`/`Infinity` and standard JSON cannot hold.
pub fn is_non_finite(n: &Number) -> bool {
    let text = n.to_string();
    match text.as_str() {
        "NaN" | "Infinity" | "-Infinity" => true,
        t if t.contains(['.', 'e', 'E']) => t.parse::<f64>().map_or(true, |f| !f.is_finite()),
        _ => false,
    }
}

/// `value` with every non-finite number as `null`: for leasectl's own JSON output,
/// which must stay standard JSON (the registry itself keeps them as Hermes wrote them).
pub fn standard(value: Value) -> Value {
    match value {
        Value::Number(n) if is_non_finite(&n) => Value::Null,
        Value::Array(items) => Value::Array(items.into_iter().map(standard).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, standard(v))).collect()),
        other => other,
    }
}

/// The digit count of an integer in `v` that Python's `json.loads` refuses to convert.
pub fn find_overlong_int(v: &Value) -> Option<usize> {
    match v {
        Value::Number(n) => {
            let text = n.to_string();
            let digits = text.trim_start_matches('-').len();
            (digits > MAX_INT_DIGITS && !text.contains(['.', 'e', 'E'])).then_some(digits)
        }
        Value::Array(items) => items.iter().find_map(find_overlong_int),
        Value::Object(map) => map.values().find_map(find_overlong_int),
        _ => None,
    }
}

/// The refusal for an integer of `digits` digits, in the words an operator needs.
pub fn overlong(digits: usize) -> NotJson {
    NotJson {
        detail: format!(
            "an integer of {digits} digits (Python's json, and so Hermes, refuses integers over {MAX_INT_DIGITS} digits)"
        ),
        too_deep: false,
    }
}

/// A recursive-descent reader of Python's JSON grammar (`json.decoder`, strict).
struct Parser<'t> {
    text: &'t str,
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn document(&mut self) -> Result<Value, NotJson> {
        self.whitespace();
        let value = self.value()?;
        self.whitespace();
        if self.pos < self.text.len() {
            return Err(self.error("trailing characters"));
        }
        Ok(value)
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// An error at the current position, located as serde_json locates its own (a
    /// position inside a character counts as that character's).
    fn error(&self, what: &str) -> NotJson {
        let mut at = self.pos.min(self.text.len());
        while !self.text.is_char_boundary(at) {
            at -= 1;
        }
        let before = &self.text[..at];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        NotJson { detail: format!("{what} at line {line} column {column}"), too_deep: false }
    }

    fn value(&mut self) -> Result<Value, NotJson> {
        let Some(first) = self.peek() else {
            return Err(self.error("EOF while parsing a value"));
        };
        let word = |p: &mut Self, w: &str, v: Value| {
            if p.rest().starts_with(w) {
                p.pos += w.len();
                Ok(v)
            } else {
                Err(p.error("expected value"))
            }
        };
        match first {
            b'{' | b'[' => {
                if self.depth >= MAX_DEPTH {
                    return Err(NotJson { detail: "recursion limit exceeded".into(), too_deep: true });
                }
                self.depth += 1;
                let v = if first == b'{' { self.object() } else { self.array() };
                self.depth -= 1;
                v
            }
            b'"' => self.string().map(Value::String),
            b'N' => word(self, "NaN", Value::Number(constant("NaN"))),
            b'I' => word(self, "Infinity", Value::Number(constant("Infinity"))),
            b'-' if self.rest().starts_with("-Infinity") => {
                word(self, "-Infinity", Value::Number(constant("-Infinity")))
            }
            b't' => word(self, "true", Value::Bool(true)),
            b'f' => word(self, "false", Value::Bool(false)),
            b'n' => word(self, "null", Value::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(self.error("expected value")),
        }
    }

    /// `-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?`, Python's NUMBER_RE: what follows the
    /// longest match is left for the caller (so `01` fails there, as in Python).
    fn number(&mut self) -> Result<Value, NotJson> {
        let b = self.text.as_bytes();
        let start = self.pos;
        let digits_from = |mut p: usize| {
            while b.get(p).is_some_and(u8::is_ascii_digit) {
                p += 1;
            }
            p
        };
        let mut p = start + usize::from(b[start] == b'-');
        p = match b.get(p) {
            Some(b'0') => p + 1,
            Some(b'1'..=b'9') => digits_from(p),
            _ => {
                self.pos = p;
                return Err(self.error("expected value"));
            }
        };
        let integer_end = p;
        if b.get(p) == Some(&b'.') && b.get(p + 1).is_some_and(u8::is_ascii_digit) {
            p = digits_from(p + 1);
        }
        if matches!(b.get(p), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(b.get(p + 1), Some(b'+' | b'-')));
            if b.get(p + 1 + sign).is_some_and(u8::is_ascii_digit) {
                p = digits_from(p + 1 + sign);
            }
        }
        let text = &self.text[start..p];
        if p == integer_end && text.trim_start_matches('-').len() > MAX_INT_DIGITS {
            return Err(overlong(text.trim_start_matches('-').len()));
        }
        self.pos = p;
        text.parse::<Number>().map(Value::Number).map_err(|_| self.error("invalid number"))
    }

    fn string(&mut self) -> Result<String, NotJson> {
        let b = self.text.as_bytes();
        self.pos += 1;
        let mut out = String::new();
        loop {
            let run = super::canonical::plain_run(&b[self.pos..]);
            out.push_str(&self.text[self.pos..self.pos + run]);
            self.pos += run;
            match self.peek() {
                None => return Err(self.error("EOF while parsing a string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => self.escape(&mut out)?,
                Some(_) => return Err(self.error("control character (\\u0000-\\u001F) found while parsing a string")),
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), NotJson> {
        let Some(kind) = self.text.as_bytes().get(self.pos + 1).copied() else {
            self.pos += 1;
            return Err(self.error("EOF while parsing a string"));
        };
        self.pos += 2;
        let simple = match kind {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{08}',
            b'f' => '\u{0c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4()?;
                let ch = match unit {
                    0xD800..=0xDBFF if self.rest().starts_with("\\u") => {
                        let mark = self.pos;
                        self.pos += 2;
                        let low = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            self.pos = mark;
                            return Err(self.lone_surrogate(unit));
                        }
                        char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
                    }
                    0xD800..=0xDFFF => None,
                    _ => char::from_u32(unit),
                };
                out.push(ch.ok_or_else(|| self.lone_surrogate(unit))?);
                return Ok(());
            }
            _ => return Err(self.error("invalid escape")),
        };
        out.push(simple);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, NotJson> {
        let hex = self.text.get(self.pos..self.pos + 4).filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()));
        let Some(hex) = hex else {
            return Err(self.error("invalid \\u escape"));
        };
        self.pos += 4;
        u32::from_str_radix(hex, 16).map_err(|_| self.error("invalid \\u escape"))
    }

    /// Python reads a lone surrogate into a string that UTF-8 cannot hold; no file
    /// could be written back with it (Hermes' own write fails on it too).
    fn lone_surrogate(&self, unit: u32) -> NotJson {
        self.error(&format!("lone surrogate \\u{unit:04x} (no UTF-8 text can hold it)"))
    }

    fn array(&mut self) -> Result<Value, NotJson> {
        self.pos += 1;
        let mut items = Vec::new();
        self.whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.whitespace();
            items.push(self.value()?);
            self.whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                None => return Err(self.error("EOF while parsing a list")),
                Some(_) => return Err(self.error("expected `,` or `]`")),
            }
        }
    }

    fn object(&mut self) -> Result<Value, NotJson> {
        self.pos += 1;
        let mut map = serde_json::Map::new();
        self.whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(map));
        }
        loop {
            self.whitespace();
            match self.peek() {
                Some(b'"') => {}
                None => return Err(self.error("EOF while parsing an object")),
                Some(_) => return Err(self.error("key must be a string")),
            }
            let key = self.string()?;
            self.whitespace();
            if self.peek() != Some(b':') {
                return Err(self.error("expected `:`"));
            }
            self.pos += 1;
            self.whitespace();
            // A repeated key: the last one wins, as in a Python dict.
            let value = self.value()?;
            map.insert(key, value);
            self.whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                None => return Err(self.error("EOF while parsing an object")),
                Some(_) => return Err(self.error("expected `,` or `}`")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(text: &str) -> String {
        super::super::to_string(&parse(text).unwrap_or_else(|e| panic!("{text}: {e}")))
    }

    #[test]
    fn python_constants_are_read_and_written_back_as_python_writes_them() {
        assert_eq!(
            written("[NaN, Infinity, -Infinity, 1e999, -1E400, 0.0]"),
            "[NaN, Infinity, -Infinity, Infinity, -Infinity, 0.0]"
        );
        assert_eq!(
            written("{\"b\": {\"x\" : NaN}, \"a\":\"NaN Infinity\"}"),
            "{\"a\": \"NaN Infinity\", \"b\": {\"x\": NaN}}"
        );
        assert_eq!(
            written("[\"\\ud83d\\ude00\", \"\\u00e9\\/\", 12345678901234567890123]"),
            "[\"😀\", \"é/\", 12345678901234567890123]"
        );
    }

    #[test]
    fn a_constant_number_keeps_its_text_and_reads_as_not_finite() {
        // Guards the one serde_json API used outside its documented surface.
        let n = constant("NaN");
        assert_eq!(n.to_string(), "NaN");
        assert_eq!(n.as_f64(), None, "not a finite number to any rule that wants one");
        assert!(is_non_finite(&n) && is_non_finite(&constant("-Infinity")));
        assert!(is_non_finite(&"1e999".parse().expect("number")));
        assert!(!is_non_finite(&"1e308".parse().expect("number")) && !is_non_finite(&"12".parse().expect("number")));
        assert_eq!(
            standard(parse("[NaN, {\"a\": 1e999}, 1.5]").expect("json")),
            serde_json::json!([null, {"a": null}, 1.5])
        );
    }

    #[test]
    fn what_python_refuses_is_refused() {
        for bad in [
            "[-NaN]",
            "[nan]",
            "[NaN,]",
            "[Infinity",
            "{NaN: 1}",
            "[01, NaN]",
            "[1., NaN]",
            "[NaN] x",
            "[\"\\ud800\", NaN]",
            "[\"\\udc00\", NaN]",
            "[\"a\tb\", NaN]",
            "[\"\\x\", NaN]",
            "{\"a\" 1, \"b\": NaN}",
            "[+1, NaN]",
            "[NaNa]",
        ] {
            assert!(parse(bad).is_err(), "{bad} must be refused");
        }
        let long = format!("[{}, NaN]", "7".repeat(MAX_INT_DIGITS + 1));
        assert!(parse(&long).expect_err("too long").detail.contains("4301 digits"));
        let long_plain = format!("[{}]", "7".repeat(MAX_INT_DIGITS + 1));
        assert!(parse(&long_plain).expect_err("too long").detail.contains("4301 digits"));
        let fine = format!("[-{}, NaN]", "7".repeat(MAX_INT_DIGITS));
        assert!(parse(&fine).is_ok(), "the sign is not a digit");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        /// Texts made of JSON's pieces, Python's constants, escapes and multibyte
        /// characters, in any order: read or refused, never a panic.
        #[test]
        fn any_mix_of_pieces_never_panics(pieces in proptest::collection::vec(proptest::sample::select(vec![
            "[", "]", "{", "}", ",", ":", " ", "\"", "\\", "\\u", "d8", "00", "NaN", "Infinity", "-", "1", "0",
            ".", "e", "é", "😀", "\u{0}", "\n", "tru", "null", "I", "N",
        ]), 0..40)) {
            // Led by a constant, so serde_json refuses and this reader reads every text.
            let text = format!("[NaN, {}", pieces.concat());
            let _ = parse(&text);
        }
    }

    #[test]
    fn an_error_inside_a_multibyte_character_is_located_without_a_panic() {
        // An escape of a non-ASCII character: the error's position falls inside it.
        let e = parse("[\"\\é\", NaN]").expect_err("invalid escape");
        assert!(e.detail.starts_with("invalid escape at line 1"), "{e}");
        assert!(parse("[NaN, \"\\😀\"]").is_err());
    }

    #[test]
    fn errors_are_located_and_depth_is_reported_as_depth() {
        let e = parse("{\"a\": NaN,\n \"b\": [1, }").expect_err("bad");
        assert_eq!(e.detail, "expected value at line 2 column 11");
        let deep = format!("{}NaN{}", "[".repeat(200), "]".repeat(200));
        assert!(parse(&deep).expect_err("deep").too_deep);
    }
}
