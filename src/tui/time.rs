//! Wall-clock formatting for the console, from epoch seconds and a UTC offset
//! (taken once at startup, so rendering stays free of I/O and deterministic in tests).

/// The local UTC offset in seconds right now (0 when it cannot be found).
pub fn local_utc_offset() -> i64 {
    let now = crate::lease::now() as libc::time_t;
    // SAFETY: localtime_r writes only into `tm`, which we own.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() { 0 } else { tm.tm_gmtoff }
    }
}

use crate::lease::calendar::civil_from_days;

/// `HH:MM:SS` when `t` is on the same local day as `now`, else `MM-DD HH:MM`.
pub fn clock(t: f64, now: f64, offset: i64) -> String {
    let local = t.floor() as i64 + offset;
    let (days, secs) = (local.div_euclid(86_400), local.rem_euclid(86_400));
    let today = (now.floor() as i64 + offset).div_euclid(86_400);
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    if days == today {
        format!("{h:02}:{m:02}:{s:02}")
    } else {
        let (_, mo, d) = civil_from_days(days);
        format!("{mo:02}-{d:02} {h:02}:{m:02}")
    }
}

/// A full local timestamp, `YYYY-MM-DD HH:MM:SS`.
pub fn full(t: f64, offset: i64) -> String {
    let local = t.floor() as i64 + offset;
    let (days, secs) = (local.div_euclid(86_400), local.rem_euclid(86_400));
    let (y, mo, d) = civil_from_days(days);
    format!("{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}", secs / 3600, secs % 3600 / 60, secs % 60)
}

/// A compact age: `42s`, `5m`, `3h12m`, `2d4h`.
pub fn age(seconds: f64) -> String {
    let s = if seconds.is_finite() && seconds > 0.0 { seconds as u64 } else { 0 };
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => {
            let (h, m) = (s / 3600, s % 3600 / 60);
            if m == 0 { format!("{h}h") } else { format!("{h}h{m}m") }
        }
        _ => {
            let (d, h) = (s / 86_400, s % 86_400 / 3600);
            if h == 0 { format!("{d}d") } else { format!("{d}d{h}h") }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_dates_and_ages() {
        // 2026-11-29 22:19:18 UTC
        let t = 1_795_990_758.0;
        assert_eq!(full(t, 0), "2026-11-29 22:19:18");
        assert_eq!(full(t, 3600), "2026-11-29 23:19:18");
        assert_eq!(clock(t, t + 60.0, 0), "22:19:18");
        assert_eq!(clock(t - 86_400.0, t, 0), "11-28 22:19");
        assert_eq!(age(42.0), "42s");
        assert_eq!(age(3.0 * 3600.0 + 720.0), "3h12m");
        assert_eq!(age(2.0 * 86_400.0 + 4.0 * 3600.0), "2d4h");
    }
}
