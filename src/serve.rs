//! `leasectl serve --stdio`: the remote end of `--host`. Another leasectl starts it over
//! SSH and speaks JSON lines with it (`lease::ssh::wire`): it says hello, opens the home
//! it is asked for, and answers each request by running the same store calls as its own
//! command line, with the same guards, audited here with the operator's SSH identity.
//! Nothing it is sent is ever run by a shell: ids, profiles and paths are data.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::lease::backend::RecordedEvents;
use crate::lease::home::audit::Actor;
use crate::lease::ssh::wire::{
    Answer, ClientLine, Hello, Open, PROTOCOL, Ready, Request, ServerLine, VERSION, WireError, WireListing,
};
use crate::lease::{self, Change, Error, LeaseStore, Location, Registry, StoreOptions, WatchScope, home::paths};

/// A request line is small; anything far larger is not one.
const MAX_REQUEST: u64 = 1 << 20;
/// How often owners are judged again when nothing in the home changed (an owner can die
/// without writing anything).
const REJUDGE: Duration = Duration::from_secs(1);

/// How many registries' state.db a round looks at for a change (two `stat`s each), the
/// next ones the next round: a change is seen within a few rounds at 20,000 profiles.
const DATABASES_PER_ROUND: usize = 1_000;

type Out = Arc<Mutex<std::io::Stdout>>;

/// One line out, whole (the feed and the answers share standard output).
fn send(out: &Out, line: &ServerLine) -> bool {
    let Ok(text) = serde_json::to_string(line) else { return false };
    let mut o = out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    o.write_all(text.as_bytes()).and_then(|()| o.write_all(b"\n")).and_then(|()| o.flush()).is_ok()
}

/// Serve until standard input ends. `home` is this command line's `--home`, used when
/// the client names none.
pub(crate) fn serve_stdio(home: Option<&Path>, options: StoreOptions) -> i32 {
    let out: Out = Arc::new(Mutex::new(std::io::stdout()));
    let user = crate::lease::home::audit::who();
    let hello = Hello {
        leasectl: VERSION.into(),
        protocol: PROTOCOL,
        host: crate::lease::owners::owner::hostname(),
        user: user.split('@').next().unwrap_or_default().to_owned(),
    };
    if !send(&out, &ServerLine::Hello(hello)) {
        return 1;
    }
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let open = match next_line(&mut input) {
        Some(Ok(ClientLine::Open(open))) => open,
        Some(Ok(_)) => return refuse(&out, "the first request must open a home".into()),
        Some(Err(e)) => return refuse(&out, e.why),
        None => return 0,
    };
    if open.protocol != PROTOCOL {
        return refuse(
            &out,
            format!(
                "this is leasectl {VERSION} (protocol {PROTOCOL}), the client is leasectl {} (protocol {}): install \
                 the same leasectl on both",
                open.leasectl, open.protocol
            ),
        );
    }
    let home = open.home.as_deref().map(PathBuf::from).or_else(|| home.map(Path::to_path_buf));
    let home = match paths::resolve_home(home.as_deref()) {
        Ok(h) => h,
        Err(e) => return refuse(&out, e.0),
    };
    if let Some(problem) = paths::home_problem(&home) {
        let host = crate::lease::owners::owner::hostname();
        return refuse(&out, format!("{problem} (on {host})"));
    }
    let root = paths::root_of(&home);
    let profiles: Vec<String> = paths::all_registries(&root).into_iter().map(|r| r.into_place().profile).collect();
    let default = paths::registry_for_home(&home).profile.clone();
    if !send(&out, &ServerLine::Ready(Ready { home: root.display().to_string(), profiles, default })) {
        return 1;
    }
    let mut server = Server {
        root,
        options,
        actor: actor_for(&open),
        stores: HashMap::new(),
        feeding: false,
        audit_failures: Arc::default(),
    };
    while let Some(line) = next_line(&mut input) {
        let (id, request) = match line {
            Ok(ClientLine::Request { id, request }) => (id, request),
            Ok(ClientLine::Open(_)) => continue,
            Err(NotUnderstood { unknown: Some((id, op)), .. }) => {
                let why = format!(
                    "leasectl {VERSION} on {} does not know the request {op:?} (the client's leasectl is newer): install \
                     the same leasectl on both",
                    crate::lease::owners::owner::hostname()
                );
                if !send(&out, &ServerLine::Answer { id, answer: Err(WireError::Unsupported(why)) }) {
                    return 1;
                }
                continue;
            }
            Err(e) => return refuse(&out, e.why),
        };
        let answer = server.answer(request, &out).map_err(WireError::of);
        if !send(&out, &ServerLine::Answer { id, answer }) {
            return 1;
        }
    }
    0
}

