//! The command-line interface: parse, call the core, print. Exit codes:
//! 0 ok, 1 error, 2 usage, 3/4/5 the refusal reasons.

#[macro_use]
mod messages;

mod acquire;
pub(crate) mod args;
mod completions;
mod console;
mod container;
mod doctor;
mod etcd_config;
mod events;
mod force_release;
mod hints;
mod hold;
mod hosts;
mod install;
pub(crate) mod json;
mod ls;
mod manual;
mod marks;
mod metrics;
pub(crate) mod output;
mod owner_moves;
mod prune;
mod recap;
mod release;
mod run;
mod stop;
mod watch;

use acquire::acquire;
use completions::print_completions;
use console::{console, demo};
use doctor::{doctor, repair};
use force_release::{force_release, force_release_everywhere};
use hints::Hints;
use hold::{hold, stop_signals};
use manual::print_man;
pub use messages::note_stdout;
use messages::stdout_lost;
use prune::prune;
use release::{other_registries, release};
use run::run_cmd;

use std::time::Duration;

use serde_json::Value;

use args::{AcquireOpts, Backend};
pub use args::{Cli, Command, GlobalOptions};

use crate::lease::{
    self, Error, EtcdLocation, LeaseStore, Location, Reason, StoreOptions, address::location::lease_ttl, home::paths,
};
use crate::supervise::keeper::{self, Side};

pub const EXIT_OK: i32 = 0;
pub const EXIT_ERROR: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
/// `hold` or `run` lost its lease while holding it (force-released, removed, not renewed).
pub const EXIT_LEASE_LOST: i32 = 6;

/// Parse this process's command line. A usage error is printed here, with the prefix
/// every other error has (`leasectl:`, not clap's `error:`), and gives its exit code;
/// so do --help and --version (exit 0).
pub fn parse() -> Result<Cli, i32> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    use clap::{CommandFactory as _, FromArgMatches as _};
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The tree of the commands the line names parses it as the whole tree would (every
    // command a word could be is in it); anything else it says (an error, a help) is said
    // by the whole tree, in its words. --version is the root's either way.
    // The trees and the matches are left for the process's exit to free (a tenth of a
    // one-shot command's instructions went to dropping them), and the matches are taken
    // from, not cloned to be taken from.
    let narrow = Cli::command_for(&args).map(|mut tree| {
        let matched = tree.try_get_matches_from_mut(&args);
        std::mem::forget(tree);
        matched
    });
    let matches = match narrow {
        Some(Ok(m)) => Ok(m),
        Some(Err(e)) if e.kind() == ErrorKind::DisplayVersion => Err(e),
        _ => Cli::command().try_get_matches_from(&args),
    };
    let parsed = matches.and_then(|mut m| {
        let from_environment = args::FromEnvironment::of(&m);
        let cli = Cli::from_arg_matches_mut(&mut m);
        std::mem::forget(m);
        cli.map(|cli| (cli, from_environment))
    });
    let e = match parsed {
        Ok((mut cli, from_environment)) => {
            cli.global.note_environment(from_environment);
            return Ok(cli);
        }
        Err(e) => e,
    };
    if !e.use_stderr() {
        let _ = e.print();
        return Err(e.exit_code());
    }
    let mut text = e.render().to_string();
    if let Some(rest) = text.strip_prefix("error:") {
        text = format!("leasectl:{rest}");
    }
    // A command operators reach for that lives under another name.
    let typed = match e.get(ContextKind::InvalidSubcommand) {
        Some(ContextValue::String(s)) if e.kind() == ErrorKind::InvalidSubcommand => s.as_str(),
        _ => "",
    };
    let unknown = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) if e.kind() == ErrorKind::UnknownArgument => s.as_str(),
        _ => "",
    };
    if !crate::lease::HAS_ETCD
        && ["--backend", "--endpoints", "--prefix", "--ttl"].iter().any(|o| unknown.starts_with(o))
    {
        text = text.replacen(
            '\n',
            "\n\n  tip: this leasectl was built without the etcd backend (cargo install --features etcd)\n",
            1,
        );
    }
    if let Some(instead) = renamed_command(typed) {
        text = text.replacen('\n', &format!("\n\n  tip: {instead}\n"), 1);
    }
    let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
    Err(e.exit_code())
}

