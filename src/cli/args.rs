//! Command-line arguments (clap). The names here are the CLI contract.

use std::path::PathBuf;

use clap::{Args, Parser};

use crate::lease::words::unusable::Unusable;

/// The heading that keeps options every command takes apart from each command's own.
const GLOBAL: &str = "Global options";

/// The commands `--all-profiles` works with (its help and its error say the same).
pub(crate) const ALL_PROFILES_COMMANDS: &str = "ls, prune, doctor, force-release, stop, events and metrics";
const ALL_PROFILES_HELP: &str =
    "The root and every profile (ls, prune, doctor, force-release, stop, events, metrics; the console shows them all)";

/// A command's closing help: what holds on the registry file, then (in a build with
/// the etcd backend only) what differs on etcd, then examples.
macro_rules! etcd_aware_help {
    ($name:ident, $base:literal, $etcd:literal, $examples:literal, $etcd_examples:literal) => {
        #[cfg(feature = "etcd")]
        const $name: &str = concat!($base, "\n\n", $etcd, "\n\nExample:\n", $examples, "\n", $etcd_examples);
        #[cfg(not(feature = "etcd"))]
        const $name: &str = concat!($base, "\n\nExample:\n", $examples);
    };
}

etcd_aware_help!(
    ACQUIRE_HELP,
    "The owner is --owner-pid, else the calling (parent) process. Writer identity is (owner pid, live id): the \
     same writer re-acquiring replaces its own entry. --wait SECS keeps trying while the session is held or \
     every slot is taken.",
    "With --backend etcd the grant is an etcd lease of --ttl seconds that nobody renews once acquire exits: it \
     ends after the TTL unless the owner renews it (etcdctl lease keep-alive ID, or its own etcd client; the JSON \
     names etcd_lease_id). To hold a session for as long as a process runs, use hold or run, which renew it.",
    "  leasectl acquire S1 --surface cli --live-id tab-1 --owner-pid $$ --max 4",
    "  leasectl --backend etcd --endpoints http://10.0.0.5:2379 acquire S1 --ttl 60 --json"
);

etcd_aware_help!(
    RUN_HELP,
    "The lease is owned by leasectl's keeper, a child process that is CMD's parent and a child subreaper: it \
     releases only once every process CMD started has ended, even if this leasectl is killed (it then stops \
     them: SIGTERM, then SIGKILL after 3s). SIGINT, SIGTERM and SIGHUP reach all of CMD's processes (a Ctrl-C \
     reaches CMD once); leasectl exits with CMD's status. CMD sees LEASECTL_LEASE_ID and LEASECTL_SESSION_ID.\n\n\
     A lease removed while CMD runs (force-release, an edit) stops CMD's processes the same way and leasectl \
     exits 6. As a drop-in for flock(1): the banner is on stderr (-q: none), --wait SECS waits for the session, \
     --conflict-exit-code N is flock -E.",
    "With --backend etcd the lease is renewed every TTL/3; when it cannot be renewed within 2/3 of the TTL (etcd \
     unreachable, or the lease revoked), CMD's processes are stopped (SIGKILL after TTL/6) and leasectl exits 6, \
     before the TTL runs out. CMD also sees LEASECTL_FENCING_TOKEN.",
    "  leasectl run S1 --surface cli -- python agent.py\n  leasectl run S1 --wait 60 -q -- ./nightly.sh",
    "  leasectl --backend etcd --endpoints http://10.0.0.5:2379 run S1 -- python gateway.py"
);

etcd_aware_help!(
    HOLD_HELP,
    "A lease removed while held (force-release, an edit) is noticed: hold says so on stderr and exits 6.",
    "With --backend etcd the lease is renewed every TTL/3; when it cannot be renewed (etcd unreachable for 2/3 of \
     the TTL, or the lease revoked), hold exits 6 the same way, before the TTL runs out.",
    "  leasectl hold S1 --surface gateway --live-id tab-1",
    "  leasectl --backend etcd --endpoints http://10.0.0.5:2379 hold S1 --max 8"
);

#[derive(Debug, Parser)]
#[command(
    name = "leasectl",
    version,
    about = "The operator's tool for Hermes Agent's active-session registry",
    long_about = "The operator's tool for Hermes Agent's active-session registry \
                  ($HERMES_HOME/runtime/active_sessions.json): list who holds which session, \
                  acquire and hold leases through the same fence Hermes uses, and clean up \
                  dead or leaked owners safely.",
    after_help = "Exit codes: 0 ok/granted, 1 error, 2 usage, 3 SESSION_NOT_OWNED, \
                  4 MAX_CONCURRENT_SESSIONS, 5 SESSION_COORDINATION_UNAVAILABLE, 6 lease lost while held \
                  (hold, run).\n\n\
                  Example:\n  leasectl --home /tmp/h acquire S1 --surface cli --live-id tab-1 --json"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalOptions,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The options every command takes: which registries, hosts and backend it reaches, how
