//! What a link knows of its host, and every change of it: a session opened, opening
//! failed (tried again after a pause that doubles), the session lost, a listing or an
//! answer come, the answers lagging. Plain changes under the link's mutex, no I/O, so
//! each is tested on its own; the link decides when to make them and whom to tell.

use std::collections::HashMap;
use std::process::{Child, ChildStdin};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use super::Watcher;
use crate::lease::error::{Error, HostFault};
use crate::lease::ssh::wire::{Answer, Ready, ServerLine, WireListing};

/// The pause before trying a host that failed again, doubled each time up to the most.
pub(super) const FIRST_RETRY: Duration = Duration::from_secs(1);
pub(super) const MOST_RETRY: Duration = Duration::from_secs(30);

/// An open session: what requests are written to, and the ssh process to reap.
pub(super) struct Conn {
    pub(super) stdin: ChildStdin,
    pub(super) child: Child,
    /// Which opening made it: a reader of an older session never takes a newer one.
    pub(super) generation: u64,
}

/// Why a host gives no listings, and in which words (unreachable, login refused, junk,
/// cannot serve).
#[derive(Clone)]
pub(super) struct Down {
    pub(super) why: String,
    pub(super) fault: HostFault,
}

impl Down {
    pub(super) fn lost(why: String) -> Down {
        Down { why, fault: HostFault::Unreachable }
    }

    pub(super) fn error(&self, host: &str) -> Error {
        Error::Unreachable { host: host.to_owned(), why: self.why.clone(), fault: self.fault }
    }
}

#[derive(Default)]
pub(super) struct State {
    pub(super) conn: Option<Conn>,
    /// A thread is opening a session (since then): the others wait for it.
    pub(super) connecting: Option<Instant>,
    pub(super) generation: u64,
    /// Why the host cannot be reached or cannot serve now, if so.
    pub(super) down: Option<Down>,
    pub(super) retry_at: Option<Instant>,
    pub(super) retry_pause: Duration,
    pub(super) ready: Option<Ready>,
    pub(super) next_id: u64,
    pub(super) pending: HashMap<u64, Sender<Result<Answer, Error>>>,
    pub(super) subscribed: bool,
    /// The subscription was answered on the current session: every registry's listing
    /// has come (the server sends them before its answer).
    pub(super) fed: bool,
    pub(super) listings: HashMap<String, WireListing>,
    /// Bumped with every listing that arrives and every change of reachability: a reader
    /// that saw the same number has nothing new to read.
    pub(super) changes: u64,
    pub(super) watchers: Vec<Watcher>,
    pub(super) reconnecting: bool,
    /// The operator asked to try again now (the console's `r`): the pause is cut short.
    pub(super) retry_now: bool,
    /// How long the last ping's answer took, when over `LAG_AFTER`.
    pub(super) lag: Option<Duration>,
    /// The leasectl version the host's last hello said (escaped for a terminal).
    pub(super) version: Option<String>,
}

impl State {
    /// A session opened: the host is up and its pause back to the first. True when it
    /// had been down (its watchers hear that it is back).
    pub(super) fn opened(&mut self, conn: Conn, ready: Ready, version: String) -> bool {
        self.conn = Some(conn);
        self.version = Some(version);
        self.ready = Some(ready);
        self.changes += 1;
        self.retry_at = None;
        self.retry_pause = FIRST_RETRY;
        self.down.take().is_some()
    }

    /// Opening failed: the host is down, tried again after a pause that doubles from the
    /// first up to the most.
    pub(super) fn open_failed(&mut self, down: Down, now: Instant) {
        let pause = if self.retry_pause.is_zero() { FIRST_RETRY } else { (self.retry_pause * 2).min(MOST_RETRY) };
        self.retry_pause = pause;
        self.retry_at = Some(now + pause);
        self.changes += 1;
        self.down = Some(down);
    }

    /// The session `generation` ended: its connection (to reap), unless a newer session
    /// has taken its place. Its listings are no longer fed, and no lag is measured.
    pub(super) fn take_ended(&mut self, generation: u64) -> Option<Conn> {
        let conn = self.conn.take_if(|c| c.generation == generation)?;
        self.fed = false;
        self.lag = None;
        Some(conn)
    }

