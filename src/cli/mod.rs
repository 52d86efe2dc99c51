//! The command-line interface: parse, call the core, print. Exit codes:
//! 0 ok, 1 error, 2 usage, 3/4/5 the refusal reasons.

/// Output that never panics: a closed pipe (`leasectl ls | head`) or a dead
/// terminal must not turn into a crash after the work is done.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}
macro_rules! say_raw {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}
macro_rules! say_err {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

pub mod args;
#[cfg(feature = "etcd")]
mod etcd;
pub mod output;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Map, Value, json};

use args::{AcquireOpts, ForceReleaseArgs};
pub use args::{Cli, Command};
use output::{LEASE_HEADER, lease_json, lease_rows, table};

use crate::lease::{
    self, AcquireRequest, Error, Liveness, Reason, Registry, Target, config::read_cap, liveness::Prober,
    owner::owner_infos, paths, refusal::refusal_stderr,
};

pub const EXIT_OK: i32 = 0;
pub const EXIT_ERROR: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

/// Run a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> i32 {
    match dispatch(cli) {
        Ok(code) => code,
        Err(Failure { code, message }) => {
            say_err!("leasectl: {message}");
            code
        }
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
            Error::Invalid(_) | Error::LockTimeout { .. } | Error::LivenessUnknown { .. } => {
                Reason::SessionCoordinationUnavailable.exit_code()
            }
            _ => EXIT_ERROR,
        };
        Failure { code, message: e.to_string() }
    }
}

fn dispatch(cli: Cli) -> Result<i32, Failure> {
    let timeout = lock_timeout(cli.lock_timeout)?;
    if cli.backend == args::Backend::Etcd {
        return dispatch_etcd(cli, timeout);
    }
    if cli.endpoints.is_some() || cli.prefix.is_some() {
        return Err(usage("--endpoints and --prefix work with --backend etcd only"));
    }
    if let Some(Command::Acquire(args::AcquireArgs { opts: AcquireOpts { ttl: Some(_), .. }, .. }))
    | Some(Command::Hold(AcquireOpts { ttl: Some(_), .. }))
    | Some(Command::Run(args::RunArgs { opts: AcquireOpts { ttl: Some(_), .. }, .. })) = &cli.command
    {
        return Err(usage("--ttl works with --backend etcd only: a registry file lease lasts as long as its owner"));
    }
    let registries = select_registries(&cli)?;
    let command = match cli.command {
        Some(c) => c,
        // No command: the console on a terminal, the listing otherwise (pipes, scripts).
        None if std::io::IsTerminal::is_terminal(&std::io::stdout()) => Command::Tui,
        None => Command::Ls(args::LsArgs { json: false }),
    };
    let single = || -> Result<&Registry, Failure> {
        if cli.all_profiles {
            return Err(usage("--all-profiles works with ls, prune and doctor only"));
        }
        registries.first().ok_or_else(|| usage("no registry selected"))
    };
    match command {
        Command::Ls(a) => Ok(ls(&registries, a.json)),
        Command::Acquire(a) => acquire(single()?, &a.opts, a.owner_pid, timeout),
        Command::Release(a) => release(single()?, &a.lease_id, a.json, timeout),
        Command::ForceRelease(a) => force_release(single()?, &a, timeout),
        Command::Prune(a) => prune(&registries, a.dry_run, a.json, timeout),
        Command::Doctor(a) if a.repair => repair(&registries, a.yes, a.json, timeout),
        Command::Doctor(a) => Ok(doctor(&registries, a.json)),
        Command::Run(a) => run_cmd(single()?, &a.opts, &a.cmd, timeout),
        Command::Hold(a) => hold(single()?, &a, timeout),
        Command::Tui => console(&cli.home, cli.profile.is_some(), registries, timeout),
        Command::Demo(a) => demo(cli.home.as_deref(), a.tour),
    }
}