/// long it waits for a lock, when an idle lease is a leak suspect. What picks the stores
/// and words the hints takes these, never the command line as a whole.
#[derive(Debug, clap::Args)]
pub struct GlobalOptions {
    /// Hermes home (default: $HERMES_HOME, trimmed, else ~/.hermes). acquire, hold and run
    /// create a missing one with its parents, as Hermes does; every other command refuses it
    #[arg(long, global = true, value_name = "DIR", env = "HERMES_HOME", hide_env_values = true, value_parser = any_path, help_heading = GLOBAL)]
    pub home: Option<PathBuf>,
    /// The home came from HERMES_HOME, not --home: hints leave it to the environment.
    #[arg(skip)]
    pub home_from_env: bool,
    /// Use the profile <root>/profiles/NAME instead of the home itself
    #[arg(long, global = true, value_name = "NAME", conflicts_with = "all_profiles", help_heading = GLOBAL)]
    pub profile: Option<String>,
    #[arg(long, global = true, help_heading = GLOBAL, help = ALL_PROFILES_HELP)]
    pub all_profiles: bool,
    /// Give up waiting for the registry lock after SECS and name its holder
    #[arg(long, global = true, value_name = "SECS", default_value_t = 10.0, value_parser = parse_lock_timeout, help_heading = GLOBAL)]
    pub lock_timeout: f64,
    /// A live owner's session idle this long (state.db) makes its lease a leak suspect
    /// (LEAK?): 2h, 90m, 3600... (default: config.yaml's leasectl.idle_threshold, else 2h)
    #[arg(long, global = true, value_name = "DURATION", value_parser = crate::lease::words::human::parse_idle, help_heading = GLOBAL)]
    pub idle_threshold: Option<std::time::Duration>,
    /// A Hermes home on another host, over your own ssh (repeatable; default:
    /// $LEASECTL_HOSTS): ssh://[user@]host[:port][/path], local[:/path], name=SPEC, or a
    /// name, group or pattern (gw*) from the hosts file
    #[arg(long = "host", global = true, value_name = "SPEC", env = "LEASECTL_HOSTS", hide_env_values = true, help_heading = GLOBAL)]
    pub hosts: Vec<String>,
    /// The hosts came from LEASECTL_HOSTS (one comma-separated value), not --host.
    #[arg(skip)]
    pub hosts_from_env: bool,
    /// Every host in the hosts file ($XDG_CONFIG_HOME/leasectl/hosts)
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub all_hosts: bool,
    /// Over --host, give up reaching a host and logging in after SECS (default: your ssh
    /// config's ConnectTimeout, else 10)
    #[arg(long, global = true, value_name = "SECS", env = "LEASECTL_CONNECT_TIMEOUT", value_parser = parse_connect_timeout, help_heading = GLOBAL)]
    pub connect_timeout: Option<u64>,
    /// Where leases live: the Hermes registry file (one host) or etcd (across hosts)
    #[cfg(feature = "etcd")]
    #[arg(long, global = true, value_enum, default_value_t = Backend::File, help_heading = GLOBAL)]
    pub backend: Backend,
    /// With --backend etcd: the etcd client URLs, comma-separated (http://host:port, or
    /// host:port)
    #[cfg(feature = "etcd")]
    #[arg(long, global = true, value_name = "URL[,URL]", env = "ETCDCTL_ENDPOINTS", hide_env_values = true, help_heading = GLOBAL)]
    pub endpoints: Option<String>,
    /// With --backend etcd: the key prefix (default /leasectl/)
    #[cfg(feature = "etcd")]
    #[arg(long, global = true, value_name = "P", help_heading = GLOBAL)]
    pub prefix: Option<String>,
    // A build without the etcd backend has none of its options: not in help, the man
    // page or completions, and typed they are unknown (the error says why).
    #[cfg(not(feature = "etcd"))]
    #[arg(skip)]
    pub backend: Backend,
    #[cfg(not(feature = "etcd"))]
    #[arg(skip)]
    pub endpoints: Option<String>,
    #[cfg(not(feature = "etcd"))]
    #[arg(skip)]
    pub prefix: Option<String>,
    #[cfg(feature = "etcd")]
    #[command(flatten)]
    pub etcd_access: EtcdAccessArgs,
    #[cfg(not(feature = "etcd"))]
    #[arg(skip)]
    pub etcd_access: EtcdAccessArgs,
}

/// A secured etcd, named as etcdctl names it (and read from the same environment).
#[derive(Debug, Default, clap::Args)]
pub struct EtcdAccessArgs {
    /// With --backend etcd: the CA that signed etcd's certificate (TLS; https endpoints)
    #[arg(long, global = true, value_name = "FILE", env = "ETCDCTL_CACERT", help_heading = GLOBAL)]
    pub cacert: Option<PathBuf>,
    /// With --backend etcd: this client's certificate, when etcd asks for one
    #[arg(long, global = true, value_name = "FILE", env = "ETCDCTL_CERT", help_heading = GLOBAL)]
    pub cert: Option<PathBuf>,
    /// With --backend etcd: the key of --cert
    #[arg(long, global = true, value_name = "FILE", env = "ETCDCTL_KEY", help_heading = GLOBAL)]
    pub key: Option<PathBuf>,
    /// With --backend etcd: the etcd user; its password from $ETCDCTL_PASSWORD or
    /// --password-file (NAME:PASSWORD works too, but shows in the process list)
    #[arg(long, global = true, value_name = "NAME", env = "ETCDCTL_USER", help_heading = GLOBAL)]
    pub user: Option<String>,
    /// With --backend etcd: a file whose first line is the password of --user
    #[arg(long, global = true, value_name = "FILE", help_heading = GLOBAL)]
    pub password_file: Option<PathBuf>,
    /// With --backend etcd: how long a member may take to take a connection (default 1s)
    #[arg(long, global = true, value_name = "DURATION", env = "ETCDCTL_DIAL_TIMEOUT", value_parser = crate::lease::words::human::parse_duration, help_heading = GLOBAL)]
    pub dial_timeout: Option<std::time::Duration>,
    /// With --backend etcd: how long a request may take, every member tried (default 5s)
    #[arg(long, global = true, value_name = "DURATION", env = "ETCDCTL_COMMAND_TIMEOUT", value_parser = crate::lease::words::human::parse_duration, help_heading = GLOBAL)]
    pub command_timeout: Option<std::time::Duration>,
}

