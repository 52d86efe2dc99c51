//! `run`: hold a lease while a command runs (the relay, the keeper, the work).

use std::time::Duration;

use serde_json::json;

use super::acquire::{Banner, Waiting, acquire_reported_to, request};
use super::args;
use super::hold::{lost_message, renew, stop_signals};
use super::{EXIT_LEASE_LOST, Failure, fail};
use crate::lease::{self, LeaseStore, Reason};
use crate::supervise::Supervision;
use crate::supervise::keeper;

pub(super) fn run_cmd(
    store: &mut dyn LeaseStore,
    a: &args::RunArgs,
    relay: u32,
    timeout: Duration,
    hints: &super::hints::Hints,
) -> Result<i32, Failure> {
    let (opts, quiet, cmd, conflict_exit_code) = (&a.opts, a.quiet, &a.cmd, a.conflict_exit_code);
    let mut req = request(store, opts, u64::from(std::process::id()), timeout)?;
    // How to find the work should this keeper die (even by SIGKILL, when setsid'd
    // processes outlive it): every process of it carries LEASECTL_LEASE_ID.
    req.metadata.insert(lease::owners::liveness::WORK_KEY.into(), json!({"env": lease::owners::liveness::WORK_ENV}));
    let signals = stop_signals()?;
    // Processes CMD leaves behind become this keeper's children: the lease waits for them.
    keeper::become_subreaper().map_err(|e| fail(format!("cannot keep CMD's processes: {e}")))?;
    let banner = if quiet { Banner::Quiet } else { Banner::Stderr };
    let mut signals = signals;
    let mut stopped = || signals.pending();
    let mut waiting = Waiting::of(opts.wait, &mut stopped).quietly(quiet);
    let grant = match acquire_reported_to(store, &req, opts.json, true, banner, &mut waiting, hints) {
        Ok(g) => g,
        // flock -E: a conflict can have an exit code of its own.
        Err(code) if [Reason::SessionNotOwned, Reason::MaxConcurrentSessions].iter().any(|r| r.exit_code() == code) => {
            return Ok(conflict_exit_code.unwrap_or(code));
        }
        Err(code) => return Ok(code),
    };
    if !quiet {
        super::warn_if_ttl_too_short(opts.ttl);
    }
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
