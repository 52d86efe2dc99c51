//! The documents are tests: every `--help` is a reviewed snapshot (a change to one is a
//! diff in `tests/cmd/`), and the README's examples run, their shown output compared
//! (`[..]` stands for what differs from run to run: pids, times, paths).
//! `TRYCMD=overwrite` rewrites the snapshots after a deliberate change.

use crate::common::process::BIN;

/// Help differs with the etcd feature (its options show only in a build that has it).
const HELP: &str = if cfg!(feature = "etcd") { "tests/cmd/help-etcd/*.toml" } else { "tests/cmd/help/*.toml" };

#[test]
fn every_help_is_as_reviewed() {
    trycmd::TestCases::new().register_bin("leasectl", std::path::Path::new(BIN)).env("COLUMNS", "100").case(HELP);
}
