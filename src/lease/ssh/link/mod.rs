//! One long-lived session to one host: `ssh ... leasectl serve --stdio` (or, for
//! `local`, leasectl's own `serve --stdio`), shared by every registry and action on that
//! host in this process. Requests wait for their answer a bounded time; a host that is
//! down is said at once with why, and tried again with a growing pause.

mod session;
mod state;

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use session::write_line;
use state::{Down, FIRST_RETRY, State};

use super::options::{self, destination, ssh_program};
use super::wire::{Answer, ClientLine, Request, VERSION, WireListing};
use crate::lease::address::host_spec::{HostSpec, HostTarget};
use crate::lease::error::{Error, HostFault};

/// How long reads wait for sessions being opened while subscriptions keep their hosts
/// (the console), counted once for the whole process from the first subscription: the
/// first screen has its hosts' listings when they answer at once, and a slow host never
/// holds a later read up.
const SUBSCRIBED_WAIT: Duration = Duration::from_millis(300);
static FIRST_SUBSCRIPTION: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
/// How often a kept session is asked how far behind it is, and from what answer time
/// on it is said to lag (a listing then may be that late).
const PING_EVERY: Duration = Duration::from_secs(2);
const LAG_AFTER: Duration = Duration::from_secs(1);
const LAG_GIVE_UP: Duration = Duration::from_secs(10);
/// Told (from a thread of its own) when a host sent a listing, went down, came back or
/// started or stopped lagging: the store's next read has something new.
pub(crate) type Watcher = Arc<dyn Fn() + Send + Sync>;

