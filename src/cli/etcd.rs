//! The commands on `--backend etcd`: the same contract as on the registry file
//! (exit codes, refusal lines, JSON shapes), with an etcd lease for liveness.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::args::{AcquireOpts, Command, ForceReleaseArgs};
use super::output::{ETCD_LEASE_HEADER, etcd_grant_json, etcd_lease_json, etcd_lease_rows, refusal_json, table};
use super::{EXIT_ERROR, EXIT_OK, Failure, metadata_of, print_json, stop_signals, usage};
use crate::lease::etcd::fence::{self, EtcdGrant, ForceError};
use crate::lease::etcd::keepalive::KeepAlive;
use crate::lease::etcd::{Etcd, EtcdConfig, EtcdError, hostname};
use crate::lease::refusal::refusal_stderr;
use crate::lease::{AcquireRequest, Reason, Refusal, Target, liveness::Prober};
use crate::supervise::LeaseLost;

/// Exit code when etcd cannot be used, or a held lease was lost.
const EXIT_UNAVAILABLE: i32 = 5;

/// What the global options say about etcd.
pub struct EtcdArgs<'a> {
    pub endpoints: Option<&'a str>,
    pub prefix: Option<&'a str>,
}

fn config(args: &EtcdArgs, ttl: Option<u64>) -> Result<EtcdConfig, Failure> {
    let endpoints = args.endpoints.ok_or_else(|| {
        usage("--backend etcd needs --endpoints URL[,URL] (the etcd client URLs, e.g. http://127.0.0.1:2379)")
    })?;
    EtcdConfig::new(endpoints, args.prefix, ttl).map_err(usage)
}

fn unavailable(e: EtcdError) -> Failure {
    Failure { code: EXIT_UNAVAILABLE, message: e.to_string() }
}

fn connect(cfg: &EtcdConfig) -> Result<Etcd, Failure> {
    Etcd::connect(cfg).map_err(unavailable)
}

/// Run one command on etcd.
pub fn dispatch(args: &EtcdArgs, command: Command, lock_timeout: Duration) -> Result<i32, Failure> {
    let none_of_file = |what: &str| -> Failure {
        usage(format!(
            "{what} works on the registry file only: on etcd there is nothing to {what} (an owner that stops \
             renewing its lease loses its keys when the TTL ends; `ls` shows what is held)"
        ))
    };
    match command {
        Command::Ls(a) => ls(&config(args, None)?, a.json),
        Command::Acquire(a) => acquire(&config(args, a.opts.ttl)?, &a.opts, a.owner_pid),
        Command::Release(a) => release(&config(args, None)?, &a.lease_id, a.json),
        Command::ForceRelease(a) => force_release(&config(args, None)?, &a),
        Command::Hold(a) => hold(&config(args, a.ttl)?, &a),
        Command::Run(a) => run_cmd(&config(args, a.opts.ttl)?, &a.opts, &a.cmd),
        Command::Tui => console(config(args, None)?, lock_timeout),
        Command::Prune(_) => Err(none_of_file("prune")),
        Command::Doctor(_) => Err(none_of_file("doctor")),
        Command::Demo(_) => Err(usage("demo runs on a sandbox registry file; it has no etcd mode")),
    }
}

fn console(cfg: EtcdConfig, lock_timeout: Duration) -> Result<i32, Failure> {
    let opts = crate::tui::ConsoleOptions {
        registries: vec![crate::tui::etcd_registry(&cfg)],
        discover_root: None,
        root: std::path::PathBuf::from("/"),
        lock_timeout: lock_timeout.min(Duration::from_secs(3)),
        demo: None,
        tour: false,
        etcd: Some(cfg),
    };
    crate::tui::run(opts).map_err(|e| Failure { code: EXIT_ERROR, message: format!("console: {e}") })?;
    Ok(EXIT_OK)
}

