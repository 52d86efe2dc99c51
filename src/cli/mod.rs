//! The command-line interface: parse, call the core, print. Exit codes:
//! 0 ok, 1 error, 2 usage, 3/4/5 the refusal reasons.

/// Output that never panics: a closed pipe (`leasectl ls | head`) or a dead
/// terminal must not turn into a crash after the work is done. A failed write is
/// remembered: the command then exits non-zero (see [`stdout_failure`]).
/// Human text carries this command line's registry options in its hints ([`hints`]).
macro_rules! say {
    () => {{
        use std::io::Write as _;
        $crate::cli::note_stdout(writeln!(std::io::stdout()));
    }};
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let text = $crate::cli::hints::hinted(&format!($($t)*));
        $crate::cli::note_stdout(writeln!(std::io::stdout(), "{text}"));
    }};
}
macro_rules! say_raw {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let text = $crate::cli::hints::hinted(&format!($($t)*));
        $crate::cli::note_stdout(write!(std::io::stdout(), "{text}"));
    }};
}
macro_rules! say_err {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let text = $crate::cli::hints::hinted(&format!($($t)*));
        let _ = writeln!(std::io::stderr(), "{text}");
    }};
}

pub mod args;
mod events;
pub mod hints;
mod ls;
mod metrics;
pub mod output;
mod watch;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};

use args::{AcquireOpts, Backend, ForceReleaseArgs};
pub use args::{Cli, Command};

use crate::lease::{
    self, AcquireRequest, Error, EtcdLocation, LeaseStore, Location, Reason, StoreOptions, Target, liveness::Prober,
    location::lease_ttl, paths, refusal::refusal_stderr,
};
use crate::supervise::Supervision;
use crate::supervise::keeper::{self, Role};

pub const EXIT_OK: i32 = 0;
pub const EXIT_ERROR: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
/// `hold` or `run` lost its lease while holding it (force-released, removed, not renewed).
pub const EXIT_LEASE_LOST: i32 = 6;

/// The first error writing standard output, if any.
static STDOUT_ERROR: Mutex<Option<std::io::Error>> = Mutex::new(None);

/// Remember a failed write to standard output (the first one).
pub fn note_stdout(result: std::io::Result<()>) {
    if let Err(e) = result
        && let Ok(mut first) = STDOUT_ERROR.lock()
    {
        first.get_or_insert(e);
    }
}

/// Flush standard output, and say whether anything written to it was lost.
fn stdout_failure() -> Option<String> {
    use std::io::Write as _;
    note_stdout(std::io::stdout().flush());
    STDOUT_ERROR.lock().ok()?.as_ref().map(|e| e.to_string())
}

/// Run a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> i32 {
    // The console draws on the terminal itself; a terminal that hangs up is its exit
    // path (handled there), not lost output.
    let console = match &cli.command {
        Some(Command::Tui) | Some(Command::Demo(_)) => true,
        None => std::io::IsTerminal::is_terminal(&std::io::stdout()),
        _ => false,
    };
    let code = match dispatch(cli) {
        Ok(code) => code,
        Err(Failure { code, message }) => {
            // Messages quote ids from files: shown, never obeyed by the terminal. An empty
            // message was printed already (a list, each field escaped).
            if !message.is_empty() {
                say_err!("leasectl: {}", crate::lease::human::escape(&message));
            }
            code
        }
    };
    // Output nobody could read (a full disk, a closed pipe) is not a success.
    match stdout_failure().filter(|_| !console) {
        Some(e) if code == EXIT_OK => {
            say_err!("leasectl: cannot write the output: {e}");
            EXIT_ERROR
        }
        _ => code,
    }
}

struct Failure {
    code: i32,
    message: String,
}

fn usage(message: impl Into<String>) -> Failure {
    Failure { code: EXIT_USAGE, message: message.into() }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let code = match e {
            // The registry cannot be coordinated on: the same code as the fence's refusal.
            Error::Invalid(_) | Error::LockTimeout { .. } | Error::LivenessUnknown { .. } | Error::Unavailable(_) => {
                Reason::SessionCoordinationUnavailable.exit_code()
            }
            _ => EXIT_ERROR,
        };
        Failure { code, message: e.to_string() }
    }
}

