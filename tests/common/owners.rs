//! The owner every in-memory fixture shows (tests and benches share this file).

use leasectl::lease::owners::owner::OwnerInfo;

/// A live owner named `name`, as sysinfo would describe a typical Hermes process.
pub fn owner(name: &str) -> OwnerInfo {
    OwnerInfo {
        name: name.into(),
        cmdline: vec![name.into(), "--serve".into()],
        rss_bytes: 48 * 1024 * 1024,
        cpu_percent: 1.5,
        user: Some("op".into()),
    }
}
