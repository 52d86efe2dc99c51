//! Opening a session to a host and reading it: `ssh ... leasectl serve --stdio` started,
//! its hello and the home's opening waited for a bounded time, lines that are not
//! leasectl's (a motd, a shell rc's echo) passed over and kept, and, when it ends, why
//! in words: what ssh or the remote said, and what it means.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::state::{Conn, Down, State};
use super::{Link, install_line, lock};
use crate::lease::address::host_spec::{HostSpec, HostTarget};
use crate::lease::error::HostFault;
use crate::lease::ssh::options::{self, destination, ssh_program};
use crate::lease::ssh::wire::{ClientLine, Open, PROTOCOL, Ready, ServerLine, VERSION};

/// The program on the remote side, instead of `leasectl` on the remote's PATH.
pub(super) const REMOTE_COMMAND_ENV: &str = "LEASECTL_REMOTE_COMMAND";
/// The remote's arguments: fixed words. A home, profile or id travels in the JSON lines.
pub(super) const SERVE_ARGS: &str = "serve --stdio";

/// Lines that are not leasectl's before its hello (a motd, a shell rc's echo): passed
/// over, the first few kept to say what the host said when no hello follows.
const JUNK_BEFORE_HELLO: usize = 200;
const JUNK_KEPT: usize = 3;
/// A line longer than this is not one the server sends (a listing of 100,000 leases is ~30 MB).
const MAX_LINE: usize = 256 << 20;
/// Lines of the ssh client's stderr kept for the error message.
const STDERR_LINES: usize = 8;

/// The operator on this side and what they run, for the remote's audit record.
static OPERATOR: LazyLock<(String, String)> = LazyLock::new(|| {
    let words: Vec<String> = std::env::args().map(|a| crate::lease::words::human::shell_word(&a)).collect();
    (crate::lease::home::audit::who(), words.join(" "))
});