fn dispatch(mut cli: Cli) -> Result<i32, Failure> {
    hints::set(&cli);
    let timeout = lock_timeout(cli.lock_timeout)?;
    // No command: the console on a terminal, the listing otherwise (pipes, scripts);
    // either way over the console's scope, the root and every profile.
    let implicit = cli.command.is_none();
    let command = cli.command.take().unwrap_or_else(|| {
        if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            Command::Tui
        } else {
            Command::Ls(args::LsArgs::default())
        }
    });
    // Generated from the argument definitions; they need no registry.
    match &command {
        Command::Completions(a) => return Ok(print_completions(a.shell)),
        Command::Man => return print_man(),
        _ => {}
    }
    let locations = select_locations(&cli, &command, implicit)?;
    let ttl = match &command {
        Command::Acquire(a) => a.opts.ttl,
        Command::Hold(o) => o.ttl,
        Command::Run(a) => a.opts.ttl,
        _ => None,
    };
    let options =
        StoreOptions { lock_timeout: timeout, ttl: lease_ttl(ttl).map_err(usage)?, idle_threshold: cli.idle_threshold };
    let single = || -> Result<Box<dyn LeaseStore>, Failure> {
        if cli.all_profiles {
            return Err(usage("--all-profiles works with ls, prune, doctor and force-release only"));
        }
        let location = locations.first().ok_or_else(|| usage("no registry selected"))?;
        Ok(lease::open(location, options)?)
    };
    let all = || -> Result<Vec<Box<dyn LeaseStore>>, Failure> {
        locations.iter().map(|l| lease::open(l, options).map_err(Failure::from)).collect()
    };
    // --all-profiles on files: a profile created while ls -w or events -f runs is followed too.
    let discover = || {
        cli.all_profiles
            .then(|| locations.first().and_then(Location::registry).map(|r| (r.home.clone(), options)))
            .flatten()
    };
    match command {
        Command::Ls(a) => ls::ls(&mut all()?, &a, cli.idle_threshold, discover()),
        Command::Acquire(a) => acquire(&mut *single()?, &a.opts, a.owner_pid, timeout),
        Command::Release(a) => {
            let elsewhere = other_registries(&cli, &locations)?;
            release(&mut *single()?, &a.lease_id, a.owner_pid, a.json, &elsewhere)
        }
        Command::ForceRelease(a) if cli.all_profiles => force_release_everywhere(&mut all()?, &a),
        Command::ForceRelease(a) => {
            let elsewhere = other_registries(&cli, &locations)?;
            force_release(&mut *single()?, &a, &elsewhere)
        }
        Command::Prune(a) => prune(
            &mut all()?,
            lease::PruneOptions {
                dry_run: a.dry_run,
                include_clock_step: a.include_clock_step,
                include_work_running: a.force,
            },
            a.json,
        ),
        Command::Doctor(a) if a.repair => repair(&mut all()?, a.yes, a.force, a.json),
        Command::Doctor(a) => doctor(&mut all()?, a.json),
        Command::Run(a) => match keeper::role() {
            // The process a script started: the work runs under a keeper it starts.
            Role::Relay => keeper::relay(stop_signals()?)
                .map_err(|e| Failure { code: EXIT_ERROR, message: format!("cannot start the lease keeper: {e}") }),
            Role::Keeper(relay) => run_cmd(&mut *single()?, &a, relay, timeout),
            Role::Orphaned(relay) => {
                Err(Failure { code: EXIT_ERROR, message: format!("leasectl (pid {relay}) ended before CMD started") })
            }
        },
        Command::Hold(a) => hold(&mut *single()?, &a, timeout),
        Command::Tui => console(&cli.home, cli.profile.is_some(), locations, timeout, cli.idle_threshold),
        Command::Demo(a) => demo(cli.home.as_deref(), a.tour),
        Command::Events(a) => events::events(&mut all()?, &a, cli.idle_threshold, discover()),
        Command::Metrics => {
            use std::io::Write as _;
            let text = metrics::render(&mut all()?, cli.idle_threshold);
            note_stdout(std::io::stdout().write_all(text.as_bytes()));
            Ok(EXIT_OK)
        }
        Command::Completions(_) | Command::Man => Ok(EXIT_OK),
    }
}

fn print_completions(shell: clap_complete::Shell) -> i32 {
    use clap::CommandFactory as _;
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "leasectl", &mut out);
    use std::io::Write as _;
    note_stdout(std::io::stdout().write_all(&out));
    EXIT_OK
}

fn print_man() -> Result<i32, Failure> {
    use clap::CommandFactory as _;
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut out)
        .map_err(|e| Failure { code: EXIT_ERROR, message: format!("cannot render the manual: {e}") })?;
    use std::io::Write as _;
    note_stdout(std::io::stdout().write_all(&out));
    Ok(EXIT_OK)
}

/// The locations a command acts on: registry files (the home, a profile, or the root and
/// every profile), or one etcd prefix with `--backend etcd`.
fn select_locations(cli: &Cli, command: &Command, implicit: bool) -> Result<Vec<Location>, Failure> {
    if cli.backend == Backend::Etcd {
        if cli.all_profiles || cli.profile.is_some() || cli.home.is_some() {
            return Err(usage(
                "--home, --profile and --all-profiles name registry files; with --backend etcd use --endpoints and \
                 --prefix",
            ));
        }
        let none_of_file = |what: &str| -> Failure {
            usage(format!(
                "{what} works on the registry file only: on etcd there is nothing to {what} (an owner that stops \
                 renewing its lease loses its keys when the TTL ends; `ls` shows what is held)"
            ))
        };
        match command {
            Command::Prune(_) => return Err(none_of_file("prune")),
            Command::Doctor(_) => return Err(none_of_file("doctor")),
            Command::Demo(_) => return Err(usage("demo runs on a sandbox registry file; it has no etcd mode")),
            _ => {}
        }
        let endpoints = cli.endpoints.as_deref().ok_or_else(|| {
            usage("--backend etcd needs --endpoints URL[,URL] (the etcd client URLs, e.g. http://127.0.0.1:2379)")
        })?;
        let at = EtcdLocation::parse(endpoints, cli.prefix.as_deref()).map_err(usage)?;
        return Ok(vec![Location::Etcd(at)]);
    }
    if cli.endpoints.is_some() || cli.prefix.is_some() {
        return Err(usage("--endpoints and --prefix work with --backend etcd only"));
    }
    if let Command::Acquire(args::AcquireArgs { opts: AcquireOpts { ttl: Some(_), .. }, .. })
    | Command::Hold(AcquireOpts { ttl: Some(_), .. })
    | Command::Run(args::RunArgs { opts: AcquireOpts { ttl: Some(_), .. }, .. }) = command
    {
        return Err(usage("--ttl works with --backend etcd only: a registry file lease lasts as long as its owner"));
    }
    let home = paths::resolve_home(cli.home.as_deref()).map_err(|m| Failure { code: EXIT_ERROR, message: m.0 })?;
    let root = paths::root_of(&home);
    let console = implicit || matches!(command, Command::Tui);
    // A home or profile that is not there was mistyped, and nothing brings it into
    // being: the fence creates runtime/ inside an existing one, as Hermes does (the demo
    // makes its own sandbox).
    let fence = matches!(command, Command::Demo(_));
    let missing = |message: String| Failure { code: EXIT_ERROR, message };
    if !fence && !home.is_dir() {
        return Err(missing(format!(
            "the Hermes home {} does not exist (check --home or HERMES_HOME)",
            home.display()
        )));
    }
    let registries = if cli.all_profiles || (console && cli.profile.is_none()) {
        paths::all_registries(&root)
    } else if let Some(name) = &cli.profile {
        let reg = paths::profile_registry(&root, name).map_err(usage)?;
        if !fence && !reg.home.is_dir() {
            let known: Vec<String> = paths::all_registries(&root).into_iter().skip(1).map(|r| r.profile).collect();
            let listed = if known.is_empty() { "none yet".to_owned() } else { known.join(", ") };
            return Err(missing(format!("no profile '{name}' in {}; profiles: {listed}", root.display())));
        }
        vec![reg]
    } else {
        vec![paths::registry_for_home(&home)]
    };
    Ok(registries.into_iter().map(Location::File).collect())
}

