//! One long-lived session to one host: `ssh ... leasectl serve --stdio` (or, for
//! `local`, leasectl's own `serve --stdio`), shared by every registry and action on that
//! host in this process. Requests wait for their answer a bounded time; a host that is
//! down is said at once with why, and tried again with a growing pause.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::options;
use super::wire::{Answer, ClientLine, Open, PROTOCOL, Ready, Request, ServerLine, VERSION, WireListing};
use crate::lease::address::host_spec::{HostSpec, HostTarget};
use crate::lease::error::{Error, HostFault};

/// The program on the remote side, instead of `leasectl` on the remote's PATH.
pub const REMOTE_COMMAND_ENV: &str = "LEASECTL_REMOTE_COMMAND";
/// The remote's arguments: fixed words. A home, profile or id travels in the JSON lines.
pub const SERVE_ARGS: &str = "serve --stdio";

/// Lines that are not leasectl's before its hello (a motd, a shell rc's echo): passed
/// over, the first few kept to say what the host said when no hello follows.
const JUNK_BEFORE_HELLO: usize = 200;
const JUNK_KEPT: usize = 3;
/// How long reads wait for sessions being opened while subscriptions keep their hosts
/// (the console), counted once for the whole process from the first subscription: the
/// first screen has its hosts' listings when they answer at once, and a slow host never
/// holds a later read up.
const SUBSCRIBED_WAIT: Duration = Duration::from_millis(300);
static FIRST_SUBSCRIPTION: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
/// The pause before trying a host that failed again, doubled each time up to the most.
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MOST_RETRY: Duration = Duration::from_secs(30);
/// How often a kept session is asked how far behind it is, and from what answer time
/// on it is said to lag (a listing then may be that late).
const PING_EVERY: Duration = Duration::from_secs(2);
const LAG_AFTER: Duration = Duration::from_secs(1);
const LAG_GIVE_UP: Duration = Duration::from_secs(10);
/// A line longer than this is not one the server sends (a listing of 100,000 leases is ~30 MB).
const MAX_LINE: usize = 256 << 20;
/// Lines of the ssh client's stderr kept for the error message.
const STDERR_LINES: usize = 8;

/// Told (from a thread of its own) when a host sent a listing, went down, came back or
/// started or stopped lagging: the store's next read has something new.
pub type Watcher = Arc<dyn Fn() + Send + Sync>;

/// Every registry the hosts among `locations` have said they have (never waits: a
/// host not answered yet adds its registries when it does).
pub fn known_registries(locations: &[crate::lease::Location]) -> Vec<crate::lease::Location> {
    let mut hosts: Vec<&HostSpec> = locations.iter().filter_map(crate::lease::Location::host).collect();
    hosts.sort_by(|a, b| a.name.cmp(&b.name));
    hosts.dedup();
    let mut out = Vec::new();
    for host in hosts {
        let profiles = lock(&Link::to(host).state).ready.as_ref().map(|r| r.profiles.clone()).unwrap_or_default();
        for profile in profiles {
            out.push(crate::lease::Location::on_host(host.clone(), profile));
        }
    }
    out
}

pub struct Link {
    spec: HostSpec,
    state: Mutex<State>,
    /// Signalled when an opening ends, either way.
    opened: Condvar,
    /// What the operator's ssh config says for this host, once read.
    config: std::sync::OnceLock<options::SshConfig>,
}

struct Conn {
    stdin: ChildStdin,
    child: Child,
    generation: u64,
}

/// Why a host gives no listings, and in which words (unreachable, login refused, junk,
/// cannot serve).
#[derive(Clone)]
struct Down {
    why: String,
    fault: HostFault,
}

impl Down {
    fn lost(why: String) -> Down {
        Down { why, fault: HostFault::Unreachable }
    }
}

#[derive(Default)]
struct State {
    conn: Option<Conn>,
    /// A thread is opening a session (since then): the others wait for it.
    connecting: Option<Instant>,
    generation: u64,
    /// Why the host cannot be reached or cannot serve now, if so.
    down: Option<Down>,
    retry_at: Option<Instant>,
    retry_pause: Duration,
    ready: Option<Ready>,
    next_id: u64,
    pending: HashMap<u64, Sender<Result<Answer, Error>>>,
    subscribed: bool,
    /// The subscription was answered on the current session: every registry's listing
    /// has come (the server sends them before its answer).
    fed: bool,
    listings: HashMap<String, WireListing>,
    /// Bumped with every listing that arrives and every change of reachability: a reader
    /// that saw the same number has nothing new to read.
    changes: u64,
    watchers: Vec<Watcher>,
    reconnecting: bool,
    /// The operator asked to try again now (the console's `r`): the pause is cut short.
    retry_now: bool,
    /// How long the last ping's answer took, when over [`LAG_AFTER`].
    lag: Option<Duration>,
    /// The leasectl version the host's last hello said (escaped for a terminal).
    version: Option<String>,
}

