//! The playground's actions, each with a result a person can read: spawn and kill
//! real owners, fake a recycled pid, try an acquire, set the cap, corrupt and repair.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::sandbox::{Sandbox, Spawned};
use crate::lease::format::entry::NewLease;
// Hand edits only (see `Playground::store`): the file itself, under its lock.
use crate::lease::file::registry;
use crate::lease::{
    self, AcquireRequest, Entry, LeaseStore, Location, Reason, StoreOptions, address::ids, format::pyjson, home::lock,
    now,
};

/// Who acquires in "try to acquire".
#[derive(Debug, Clone, PartialEq)]
pub enum OwnerChoice {
    /// A fresh `leasectl hold` process.
    New,
    /// An owner process the demo already runs, by pid.
    Existing(u64),
    /// The n-th owner the demo spawned (the tour refers to owners this way).
    Nth(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CorruptKind {
    Truncated,
    DuplicateLeaseId,
    EmptySessionId,
}

impl CorruptKind {
    pub const ALL: [CorruptKind; 3] =
        [CorruptKind::Truncated, CorruptKind::DuplicateLeaseId, CorruptKind::EmptySessionId];
    pub fn label(self) -> &'static str {
        match self {
            CorruptKind::Truncated => "truncated JSON",
            CorruptKind::DuplicateLeaseId => "duplicate lease id",
            CorruptKind::EmptySessionId => "empty session id",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    SpawnOwner {
        session: String,
        surface: String,
        live_id: String,
        track_liveness: bool,
    },
    KillOwner {
        owner: OwnerChoice,
    },
    /// An owner that does not watch its lease, as Hermes' own chat does not: a plain
    /// process the demo acquires `session` for.
    SpawnUnwatchingOwner {
        session: String,
        surface: String,
        live_id: String,
    },
    /// `force-release --session S --live`: the lease goes, its owner is not told.
    ForceReleaseLive {
        session: String,
    },
    /// `stop --session S --yes`: its owner ended, then its lease gone.
    Stop {
        session: String,
    },
    FakeRecycled {
        session: String,
    },
    TryAcquire {
        session: String,
        surface: String,
        live_id: String,
        cap: Option<u64>,
        owner: OwnerChoice,
    },
    /// `None` clears the cap.
    SetCap(Option<u64>),
    Corrupt(CorruptKind),
    Repair,
    Prune,
    /// Write to the home's state.db (as Hermes would) that `session` ended `hours_ago`.
    EndSession {
        session: String,
        hours_ago: u32,
    },
    /// Back to an empty playground: owners stopped, registry emptied, cap cleared, the
    /// sessions it ended in state.db forgotten (the tour starting again).
    Reset,
}

impl Action {
    /// One line saying what was asked.
    pub fn describe(&self) -> String {
        match self {
            Action::SpawnOwner { session, surface, live_id, .. } => {
                format!("spawn an owner: leasectl hold {session} --surface {surface} --live-id {live_id}")
            }
            Action::KillOwner { owner } => format!("SIGKILL {}", owner_label(owner)),
            Action::SpawnUnwatchingOwner { session, .. } => {
                format!("start an owner that does not watch its lease (as a hermes chat) on {session}")
            }
            Action::ForceReleaseLive { session } => format!("leasectl force-release --session {session} --live"),
            Action::Stop { session } => format!("leasectl stop --session {session} --yes"),
            Action::FakeRecycled { session } => format!("fake a recycled pid holding {session}"),
            Action::TryAcquire { session, live_id, owner, cap, .. } => {
                let cap = cap.map(|c| format!(", cap {c}")).unwrap_or_default();
                format!("acquire {session} as {} (live id {live_id}{cap})", owner_label(owner))
            }
            Action::SetCap(Some(n)) => format!("set max_concurrent_sessions: {n}"),
            Action::SetCap(None) => "clear the cap".into(),
            Action::Corrupt(k) => format!("corrupt the registry: {}", k.label()),
            Action::Repair => "repair the registry".into(),
            Action::Prune => "prune dead and recycled owners".into(),
            Action::EndSession { session, hours_ago: 0 } => {
                format!("state.db: session {session} ends now (tui_shutdown)")
            }
            Action::EndSession { session, hours_ago } => {
                format!("state.db: session {session} ended {hours_ago}h ago (tui_shutdown)")
            }
            Action::Reset => "reset the playground".into(),
        }
    }
}

fn owner_label(o: &OwnerChoice) -> String {
    match o {
        OwnerChoice::New => "a new owner process".into(),
        OwnerChoice::Existing(pid) => format!("owner pid {pid}"),
        OwnerChoice::Nth(n) => format!("demo owner #{}", n + 1),
    }
}

/// What came of an action.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Granted { lease_id: String, session: String, pid: u64, replaced: Option<String>, pruned: usize },
    Refused { reason: Reason, message: String, advice: String, holder: Option<String> },
    Done(String),
    Failed(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub action: String,
    pub verdict: Verdict,
    /// The lease it is about (granted, blocking, killed, forged, suspected), by id.
    pub lease: Option<String>,
}

/// A demo owner as the console lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnerView {
    pub pid: u64,
    pub session: String,
    pub surface: String,
    pub live_id: String,
    pub running: bool,
}

pub struct Playground {
    pub sandbox: Sandbox,
    exe: PathBuf,
    /// The registry bytes from before a corruption, for repair.
    backup: Option<Vec<u8>>,
    lock_timeout: Duration,
    /// The lease the action being run is about (see [`Outcome::lease`]).
    about: Option<String>,
    /// The owners running when last reported: an owner that ends is reported once.
    reported_running: Vec<u64>,
}

impl Playground {
    /// `exe` is the leasectl binary the owner processes run.
    pub fn new(sandbox: Sandbox, exe: PathBuf) -> Playground {
        Playground {
            sandbox,
            exe,
            backup: None,
            lock_timeout: Duration::from_secs(3),
            about: None,
            reported_running: vec![],
        }
    }

    /// The demo's owners; one that has ended is reaped here (no zombie listed alive).
    pub fn owners(&mut self) -> Vec<OwnerView> {
        let owners: Vec<OwnerView> = self
            .sandbox
            .owners
            .iter_mut()
            .map(|o| OwnerView {
                pid: u64::from(o.child.id()),
                session: o.session.clone(),
                surface: o.surface.clone(),
                live_id: o.live_id.clone(),
                running: !o.killed && matches!(o.child.try_wait(), Ok(None)),
            })
            .collect();
        self.reported_running = owners.iter().filter(|o| o.running).map(|o| o.pid).collect();
        owners
    }

    /// Owners that ended since the last report (an owner whose lease was force-released
    /// exits by itself), reaped; empty when none did.
    pub fn newly_exited(&mut self) -> (Vec<OwnerView>, Vec<OwnerView>) {
        let before = std::mem::take(&mut self.reported_running);
        let owners = self.owners();
        let exited = owners.iter().filter(|o| !o.running && before.contains(&o.pid)).cloned().collect();
        (exited, owners)
    }

    fn resolve(&mut self, owner: &OwnerChoice) -> Result<Option<u64>, String> {
        match owner {
            OwnerChoice::New => Ok(None),
            OwnerChoice::Existing(pid) => Ok(Some(*pid)),
            OwnerChoice::Nth(n) => self
                .sandbox
                .owners
                .get(*n)
                .map(|o| Some(u64::from(o.child.id())))
                .ok_or_else(|| format!("there is no demo owner #{}", n + 1)),
        }
    }

    /// Leases in the sandbox's registry held by processes other than the playground's own
    /// owners (an operator's home given with --home); Err when the registry cannot be read.
    pub fn others_leases(&mut self) -> Result<usize, String> {
        let own: Vec<u64> = self.owners().iter().map(|o| o.pid).collect();
        let listing = self.store().map_err(|e| e.to_string())?.read();
        listing
            .leases
            .map(|views| views.iter().filter(|v| !own.contains(&v.entry.pid())).count())
            .map_err(|e| e.to_string())
    }

    /// The sandbox's registry behind the one store interface. What the demo plays by
    /// hand (a forged entry, corrupted bytes, their restoring) writes the file under its
    /// lock instead: an operator's editor, which no store would be.
    fn store(&self) -> Result<Box<dyn LeaseStore>, lease::Error> {
        let options = StoreOptions { lock_timeout: self.lock_timeout, ..StoreOptions::default() };
        lease::open(&Location::File(self.sandbox.registry()), options)
    }

    pub fn run(&mut self, action: &Action) -> Outcome {
        self.about = None;
        let verdict = match action {
            Action::SpawnOwner { session, surface, live_id, track_liveness } => {
                self.spawn(session, surface, live_id, *track_liveness, None)
            }
            Action::KillOwner { owner } => self.kill(owner),
            Action::SpawnUnwatchingOwner { session, surface, live_id } => {
                self.spawn_unwatching(session, surface, live_id)
            }
            Action::ForceReleaseLive { session } => self.force_release_live(session),
            Action::Stop { session } => self.stop(session),
            Action::FakeRecycled { session } => self.fake_recycled(session),
            Action::TryAcquire { session, surface, live_id, cap, owner } => match self.resolve(owner) {
                Err(e) => Verdict::Failed(e),
                Ok(None) => self.spawn(session, surface, live_id, false, *cap),
                Ok(Some(pid)) => self.acquire_for(pid, session, surface, live_id, *cap),
            },
            Action::SetCap(cap) => self.set_cap(*cap),
            Action::Corrupt(kind) => self.corrupt(*kind),
            Action::Repair => self.repair(),
            Action::Prune => match self.store().and_then(|mut s| s.prune(lease::PruneOptions::default())) {
                Ok(r) => Verdict::Done(format!(
                    "pruned {} of dead or recycled owners",
                    crate::lease::words::human::plural(r.removed.len(), "lease", "leases")
                )),
                Err(e) => Verdict::Failed(e.to_string()),
            },
            Action::EndSession { session, hours_ago } => self.end_session(session, *hours_ago),
            Action::Reset => self.reset(),
        };
        let lease = match &verdict {
            Verdict::Granted { lease_id, .. } => Some(lease_id.clone()),
            Verdict::Refused { holder, .. } => holder.clone(),
            Verdict::Done(_) => self.about.take(),
            Verdict::Failed(_) => None,
        };
        Outcome { action: action.describe(), verdict: self.hinted(verdict), lease }
    }

    /// A verdict whose hints (`leasectl ls`) name the sandbox: pasted as shown, they act
    /// on the demo's registry, not on ~/.hermes.
    fn hinted(&self, verdict: Verdict) -> Verdict {
        let at = crate::lease::Location::File(self.sandbox.registry());
        let hint = |text: String| crate::lease::words::hint::hinted(&at, &text);
        match verdict {
            Verdict::Refused { reason, message, advice, holder } => {
                Verdict::Refused { reason, message: hint(message), advice: hint(advice), holder }
            }
            Verdict::Failed(why) => Verdict::Failed(hint(why)),
            other => other,
        }
    }

    /// A real `leasectl hold` child; its first stdout line is the grant or refusal.
    fn spawn(&mut self, session: &str, surface: &str, live_id: &str, track: bool, cap: Option<u64>) -> Verdict {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("--home").arg(self.sandbox.home()).args(["--lock-timeout", "3", "hold", session]);
        cmd.args(["--surface", surface, "--live-id", live_id, "--json"]);
        if track {
            cmd.arg("--track-liveness");
        }
        if let Some(c) = cap {
            cmd.args(["--max", &c.to_string()]);
        }
        cmd.env_remove("HERMES_HOME").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
        dies_with_the_demo(&mut cmd);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return Verdict::Failed(format!("cannot start {}: {e}", self.exe.display())),
        };
        let pid = u64::from(child.id());
        let line = child.stdout.take().map(|out| {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let mut line = String::new();
                let _ = BufReader::new(out).read_line(&mut line);
                let _ = tx.send(line);
            });
            rx.recv_timeout(Duration::from_secs(5)).unwrap_or_default()
        });
        let parsed: Option<Value> = line.as_deref().and_then(|l| serde_json::from_str(l.trim()).ok());
        let Some(v) = parsed else {
            let _ = child.kill();
            let _ = child.wait();
            return Verdict::Failed(format!("owner pid {pid} said nothing readable"));
        };
        if v["granted"] == Value::Bool(true) {
            let lease_id = v["lease_id"].as_str().unwrap_or_default().to_owned();
            self.keep_owner(child, session, surface, live_id, &lease_id);
            Verdict::Granted {
                lease_id,
                session: session.into(),
                pid,
                replaced: v["replaced"].as_str().map(str::to_owned),
                pruned: v["pruned"].as_array().map(Vec::len).unwrap_or(0),
            }
        } else {
            let _ = child.wait();
            refused_from_json(&v)
        }
    }

    fn acquire_for(&mut self, pid: u64, session: &str, surface: &str, live_id: &str, cap: Option<u64>) -> Verdict {
        let mut store = match self.store() {
            Ok(s) => s,
            Err(e) => return Verdict::Failed(e.to_string()),
        };
        let cap = cap.or_else(|| store.cap_setting().cap);
        let mut metadata = Map::new();
        metadata.insert("live_session_id".into(), Value::String(live_id.into()));
        let req = AcquireRequest {
            session_id: session.into(),
            surface: Some(surface.into()),
            metadata,
            owner_pid: pid,
            cap,
            track_liveness: false,
            lock_timeout: self.lock_timeout,
        };
        match store.acquire(&req) {
            Ok(g) => Verdict::Granted {
                lease_id: g.lease_id,
                session: session.into(),
                pid,
                replaced: g.replaced,
                pruned: g.pruned.len(),
            },
            Err(r) => Verdict::Refused {
                reason: r.reason,
                advice: store.advice(&r),
                holder: r.holder.as_ref().map(|h| h.lease_id().to_owned()),
                message: r.message,
            },
        }
    }

    /// A process that holds a lease without watching it (`sleep`, acquired for by pid):
    /// what a Hermes chat is to its lease, unlike `leasectl hold`, which notices a loss.
    fn spawn_unwatching(&mut self, session: &str, surface: &str, live_id: &str) -> Verdict {
        let mut cmd = Command::new("sleep");
        cmd.arg("86400").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        dies_with_the_demo(&mut cmd);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return Verdict::Failed(format!("cannot start sleep: {e}")),
        };
        let pid = u64::from(child.id());
        let verdict = self.acquire_for(pid, session, surface, live_id, None);
        match &verdict {
            Verdict::Granted { lease_id, .. } => self.keep_owner(child, session, surface, live_id, lease_id),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        verdict
    }

    /// A granted owner, kept as the demo's (listed, reaped, stopped at the end).
    fn keep_owner(&mut self, child: std::process::Child, session: &str, surface: &str, live_id: &str, lease_id: &str) {
        self.sandbox.owners.push(Spawned {
            child,
            session: session.into(),
            surface: surface.into(),
            live_id: live_id.into(),
            lease_id: Some(lease_id.to_owned()),
            killed: false,
        });
    }

    fn force_release_live(&mut self, session: &str) -> Verdict {
        let target = lease::Target::Session(session.into());
        let opts = lease::ForceOptions { allow_live: true, dry_run: false };
        match self.store().and_then(|mut s| s.force_release(&target, opts)) {
            Ok(r) => {
                let pids: Vec<String> = r.removed.iter().map(|v| v.entry.pid().to_string()).collect();
                Verdict::Done(format!(
                    "force-released {session}'s lease; its owner (pid {}) still runs and was not told: it may go on \
                     writing {session}",
                    pids.join(", ")
                ))
            }
            Err(e) => Verdict::Failed(e.to_string()),
        }
    }

    fn stop(&mut self, session: &str) -> Verdict {
        let target = lease::Target::Session(session.into());
        let stopped = self.store().and_then(|mut s| {
            let plan = s.stop_plan(&target)?;
            s.stop(&plan, lease::stop::StopOptions::default())
        });
        match stopped {
            Ok(stopped) => {
                let said: Vec<String> = stopped.owners.iter().map(lease::stop::said).collect();
                // The ended owner is reaped here, as a demo owner it started.
                self.owners();
                Verdict::Done(format!("stopped {}", said.join("; ")))
            }
            Err(e) => Verdict::Failed(e.to_string()),
        }
    }

    fn kill(&mut self, owner: &OwnerChoice) -> Verdict {
        let pid = match self.resolve(owner) {
            Ok(Some(pid)) => pid,
            Ok(None) => return Verdict::Failed("choose an owner to kill".into()),
            Err(e) => return Verdict::Failed(e),
        };
        let Some(o) = self.sandbox.owners.iter_mut().find(|o| u64::from(o.child.id()) == pid) else {
            return Verdict::Failed(format!("pid {pid} is not a demo owner"));
        };
        if o.killed {
            return Verdict::Failed(format!("owner pid {pid} is already dead"));
        }
        let _ = o.child.kill();
        let _ = o.child.wait();
        o.killed = true;
        let session = o.session.clone();
        self.about = self.lease_of_pid(pid);
        Verdict::Done(format!(
            "SIGKILLed owner pid {pid} (session {session}): its lease stays in the file, dead, until the next acquire \
             or a prune"
        ))
    }

    /// An entry whose pid is alive but whose recorded start time is not that process's.
    fn fake_recycled(&mut self, session: &str) -> Verdict {
        let pid =
            self.owners().iter().find(|o| o.running).map(|o| o.pid).unwrap_or_else(|| u64::from(std::process::id()));
        let Some(real) = lease::owners::liveness::process_start_time(pid) else {
            return Verdict::Failed(format!("cannot read the start time of pid {pid}"));
        };
        let reg = self.sandbox.registry();
        let result = (|| -> Result<String, lease::Error> {
            let guard = lock::lock(&reg.lock_path(), self.lock_timeout)?;
            let mut file = registry::read(&reg.path())?;
            let at = now();
            let lease_id = ids::lease_id();
            file.entries.push(Entry::new_lease(NewLease {
                lease_id: lease_id.clone(),
                session_id: session.into(),
                surface: Some("gateway".into()),
                pid,
                // An hour and a quarter-second before the real start: another process's number.
                process_start_time: Some(real - 3600.25),
                now: at - 3600.0,
                track_liveness: false,
                metadata: Map::new(),
            }));
            registry::write(&guard, &reg.path(), &file)?;
            Ok(lease_id)
        })();
        if let Ok(id) = &result {
            self.about = Some(id.clone());
        }
        match result {
            Ok(id) => Verdict::Done(format!(
                "wrote lease {} for {session}: pid {pid} is alive, but started 3600.25 s after the recorded time — a recycled pid",
                &id[..8]
            )),
            Err(e) => Verdict::Failed(e.to_string()),
        }
    }

    /// The sandbox's state.db, opened for writing as Hermes writes it (`create`: made when
    /// absent; else None then). What stands there is looked at through the safe-file module
    /// without following it: a symlink, FIFO or anything but a regular file is refused, and
    /// SQLite is told not to follow a symlink swapped in after the look.
    fn state_db(&self, create: bool) -> Result<Option<rusqlite::Connection>, String> {
        use lease::home::safe_file::{Dir, Spot};
        use rusqlite::OpenFlags;
        let home = self.sandbox.home();
        let path = lease::home::context::state_db(home);
        let refused = |why: String| format!("the demo's state.db {}: {why}", path.display());
        let dir = Dir::open(&Spot::new(home, "")).map_err(|e| refused(e.to_string()))?;
        let Some(dir) = dir else { return Err(refused("its home is gone".into())) };
        match dir.kind("state.db").map_err(|e| refused(e.to_string()))? {
            None if !create => return Ok(None),
            None => {}
            Some(rustix::fs::FileType::RegularFile) => {}
            Some(other) => return Err(refused(format!("is a {other:?}, not a file: left alone"))),
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        // one door: SQLite opens by path; what is there was looked at above, not followed.
        rusqlite::Connection::open_with_flags(&path, flags).map(Some).map_err(|e| refused(e.to_string()))
    }

    /// Record in the sandbox's state.db, as Hermes does, that `session` ended while its
    /// owner lives on; then say what leasectl reads from it (LEAK?, and why).
    fn end_session(&mut self, session: &str, hours_ago: u32) -> Verdict {
        let home = self.sandbox.home().to_path_buf();
        let ended = now() - f64::from(hours_ago) * 3600.0;
        let db = match self.state_db(true) {
            Ok(Some(db)) => db,
            Ok(None) => return Verdict::Failed("the demo's state.db could not be created".into()),
            Err(why) => return Verdict::Failed(why),
        };
        let written = (|| -> rusqlite::Result<()> {
            db.pragma_update(None, "journal_mode", "WAL")?;
            db.execute_batch(
                "CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, source TEXT, title TEXT, started_at REAL, \
                 ended_at REAL, end_reason TEXT, last_activity_at REAL); \
                 CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT, \
                 timestamp REAL);",
            )?;
            db.execute(
                "INSERT OR REPLACE INTO sessions VALUES (?1, 'tui', ?2, ?3, ?4, 'tui_shutdown', ?4)",
                rusqlite::params![session, format!("demo chat {session}"), ended - 1800.0, ended],
            )?;
            db.execute(
                "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?1, 'assistant', 'bye', ?2)",
                rusqlite::params![session, ended - 60.0],
            )?;
            Ok(())
        })();
        if let Err(e) = written {
            return Verdict::Failed(format!("cannot write the demo's state.db: {e}"));
        }
        let listing = match self.store() {
            Ok(mut store) => store.read(),
            Err(e) => return Verdict::Failed(e.to_string()),
        };
        let views = match listing.leases {
            Ok(v) => v,
            Err(e) => return Verdict::Failed(e.to_string()),
        };
        let Some(view) = views.iter().find(|v| v.entry.session_id() == session) else {
            return Verdict::Failed(format!("no lease holds {session}"));
        };
        let contexts = lease::home::context::read(&home, &[session]);
        let owner = lease::owners::owner::command_name(view.entry.pid()).unwrap_or_else(|| "-".into());
        let idle = lease::home::context::DEFAULT_IDLE;
        self.about = Some(view.entry.lease_id().to_owned());
        match lease::home::context::leak_reason(view, contexts.get(session), idle, now(), &owner) {
            Some(why) => Verdict::Done(format!("LEAK?: {why}")),
            None => Verdict::Failed(format!("lease {} is not marked LEAK? ({contexts:?})", view.entry.lease_id())),
        }
    }

    /// The lease a demo owner holds now, by its pid (it may have re-acquired since it started).
    fn lease_of_pid(&self, pid: u64) -> Option<String> {
        let listing = self.store().ok()?.read();
        let views = listing.leases.ok()?;
        views.iter().find(|v| v.entry.pid() == pid).map(|v| v.entry.lease_id().to_owned())
    }

    /// Stop every owner, empty the registry (what no owner left is pruned; a corrupted
    /// file is restored first), clear the cap and forget the sessions state.db was told ended.
    fn reset(&mut self) -> Verdict {
        self.sandbox.kill_all();
        self.sandbox.owners.clear();
        self.reported_running.clear();
        if self.backup.is_some()
            && let Verdict::Failed(why) = self.repair()
        {
            return Verdict::Failed(why);
        }
        let pruned = match self.store().and_then(|mut s| s.prune(lease::PruneOptions::default())) {
            Ok(r) => r.removed.len(),
            Err(e) => return Verdict::Failed(e.to_string()),
        };
        if let Verdict::Failed(why) = self.set_cap(None) {
            return Verdict::Failed(why);
        }
        match self.state_db(false) {
            Ok(None) => {}
            Ok(Some(db)) => {
                let forgot = db
                    .execute("DELETE FROM sessions WHERE id LIKE 'tour-%'", [])
                    .and_then(|_| db.execute("DELETE FROM messages WHERE session_id LIKE 'tour-%'", []));
                if let Err(e) = forgot {
                    return Verdict::Failed(format!("cannot reset the demo's state.db: {e}"));
                }
            }
            Err(why) => return Verdict::Failed(why),
        }
        Verdict::Done(format!(
            "stopped every demo owner, pruned {} they held, cleared the cap",
            crate::lease::words::human::plural(pruned, "lease", "leases")
        ))
    }

    fn set_cap(&mut self, cap: Option<u64>) -> Verdict {
        let path = self.sandbox.registry().config_path();
        let text = match cap {
            Some(n) => format!("max_concurrent_sessions: {n}\n"),
            None => "max_concurrent_sessions: null\n".to_owned(),
        };
        match lease::home::safe_file::replace(&lease::home::safe_file::Spot::in_home(&path), text.as_bytes(), 0o644) {
            Ok(()) => Verdict::Done(match cap {
                Some(n) => format!("wrote {}: max_concurrent_sessions: {n}", path.display()),
                None => format!("wrote {}: no cap", path.display()),
            }),
            Err(e) => Verdict::Failed(format!("cannot write {}: {e}", path.display())),
        }
    }

    fn corrupt(&mut self, kind: CorruptKind) -> Verdict {
        let reg = self.sandbox.registry();
        let result = (|| -> Result<(), lease::Error> {
            let guard = lock::lock(&reg.lock_path(), self.lock_timeout)?;
            let current = registry::read_bytes(&reg.path())?.unwrap_or_else(|| b"{\"entries\": []}".to_vec());
            // Keep the last good bytes: corrupting twice must not lose them.
            if self.backup.is_none() {
                self.backup = Some(current.clone());
            }
            let good = self.backup.clone().unwrap_or(current);
            let bad = corrupted(&good, kind);
            registry::write_raw(&guard, &reg.path(), &bad)
        })();
        match result {
            Ok(()) => Verdict::Done(format!(
                "registry now has a {}: every acquire must refuse with SESSION_COORDINATION_UNAVAILABLE",
                kind.label()
            )),
            Err(e) => Verdict::Failed(e.to_string()),
        }
    }

    fn repair(&mut self) -> Verdict {
        let Some(good) = self.backup.clone() else {
            return Verdict::Failed("nothing to repair: the demo did not corrupt this registry".into());
        };
        let reg = self.sandbox.registry();
        let result = lock::lock(&reg.lock_path(), self.lock_timeout)
            .and_then(|guard| registry::write_raw(&guard, &reg.path(), &good));
        match result {
            Ok(()) => {
                self.backup = None;
                Verdict::Done("restored the registry as it was before the corruption".into())
            }
            Err(e) => Verdict::Failed(e.to_string()),
        }
    }
}