/// `--backend etcd`: the same commands on etcd (a build with `--features etcd`).
fn dispatch_etcd(cli: Cli, timeout: Duration) -> Result<i32, Failure> {
    if cli.all_profiles || cli.profile.is_some() || cli.home.is_some() {
        return Err(usage(
            "--home, --profile and --all-profiles name registry files; with --backend etcd use --endpoints and --prefix",
        ));
    }
    let command = match cli.command {
        Some(c) => c,
        None if std::io::IsTerminal::is_terminal(&std::io::stdout()) => Command::Tui,
        None => Command::Ls(args::LsArgs { json: false }),
    };
    #[cfg(feature = "etcd")]
    {
        let args = etcd::EtcdArgs { endpoints: cli.endpoints.as_deref(), prefix: cli.prefix.as_deref() };
        etcd::dispatch(&args, command, timeout)
    }
    #[cfg(not(feature = "etcd"))]
    {
        let _ = (command, timeout);
        Err(Failure {
            code: EXIT_ERROR,
            message: "this leasectl was built without the etcd backend: rebuild it with `cargo build --release \
                      --features etcd` (needs protoc)"
                .into(),
        })
    }
}

fn console(
    home: &Option<std::path::PathBuf>,
    one_profile: bool,
    registries: Vec<Registry>,
    timeout: Duration,
) -> Result<i32, Failure> {
    let home = paths::resolve_home(home.as_deref()).map_err(|m| Failure { code: EXIT_ERROR, message: m })?;
    let root = paths::root_of(&home);
    let opts = crate::tui::ConsoleOptions {
        registries,
        discover_root: if one_profile { None } else { Some(root.clone()) },
        root,
        // The console must stay responsive: a held lock is reported, not waited out.
        lock_timeout: timeout.min(Duration::from_secs(3)),
        demo: None,
        tour: false,
        #[cfg(feature = "etcd")]
        etcd: None,
    };
    crate::tui::run(opts).map_err(|e| Failure { code: EXIT_ERROR, message: format!("console: {e}") })?;
    Ok(EXIT_OK)
}