impl EtcdAccessArgs {
    /// As the core takes it.
    pub fn given(&self) -> crate::lease::EtcdAccessGiven {
        crate::lease::EtcdAccessGiven {
            cacert: self.cacert.clone(),
            cert: self.cert.clone(),
            key: self.key.clone(),
            user: self.user.clone(),
            password_file: self.password_file.clone(),
            dial_timeout: self.dial_timeout,
            command_timeout: self.command_timeout,
        }
    }
}

/// A path as given, empty included: an empty HERMES_HOME means unset (see
/// [`GlobalOptions::note_environment`]); an empty `--home` is refused where the home is resolved.
fn any_path(text: &str) -> Result<PathBuf, std::convert::Infallible> {
    Ok(PathBuf::from(text))
}

/// Which settings clap took from the environment, looked at before the matches are taken
/// apart (a value taken out has no source left).
#[derive(Debug, Clone, Copy)]
pub struct FromEnvironment {
    home: bool,
    hosts: bool,
    endpoints: bool,
}

impl FromEnvironment {
    pub fn of(matches: &clap::ArgMatches) -> FromEnvironment {
        use clap::parser::ValueSource;
        let from_env =
            |id: &str| matches.try_get_raw(id).is_ok() && matches.value_source(id) == Some(ValueSource::EnvVariable);
        FromEnvironment { home: from_env("home"), hosts: from_env("hosts"), endpoints: from_env("endpoints") }
    }
}

impl GlobalOptions {
    /// What clap took from the environment: HERMES_HOME as Hermes reads it (trimmed; empty
    /// means unset), LEASECTL_HOSTS as one comma-separated list; both marked, so hints
    /// leave them to the environment.
    pub fn note_environment(&mut self, from: FromEnvironment) {
        if from.home {
            let trimmed = self.home.as_ref().map(|h| h.to_string_lossy().trim().to_owned()).unwrap_or_default();
            self.home = (!trimmed.is_empty()).then(|| PathBuf::from(trimmed));
            self.home_from_env = true;
        }
        self.hosts_from_env = from.hosts;
        // etcdctl's own setting, for the etcd backend only: a file command ignores it.
        if from.endpoints && self.backend == Backend::File {
            self.endpoints = None;
        }
    }
}

/// Where leases live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Backend {
    /// `<home>/runtime/active_sessions.json` under flock: Hermes' registry, one host
    #[default]
    File,
    /// etcd v3: one key per session and per slot, liveness by an etcd lease TTL
    Etcd,
}

/// A command. What each one is called, says and takes is [`SUBCOMMANDS`].
#[derive(Debug)]
pub enum Command {
    Ls(LsArgs),
    Acquire(AcquireArgs),
    Release(ReleaseArgs),
    ForceRelease(ForceReleaseArgs),
    Stop(StopArgs),
    Prune(PruneArgs),
    Doctor(DoctorArgs),
    Run(RunArgs),
    Tui,
    Demo(DemoArgs),
    Hold(AcquireOpts),
    Events(EventsArgs),
    Metrics,
    Serve(ServeArgs),
    Install,
    Completions(CompletionsArgs),
    Complete(CompleteArgs),
    Man,
}