impl Link {
    /// A session opened: its connection, the host's registries and its leasectl version.
    pub(super) fn connect(self: &Arc<Self>, generation: u64) -> Result<(Conn, Ready, String), Down> {
        let within = self.hello_within();
        let mut child =
            self.command().spawn().map_err(|e| Down::lost(format!("cannot start {}: {e}", self.program())))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            return Err(Down::lost("cannot talk to the ssh client (no pipes)".into()));
        };
        let errors = Arc::new(Mutex::new(Vec::<String>::new()));
        let kept = Arc::clone(&errors);
        std::thread::spawn(move || keep_stderr(stderr, &kept));
        let (first_tx, first_rx) = channel::<Result<ServerLine, Option<String>>>();
        let link = Arc::clone(self);
        let said = Arc::clone(&errors);
        let junk = Arc::new(Mutex::new(Junk::default()));
        let seen = Arc::clone(&junk);
        std::thread::spawn(move || link.read_lines(stdout, generation, first_tx, said, seen));
        let deadline = Instant::now() + within;
        let mut conn = Conn { stdin, child, generation };
        // The session ended while opening: ssh's status and stderr say why. A status
        // other than ssh's own 255 is the remote command's: the host answered.
        let ended = |mut conn: Conn, end: Option<String>| {
            let status = wait_briefly(&mut conn.child);
            let code = status.and_then(|s| s.code());
            let why = ended_why(&self.spec, status, &errors, end);
            let fault = match code {
                _ if junk_seen(&junk) => HostFault::Junk,
                Some(255) if why.contains("Permission denied") => HostFault::LoginRefused,
                Some(c) if c != 255 => HostFault::CannotServe,
                _ => HostFault::Unreachable,
            };
            Down { why: with_junk(why, &junk), fault }
        };
        let answered = |why: String| Down { why, fault: HostFault::CannotServe };
        let junk_said = |why: String| Down { why, fault: HostFault::Junk };
        // Nothing but junk came in time: the host was reached, and answered that.
        let late = |conn: Conn, why: String| match junk_seen(&junk) {
            true => junk_said(abandon(
                conn,
                with_junk(format!("no hello from leasectl within {}s", within.as_secs()), &junk),
            )),
            false => Down::lost(abandon(conn, why)),
        };
        let hello = match next_first(&first_rx, deadline, within) {
            Ok(ServerLine::Hello(h)) => h,
            Ok(other) => {
                let why = format!("it sent {} before saying hello", other.kind());
                return Err(junk_said(abandon(conn, why)));
            }
            Err(Ended::Early(end)) => return Err(ended(conn, end)),
            Err(Ended::Late(why)) => return Err(late(conn, why)),
        };
        if hello.protocol != PROTOCOL {
            return Err(answered(abandon(conn, other_protocol(&hello, &self.spec))));
        }
        let home = match &self.spec.target {
            HostTarget::Ssh(t) => t.home.clone(),
            HostTarget::Local { home } => home.as_ref().map(|h| h.display().to_string()),
        };
        let (operator, command) = OPERATOR.clone();
        let open = ClientLine::Open(Open { leasectl: VERSION.into(), protocol: PROTOCOL, home, operator, command });
        let line = serde_json::to_string(&open).map_err(|e| Down::lost(e.to_string()))?;
        if let Err(e) = conn.stdin.write_all(format!("{line}\n").as_bytes()).and_then(|()| conn.stdin.flush()) {
            return Err(Down::lost(abandon(conn, format!("the session broke: {e}"))));
        }
        let ready = match next_first(&first_rx, deadline, within) {
            Ok(ServerLine::Ready(r)) => r,
            Ok(ServerLine::Refused(why)) => {
                return Err(answered(abandon(conn, crate::lease::words::human::escape(&why).into_owned())));
            }
            Ok(other) => {
                let why = format!("it sent {} in answer to opening the home", other.kind());
                return Err(junk_said(abandon(conn, why)));
            }
            Err(Ended::Early(end)) => return Err(ended(conn, end)),
            Err(Ended::Late(why)) => return Err(Down::lost(abandon(conn, why))),
        };
        Ok((conn, ready, crate::lease::words::human::escape(&hello.leasectl).into_owned()))
    }

    /// `ssh -T -o BatchMode=yes ... -- HOST 'leasectl serve --stdio'`, or this machine's own.
    fn command(&self) -> Command {
        let mut cmd = match &self.spec.target {
            HostTarget::Local { .. } => {
                let mut c = Command::new(std::env::current_exe().unwrap_or_else(|_| "leasectl".into()));
                c.args(["serve", "--stdio"]);
                c
            }
            HostTarget::Ssh(t) => {
                let config = self.config();
                let mut c = ssh_program();
                // BatchMode: never a prompt (a password, an unknown host key): refused, and said.
                c.args(["-T", "-o", "BatchMode=yes"]);
                // Timeouts and sharing where the operator's config is silent.
                c.args(options::added(&config));
                destination(&mut c, t);
                // The operator's program as given; else leasectl from where `install` puts
                // it, then from the remote's PATH.
                match std::env::var(REMOTE_COMMAND_ENV).ok().filter(|p| !p.trim().is_empty()) {
                    Some(program) => c.arg(format!("{program} {SERVE_ARGS}")),
                    None => c.arg(crate::lease::ssh::install::SERVE_COMMAND),
                };
                c
            }
        };
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd
    }

    fn program(&self) -> String {
        match &self.spec.target {
            HostTarget::Local { .. } => "leasectl serve --stdio".into(),
            HostTarget::Ssh(_) => std::env::var(options::SSH_COMMAND_ENV).unwrap_or_else(|_| "ssh".into()),
        }
    }

    /// The session's output, line by line, until it ends; then the host is down.
    fn read_lines(
        self: Arc<Self>,
        stdout: impl Read,
        generation: u64,
        first: Sender<Result<ServerLine, Option<String>>>,
        errors: Arc<Mutex<Vec<String>>>,
        junk: Arc<Mutex<Junk>>,
    ) {
        let mut reader = BufReader::with_capacity(1 << 16, stdout);
        let mut buf = Vec::new();
        let mut opening = true;
        let end = loop {
            buf.clear();
            match reader.by_ref().take(MAX_LINE as u64).read_until(b'\n', &mut buf) {
                Ok(0) => break None,
                Ok(_) if !buf.ends_with(b"\n") => break Some("a line too long, or cut off".to_owned()),
                Ok(_) => {}
                Err(e) => break Some(format!("cannot read the session: {e}")),
            }
            let line: ServerLine = match serde_json::from_slice(&buf) {
                Ok(l) => l,
                // Before the hello: a motd or a shell rc's echo, passed over (and kept).
                Err(_) if opening && take_junk(&junk, &buf) => continue,
                Err(e) => {
                    take_junk(&junk, &buf);
                    break Some(format!("a line that is not leasectl's protocol ({e})"));
                }
            };
            if opening {
                let done = matches!(line, ServerLine::Ready(_) | ServerLine::Refused(_));
                let _ = first.send(Ok(line));
                opening = !done;
                continue;
            }
            self.take_line(line);
        };
        if opening {
            // The opener holds the state and the ssh process: it says why.
            let _ = first.send(Err(end));
            return;
        }
        // The ssh client's exit says why (its stderr, its status).
        let mut s = lock(&self.state);
        let Some(mut conn) = s.take_ended(generation) else { return };
        let status = wait_briefly(&mut conn.child);
        let why = with_junk(ended_why(&self.spec, status, &errors, end), &junk);
        let fault = if junk_seen(&junk) { HostFault::Junk } else { HostFault::Unreachable };
        s.lost(Down { why, fault }, &self.spec.name, Instant::now());
        self.tell(&s);
        // A subscription's own thread opens the session again.
    }

    fn take_line(&self, line: ServerLine) {
        let mut s = lock(&self.state);
        if s.take_line(line) {
            self.tell(&s);
        }
    }
}

pub(super) fn write_line(s: &mut MutexGuard<'_, State>, line: &str) -> std::io::Result<()> {
    let conn = s.conn.as_mut().ok_or_else(|| std::io::Error::other("not connected"))?;
    conn.stdin.write_all(format!("{line}\n").as_bytes())?;
    conn.stdin.flush()
}

