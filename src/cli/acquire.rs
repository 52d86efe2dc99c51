//! `acquire`: ask the fence for a lease, waiting when asked to, and say what happened.

use std::time::Duration;

use serde_json::{Map, Value};

use super::args::AcquireOpts;
use super::hints::Hints;
use super::messages::note_stdout;
use super::messages::stdout_failure;
use super::{EXIT_ERROR, EXIT_OK, Failure, fail, output, print_json, usage};
use crate::lease::{
    self, AcquireRequest, LeaseStore, Reason, owners::liveness::Prober, words::refusal::refusal_stderr,
};

pub(super) fn metadata_of(opts: &AcquireOpts) -> Result<Map<String, Value>, Failure> {
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

pub(super) fn request(
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
pub(super) enum Banner {
    Stdout,
    Stderr,
    Quiet,
}

/// How long `--wait` keeps asking, and what ends the wait early (a stop signal).
pub(super) struct Waiting<'a> {
    until: Option<std::time::Instant>,
    stopped: &'a mut dyn FnMut() -> bool,
    /// Say nothing while waiting (`run -q`: its stderr is the work's).
    quiet: bool,
}

impl Waiting<'_> {
    /// `wait`: seconds, within the bound --wait's parser holds it to.
    pub(super) fn of(wait: Option<f64>, stopped: &mut dyn FnMut() -> bool) -> Waiting<'_> {
        let until = wait.map(|secs| std::time::Instant::now() + Duration::from_secs_f64(secs));
        Waiting { until, stopped, quiet: false }
    }

    /// Wait without naming the holder (`run -q`).
    pub(super) fn quietly(self, quiet: bool) -> Self {
        Waiting { quiet, ..self }
    }
}

/// A signal for a waiter: the registry (or the etcd prefix) changed. The owner's release
/// is a change; an owner that dies changes nothing, which the waiter's own timer covers.
fn wake_on_change(location: &lease::Location) -> Option<std::sync::mpsc::Receiver<()>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let scope = lease::WatchScope { locations: vec![location.clone()], discover_root: None, debounce: WAKE_DEBOUNCE };
    lease::watch(&scope, std::sync::Arc::new(move |_| tx.send(()).is_ok())).ok()?;
    Some(rx)
}

/// How long a waiter's change feed gathers a burst (a release is one rename).
const WAKE_DEBOUNCE: Duration = Duration::from_millis(2);

/// Ask the fence; with --wait, ask again while the refusal is a conflict (the session
/// held, every slot taken) and time is left: as soon as the registry (or etcd prefix)
/// changes, and at the latest after 50 ms, doubling up to 1 s (an owner that dies changes
/// nothing). The holder is named once, on stderr.
pub(super) fn acquire_waiting(
    store: &mut dyn LeaseStore,
    req: &AcquireRequest,
    waiting: &mut Waiting,
) -> Result<lease::Grant, lease::Refusal> {
    let answer = wait_in_line(store, req, waiting);
    // Served or given up: out of the line at once, not when its place's lease runs out.
    store.leave_line();
    answer
}

fn wait_in_line(
    store: &mut dyn LeaseStore,
    req: &AcquireRequest,
    waiting: &mut Waiting,
) -> Result<lease::Grant, lease::Refusal> {
    let mut pause = Duration::from_millis(50);
    let mut named = false;
    let mut joined = false;
    // Made at the first refusal: polling with a backoff alone took 31 s for 100 jobs of
    // 50 ms on one session.
    let mut changes: Option<Option<std::sync::mpsc::Receiver<()>>> = None;
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
        // In line (etcd): served in arrival order. A line that cannot be joined leaves
        // the wait as it was before lines existed: asking again until served.
        let place = if joined {
            None
        } else {
            joined = true;
            match store.join_line(req) {
                Ok(p) => p,
                Err(e) => {
                    if !waiting.quiet {
                        say_err!("leasectl: warning: cannot stand in line ({e}); asking again until served");
                    }
                    None
                }
            }
        };
        if !named && !waiting.quiet {
            named = true;
            // A capacity refusal names its oldest holder, but the session itself is free.
            let holder = |h: &lease::Entry| {
                format!(
                    "pid {} ({}, {})",
                    h.pid(),
                    crate::lease::words::human::escape(h.surface().unwrap_or("-")),
                    lease::owners::owner::command_name(h.pid()).unwrap_or_else(|| "-".into())
                )
            };
            let session = crate::lease::words::human::escape(&req.session_id);
            let why = match (refusal.reason, refusal.holder.as_deref()) {
                (Reason::SessionNotOwned, Some(h)) => format!("session {session} is held by {}", holder(h)),
                (Reason::SessionNotOwned, None) => format!("session {session} is promised to those in line first"),
                (_, Some(h)) => format!("every slot is taken (the oldest by {})", holder(h)),
                (_, None) => "every slot is taken".into(),
            };
            let line = match place {
                Some(0) => ", first in line".to_owned(),
                Some(n) => format!(", in line after {}", crate::lease::words::human::plural(n, "other", "others")),
                None => String::new(),
            };
            say_err!(
                "leasectl: {why}; waiting up to {}{line}",
                crate::lease::words::human::duration(left.as_secs_f64().ceil())
            );
        }
        let feed = changes.get_or_insert_with(|| wake_on_change(store.location()));
        match feed {
            Some(rx) => match rx.recv_timeout(pause.min(left)) {
                // Changed: ask again now, after whatever else came in the same moment.
                Ok(()) => while rx.try_recv().is_ok() {},
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => pause = (pause * 2).min(Duration::from_secs(1)),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    *feed = None;
                    std::thread::sleep(pause.min(left));
                }
            },
            None => {
                std::thread::sleep(pause.min(left));
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
    }
}

