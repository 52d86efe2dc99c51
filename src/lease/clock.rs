//! The wall clock, read as Hermes reads it.

/// Wall-clock time as epoch seconds, like Python's `time.time()`.
pub fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}
