//! Text for people, the same in the CLI and the console: durations, and names from
//! files shown without the control characters that would act on the terminal.

use std::borrow::Cow;
use std::time::Duration;

use super::unusable::Unusable;

/// A compact duration: `41s`, `3m`, `2h05m`, `3d11h` (the two largest units, the
/// second zero-padded so columns line up). Negative, NaN and infinite read `0s`.
pub(crate) fn duration(seconds: f64) -> String {
    let s = if seconds.is_finite() && seconds > 0.0 { seconds as u64 } else { 0 };
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// Characters that act on a terminal or reorder text instead of showing: C0 (tab and
/// newline included: they forge table lines), DEL, C1, and the bidi embeddings,
/// overrides and isolates.
fn acts_on_terminal(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` as people may see it: every character that would act on the terminal
/// written visibly as `\u{1b}`. JSON output never goes through this (it stays exact).
pub(crate) fn escape(text: &str) -> Cow<'_, str> {
    escape_where(text, acts_on_terminal)
}

/// Text laid out in lines for a terminal (a CLI message, a table): every character that
/// would act on the terminal escaped as [`escape`] does, except the newlines and tabs
/// the text is laid out with. The last guard before a person's terminal: whatever a
/// message quotes from a home (a profile's name, a path, an error) is shown, not obeyed.
pub(crate) fn escape_layout(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| acts_on_terminal(c) && c != '\n' && c != '\t')
}

fn escape_where(text: &str, acts: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&acts) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if acts(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A word as a POSIX shell reads it back: bare when it is plainly safe, else in single
/// quotes (hints to copy, and the command lines the audit records).
pub(crate) fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@%=~".contains(&b))
        && !word.starts_with('~');
    if plain { word.to_owned() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

/// An idle threshold as written in config or on the command line: `2h`, `90m`,
/// `1h 30m`, `45s`, or plain seconds.
pub(crate) fn parse_idle(text: &str) -> Result<Duration, Unusable> {
    parse_duration(text)
}

/// An event's time as every event line shows it: UTC, fixed width, milliseconds, so
/// lines stay aligned and sort as text (the audit file's own microseconds included).
pub(crate) fn event_time(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// `n` and the word for that many: "1 lease", "3 leases", "0 leases".
pub(crate) fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 { format!("1 {one}") } else { format!("{n} {many}") }
}

/// The longest duration leasectl takes (an idle threshold, `--since`): a hundred years.
/// Anything longer is a typo, and would overflow the arithmetic on times.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 86_400);

/// The forms [`parse_duration`] takes, as its errors and the help say them.
pub(crate) const DURATION_FORMS: &str = "2h, 90m, 1h30m, 2d, 45s or 3600 (seconds)";

/// A duration as people write it (`2h`, `90m`, `1h 30m`, `3600`): more than 0 and at
/// most [`MAX_DURATION`]. The error names neither the option nor the text: clap says
/// both before it ("invalid value '1x' for '--since <DURATION>'"), config.yaml's reader too.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, Unusable> {
    let t = text.trim();
    let too_long = || Unusable("longer than 100 years".into());
    let not_positive = || Unusable("must be more than 0 seconds".into());
    if let Ok(secs) = t.parse::<f64>() {
        if !secs.is_finite() || secs <= 0.0 {
            return Err(not_positive());
        }
        if secs > MAX_DURATION.as_secs_f64() {
            return Err(too_long());
        }
        return Duration::try_from_secs_f64(secs).map_err(|_| too_long());
    }
    // jiff's own words name its types ("try parsing into a `jiff::Span`"): ours say the forms.
    let not_a_duration =
        || Unusable(format!("not a duration; write it as {DURATION_FORMS}, in units of d, h, m and s"));
    let span: jiff::Span = t.parse().map_err(|_| not_a_duration())?;
    // A day is 24 hours here (an idle threshold, a look back), not a calendar day;
    // months and years stay refused (their length varies) rather than guessed.
    let span: jiff::SignedDuration =
        span.to_duration(jiff::SpanRelativeTo::days_are_24_hours()).map_err(|_| not_a_duration())?;
    if span.is_negative() || span.is_zero() {
        return Err(not_positive());
    }
    let d = Duration::try_from(span).map_err(|_| too_long())?;
    if d > MAX_DURATION {
        return Err(too_long());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_acts_on_a_terminal_is_shown_not_obeyed() {
        assert_eq!(escape("chat-42"), "chat-42");
        assert!(matches!(escape("plain"), Cow::Borrowed(_)));
        assert_eq!(escape("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(escape("x\ny\tz\u{7f}"), "x\\u{a}y\\u{9}z\\u{7f}");
        assert_eq!(escape("\u{9b}31m"), "\\u{9b}31m", "C1 CSI");
        assert_eq!(escape("abc\u{202e}fed"), "abc\\u{202e}fed", "right-to-left override");
        assert_eq!(escape("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
        assert_eq!(escape("会話 é"), "会話 é", "other text is kept");
    }

    #[test]
    fn durations_read_the_same_everywhere() {
        assert_eq!(duration(41.9), "41s");
        assert_eq!(duration(0.0), "0s");
        assert_eq!(duration(-3.0), "0s");
        assert_eq!(duration(f64::NAN), "0s");
        assert_eq!(duration(59.0), "59s");
        assert_eq!(duration(60.0), "1m");
        assert_eq!(duration(3.0 * 60.0 + 59.0), "3m");
        assert_eq!(duration(2.0 * 3600.0 + 5.0 * 60.0), "2h05m");
        assert_eq!(duration(3600.0), "1h00m");
        assert_eq!(duration(3.0 * 86_400.0 + 11.0 * 3600.0 + 59.0), "3d11h");
        assert_eq!(duration(83.0 * 3600.0 + 20.0 * 60.0), "3d11h");
        assert_eq!(duration(96_048_293.46), "1111d16h");
    }

    #[test]
    fn idle_thresholds_read_like_people_write_them() {
        assert_eq!(parse_idle("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_idle("90m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_idle("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_idle("3600"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_idle("2d"), Ok(Duration::from_secs(2 * 86_400)));
        // Our words, not the parser library's (it named its own types).
        let typo = parse_idle("10y").unwrap_err().0;
        assert!(typo.contains("2h, 90m") && !typo.contains("jiff"), "{typo}");
        assert!(parse_idle("0").is_err() && parse_idle("-5m").is_err() && parse_idle("soon").is_err());
        // Out of range is an error, never a panic (Duration::from_secs_f64 panics on these).
        for huge in ["1e30", "18446744073709551615", "inf", "NaN", "1e308", "200y", "9999999999h"] {
            assert!(parse_idle(huge).is_err(), "{huge}");
        }
    }
}