/// Every subcommand, in the order help lists them.
pub(crate) const SUBCOMMANDS: [Sub; 18] = [
    Sub {
        name: "ls",
        about: "List leases with owner liveness (read-only: takes no lock, never prunes)",
        after_help: "Example:\n  leasectl ls --all-profiles\n  leasectl --home /tmp/h ls --json",
        hide: false,
        args: <LsArgs as Args>::augment_args,
    },
    Sub {
        name: "acquire",
        about: "Acquire a lease for an owner process through the fence",
        after_help: ACQUIRE_HELP,
        hide: false,
        args: <AcquireArgs as Args>::augment_args,
    },
    Sub {
        name: "release",
        about: "Release a lease (the owner's release; a lease already gone is fine)",
        after_help: "Example:\n  leasectl release 0f3c9e2a5b7d4c1e8a6f2d9b0c4e7a13",
        hide: false,
        args: <ReleaseArgs as Args>::augment_args,
    },
    Sub {
        name: "force-release",
        about: "Remove a lease on the operator's word (a live owner's only with --live)",
        after_help: "Example:\n  leasectl force-release --session S1 --dry-run\n  \
                            leasectl force-release 0f3c9e2a5b7d4c1e8a6f2d9b0c4e7a13 --live",
        hide: false,
        args: <ForceReleaseArgs as Args>::augment_args,
    },
    Sub {
        name: "stop",
        about: "End a lease's owner process (SIGTERM, then SIGKILL), race-free, then remove what it leaves",
        after_help: STOP_HELP,
        hide: false,
        args: <StopArgs as Args>::augment_args,
    },
    Sub {
        name: "prune",
        about: "Remove dead and recycled owners' leases",
        after_help: "Example:\n  leasectl prune --dry-run\n  leasectl prune --all-profiles --json",
        hide: false,
        args: <PruneArgs as Args>::augment_args,
    },
    Sub {
        name: "doctor",
        about: "Check registries: validation, conflicts, temp files, the lock (non-zero exit on problems)",
        after_help: "--repair rewrites an invalid registry: every valid entry is kept, an entry cut short \
                            after its lease id, session id, pid and start time is restored, only the others \
                            (listed, with their owner's liveness) are dropped, and the exact old bytes are kept \
                            beside it as active_sessions.json.bak-YYYYMMDD-HHMMSS (mode 0600). A repair that \
                            would lose a lease whose owner may be alive (a live owner's invalid entry, or a file \
                            cut short, whose lost entries nobody can name) is refused unless --force.\n\n\
                            Example:\n  leasectl doctor --all-profiles\n  leasectl doctor --repair --yes",
        hide: false,
        args: <DoctorArgs as Args>::augment_args,
    },
    Sub {
        name: "run",
        about: "Hold a lease while CMD and every process it starts run; CMD does not run on refusal",
        after_help: RUN_HELP,
        hide: false,
        args: <RunArgs as Args>::augment_args,
    },
    Sub {
        name: "tui",
        about: "The live console: every registry, every owner, safe clean-up (default on a terminal)",
        after_help: "Default: the root and every profile, one tab each, plus an \"all\" tab; \
                            --profile NAME shows one. Press ? inside for the keys.\n\n\
                            Example:\n  leasectl tui --home ~/.hermes",
        hide: false,
        args: std::convert::identity,
    },
    Sub {
        name: "demo",
        about: "The console on a sandbox home, with a playground that shows every refusal reason",
        after_help: "The sandbox is a fresh temp directory, removed on exit with every owner process \
                            the demo started; --home DIR uses DIR instead and keeps it. The real registry \
                            ($HERMES_HOME, ~/.hermes) is never touched.\n\n\
                            It draws in any terminal of 70x20 or more (80x24 shows the whole tour; } pages a \
                            long result); a smaller one shows what it needs, and q quits. In the tour, t shows \
                            each step's scene, then its outcome, and at the end a summary of every reason with \
                            the command an operator uses for it.\n\n\
                            Example:\n  leasectl demo --tour",
        hide: false,
        args: <DemoArgs as Args>::augment_args,
    },
    Sub {
        name: "hold",
        about: "Acquire with leasectl as owner, print the lease, hold it until SIGINT/SIGTERM/SIGHUP",
        after_help: HOLD_HELP,
        hide: false,
        args: <AcquireOpts as Args>::augment_args,
    },
    Sub {
        name: "events",
        about: "What happened: recorded events (--since) and live ones (--follow)",
        after_help: "Events: acquired; released (by its owner, or on its behalf), force-released (by an \
                            operator), stopped (its owner ended by an operator's stop, with the signals sent and \
                            how long it took), pruned (by a prune, by the fence of an acquire, or its owner gone), removed \
                            (by a repair), each saying by whom where the audit file does; owner-died, \
                            owner-recycled, owner-alive, updated; cap-changed, registry-invalid, registry-valid, \
                            repaired; gap (versions of the file written and never read); following (the watch is \
                            on; never recorded). On etcd also expired, and etcd-unreachable / etcd-reachable; over \
                            --host, host-unreachable / host-reachable.\n\n\
                            `events --follow --record` is the recorder to run as a service: it appends every \
                            event to <home>/logs/leasectl-events.jsonl (rotated past 10 MiB, 3 kept), which \
                            --since reads; with --metrics-file it keeps an OpenMetrics file current.\n\n\
                            Example:\n  leasectl events --since 2h\n  leasectl events -f -o json\n  \
                            leasectl --all-profiles events --follow --record --metrics-file \
                            /var/lib/prometheus/node-exporter/leasectl.prom",
        hide: false,
        args: <EventsArgs as Args>::augment_args,
    },
    Sub {
        name: "metrics",
        about: "Print the registries as Prometheus/OpenMetrics text (leases by liveness, slots, cap, \
                conflicts, leak suspects, validity, oldest lease, lock wait)",
        after_help: "Takes each registry's lock for an instant to measure the wait (1 s at most); \
                            writes nothing.\n\n\
                            Example:\n  leasectl metrics --all-profiles\n  \
                            leasectl metrics --all-profiles > /var/lib/prometheus/node-exporter/leasectl.prom.$$ && \
                            mv /var/lib/prometheus/node-exporter/leasectl.prom.$$ \
                            /var/lib/prometheus/node-exporter/leasectl.prom",
        hide: false,
        args: std::convert::identity,
    },
    Sub {
        name: "serve",
        about: "Answer another leasectl's --host over standard input and output (run by ssh)",
        after_help: "What `leasectl --host ssh://HOST ...` runs on HOST, as `leasectl serve --stdio` \
                            (LEASECTL_REMOTE_COMMAND names another program). It speaks JSON lines on standard \
                            input and output: it says its version first, opens the home the client names (else \
                            --home, $HERMES_HOME, ~/.hermes), and answers listings, force-release, prune and \
                            doctor with the same guards as its own command line, each removal audited here \
                            with the operator's name and SSH_CONNECTION. It takes no lease and opens no port.\n\n\
                            Example:\n  leasectl serve --stdio",
        hide: false,
        args: <ServeArgs as Args>::augment_args,
    },
    Sub {
        name: "install",
        about: "Put this leasectl on the hosts --host names, over ssh, so that every host runs the same build",
        after_help: "Copies this very binary to each host --host, LEASECTL_HOSTS or --all-hosts names, over \
                            your own ssh, into ${XDG_BIN_HOME:-~/.local/bin}/leasectl there (the user's own \
                            folder, where `--host` looks first). The host keeps it only when its SHA-256 is the \
                            one sent and it says this version. A leasectl there that install did not put there \
                            is never replaced. Needs Linux x86_64 and sha256sum on the host; no build and no \
                            root there. A host that runs another version is named, with this command, whenever \
                            --host reaches it.\n\n\
                            Example:\n  leasectl --host ssh://ops@gw1 install\n  leasectl --all-hosts install",
        hide: false,
        args: std::convert::identity,
    },
    Sub {
        name: "completions",
        about: "Print a shell completion script (from the same definitions as this help)",
        after_help: "Example:\n  leasectl completions bash > ~/.local/share/bash-completion/completions/leasectl\n  \
                            leasectl completions zsh > ~/.zfunc/_leasectl\n  \
                            leasectl completions fish > ~/.config/fish/completions/leasectl.fish",
        hide: false,
        args: <CompletionsArgs as Args>::augment_args,
    },
    Sub {
        name: "__complete",
        about: "The completion script's callback: profiles or lease ids of the home the typed words name",
        after_help: "",
        hide: true,
        args: <CompleteArgs as Args>::augment_args,
    },
    Sub {
        name: "man",
        about: "Print the manual page (roff, from the same definitions as this help)",
        after_help: "Example:\n  leasectl man > /usr/local/share/man/man1/leasectl.1\n  leasectl man | man -l -",
        hide: false,
        args: std::convert::identity,
    },
];

