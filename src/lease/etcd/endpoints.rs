//! One etcd client per endpoint, tried in turn. etcd-client's own balancer hands a
//! request to any endpoint listed, a dead one included ("tcp connect error"): with one
//! of two endpoints down most commands failed. Here a request goes to the endpoint that
//! answered last, and on to the next when one cannot be used; etcd is unavailable only
//! when no endpoint answers before the request's deadline.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use etcd_client::Client;
use tokio::time::Instant;

use super::EtcdConfig;

/// Whether a request may be sent again after an attempt whose outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resend {
    /// A read, a renewal, a revoke, a grant (an extra lease expires on its own), or a
    /// delete guarded by the owner's own lease: sending it twice changes nothing more.
    Safe,
    /// A write that must not land twice: only a request that never reached a server (no
    /// connection, or a server without a leader, which refuses before proposing) goes on.
    IfNotSent,
}

/// What one attempt's failure says about the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// It never reached a server that could act on it.
    No,
    /// It may have been acted on (no answer, a broken connection, a leader lost mid-way).
    Maybe,
    /// A server answered with a refusal: another endpoint would answer the same.
    Answered,
}

/// The longest one attempt on one endpoint may take, as a share of the request's bound:
/// a member whose leader just died holds requests until it notices (about a second), and
/// the others must still get their turn.
const ATTEMPT_SHARE: u32 = 3;
const ATTEMPT_MIN: Duration = Duration::from_millis(500);

/// Pause between rounds over every endpoint (an election takes about a second).
const ROUND_PAUSE: Duration = Duration::from_millis(200);

pub(crate) struct Endpoints {
    clients: Vec<(String, Client)>,
    /// The endpoint that answered last: tried first.
    preferred: AtomicUsize,
}

/// Why no endpoint gave an answer.
#[derive(Debug)]
pub(crate) struct NoAnswer {
    /// Each endpoint's last failure, in words.
    pub tried: Vec<(String, String)>,
    /// The last attempt may have been acted on (a write's outcome is unknown).
    pub outcome_unknown: bool,
    /// Nothing answered before the deadline.
    pub timed_out: bool,
    /// How long the endpoints were tried.
    pub within: Duration,
}

impl NoAnswer {
    /// `http://a:2379: cannot connect: connection refused; http://b:2379: no leader`
    pub(crate) fn describe(&self) -> String {
        let tried: Vec<String> = self.tried.iter().map(|(e, why)| format!("{e}: {why}")).collect();
        let mut text = tried.join("; ");
        if self.timed_out {
            let secs = crate::lease::words::human::duration(self.within.as_secs_f64());
            text.push_str(&if text.is_empty() {
                format!("no answer within {secs}")
            } else {
                format!("; tried again for {secs}")
            });
        }
        if self.outcome_unknown {
            text.push_str(" (the outcome is unknown)");
        }
        text
    }
}