/// Where a command that does not exist is found (as a hint that runs as printed).
fn renamed_command(typed: &str) -> Option<&'static str> {
    match typed {
        "repair" => Some("a registry is repaired by `leasectl doctor --repair`"),
        "list" => Some("leases are listed by `leasectl ls`"),
        "rm" | "remove" | "kill" => {
            Some("a lease is removed by force-release with its id; dead owners' leases by `leasectl prune`")
        }
        "watch" => Some("changes are followed by `leasectl ls -w` or `leasectl events -f`"),
        _ => None,
    }
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
    let hints = Hints::of(&cli.global);
    if cli.command.as_ref().is_some_and(reads_once) {
        lease::file::set_remembering(false);
    }
    if cli.command.as_ref().is_some_and(ends_once_done) {
        lease::home::safe_file::keep_the_home_open();
        lease::file::leave_writes_to_exit();
    }
    let code = match dispatch(cli, &hints) {
        Ok(code) => code,
        Err(Failure { code, message }) => {
            // Messages quote ids from files: shown, never obeyed by the terminal. An empty
            // message was printed already (a list, each field escaped). A hint in it (the
            // core's errors have some) gets this command line's registry options.
            if !message.is_empty() {
                say_err!("leasectl: {}", crate::lease::words::human::escape(&hints.apply(&message)));
            }
            code
        }
    };
    // A host that answered with another leasectl of the same protocol: named, with the
    // command that puts this build there (the console draws on the terminal: not there).
    if !console {
        for skew in lease::version_skews() {
            say_err!("leasectl: note: {skew}");
        }
    }
    // Output nobody could read (a full disk, a closed pipe) is not a success.
    match stdout_lost().filter(|_| !console) {
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

/// `store` with every change it makes on record, as this command line; what the record
/// could not keep is a warning (the change stands either way).
fn audited(store: Box<dyn LeaseStore>) -> Box<dyn LeaseStore> {
    let warn = Box::new(|f: String| say_err!("leasectl: warning: audit: {f}"));
    let auditor = lease::audited::Auditor::new(lease::home::audit::Actor::this_command(), warn);
    lease::audited::Audited::wrap(store, auditor)
}

/// An error (exit 1) that says `message`.
fn fail(message: impl Into<String>) -> Failure {
    Failure { code: EXIT_ERROR, message: message.into() }
}

fn usage(message: impl Into<String>) -> Failure {
    Failure { code: EXIT_USAGE, message: message.into() }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let code = match e {
            // The registry cannot be coordinated on: the same code as the fence's refusal.
            Error::Invalid(_)
            | Error::LockTimeout { .. }
            | Error::LivenessUnknown { .. }
            | Error::Unavailable(_)
            | Error::Unreachable { .. }
            | Error::Connecting { .. } => Reason::SessionCoordinationUnavailable.exit_code(),
            _ => EXIT_ERROR,
        };
        Failure { code, message: e.to_string() }
    }
}

/// A command that ends once it has done its work, within its lock timeout: its home is
/// opened (and, for root, checked for planted links) once, and kept while it runs. Not
/// one that follows, waits or holds: a home made again meanwhile is another directory.
fn ends_once_done(command: &Command) -> bool {
    match command {
        Command::Ls(a) => !a.watch,
        Command::Events(a) => !a.follow,
        Command::Acquire(a) => a.opts.wait.is_none(),
        Command::Release(_)
        | Command::ForceRelease(_)
        | Command::Stop(_)
        | Command::Prune(_)
        | Command::Doctor(_)
        | Command::Metrics => true,
        _ => false,
    }
}

/// A command that reads each registry once keeps no copy of what it read or wrote: the
/// copy cost a clone of the whole registry at each read and write, under the lock.
/// (`force-release`, `prune` and `release` of a prefix read it twice, first to find what
/// to remove, then under the lock, where the copy spares the second parse.)
fn reads_once(command: &Command) -> bool {
    match command {
        Command::Ls(a) => !a.watch,
        Command::Acquire(_) | Command::Doctor(_) | Command::Metrics => true,
        // A whole id is released from one read (a prefix is looked up in a read before).
        Command::Release(a) => lease::address::ids::is_lease_id(&a.lease_id),
        _ => false,
    }
}

