//! `leasectl install` against a real sshd: a host without leasectl is named with the
//! exact command that puts this build there, that command does it (checksum checked,
//! into the user's own folder), `--host` then reaches the host, and a leasectl that
//! install did not put there is never replaced. A host that runs another version is
//! named, never silently used.

use std::path::{Path, PathBuf};

use crate::common;
use common::process::{BIN, Out, Proc, label};
use common::sshd::Sshd;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A host whose sessions have `XDG_BIN_HOME` (where install puts leasectl) in the test's
/// folder and a PATH with no leasectl on it.
fn host_without_leasectl() -> (Sshd, PathBuf) {
    let mut sshd = Sshd::start();
    let bin_home = sshd.dir().join("remote-bin");
    let path = "/usr/bin:/bin";
    for dir in path.split(':') {
        assert!(!Path::new(dir).join("leasectl").exists(), "{dir}/leasectl is there: the host is to have none");
    }
    sshd.set_env(&[("XDG_BIN_HOME", &bin_home.display().to_string()), ("PATH", path)]);
    (sshd, bin_home)
}

/// `leasectl ARGS` over the test's sshd, the remote's command left as leasectl's own.
fn run(sshd: &Sshd, args: &[&str]) -> Out {
    let mut cmd = sshd.leasectl(args);
    cmd.env_remove("LEASECTL_REMOTE_COMMAND");
    Proc::run(&label(args), cmd)
}

#[test]
fn install_puts_this_build_where_the_host_runs_it_after_naming_the_exact_command() {
    let (sshd, bin_home) = host_without_leasectl();
    let home = tempfile::tempdir().expect("the host's home");
    let spec = sshd.spec("gw1", home.path());

    // No leasectl there: the message names the command that puts this build there.
    let missing = run(&sshd, &["--host", &spec, "ls"]);
    missing.expect_exit(1);
    let said = format!("{}{}", missing.stdout, missing.stderr);
    assert!(said.contains("leasectl is neither in"), "{missing:?}");
    let named = said
        .split('`')
        .find(|part| part.starts_with("leasectl --host") && part.ends_with(" install"))
        .unwrap_or_else(|| panic!("an install command in: {said}"))
        .to_owned();

    // That very command, as pasted.
    let words = crate::hints::shell_words(&named);
    let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
    let installed = run(&sshd, &args);
    installed.expect_exit(0);
    let there = bin_home.join("leasectl");
    assert!(
        installed.stdout.contains(&format!("gw1: installed leasectl {VERSION} at {}", there.display())),
        "{installed:?}"
    );
    assert_eq!(std::fs::read(&there).expect("the copy"), std::fs::read(BIN).expect("this build"), "the same bytes");
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(&there).expect("the copy").permissions().mode() & 0o777, 0o755);

    // --host reaches it now, with no LEASECTL_REMOTE_COMMAND.
    let listed = run(&sshd, &["--host", &spec, "ls"]);
    listed.expect_exit(0);
    assert!(listed.stdout.contains("0 leases"), "{listed:?}");
    assert!(!listed.stderr.contains("runs leasectl"), "the same version: nothing to say: {listed:?}");

    // Again: nothing to do.
    let again = run(&sshd, &args);
    again.expect_exit(0);
    assert!(again.stdout.contains(&format!("gw1: leasectl {VERSION} is there already")), "{again:?}");

    // A leasectl there that install did not put there is never replaced.
    std::fs::write(&there, "#!/bin/sh\necho 'the operator's own'\n").expect("another leasectl");
    let refused = run(&sshd, &args);
    refused.expect_exit(1);
    assert!(refused.stderr.contains("is not one leasectl installed"), "{refused:?}");
    assert_eq!(std::fs::read_to_string(&there).expect("left as it was"), "#!/bin/sh\necho 'the operator's own'\n");
    let leftovers: Vec<_> = std::fs::read_dir(&bin_home)
        .expect("the folder")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.starts_with(".leasectl.") && n != ".leasectl.sha256")
        .collect();
    assert!(leftovers.is_empty(), "no temp copy left behind: {leftovers:?}");
}

#[test]
fn install_needs_a_host_and_says_so() {
    let out = Proc::run("install", {
        let mut cmd = std::process::Command::new(BIN);
        cmd.arg("install").env_remove("LEASECTL_HOSTS").env("XDG_CONFIG_HOME", "/nonexistent");
        cmd
    });
    out.expect_exit(2);
    assert!(out.stderr.contains("name them with --host SPEC"), "{out:?}");
}

#[test]
fn a_host_of_another_version_is_named_with_the_command_that_puts_this_build_there() {
    let sshd = Sshd::start();
    let home = tempfile::tempdir().expect("the host's home");
    let spec = sshd.spec("gw1", home.path());
    let mut cmd = sshd.leasectl(&["--host", &spec, "ls"]);
    cmd.env("LEASECTL_REMOTE_COMMAND", sshd.older_leasectl());
    let out = Proc::run("ls over an older leasectl", cmd);
    out.expect_exit(0);
    assert!(out.stdout.contains("0 leases"), "the host answers: {out:?}");
    let note = format!("leasectl: note: host gw1 runs leasectl 0.0.9, this is leasectl {VERSION}: `leasectl --host ");
    assert!(out.stderr.contains(&note) && out.stderr.contains(" install` puts this build there"), "{out:?}");
}