impl Endpoints {
    /// A client for each endpoint. etcd-client connects lazily: nothing is dialled here.
    pub(crate) async fn connect(config: &EtcdConfig) -> Result<Endpoints, etcd_client::Error> {
        let mut clients = Vec::with_capacity(config.endpoints.len());
        let options = super::access::apply(config.connect_options());
        let mut first_error = None;
        for endpoint in &config.endpoints {
            // With a user, connecting authenticates: a member that is down is left out
            // while another answers (without one, nothing is dialled here).
            match Client::connect([endpoint.as_str()], Some(options.clone())).await {
                Ok(client) => clients.push((endpoint.clone(), client)),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match (clients.is_empty(), first_error) {
            (true, Some(e)) => Err(e),
            _ => Ok(Endpoints { clients, preferred: AtomicUsize::new(0) }),
        }
    }

    /// Ask every endpoint at once for a count of `prefix` (a read any role with the prefix
    /// may make) and take the first to answer as the one tried first: a member that takes
    /// connections but does not answer (stopped, overloaded) held every one-shot command
    /// up by an attempt's bound when it was listed first. Nothing answers within `bound`:
    /// the order stays as given.
    pub(crate) async fn prefer_first_to_answer(&self, prefix: &str, bound: Duration) {
        if self.clients.len() < 2 {
            return;
        }
        let mut asked = tokio::task::JoinSet::new();
        for (index, (_, client)) in self.clients.iter().enumerate() {
            let (mut client, prefix) = (client.clone(), prefix.to_owned());
            asked.spawn(async move {
                let options = etcd_client::GetOptions::new().with_prefix().with_count_only();
                client.get(prefix, Some(options)).await.map(|_| index)
            });
        }
        let first = tokio::time::timeout(bound, async {
            while let Some(done) = asked.join_next().await {
                if let Ok(Ok(index)) = done {
                    return Some(index);
                }
            }
            None
        });
        if let Ok(Some(index)) = first.await {
            self.preferred.store(index, Ordering::Relaxed);
        }
        asked.abort_all();
    }

    /// Ask every member at once, as [`Endpoints::prefer_first_to_answer`] does, and give
    /// the others `grace` after the first answer (a healthy member answers in
    /// milliseconds): what each said, `None` for an answer. The first to answer is
    /// tried first from now on.
    pub(crate) async fn check_members(
        &self,
        prefix: &str,
        bound: Duration,
        grace: Duration,
    ) -> Vec<(String, Option<String>)> {
        let mut asked = tokio::task::JoinSet::new();
        for (index, (_, client)) in self.clients.iter().enumerate() {
            let (mut client, prefix) = (client.clone(), prefix.to_owned());
            asked.spawn(async move {
                let options = etcd_client::GetOptions::new().with_prefix().with_count_only();
                (index, client.get(prefix, Some(options)).await.map(|_| ()).map_err(|e| in_words(&e)))
            });
        }
        let mut said: Vec<Option<Result<(), String>>> = vec![None; self.clients.len()];
        let started = Instant::now();
        let mut deadline = started + bound;
        let mut first = None;
        while let Ok(Some(done)) = tokio::time::timeout_at(deadline, asked.join_next()).await {
            let Ok((index, answer)) = done else { continue };
            if answer.is_ok() && first.is_none() {
                first = Some(index);
                deadline = deadline.min(Instant::now() + grace);
            }
            if let Some(slot) = said.get_mut(index) {
                *slot = Some(answer);
            }
        }
        asked.abort_all();
        if let Some(index) = first {
            self.preferred.store(index, Ordering::Relaxed);
        }
        let waited = deadline.saturating_duration_since(started).as_secs_f64();
        self.clients
            .iter()
            .zip(said)
            .map(|((endpoint, _), answer)| {
                let why = match answer {
                    Some(Ok(())) => None,
                    Some(Err(why)) => Some(why),
                    None if first.is_some() => Some(format!("no answer within {waited:.1} s; the others answered")),
                    None => Some(format!("no answer within {waited:.1} s")),
                };
                (endpoint.clone(), why)
            })
            .collect()
    }

    /// Send the request `make` builds to the endpoints in turn, the last to answer first,
    /// round after round until one answers or `within` has passed.
    pub(crate) async fn run<T, F>(
        &self,
        resend: Resend,
        within: Duration,
        make: impl Fn(Client) -> F,
    ) -> Result<T, (NoAnswer, Option<etcd_client::Error>)>
    where
        F: Future<Output = Result<T, etcd_client::Error>>,
    {
        let deadline = Instant::now() + within;
        let attempt_bound = (within / ATTEMPT_SHARE).max(ATTEMPT_MIN);
        let count = self.clients.len().max(1);
        let mut tried: Vec<(String, String)> = Vec::new();
        let mut round = 0u32;
        loop {
            let first = self.preferred.load(Ordering::Relaxed);
            for step in 0..count {
                let index = (first + step) % count;
                let Some((endpoint, client)) = self.clients.get(index) else { continue };
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err((NoAnswer { tried, outcome_unknown: false, timed_out: true, within }, None));
                }
                let bound = left.min(attempt_bound);
                let (why, sent, error) = match tokio::time::timeout(bound, make(client.clone())).await {
                    Ok(Ok(answer)) => {
                        self.preferred.store(index, Ordering::Relaxed);
                        return Ok(answer);
                    }
                    Ok(Err(e)) => (in_words(&e), was_sent(&e), Some(e)),
                    Err(_) => (format!("no answer within {:.1}s", bound.as_secs_f64()), Sent::Maybe, None),
                };
                remember(&mut tried, endpoint, why);
                match (sent, resend) {
                    (Sent::Answered, _) => {
                        return Err((NoAnswer { tried, outcome_unknown: false, timed_out: false, within }, error));
                    }
                    (Sent::Maybe, Resend::IfNotSent) => {
                        return Err((NoAnswer { tried, outcome_unknown: true, timed_out: false, within }, error));
                    }
                    _ => {}
                }
            }
            round += 1;
            let pause = (ROUND_PAUSE * round).min(Duration::from_secs(1));
            let left = deadline.saturating_duration_since(Instant::now());
            if left <= pause {
                return Err((NoAnswer { tried, outcome_unknown: false, timed_out: !left.is_zero(), within }, None));
            }
            tokio::time::sleep(pause).await;
        }
    }
}

/// One failure per endpoint, the latest.
fn remember(tried: &mut Vec<(String, String)>, endpoint: &str, why: String) {
    match tried.iter_mut().find(|(e, _)| e == endpoint) {
        Some(slot) => slot.1 = why,
        None => tried.push((endpoint.to_owned(), why)),
    }
}

/// Whether a failed request reached a server that may have acted on it.
fn was_sent(e: &etcd_client::Error) -> Sent {
    use etcd_client::Error as E;
    use tonic::Code;
    match e {
        E::TransportError(_) | E::IoError(_) => Sent::No,
        E::GRpcStatus(status) => {
            let message = status.message();
            match status.code() {
                // No connection could be made: the request never left.
                Code::Unavailable if message.contains("connect") => Sent::No,
                // etcd refuses before proposing when it has no leader (require_leader).
                Code::Unavailable if message.contains("no leader") => Sent::No,
                Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown | Code::Aborted => {
                    Sent::Maybe
                }
                _ => Sent::Answered,
            }
        }
        E::LeaseKeepAliveError(why) if why.contains("lease not found") => Sent::Answered,
        E::LeaseKeepAliveError(_) | E::WatchError(_) => Sent::Maybe,
        _ => Sent::Answered,
    }
}

/// A failure in words: etcd's own message, not the client library's debug dump.
pub(super) fn in_words(e: &etcd_client::Error) -> String {
    use etcd_client::Error as E;
    match e {
        E::GRpcStatus(status) => {
            let message = status.message();
            // tonic's transport message is "tcp connect error"; the OS says why, at the end
            // of the chain ("Connection refused (os error 111)", said without the number).
            let root = std::error::Error::source(status).map(|s| {
                let mut inner: &dyn std::error::Error = s;
                while let Some(next) = inner.source() {
                    inner = next;
                }
                inner
            });
            let cause = root
                .map(|r| match r.downcast_ref::<std::io::Error>() {
                    Some(io) if io.raw_os_error().is_some() => os_words(io),
                    _ => r.to_string(),
                })
                .filter(|c| !c.is_empty() && !message.contains(c.as_str()));
            match cause {
                Some(c) if message.contains("connect") => format!("cannot connect: {c}"),
                Some(c) => format!("{message} ({c})"),
                None => message.to_owned(),
            }
        }
        other => other.to_string(),
    }
}

/// An OS error as words: "connection refused", not "Connection refused (os error 111)".
fn os_words(io: &std::io::Error) -> String {
    let text = io.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    chars.next().map(|c| c.to_lowercase().chain(chars).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_connection_was_not_sent_a_lost_leader_mid_way_maybe_was() {
        let unavailable = |m: &str| etcd_client::Error::GRpcStatus(tonic::Status::unavailable(m));
        assert_eq!(was_sent(&unavailable("tcp connect error")), Sent::No);
        assert_eq!(was_sent(&unavailable("etcdserver: no leader")), Sent::No);
        assert_eq!(was_sent(&unavailable("etcdserver: leader changed")), Sent::Maybe);
        assert_eq!(
            was_sent(&etcd_client::Error::GRpcStatus(tonic::Status::not_found("lease not found"))),
            Sent::Answered
        );
        assert_eq!(was_sent(&etcd_client::Error::LeaseKeepAliveError("lease not found".into())), Sent::Answered);
    }
}