/// The console draws on standard output: without a terminal there, say so before
/// anything is set up (a demo sandbox included) rather than fail half-way.
fn needs_terminal(what: &str) -> Result<(), Failure> {
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return Ok(());
    }
    Err(usage(format!("{what} needs a terminal; in scripts and pipes use `leasectl ls` (or `leasectl ls --json`)")))
}

fn console(
    home: &Option<std::path::PathBuf>,
    one_profile: bool,
    locations: Vec<Location>,
    timeout: Duration,
    idle_threshold: Option<Duration>,
) -> Result<i32, Failure> {
    needs_terminal("the console")?;
    // Open each location once now, so a console never starts on one it cannot read
    // (etcd in a build without it).
    for location in &locations {
        lease::open(location, StoreOptions::default())?;
    }
    let discover_root = match locations.first() {
        Some(Location::File(_)) if !one_profile => {
            let home = paths::resolve_home(home.as_deref()).map_err(|m| Failure { code: EXIT_ERROR, message: m.0 })?;
            Some(paths::root_of(&home))
        }
        _ => None,
    };
    let opts = crate::tui::ConsoleOptions {
        locations,
        discover_root,
        // The console must stay responsive: a held lock is reported, not waited out.
        lock_timeout: timeout.min(Duration::from_secs(3)),
        idle_threshold,
        extension: None,
    };
    crate::tui::run(opts).map_err(|e| Failure { code: EXIT_ERROR, message: format!("console: {e}") })?;
    Ok(EXIT_OK)
}

/// The console on a sandbox: never `$HERMES_HOME` or `~/.hermes`, only a temp dir or `--home`.
fn demo(home: Option<&std::path::Path>, tour: bool) -> Result<i32, Failure> {
    needs_terminal("the demo")?;
    let fail = |what: &str, e: std::io::Error| Failure { code: EXIT_ERROR, message: format!("{what}: {e}") };
    let sandbox = match home {
        Some(h) => crate::demo::Sandbox::at(h).map_err(|e| fail("cannot use the demo home", e))?,
        None => crate::demo::Sandbox::create_temp().map_err(|e| fail("cannot create a sandbox", e))?,
    };
    let exe = std::env::current_exe().map_err(|e| fail("cannot find the leasectl binary", e))?;
    let reg = sandbox.registry();
    let opts = crate::tui::ConsoleOptions {
        locations: vec![Location::File(reg)],
        discover_root: None,
        lock_timeout: Duration::from_secs(3),
        idle_threshold: None,
        extension: Some(crate::demo::console::extension(crate::demo::Playground::new(sandbox, exe), tour)),
    };
    crate::tui::run(opts).map_err(|e| Failure { code: EXIT_ERROR, message: format!("demo: {e}") })?;
    Ok(EXIT_OK)
}

fn lock_timeout(secs: f64) -> Result<Duration, Failure> {
    if !(0.0..=86_400.0).contains(&secs) {
        return Err(usage(format!("--lock-timeout must be between 0 and 86400 seconds, not {secs}")));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// JSON is exact: written as is, never hinted (an `advice` field is hinted where it is made).
fn print_json(v: &Value) {
    use std::io::Write as _;
    let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    note_stdout(writeln!(std::io::stdout(), "{text}"));
}

fn metadata_of(opts: &AcquireOpts) -> Result<Map<String, Value>, Failure> {
    let mut m = Map::new();
    for kv in &opts.meta {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(usage(format!("--meta takes K=V, not {kv:?}")));
        };
        if k.is_empty() {
            return Err(usage(format!("--meta key is empty in {kv:?}")));
        }
        m.insert(k.to_owned(), Value::String(v.to_owned()));
    }
    if let Some(l) = &opts.live_id {
        m.insert("live_session_id".into(), Value::String(l.clone()));
    }
    Ok(m)
}

fn request(
    store: &dyn LeaseStore,
    opts: &AcquireOpts,
    owner_pid: u64,
    timeout: Duration,
) -> Result<AcquireRequest, Failure> {
    let cap = match opts.max {
        Some(0) => None,
        Some(n) => Some(n),
        None => {
            let setting = store.cap_setting();
            for w in &setting.warnings {
                say_err!("leasectl: warning: {w}");
            }
            setting.cap
        }
    };
    Ok(AcquireRequest {
        session_id: opts.session.clone(),
        surface: Some(opts.surface.clone()),
        metadata: metadata_of(opts)?,
        owner_pid,
        cap,
        track_liveness: opts.track_liveness,
        lock_timeout: timeout,
    })
}

/// Acquire and report; Ok(lease) when granted, Err(exit code) when refused (already reported).
/// `held`: hold/run, which print JSON on one line (a line a reader can wait for) and renew.
/// Where a grant's human banner goes: stdout (acquire, hold), stderr (run: stdout is
/// CMD's, as with flock(1)), or nowhere (run -q).
#[derive(Clone, Copy, PartialEq)]
enum Banner {
    Stdout,
    Stderr,
    Quiet,
}

/// How long `--wait` keeps asking, and what ends the wait early (a stop signal).
struct Waiting<'a> {
    until: Option<std::time::Instant>,
    stopped: &'a mut dyn FnMut() -> bool,
}

