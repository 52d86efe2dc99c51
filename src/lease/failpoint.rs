//! Crash points for tests, compiled in only with the `failpoints` feature: a build
//! without it has none, and reads no environment variable for them.

/// True when `LEASECTL_TEST_FAILPOINT` names `step` (read once per process).
#[cfg(feature = "failpoints")]
pub(crate) fn chosen(step: &str) -> bool {
    static CHOSEN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    CHOSEN.get_or_init(|| std::env::var("LEASECTL_TEST_FAILPOINT").ok()).as_deref() == Some(step)
}

/// Never, in a build without the `failpoints` feature.
#[cfg(not(feature = "failpoints"))]
pub(crate) fn chosen(_step: &str) -> bool {
    false
}