fn refused_from_json(v: &Value) -> Verdict {
    let code = v["reason"].as_str().unwrap_or_default();
    let reason = match code {
        "SESSION_NOT_OWNED" => Reason::SessionNotOwned,
        "MAX_CONCURRENT_SESSIONS" => Reason::MaxConcurrentSessions,
        "SESSION_COORDINATION_UNAVAILABLE" => Reason::SessionCoordinationUnavailable,
        other => return Verdict::Failed(format!("unexpected answer from the owner: {other:?}")),
    };
    Verdict::Refused {
        reason,
        message: v["message"].as_str().unwrap_or_default().to_owned(),
        advice: v["advice"].as_str().unwrap_or(reason.advice()).to_owned(),
        holder: v["holder"]["lease_id"].as_str().map(str::to_owned),
    }
}

/// A broken version of a good registry, of the chosen kind.
fn corrupted(good: &[u8], kind: CorruptKind) -> Vec<u8> {
    let text = String::from_utf8_lossy(good).into_owned();
    match kind {
        CorruptKind::Truncated => {
            let mut cut = text.len() / 2;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.as_bytes()[..cut].to_vec()
        }
        CorruptKind::DuplicateLeaseId | CorruptKind::EmptySessionId => {
            let mut v: Value = serde_json::from_str(&text).unwrap_or_else(|_| serde_json::json!({"entries": []}));
            let me = u64::from(std::process::id());
            let at = now();
            let extra = match kind {
                CorruptKind::DuplicateLeaseId => {
                    let first = v["entries"].get(0).cloned();
                    let mut dup = first.unwrap_or_else(|| {
                        serde_json::json!({"lease_id": "d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0", "session_id": "demo-dup",
                            "surface": "cli", "pid": me, "process_start_time": null, "started_at": at, "updated_at": at})
                    });
                    if v["entries"].as_array().is_none_or(Vec::is_empty) {
                        if let Some(list) = v["entries"].as_array_mut() {
                            list.push(dup.clone());
                        }
                        dup["session_id"] = Value::String("demo-dup-2".into());
                    }
                    dup
                }
                _ => serde_json::json!({"lease_id": ids::lease_id(), "session_id": "", "surface": "desktop",
                    "pid": me, "process_start_time": null, "started_at": at, "updated_at": at, "track_liveness": true}),
            };
            if let Some(list) = v["entries"].as_array_mut() {
                list.push(extra);
            }
            pyjson::to_string(&v).into_bytes()
        }
    }
}

/// An owner the demo starts dies with the demo, even if the demo is killed.
#[allow(unsafe_code)] // the system call below has no safe wrapper; see SAFETY
fn dies_with_the_demo(cmd: &mut Command) {
    // SAFETY: the closure only makes one prctl syscall, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| Ok(rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?));
    }
}
