//! A unit file checked as systemd reads it: `systemd-analyze verify` and `security` in a
//! filesystem root of its own, with leasectl where the unit's ExecStart runs it.

use std::fs;
use std::path::Path;

use super::process::Proc;

/// `unit` verifies with no warning and rates "OK" (exposure at most 3.0 of 10: the unit
/// without hardening is 9.2, UNSAFE), with `leasectl` copied to `exec` in the root; its
/// ExecStart is a command line leasectl takes.
pub fn verify_unit(unit: &Path, exec: &str, leasectl: &Path) {
    let text = fs::read_to_string(unit).unwrap_or_else(|e| panic!("read {}: {e}", unit.display()));
    let root = tempfile::tempdir().expect("temp dir");
    let r = root.path();
    for dir in ["etc/systemd/system", "usr/lib/systemd"] {
        fs::create_dir_all(r.join(dir)).expect("root dirs");
    }
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .arg("/usr/lib/systemd/system")
        .arg(r.join("usr/lib/systemd/"))
        .status()
        .expect("cp systemd's units");
    assert!(copied.success());
    fs::write(r.join("etc/systemd/system/leasectl-recorder.service"), &text).expect("unit");
    let exec_in_root = r.join(exec.trim_start_matches('/'));
    fs::create_dir_all(exec_in_root.parent().expect("a folder")).expect("the binary's folder");
    fs::copy(leasectl, &exec_in_root).expect("leasectl into the root");
    let analyze = |args: &[&str]| {
        Proc::run("systemd-analyze", {
            let mut cmd = std::process::Command::new("systemd-analyze");
            cmd.args(args).arg(format!("--root={}", r.display())).arg("/etc/systemd/system/leasectl-recorder.service");
            cmd
        })
    };
    let verify = analyze(&["verify"]);
    verify.expect_exit(0);
    assert!(verify.stderr.trim().is_empty(), "no warning either: {verify:?}");
    analyze(&["security", "--offline=true", "--threshold=30"]).expect_exit(0);
    // Its command line is one leasectl takes.
    use clap::Parser as _;
    let line = text.split("ExecStart=").nth(1).expect("ExecStart").replace("\\\n", " ");
    let line = line.lines().next().unwrap_or_default().replace(exec, "leasectl");
    assert!(line.starts_with("leasectl "), "ExecStart runs {exec}: {line}");
    // (no quoting in it: words are split at spaces)
    leasectl::cli::Cli::try_parse_from(line.split_whitespace()).expect("ExecStart parses");
}