fn ls(cfg: &EtcdConfig, as_json: bool) -> Result<i32, Failure> {
    let etcd = connect(cfg)?;
    let listing = etcd.list().map_err(unavailable)?;
    let ids: Vec<i64> = listing.leases.iter().map(|h| h.etcd_lease_id).collect();
    let ttls = etcd.ttls(&ids).map_err(unavailable)?;
    let host = hostname();
    let mut prober = Prober::new();
    let views: Vec<_> = listing
        .leases
        .iter()
        .map(|h| (h, h.liveness(&mut prober, &host), ttls.get(&h.etcd_lease_id).copied().flatten()))
        .collect();
    if as_json {
        print_json(&json!({
            "backend": "etcd",
            "endpoints": cfg.endpoints,
            "prefix": cfg.prefix,
            "revision": listing.revision,
            "slots_used": listing.slots.iter().map(|(i, k)| json!({"slot": i, "session_key": k})).collect::<Vec<_>>(),
            "leases": views.iter().map(|(h, l, ttl)| etcd_lease_json(h, l, *ttl)).collect::<Vec<_>>(),
            "bad_keys": listing.bad.iter().map(ToString::to_string).collect::<Vec<_>>(),
        }));
    } else {
        say!(
            "{}  {} lease(s), {} slot(s) used  (revision {})",
            cfg.location(),
            listing.leases.len(),
            listing.slots.len(),
            listing.revision
        );
        if !views.is_empty() {
            say!("{}", table(&ETCD_LEASE_HEADER, &etcd_lease_rows(&views)));
        }
        for b in &listing.bad {
            say!("  warning: {b}");
        }
    }
    Ok(EXIT_OK)
}

fn request(opts: &AcquireOpts, owner_pid: u64) -> Result<AcquireRequest, Failure> {
    Ok(AcquireRequest {
        session_id: opts.session.clone(),
        surface: Some(opts.surface.clone()),
        metadata: metadata_of(opts)?,
        owner_pid,
        cap: opts.max.filter(|n| *n > 0),
        track_liveness: opts.track_liveness,
        lock_timeout: Duration::ZERO,
    })
}

/// What to do about a refusal on etcd (the file backend's advice names its registry).
fn advice(reason: Reason, cfg: &EtcdConfig) -> String {
    match reason {
        Reason::SessionCoordinationUnavailable => format!(
            "Check that etcd is up and reachable (etcdctl --endpoints {} endpoint health), then retry.",
            cfg.endpoints.join(",")
        ),
        other => other.advice().to_owned(),
    }
}

fn report_refusal(r: &Refusal, cfg: &EtcdConfig, as_json: bool, compact: bool) -> i32 {
    if as_json {
        let mut v = refusal_json(r);
        v["advice"] = Value::String(advice(r.reason, cfg));
        if compact { say!("{v}") } else { print_json(&v) }
    } else {
        say_err!("{}\nwhat to do: {}", refusal_stderr(r), advice(r.reason, cfg));
    }
    r.reason.exit_code()
}

/// Connect and acquire; report the outcome. `renewed`: hold/run keep the lease alive.
fn acquire_reported(
    cfg: &EtcdConfig,
    req: &AcquireRequest,
    as_json: bool,
    renewed: bool,
) -> Result<(Etcd, EtcdGrant), i32> {
    let etcd = match Etcd::connect(cfg) {
        Ok(e) => e,
        Err(e) => {
            let r = Refusal {
                reason: Reason::SessionCoordinationUnavailable,
                message: format!("leasectl could not use etcd ({}): {e}. Nothing was granted.", cfg.location()),
                holder: None,
            };
            return Err(report_refusal(&r, cfg, as_json, renewed));
        }
    };
    match fence::acquire(&etcd, req) {
        Ok(g) => {
            if as_json {
                let v = etcd_grant_json(&g, cfg, req, renewed);
                if renewed { say!("{v}") } else { print_json(&v) }
            } else if !g.recorded {
                say!("granted (not recorded: an empty session id has nothing to fence)");
            } else {
                let how = if g.replaced.is_some() { " (same writer: replaced its own entry)" } else { "" };
                say!(
                    "granted lease {} for session {} to pid {} on host {}{how}\n  etcd: {}  key {}\n  \
                     etcd lease {:x}, TTL {}s, fencing token {}",
                    g.lease_id,
                    req.session_id,
                    req.owner_pid,
                    hostname(),
                    cfg.location(),
                    g.session_key,
                    g.etcd_lease_id,
                    g.ttl.as_secs(),
                    g.fencing_token
                );
                if renewed {
                    say!("  renewed every {:.1}s while leasectl runs", g.ttl.as_secs_f64() / 3.0);
                } else {
                    say!(
                        "  nobody renews it: it ends in {}s unless renewed \
                         (etcdctl --endpoints {} lease keep-alive {:x}); use `leasectl hold` or `run` to keep it",
                        g.ttl.as_secs(),
                        cfg.endpoints.join(","),
                        g.etcd_lease_id
                    );
                }
            }
            Ok((etcd, g))
        }
        Err(r) => Err(report_refusal(&r, cfg, as_json, renewed)),
    }
}

