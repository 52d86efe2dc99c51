//! What crosses an SSH session between leasectl here and `leasectl serve --stdio` there:
//! one JSON object a line each way. The server speaks first (its [`Hello`]), so even a
//! client of another protocol learns which leasectl it reached; the client then says who
//! it is and which home ([`Open`]); after [`Ready`], requests carry an id their answer
//! repeats, and a subscription's listings come unasked.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::lease::address::location::Location;
use crate::lease::backend::{Listing, RecordedEvents, RemoteListing};
use crate::lease::error::{Error, InvalidRegistry, LiveOwners, Missing};
use crate::lease::home::config::CapSetting;
use crate::lease::owners::owner::OwnerInfo;
use crate::lease::view::{DoctorReport, LeaseView, Removal, Target};

/// Raised when a message changes shape in a way an older peer would misread.
pub(crate) const PROTOCOL: u32 = 1;
/// This build's version, said in every hello.
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The server's first line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Hello {
    pub leasectl: String,
    pub protocol: u32,
    /// The remote's host name and the user leasectl runs as there.
    pub host: String,
    pub user: String,
}

/// The client's first line: which home, and who asks (for the remote's audit record).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Open {
    pub leasectl: String,
    pub protocol: u32,
    /// None: the remote's `$HERMES_HOME`, else `~/.hermes`.
    pub home: Option<String>,
    /// `alice@laptop`: the operator on the client's side.
    pub operator: String,
    /// What the operator runs there (`leasectl ls`, `leasectl console`).
    pub command: String,
}

/// The server's answer to [`Open`]: the home it resolved and its registries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Ready {
    pub home: String,
    /// `root` first, then each profile.
    pub profiles: Vec<String>,
    /// The registry the named home stands for: `root`, or the profile when the path
    /// is `<root>/profiles/NAME` (as `--home` means locally).
    #[serde(default = "root_name")]
    pub default: String,
}