/// The commands that need no registry: generated from the argument definitions, or this
/// build copied to other hosts.
fn without_registry(command: &Command, global: &mut GlobalOptions) -> Option<Result<i32, Failure>> {
    Some(match command {
        Command::Completions(a) => Ok(print_completions(a.shell)),
        Command::Complete(a) => Ok(completions::complete(a)),
        Command::Man => print_man(),
        Command::Install => reached(global).and_then(|hosts| install::install_on(&hosts)),
        _ => return None,
    })
}

fn dispatch(cli: Cli, hints: &Hints) -> Result<i32, Failure> {
    let Cli { mut global, command } = cli;
    let timeout = lock_timeout(global.lock_timeout)?;
    let implicit = command.is_none();
    let command = command.unwrap_or_else(implicit_command);
    if let Some(done) = without_registry(&command, &mut global) {
        return done;
    }
    let options = store_options(&global, &command, timeout)?;
    if let Command::Serve(_) = &command {
        return Ok(crate::serve::serve_stdio(global.home.as_deref(), options));
    }
    let hosts = reached(&mut global)?;
    let on_hosts = !hosts.is_empty();
    let Selection { locations, root } = match on_hosts {
        true => hosts::select_locations(&global, &command, implicit, hosts)?,
        false => select_locations(&global, &command, implicit)?,
    };
    let single = || -> Result<Box<dyn LeaseStore>, Failure> {
        if global.all_profiles {
            return Err(usage(format!("--all-profiles works with {} only", args::ALL_PROFILES_COMMANDS)));
        }
        let location = locations.first().ok_or_else(|| usage("no registry selected"))?;
        Ok(audited(lease::open(location, options)?))
    };
    let open_one = |l: &Location| -> Result<Box<dyn LeaseStore>, Failure> { Ok(audited(lease::open(l, options)?)) };
    let all = || -> Result<Vec<Box<dyn LeaseStore>>, Failure> {
        locations.iter().map(|l| lease::open(l, options).map(audited).map_err(Failure::from)).collect()
    };
    // --all-profiles on files: a profile created while ls -w or events -f runs is followed too.
    // Over --host: the registries each host reports, as it reports them.
    let discover = || match locations.first() {
        _ if !global.all_profiles => watch::Discover::Nothing,
        _ if on_hosts => watch::Discover::Hosts(options),
        Some(first) => match first.registry() {
            Some(r) => watch::Discover::Profiles(r.home.clone(), options),
            None => watch::Discover::Nothing,
        },
        None => watch::Discover::Nothing,
    };
    container::say_notice(&command, on_hosts, &locations, hints);
    match command {
        Command::Ls(a) => ls::ls(all()?, &a, options.idle_threshold, discover(), hints),
        Command::Acquire(a) => acquire(&mut *single()?, &a.opts, a.owner_pid, timeout, hints),
        Command::Release(a) => {
            let elsewhere = other_registries(root.as_deref(), &locations);
            release(&mut *single()?, &a.lease_id, a.owner_pid, a.json, &elsewhere, hints)
        }
        // Over --host an id or session is looked for on every host.
        Command::ForceRelease(a) if global.all_profiles || on_hosts => force_release_everywhere(&mut all()?, &a),
        Command::ForceRelease(a) => {
            let elsewhere = other_registries(root.as_deref(), &locations);
            force_release(&mut *single()?, &a, &elsewhere, hints)
        }
        Command::Stop(a) if global.all_profiles || on_hosts => stop::stop(all()?, &[], &open_one, &a, hints),
        Command::Stop(a) => {
            let elsewhere = other_registries(root.as_deref(), &locations);
            stop::stop(vec![single()?], &elsewhere, &open_one, &a, hints)
        }
        Command::Prune(a) => prune(&mut all()?, a.options(), a.json),
        Command::Doctor(a) if a.repair => repair(&mut all()?, a.yes, a.force, a.json),
        Command::Doctor(a) => doctor(&mut all()?, a.json, hints),
        // The process a script started relays; the work runs under the keeper it forks.
        Command::Run(a) => match fork_keeper()? {
            Side::Keeper { relay } => run_cmd(&mut *single()?, &a, relay, timeout, hints),
            Side::Relay { keeper } => relay_to(keeper),
        },
        Command::Hold(a) => hold(&mut *single()?, &a, timeout, hints),
        Command::Tui if console::dumb_terminal() => {
            say_err!("leasectl: this terminal (TERM=dumb) cannot show the console; here is what it would list");
            ls::ls(all()?, &args::LsArgs::default(), options.idle_threshold, watch::Discover::Nothing, hints)
        }
        Command::Tui => {
            // The console follows profiles created while it runs, unless one was chosen.
            let discover_root = root.filter(|_| global.profile.is_none());
            console(discover_root, on_hosts && global.profile.is_none(), locations, timeout, options.idle_threshold)
        }
        Command::Demo(a) => demo(global.home.as_deref(), a.tour),
        Command::Events(a) => events::events(&mut all()?, &a, options.idle_threshold, discover(), hints),
        Command::Metrics => metrics::print(&mut all()?, options.idle_threshold),
        Command::Completions(_) | Command::Complete(_) | Command::Man | Command::Serve(_) => Ok(EXIT_OK),
        Command::Install => Ok(EXIT_OK),
    }
}