fn acquire(cfg: &EtcdConfig, opts: &AcquireOpts, owner: Option<u64>) -> Result<i32, Failure> {
    // SAFETY: getppid has no preconditions.
    let owner_pid = owner.unwrap_or_else(|| unsafe { libc::getppid() } as u64);
    if !opts.session.is_empty() && Prober::new().start_time(owner_pid).is_none() {
        return Err(Failure { code: EXIT_ERROR, message: format!("owner pid {owner_pid} is not a running process") });
    }
    let req = request(opts, owner_pid)?;
    Ok(match acquire_reported(cfg, &req, opts.json, false) {
        Ok(_) => EXIT_OK,
        Err(code) => code,
    })
}

fn release(cfg: &EtcdConfig, lease_id: &str, as_json: bool) -> Result<i32, Failure> {
    let etcd = connect(cfg)?;
    let r = fence::release(&etcd, lease_id).map_err(unavailable)?;
    if as_json {
        print_json(&json!({"released": r.removed, "lease_id": lease_id, "already_gone": !r.removed, "pruned": []}));
    } else if r.removed {
        say!("released lease {lease_id}");
    } else {
        say!("lease {lease_id} was already gone; nothing to do");
    }
    Ok(EXIT_OK)
}

fn force_release(cfg: &EtcdConfig, a: &ForceReleaseArgs) -> Result<i32, Failure> {
    let target = match (&a.lease_id, &a.session) {
        (Some(id), None) => Target::Lease(id.clone()),
        (None, Some(s)) => Target::Session(s.clone()),
        _ => return Err(usage("give either LEASE_ID or --session S")),
    };
    let etcd = connect(cfg)?;
    let r = fence::force_release(&etcd, &target, a.live, a.dry_run).map_err(|e| match e {
        ForceError::Unavailable(e) => unavailable(e),
        other => Failure { code: EXIT_ERROR, message: other.to_string() },
    })?;
    if r.live_owner {
        let who = super::output::live_owners_text(&r);
        let verb = if r.dry_run { "would revoke" } else { "revoked" };
        say_err!(
            "WARNING: {verb} the etcd lease of a LIVE owner: {}. It is told on its next renewal, but it may keep \
             writing until then, and a second owner can now acquire the session.",
            who
        );
    }
    if a.json {
        print_json(&json!({
            "backend": "etcd",
            "endpoints": cfg.endpoints,
            "prefix": cfg.prefix,
            "dry_run": r.dry_run,
            "live_owner": r.live_owner,
            "removed": r.removed.iter().map(|v| super::output::lease_json(v, None)).collect::<Vec<_>>(),
        }));
    } else {
        let verb = if r.dry_run { "would revoke" } else { "revoked" };
        say!("{}: force-release {verb} {} lease(s)", cfg.location(), r.removed.len());
        for v in &r.removed {
            say!("  {}  session {}  pid {}", v.entry.lease_id(), v.entry.session_id(), v.entry.pid());
        }
    }
    Ok(EXIT_OK)
}

/// Release a held grant at the end of `hold` / `run`; a failure leaves the lease to its TTL.
fn finish(etcd: &Etcd, grant: &EtcdGrant) -> Result<(), Failure> {
    fence::release_grant(etcd, grant).map(|_| ()).map_err(|e| Failure {
        code: EXIT_UNAVAILABLE,
        message: format!(
            "could not release lease {} ({e}); nobody renews it any more, so etcd ends it within {}s",
            grant.lease_id,
            grant.ttl.as_secs()
        ),
    })
}