fn root_name() -> String {
    "root".to_owned()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ServerLine {
    Hello(Hello),
    Ready(Ready),
    /// The home cannot be served (it does not exist, the open was not understood).
    Refused(String),
    Answer {
        id: u64,
        answer: Result<Answer, WireError>,
    },
    /// After [`Request::Subscribe`]: a registry's listing whenever it changed.
    Listing {
        profile: String,
        listing: Box<WireListing>,
    },
}

impl ServerLine {
    /// What kind of line it is, for a message (never its content).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            ServerLine::Hello(_) => "a hello",
            ServerLine::Ready(_) => "a ready line",
            ServerLine::Refused(_) => "a refusal",
            ServerLine::Answer { .. } => "an answer",
            ServerLine::Listing { .. } => "a listing",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ClientLine {
    Open(Open),
    Request { id: u64, request: Request },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub(crate) enum Request {
    Read {
        profile: String,
    },
    /// Every registry's listing now and after each change (new profiles included).
    Subscribe,
    ForceRelease {
        profile: String,
        target: Target,
        allow_live: bool,
        dry_run: bool,
    },
    Prune {
        profile: String,
        dry_run: bool,
        include_clock_step: bool,
        include_work_running: bool,
    },
    Doctor {
        profile: String,
    },
    /// The profile's recorded history from `from` on: epoch seconds as text, since a
    /// number inside this tagged enum does not deserialize (serde_json's
    /// arbitrary_precision, which the Python-identical floats need, makes it a map).
    Events {
        profile: String,
        from: String,
    },
    /// What `stop` would end there.
    StopPlan {
        profile: String,
        target: Target,
    },
    /// End the owners of a plan made there: the plan as its JSON text and the grace in
    /// milliseconds as text (numbers do not deserialize inside this enum: see `Events`).
    Stop {
        profile: String,
        plan: String,
        grace_ms: String,
    },
    /// Answered at once: how long the answer takes is how far behind the host is.
    Ping,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Answer {
    Listing(Box<WireListing>),
    Removal(Removal),
    Doctor(Box<DoctorReport>),
    Events(Box<RecordedEvents>),
    StopPlan(Box<crate::lease::stop::StopPlan>),
    Stopped(Box<crate::lease::stop::Stopped>),
    Subscribed,
    Pong,
}

/// A [`Listing`] without its location (the receiver knows which it asked for).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WireListing {
    pub exists: bool,
    pub modified: Option<f64>,
    pub cap: CapSetting,
    pub leases: Result<Vec<LeaseView>, WireError>,
    pub remote: Option<RemoteListing>,
    /// Who the owners are (name, command, memory, user), looked up where they run.
    #[serde(default)]
    pub owners: HashMap<u64, OwnerInfo>,
    /// What the home's state.db says of the leased sessions, read there.
    #[serde(default)]
    pub sessions: Option<RemoteSessions>,
}

/// A registry's session context as its host read it, and the idle threshold its home sets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RemoteSessions {
    pub contexts: crate::lease::home::context::Contexts,
    pub idle_secs: f64,
}

impl WireListing {
    pub(crate) fn of(l: Listing) -> WireListing {
        // Made where the registry is (serve --stdio): its owners are processes here, and
        // its state.db is beside it.
        let owners = crate::lease::owners::owner::owner_infos(&crate::lease::owners::distinct_pids(
            l.leases.iter().flatten().map(|v| v.entry.pid()),
        ));
        let sessions = match (l.location.registry(), &l.leases) {
            (Some(reg), Ok(views)) if !views.is_empty() => {
                let mut ids: Vec<&str> = views.iter().map(|v| v.entry.session_id()).collect();
                ids.sort_unstable();
                ids.dedup();
                let (idle, _) = crate::lease::home::context::idle_threshold(&reg.home, None);
                let contexts = crate::lease::home::context::read(&reg.home, &ids);
                Some(RemoteSessions { contexts, idle_secs: idle.as_secs_f64() })
            }
            _ => None,
        };
        WireListing {
            owners,
            sessions,
            exists: l.exists,
            modified: l.modified,
            cap: l.cap,
            leases: l.leases.map_err(WireError::of),
            remote: l.remote,
        }
    }

    pub(crate) fn at(self, location: Location) -> Listing {
        Listing {
            location,
            exists: self.exists,
            modified: self.modified,
            cap: self.cap,
            leases: self.leases.map_err(WireError::into_error),
            remote: self.remote,
        }
    }
}

/// An [`Error`] as it crosses: the kinds the client acts on keep their parts; the rest
/// keep their words and their exit code's class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum WireError {
    Invalid(InvalidRegistry),
    NotFound(Missing),
    LiveOwner(LiveOwners),
    CannotStop(crate::lease::stop::CannotStop),
    /// Nothing could be coordinated on (a lock held, an owner unprovable): exit 5.
    Unavailable(String),
    Refused(String),
    Unsupported(String),
}

impl WireError {
    pub(crate) fn of(e: Error) -> WireError {
        match e {
            Error::Invalid(i) => WireError::Invalid(i),
            Error::NotFound(m) => WireError::NotFound(m),
            Error::LiveOwner(l) => WireError::LiveOwner(l),
            Error::CannotStop(c) => WireError::CannotStop(c),
            Error::LockTimeout { .. }
            | Error::LivenessUnknown { .. }
            | Error::Unavailable(_)
            | Error::Unreachable { .. }
            | Error::Connecting { .. } => WireError::Unavailable(e.to_string()),
            Error::Io { .. } | Error::Refused(_) => WireError::Refused(e.to_string()),
            Error::Unsupported(m) => WireError::Unsupported(m),
        }
    }

    pub(crate) fn into_error(self) -> Error {
        match self {
            WireError::Invalid(i) => Error::Invalid(i),
            WireError::NotFound(m) => Error::NotFound(m),
            WireError::LiveOwner(l) => Error::LiveOwner(l),
            WireError::CannotStop(c) => Error::CannotStop(c),
            WireError::Unavailable(m) => Error::Unavailable(m),
            WireError::Refused(m) => Error::Refused(m),
            WireError::Unsupported(m) => Error::Unsupported(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::Entry;
    use crate::lease::owners::liveness::Liveness;

    #[test]
    fn a_listing_crosses_whole_and_unknown_fields_survive() {
        let text = r#"{"lease_id": "a1", "metadata": {"x": 1}, "pid": 42, "session_id": "s 1; $(rm -rf /)", "zz_future": [1.50]}"#;
        let entry = Entry::from_text(0, text, &std::collections::HashSet::<String>::new()).expect("entry");
        let view = LeaseView::local(entry, Liveness::Recycled { recorded: 1.5, actual: 2.25 });
        let line = serde_json::to_string(&ServerLine::Listing {
            profile: "root".into(),
            listing: Box::new(WireListing {
                exists: true,
                modified: Some(1.0),
                cap: CapSetting::default(),
                leases: Ok(vec![view.clone()]),
                remote: None,
                owners: HashMap::new(),
                sessions: None,
            }),
        })
        .expect("to json");
        assert!(!line.contains('\n'), "one line");
        let ServerLine::Listing { listing, .. } = serde_json::from_str(&line).expect("from json") else {
            panic!("{line}")
        };
        let got = listing.leases.expect("leases");
        assert_eq!(got[0].entry.text(), view.entry.text(), "the bytes as Python would write them");
        assert!(got[0].entry.text().contains(r#""zz_future": [1.5]"#));
        assert_eq!(got, vec![view]);
    }

    #[test]
    fn errors_keep_their_kind() {
        let missing = Error::NotFound(Missing {
            target: Target::Session("s".into()),
            live_only: false,
            place: "in /h/runtime/active_sessions.json".into(),
        });
        let back: WireError =
            serde_json::from_str(&serde_json::to_string(&WireError::of(missing.clone())).expect("ser")).expect("de");
        assert_eq!(back.into_error(), missing);
        let lock = Error::LockTimeout {
            lock_path: "/h/l".into(),
            waited: std::time::Duration::from_secs(1),
            holder_pid: None,
            holder_command: None,
        };
        assert!(matches!(WireError::of(lock).into_error(), Error::Unavailable(m) if m.contains("still held")));
    }
}
