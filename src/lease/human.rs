//! Text for people, the same in the CLI and the console: durations.

/// A compact duration: `41s`, `3m`, `2h05m`, `3d11h` (the two largest units, the
/// second zero-padded so columns line up). Negative, NaN and infinite read `0s`.
pub fn duration(seconds: f64) -> String {
    let s = if seconds.is_finite() && seconds > 0.0 { seconds as u64 } else { 0 };
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