/// What this command line reaches besides its home: the etcd settings (the file fills
/// what the command line and etcdctl's environment left unset) and the hosts.
fn reached(global: &mut GlobalOptions) -> Result<Vec<crate::lease::address::host_spec::HostSpec>, Failure> {
    etcd_config::apply(global)?;
    hosts::selected(global)
}

/// No command: the console on a terminal, the listing otherwise (pipes, scripts);
/// either way over the console's scope, the root and every profile.
fn implicit_command() -> Command {
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        Command::Tui
    } else {
        Command::Ls(args::LsArgs::default())
    }
}

/// A holder (`hold`, `run`) renews its etcd lease every TTL/3: below
/// [`lease::address::location::ELECTION_SAFE_TTL_SECS`] one leader election can outlast that. Said
/// after the grant line, which scripts read first.
fn warn_if_ttl_too_short(ttl: Option<u64>) {
    if let Some(secs) = ttl.filter(|s| *s < lease::address::location::ELECTION_SAFE_TTL_SECS) {
        say_err!(
            "leasectl: warning: --ttl {secs} is shorter than an etcd leader election can keep renewals away \
             (over a second at etcd's default 1 s election timeout, more under load): if a member dies, this holder may lose its \
             lease; {} seconds or more rides one out",
            lease::address::location::ELECTION_SAFE_TTL_SECS
        );
    }
}

/// How to open the stores: the lock bound, the TTL an etcd grant asks for, the idle threshold.
fn store_options(global: &GlobalOptions, command: &Command, timeout: Duration) -> Result<StoreOptions, Failure> {
    let ttl = match command {
        Command::Acquire(a) => a.opts.ttl,
        Command::Hold(o) => o.ttl,
        Command::Run(a) => a.opts.ttl,
        _ => None,
    };
    Ok(StoreOptions {
        lock_timeout: timeout,
        ttl: lease_ttl(ttl).map_err(usage)?,
        idle_threshold: global.idle_threshold,
    })
}

/// `run` as the process a script started: fork the keeper that holds the lease and runs CMD.
fn fork_keeper() -> Result<Side, Failure> {
    keeper::split().map_err(|e| fail(format!("cannot start the lease keeper: {e}")))
}

/// `run`'s relay: stop signals go on to the keeper; its status is the exit.
fn relay_to(keeper: rustix::process::Pid) -> Result<i32, Failure> {
    keeper::relay(keeper, stop_signals()?).map_err(|e| fail(format!("cannot follow the lease keeper: {e}")))
}

/// What a command acts on.
struct Selection {
    locations: Vec<Location>,
    /// The root of the home the registry files are in (None on etcd): resolved once here.
    root: Option<std::path::PathBuf>,
}