pub(super) fn acquire_reported(
    store: &mut dyn LeaseStore,
    req: &AcquireRequest,
    as_json: bool,
    held: bool,
    waiting: &mut Waiting,
    hints: &Hints,
) -> Result<lease::Grant, i32> {
    acquire_reported_to(store, req, as_json, held, Banner::Stdout, waiting, hints)
}

pub(super) fn acquire_reported_to(
    store: &mut dyn LeaseStore,
    req: &AcquireRequest,
    as_json: bool,
    held: bool,
    banner: Banner,
    waiting: &mut Waiting,
    hints: &Hints,
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
                show(&super::json::grant(&g, store.location(), req, held));
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
                        let _ = write!(std::io::stderr(), "{}", crate::lease::words::human::escape_layout(&text));
                    }
                    Banner::Quiet => {}
                }
            }
            // A grant whose lease id nobody could read would be held by no one who knows it.
            if let Some((_, e)) = stdout_failure() {
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
            // The core's advice names commands; they get this command line's registry
            // options, and so do the message's for a person (JSON keeps the core's words,
            // as `ls --json` reports the same error).
            let mut advice = hints.apply(&store.advice(&r));
            // The held session or the full cap may be waited for: this command, with --wait.
            if waiting.until.is_none() && matches!(r.reason, Reason::SessionNotOwned | Reason::MaxConcurrentSessions) {
                advice.push_str(&format!(" To wait instead: `{}`.", with_wait()));
            }
            if as_json {
                show(&super::json::refusal(&r, &advice));
            } else {
                let shown = crate::lease::Refusal {
                    message: crate::lease::words::human::escape(&hints.apply(&r.message)).into_owned(),
                    ..r.clone()
                };
                say_err!("{}\nwhat to do: {advice}", refusal_stderr(&shown));
            }
            Err(r.reason.exit_code())
        }
    }
}

/// This command line again with `--wait 60` (before a `--`, where `run`'s CMD begins),
/// each word quoted for the shell: it waits for the session or a slot instead of failing.
fn with_wait() -> String {
    let mut args: Vec<String> = std::env::args().collect();
    if let Some(first) = args.first_mut() {
        "leasectl".clone_into(first);
    }
    let at = args.iter().position(|a| a == "--").unwrap_or(args.len());
    args.splice(at..at, ["--wait".to_owned(), "60".to_owned()]);
    args.iter().map(|w| crate::lease::words::human::shell_word(w)).collect::<Vec<_>>().join(" ")
}

pub(super) fn acquire(
    store: &mut dyn LeaseStore,
    opts: &AcquireOpts,
    owner: Option<u64>,
    timeout: Duration,
    hints: &Hints,
) -> Result<i32, Failure> {
    let parent = rustix::process::getppid().map(|p| u64::from(p.as_raw_nonzero().get().unsigned_abs()));
    // No parent in this pid namespace: its first process, or one `docker exec` or
    // `nsenter` started from outside. Nobody here to own the lease by default.
    let Some(owner_pid) = owner.or(parent) else {
        return Err(fail(
            "this leasectl's parent runs outside its pid namespace (its first process, or started by docker exec \
             or nsenter), so no process here owns the lease by default: name one with --owner-pid PID (--owner-pid \
             $$ from a shell that holds it)",
        ));
    };
    if !opts.session.is_empty() && Prober::new().start_time(owner_pid).is_none() {
        return Err(fail(format!("owner pid {owner_pid} is not a running process")));
    }
    let req = request(store, opts, owner_pid, timeout)?;
    let mut never = || false;
    let mut waiting = Waiting::of(opts.wait, &mut never);
    Ok(match acquire_reported(store, &req, opts.json, false, &mut waiting, hints) {
        Ok(_) => EXIT_OK,
        Err(code) => code,
    })
}