/// How opening a session failed: it ended (with the reader's reason, if any), or
/// nothing came in time.
enum Ended {
    Early(Option<String>),
    Late(String),
}

fn next_first(
    rx: &Receiver<Result<ServerLine, Option<String>>>,
    deadline: Instant,
    within: Duration,
) -> Result<ServerLine, Ended> {
    match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(Ok(line)) => Ok(line),
        Ok(Err(end)) => Err(Ended::Early(end)),
        Err(RecvTimeoutError::Timeout) => Err(Ended::Late(format!("no answer within {}s", within.as_secs()))),
        Err(RecvTimeoutError::Disconnected) => Err(Ended::Early(None)),
    }
}

/// What came on a session's output that is not leasectl's protocol.
#[derive(Default)]
struct Junk {
    lines: usize,
    kept: Vec<String>,
}

/// Keep a junk line (escaped, cut to 200 bytes); false once too many came to pass over.
fn take_junk(junk: &Mutex<Junk>, line: &[u8]) -> bool {
    let mut j = junk.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    j.lines += 1;
    if j.kept.len() < JUNK_KEPT {
        let text = String::from_utf8_lossy(&line[..line.len().min(200)]);
        j.kept.push(crate::lease::words::human::escape(text.trim_end_matches(['\n', '\r'])).into_owned());
    }
    j.lines <= JUNK_BEFORE_HELLO
}

fn junk_seen(junk: &Mutex<Junk>) -> bool {
    junk.lock().unwrap_or_else(std::sync::PoisonError::into_inner).lines > 0
}

/// `why`, and what the host said that was not leasectl's, when it said anything.
fn with_junk(why: String, junk: &Mutex<Junk>) -> String {
    let j = junk.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if j.lines == 0 {
        return why;
    }
    let more =
        if j.lines > j.kept.len() { format!(" and {} more lines", j.lines - j.kept.len()) } else { String::new() };
    format!("{why}; it said: {}{more}", j.kept.iter().map(|l| format!("\"{l}\"")).collect::<Vec<_>>().join(", "))
}

/// Stop a session that will not be used; the reason stands.
fn abandon(mut conn: Conn, why: String) -> String {
    let _ = conn.child.kill();
    let _ = conn.child.wait();
    why
}

fn keep_stderr(stderr: impl Read, kept: &Mutex<Vec<String>>) {
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        let line = line.trim().to_owned();
        if line.is_empty() {
            continue;
        }
        let mut k = kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        k.push(line);
        if k.len() > STDERR_LINES {
            k.remove(0);
        }
    }
}

/// The ssh client has closed its output: its status, if it exits at once.
fn wait_briefly(child: &mut Child) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                return child.wait().ok();
            }
        }
    }
}

/// Why a session ended, in words: what ssh or the remote shell said, and what it means.
fn ended_why(
    host: &HostSpec,
    status: Option<std::process::ExitStatus>,
    errors: &Mutex<Vec<String>>,
    end: Option<String>,
) -> String {
    // stderr is read by its own thread: give it a moment to take the last lines.
    std::thread::sleep(Duration::from_millis(20));
    let said = errors.lock().unwrap_or_else(std::sync::PoisonError::into_inner).join("; ");
    let said = crate::lease::words::human::escape(&said);
    let code = status.and_then(|s| s.code());
    let given = std::env::var(REMOTE_COMMAND_ENV).ok().filter(|p| !p.trim().is_empty());
    let program = given.as_deref().unwrap_or("leasectl");
    let meaning = match code {
        Some(127) if given.is_some() => {
            format!("{program} is not on the remote's PATH: install leasectl there or set {REMOTE_COMMAND_ENV}")
        }
        Some(127) => format!(
            "leasectl is neither in {} nor on the remote's PATH: `{}` puts this build there (or set \
             {REMOTE_COMMAND_ENV} to the leasectl to run)",
            crate::lease::ssh::install::REMOTE_PATH,
            install_line(host)
        ),
        Some(2) if said.contains("unrecognized subcommand") => format!(
            "the remote {program} has no `{SERVE_ARGS}` (older than this one): update it; `{}` puts this build \
             there",
            install_line(host)
        ),
        Some(255) => "ssh could not connect or log in".to_owned(),
        _ => String::new(),
    };
    let mut parts: Vec<String> = Vec::new();
    if !meaning.is_empty() {
        parts.push(meaning);
    }
    if !said.is_empty() {
        parts.push(format!("({said})"));
    }
    if let Some(e) = end {
        parts.push(e);
    }
    if parts.is_empty() {
        parts.push(match code {
            Some(c) => format!("the session ended (exit {c})"),
            None => "the session ended".to_owned(),
        });
    }
    parts.join(" ")
}

/// Why a host of another protocol cannot serve, with the command that puts this build there.
fn other_protocol(hello: &crate::lease::ssh::wire::Hello, host: &HostSpec) -> String {
    format!(
        "it runs leasectl {} (protocol {}), this is leasectl {VERSION} (protocol {PROTOCOL}): install the same \
         leasectl on both; `{}` puts this build there",
        crate::lease::words::human::escape(&hello.leasectl),
        hello.protocol,
        install_line(host)
    )
}