/// A subcommand's definition: its name, its line in the list of commands, the help
/// after its own, and its arguments.
pub(crate) struct Sub {
    pub name: &'static str,
    about: &'static str,
    /// Empty: none.
    after_help: &'static str,
    hide: bool,
    /// Its arguments, added only when it is the subcommand parsed or when a help, the
    /// manual or a completion script needs them (clap's `Command::defer`): every
    /// subcommand's arguments built and dropped again were most of a start's work.
    args: fn(clap::Command) -> clap::Command,
}

impl Sub {
    fn command(&self) -> clap::Command {
        let c = clap::Command::new(self.name).about(self.about).hide(self.hide).defer(self.args);
        if self.after_help.is_empty() { c } else { c.after_help(self.after_help) }
    }
}

thread_local! {
    /// Which of [`SUBCOMMANDS`] a tree built now gets (bit i: the i-th): all but while
    /// [`Cli::command_for`] builds one for a command line.
    static ONLY: std::cell::Cell<u32> = const { std::cell::Cell::new(u32::MAX) };
}

impl Cli {
    /// The command tree for `args`, with only the commands one of its words names (clap
    /// gives each command the global options, and drops them all again: a quarter of a
    /// start). None when a help is asked for, which lists every command: the whole tree
    /// then, as for an error (see `cli::parse`).
    pub fn command_for(args: &[std::ffi::OsString]) -> Option<clap::Command> {
        use clap::CommandFactory as _;
        let words = args.iter().skip(1).filter_map(|a| a.to_str());
        if words.clone().any(|w| matches!(w, "-h" | "--help" | "help")) {
            return None;
        }
        let named = words.fold(0u32, |mask, w| match SUBCOMMANDS.iter().position(|s| s.name == w) {
            Some(i) => mask | 1 << i,
            None => mask,
        });
        ONLY.with(|only| only.set(named));
        let tree = Cli::command();
        ONLY.with(|only| only.set(u32::MAX));
        Some(tree)
    }
}

impl clap::Subcommand for Command {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        let only = ONLY.with(std::cell::Cell::get);
        cmd.subcommands(SUBCOMMANDS.iter().enumerate().filter(|(i, _)| only & 1 << i != 0).map(|(_, s)| s.command()))
    }
    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_subcommands(cmd)
    }
    fn has_subcommand(name: &str) -> bool {
        SUBCOMMANDS.iter().any(|s| s.name == name)
    }
}

impl clap::FromArgMatches for Command {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Self::from_arg_matches_mut(&mut matches.clone())
    }

    fn from_arg_matches_mut(matches: &mut clap::ArgMatches) -> Result<Self, clap::Error> {
        use clap::error::ErrorKind;
        let Some((name, mut sub)) = matches.remove_subcommand() else {
            return Err(clap::Error::raw(
                ErrorKind::MissingSubcommand,
                "a subcommand is required but one was not provided",
            ));
        };
        let m = &mut sub;
        Ok(match name.as_str() {
            "ls" => Command::Ls(LsArgs::from_arg_matches_mut(m)?),
            "acquire" => Command::Acquire(AcquireArgs::from_arg_matches_mut(m)?),
            "release" => Command::Release(ReleaseArgs::from_arg_matches_mut(m)?),
            "force-release" => Command::ForceRelease(ForceReleaseArgs::from_arg_matches_mut(m)?),
            "stop" => Command::Stop(StopArgs::from_arg_matches_mut(m)?),
            "prune" => Command::Prune(PruneArgs::from_arg_matches_mut(m)?),
            "doctor" => Command::Doctor(DoctorArgs::from_arg_matches_mut(m)?),
            "run" => Command::Run(RunArgs::from_arg_matches_mut(m)?),
            "tui" => Command::Tui,
            "demo" => Command::Demo(DemoArgs::from_arg_matches_mut(m)?),
            "hold" => Command::Hold(AcquireOpts::from_arg_matches_mut(m)?),
            "events" => Command::Events(EventsArgs::from_arg_matches_mut(m)?),
            "metrics" => Command::Metrics,
            "serve" => Command::Serve(ServeArgs::from_arg_matches_mut(m)?),
            "install" => Command::Install,
            "completions" => Command::Completions(CompletionsArgs::from_arg_matches_mut(m)?),
            "__complete" => Command::Complete(CompleteArgs::from_arg_matches_mut(m)?),
            "man" => Command::Man,
            other => {
                return Err(clap::Error::raw(
                    ErrorKind::InvalidSubcommand,
                    format!("the subcommand '{other}' wasn't recognized"),
                ));
            }
        })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Speak on standard input and output (the only way it serves)
    #[arg(long, required = true)]
    pub stdio: bool,
}

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Stay live: print each change as it happens, until interrupted (like journalctl -f)
    #[arg(short, long)]
    pub follow: bool,
    /// With --follow: append every event to the home's journal (the record --since reads)
    #[arg(long, requires = "follow")]
    pub record: bool,
    /// With --follow: keep this OpenMetrics file current, replaced whole after a change (at
    /// most once a second) and every --metrics-every (node_exporter's textfile collector)
    #[arg(long, requires = "follow", value_name = "PATH")]
    pub metrics_file: Option<PathBuf>,
    /// With --metrics-file: rewrite it at least this often, changed or not, so ages, idle
    /// sessions and a stuck lock reach it (node_exporter's textfile convention)
    #[arg(long, requires = "metrics_file", value_name = "DURATION", default_value = "15s", value_parser = parse_metrics_every)]
    pub metrics_every: std::time::Duration,
    /// Recorded events from this long ago: 2h, 30m, 3600 (default without --follow: 24h)
    #[arg(long, value_name = "DURATION", value_parser = parse_since)]
    pub since: Option<std::time::Duration>,
    #[command(flatten)]
    pub format: EventFormatArgs,
}