impl Waiting<'_> {
    fn of(wait: Option<f64>, stopped: &mut dyn FnMut() -> bool) -> Result<Waiting<'_>, Failure> {
        let until = match wait {
            None => None,
            Some(secs) if (0.0..=86_400.0 * 365.0).contains(&secs) => {
                Some(std::time::Instant::now() + Duration::from_secs_f64(secs))
            }
            Some(secs) => return Err(usage(format!("--wait takes 0 to 31536000 seconds, not {secs}"))),
        };
        Ok(Waiting { until, stopped })
    }
}

/// Ask the fence; with --wait, ask again while the refusal is a conflict (the session
/// held, every slot taken) and time is left: 50 ms, doubling up to 1 s. The holder is
/// named once, on stderr.
fn acquire_waiting(
    store: &mut dyn LeaseStore,
    req: &AcquireRequest,
    waiting: &mut Waiting,
) -> Result<lease::Grant, lease::Refusal> {
    let mut pause = Duration::from_millis(50);
    let mut named = false;
    loop {
        let refusal = match store.acquire(req) {
            Ok(g) => return Ok(g),
            Err(r) => r,
        };
        let conflict = matches!(refusal.reason, Reason::SessionNotOwned | Reason::MaxConcurrentSessions);
        let left = waiting.until.map(|u| u.saturating_duration_since(std::time::Instant::now()));
        let Some(left) = left.filter(|l| conflict && !l.is_zero()) else { return Err(refusal) };
        if (waiting.stopped)() {
            return Err(refusal);
        }
        if !named {
            named = true;
            let who = match &refusal.holder {
                Some(h) => format!(
                    "held by pid {} ({}, {})",
                    h.pid(),
                    crate::lease::human::escape(h.surface().unwrap_or("-")),
                    lease::owner::command_name(h.pid()).unwrap_or_else(|| "-".into())
                ),
                None => "every slot is taken".into(),
            };
            say_err!(
                "leasectl: session {} is {who}; waiting up to {}",
                crate::lease::human::escape(&req.session_id),
                crate::lease::human::duration(left.as_secs_f64().ceil())
            );
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

fn acquire_reported(
    store: &mut dyn LeaseStore,
    req: &AcquireRequest,
    as_json: bool,
    held: bool,
    waiting: &mut Waiting,
) -> Result<lease::Grant, i32> {
    acquire_reported_to(store, req, as_json, held, Banner::Stdout, waiting)
}

fn acquire_reported_to(
    store: &mut dyn LeaseStore,
    req: &AcquireRequest,
    as_json: bool,
    held: bool,
    banner: Banner,
    waiting: &mut Waiting,
) -> Result<lease::Grant, i32> {
    // run's stdout is CMD's: its JSON line goes to stderr, as its banner does.
    let cmds_stdout = held && !matches!(banner, Banner::Stdout);
    let show = |v: &Value| {
        use std::io::Write as _;
        if cmds_stdout {
            let _ = writeln!(std::io::stderr(), "{v}");
        } else if held {
            note_stdout(writeln!(std::io::stdout(), "{v}"));
        } else {
            print_json(v)
        }
    };
    match acquire_waiting(store, req, waiting) {
        Ok(g) => {
            if as_json {
                show(&output::grant_json(&g, store.location(), req, held));
            } else {
                let text = if g.recorded {
                    output::grant_text(&g, store.location(), req, held)
                } else {
                    "granted (not recorded: an empty session id has nothing to fence)\n".to_owned()
                };
                match banner {
                    Banner::Stdout => say_raw!("{text}"),
                    Banner::Stderr => {
                        use std::io::Write as _;
                        let _ = write!(std::io::stderr(), "{text}");
                    }
                    Banner::Quiet => {}
                }
            }
            // A grant whose lease id nobody could read would be held by no one who knows it.
            if let Some(e) = stdout_failure() {
                let undone = match store.release_grant(&g) {
                    Ok(_) => "released it".to_owned(),
                    Err(r) => format!("and releasing it failed too: {r}"),
                };
                say_err!("leasectl: the grant could not be reported ({e}); {undone}");
                return Err(EXIT_ERROR);
            }
            Ok(g)
        }
        Err(r) => {
            let advice = store.advice(r.reason);
            if as_json {
                show(&output::refusal_json(&r, &advice));
            } else {
                let shown = crate::lease::Refusal {
                    message: crate::lease::human::escape(&r.message).into_owned(),
                    ..r.clone()
                };
                say_err!("{}\nwhat to do: {advice}", refusal_stderr(&shown));
            }
            Err(r.reason.exit_code())
        }
    }
}

fn acquire(
    store: &mut dyn LeaseStore,
    opts: &AcquireOpts,
    owner: Option<u64>,
    timeout: Duration,
) -> Result<i32, Failure> {
    let owner_pid =
        owner.unwrap_or_else(|| u64::from(rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get() as u32)));
    if !opts.session.is_empty() && Prober::new().start_time(owner_pid).is_none() {
        return Err(Failure { code: EXIT_ERROR, message: format!("owner pid {owner_pid} is not a running process") });
    }
    let req = request(store, opts, owner_pid, timeout)?;
    let mut never = || false;
    let mut waiting = Waiting::of(opts.wait, &mut never)?;
    Ok(match acquire_reported(store, &req, opts.json, false, &mut waiting) {
        Ok(_) => EXIT_OK,
        Err(code) => code,
    })
}

/// The other registries of the selected one's home (the root and every profile): where a
/// lease id not found in the selected one is looked for. None on etcd.
fn other_registries(cli: &Cli, selected: &[Location]) -> Result<Vec<Location>, Failure> {
    if cli.backend == Backend::Etcd {
        return Ok(vec![]);
    }
    let home = paths::resolve_home(cli.home.as_deref()).map_err(|m| Failure { code: EXIT_ERROR, message: m.0 })?;
    let root = paths::root_of(&home);
    Ok(paths::all_registries(&root)
        .into_iter()
        .map(Location::File)
        .filter(|l| !selected.iter().any(|s| s.describe() == l.describe()))
        .collect())
}

/// What a typed lease id names.
enum Named {
    /// One lease of the selected registry: its whole id.
    Id(String),
    /// No lease, here or in any other registry.
    Nowhere,
}

/// Resolve a typed lease id (whole, or a unique prefix of 4+ characters) in `store`; if
/// it is not there, say which other registry has it, with the command to use there.
fn name_lease(store: &mut dyn LeaseStore, typed: &str, elsewhere: &[Location], action: &str) -> Result<Named, Failure> {
    use lease::lookup::{Lookup, lookup};
    let Ok(views) = store.read().leases else {
        // An unreadable registry: the action itself reports why.
        return Ok(Named::Id(typed.to_owned()));
    };
    match lookup(&views, typed) {
        Lookup::Found(id) => return Ok(Named::Id(id)),
        Lookup::Ambiguous(candidates) => return Err(ambiguous(typed, store.location(), &candidates)),
        Lookup::Missing => {}
    }
    if typed.chars().count() < lease::lookup::MIN_PREFIX && views.iter().any(|v| v.entry.lease_id().starts_with(typed))
    {
        return Err(usage(format!(
            "lease id {typed} is too short: a prefix needs at least {} characters",
            lease::lookup::MIN_PREFIX
        )));
    }
    let mut found = Vec::new();
    for location in elsewhere {
        let Ok(mut other) = lease::open(location, StoreOptions::default()) else { continue };
        let Ok(views) = other.read().leases else { continue };
        let id = match lookup(&views, typed) {
            Lookup::Found(id) => id,
            Lookup::Ambiguous(_) => typed.to_owned(),
            Lookup::Missing => continue,
        };
        let profile = location.registry().filter(|r| r.home != paths::root_of(&r.home)).map(|r| r.profile.as_str());
        let place = profile.map(|p| format!("profile {p}")).unwrap_or_else(|| "the root".into());
        found.push(format!("found in {place}: `{} {action} {id}`", hints::leasectl_in_profile(profile)));
    }
    if found.is_empty() {
        return Ok(Named::Nowhere);
    }
    let here = store.location();
    Err(Failure {
        code: EXIT_ERROR,
        message: format!("no lease {typed} in {} ({}); {}", here.name(), here.describe(), found.join("; ")),
    })
}

/// A prefix that names several leases: list them, exit 2 (the operator must type more).
/// Printed here, one line per candidate, each field escaped: the message is multi-line.
fn ambiguous(typed: &str, location: &Location, candidates: &[lease::LeaseView]) -> Failure {
    use crate::lease::human::escape;
    say_err!(
        "leasectl: lease id {} is ambiguous in {} ({}): {} leases start with it; type more of it:",
        escape(typed),
        escape(location.name()),
        escape(&location.describe()),
        candidates.len()
    );
    for v in candidates {
        say_err!(
            "  {}  session {}  pid {}  {}",
            escape(v.entry.lease_id()),
            escape(v.entry.session_id()),
            v.entry.pid(),
            v.liveness.name()
        );
    }
    Failure { code: EXIT_USAGE, message: String::new() }
}

fn release(
    store: &mut dyn LeaseStore,
    typed: &str,
    owner_pid: Option<u64>,
    as_json: bool,
    elsewhere: &[Location],
) -> Result<i32, Failure> {
    let lease_id = &match name_lease(store, typed, elsewhere, "release")? {
        Named::Id(id) => id,
        // A whole lease id gone everywhere: the owner's release is idempotent.
        Named::Nowhere if lease::ids::is_lease_id(typed) => typed.to_owned(),
        // A typo or a prefix that matches nothing was never a lease: not "already gone".
        Named::Nowhere => {
            return Err(Failure {
                code: EXIT_ERROR,
                message: format!(
                    "no lease matches {}: not a whole lease id (32 hex digits) nor the prefix of one in {}",
                    lease::human::escape(typed),
                    store.location().describe()
                ),
            });
        }
    };
    // --owner-pid is honoured only for a process the caller could signal (the same user,
    // or root): naming a stranger's pid must not take a live stranger's lease.
    let refused_pid = owner_pid.filter(|p| !lease::owner::could_signal(*p));
    let owner_pid = owner_pid.filter(|p| lease::owner::could_signal(*p));
    let views = store.read().leases.unwrap_or_default();
    if let Some(v) = lease::view::foreign_live_owner(&views, lease_id, owner_pid) {
        let pid = v.entry.pid();
        let act_for = if lease::owner::could_signal(pid) {
            format!("pass --owner-pid {pid} if you act for it; ")
        } else if refused_pid == Some(pid) {
            format!("--owner-pid {pid} is not honoured: that process belongs to another user; ")
        } else {
            String::new()
        };
        return Err(Failure {
            code: EXIT_ERROR,
            message: format!(
                "lease {lease_id} belongs to pid {pid}, which is alive and is neither this process nor one of its \
                 ancestors: release is the owner's ({act_for}to take a live owner's lease use \
                 `leasectl force-release {lease_id} --live`)"
            ),
        });
    }
    // A release on behalf of another live process (one --owner-pid let through) is on
    // record like a force-release: the same rule, without the pid the caller acts for.
    let on_behalf = owner_pid.and_then(|_| lease::view::foreign_live_owner(&views, lease_id, None)).cloned();
    let r = store.release(lease_id)?;
    if r.removed
        && let Some(view) = on_behalf
    {
        let removal = lease::Removal { removed: vec![view], live_owner: true, ..lease::Removal::default() };
        report_audit(lease::audit::removal(
            "release-for-owner",
            store.location(),
            &lease::audit::Actor::this_command(),
            &removal,
        ));
    }
    if as_json {
        print_json(&json!({
            "released": r.removed,
            "lease_id": lease_id,
            "already_gone": !r.removed,
            "pruned": r.pruned.iter().map(lease::Entry::to_value).collect::<Vec<_>>(),
        }));
    } else if r.removed {
        say!("released lease {lease_id}");
    } else {
        say!("lease {lease_id} was already gone; nothing to do");
    }
    Ok(EXIT_OK)
}

fn force_release(store: &mut dyn LeaseStore, a: &ForceReleaseArgs, elsewhere: &[Location]) -> Result<i32, Failure> {
    let target = match (&a.lease_id, &a.session) {
        (Some(typed), None) => match name_lease(store, typed, elsewhere, "force-release")? {
            Named::Id(id) => Target::Lease(id),
            Named::Nowhere => Target::Lease(typed.clone()),
        },
        (None, Some(s)) => Target::Session(s.clone()),
        _ => return Err(usage("give either LEASE_ID or --session S")),
    };
    let r = store.force_release(&target, a.live, a.dry_run)?;
    report_force_release(store.location(), &r, a.json);
    Ok(EXIT_OK)
}

/// Say what the audit could not record (the action stands either way).
fn report_audit(failures: Vec<String>) {
    for f in failures {
        say_err!("leasectl: warning: audit: {f}");
    }
}

fn report_force_release(location: &Location, r: &lease::Removal, as_json: bool) {
    report_audit(lease::audit::removal("force-release", location, &lease::audit::Actor::this_command(), r));
    if r.live_owner {
        say_err!("{}", output::live_owner_warning(location, r));
    }
    if as_json {
        print_json(&output::removal_json(location, r));
    } else {
        output::print_removal(location, r, "force-release");
    }
}

/// `force-release --all-profiles`: a lease id is looked for in every registry and acted
/// on where it is; a session's leases are released in every registry that has them.
fn force_release_everywhere(stores: &mut [Box<dyn LeaseStore>], a: &ForceReleaseArgs) -> Result<i32, Failure> {
    use lease::lookup::{Lookup, lookup};
    if let Some(typed) = &a.lease_id {
        let mut hits = Vec::new();
        for (i, store) in stores.iter_mut().enumerate() {
            let Ok(views) = store.read().leases else { continue };
            match lookup(&views, typed) {
                Lookup::Found(id) => hits.push((i, id)),
                Lookup::Ambiguous(c) => return Err(ambiguous(typed, store.location(), &c)),
                Lookup::Missing => {}
            }
        }
        return match hits.as_slice() {
            [] => Err(Failure {
                code: EXIT_ERROR,
                message: format!("no lease {typed} in any of {} registries (the root and every profile)", stores.len()),
            }),
            [(i, id)] => {
                let store = &mut stores[*i];
                let r = store.force_release(&Target::Lease(id.clone()), a.live, a.dry_run)?;
                report_force_release(store.location(), &r, a.json);
                Ok(EXIT_OK)
            }
            many => {
                let places: Vec<&str> = many.iter().map(|(i, _)| stores[*i].location().name()).collect();
                Err(usage(format!(
                    "lease id {typed} is in several registries ({}): name one with --profile",
                    places.join(", ")
                )))
            }
        };
    }
    let Some(session) = &a.session else { return Err(usage("give either LEASE_ID or --session S")) };
    let target = Target::Session(session.clone());
    // All or nothing: a live owner in one registry stops the release in every one.
    if !a.live && !a.dry_run {
        for store in stores.iter_mut() {
            match store.force_release(&target, false, true) {
                Ok(plan) if !plan.needs_live.is_empty() => {
                    store.force_release(&target, false, false)?;
                }
                Ok(_) | Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    let mut results = Vec::new();
    for store in stores.iter_mut() {
        match store.force_release(&target, a.live, a.dry_run) {
            Ok(r) => {
                if !a.json {
                    report_force_release(store.location(), &r, false);
                } else {
                    let actor = lease::audit::Actor::this_command();
                    report_audit(lease::audit::removal("force-release", store.location(), &actor, &r));
                    if r.live_owner {
                        say_err!("{}", output::live_owner_warning(store.location(), &r));
                    }
                }
                results.push(output::removal_json(store.location(), &r));
            }
            Err(Error::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if results.is_empty() {
        return Err(Failure {
            code: EXIT_ERROR,
            message: format!("no lease holds session {session} in any of {} registries", stores.len()),
        });
    }
    if a.json {
        print_json(&json!({ "registries": results }));
    }
    Ok(EXIT_OK)
}

fn prune(stores: &mut [Box<dyn LeaseStore>], opts: lease::PruneOptions, as_json: bool) -> Result<i32, Failure> {
    let mut results = Vec::new();
    let mut failed = None;
    for store in stores {
        let location = store.location().clone();
        match store.prune(opts) {
            Ok(r) => {
                report_audit(lease::audit::removal("prune", &location, &lease::audit::Actor::this_command(), &r));
                if !as_json {
                    output::print_removal(&location, &r, "prune");
                }
                results.push(output::removal_json(&location, &r));
            }
            Err(e) => {
                let f = Failure::from(e);
                if !as_json {
                    say_err!("leasectl: {} ({}): {}", location.name(), location.describe(), f.message);
                }
                results.push(json!({"profile": location.name(), "path": location.describe(), "error": f.message}));
                failed = Some(f.code);
            }
        }
    }
    if as_json {
        print_json(&json!({ "registries": results }));
    }
    Ok(failed.unwrap_or(EXIT_OK))
}

fn doctor(stores: &mut [Box<dyn LeaseStore>], as_json: bool) -> Result<i32, Failure> {
    let reports = stores.iter_mut().map(|s| s.doctor()).collect::<Result<Vec<lease::DoctorReport>, Error>>()?;
    let bad = reports.iter().any(lease::DoctorReport::has_problems);
    let summary = output::DoctorSummary::of(&reports);
    if as_json {
        print_json(&json!({
            "ok": !bad,
            "registries": reports.iter().map(output::doctor_json).collect::<Vec<_>>(),
            "summary": summary.json(),
        }));
    } else {
        for (i, d) in reports.iter().enumerate() {
            if i > 0 {
                say!();
            }
            say_raw!("{}", output::doctor_text(d));
        }
        say!("\n{}", summary.line());
    }
    Ok(if bad { EXIT_ERROR } else { EXIT_OK })
}

fn repair(stores: &mut [Box<dyn LeaseStore>], yes: bool, force: bool, as_json: bool) -> Result<i32, Failure> {
    use lease::repair::RepairOptions;
    use std::io::{BufRead, IsTerminal, Write};
    let mut results = Vec::new();
    for store in stores {
        let (name, place) = (store.location().name().to_owned(), store.location().describe());
        let plan = store.repair(RepairOptions { dry_run: true, force })?;
        if !plan.needed {
            if !as_json {
                say!("{name} ({place}): valid, nothing to repair");
            }
            results.push(json!({"profile": name, "path": place, "repaired": false}));
            continue;
        }
        if !as_json {
            if plan.invalid {
                say_raw!("{}", output::repair_text(store.location(), &plan.plan));
            } else {
                say!("{name} ({place}): valid");
            }
            for t in &plan.temp_files {
                say!("  remove a crashed writer's temp file: {}", lease::human::escape(&t.display().to_string()));
            }
        }
        let risks = plan.plan.live_risks();
        if !risks.is_empty() && !force {
            return Err(Failure {
                code: EXIT_ERROR,
                message: format!(
                    "not repairing {place}: it would lose leases whose owners may be alive ({}). A live owner \
                     keeps writing its session; losing its lease lets a second writer in. Pass --force to repair \
                     anyway.",
                    lease::human::escape(&risks.join("; "))
                ),
            });
        }
        if !yes {
            if !std::io::stdin().is_terminal() {
                return Err(Failure {
                    code: EXIT_ERROR,
                    message: "not repairing without confirmation: pass --yes".into(),
                });
            }
            say_raw!("Repair {place}? [y/N] ");
            let _ = std::io::stdout().flush();
            let mut answer = String::new();
            let _ = std::io::stdin().lock().read_line(&mut answer);
            if !matches!(answer.trim(), "y" | "Y" | "yes") {
                say!("not repaired");
                results.push(json!({"profile": name, "path": place, "repaired": false}));
                continue;
            }
        }
        let done = store.repair(RepairOptions { dry_run: false, force })?;
        report_audit(lease::audit::repair(
            store.location(),
            &lease::audit::Actor::this_command(),
            &done,
            !done.plan.live_risks().is_empty(),
        ));
        let backup = done.backup.as_ref().map(|b| b.display().to_string());
        if !as_json {
            if done.invalid {
                say!(
                    "repaired: kept {} lease(s); old bytes saved as {}",
                    done.plan.kept.len(),
                    backup.clone().unwrap_or_default()
                );
            }
            if !done.temp_files.is_empty() {
                say!("removed {} leftover temp file(s)", done.temp_files.len());
            }
        }
        let mut result = json!({"profile": name, "path": place, "repaired": done.needed});
        if let (Some(map), Value::Object(details)) = (result.as_object_mut(), done.to_json()) {
            map.extend(details);
        }
        // Whole entries here (the audit keeps their ids).
        result["kept"] = done.plan.kept.iter().map(lease::Entry::to_value).collect::<Vec<_>>().into();
        results.push(result);
    }
    if as_json {
        print_json(&json!({ "registries": results }));
    }
    Ok(EXIT_OK)
}

fn stop_signals() -> Result<crate::supervise::StopSignals, Failure> {
    crate::supervise::StopSignals::install()
        .map_err(|e| Failure { code: EXIT_ERROR, message: format!("cannot install signal handlers: {e}") })
}

/// Start renewing a fresh grant (etcd); if that cannot start, give the lease back at once.
fn renew(
    store: &mut dyn LeaseStore,
    grant: &lease::Grant,
    on_lost: lease::backend::OnLost,
) -> Result<Option<Box<dyn lease::backend::Renewal>>, Failure> {
    match store.keep_alive(grant, on_lost) {
        Ok(r) => Ok(r),
        Err(e) => {
            let _ = store.release_grant(grant);
            Err(Failure {
                code: Reason::SessionCoordinationUnavailable.exit_code(),
                message: format!("{e}; released it"),
            })
        }
    }
}

fn lost_message(session: &str, why: &str) -> String {
    format!("lost the lease on session {session}: {why}. Stop writing to this session now.")
}

fn hold(store: &mut dyn LeaseStore, opts: &AcquireOpts, timeout: Duration) -> Result<i32, Failure> {
    let req = request(store, opts, u64::from(std::process::id()), timeout)?;
    // Catch SIGINT/SIGTERM/SIGHUP before the lease exists, so no signal can leave it behind.
    let mut signals = stop_signals()?;
    let mut stopped = || signals.pending();
    let mut waiting = Waiting::of(opts.wait, &mut stopped)?;
    let grant = match acquire_reported(store, &req, opts.json, true, &mut waiting) {
        Ok(g) => g,
        Err(code) => return Ok(code),
    };
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let lost: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let (slot, wake) = (Arc::clone(&lost), signals.waker());
    let renewal = renew(
        store,
        &grant,
        Box::new(move |why| {
            if let Ok(mut s) = slot.lock() {
                *s = Some(why);
            }
            wake();
        }),
    )?;
    let signal = signals.wait();
    if let Some(r) = renewal {
        r.stop();
    }
    let why = lost.lock().ok().and_then(|s| s.clone());
    if let Some(why) = why {
        // No release: the lease is gone, or etcd does not answer (a release would only
        // delay this exit past the TTL). Nobody renews it now, so it ends by itself.
        return Err(Failure { code: EXIT_LEASE_LOST, message: lost_message(&opts.session, &why) });
    }
    let released = store.release_grant(&grant)?;
    // Said on every stop (Ctrl-C included), on stderr: stdout keeps the one grant line.
    let on = signal.map(signal_name).unwrap_or_else(|| "stop".into());
    let what = if released.removed { "released" } else { "found already gone" };
    // The id its writer held last: a re-acquire by the same writer replaced the grant's.
    let id = released.lease_id.as_deref().unwrap_or(&grant.lease_id);
    say_err!("leasectl: hold: {on}: {what} lease {id} of session {}", crate::lease::human::escape(&opts.session));
    Ok(EXIT_OK)
}

/// SIGINT, SIGTERM, SIGHUP by name; another number as it is.
fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        n => format!("signal {n}"),
    }
}

fn run_cmd(store: &mut dyn LeaseStore, a: &args::RunArgs, relay: u32, timeout: Duration) -> Result<i32, Failure> {
    let (opts, quiet, cmd, conflict_exit_code) = (&a.opts, a.quiet, &a.cmd, a.conflict_exit_code);
    let mut req = request(store, opts, u64::from(std::process::id()), timeout)?;
    // How to find the work should this keeper die (even by SIGKILL, when setsid'd
    // processes outlive it): every process of it carries LEASECTL_LEASE_ID.
    req.metadata.insert(lease::liveness::WORK_KEY.into(), json!({"env": lease::liveness::WORK_ENV}));
    let signals = stop_signals()?;
    // Processes CMD leaves behind become this keeper's children: the lease waits for them.
    keeper::become_subreaper()
        .map_err(|e| Failure { code: EXIT_ERROR, message: format!("cannot keep CMD's processes: {e}") })?;
    let banner = if quiet { Banner::Quiet } else { Banner::Stderr };
    let mut signals = signals;
    let mut stopped = || signals.pending();
    let mut waiting = Waiting::of(opts.wait, &mut stopped)?;
    let grant = match acquire_reported_to(store, &req, opts.json, true, banner, &mut waiting) {
        Ok(g) => g,
        // flock -E: a conflict can have an exit code of its own.
        Err(code) if [Reason::SessionNotOwned, Reason::MaxConcurrentSessions].iter().any(|r| r.exit_code() == code) => {
            return Ok(conflict_exit_code.unwrap_or(code));
        }
        Err(code) => return Ok(code),
    };
    let token = grant.fencing_token().map(|t| t.to_string());
    let mut env = vec![("LEASECTL_LEASE_ID", grant.lease_id.as_str()), ("LEASECTL_SESSION_ID", opts.session.as_str())];
    if let Some(t) = &token {
        env.push(("LEASECTL_FENCING_TOKEN", t.as_str()));
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let renewal = renew(
        store,
        &grant,
        Box::new(move |why| {
            let _ = tx.send(why);
        }),
    )?;
    // CMD gets a sixth of the TTL to stop after SIGTERM: the keep-alive reports a third before the end.
    // A file lease has no TTL: CMD gets a few seconds.
    let grace =
        grant.remote.as_ref().map(|r| (r.ttl / 6).max(Duration::from_millis(300))).unwrap_or(Duration::from_secs(3));
    let lost = renewal.is_some().then_some(rx);
    let outcome = signals.run_supervised(cmd, &env, lost, grace, Supervision::Keeper { relay });
    if let Some(r) = renewal {
        r.stop();
    }
    match outcome {
        Ok(end) => match end.lost {
            // No release, as in hold: the lease is gone or etcd does not answer.
            Some(why) => Err(Failure {
                code: EXIT_LEASE_LOST,
                message: format!(
                    "{} CMD was stopped (SIGTERM, then SIGKILL after {:.1}s); its status was {}.",
                    lost_message(&opts.session, &why),
                    grace.as_secs_f64(),
                    end.code
                ),
            }),
            None => {
                store.release_grant(&grant)?;
                Ok(end.code)
            }
        },
        Err(e) => {
            store.release_grant(&grant)?;
            let code = if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 };
            Err(Failure { code, message: format!("cannot run {:?}: {e}", cmd[0]) })
        }
    }
}