/// The keep-alive loop could not start: give the lease back at once (CMD never runs).
fn cannot_renew(etcd: &Etcd, grant: &EtcdGrant, e: &std::io::Error) -> Failure {
    let _ = fence::release_grant(etcd, grant);
    Failure {
        code: EXIT_UNAVAILABLE,
        message: format!("cannot start renewing lease {} ({e}); released it", grant.lease_id),
    }
}

fn lost_message(session: &str, why: &str) -> String {
    format!("lost the lease on session {session}: {why}. Stop writing to this session now.")
}

fn hold(cfg: &EtcdConfig, opts: &AcquireOpts) -> Result<i32, Failure> {
    let req = request(opts, u64::from(std::process::id()))?;
    // Catch SIGINT/SIGTERM before the lease exists, so no signal can leave it behind.
    let signals = stop_signals()?;
    let (etcd, grant) = match acquire_reported(cfg, &req, opts.json, true) {
        Ok(g) => g,
        Err(code) => return Ok(code),
    };
    use std::io::Write;
    let _ = std::io::stdout().flush();
    if !grant.recorded {
        signals.wait();
        return Ok(EXIT_OK);
    }
    let lost: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let (slot, wake) = (Arc::clone(&lost), signals.waker());
    let keep = KeepAlive::start(cfg.clone(), grant.etcd_lease_id, grant.ttl, grant.granted_at, move |why| {
        if let Ok(mut s) = slot.lock() {
            *s = Some(why);
        }
        wake();
    })
    .map_err(|e| cannot_renew(&etcd, &grant, &e))?;
    signals.wait();
    keep.stop();
    let why = lost.lock().ok().and_then(|s| s.clone());
    if let Some(why) = why {
        // No release: the lease is gone, or etcd does not answer (a release would only
        // delay this exit past the TTL). Nobody renews it now, so it ends by itself.
        return Err(Failure { code: EXIT_UNAVAILABLE, message: lost_message(&opts.session, &why) });
    }
    finish(&etcd, &grant)?;
    Ok(EXIT_OK)
}

fn run_cmd(cfg: &EtcdConfig, opts: &AcquireOpts, cmd: &[String]) -> Result<i32, Failure> {
    let req = request(opts, u64::from(std::process::id()))?;
    let signals = stop_signals()?;
    let (etcd, grant) = match acquire_reported(cfg, &req, opts.json, true) {
        Ok(g) => g,
        Err(code) => return Ok(code),
    };
    let token = grant.fencing_token.to_string();
    let env = [
        ("LEASECTL_LEASE_ID", grant.lease_id.as_str()),
        ("LEASECTL_SESSION_ID", opts.session.as_str()),
        ("LEASECTL_FENCING_TOKEN", token.as_str()),
    ];
    let (tx, rx) = std::sync::mpsc::channel();
    let keep = if grant.recorded {
        let renew = KeepAlive::start(cfg.clone(), grant.etcd_lease_id, grant.ttl, grant.granted_at, move |why| {
            let _ = tx.send(why);
        });
        Some(renew.map_err(|e| cannot_renew(&etcd, &grant, &e))?)
    } else {
        None
    };
    // CMD gets a sixth of the TTL to stop after SIGTERM: the keep-alive reports a third before the end.
    let grace = (grant.ttl / 6).max(Duration::from_millis(300));
    let outcome = signals.run_supervised(cmd, &env, Some(LeaseLost { messages: rx, grace }));
    if let Some(k) = keep {
        k.stop();
    }
    match outcome {
        Ok(end) => match end.lost {
            Some(why) => {
                // No release, as in hold: the lease is gone or etcd does not answer.
                Err(Failure {
                    code: EXIT_UNAVAILABLE,
                    message: format!(
                        "{} CMD was stopped (SIGTERM, then SIGKILL after {:.1}s); its status was {}.",
                        lost_message(&opts.session, &why),
                        grace.as_secs_f64(),
                        end.code
                    ),
                })
            }
            None => {
                finish(&etcd, &grant)?;
                Ok(end.code)
            }
        },
        Err(e) => {
            finish(&etcd, &grant)?;
            let code = if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 };
            Err(Failure { code, message: format!("cannot run {:?}: {e}", cmd[0]) })
        }
    }
}