/// How events are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum EventFormat {
    /// One line per event: time, event, profile, lease, session, surface, owner pid and name, liveness
    #[default]
    Text,
    /// One JSON object per line (the journal's own form)
    Json,
    /// Tab-separated, unpadded, one line per event under a header line: for awk and cut
    Tsv,
}

#[derive(Debug, Args, Default)]
pub struct EventFormatArgs {
    /// Output format
    #[arg(short = 'o', long = "output", value_enum, default_value_t, value_name = "FORMAT")]
    pub output: EventFormat,
    /// Machine-readable output (the same as -o json; give one or the other)
    #[arg(long, conflicts_with = "output")]
    pub json: bool,
    /// Leave out tsv's header line
    #[arg(long)]
    pub no_headers: bool,
}

impl EventFormatArgs {
    /// The listing format that prints events this way (ls -w prints them too).
    pub fn format(&self) -> Format {
        match (self.json, self.output) {
            (true, _) | (_, EventFormat::Json) => Format::Json,
            (_, EventFormat::Tsv) => Format::Tsv,
            (_, EventFormat::Text) => Format::Table,
        }
    }
}

#[derive(Debug, Args)]
pub struct CompleteArgs {
    /// `profiles` or `leases`
    pub what: String,
    /// The words typed so far (their --home and --profile choose the registry)
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub words: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Repair an invalid registry (asks first; see below)
    #[arg(long)]
    pub repair: bool,
    /// With --repair: do not ask
    #[arg(long, requires = "repair")]
    pub yes: bool,
    /// With --repair: repair even if a lease whose owner may be alive is lost (a
    /// dropped entry of a live owner, or a file cut short: what followed is unknown)
    #[arg(long, requires = "repair")]
    pub force: bool,
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args, Default)]
pub struct LsArgs {
    /// Only leases of this session (repeatable)
    #[arg(long, value_name = "S")]
    pub session: Vec<String>,
    /// Only leases held from this surface: cli, tui, a gateway platform… (repeatable)
    #[arg(long, value_name = "X")]
    pub surface: Vec<String>,
    /// Only owners in these states (comma-separated)
    #[arg(long, value_enum, value_delimiter = ',', value_name = "STATE[,STATE]")]
    pub liveness: Vec<LivenessArg>,
    /// Order within each registry (default: as stored; age: oldest first)
    #[arg(long, value_enum, value_name = "KEY")]
    pub sort: Option<SortKey>,
    /// Keep watching: print each change as a line as it happens (acquired, released,
    /// owner died, pruned…) until interrupted; with -o json one JSON object per line
    #[arg(short, long)]
    pub watch: bool,
    #[command(flatten)]
    pub format: FormatArgs,
}

/// An owner state `ls --liveness` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LivenessArg {
    Alive,
    Dead,
    Recycled,
    Unknown,
    /// A dead `run` owner whose work still runs
    WorkRunning,
}

/// What `ls --sort` orders by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SortKey {
    Session,
    Age,
    Pid,
    Surface,
    Liveness,
}

/// How a listing is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns, one table per registry
    #[default]
    Table,
    /// The table plus the owner's user, memory and command line, and whole lease ids
    Wide,
    /// One JSON document (with --watch: one object per line)
    Json,
    /// Tab-separated, unpadded, one line per lease with its profile first: for awk and cut
    Tsv,
}

#[derive(Debug, Args, Default)]
pub struct FormatArgs {
    /// Output format
    #[arg(short = 'o', long = "output", value_enum, default_value_t, value_name = "FORMAT")]
    pub output: Format,
    /// Machine-readable output (the same as -o json; give one or the other)
    #[arg(long, conflicts_with = "output")]
    pub json: bool,
    /// Leave out the header lines (table and wide: each registry's line and the column
    /// names; tsv: the column names): the rows only
    #[arg(long)]
    pub no_headers: bool,
}

impl FormatArgs {
    pub fn format(&self) -> Format {
        if self.json { Format::Json } else { self.output }
    }
}

