//! etcd as it is deployed (issue 40, in part): TLS with client certificates
//! (`--client-cert-auth`) and auth on, with a short `--auth-token-ttl`; certificates made
//! by the test with openssl. A restricted user acquires, holds past several token
//! lifetimes and releases; a user without the role and a wrong CA are refused in words;
//! the password is in no process list.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::common::Reaped;
use super::common::certs::certificates;
use super::common::pty::eventually;
use super::{BIN, free_port, unique_prefix};

struct Secured {
    _etcd: Reaped,
    endpoint: String,
    dir: tempfile::TempDir,
}

impl Secured {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `--cacert/--cert/--key` of the test's client.
    fn tls_args(&self) -> Vec<String> {
        let p = |n: &str| self.path(n).display().to_string();
        vec!["--cacert".into(), p("ca.crt"), "--cert".into(), p("client.crt"), "--key".into(), p("client.key")]
    }

    fn etcdctl(&self, args: &[&str]) -> Output {
        Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.endpoint])
            .args(self.tls_args())
            .args(args)
            .output()
            .expect("etcdctl")
    }

    fn leasectl(&self, prefix: &str, user: Option<(&str, &str)>, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(["--backend", "etcd", "--endpoints", &self.endpoint, "--prefix", prefix])
            .args(self.tls_args())
            .args(args)
            .env_remove("HERMES_HOME")
            .env_remove("ETCDCTL_PASSWORD")
            .env_remove("ETCDCTL_USER")
            .stdin(Stdio::null());
        if let Some((name, password)) = user {
            cmd.args(["--user", name]).env("ETCDCTL_PASSWORD", password);
        }
        cmd
    }
}