/// The console on a sandbox: never `$HERMES_HOME` or `~/.hermes`, only a temp dir or `--home`.
fn demo(home: Option<&std::path::Path>, tour: bool) -> Result<i32, Failure> {
    let fail = |what: &str, e: std::io::Error| Failure { code: EXIT_ERROR, message: format!("{what}: {e}") };
    let sandbox = match home {
        Some(h) => crate::demo::Sandbox::at(h).map_err(|e| fail("cannot use the demo home", e))?,
        None => crate::demo::Sandbox::create_temp().map_err(|e| fail("cannot create a sandbox", e))?,
    };
    let exe = std::env::current_exe().map_err(|e| fail("cannot find the leasectl binary", e))?;
    let reg = sandbox.registry();
    let opts = crate::tui::ConsoleOptions {
        registries: vec![reg],
        discover_root: None,
        root: sandbox.home().to_path_buf(),
        lock_timeout: Duration::from_secs(3),
        demo: Some(crate::demo::Playground::new(sandbox, exe)),
        tour,
        #[cfg(feature = "etcd")]
        etcd: None,
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

fn select_registries(cli: &Cli) -> Result<Vec<Registry>, Failure> {
    let home = paths::resolve_home(cli.home.as_deref()).map_err(|m| Failure { code: EXIT_ERROR, message: m })?;
    let root = paths::root_of(&home);
    let console = matches!(cli.command, Some(Command::Tui) | None);
    if cli.all_profiles || (console && cli.profile.is_none()) {
        Ok(paths::all_registries(&root))
    } else if let Some(name) = &cli.profile {
        Ok(vec![paths::profile_registry(&root, name).map_err(usage)?])
    } else {
        Ok(vec![paths::registry_for_home(&home)])
    }
}

fn print_json(v: &Value) {
    say!("{}", serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()));
}

fn ls(registries: &[Registry], as_json: bool) -> i32 {
    let snaps: Vec<lease::Snapshot> = registries.iter().map(lease::snapshot).collect();
    let pids: Vec<u64> = snaps.iter().filter_map(|s| s.leases.as_ref().ok()).flatten().map(|v| v.entry.pid()).collect();
    let owners = owner_infos(&pids);
    let any_error = snaps.iter().any(|s| s.leases.is_err());
    if as_json {
        let regs: Vec<Value> = snaps
            .iter()
            .map(|s| {
                let leases: Vec<Value> = s
                    .leases
                    .as_ref()
                    .map(|ls| ls.iter().map(|v| lease_json(v, owners.get(&v.entry.pid()))).collect())
                    .unwrap_or_default();
                json!({
                    "profile": s.registry.profile,
                    "path": s.registry.path(),
                    "cap": s.cap.cap,
                    "cap_warnings": s.cap.warnings,
                    "error": s.leases.as_ref().err().map(|e| e.to_string()),
                    "leases": leases,
                })
            })
            .collect();
        print_json(&json!({ "registries": regs }));
    } else {
        for (i, s) in snaps.iter().enumerate() {
            if i > 0 {
                say!();
            }
            let cap = s.cap.cap.map(|c| format!("cap {c}")).unwrap_or_else(|| "no cap".into());
            match &s.leases {
                Err(e) => say!("{}  {}  {cap}\n  ERROR: {e}", s.registry.profile, s.registry.path().display()),
                Ok(views) => {
                    let alive = views.iter().filter(|v| v.liveness == Liveness::Alive).count();
                    let slots = s.cap.cap.map(|c| format!("{alive}/{c} slots")).unwrap_or(format!("{alive} live"));
                    say!(
                        "{}  {}  {cap}  {} lease(s), {slots}",
                        s.registry.profile,
                        s.registry.path().display(),
                        views.len()
                    );
                    if !views.is_empty() {
                        say!("{}", table(&LEASE_HEADER, &lease_rows(views, &owners)));
                    }
                }
            }
            for w in &s.cap.warnings {
                say!("  warning: {w}");
            }
        }
    }
    if any_error { EXIT_ERROR } else { EXIT_OK }
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

fn request(reg: &Registry, opts: &AcquireOpts, owner_pid: u64, timeout: Duration) -> Result<AcquireRequest, Failure> {
    let cap = match opts.max {
        Some(0) => None,
        Some(n) => Some(n),
        None => {
            let setting = read_cap(&reg.config_path());
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
/// `compact` prints JSON on one line (hold/run: a line a reader can wait for).
fn acquire_reported(reg: &Registry, req: &AcquireRequest, as_json: bool, compact: bool) -> Result<lease::Grant, i32> {
    let show = |v: &Value| {
        if compact { say!("{v}") } else { print_json(v) }
    };
    match lease::acquire(reg, req) {
        Ok(g) => {
            if as_json {
                show(&output::grant_json(&g, reg, &req.session_id, req.owner_pid));
            } else if !g.recorded {
                say!("granted (not recorded: an empty session id has nothing to fence)");
            } else {
                let how = if g.replaced.is_some() { " (same writer: replaced its own entry)" } else { "" };
                say!(
                    "granted lease {} for session {} to pid {}{how}\n  registry: {}",
                    g.lease_id,
                    req.session_id,
                    req.owner_pid,
                    reg.path().display()
                );
                if !g.pruned.is_empty() {
                    say!("  pruned {} dead owner lease(s)", g.pruned.len());
                }
            }
            Ok(g)
        }
        Err(r) => {
            if as_json {
                show(&output::refusal_json(&r));
            } else {
                say_err!("{}\nwhat to do: {}", refusal_stderr(&r), r.reason.advice());
            }
            Err(r.reason.exit_code())
        }
    }
}

fn acquire(reg: &Registry, opts: &AcquireOpts, owner: Option<u64>, timeout: Duration) -> Result<i32, Failure> {
    // SAFETY: getppid has no preconditions.
    let owner_pid = owner.unwrap_or_else(|| unsafe { libc::getppid() } as u64);
    if !opts.session.is_empty() && Prober::new().start_time(owner_pid).is_none() {
        return Err(Failure { code: EXIT_ERROR, message: format!("owner pid {owner_pid} is not a running process") });
    }
    let req = request(reg, opts, owner_pid, timeout)?;
    Ok(match acquire_reported(reg, &req, opts.json, false) {
        Ok(_) => EXIT_OK,
        Err(code) => code,
    })
}

fn release(reg: &Registry, lease_id: &str, as_json: bool, timeout: Duration) -> Result<i32, Failure> {
    let r = lease::release(reg, lease_id, timeout)?;
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

fn force_release(reg: &Registry, a: &ForceReleaseArgs, timeout: Duration) -> Result<i32, Failure> {
    let target = match (&a.lease_id, &a.session) {
        (Some(id), None) => Target::Lease(id.clone()),
        (None, Some(s)) => Target::Session(s.clone()),
        _ => return Err(usage("give either LEASE_ID or --session S")),
    };
    let r = lease::force_release(reg, &target, a.live, a.dry_run, timeout)?;
    if r.live_owner {
        let who = output::live_owners_text(&r);
        let verb = if r.dry_run { "would release" } else { "released" };
        say_err!(
            "WARNING: {verb} the lease of a LIVE owner: {}. It may keep writing to its session, \
             and a second owner can now acquire it.",
            who
        );
    }
    if a.json {
        print_json(&output::removal_json(reg, &r));
    } else {
        print_removal(reg, &r, "force-release");
    }
    Ok(EXIT_OK)
}

fn print_removal(reg: &Registry, r: &lease::Removal, what: &str) {
    let verb = if r.dry_run { "would remove" } else { "removed" };
    say!("{} ({}): {what} {verb} {} lease(s)", reg.profile, reg.path().display(), r.removed.len());
    if !r.removed.is_empty() {
        say!("{}", table(&LEASE_HEADER, &lease_rows(&r.removed, &HashMap::new())));
    }
}

fn prune(registries: &[Registry], dry_run: bool, as_json: bool, timeout: Duration) -> Result<i32, Failure> {
    let mut results = Vec::new();
    let mut failed = None;
    for reg in registries {
        match lease::prune(reg, dry_run, timeout) {
            Ok(r) => {
                if !as_json {
                    print_removal(reg, &r, "prune");
                }
                results.push(output::removal_json(reg, &r));
            }
            Err(e) => {
                let f = Failure::from(e);
                if !as_json {
                    say_err!("leasectl: {} ({}): {}", reg.profile, reg.path().display(), f.message);
                }
                results.push(json!({"profile": reg.profile, "path": reg.path(), "error": f.message}));
                failed = Some(f.code);
            }
        }
    }
    if as_json {
        print_json(&json!({ "registries": results }));
    }
    Ok(failed.unwrap_or(EXIT_OK))
}

fn doctor(registries: &[Registry], as_json: bool) -> i32 {
    let reports: Vec<lease::DoctorReport> = registries.iter().map(lease::doctor).collect();
    let bad = reports.iter().any(lease::DoctorReport::has_problems);
    if as_json {
        print_json(&json!({
            "ok": !bad,
            "registries": reports.iter().map(output::doctor_json).collect::<Vec<_>>(),
        }));
    } else {
        for (i, d) in reports.iter().enumerate() {
            if i > 0 {
                say!();
            }
            say_raw!("{}", output::doctor_text(d));
        }
    }
    if bad { EXIT_ERROR } else { EXIT_OK }
}

fn repair(registries: &[Registry], yes: bool, as_json: bool, timeout: Duration) -> Result<i32, Failure> {
    use std::io::{BufRead, IsTerminal, Write};
    let mut results = Vec::new();
    for reg in registries {
        let plan = lease::repair::repair(reg, true, timeout)?;
        if !plan.needed {
            if !as_json {
                say!("{} ({}): valid, nothing to repair", reg.profile, reg.path().display());
            }
            results.push(json!({"profile": reg.profile, "path": reg.path(), "repaired": false}));
            continue;
        }
        if !as_json {
            say_raw!("{}", output::repair_text(reg, &plan.plan));
        }
        if !yes {
            if !std::io::stdin().is_terminal() {
                return Err(Failure {
                    code: EXIT_ERROR,
                    message: "not repairing without confirmation: pass --yes".into(),
                });
            }
            say_raw!("Repair {}? [y/N] ", reg.path().display());
            let _ = std::io::stdout().flush();
            let mut answer = String::new();
            let _ = std::io::stdin().lock().read_line(&mut answer);
            if !matches!(answer.trim(), "y" | "Y" | "yes") {
                say!("not repaired");
                results.push(json!({"profile": reg.profile, "path": reg.path(), "repaired": false}));
                continue;
            }
        }
        let done = lease::repair::repair(reg, false, timeout)?;
        let backup = done.backup.as_ref().map(|b| b.display().to_string());
        if !as_json {
            say!(
                "repaired: kept {} lease(s); old bytes saved as {}",
                done.plan.kept.len(),
                backup.clone().unwrap_or_default()
            );
        }
        results.push(json!({
            "profile": reg.profile,
            "path": reg.path(),
            "repaired": done.needed,
            "backup": backup,
            "kept": done.plan.kept.iter().map(lease::Entry::to_value).collect::<Vec<_>>(),
            "dropped": done.plan.dropped.iter().map(|d| json!({"entry": d.index, "lease_id": d.lease_id, "why": d.why})).collect::<Vec<_>>(),
            "rekeyed": done.plan.rekeyed.iter().map(|(a, b)| json!({"from": a, "to": b})).collect::<Vec<_>>(),
        }));
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

fn hold(reg: &Registry, opts: &AcquireOpts, timeout: Duration) -> Result<i32, Failure> {
    let me = u64::from(std::process::id());
    let req = request(reg, opts, me, timeout)?;
    // Catch SIGINT/SIGTERM before the lease exists, so no signal can leave it behind.
    let signals = stop_signals()?;
    let grant = match acquire_reported(reg, &req, opts.json, true) {
        Ok(g) => g,
        Err(code) => return Ok(code),
    };
    use std::io::Write;
    let _ = std::io::stdout().flush();
    signals.wait();
    finish(reg, &grant, timeout)?;
    Ok(EXIT_OK)
}

/// Release a held lease at the end of `hold` / `run`.
fn finish(reg: &Registry, grant: &lease::Grant, timeout: Duration) -> Result<(), Failure> {
    if grant.recorded {
        lease::release(reg, &grant.lease_id, timeout)?;
    }
    Ok(())
}

fn run_cmd(reg: &Registry, opts: &AcquireOpts, cmd: &[String], timeout: Duration) -> Result<i32, Failure> {
    let me = u64::from(std::process::id());
    let req = request(reg, opts, me, timeout)?;
    let signals = stop_signals()?;
    let grant = match acquire_reported(reg, &req, opts.json, true) {
        Ok(g) => g,
        Err(code) => return Ok(code),
    };
    let env = [("LEASECTL_LEASE_ID", grant.lease_id.as_str()), ("LEASECTL_SESSION_ID", opts.session.as_str())];
    let outcome = signals.run_forwarding(cmd, &env);
    finish(reg, &grant, timeout)?;
    match outcome {
        Ok(code) => Ok(code),
        Err(e) => {
            let code = if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 };
            Err(Failure { code, message: format!("cannot run {:?}: {e}", cmd[0]) })
        }
    }
}
