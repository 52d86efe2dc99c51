//! The owner's keep-alive loop: renew the etcd lease every TTL/3 on a thread of its
//! own (own runtime, own connection), and tell the owner as soon as the lease is
//! gone or can no longer be proven alive, at least TTL/3 before it can end, so the
//! owner stops writing before another host may take the session over.

use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::EtcdConfig;
use super::endpoints::{Endpoints, Resend};

/// How soon a failed renewal is tried again (bounded by TTL/3).
const RETRY: Duration = Duration::from_millis(500);

/// A running keep-alive loop. Dropping it stops the loop (the lease then ends within its TTL).
pub(crate) struct KeepAlive {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl KeepAlive {
    /// Renew `etcd_lease_id` (granted for `ttl` at or after `granted_at`) until stopped.
    /// `on_lost` runs at most once, on the loop's thread, with a message for the operator:
    /// when etcd says the lease is gone, or when no renewal succeeded for 2/3 of the TTL.
    /// An error when the loop cannot be started: then nothing renews the lease.
    pub(crate) fn start(
        config: EtcdConfig,
        etcd_lease_id: i64,
        ttl: Duration,
        granted_at: Instant,
        on_lost: impl FnOnce(String) + Send + 'static,
    ) -> std::io::Result<KeepAlive> {
        let (stop, stopped) = channel();
        let thread = std::thread::Builder::new().name("etcd-keepalive".into()).spawn(move || {
            let lost = renew_until_stopped(&config, etcd_lease_id, ttl, granted_at, &stopped);
            if let Some(message) = lost {
                on_lost(message);
            }
        })?;
        Ok(KeepAlive { stop: Some(stop), thread: Some(thread) })
    }

    /// Stop renewing and wait for the loop to end (at most one request timeout).
    pub(crate) fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// The outcome of one renewal.
enum Renewal {
    Renewed,
    /// etcd answered that the lease does not exist (revoked, or already expired).
    Gone,
    Failed(String),
}

/// The loop; returns why the lease was lost, or None when stopped.
fn renew_until_stopped(
    config: &EtcdConfig,
    id: i64,
    ttl: Duration,
    granted_at: Instant,
    stopped: &Receiver<()>,
) -> Option<String> {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return Some(format!("cannot start the keep-alive runtime: {e}")),
    };
    let period = ttl / 3;
    // The lease cannot end before `last_ok + ttl` (etcd restarts the TTL when it gets the
    // renewal, after we sent it). Give up 1/3 TTL before that: time to stop the work.
    let mut last_ok = granted_at;
    let mut next = granted_at + period;
    let mut last_error = String::from("the renewal loop did not get to run in time (was this process stopped?)");
    let mut endpoints: Option<Endpoints> = None;
    loop {
        let deadline = last_ok + ttl - ttl / 3;
        let now = Instant::now();
        if now >= deadline {
            return Some(format!(
                "could not renew etcd lease {id:x} for {:.1}s (last error: {last_error}); it ends at most {:.1}s \
                 from now, after which another owner may take the session",
                now.duration_since(last_ok).as_secs_f64(),
                (last_ok + ttl).saturating_duration_since(now).as_secs_f64()
            ));
        }
        let wait = next.saturating_duration_since(now).min(deadline - now);
        match stopped.recv_timeout(wait) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return None,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if Instant::now() < next {
            continue; // woke for the deadline check
        }
        let sent = Instant::now();
        let bound = deadline.saturating_duration_since(sent).min(config.timeout).max(Duration::from_millis(100));
        match rt.block_on(renew_once(config, &mut endpoints, id, bound)) {
            Renewal::Renewed => {
                last_ok = sent;
                next = sent + period;
            }
            Renewal::Gone => {
                return Some(format!(
                    "etcd says lease {id:x} no longer exists (revoked by a force-release, or expired): \
                     another owner may hold the session now"
                ));
            }
            Renewal::Failed(why) => {
                // Every endpoint was tried; the next try starts again from the next one.
                last_error = why;
                next = Instant::now() + RETRY.min(period);
            }
        }
    }
}

async fn renew_once(config: &EtcdConfig, endpoints: &mut Option<Endpoints>, id: i64, bound: Duration) -> Renewal {
    if endpoints.is_none() {
        match Endpoints::connect(config).await {
            Ok(e) => *endpoints = Some(e),
            Err(e) => return Renewal::Failed(e.to_string()),
        }
    }
    let Some(to) = endpoints.as_ref() else { return Renewal::Failed("no etcd client".into()) };
    // One request, one answer: the answer's TTL is what etcd restarted the lease with. A
    // renewal may go to any endpoint that answers (a killed node, a leader election).
    match to.run(Resend::Safe, bound, |mut c| async move { c.lease_keep_alive(id).await.map(|_| ()) }).await {
        Ok(()) => Renewal::Renewed,
        Err((_, Some(etcd_client::Error::LeaseKeepAliveError(why)))) if why.contains("lease not found") => {
            Renewal::Gone
        }
        Err((none, _)) => Renewal::Failed(none.describe()),
    }
}
