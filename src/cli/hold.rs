//! `hold`: keep a lease until a signal, and what `hold` and `run` share: stop
//! signals, renewal, and what a lost lease is called.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use super::acquire::{Waiting, acquire_reported, request};
use super::args::AcquireOpts;
use super::{EXIT_LEASE_LOST, EXIT_OK, Failure, fail};
use crate::lease::{self, LeaseStore, Reason};

pub(super) fn stop_signals() -> Result<crate::supervise::StopSignals, Failure> {
    crate::supervise::StopSignals::install().map_err(|e| fail(format!("cannot install signal handlers: {e}")))
}

/// Start renewing a fresh grant (etcd); if that cannot start, give the lease back at once.
pub(super) fn renew(
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

pub(super) fn lost_message(session: &str, why: &str) -> String {
    format!("lost the lease on session {session}: {why}. Stop writing to this session now.")
}

pub(super) fn hold(
    store: &mut dyn LeaseStore,
    opts: &AcquireOpts,
    timeout: Duration,
    hints: &super::hints::Hints,
) -> Result<i32, Failure> {
    let req = request(store, opts, u64::from(std::process::id()), timeout)?;
    // Catch SIGINT/SIGTERM/SIGHUP before the lease exists, so no signal can leave it behind.
    let mut signals = stop_signals()?;
    let mut stopped = || signals.pending();
    let mut waiting = Waiting::of(opts.wait, &mut stopped);
    let grant = match acquire_reported(store, &req, opts.json, true, &mut waiting, hints) {
        Ok(g) => g,
        Err(code) => return Ok(code),
    };
    use std::io::Write;
    let _ = std::io::stdout().flush();
    if !opts.json {
        // How it ends, for the person at the terminal (stdout keeps the grant alone).
        say_err!("leasectl: holding it until Ctrl-C (or SIGTERM, SIGHUP), which releases it");
    }
    super::warn_if_ttl_too_short(opts.ttl);
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
    say_err!(
        "leasectl: hold: {on}: {what} lease {id} of session {}",
        crate::lease::words::human::escape(&opts.session)
    );
    Ok(EXIT_OK)
}

/// SIGINT, SIGTERM, SIGHUP by name; another number as it is.
pub(super) fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        n => format!("signal {n}"),
    }
}