/// etcd on https with client certificates required and auth on: root, a role `leasectl`
/// with read and write on `prefix` only, a user `ops` with it, a user `stranger` without.
fn secured(prefix: &str) -> Secured {
    let dir = tempfile::tempdir().expect("dir");
    certificates(dir.path(), "ca", &["server", "client"]);
    certificates(dir.path(), "otherca", &[]);
    let (client, peer) = (free_port(), free_port());
    let endpoint = format!("https://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let p = |n: &str| dir.path().join(n).display().to_string();
    let child = Command::new("setpriv")
        .args(["--pdeathsig", "KILL", "--", "etcd", "--name", "tls", "--data-dir", &p("data")])
        .args(["--listen-client-urls", &endpoint, "--advertise-client-urls", &endpoint])
        .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("tls={peer_url}")])
        .args(["--cert-file", &p("server.crt"), "--key-file", &p("server.key"), "--client-cert-auth"])
        .args(["--trusted-ca-file", &p("ca.crt"), "--auth-token-ttl", "3"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(dir.path().join("etcd.log")).expect("log")))
        .spawn()
        .expect("etcd");
    let s = Secured { _etcd: Reaped(child), endpoint, dir };
    assert!(
        eventually(Duration::from_secs(20), || s.etcdctl(&["endpoint", "health"]).status.success()),
        "etcd over TLS did not start"
    );
    for step in [
        vec!["user", "add", "root:rootpw"],
        vec!["user", "grant-role", "root", "root"],
        vec!["role", "add", "leasectl"],
        vec!["role", "grant-permission", "leasectl", "--prefix=true", "readwrite", prefix],
        vec!["user", "add", "ops:opspw"],
        vec!["user", "grant-role", "ops", "leasectl"],
        vec!["user", "add", "stranger:strangerpw"],
        vec!["auth", "enable"],
    ] {
        let out = s.etcdctl(&step);
        assert!(out.status.success(), "etcdctl {step:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    s
}

#[test]
fn a_restricted_user_over_tls_holds_past_its_tokens_and_others_are_refused_in_words() {
    let _alone = super::etcd_cluster::alone();
    let prefix = unique_prefix("tls");
    let etcd = secured(&prefix);
    let ops = Some(("ops", "opspw"));

    // Acquire and hold, past several lifetimes of its token (3 s).
    let mut hold = etcd.leasectl(&prefix, ops, &["hold", "S-tls", "--json"]);
    let mut child = hold.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("hold");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("grant");
    let holder = Reaped(child);
    assert!(line.contains("\"granted\":true"), "{line}");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", holder.id())).unwrap_or_default();
    assert!(!String::from_utf8_lossy(&cmdline).contains("opspw"), "the password is in no process list");
    thread::sleep(Duration::from_secs(10));
    let out = etcd.leasectl(&prefix, ops, &["ls", "--json"]).output().expect("ls");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("S-tls"), "still held after 3 token lifetimes");
    // Released by the owner (SIGTERM), its key gone.
    let _ = super::common::signals::kill(holder.id(), libc::SIGTERM);
    assert!(eventually(Duration::from_secs(10), || {
        let out = etcd.leasectl(&prefix, ops, &["ls", "--json"]).output().expect("ls");
        out.status.success() && !String::from_utf8_lossy(&out.stdout).contains("S-tls")
    }));

    // A user whose role does not cover the prefix: refused in words, not "unavailable".
    let out = etcd.leasectl(&prefix, Some(("stranger", "strangerpw")), &["ls"]).output().expect("ls");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("refused user stranger") && err.contains(&prefix), "{err}");
    // A wrong password.
    let out = etcd.leasectl(&prefix, Some(("ops", "nope")), &["ls"]).output().expect("ls");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("wrong name or password") && out.status.code() == Some(1), "{err}");
    // No user with auth on.
    let out = etcd.leasectl(&prefix, None, &["ls"]).output().expect("ls");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--user") && out.status.code() == Some(1), "{err}");

    // The wrong CA: said at once, in words.
    let started = Instant::now();
    let out = Command::new(BIN)
        .args(["--backend", "etcd", "--endpoints", &etcd.endpoint, "--prefix", &prefix, "--user", "ops", "ls"])
        .arg("--cacert")
        .arg(etcd.path("otherca.crt"))
        .arg("--cert")
        .arg(etcd.path("client.crt"))
        .arg("--key")
        .arg(etcd.path("client.key"))
        .env("ETCDCTL_PASSWORD", "opspw")
        .stdin(Stdio::null())
        .output()
        .expect("ls");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not signed by the CA given (--cacert)"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(6), "within the dial timeout: {:?}", started.elapsed());
}

/// `--password-file` and the TLS files are the operator's: a link to one is followed (a
/// secrets mount), a FIFO planted in its place is refused at once, never waited on.
#[test]
fn a_fifo_named_as_a_password_or_tls_file_is_refused_at_once() {
    let dir = tempfile::tempdir().expect("dir");
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success()));
    let real = dir.path().join("ca.crt");
    std::fs::write(&real, "not a certificate").expect("write");
    let link = dir.path().join("link.crt");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let run = |args: &[&str], extra: &[&Path]| {
        let mut cmd = Command::new(BIN);
        cmd.args(["--backend", "etcd", "--endpoints", "127.0.0.1:1", "--command-timeout", "1s"]).args(args);
        for p in extra {
            cmd.arg(p);
        }
        let started = Instant::now();
        let out = cmd.arg("ls").env_remove("ETCDCTL_PASSWORD").stdin(Stdio::null()).output().expect("run");
        (out, started.elapsed())
    };
    let (out, took) = run(&["--user", "ops", "--password-file"], &[&fifo]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is a FIFO, not a file"), "{err}");
    assert!(took < Duration::from_secs(3), "not waited on: {took:?}");
    let (out, _) = run(&["--cacert"], &[&fifo]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(2) && err.contains("cannot read --cacert") && err.contains("FIFO"), "{err}");
    // A link is followed: the file behind it is read (and etcd then is not reached).
    let (out, _) = run(&["--cacert"], &[&link]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("cannot read --cacert"), "{err}");
}