static LINKS: LazyLock<Mutex<HashMap<HostSpec, Arc<Link>>>> = LazyLock::new(Mutex::default);

/// The operator on this side and what they run, for the remote's audit record.
static OPERATOR: LazyLock<(String, String)> = LazyLock::new(|| {
    let words: Vec<String> = std::env::args().map(|a| crate::lease::words::human::shell_word(&a)).collect();
    (crate::lease::home::audit::who(), words.join(" "))
});

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Link {
    /// The one link to `spec` in this process.
    pub fn to(spec: &HostSpec) -> Arc<Link> {
        let mut links = LINKS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(links.entry(spec.clone()).or_insert_with(|| {
            Arc::new(Link {
                spec: spec.clone(),
                state: Mutex::default(),
                opened: Condvar::new(),
                config: std::sync::OnceLock::new(),
            })
        }))
    }

    /// The registries there (`root` first), connecting if need be.
    pub fn profiles(self: &Arc<Self>) -> Result<Vec<String>, Error> {
        self.ensure(false)?;
        Ok(lock(&self.state).ready.as_ref().map(|r| r.profiles.clone()).unwrap_or_default())
    }

    /// The registry the host's home stands for (`root`, or the profile its path names).
    pub fn default_profile(self: &Arc<Self>) -> Result<String, Error> {
        self.ensure(false)?;
        Ok(lock(&self.state).ready.as_ref().map_or_else(|| "root".to_owned(), |r| r.default.clone()))
    }

    /// The listing the subscription last brought for `profile`, while it is live.
    pub fn pushed(&self, profile: &str) -> Option<WireListing> {
        let s = lock(&self.state);
        if s.subscribed && s.conn.is_some() { s.listings.get(profile).cloned() } else { None }
    }

    /// What `profile`'s state.db said of its sessions in its last listing.
    pub fn sessions(&self, profile: &str) -> Option<super::wire::RemoteSessions> {
        lock(&self.state).listings.get(profile).and_then(|l| l.sessions.clone())
    }

    /// The owners of `profile`'s leases as the remote named them in its last listing.
    pub fn owners(&self, profile: &str) -> HashMap<u64, crate::lease::owners::owner::OwnerInfo> {
        lock(&self.state).listings.get(profile).map(|l| l.owners.clone()).unwrap_or_default()
    }

    /// While a subscription keeps the host and its first listings have not come on the
    /// session now open: why not (down, or being opened). A read then does not ask: what
    /// it would ask for is on its way.
    pub fn awaiting_feed(&self) -> Option<Error> {
        let s = lock(&self.state);
        if !s.subscribed || (s.fed && s.conn.is_some()) {
            return None;
        }
        Some(match &s.down {
            Some(down) => self.down_error(down),
            None => Error::Connecting { host: self.spec.name.clone() },
        })
    }

    /// Keep a listing read on request (its owners are asked for with it), unless the
    /// subscription keeps them.
    pub fn remember(&self, profile: &str, listing: &WireListing) {
        let mut s = lock(&self.state);
        if !s.subscribed {
            s.listings.insert(profile.to_owned(), listing.clone());
        }
    }

    /// Ask, and wait at most `within` for the answer.
    pub fn call(self: &Arc<Self>, request: Request, within: Duration) -> Result<Answer, Error> {
        let rx = self.send(request, false)?;
        self.wait(&rx, within)
    }

    fn send(self: &Arc<Self>, request: Request, opener: bool) -> Result<Receiver<Result<Answer, Error>>, Error> {
        self.ensure(opener)?;
        let mut s = lock(&self.state);
        if s.conn.is_none() {
            drop(s);
            return Err(self.unreachable("the session ended"));
        }
        s.next_id += 1;
        let id = s.next_id;
        let (tx, rx) = channel();
        s.pending.insert(id, tx);
        let line = serde_json::to_string(&ClientLine::Request { id, request })
            .map_err(|e| Error::Refused(format!("cannot encode a request: {e}")))?;
        if let Err(e) = write_line(&mut s, &line) {
            s.pending.remove(&id);
            // The reader says why when it sees the end; until then this is why.
            if let Some(mut conn) = s.conn.take() {
                let _ = conn.child.kill();
            }
            let why = format!("the session broke while sending: {e}");
            s.down.get_or_insert_with(|| Down::lost(why.clone()));
            drop(s);
            return Err(self.unreachable(&why));
        }
        Ok(rx)
    }

    fn wait(&self, rx: &Receiver<Result<Answer, Error>>, within: Duration) -> Result<Answer, Error> {
        match rx.recv_timeout(within) {
            Ok(answer) => answer,
            Err(RecvTimeoutError::Timeout) => Err(Error::Unreachable {
                host: self.spec.name.clone(),
                why: format!("no answer within {}s (slow or stuck; the session stays open)", within.as_secs()),
                fault: HostFault::Unreachable,
            }),
            Err(RecvTimeoutError::Disconnected) => Err(self.unreachable("the session ended")),
        }
    }

    /// Listings pushed from now on (and at once, for every registry); `watcher` hears
    /// of each change and of the host going down or coming back. Reconnects while
    /// anyone listens.
    pub fn subscribe(self: &Arc<Self>, watcher: Watcher) {
        let mut s = lock(&self.state);
        s.watchers.push(watcher);
        let first = !s.subscribed;
        s.subscribed = true;
        FIRST_SUBSCRIPTION.get_or_init(Instant::now);
        drop(s);
        // Opened on a thread of its own: a slow host holds up no caller.
        if first {
            self.keep_reconnecting();
        }
    }

    fn start_subscription(self: &Arc<Self>) -> Result<(), Error> {
        let rx = self.send(Request::Subscribe, true)?;
        self.wait(&rx, self.hello_within())?;
        lock(&self.state).fed = true;
        self.opened.notify_all();
        Ok(())
    }

    /// Wait (until `deadline`) for the subscription's first listings, or for the host
    /// to be found down: a first read then takes what was sent instead of asking again.
    pub fn wait_fed(&self, deadline: Instant) {
        let mut s = lock(&self.state);
        while s.subscribed && !s.fed && s.down.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            s = match self.opened.wait_timeout(s, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// A thread that tries again after each pause until the host answers (one a host).
    fn keep_reconnecting(self: &Arc<Self>) {
        let mut s = lock(&self.state);
        if s.reconnecting {
            return;
        }
        s.reconnecting = true;
        drop(s);
        let link = Arc::clone(self);
        // While subscribed: open the session, watch how far behind it is until it ends,
        // then open it again after a pause that doubles while it cannot be opened.
        std::thread::spawn(move || {
            loop {
                if link.start_subscription().is_ok() {
                    link.watch_lag();
                    continue;
                }
                link.pause_before_retry();
            }
        });
    }

    /// Wait until the host's pause is over, or the operator asks to try now.
    fn pause_before_retry(&self) {
        let mut s = lock(&self.state);
        let until =
            s.retry_at.unwrap_or_else(|| Instant::now() + FIRST_RETRY).max(Instant::now() + Duration::from_millis(50));
        while !s.retry_now {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s = match self.opened.wait_timeout(s, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        s.retry_now = false;
    }

    /// A host that is down is tried again now, its pause back to the first (the console's
    /// `r`: it had waited for the pause, up to 30 s). A host that answers is left alone.
    /// True when it was down.
    pub fn retry_now(&self) -> bool {
        let mut s = lock(&self.state);
        if s.conn.is_some() || s.down.is_none() {
            return false;
        }
        s.retry_at = None;
        s.retry_pause = Duration::ZERO;
        s.retry_now = true;
        self.opened.notify_all();
        true
    }

    /// An error that says why the host gives no answer (`fallback` when not known yet).
    fn unreachable(&self, fallback: &str) -> Error {
        let s = lock(&self.state);
        let down = s.down.clone().unwrap_or_else(|| Down::lost(fallback.to_owned()));
        self.down_error(&down)
    }

    fn down_error(&self, down: &Down) -> Error {
        Error::Unreachable { host: self.spec.name.clone(), why: down.why.clone(), fault: down.fault }
    }

    /// Connected, or why not (at once while waiting to try again). The session is opened
    /// without holding the state: a reader meanwhile waits for it a bounded time. While
    /// a subscription keeps the host, only its own thread (`opener`) opens sessions.
    fn ensure(self: &Arc<Self>, opener: bool) -> Result<(), Error> {
        let within = self.hello_within();
        let mut s = lock(&self.state);
        let deadline = match s.subscribed {
            true => *FIRST_SUBSCRIPTION.get_or_init(Instant::now) + SUBSCRIBED_WAIT,
            false => Instant::now() + within + Duration::from_secs(1),
        };
        while s.conn.is_none() && s.connecting.is_some() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Connecting { host: self.spec.name.clone() });
            }
            s = match self.opened.wait_timeout(s, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        if s.conn.is_some() {
            return Ok(());
        }
        if let (Some(at), Some(down)) = (s.retry_at, &s.down)
            && Instant::now() < at
        {
            return Err(self.down_error(down));
        }
        if s.subscribed && !opener {
            return Err(match &s.down {
                Some(down) => self.down_error(down),
                None => Error::Connecting { host: self.spec.name.clone() },
            });
        }
        s.connecting = Some(Instant::now());
        s.generation += 1;
        let generation = s.generation;
        drop(s);
        let opened = self.connect(generation);
        let mut s = lock(&self.state);
        s.connecting = None;
        self.opened.notify_all();
        match opened {
            Ok((conn, ready, version)) => {
                s.conn = Some(conn);
                s.version = Some(version);
                s.ready = Some(ready);
                let was_down = s.down.take().is_some();
                s.changes += 1;
                s.retry_at = None;
                s.retry_pause = FIRST_RETRY;
                if was_down {
                    self.tell(&s);
                }
                Ok(())
            }
            Err(down) => {
                let pause = if s.retry_pause.is_zero() { FIRST_RETRY } else { (s.retry_pause * 2).min(MOST_RETRY) };
                s.retry_pause = pause;
                s.retry_at = Some(Instant::now() + pause);
                s.changes += 1;
                let error = self.down_error(&down);
                s.down = Some(down);
                self.tell(&s);
                self.opened.notify_all();
                Err(error)
            }
        }
    }

    /// How far behind the host's answers are, when they lag.
    pub fn lag(&self) -> Option<Duration> {
        lock(&self.state).lag
    }

    /// The host's leasectl version, when it is not this one (same protocol: it answers).
    pub fn other_version(&self) -> Option<String> {
        lock(&self.state).version.clone().filter(|v| v != VERSION)
    }

    /// Ask how far behind the host is, every [`PING_EVERY`], until the session ends.
    fn watch_lag(self: &Arc<Self>) {
        loop {
            std::thread::sleep(PING_EVERY);
            if lock(&self.state).conn.is_none() {
                return;
            }
            let asked = Instant::now();
            let answered = self.call(Request::Ping, LAG_GIVE_UP).is_ok();
            if !answered && lock(&self.state).conn.is_none() {
                return;
            }
            let took = asked.elapsed();
            let lag = (took > LAG_AFTER || !answered).then_some(took);
            let mut s = lock(&self.state);
            let changed = match (s.lag, lag) {
                (None, None) => false,
                (Some(_), None) | (None, Some(_)) => true,
                // Said again only when it moved by a second or more.
                (Some(a), Some(b)) => a.abs_diff(b) >= Duration::from_secs(1),
            };
            if changed {
                s.lag = lag;
                s.changes += 1;
                self.tell(&s);
            }
        }
    }

    /// How many listings and reachability changes have come so far (see `State::changes`).
    pub fn changes(&self) -> u64 {
        lock(&self.state).changes
    }

    /// Tell every watcher, from a thread of its own (they may call back into the link).
    fn tell(&self, s: &MutexGuard<'_, State>) {
        let watchers = s.watchers.clone();
        if watchers.is_empty() {
            return;
        }
        std::thread::spawn(move || {
            for w in &watchers {
                w();
            }
        });
    }

    /// How long opening a session may take: the connect timeout and the remote's start.
    fn hello_within(&self) -> Duration {
        let config = match &self.spec.target {
            HostTarget::Ssh(_) => self.config(),
            HostTarget::Local { .. } => options::SshConfig::default(),
        };
        options::hello_within(options::connect_timeout(&config).0)
    }

    /// What the operator's ssh config says for this host (read once, without connecting).
    fn config(&self) -> options::SshConfig {
        let HostTarget::Ssh(t) = &self.spec.target else { return options::SshConfig::default() };
        self.config
            .get_or_init(|| {
                let mut ask = ssh_program();
                ask.arg("-G");
                destination(&mut ask, t);
                options::ask_ssh(&mut ask)
            })
            .clone()
    }

    /// A session opened: its connection, the host's registries and its leasectl version.
    fn connect(self: &Arc<Self>, generation: u64) -> Result<(Conn, Ready, String), Down> {
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
                    None => c.arg(super::install::SERVE_COMMAND),
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
        let Some(mut conn) = s.conn.take_if(|c| c.generation == generation) else { return };
        s.fed = false;
        s.lag = None;
        let status = wait_briefly(&mut conn.child);
        let why = with_junk(ended_why(&self.spec, status, &errors, end), &junk);
        let fault = if junk_seen(&junk) { HostFault::Junk } else { HostFault::Unreachable };
        for (_, tx) in s.pending.drain() {
            let _ = tx.send(Err(Error::Unreachable { host: self.spec.name.clone(), why: why.clone(), fault }));
        }
        s.down = Some(Down { why, fault });
        s.changes += 1;
        s.retry_at = Some(Instant::now() + FIRST_RETRY);
        s.retry_pause = FIRST_RETRY;
        self.tell(&s);
        // A subscription's own thread opens the session again.
    }

    fn take_line(&self, line: ServerLine) {
        let mut s = lock(&self.state);
        match line {
            ServerLine::Answer { id, answer } => {
                if let Some(tx) = s.pending.remove(&id) {
                    let _ = tx.send(answer.map_err(super::wire::WireError::into_error));
                }
            }
            ServerLine::Listing { profile, listing } => {
                s.listings.insert(profile.clone(), *listing);
                s.changes += 1;
                if let Some(r) = s.ready.as_mut()
                    && !r.profiles.contains(&profile)
                {
                    r.profiles.push(profile.clone());
                }
                self.tell(&s);
            }
            ServerLine::Hello(_) | ServerLine::Ready(_) | ServerLine::Refused(_) => {}
        }
    }
}

fn write_line(s: &mut MutexGuard<'_, State>, line: &str) -> std::io::Result<()> {
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

/// `ssh`, or the operator's replacement for it (`LEASECTL_SSH_COMMAND`, run by `sh -c`
/// with leasectl's arguments as `"$@"`, never spliced into its text).
pub(super) fn ssh_program() -> Command {
    match std::env::var(options::SSH_COMMAND_ENV).ok().filter(|c| !c.trim().is_empty()) {
        Some(text) => {
            let mut c = Command::new("sh");
            c.arg("-c").arg(format!("{text} \"$@\"")).arg("ssh");
            c
        }
        None => Command::new("ssh"),
    }
}

/// `-p PORT -l USER -- HOST`: each its own argument.
pub(super) fn destination(c: &mut Command, t: &crate::lease::address::host_spec::SshTarget) {
    if let Some(p) = t.port {
        c.arg("-p").arg(p.to_string());
    }
    if let Some(u) = &t.user {
        c.arg("-l").arg(u);
    }
    c.arg("--").arg(t.host.trim_start_matches('[').trim_end_matches(']'));
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
            super::install::REMOTE_PATH,
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

/// `leasectl --host SPEC install`, quoted for a shell: the command that puts this build on `host`.
pub fn install_line(host: &HostSpec) -> String {
    crate::lease::words::hint::Reach::with(["--host".to_owned(), host.text()]).line(None, &["install"])
}

/// A host that runs another leasectl of the same protocol: it answers, and is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skew {
    pub host: HostSpec,
    /// What its hello said (escaped for a terminal).
    pub remote: String,
}

/// Why a host of another protocol cannot serve, with the command that puts this build there.
fn other_protocol(hello: &super::wire::Hello, host: &HostSpec) -> String {
    format!(
        "it runs leasectl {} (protocol {}), this is leasectl {VERSION} (protocol {PROTOCOL}): install the same \
         leasectl on both; `{}` puts this build there",
        crate::lease::words::human::escape(&hello.leasectl),
        hello.protocol,
        install_line(host)
    )
}

/// The hosts reached in this process that run another leasectl version than this one.
pub fn skews() -> Vec<Skew> {
    let links: Vec<Arc<Link>> =
        LINKS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().cloned().collect();
    let mut found: Vec<Skew> =
        links.iter().filter_map(|l| Some(Skew { host: l.spec.clone(), remote: l.other_version()? })).collect();
    found.sort_by(|a, b| a.host.name.cmp(&b.host.name));
    found
}

impl Skew {
    /// `host gw1 runs leasectl 0.0.9, this is leasectl 0.1.0: `leasectl --host ... install` puts this build there`
    pub fn words(&self) -> String {
        format!(
            "host {} runs leasectl {}, this is leasectl {VERSION}: `{}` puts this build there",
            crate::lease::words::human::escape(&self.host.name),
            self.remote,
            install_line(&self.host)
        )
    }
}