// Options shared by acquire, run and hold. (Not a doc comment: clap's derive would make
// it the about of every command that takes them, over the command's own.)
#[derive(Debug, Args, Clone)]
pub struct AcquireOpts {
    /// The stored session id to fence ("" is granted and not recorded)
    pub session: String,
    /// Who holds it: cli, tui, desktop, a gateway platform…
    #[arg(long, default_value = "cli")]
    pub surface: String,
    /// The live session id (half of writer identity)
    #[arg(long, value_name = "L")]
    pub live_id: Option<String>,
    /// Cap on live leases (overrides config.yaml; 0 means no cap)
    #[arg(long, value_name = "N")]
    pub max: Option<u64>,
    /// Mark the lease liveness-tracked: every owner must be provably alive, or fail closed
    #[arg(long)]
    pub track_liveness: bool,
    /// Extra metadata (repeatable)
    #[arg(long = "meta", value_name = "K=V")]
    pub meta: Vec<String>,
    /// With --backend etcd: the etcd lease TTL in seconds (default 10). hold/run renew it every
    /// TTL/3 (below 6, one leader election can outlast the renewals: a warning says so); a
    /// one-shot acquire does not, so its lease ends after TTL unless renewed
    #[cfg(feature = "etcd")]
    #[arg(long, value_name = "SECS")]
    pub ttl: Option<u64>,
    #[cfg(not(feature = "etcd"))]
    #[arg(skip)]
    pub ttl: Option<u64>,
    /// When refused because the session is held or every slot is taken, try again as soon
    /// as the registry changes (and at least every second) until granted or SECS have
    /// passed, naming the holder once.
    // Said only where there is an etcd to stand in line on (help offers what the build does).
    #[cfg_attr(
        feature = "etcd",
        doc = "On etcd: stand in line, served in arrival order and seen by ls, the console and metrics"
    )]
    #[arg(long, value_name = "SECS", value_parser = parse_wait)]
    pub wait: Option<f64>,
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AcquireArgs {
    #[command(flatten)]
    pub opts: AcquireOpts,
    /// The owner process (default: the calling process)
    #[arg(long, value_name = "PID")]
    pub owner_pid: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// The lease to release: its whole id, or a unique prefix of 4 or more characters (as ls shows it)
    pub lease_id: String,
    /// The owner this release is for, when it is not the caller or one of its ancestors
    /// (a live owner's lease is otherwise refused: that is force-release's job)
    #[arg(long, value_name = "PID")]
    pub owner_pid: Option<u64>,
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("target").required(true).args(["lease_id", "session"]))]
pub struct ForceReleaseArgs {
    /// The lease to remove: its whole id, or a unique prefix of 4 or more characters (as ls shows it)
    pub lease_id: Option<String>,
    /// Remove every lease of this session instead
    #[arg(long, value_name = "S")]
    pub session: Option<String>,
    /// Also remove a live owner's lease (dangerous: it may keep writing)
    #[arg(long)]
    pub live: bool,
    /// Say what would be removed; change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

impl ForceReleaseArgs {
    /// The options that change what it does, as typed (for a hint that repeats it elsewhere).
    pub fn options(&self) -> Vec<String> {
        [(self.live, "--live"), (self.dry_run, "--dry-run"), (self.json, "--json")]
            .into_iter()
            .filter(|(given, _)| *given)
            .map(|(_, flag)| flag.to_owned())
            .collect()
    }
}

const STOP_HELP: &str = "The owner is named by its pid and start time, as its lease records them: leasectl \
holds it by a pidfd, checks its start time again through it, and signals only through it, so a pid \
reused by another process is never signalled. It shows what it will end (pid, user, command, age, \
the session's title and last activity from state.db, the processes it started, its other leases, \
which end with it) and asks on a terminal. SIGTERM first; SIGKILL to the owner and what it started \
if it has not ended after --grace. Then its leases are gone by its own release, or removed as a \
dead owner's; stop says which. Refused, with what to do instead: a dead owner (prune), a recycled \
pid, another user's process (act as that user or root), an owner /proc hides, an owner on another \
host. Exit 0 when every owner ended, 1 when one could not be ended or was refused.\n\n\
Unlike force-release --live, which removes a live owner's lease and leaves the owner writing its \
session beside whoever acquires it next, stop ends the writer first.\n\n\
Example:\n  leasectl stop --session S1 --dry-run\n  leasectl stop 0f3c9e2a --grace 10s --yes";

#[derive(Debug, Args)]
pub struct StopArgs {
    /// The lease whose owner to end: its whole id, or a unique prefix of 4 or more characters
    pub lease_id: Option<String>,
    /// End the owner of every lease of this session instead
    #[arg(long, value_name = "S")]
    pub session: Option<String>,
    /// How long the owner has after SIGTERM before SIGKILL: 5s, 30s, 2m...
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_grace)]
    pub grace: std::time::Duration,
    /// Do not ask (scripts; without a terminal stop refuses to act unasked)
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// With --yes: end an owner that holds more than one session (a gateway, an app
    /// backend) and every session it holds; asked again on a terminal
    #[arg(long)]
    pub every_session: bool,
    /// Show what would be ended; signal nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

impl StopArgs {
    /// The options that change what it does, as typed (for a hint that repeats it elsewhere).
    pub fn options(&self) -> Vec<String> {
        [(self.dry_run, "--dry-run"), (self.json, "--json")]
            .into_iter()
            .filter(|(given, _)| *given)
            .map(|(_, flag)| flag.to_owned())
            .collect()
    }
}

fn parse_grace(text: &str) -> Result<std::time::Duration, String> {
    let d = crate::lease::words::human::parse_duration(text).map_err(String::from)?;
    match d > std::time::Duration::from_secs(3600) {
        true => Err("at most an hour: an owner that ignores SIGTERM that long is ended by SIGKILL".into()),
        false => Ok(d),
    }
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Say what would be removed; change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Also remove owners that read as recycled only because their start time is off by
    /// whole seconds (a wall-clock step: most likely the same, live process)
    #[arg(long)]
    pub include_clock_step: bool,
    /// Also remove leases marked WORK RUNNING: their `leasectl run` owner died but
    /// processes it started still run (lets a second writer in beside that work)
    #[arg(long)]
    pub force: bool,
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

impl PruneArgs {
    /// What the core's prune takes from these options.
    pub(crate) fn options(&self) -> crate::lease::PruneOptions {
        crate::lease::PruneOptions {
            dry_run: self.dry_run,
            include_clock_step: self.include_clock_step,
            include_work_running: self.force,
        }
    }
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Start the guided tour (press t for each next step)
    #[arg(long)]
    pub tour: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub opts: AcquireOpts,
    /// No banner (the grant line on stderr); a refusal is still reported
    #[arg(short, long)]
    pub quiet: bool,
    /// Exit N (instead of 3 or 4) when the session is held or every slot is taken, as
    /// flock -E; CMD does not run
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(0..=255))]
    pub conflict_exit_code: Option<i32>,
    /// The command to run while holding the lease
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