/// The locations a command acts on: registry files (the home, a profile, or the root and
/// every profile), or one etcd prefix with `--backend etcd`.
fn select_locations(global: &GlobalOptions, command: &Command, implicit: bool) -> Result<Selection, Failure> {
    if global.backend == Backend::Etcd {
        if global.all_profiles || global.profile.is_some() || global.home.is_some() {
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
        let endpoints = global.endpoints.as_deref().ok_or_else(|| {
            usage("--backend etcd needs --endpoints URL[,URL] (the etcd client URLs, e.g. http://127.0.0.1:2379)")
        })?;
        let tls = lease::use_etcd_access(&global.etcd_access.given()).map_err(usage)?;
        let at = EtcdLocation::parse_with(endpoints, global.prefix.as_deref(), tls).map_err(usage)?;
        return Ok(Selection { locations: vec![Location::Etcd(Box::new(at))], root: None });
    }
    if global.endpoints.is_some() || global.prefix.is_some() {
        return Err(usage("--endpoints and --prefix work with --backend etcd only"));
    }
    if let Command::Acquire(args::AcquireArgs { opts: AcquireOpts { ttl: Some(_), .. }, .. })
    | Command::Hold(AcquireOpts { ttl: Some(_), .. })
    | Command::Run(args::RunArgs { opts: AcquireOpts { ttl: Some(_), .. }, .. }) = command
    {
        return Err(usage("--ttl works with --backend etcd only: a registry file lease lasts as long as its owner"));
    }
    let home = paths::resolve_home(global.home.as_deref()).map_err(|m| fail(m.0))?;
    let root = paths::root_of(&home);
    let console = implicit || matches!(command, Command::Tui);
    // The fence creates a missing home (and any parents) as Hermes' acquire does: a fresh
    // HERMES_HOME is a new container or service account, not a typo. Every other command
    // refuses a home that is not there, so a mistyped one never comes into being; a
    // profile is made by Hermes' own command, so a missing one is refused by all (the
    // demo makes its own sandbox).
    let acquires = matches!(command, Command::Acquire(_) | Command::Hold(_) | Command::Run(_));
    let fence = matches!(command, Command::Demo(_));
    if !fence && !acquires {
        // Not there is not the same as not reachable: a directory above the home that this
        // user cannot search hides it (it read "does not exist").
        if let Some(problem) = paths::home_problem(&home) {
            let missing = problem.ends_with("does not exist");
            let how =
                if missing { " (check --home or HERMES_HOME; only acquire, hold and run create one)" } else { "" };
            return Err(fail(format!("{problem}{how}")));
        }
    }
    // The console finds the profiles itself, after its first screen: listing 100,000 of
    // them here held that screen up for 0.3 s.
    let registries = if matches!(command, Command::Tui) && global.profile.is_none() && !console::dumb_terminal() {
        vec![paths::Registry::new("root", &root)]
    } else if global.all_profiles || (console && global.profile.is_none()) {
        paths::all_registries(&root)
    } else if let Some(name) = &global.profile {
        let mut reg = paths::profile_registry(&root, name).map_err(usage)?;
        if reg.home.is_dir() {
            // Named as listed: a deleted profile, or a directory with no identity, is marked.
            let standing = crate::lease::home::profiles::ProfilesDir::open(&root).standing(name);
            reg = paths::Registry::with_standing(name.as_str(), reg.home.clone(), standing);
        } else if !fence {
            // As listed: a directory that is no profile but holds leases is named, marked.
            let known: Vec<String> =
                paths::all_registries(&root).into_iter().skip(1).map(|r| Location::File(r).label()).collect();
            let listed = if known.is_empty() { "none yet".to_owned() } else { known.join(", ") };
            return Err(fail(format!("no profile '{name}' in {}; profiles: {listed}", root.display())));
        }
        vec![reg]
    } else {
        vec![paths::registry_for_home(&home)]
    };
    Ok(Selection { locations: registries.into_iter().map(Location::File).collect(), root: Some(root) })
}

/// --lock-timeout as a duration (its parser holds it to 0..=86400 seconds).
fn lock_timeout(secs: f64) -> Result<Duration, Failure> {
    Duration::try_from_secs_f64(secs).map_err(|_| usage("--lock-timeout must be between 0 and 86400 seconds"))
}

/// JSON is exact: written as is, never hinted (an `advice` field is hinted where it is made).
/// JSON written as it is serialized, pretty as [`print_json`] writes it: for outputs too
/// large to build as one tree first. Its structs list their fields in sorted order.
fn print_json_streamed(v: &impl serde::Serialize) {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let written = serde_json::to_writer_pretty(&mut out, v).map_err(std::io::Error::from);
    note_stdout(written.and_then(|()| writeln!(out)).and_then(|()| out.flush()));
}

fn print_json(v: &Value) {
    use std::io::Write as _;
    let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    note_stdout(writeln!(std::io::stdout(), "{text}"));
}