/// The remote's audit names the operator as the client said (and the command they
/// ran), and the SSH connection and user as this side knows them (`record_of`).
fn actor_for(open: &Open) -> Actor {
    Actor {
        command: format!("{} (over --host)", open.command),
        names_action: false,
        operator: Some(open.operator.clone()),
    }
}

fn refuse(out: &Out, why: String) -> i32 {
    send(out, &ServerLine::Refused(why));
    1
}

/// A line that is not a request this leasectl knows.
struct NotUnderstood {
    why: String,
    /// A well-formed request of an op this leasectl does not know (a newer client's):
    /// its id and op, to be answered as such while the session goes on.
    unknown: Option<(u64, String)>,
}

fn next_line<R: BufRead>(input: &mut R) -> Option<Result<ClientLine, NotUnderstood>> {
    let mut buf = Vec::new();
    let not = |why: String| NotUnderstood { why, unknown: None };
    match <&mut R as std::io::Read>::take(input, MAX_REQUEST).read_until(b'\n', &mut buf) {
        Ok(0) => None,
        Ok(_) if !buf.ends_with(b"\n") => Some(Err(not("a request line too long, or cut off".into()))),
        Ok(_) => Some(serde_json::from_slice(&buf).map_err(|e| {
            let v: serde_json::Value = serde_json::from_slice(&buf).unwrap_or_default();
            let request = &v["request"];
            let unknown = request["id"].as_u64().zip(request["request"]["op"].as_str().map(str::to_owned));
            NotUnderstood { why: format!("a request that is not understood: {e}"), unknown }
        })),
        Err(e) => Some(Err(not(format!("cannot read the requests: {e}")))),
    }
}

