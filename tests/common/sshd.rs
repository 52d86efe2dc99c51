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
    child: Option<Child>,
    pub port: u16,
    pub user: String,
    dir: std::sync::Arc<TempDir>,
    /// This server's own config (several servers share one key directory).
    config: PathBuf,
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
        fs::write(
            d.join("ssh_config"),
            format!(
                "Host *\n  IdentityFile {d}/user_key\n  IdentitiesOnly yes\n  UserKnownHostsFile {d}/known_hosts\n  \
                     GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n",
                d = d.display()
            ),
        )
        .expect("ssh_config");
        Sshd::serve(std::sync::Arc::new(dir))
    }

    /// A second server ("another host") with the same keys: the same client reaches both.
    pub fn another(&self) -> Sshd {
        Sshd::serve(std::sync::Arc::clone(&self.dir))
    }

    /// A server on a free port, in a key directory made by [`Sshd::start`].
    fn serve(dir: std::sync::Arc<TempDir>) -> Sshd {
        let d = dir.path().to_path_buf();
        let user = me();
        // sshd checks that its privilege separation directory exists (root only).
        if rustix::process::geteuid().is_root() {
            let _ = fs::create_dir_all("/run/sshd");
        }
        for _ in 0..5 {
            let port = free_port();
            let config = d.join(format!("sshd_config.{port}"));
            let text = format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.{port}.pid\n\
                 AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nUsePAM no\n\
                 PermitRootLogin prohibit-password\nMaxStartups 100\nMaxSessions 100\nLogLevel ERROR\n",
                d = d.display()
            );
            fs::write(&config, text).expect("sshd_config");
            let host_pub = fs::read_to_string(d.join("host_key.pub")).expect("host key");
            let key = host_pub.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
            let mut known =
                fs::OpenOptions::new().create(true).append(true).open(d.join("known_hosts")).expect("known_hosts");
            std::io::Write::write_all(&mut known, format!("[127.0.0.1]:{port} {key}\n").as_bytes())
                .expect("known_hosts");
            let mut server = Sshd { child: None, port, user: user.clone(), dir: std::sync::Arc::clone(&dir), config };
            if server.listen() {
                return server;
            }
        }
        panic!("sshd did not start");
    }

    /// Start listening (again, on the same port); false when it could not.
    fn listen(&mut self) -> bool {
        let port = self.port;
        let sshd = ["/usr/sbin/sshd", "/usr/bin/sshd"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("sshd (openssh-server) must be installed: .ci/run installs it");
        let mut child = Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sshd");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                self.child = Some(child);
                return true;
            }
            if let Ok(Some(_)) = child.try_wait() {
                break; // the port was taken meanwhile
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// The host goes down: the server stops listening and every session it carries ends
    /// (found by `SSH_CONNECTION`'s server port in each process's environment).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Its connections too (each served by a process of its own under it): a
            // connection shared by the client (ControlMaster) would ride out the listener.
            let served = descendants(child.id() as i32);
            let _ = child.kill();
            let _ = child.wait();
            for pid in served {
                kill_pid(pid);
            }
        }
        let suffix = format!(" {}", self.port);
        for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(environ) = fs::read(entry.path().join("environ")) else { continue };
            let here = environ
                .split(|b| *b == 0)
                .any(|v| v.strip_prefix(b"SSH_CONNECTION=").is_some_and(|c| c.ends_with(suffix.as_bytes())));
            if let (true, Ok(pid)) = (here, entry.file_name().to_string_lossy().parse::<i32>()) {
                kill_pid(pid);
            }
        }
    }

    /// Sessions get `key=value` in their environment from now on (sshd's SetEnv), the
    /// server started again on the same port.
    pub fn set_env(&mut self, vars: &[(&str, &str)]) {
        let mut text = fs::read_to_string(&self.config).expect("sshd_config");
        for (key, value) in vars {
            text.push_str(&format!("SetEnv {key}={value}\n"));
        }
        fs::write(&self.config, text).expect("sshd_config");
        self.stop();
        self.restart();
    }

    /// A remote command that serves with this build but says leasectl 0.0.9 in its hello
    /// (a proxy in front of `serve --stdio`): a host of another version, same protocol.
    pub fn older_leasectl(&self) -> String {
        let proxy = self.dir.path().join("older.py");
        fs::write(&proxy, OLDER).expect("the proxy");
        format!("python3 {} {BIN}", proxy.display())
    }

    /// The host comes back, on the same port.
    pub fn restart(&mut self) {
        assert!(self.listen(), "sshd did not start again on port {}", self.port);
    }

    /// `name=ssh://user@127.0.0.1:PORT/home`.
    pub fn spec(&self, name: &str, home: &Path) -> String {
        format!("{name}=ssh://{}@127.0.0.1:{}{}", self.user, self.port, home.display())
    }

    /// `closed=ssh://user@127.0.0.1:1/x`: a host nobody listens for (port 1 refuses).
    pub fn closed_spec(&self) -> String {
        format!("closed=ssh://{}@127.0.0.1:1/x", self.user)
    }

    /// `ssh -F <the test's client config>`: the test's key, and its host key only.
    pub fn ssh_command(&self) -> String {
        format!("ssh -F {}", self.dir.path().join("ssh_config").display())
    }

    /// Trust this server's host key on another port too (a proxy in front of it).
    pub fn trust_port(&self, port: u16) {
        let d = self.dir.path();
        let host_pub = fs::read_to_string(d.join("host_key.pub")).expect("host key");
        let key = host_pub.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
        let mut known = fs::OpenOptions::new().append(true).open(d.join("known_hosts")).expect("known_hosts");
        std::io::Write::write_all(&mut known, format!("[127.0.0.1]:{port} {key}\n").as_bytes()).expect("write");
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
            // Shared connections in the test's own directory, never the machine's.
            .env("XDG_RUNTIME_DIR", self.dir.path())
            .env_remove("LEASECTL_HOSTS")
            .env_remove("HERMES_HOME");
        cmd
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Every process under `root` (from /proc's parent pids).
fn descendants(root: i32) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<i32>().ok()?;
            let stat = fs::read_to_string(e.path().join("stat")).ok()?;
            // After the command's closing parenthesis: state, then the parent pid.
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse::<i32>().ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(parents.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    found.remove(0);
    found
}

fn kill_pid(pid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

/// A TCP proxy in front of `to` that holds each chunk `delay` ms before passing it on.
pub struct SlowProxy {
    pub port: u16,
    pub delay: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl SlowProxy {
    pub fn start(to: u16) -> SlowProxy {
        use std::io::{Read, Write};
        use std::sync::atomic::{AtomicU64, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let delay = std::sync::Arc::new(AtomicU64::new(0));
        let d = std::sync::Arc::clone(&delay);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(upstream) = std::net::TcpStream::connect(("127.0.0.1", to)) else { continue };
                for (mut from, mut into) in
                    [(client.try_clone().expect("clone"), upstream.try_clone().expect("clone")), (upstream, client)]
                {
                    let d = std::sync::Arc::clone(&d);
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 65536];
                        while let Ok(n @ 1..) = from.read(&mut buf) {
                            std::thread::sleep(Duration::from_millis(d.load(Ordering::Relaxed)));
                            if into.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = into.shutdown(std::net::Shutdown::Write);
                    });
                }
            }
        });
        SlowProxy { port, delay }
    }
}

/// A proxy in front of `serve --stdio` that says another version in its hello.
const OLDER: &str = r#"
import re, subprocess, sys, threading
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def up():
    for line in sys.stdin.buffer:
        p.stdin.write(line); p.stdin.flush()
    p.stdin.close()
threading.Thread(target=up, daemon=True).start()
first = True
for line in p.stdout:
    if first:
        line = re.sub(rb'"leasectl":"[^"]*"', b'"leasectl":"0.0.9"', line, count=1)
        first = False
    sys.stdout.buffer.write(line); sys.stdout.buffer.flush()
"#;