/// Every registry the hosts among `locations` have said they have (never waits: a
/// host not answered yet adds its registries when it does).
pub(crate) fn known_registries(locations: &[crate::lease::Location]) -> Vec<crate::lease::Location> {
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

pub(crate) struct Link {
    spec: HostSpec,
    state: Mutex<State>,
    /// Signalled when an opening ends, either way.
    opened: Condvar,
    /// What the operator's ssh config says for this host, once read.
    config: std::sync::OnceLock<options::SshConfig>,
}

static LINKS: LazyLock<Mutex<HashMap<HostSpec, Arc<Link>>>> = LazyLock::new(Mutex::default);

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Link {
    /// The one link to `spec` in this process.
    pub(crate) fn to(spec: &HostSpec) -> Arc<Link> {
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
    pub(crate) fn profiles(self: &Arc<Self>) -> Result<Vec<String>, Error> {
        self.ensure(false)?;
        Ok(lock(&self.state).ready.as_ref().map(|r| r.profiles.clone()).unwrap_or_default())
    }

    /// The registry the host's home stands for (`root`, or the profile its path names).
    pub(crate) fn default_profile(self: &Arc<Self>) -> Result<String, Error> {
        self.ensure(false)?;
        Ok(lock(&self.state).ready.as_ref().map_or_else(|| "root".to_owned(), |r| r.default.clone()))
    }

    /// The listing the subscription last brought for `profile`, while it is live.
    pub(crate) fn pushed(&self, profile: &str) -> Option<WireListing> {
        let s = lock(&self.state);
        if s.subscribed && s.conn.is_some() { s.listings.get(profile).cloned() } else { None }
    }

    /// What `profile`'s state.db said of its sessions in its last listing.
    pub(crate) fn sessions(&self, profile: &str) -> Option<super::wire::RemoteSessions> {
        lock(&self.state).listings.get(profile).and_then(|l| l.sessions.clone())
    }

    /// The owners of `profile`'s leases as the remote named them in its last listing.
    pub(crate) fn owners(&self, profile: &str) -> HashMap<u64, crate::lease::owners::owner::OwnerInfo> {
        lock(&self.state).listings.get(profile).map(|l| l.owners.clone()).unwrap_or_default()
    }

    /// While a subscription keeps the host and its first listings have not come on the
    /// session now open: why not (down, or being opened). A read then does not ask: what
    /// it would ask for is on its way.
    pub(crate) fn awaiting_feed(&self) -> Option<Error> {
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
    pub(crate) fn remember(&self, profile: &str, listing: &WireListing) {
        let mut s = lock(&self.state);
        if !s.subscribed {
            s.listings.insert(profile.to_owned(), listing.clone());
        }
    }

    /// Ask, and wait at most `within` for the answer.
    pub(crate) fn call(self: &Arc<Self>, request: Request, within: Duration) -> Result<Answer, Error> {
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
    pub(crate) fn subscribe(self: &Arc<Self>, watcher: Watcher) {
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
    pub(crate) fn wait_fed(&self, deadline: Instant) {
        let s = lock(&self.state);
        drop(self.wait_while(s, deadline, |s| s.subscribed && !s.fed && s.down.is_none()));
    }

    /// Wait (until `deadline`) on an opening's end or the operator's retry while
    /// `waiting` holds; the state, which may still be waiting when the deadline came.
    fn wait_while<'s>(
        &'s self,
        s: MutexGuard<'s, State>,
        deadline: Instant,
        waiting: impl FnMut(&mut State) -> bool,
    ) -> MutexGuard<'s, State> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.opened.wait_timeout_while(s, left, waiting) {
            Ok((guard, _)) => guard,
            Err(poisoned) => poisoned.into_inner().0,
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
        let s = lock(&self.state);
        let until =
            s.retry_at.unwrap_or_else(|| Instant::now() + FIRST_RETRY).max(Instant::now() + Duration::from_millis(50));
        let mut s = self.wait_while(s, until, |s| !s.retry_now);
        s.retry_now = false;
    }

    /// A host that is down is tried again now, its pause back to the first (the console's
    /// `r`: it had waited for the pause, up to 30 s). A host that answers is left alone.
    /// True when it was down.
    pub(crate) fn retry_now(&self) -> bool {
        let retried = lock(&self.state).retry_now();
        if retried {
            self.opened.notify_all();
        }
        retried
    }

    /// An error that says why the host gives no answer (`fallback` when not known yet).
    fn unreachable(&self, fallback: &str) -> Error {
        let s = lock(&self.state);
        let down = s.down.clone().unwrap_or_else(|| Down::lost(fallback.to_owned()));
        self.down_error(&down)
    }

    fn down_error(&self, down: &Down) -> Error {
        down.error(&self.spec.name)
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
        s = self.wait_while(s, deadline, |s| s.conn.is_none() && s.connecting.is_some());
        if s.conn.is_none() && s.connecting.is_some() {
            return Err(Error::Connecting { host: self.spec.name.clone() });
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
                if s.opened(conn, ready, version) {
                    self.tell(&s);
                }
                Ok(())
            }
            Err(down) => {
                let error = self.down_error(&down);
                s.open_failed(down, Instant::now());
                self.tell(&s);
                self.opened.notify_all();
                Err(error)
            }
        }
    }

    /// How far behind the host's answers are, when they lag.
    pub(crate) fn lag(&self) -> Option<Duration> {
        lock(&self.state).lag
    }

    /// The host's leasectl version, when it is not this one (same protocol: it answers).
    pub(crate) fn other_version(&self) -> Option<String> {
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
            if s.lag_measured(lag) {
                self.tell(&s);
            }
        }
    }

    /// How many listings and reachability changes have come so far (see `State::changes`).
    pub(crate) fn changes(&self) -> u64 {
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
}

/// `leasectl --host SPEC install`, quoted for a shell: the command that puts this build on `host`.
pub(crate) fn install_line(host: &HostSpec) -> String {
    crate::lease::words::hint::Reach::with(["--host".to_owned(), host.text()]).line(None, &["install"])
}

/// A host that runs another leasectl of the same protocol: it answers, and is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Skew {
    pub host: HostSpec,
    /// What its hello said (escaped for a terminal).
    pub remote: String,
}

/// The hosts reached in this process that run another leasectl version than this one.
pub(crate) fn skews() -> Vec<Skew> {
    let links: Vec<Arc<Link>> =
        LINKS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().cloned().collect();
    let mut found: Vec<Skew> =
        links.iter().filter_map(|l| Some(Skew { host: l.spec.clone(), remote: l.other_version()? })).collect();
    found.sort_by(|a, b| a.host.name.cmp(&b.host.name));
    found
}

impl Skew {
    /// `host gw1 runs leasectl 0.0.9, this is leasectl 0.1.0: `leasectl --host ... install` puts this build there`
    pub(crate) fn words(&self) -> String {
        format!(
            "host {} runs leasectl {}, this is leasectl {VERSION}: `{}` puts this build there",
            crate::lease::words::human::escape(&self.host.name),
            self.remote,
            install_line(&self.host)
        )
    }
}