struct Server {
    root: PathBuf,
    options: StoreOptions,
    actor: Actor,
    stores: HashMap<String, Box<dyn LeaseStore>>,
    feeding: bool,
    /// What the audit of the change being answered could not keep.
    audit_failures: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Server {
    fn store(&mut self, profile: &str) -> Result<&mut Box<dyn LeaseStore>, Error> {
        if !self.stores.contains_key(profile) {
            let registry = registry_named(&self.root, profile)?;
            let store = lease::open(&Location::File(registry), self.options)?;
            // Said where the operator is, with the answer (stderr of an ssh session is not).
            let kept = Arc::clone(&self.audit_failures);
            let warn = Box::new(move |f: String| {
                eprintln!("leasectl serve: warning: audit: {f}");
                kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(f);
            });
            let store = lease::audited::Audited::wrap(store, lease::audited::Auditor::new(self.actor.clone(), warn));
            self.stores.insert(profile.to_owned(), store);
        }
        self.stores.get_mut(profile).ok_or_else(|| Error::Refused(format!("no registry {profile}")))
    }

    /// The removal with what its audit record could not keep.
    fn with_warnings(&self, mut removal: lease::Removal) -> lease::Removal {
        let mut failures = self.audit_failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        removal.warnings.append(&mut failures);
        removal
    }

    fn answer(&mut self, request: Request, out: &Out) -> Result<Answer, Error> {
        match request {
            Request::Read { profile } => Ok(Answer::Listing(Box::new(WireListing::of(self.store(&profile)?.read())))),
            Request::Subscribe => {
                if !self.feeding {
                    self.feeding = true;
                    start_feed(self.root.clone(), self.options, Arc::clone(out))?;
                }
                Ok(Answer::Subscribed)
            }
            Request::ForceRelease { profile, target, allow_live, dry_run } => {
                let opts = lease::ForceOptions { allow_live, dry_run };
                let removal = self.store(&profile)?.force_release(&target, opts)?;
                Ok(Answer::Removal(self.with_warnings(removal)))
            }
            Request::Prune { profile, dry_run, include_clock_step, include_work_running } => {
                let opts = lease::PruneOptions { dry_run, include_clock_step, include_work_running };
                let removal = self.store(&profile)?.prune(opts)?;
                Ok(Answer::Removal(self.with_warnings(removal)))
            }
            Request::Doctor { profile } => Ok(Answer::Doctor(Box::new(self.store(&profile)?.doctor()?))),
            Request::Events { profile, from } => {
                let from = from
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .ok_or_else(|| Error::Refused(format!("events from {from:?}: not a time in epoch seconds")))?;
                let registry = registry_named(&self.root, &profile)?;
                Ok(Answer::Events(Box::new(recorded_since(registry.home.clone(), from))))
            }
            Request::StopPlan { profile, target } => {
                Ok(Answer::StopPlan(Box::new(self.store(&profile)?.stop_plan(&target)?)))
            }
            Request::Stop { profile, plan, grace_ms } => {
                let plan: lease::stop::StopPlan = serde_json::from_str(&plan)
                    .map_err(|e| Error::Refused(format!("a stop plan that does not parse: {e}")))?;
                let grace = grace_ms
                    .parse::<u64>()
                    .map(std::time::Duration::from_millis)
                    .map_err(|_| Error::Refused(format!("a grace of {grace_ms:?} ms: not a number")))?;
                let mut stopped = self.store(&profile)?.stop(&plan, lease::stop::StopOptions { grace })?;
                let mut failures = self.audit_failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                stopped.warnings.append(&mut failures);
                Ok(Answer::Stopped(Box::new(stopped)))
            }
            Request::Ping => Ok(Answer::Pong),
        }
    }
}

/// A home's recorded history from `from` on: the newest [`RecordedEvents::MOST`] events.
fn recorded_since(home: PathBuf, from: f64) -> RecordedEvents {
    let mut history = lease::home::history::since(&[home], from);
    let mut events = std::collections::VecDeque::new();
    let mut left_out = 0;
    for event in history.by_ref() {
        let Ok(text) = serde_json::value::to_raw_value(&event) else { continue };
        if events.len() == RecordedEvents::MOST {
            events.pop_front();
            left_out += 1;
        }
        events.push_back(text);
    }
    let journals = history.journals;
    RecordedEvents { events: events.into(), journals, left_out, warnings: history.finish() }
}

/// `root` or a profile as the root lists it (a name, never a path; a profile that is a
/// symlink or anything but a directory is none, as `all_registries` reads them through
/// the one door).
fn registry_named(root: &Path, profile: &str) -> Result<Registry, Error> {
    if profile == "root" {
        return Ok(Registry::new("root", root));
    }
    let named = paths::profile_registry(root, profile).map_err(|e| Error::Refused(e.0))?;
    // As listed: a deleted profile whose registry still holds leases is served, marked.
    paths::all_registries(root)
        .into_iter()
        .find(|r| r.home == named.home)
        .ok_or_else(|| Error::Refused(format!("no profile {profile} in {}", root.display())))
}

/// Whether a change at `path` can change what `registry` lists.
fn touches(registry: &Registry, path: &Path) -> bool {
    path.starts_with(registry.runtime_dir()) || path == registry.config_path() || path == registry.home
}

/// Every registry's listing now, then again whenever it changes: on a change in the
/// home, and when a re-judgement of its owners (every second) finds one that ended.
fn start_feed(root: PathBuf, options: StoreOptions, out: Out) -> Result<(), Error> {
    let (tx, rx) = channel::<Change>();
    let registries = paths::all_registries(&root);
    let scope = WatchScope {
        locations: registries.iter().cloned().map(Location::File).collect(),
        discover_root: Some(root.clone()),
        debounce: Duration::from_millis(20),
    };
    lease::watch(&scope, Arc::new(move |c| tx.send(c).is_ok()))?;
    let mut feed = Feed { root, options, out, fed: Vec::new(), next_look: 0 };
    for registry in registries {
        feed.add(registry);
    }
    // The first listings go before the answer to the subscription.
    if !feed.push_all(|_| true) {
        return Err(Error::Refused("standard output closed".into()));
    }
    std::thread::spawn(move || {
        loop {
            match rx.recv_timeout(REJUDGE) {
                Ok(change) => {
                    let mut paths = Vec::new();
                    // No paths: the feed could not name them (an overflow, a burst past
                    // its count): every registry may have changed.
                    let mut everything = false;
                    for c in std::iter::once(change).chain(rx.try_iter()) {
                        if let Change::Files(p) = c {
                            everything |= p.is_empty();
                            paths.extend(p);
                        }
                    }
                    feed.discover(&paths, everything);
                    if !feed.push_all(|reg| everything || paths.iter().any(|p| touches(reg, p))) {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    if !feed.rejudge() {
                        return;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    });
    Ok(())
}

struct Fed {
    registry: Registry,
    store: Box<dyn LeaseStore>,
    /// The listing last sent, as sent: a change is sent once.
    last: Option<String>,
    /// The home's state.db as last looked at: the sessions' context rides with the
    /// listing, so a change there is sent too.
    db: crate::lease::home::context::Signature,
    /// The listing last sent held a lease (or could not be read): only then can judging
    /// its owners or its state.db again change it.
    holds_leases: bool,
}

struct Feed {
    root: PathBuf,
    options: StoreOptions,
    out: Out,
    fed: Vec<Fed>,
    /// Where the next round's look at state.db files starts, among the registries that
    /// hold leases.
    next_look: usize,
}

impl Feed {
    fn add(&mut self, registry: Registry) {
        if let Ok(store) = lease::open(&Location::File(registry.clone()), self.options) {
            let db = crate::lease::home::context::signature(&crate::lease::home::context::state_db(&registry.home));
            self.fed.push(Fed { registry, store, last: None, db, holds_leases: true });
        }
    }

    /// New profiles (a directory made under `profiles/`) join the feed, when `paths` (or
    /// `everything`) may name one.
    fn discover(&mut self, paths: &[PathBuf], everything: bool) {
        let profiles = self.root.join("profiles");
        if !everything && !paths.iter().any(|p| p.parent() == Some(profiles.as_path()) || *p == profiles) {
            return;
        }
        for registry in paths::all_registries(&self.root) {
            if !self.fed.iter().any(|f| f.registry == registry) {
                self.add(registry);
            }
        }
    }

    fn push_all(&mut self, which: impl Fn(&Registry) -> bool) -> bool {
        for f in self.fed.iter_mut().filter(|f| f.last.is_none() || which(&f.registry)) {
            let listing = f.store.read();
            if !push(&self.out, f, listing) {
                return false;
            }
        }
        true
    }

    /// Judge again the owners of the registries that hold leases, and read again those
    /// whose state.db changed: a registry without a lease has nothing either can change
    /// (looking at 20,000 profiles' state.db every second was 5 % of a core). A round
    /// looks at the state.db of [`DATABASES_PER_ROUND`] of them, the next round the next.
    fn rejudge(&mut self) -> bool {
        // One look at each owner process, however many registries it holds leases in.
        let mut prober = crate::lease::owners::liveness::Prober::new();
        let holders = self.fed.iter().filter(|f| f.holds_leases).count();
        let start = self.next_look % holders.max(1);
        let window = DATABASES_PER_ROUND.min(holders);
        self.next_look = start + window;
        for (k, f) in self.fed.iter_mut().filter(|f| f.holds_leases).enumerate() {
            let looked = (k + holders - start) % holders < window;
            let context_changed = looked && {
                let db =
                    crate::lease::home::context::signature(&crate::lease::home::context::state_db(&f.registry.home));
                let changed = db != f.db;
                f.db = db;
                changed
            };
            if f.store.rejudge_needed(&mut prober) || context_changed {
                let listing = if context_changed { f.store.read() } else { f.store.rejudge(&mut prober) };
                if !push(&self.out, f, listing) {
                    return false;
                }
            }
        }
        true
    }
}

/// Send `listing` if it differs from the last one sent for its registry.
fn push(out: &Out, f: &mut Fed, listing: lease::Listing) -> bool {
    f.holds_leases = listing.leases.as_ref().map_or(true, |views| !views.is_empty());
    let line = ServerLine::Listing { profile: f.registry.profile.clone(), listing: Box::new(WireListing::of(listing)) };
    let Ok(text) = serde_json::to_string(&line) else { return true };
    if f.last.as_deref() == Some(text.as_str()) {
        return true;
    }
    let mut o = out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let sent = o.write_all(text.as_bytes()).and_then(|()| o.write_all(b"\n")).and_then(|()| o.flush()).is_ok();
    f.last = Some(text);
    sent
}