    /// The session was lost (after [`State::take_ended`]): every request waiting is
    /// answered with why, and the host is tried again after the first pause.
    pub(super) fn lost(&mut self, down: Down, host: &str, now: Instant) {
        for (_, tx) in self.pending.drain() {
            let _ = tx.send(Err(down.error(host)));
        }
        self.down = Some(down);
        self.changes += 1;
        self.retry_at = Some(now + FIRST_RETRY);
        self.retry_pause = FIRST_RETRY;
    }

    /// A host that is down is tried at once, its pause back to the first; one that
    /// answers is left alone. True when it was down.
    pub(super) fn retry_now(&mut self) -> bool {
        if self.conn.is_some() || self.down.is_none() {
            return false;
        }
        self.retry_at = None;
        self.retry_pause = Duration::ZERO;
        self.retry_now = true;
        true
    }

    /// How long the last ping took, when it lags (`None`: it does not). True when that
    /// is news: lagging began or ended, or the lag moved by a second or more.
    pub(super) fn lag_measured(&mut self, lag: Option<Duration>) -> bool {
        let changed = match (self.lag, lag) {
            (None, None) => false,
            (Some(_), None) | (None, Some(_)) => true,
            (Some(a), Some(b)) => a.abs_diff(b) >= Duration::from_secs(1),
        };
        if changed {
            self.lag = lag;
            self.changes += 1;
        }
        changed
    }

