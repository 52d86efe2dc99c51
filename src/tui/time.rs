//! Wall-clock formatting for the console, from epoch seconds in a time zone. Each
//! timestamp is converted with the zone's rules in force at that instant (daylight
//! saving included); the zone is found once at startup, so rendering does no I/O.

use jiff::Timestamp;
use jiff::tz::TimeZone;

/// The system's time zone (`TZ`, else /etc/localtime); UTC when none can be found.
pub fn local_zone() -> TimeZone {
    TimeZone::try_system().unwrap_or(TimeZone::UTC)
}

fn zoned(t: f64, tz: &TimeZone) -> Option<jiff::Zoned> {
    Timestamp::from_second(t.floor() as i64).ok().map(|ts| ts.to_zoned(tz.clone()))
}

/// `HH:MM:SS` when `t` is on the same local day as `now`, else `MM-DD HH:MM`.
pub fn clock(t: f64, now: f64, tz: &TimeZone) -> String {
    match (zoned(t, tz), zoned(now, tz)) {
        (Some(at), Some(today)) if at.date() == today.date() => at.strftime("%H:%M:%S").to_string(),
        (Some(at), _) => at.strftime("%m-%d %H:%M").to_string(),
        (None, _) => "-".into(),
    }
}

/// When the local day of `now` began (epoch seconds): a time before it is shown with its date.
pub fn day_start(now: f64, tz: &TimeZone) -> f64 {
    zoned(now, tz).and_then(|z| z.start_of_day().ok()).map_or(now, |z| z.timestamp().as_second() as f64)
}

/// A full local timestamp, `YYYY-MM-DD HH:MM:SS`.
pub fn full(t: f64, tz: &TimeZone) -> String {
    zoned(t, tz).map_or_else(|| "-".into(), |z| z.strftime("%Y-%m-%d %H:%M:%S").to_string())
}

/// A compact age, as the CLI writes it too: `42s`, `5m`, `3h12m`, `2d04h`.
pub fn age(seconds: f64) -> String {
    crate::lease::words::human::duration(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_dates_and_ages() {
        // 2026-11-29 22:19:18 UTC
        let t = 1_795_990_758.0;
        let plus_one = TimeZone::fixed(jiff::tz::offset(1));
        assert_eq!(full(t, &TimeZone::UTC), "2026-11-29 22:19:18");
        assert_eq!(full(t, &plus_one), "2026-11-29 23:19:18");
        assert_eq!(clock(t, t + 60.0, &TimeZone::UTC), "22:19:18");
        assert_eq!(clock(t - 86_400.0, t, &TimeZone::UTC), "11-28 22:19");
        assert_eq!(age(42.0), "42s");
        assert_eq!(age(3.0 * 3600.0 + 720.0), "3h12m");
        assert_eq!(age(2.0 * 86_400.0 + 4.0 * 3600.0), "2d04h");
    }

    /// Each timestamp gets the offset in force at its own instant: one offset taken at
    /// start-up would put one of these an hour off.
    #[test]
    fn daylight_saving_is_applied_per_timestamp() {
        let berlin = TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").expect("a POSIX TZ rule");
        // 2026-01-15 12:00:00 UTC (winter, +1) and 2026-07-15 12:00:00 UTC (summer, +2).
        assert_eq!(full(1_768_478_400.0, &berlin), "2026-01-15 13:00:00");
        assert_eq!(full(1_784_116_800.0, &berlin), "2026-07-15 14:00:00");
        // Across the change on 2026-03-29 (01:00 UTC): 00:59:59 UTC is 01:59:59 CET, 01:00:00 UTC is 03:00:00 CEST.
        assert_eq!(full(1_774_745_999.0, &berlin), "2026-03-29 01:59:59");
        assert_eq!(full(1_774_746_000.0, &berlin), "2026-03-29 03:00:00");
    }
}
