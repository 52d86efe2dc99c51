//! `ls --watch`: each change as a line as it happens, like `kubectl get -w`, until
//! interrupted. Registries are read again when the change feed says one changed, and
//! every second besides: an owner that dies changes no file.

use std::sync::Arc;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::Duration;

use serde_json::json;

use super::args::{Format, LsArgs};
use super::output::{lease_json, short_id};
use super::{EXIT_ERROR, Failure, stdout_failure};
use crate::lease::changes::{self, LeaseEvent};
use crate::lease::human::escape;
use crate::lease::owner::owner_infos;
use crate::lease::{self, LeaseStore, LeaseView, WatchScope};

/// How often liveness is judged again without a file change.
const REJUDGE: Duration = Duration::from_secs(1);

pub fn watch(stores: &mut [Box<dyn LeaseStore>], a: &LsArgs) -> Result<i32, Failure> {
    let (tx, rx) = channel::<()>();
    let scope = WatchScope {
        locations: stores.iter().map(|s| s.location().clone()).collect(),
        discover_root: None,
        debounce: Duration::from_millis(20),
    };
    lease::watch(&scope, Arc::new(move |_| tx.send(()).is_ok()))?;
    let format = a.format.format();
    if format == Format::Tsv && !a.format.no_headers {
        say!("TIME\tEVENT\tPROFILE\tLEASE\tSESSION\tSURFACE\tPID\tOWNER\tLIVENESS");
    }
    // What each registry held at the last reading (None: unreadable then).
    let mut last: Vec<Option<Vec<LeaseView>>> = vec![None; stores.len()];
    let mut first = true;
    loop {
        for (store, seen) in stores.iter_mut().zip(last.iter_mut()) {
            let listing = store.read();
            let name = listing.location.name().to_owned();
            let now_views = match listing.leases {
                Ok(views) => Some(views),
                Err(e) => {
                    if seen.is_some() || first {
                        print_problem(format, &name, &e.to_string());
                    }
                    *seen = None;
                    continue;
                }
            };
            let events = match (seen.as_ref(), &now_views) {
                (_, None) => vec![],
                (None, Some(new)) if first => changes::present(new),
                (None, Some(new)) => changes::between(&[], new),
                (Some(old), Some(new)) => changes::between(old, new),
            };
            // Filtered after the diff: an owner dying is shown under --liveness dead.
            let events: Vec<LeaseEvent> = events.into_iter().filter(|e| super::ls::selected(&e.view, a)).collect();
            print_events(format, &name, &events);
            *seen = now_views;
        }
        first = false;
        // Nobody reads any more (`| head` exited): stop, whether or not a write failed yet.
        if stdout_failure().is_some() || reader_gone() {
            return Ok(EXIT_ERROR);
        }
        match rx.recv_timeout(REJUDGE) {
            Ok(()) | Err(RecvTimeoutError::Timeout) => while rx.try_recv().is_ok() {},
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Failure { code: EXIT_ERROR, message: "the change feed stopped".into() });
            }
        }
    }
}

/// True when standard output is a pipe whose reader has closed it (poll reports POLLERR).
fn reader_gone() -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(&stdout, PollFlags::empty())];
    let zero = rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 };
    poll(&mut fds, Some(&zero)).is_ok_and(|n| n > 0) && fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP)
}

fn stamp() -> String {
    // Fixed width, UTC, milliseconds: lines stay aligned and sort as text.
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

fn print_problem(format: Format, profile: &str, problem: &str) {
    match format {
        Format::Json => {
            let line = json!({"time": stamp(), "event": "unreadable", "profile": profile, "error": problem});
            say_json_line(&line);
        }
        _ => say!("{}  {}  unreadable: {}", stamp(), escape(profile), escape(problem)),
    }
}

fn say_json_line(v: &serde_json::Value) {
    use std::io::Write as _;
    super::note_stdout(writeln!(std::io::stdout(), "{v}"));
}

fn print_events(format: Format, profile: &str, events: &[LeaseEvent]) {
    if events.is_empty() {
        return;
    }
    let pids: Vec<u64> = events.iter().map(|e| e.view.entry.pid()).collect();
    let owners = owner_infos(&pids);
    let at = stamp();
    for ev in events {
        let v = &ev.view;
        let e = &v.entry;
        let owner = owners.get(&e.pid()).map(|o| o.name.as_str()).unwrap_or("-");
        match format {
            Format::Json => {
                let line = json!({
                    "time": at,
                    "event": ev.kind.name(),
                    "profile": profile,
                    "lease": lease_json(v, owners.get(&e.pid())),
                });
                say_json_line(&line);
            }
            Format::Tsv => say!(
                "{at}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                ev.kind.name(),
                escape(profile),
                escape(e.lease_id()),
                escape(e.session_id()),
                escape(e.surface().unwrap_or("-")),
                e.pid(),
                escape(owner),
                v.liveness.name()
            ),
            Format::Table | Format::Wide => say!(
                "{at}  {:<14}  {}  lease {}  session {}  {}  pid {} ({})  {}",
                ev.kind.name(),
                escape(profile),
                escape(&short_id(e.lease_id())),
                escape(e.session_id()),
                escape(e.surface().unwrap_or("-")),
                e.pid(),
                escape(owner),
                v.liveness.name()
            ),
        }
    }
}
