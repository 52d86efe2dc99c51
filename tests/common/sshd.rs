//! A real OpenSSH server of the test's own: on a free loopback port, with a host key and
//! a user key made for it, and an ssh client configuration that trusts only that host
//! key (the machine's own sshd and ~/.ssh are never touched). Several "hosts" are
//! several homes behind it.

use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::process::BIN;

pub struct Sshd {
    child: Child,
    pub port: u16,
    pub user: String,
    dir: TempDir,
}

/// The user the tests run as: the one the server lets in with the generated key.
fn me() -> String {
    let out = Command::new("id").arg("-un").output().expect("id -un");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "leasectl-test", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen (openssh-client) must be installed: .ci/run installs it");
    assert!(status.success(), "ssh-keygen failed");
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

impl Sshd {
    pub fn start() -> Sshd {
        let dir = tempfile::tempdir().expect("sshd dir");
        let d = dir.path();
        keygen(&d.join("host_key"));
        keygen(&d.join("user_key"));
        fs::copy(d.join("user_key.pub"), d.join("authorized_keys")).expect("authorized_keys");
        let user = me();
        // sshd checks that its privilege separation directory exists (root only).
        if rustix::process::geteuid().is_root() {
            let _ = fs::create_dir_all("/run/sshd");
        }
        for _ in 0..5 {
            let port = free_port();
            let config = format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
                 AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nUsePAM no\n\
                 PermitRootLogin prohibit-password\nMaxStartups 100\nMaxSessions 100\nLogLevel ERROR\n",
                d = d.display()
            );
            fs::write(d.join("sshd_config"), config).expect("sshd_config");
            let host_pub = fs::read_to_string(d.join("host_key.pub")).expect("host key");
            let key = host_pub.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
            fs::write(d.join("known_hosts"), format!("[127.0.0.1]:{port} {key}\n")).expect("known_hosts");
            fs::write(
                d.join("ssh_config"),
                format!(
                    "Host *\n  IdentityFile {d}/user_key\n  IdentitiesOnly yes\n  UserKnownHostsFile {d}/known_hosts\n  \
                     GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n",
                    d = d.display()
                ),
            )
            .expect("ssh_config");
            let sshd = ["/usr/sbin/sshd", "/usr/bin/sshd"]
                .into_iter()
                .find(|p| Path::new(p).exists())
                .expect("sshd (openssh-server) must be installed: .ci/run installs it");
            let mut child = Command::new(sshd)
                .args(["-D", "-e", "-f"])
                .arg(d.join("sshd_config"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start sshd");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Sshd { child, port, user, dir };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break; // the port was taken meanwhile: another one
                }
                thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("sshd did not start");
    }

    /// `name=ssh://user@127.0.0.1:PORT/home`.
    pub fn spec(&self, name: &str, home: &Path) -> String {
        format!("{name}=ssh://{}@127.0.0.1:{}{}", self.user, self.port, home.display())
    }

    /// `ssh -F <the test's client config>`: the test's key, and its host key only.
    pub fn ssh_command(&self) -> String {
        format!("ssh -F {}", self.dir.path().join("ssh_config").display())
    }

    /// Pin the test's key to `command` (authorized_keys' forced command).
    pub fn force_command(&self, command: &str) {
        let key = fs::read_to_string(self.dir.path().join("user_key.pub")).expect("user key");
        let line = format!("command=\"{command}\",no-pty,no-port-forwarding,no-agent-forwarding {key}");
        fs::write(self.dir.path().join("authorized_keys"), line).expect("authorized_keys");
    }

    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// `leasectl ARGS` reaching the hosts through this server, the remote's leasectl
    /// being this build.
    pub fn leasectl(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env("LEASECTL_SSH_COMMAND", self.ssh_command())
            .env("LEASECTL_REMOTE_COMMAND", BIN)
            .env("XDG_CONFIG_HOME", self.dir.path())
            .env_remove("LEASECTL_HOSTS")
            .env_remove("HERMES_HOME");
        cmd
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