    /// A line of an open session: an answer goes to its request, a listing is kept (a
    /// registry not known before joins the host's). True when watchers should hear.
    pub(super) fn take_line(&mut self, line: ServerLine) -> bool {
        match line {
            ServerLine::Answer { id, answer } => {
                if let Some(tx) = self.pending.remove(&id) {
                    let _ = tx.send(answer.map_err(crate::lease::ssh::wire::WireError::into_error));
                }
                false
            }
            ServerLine::Listing { profile, listing } => {
                if let Some(r) = self.ready.as_mut()
                    && !r.profiles.contains(&profile)
                {
                    r.profiles.push(profile.clone());
                }
                self.listings.insert(profile, *listing);
                self.changes += 1;
                true
            }
            ServerLine::Hello(_) | ServerLine::Ready(_) | ServerLine::Refused(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::sync::mpsc::channel;

    /// A session's connection to a real process (`cat`, which waits on its stdin).
    fn conn(generation: u64) -> Conn {
        let mut child = Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::null()).spawn().expect("cat starts");
        let stdin = child.stdin.take().expect("a pipe");
        Conn { stdin, child, generation }
    }

    fn reap(conn: Option<Conn>) {
        if let Some(mut c) = conn {
            drop(c.stdin);
            let _ = c.child.wait();
        }
    }

    fn ready(profiles: &[&str]) -> Ready {
        Ready {
            home: "/h".into(),
            profiles: profiles.iter().map(|p| (*p).to_owned()).collect(),
            default: "root".into(),
        }
    }

    fn listing_line(profile: &str) -> ServerLine {
        let listing = WireListing {
            exists: true,
            modified: None,
            cap: crate::lease::home::config::CapSetting { cap: None, key: None, warnings: Vec::new() },
            leases: Ok(Vec::new()),
            remote: None,
            owners: HashMap::new(),
            sessions: None,
        };
        ServerLine::Listing { profile: profile.into(), listing: Box::new(listing) }
    }

    #[test]
    fn a_session_opened_is_up_with_its_registries_and_nothing_to_tell_the_first_time() {
        let mut s = State::default();
        let back = s.opened(conn(1), ready(&["root", "p1"]), "0.1.0".into());
        assert!(!back, "it was never down");
        assert!(s.conn.is_some() && s.down.is_none());
        assert_eq!(s.ready.as_ref().map(|r| r.profiles.len()), Some(2));
        assert_eq!((s.changes, s.retry_at, s.retry_pause), (1, None, FIRST_RETRY));
        reap(s.conn.take());
    }

    #[test]
    fn opening_that_fails_is_tried_again_after_a_pause_that_doubles_to_thirty_seconds() {
        let mut s = State::default();
        let now = Instant::now();
        let mut pauses = Vec::new();
        for _ in 0..7 {
            s.open_failed(Down::lost("ssh: connect refused".into()), now);
            pauses.push(s.retry_pause.as_secs());
            assert_eq!(s.retry_at, Some(now + s.retry_pause));
        }
        assert_eq!(pauses, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(s.changes, 7);
        assert!(s.down.as_ref().is_some_and(|d| d.why == "ssh: connect refused"));
        // The operator's `r`: tried now, and the pause starts again from the first.
        assert!(s.retry_now());
        assert_eq!((s.retry_at, s.retry_now), (None, true));
        s.open_failed(Down::lost("still refused".into()), now);
        assert_eq!(s.retry_pause, FIRST_RETRY);
    }

    #[test]
    fn a_lost_session_answers_its_waiting_requests_and_reconnecting_says_it_is_back() {
        let mut s = State::default();
        s.opened(conn(1), ready(&["root"]), "0.1.0".into());
        s.fed = true;
        s.lag = Some(Duration::from_secs(3));
        let (tx, rx) = channel();
        s.pending.insert(7, tx);
        // A reader of an older session takes nothing.
        assert!(s.take_ended(0).is_none() && s.conn.is_some());
        let ended = s.take_ended(1);
        assert!(ended.is_some() && s.conn.is_none());
        assert!(!s.fed && s.lag.is_none(), "nothing fed or lagging once the session is gone");
        reap(ended);
        let now = Instant::now();
        s.lost(Down { why: "the session ended (exit 255)".into(), fault: HostFault::Unreachable }, "gw1", now);
        match rx.try_recv() {
            Ok(Err(Error::Unreachable { host, why, .. })) => {
                assert_eq!((host.as_str(), why.as_str()), ("gw1", "the session ended (exit 255)"));
            }
            other => panic!("the waiting request was answered with {other:?}"),
        }
        assert!(s.pending.is_empty());
        assert_eq!((s.retry_at, s.retry_pause, s.changes), (Some(now + FIRST_RETRY), FIRST_RETRY, 2));
        // Back: said, once.
        assert!(s.opened(conn(2), ready(&["root"]), "0.1.0".into()), "back after being down");
        assert!(s.down.is_none() && s.retry_at.is_none());
        assert!(!s.retry_now(), "a host that answers is not retried");
        reap(s.conn.take());
    }

    #[test]
    fn lag_is_news_when_it_begins_ends_or_moves_by_a_second() {
        let mut s = State::default();
        let ms = Duration::from_millis;
        assert!(!s.lag_measured(None));
        assert!(s.lag_measured(Some(ms(1_500))), "begins");
        assert!(!s.lag_measured(Some(ms(2_000))), "moved half a second");
        assert_eq!(s.lag, Some(ms(1_500)), "the lag said stands");
        assert!(s.lag_measured(Some(ms(2_600))), "moved more than a second");
        assert!(s.lag_measured(None), "ends");
        assert_eq!(s.changes, 3);
    }

    #[test]
    fn answers_go_to_their_request_and_listings_are_kept_with_new_registries() {
        let mut s = State { ready: Some(ready(&["root"])), ..State::default() };
        let (tx, rx) = channel();
        s.pending.insert(3, tx);
        assert!(!s.take_line(ServerLine::Answer { id: 9, answer: Ok(Answer::Pong) }), "no request waits for 9");
        assert!(rx.try_recv().is_err() && s.pending.len() == 1);
        assert!(!s.take_line(ServerLine::Answer { id: 3, answer: Ok(Answer::Pong) }), "for its caller only");
        assert!(matches!(rx.try_recv(), Ok(Ok(Answer::Pong))) && s.pending.is_empty());
        assert!(s.take_line(listing_line("p9")));
        assert_eq!(s.ready.as_ref().map(|r| r.profiles.clone()), Some(vec!["root".to_owned(), "p9".to_owned()]));
        assert!(s.listings.contains_key("p9"));
        assert!(s.take_line(listing_line("p9")));
        assert_eq!(s.ready.as_ref().map(|r| r.profiles.len()), Some(2), "a registry joins once");
        assert_eq!(s.changes, 2);
    }
}