/// `--since`: a duration back from now, as people write it.
fn parse_since(text: &str) -> Result<std::time::Duration, Unusable> {
    crate::lease::words::human::parse_duration(text)
}

/// `--metrics-every`: a duration as people write it, at least a second.
fn parse_metrics_every(text: &str) -> Result<std::time::Duration, Unusable> {
    let d = crate::lease::words::human::parse_duration(text)?;
    if d < std::time::Duration::from_secs(1) {
        return Err(Unusable("under a second".into()));
    }
    Ok(d)
}

/// `--lock-timeout`: seconds, 0 to a day.
fn parse_connect_timeout(text: &str) -> Result<u64, Unusable> {
    match text.trim().parse::<u64>() {
        Ok(n) if (1..=3600).contains(&n) => Ok(n),
        _ => Err(Unusable(format!("{text:?} is not a whole number of seconds from 1 to 3600"))),
    }
}

fn parse_lock_timeout(text: &str) -> Result<f64, Unusable> {
    seconds_up_to(text, 86_400)
}

/// `--wait`: seconds, 0 to a year.
fn parse_wait(text: &str) -> Result<f64, Unusable> {
    seconds_up_to(text, 86_400 * 365)
}

/// Seconds from 0 to `max`. The error does not echo the number: clap shows what was
/// typed, and `1e300` printed back is 300 digits.
fn seconds_up_to(text: &str, max: u32) -> Result<f64, Unusable> {
    match text.trim().parse::<f64>() {
        Ok(secs) if (0.0..=f64::from(max)).contains(&secs) => Ok(secs),
        Ok(_) => Err(Unusable(format!("must be between 0 and {max} seconds"))),
        Err(_) => Err(Unusable("not a number of seconds (10, 0.5)".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each subcommand of the table parses to its own command, with its arguments built
    /// (the table and the names matched against it are written apart).
    #[test]
    fn every_subcommand_parses_to_its_own_command() {
        let minimal: &[(&str, &[&str])] = &[
            ("ls", &["--json"]),
            ("acquire", &["S", "--owner-pid", "1"]),
            ("release", &["abcd"]),
            ("force-release", &["--session", "S"]),
            ("stop", &["--session", "S"]),
            ("prune", &["--dry-run"]),
            ("doctor", &["--json"]),
            ("run", &["S", "--", "true"]),
            ("tui", &[]),
            ("demo", &["--tour"]),
            ("hold", &["S"]),
            ("events", &["--since", "1m"]),
            ("metrics", &[]),
            ("serve", &["--stdio"]),
            ("install", &[]),
            ("completions", &["bash"]),
            ("__complete", &["profiles"]),
            ("man", &[]),
        ];
        assert_eq!(minimal.len(), SUBCOMMANDS.len(), "one case per subcommand");
        for (sub, (name, args)) in SUBCOMMANDS.iter().zip(minimal) {
            assert_eq!(sub.name, *name, "the table's order");
            let line: Vec<&str> = ["leasectl", name].into_iter().chain(args.iter().copied()).collect();
            let cli = Cli::try_parse_from(line).unwrap_or_else(|e| panic!("{name}: {e}"));
            let variant = format!("{:?}", cli.command.expect("a command"));
            let expected: String =
                name.trim_start_matches('_').split('-').map(|w| w[..1].to_uppercase() + &w[1..]).collect();
            assert!(variant == expected || variant.starts_with(&format!("{expected}(")), "{name} parsed as {variant}");
        }
    }

    /// A command line's tree has the commands its words name, and parses it as the whole
    /// tree does; a help asks for the whole tree.
    #[test]
    fn a_lines_tree_has_the_commands_it_names_and_parses_as_the_whole_tree() {
        use clap::{CommandFactory as _, FromArgMatches as _, Subcommand as _};
        let os = |line: &[&str]| line.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        let names = |tree: &clap::Command| tree.get_subcommands().map(|c| c.get_name().to_owned()).collect::<Vec<_>>();
        let lines: &[&[&str]] = &[
            &["leasectl"],
            &["leasectl", "--home", "/h"],
            &["leasectl", "--profile", "ls", "ls", "--json"],
            &["leasectl", "run", "S", "--wait", "5", "--", "ls", "-l"],
            &["leasectl", "--home", "/h", "acquire", "S", "--owner-pid", "1", "--max", "0"],
            &["leasectl", "--all-profiles", "doctor", "--json"],
            &["leasectl", "force-release", "--session", "prune"],
        ];
        for line in lines {
            let tree = Cli::command_for(&os(line)).expect("no help asked for");
            let mut named: Vec<&str> = line.iter().copied().filter(|w| Command::has_subcommand(w)).collect();
            named.sort_unstable();
            named.dedup();
            let mut built = names(&tree);
            built.sort_unstable();
            assert_eq!(built, named, "{line:?}");
            let narrow = tree.try_get_matches_from(os(line)).expect("parses");
            let whole = Cli::command().try_get_matches_from(os(line)).expect("parses");
            let (narrow, whole) = (Cli::from_arg_matches(&narrow), Cli::from_arg_matches(&whole));
            assert_eq!(format!("{narrow:?}"), format!("{whole:?}"), "{line:?}");
        }
        for help in [&["leasectl", "-h"][..], &["leasectl", "ls", "--help"], &["leasectl", "help", "ls"]] {
            assert!(Cli::command_for(&os(help)).is_none(), "{help:?}");
        }
        assert_eq!(names(&Cli::command()).len(), SUBCOMMANDS.len(), "the whole tree");
    }
}
