//! The console's state: what is on screen is a pure function of this.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use super::event::{LeaseRow, LockHolder, LogLevel, RegistrySnapshot};
use super::extension::Extension;
use super::sort::SortMode;
use crate::lease::owners::owner::OwnerInfo;
use crate::lease::{Error, Liveness, Location, Target};
use rustc_hash::FxBuildHasher;

/// Samples of slots used kept for the sparkline (one per tick: five minutes).
/// Lines kept in the event log.
pub const LOG_LEN: usize = 10_000;
/// At most this many recorded events are shown above the live ones (the newest).
pub const HISTORY_EVENTS: usize = 500;
/// At most this many registries get a "watching" line of their own; the rest of each
/// read are counted in one.
pub const WATCHING_LINES: usize = 50;
/// The line between the recorded history and what this console saw live.
const HISTORY_SEPARATOR: &str = "— above: recorded before this console opened (↶); below: live —";

#[derive(Debug, Clone, PartialEq)]
pub struct RegistryState {
    pub location: Location,
    pub exists: bool,
    pub cap: Option<u64>,
    /// The last good snapshot (kept, marked stale, while the file is invalid).
    pub leases: Vec<LeaseRow>,
    /// The exact validation error while the file is invalid, and since when it has been
    /// (boxed: most registries never have one, and a console keeps a state per profile,
    /// 100,000 of them).
    error: Option<Box<(crate::lease::Error, f64)>>,
    /// When the leases last changed (epoch seconds).
    pub last_change: Option<f64>,
    /// Slots used (live leases), one sample per tick.
    pub history: super::samples::Samples,
    /// Set when an action found the lock held: the holder's pid.
    pub locked_by: Option<u32>,
    /// A lock holder the worker saw on consecutive checks (a lock is normally held
    /// for milliseconds), with its command and since when it was first seen.
    pub lock_seen: Option<Box<LockHolder>>,
    /// False until the first snapshot arrived.
    pub loaded: bool,
    /// True once a valid reading arrived: until then an error means nothing is known of
    /// the leases (no last good snapshot to show, and no counts).
    pub ever_read: bool,
    /// The leased sessions' context from state.db, or why it is unknown.
    pub sessions: Option<std::sync::Arc<crate::lease::home::context::Contexts>>,
    /// What only a remote store says (a slow host's lag, etcd's slots, line and members),
    /// None while it says none of it: a registry file never does.
    remote: Option<Box<RemoteAnswers>>,
    /// Bumped whenever `leases` is replaced: the rows shown are computed again only then.
    generation: u64,
}

/// What a remote store says beside its leases.
#[derive(Debug, Clone, PartialEq, Default)]
struct RemoteAnswers {
    /// How far behind its answers are, when noticeably (a slow host).
    lag: Option<std::time::Duration>,
    /// Slots in use as its store counts them (etcd: slot keys), where not the live leases.
    slots_used: Option<u64>,
    /// Who waits in line (etcd `--wait`), in arrival order.
    waiting: Vec<crate::lease::Waiter>,
    /// Members that did not answer while others did (etcd), and why.
    not_answering: Vec<(String, String)>,
    /// The leasectl version its host runs, when not this one.
    other_version: Option<String>,
}

impl RegistryState {
    /// How far behind its answers are, when noticeably (a slow host).
    pub fn lag(&self) -> Option<std::time::Duration> {
        self.remote.as_ref().and_then(|r| r.lag)
    }

    /// The leasectl version its host runs, when not this one (another host's).
    pub fn other_version(&self) -> Option<&str> {
        self.remote.as_ref().and_then(|r| r.other_version.as_deref())
    }

    /// Who waits in line (etcd `--wait`), in arrival order.
    pub fn waiting(&self) -> &[crate::lease::Waiter] {
        self.remote.as_ref().map_or(&[], |r| &r.waiting)
    }

    /// Members that did not answer while others did (etcd), and why.
    pub fn not_answering(&self) -> &[(String, String)] {
        self.remote.as_ref().map_or(&[], |r| &r.not_answering)
    }

    pub fn new(location: Location) -> RegistryState {
        RegistryState {
            location,
            exists: false,
            cap: None,
            leases: vec![],
            error: None,
            last_change: None,
            history: super::samples::Samples::default(),
            locked_by: None,
            lock_seen: None,
            remote: None,
            loaded: false,
            ever_read: false,
            sessions: None,
            generation: 0,
        }
    }

    /// The session's context from state.db, when it has one.
    pub fn session(&self, session_id: &str) -> Option<crate::lease::home::context::ContextRef<'_>> {
        self.sessions.as_deref()?.get(session_id)
    }

    /// The exact validation error while the file is invalid (etcd: unreachable).
    pub fn error(&self) -> Option<&crate::lease::Error> {
        self.error.as_deref().map(|(e, _)| e)
    }

    /// Since when the registry has been unreadable, while it is.
    pub fn error_since(&self) -> Option<f64> {
        self.error.as_deref().map(|(_, since)| *since)
    }

    /// Read with an error and never read well: its leases, and so any count, are unknown.
    pub fn unknown(&self) -> bool {
        self.error().is_some() && !self.ever_read
    }

    pub fn live_count(&self) -> u64 {
        self.leases.iter().filter(|l| l.liveness.counts_as_live()).count() as u64
    }

    /// The slots in use: the store's own count (etcd's slot keys: a lease taken without
    /// --max holds none), else the live leases.
    pub fn slots_in_use(&self) -> u64 {
        self.remote.as_ref().and_then(|r| r.slots_used).unwrap_or_else(|| self.live_count())
    }

    /// Show the figures of `owners` (this host's, as now) on the rows of live owners here.
    /// A host reached over SSH describes its own owners, and an etcd owner on another host
    /// is not a process here: their rows keep what they were sent with.
    pub fn owners_moved(&mut self, owners: &HashMap<u64, Arc<OwnerInfo>>, host: &str) {
        if self.location.host().is_some() {
            return;
        }
        // No new generation: the table's rows refer to leases by place, and nothing they
        // are filtered or sorted on moved (a name that changes is judged again instead).
        for row in &mut self.leases {
            let here = row.host.as_deref().is_none_or(|h| h == host);
            if let (true, Some(shown), Some(now)) = (here, &row.owner, owners.get(&row.pid_here()))
                && !Arc::ptr_eq(shown, now)
            {
                row.owner = Some(Arc::clone(now));
            }
        }
    }

    /// Adopt a fresh snapshot; the caller logs the differences first.
    pub fn apply(&mut self, snap: &RegistrySnapshot, at: f64) {
        self.exists = snap.exists;
        // The worker says since when it has seen the holder: the banner counts from then.
        self.lock_seen = snap.lock_holder.clone().map(Box::new);
        if snap.lock_holder.is_none() {
            self.locked_by = None;
        }
        // On etcd the cap is the one its holders were granted under: kept while none holds.
        // A host not answering says nothing of its cap: the last one read is kept.
        let unanswered = matches!(snap.leases, Err(Error::Unreachable { .. } | Error::Connecting { .. }));
        let keeps_cap = unanswered || (self.location.is_remote() && snap.cap.cap.is_none());
        if !keeps_cap {
            self.cap = snap.cap.cap;
        }
        // An invalid registry keeps its last good leases, and their sessions' context with them.
        if snap.leases.is_ok() {
            // A title is filtered on: a new one is a new generation of rows.
            if self.sessions != snap.sessions {
                self.generation += 1;
            }
            self.sessions = snap.sessions.clone();
        }
        // The slots and the line are kept from the last good reading.
        let kept = self.remote.take().map(|r| (r.slots_used, r.waiting)).unwrap_or_default();
        let (slots_used, waiting) = if snap.leases.is_ok() { (snap.slots_used, snap.waiting.clone()) } else { kept };
        let answers = RemoteAnswers {
            lag: snap.lag,
            slots_used,
            waiting,
            not_answering: snap.not_answering.clone(),
            other_version: snap.other_version.clone(),
        };
        self.remote = (answers != RemoteAnswers::default()).then(|| Box::new(answers));
        match &snap.leases {
            Ok(leases) => {
                if !self.ever_read {
                    // First sight (a host may answer only after a first try): the file's
                    // own time says when it last changed.
                    self.last_change = snap.modified.or(Some(at));
                } else if self.leases.len() != leases.len()
                    || self.leases.iter().zip(leases).any(|(a, b)| a.entry != b.entry)
                {
                    self.last_change = Some(at);
                }
                if *leases != self.leases {
                    self.leases = leases.clone();
                    self.generation += 1;
                }
                self.error = None;
                self.ever_read = true;
            }
            Err(e) => {
                // A file turning invalid is a change to it; etcd not answering changes no
                // lease, and the time the leases last changed stays what it was.
                let unanswered = matches!(e, Error::Unreachable { .. } | Error::Connecting { .. });
                if self.error() != Some(e) && !self.location.is_remote() && !unanswered {
                    self.last_change = Some(at);
                }
                let since = self.error_since().unwrap_or(at);
                self.error = Some(Box::new((e.clone(), since)));
            }
        }
        self.loaded = true;
    }

    /// The process the worker saw holding the lock on two checks in a row, and for how
    /// long it has held it at least (since the first of those checks).
    pub fn stuck_lock(&self, now: f64) -> Option<(&LockHolder, f64)> {
        self.lock_seen.as_deref().map(|h| (h, now - h.since))
    }

    /// Note the live count a reading left, seen from tick `tick` on.
    pub fn sample(&mut self, tick: u64) {
        let used = self.live_count();
        self.history.record(tick, used);
    }
}

/// A modal on top of the table.
#[derive(Debug, Clone, PartialEq)]
pub enum Dialog {
    Help,
    /// One event log line, whole (a long one is cut in the log).
    LogLine {
        at: f64,
        profile: String,
        text: String,
    },
    /// Repair an invalid registry: what the repair will keep and drop.
    ConfirmRepair {
        location: Location,
        lines: Vec<String>,
        /// Only F (force) repairs: a lease whose owner may be alive would be lost.
        needs_force: bool,
    },
    /// Prune: the leases that will go, per registry.
    ConfirmPrune {
        targets: Vec<(Location, Vec<LeaseRow>)>,
        /// Owners flagged "clock step?" that the prune keeps.
        kept_clock_step: usize,
        /// Registries of the tab that cannot be read now (a host down, an invalid file),
        /// each with why: left as they are, and said.
        skipped: Vec<String>,
    },
    /// Stop: the owner processes the plan will end, and their leases.
    ConfirmStop {
        location: Location,
        plan: Box<crate::lease::stop::StopPlan>,
        /// The second question, for an owner of more than one session: every one named.
        again: bool,
    },
    /// Force-release. With a live owner among `leases`, the operator must type `expected`.
    ConfirmRelease {
        location: Location,
        target: Target,
        leases: Vec<LeaseRow>,
        live: bool,
        expected: String,
        typed: String,
        /// Enter was pressed on text that is not the session id (cleared by typing).
        mismatch: bool,
    },
}

impl Dialog {
    /// How many lines the dialog's scrollable list has, about (help: one per key).
    pub fn list_len(&self) -> usize {
        match self {
            Dialog::Help => 64,
            Dialog::LogLine { text, .. } => text.len() / 40 + 2,
            Dialog::ConfirmRepair { lines, .. } => lines.len() + 1,
            Dialog::ConfirmPrune { targets, skipped, .. } => {
                targets.iter().map(|(_, l)| l.len() + 1).sum::<usize>() + 1 + usize::from(!skipped.is_empty())
            }
            Dialog::ConfirmRelease { leases, .. } => leases.len() + 1,
            Dialog::ConfirmStop { plan, .. } => {
                plan.owners.iter().map(|o| 4 + o.leases.len() + o.also_holds.len()).sum::<usize>() + 1
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    pub at: f64,
    pub profile: String,
    pub text: String,
    pub level: LogLevel,
}

/// A tab's name being typed (`T`): the text, the tab to go back to on Esc, and whether
/// the text names a tab (found as it is typed: the view draws without scanning the tabs).
#[derive(Debug, Clone, PartialEq)]
pub struct TabInput {
    pub typed: String,
    pub from: usize,
    pub found: bool,
}

/// Who has the keys, in the one order of precedence that `update` (where a key goes),
/// `view` (the footer), `mouse` (what a click may do) and the idle check all read: an
/// open dialog, then a line being typed (the filter, a tab's name), then the event log
/// when it has the focus, else the lease table (where an extension's keys come first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Dialog,
    Filter,
    TabName,
    Log,
    Table,
}

impl Mode {
    /// A dialog or a line being typed has every key: the table, its clicks and its
    /// shortcuts wait.
    pub fn is_modal(self) -> bool {
        matches!(self, Mode::Dialog | Mode::Filter | Mode::TabName)
    }
}

/// Everything the console knows.
#[derive(Debug, Clone)]
pub struct App {
    pub registries: Vec<RegistryState>,
    /// Where each location is in `registries`: 100,000 profiles arrive in parts, and a
    /// scan for each new one made the load quadratic (100 s).
    positions: super::location_index::LocationIndex,
    /// This host's name: an etcd owner elsewhere is not a process here.
    pub host: String,
    /// The pid namespace this console runs in, when it is not the host's: owners outside
    /// it cannot be seen from here (the banner says so).
    pub inside_container: Option<u64>,
    /// Index into `registries`, or `registries.len()` for the "all" tab.
    pub tab: usize,
    /// Index among the visible lease rows.
    pub selected: usize,
    pub filter: String,
    /// Some while the filter is being typed.
    pub filter_input: Option<String>,
    /// The tab name being typed (`T`).
    pub tab_input: Option<TabInput>,
    /// The filter being typed is the one in force, shown selected: a typed character
    /// replaces it whole (k9s), Backspace edits it.
    pub filter_selected: bool,
    pub sort: SortMode,
    /// The sort turned around (its key pressed again).
    pub sort_reverse: bool,
    pub only_not_alive: bool,
    /// Only leases that look leaked (`l`).
    pub only_leaks: bool,
    pub show_details: bool,
    pub dialog: Option<Dialog>,
    /// The event log has the arrow keys (`e`), and how many lines up from the newest it shows.
    pub log_focus: bool,
    pub log_scroll: usize,
    /// Lines the details pane is scrolled down (back to 0 when another lease is selected).
    pub details_scroll: usize,
    /// How far the open dialog's list is scrolled (rows; the view clamps it to the end).
    pub dialog_scroll: usize,
    pub log: VecDeque<LogLine>,
    /// How many lines at the log's front are the recorded history and its separator
    /// (a later part, another host's, joins them there).
    recorded: usize,
    /// How many registries the log has named with a "watching" line: after the first
    /// [`WATCHING_LINES`], the rest of a read are one line (100,000 profiles filled the
    /// log with theirs, and pushed out all else).
    pub watching_said: usize,
    /// The time the screen is rendered for (set from events, never read in view).
    pub now: f64,
    /// Ticks so far: the sparklines' clock.
    pub ticks: u64,
    /// The time zone timestamps are shown in.
    pub tz: jiff::tz::TimeZone,
    pub no_color: bool,
    /// The terminal's size (columns, rows): where a click lands.
    pub size: (u16, u16),
    /// The console takes the mouse (clicks, the wheel); off, the terminal's own text
    /// selection works (`m`, or LEASECTL_NO_MOUSE).
    pub mouse: bool,
    pub quit: bool,
    /// A plug-in with a panel, keys and jobs of its own (the demo).
    pub extension: Option<Box<dyn Extension>>,
    /// The rows last computed, and from what: grouping and sorting thousands of leases
    /// is most of a frame, and most frames (a clock tick, a key) change none of it.
    rows_cache: RefCell<Option<(RowsKey, Rc<Vec<Row>>)>>,
    /// Leases this console's own actions removed, logged then: the next snapshot's
    /// diff does not log them again as released or pruned.
    removed_here: HashSet<String>,
    /// Leases whose owner a stop is ending now (shown as ending until the stop is done).
    pub ending: HashSet<String>,
}

/// Everything [`App::rows`] depends on.
#[derive(Debug, Clone, PartialEq)]
struct RowsKey {
    tab: usize,
    filter: String,
    sort: SortMode,
    sort_reverse: bool,
    only_not_alive: bool,
    only_leaks: bool,
    generations: Vec<u64>,
}

impl App {
    /// The leases the owner `o` of a stop planned at `location` holds in the home's other
    /// registries, as last read: each with its registry's name. They end with it.
    pub fn held_elsewhere(&self, location: &Location, o: &crate::lease::stop::OwnerToStop) -> Vec<(String, &LeaseRow)> {
        let Some(root) = location.registry().map(|r| crate::lease::home::paths::root_of(&r.home)) else {
            return vec![];
        };
        let same_home =
            |l: &Location| l.registry().is_some_and(|r| crate::lease::home::paths::root_of(&r.home) == root);
        let held = |l: &&LeaseRow| {
            l.entry.pid() == o.recorded()
                && l.entry.process_start_time().is_none_or(|t| (t - o.start_time).abs() < 0.001)
                && l.liveness.counts_as_live()
        };
        self.registries
            .iter()
            .filter(|r| r.location != *location && same_home(&r.location))
            .flat_map(|r| r.leases.iter().filter(held).map(|l| (r.location.label(), l)))
            .collect()
    }

    /// How many sessions the owners of `plan` (made at `location`) hold, here and in the
    /// home's other registries, as last read: the most of any one owner.
    pub fn sessions_of_plan(&self, location: &Location, plan: &crate::lease::stop::StopPlan) -> usize {
        plan.owners.iter().map(|o| o.all_leases().count() + self.held_elsewhere(location, o).len()).max().unwrap_or(0)
    }

    pub fn new(registries: Vec<Location>, now: f64, tz: jiff::tz::TimeZone) -> App {
        App {
            registries: registries.into_iter().map(RegistryState::new).collect(),
            positions: Default::default(),
            host: crate::lease::owners::owner::hostname(),
            inside_container: crate::lease::owners::namespaces::inside_a_container(),
            tab: 0,
            selected: 0,
            filter: String::new(),
            filter_input: None,
            tab_input: None,
            filter_selected: false,
            sort: SortMode::Session,
            sort_reverse: false,
            only_not_alive: false,
            only_leaks: false,
            show_details: false,
            dialog: None,
            log_focus: false,
            log_scroll: 0,
            details_scroll: 0,
            dialog_scroll: 0,
            log: VecDeque::new(),
            recorded: 0,
            watching_said: 0,
            now,
            ticks: 0,
            tz,
            no_color: false,
            size: (0, 0),
            mouse: false,
            quit: false,
            extension: None,
            rows_cache: RefCell::new(None),
            removed_here: HashSet::new(),
            ending: HashSet::new(),
        }
    }

    /// True when there is an "all" tab (more than one registry).
    /// Who has the keys now (see [`Mode`]).
    pub fn mode(&self) -> Mode {
        if self.dialog.is_some() {
            Mode::Dialog
        } else if self.filter_input.is_some() {
            Mode::Filter
        } else if self.tab_input.is_some() {
            Mode::TabName
        } else if self.log_focus {
            Mode::Log
        } else {
            Mode::Table
        }
    }

    pub fn has_all_tab(&self) -> bool {
        self.registries.len() > 1
    }

    pub fn tab_count(&self) -> usize {
        self.registries.len() + usize::from(self.has_all_tab())
    }

    /// The registries the current tab shows.
    pub fn tab_registries(&self) -> Vec<usize> {
        if self.tab < self.registries.len() { vec![self.tab] } else { (0..self.registries.len()).collect() }
    }

    pub fn log(&mut self, profile: &str, level: LogLevel, text: impl Into<String>) {
        self.log_at(self.now, profile, level, text);
    }

    /// A log line for something that happened at `at` (a recorded event from before).
    pub fn log_at(&mut self, at: f64, profile: &str, level: LogLevel, text: impl Into<String>) {
        if self.log.len() == LOG_LEN {
            self.log.pop_front();
            self.recorded = self.recorded.saturating_sub(1);
        }
        self.log.push_back(LogLine { at, profile: profile.to_owned(), text: text.into(), level });
        // Scrolled back: the lines read stay put as new ones arrive.
        if self.log_scroll > 0 {
            self.log_scroll = (self.log_scroll + 1).min(self.log.len().saturating_sub(1));
        }
    }

    /// The place of `location` among the registries, if it has one.
    pub fn position(&mut self, location: &Location) -> Option<usize> {
        // `registries` is open to change: a map out of step is made again.
        let registries = &self.registries;
        let at = |i: usize| registries.get(i).map(|r| &r.location);
        if self.positions.len() != registries.len() {
            self.positions.clear();
            for (i, r) in registries.iter().enumerate() {
                self.positions.insert(&r.location, i, at);
            }
        }
        self.positions.find(location, at)
    }

    /// Add a registry's tab after the others; its place.
    pub fn add_registry(&mut self, location: Location) -> usize {
        let place = self.registries.len();
        // A quarter more at a time, not double: 100,000 tabs of state leave less unused.
        if place == self.registries.capacity() {
            self.registries.reserve_exact(place / 4 + 16);
        }
        self.registries.push(RegistryState::new(location));
        if self.positions.len() == place {
            let registries = &self.registries;
            self.positions.insert(&registries[place].location, place, |i| registries.get(i).map(|r| &r.location));
        }
        place
    }

    /// Over --host, tabs go by host, then root, then profiles by name: a host that answers
    /// late puts its registries beside its others, not after every other host's. The tab
    /// on screen stays on screen. Registries here (files, etcd) keep their places.
    pub fn order_host_tabs(&mut self) {
        if !self.registries.iter().all(|r| r.location.host().is_some()) {
            return;
        }
        let key = |r: &RegistryState| match &r.location {
            Location::Ssh(s) => (s.host.name.clone(), s.profile != "root", s.profile.clone()),
            _ => (String::new(), false, String::new()),
        };
        if self.registries.is_sorted_by(|a, b| key(a) <= key(b)) {
            return;
        }
        let shown = self.registries.get(self.tab).map(|r| r.location.clone());
        self.registries.sort_by_cached_key(key);
        self.positions.clear();
        self.rows_cache.borrow_mut().take();
        if let Some(shown) = shown {
            self.tab = self.position(&shown).unwrap_or(self.tab);
        }
    }

    /// The first tab whose name starts with `typed` (case aside), else the first that
    /// contains it; None when none does (or nothing is typed).
    pub fn tab_named(&self, typed: &str) -> Option<usize> {
        let typed = typed.to_lowercase();
        if typed.is_empty() {
            return None;
        }
        let name = |r: &RegistryState| r.location.label().to_lowercase();
        // The "all" tab is a tab too (found after the registries' own).
        let all = self.has_all_tab().then_some(self.registries.len());
        self.registries
            .iter()
            .position(|r| name(r).starts_with(&typed))
            .or_else(|| all.filter(|_| "all".starts_with(&typed)))
            .or_else(|| self.registries.iter().position(|r| name(r).contains(&typed)))
            .or_else(|| all.filter(|_| "all".contains(&typed)))
    }

    /// Put what the recorder saw before the console opened above what it has logged
    /// since, marked as such (it is read on a thread of its own and may come late).
    /// A later part (another host's history, read there) joins the parts before it: one
    /// list in time order, the newest [`HISTORY_EVENTS`], under one separator.
    pub fn prepend_history(&mut self, history: super::event::History) {
        if history.lines.is_empty() && history.warnings.is_empty() {
            return;
        }
        let mut earlier: Vec<LogLine> = self.log.drain(..self.recorded.min(self.log.len())).collect();
        if earlier.last().is_some_and(|l| l.text == HISTORY_SEPARATOR) {
            earlier.pop();
        }
        let (mut warnings, mut lines): (Vec<LogLine>, Vec<LogLine>) =
            earlier.into_iter().partition(|l| l.level == LogLevel::Warn);
        warnings.extend(history.warnings.into_iter().map(|w| LogLine {
            at: self.now,
            profile: String::new(),
            text: w,
            level: LogLevel::Warn,
        }));
        lines.extend(history.lines.into_iter().map(|l| LogLine {
            at: l.at,
            profile: l.profile,
            text: format!("↶ {}", l.text),
            level: LogLevel::Info,
        }));
        lines.sort_by(|a, b| a.at.total_cmp(&b.at));
        lines.drain(..lines.len().saturating_sub(HISTORY_EVENTS));
        let mut before: VecDeque<LogLine> = warnings.into();
        if !lines.is_empty() {
            before.extend(lines);
            before.push_back(LogLine {
                at: self.now,
                profile: String::new(),
                text: HISTORY_SEPARATOR.into(),
                level: LogLevel::Info,
            });
        }
        self.recorded = before.len();
        // Counted from the newest line, a scrolled-back view stays on the lines it shows.
        before.append(&mut self.log);
        // The oldest give way, as they do for live lines.
        let over = before.len().saturating_sub(LOG_LEN);
        before.drain(..over);
        self.recorded = self.recorded.saturating_sub(over);
        self.log = before;
    }

    /// The table's rows: the current tab's sessions and their leases, grouped, filtered
    /// and sorted (computed again only when one of those inputs changed).
    pub fn rows(&self) -> Rc<Vec<Row>> {
        let key = RowsKey {
            tab: self.tab,
            filter: self.effective_filter().to_owned(),
            sort: self.sort,
            sort_reverse: self.sort_reverse,
            only_not_alive: self.only_not_alive,
            only_leaks: self.only_leaks,
            generations: self.registries.iter().map(|r| r.generation).collect(),
        };
        if let Some((cached, rows)) = self.rows_cache.borrow().as_ref()
            && *cached == key
        {
            return Rc::clone(rows);
        }
        let rows = Rc::new(self.compute_rows());
        *self.rows_cache.borrow_mut() = Some((key, Rc::clone(&rows)));
        rows
    }

    /// The filter in force: the one being typed (it applies live), else the applied one.
    pub fn effective_filter(&self) -> &str {
        self.filter_input.as_deref().unwrap_or(&self.filter)
    }

    fn compute_rows(&self) -> Vec<Row> {
        let (needle, inverted) = parse_filter(self.effective_filter());
        let mut groups: Vec<Group<'_>> = Vec::new();
        for r in self.tab_registries() {
            // One pass: group the shown leases, and count every live owner per session
            // (a conflict is a conflict even when the filter hides one side of it).
            let first_group = groups.len();
            let mut by_session: HashMap<&str, usize, FxBuildHasher> = HashMap::default();
            let leases = &self.registries[r].leases;
            // Over --host every lease of a registry is on its host (an etcd lease names its own).
            let on_host = self.registries[r].location.host().map(|h| h.name.as_str());
            let title = |session: &str| self.registries[r].session(session).and_then(|c| c.title());
            for (i, l) in leases.iter().enumerate() {
                let session = l.entry.session_id();
                let g = *by_session.entry(session).or_insert_with(|| {
                    groups.push(Group {
                        registry: r,
                        session,
                        leases: Vec::new(),
                        live: 0,
                        rank: 0,
                        text: String::new(),
                    });
                    groups.len() - 1
                });
                let is_alive = l.liveness.is_alive();
                groups[g].live += usize::from(is_alive);
                if (self.only_not_alive && is_alive)
                    || (self.only_leaks && l.leak.is_none())
                    || (!needle.is_empty() && matches_filter(l, title(session), &needle) == inverted)
                {
                    continue;
                }
                groups[g].leases.push(i);
            }
            for g in &mut groups[first_group..] {
                let first = |f: &dyn Fn(&LeaseRow) -> i64| g.leases.iter().map(|i| f(&leases[*i])).min().unwrap_or(0);
                // The smallest text of the group's leases (a column of words).
                let least = |f: &dyn Fn(&LeaseRow) -> String| g.leases.iter().map(|i| f(&leases[*i])).min();
                g.rank = match self.sort {
                    SortMode::Age => first(&|l| l.entry.started_at().unwrap_or(f64::MAX) as i64),
                    SortMode::Started => first(&|l| l.entry.process_start_time().unwrap_or(f64::MAX) as i64),
                    SortMode::Pid => first(&|l| l.entry.pid() as i64),
                    SortMode::Liveness => first(&|l| liveness_rank(&l.liveness)),
                    _ => 0,
                };
                g.text = match self.sort {
                    SortMode::Lease => least(&|l| l.entry.lease_id().to_owned()),
                    SortMode::Surface => least(&|l| l.entry.surface().unwrap_or("").to_owned()),
                    SortMode::Owner => least(&|l| l.owner.as_ref().map(|o| o.name.clone()).unwrap_or_default()),
                    SortMode::LiveId => least(&|l| l.entry.live_session_id()),
                    SortMode::Host => least(&|l| l.host.as_deref().or(on_host).unwrap_or("").to_owned()),
                    _ => None,
                }
                .unwrap_or_default();
            }
        }
        groups.retain(|g| !g.leases.is_empty());
        // (registry, session) names one group: the order is total, so unstable sorting is exact.
        groups.sort_unstable_by(|a, b| {
            let order = (a.rank, &a.text, a.session, a.registry).cmp(&(b.rank, &b.text, b.session, b.registry));
            if self.sort_reverse { order.reverse() } else { order }
        });
        let mut rows = Vec::with_capacity(groups.len() * 2);
        for g in groups {
            rows.push(Row::Session {
                registry: g.registry,
                count: g.leases.len(),
                conflict: g.live > 1,
                session: g.session.to_owned(),
            });
            rows.extend(g.leases.into_iter().map(|lease| Row::Lease { registry: g.registry, lease }));
        }
        rows
    }

    /// Whether the screen may change from one second to the next with no new data:
    /// ages under a minute count seconds, the lock banner counts how long, the header's
    /// sparkline moves while its last samples differ, and dialogs, the filter line and an
    /// extension (the demo) may animate. Otherwise only the minute changes what is shown
    /// (`3m`, `2h05m`, `11-28 22:19`), and an idle console need not draw every second.
    pub fn ticks_visibly(&self) -> bool {
        // One more sample than the sparkline is wide: equal ones mean it does not move.
        const SPARK: usize = 25;
        if self.mode().is_modal() || self.extension.is_some() {
            return true;
        }
        self.tab_registries().iter().map(|r| &self.registries[*r]).any(|r| {
            let h = &r.history;
            r.lock_seen.is_some()
                || h.len(self.ticks) < SPARK
                || h.changed_within(self.ticks, SPARK as u64)
                || r.leases.iter().any(|l| l.entry.started_at().is_some_and(|t| self.now - t < 61.0))
        })
    }

    /// Note a lease this console's action removed (and logged).
    pub fn removed_here(&mut self, lease_id: &str) {
        self.removed_here.insert(lease_id.to_owned());
    }

    /// Whether a lease gone from a snapshot was removed (and logged) by this console;
    /// each removal is answered once.
    pub fn was_removed_here(&mut self, lease_id: &str) -> bool {
        self.removed_here.remove(lease_id)
    }

    /// The lease rows only, in display order (what the selection moves over).
    pub fn lease_rows(&self) -> Vec<(usize, usize)> {
        leases_of(&self.rows())
    }

    /// The selected lease: (registry index, lease index).
    pub fn selection(&self) -> Option<(usize, usize)> {
        self.selection_in(&self.rows())
    }

    /// The selected lease among rows already computed (rendering computes them once).
    pub fn selection_in(&self, rows: &[Row]) -> Option<(usize, usize)> {
        let leases = leases_of(rows);
        leases.get(self.selected.min(leases.len().saturating_sub(1))).copied()
    }

    pub fn selected_lease(&self) -> Option<&LeaseRow> {
        self.selection().map(|(r, l)| &self.registries[r].leases[l])
    }

    /// Select the lease with this id when it is among the visible rows; false when not.
    pub fn select_lease(&mut self, lease_id: &str) -> bool {
        let found =
            self.lease_rows().iter().position(|&(r, l)| self.registries[r].leases[l].entry.lease_id() == lease_id);
        if let Some(i) = found {
            if i != self.selected {
                self.details_scroll = 0;
            }
            self.selected = i;
        }
        found.is_some()
    }

    /// Keep the selection inside the visible rows.
    pub fn clamp_selection(&mut self) {
        let n = self.lease_rows().len();
        self.selected = if n == 0 { 0 } else { self.selected.min(n - 1) };
    }
}

/// The lease rows among `rows`: (registry index, lease index).
fn leases_of(rows: &[Row]) -> Vec<(usize, usize)> {
    rows.iter()
        .filter_map(|r| match r {
            Row::Lease { registry, lease } => Some((*registry, *lease)),
            Row::Session { .. } => None,
        })
        .collect()
}

struct Group<'a> {
    registry: usize,
    session: &'a str,
    leases: Vec<usize>,
    /// Live owners of this session in its registry, shown or not.
    live: usize,
    /// The sort's first key (0 when sorting by name).
    rank: i64,
    /// The sort's key when it is text (empty otherwise).
    text: String,
}

/// Whether what the screen shows of the lease contains `needle` (already lowercase):
/// session, its title from state.db, surface, pid, owner name, live id, lease id, host,
/// the badge's words and the LEAK? mark (an operator types what they see).
fn matches_filter(l: &LeaseRow, title: Option<&str>, needle: &str) -> bool {
    let has = |s: &str| s.to_lowercase().contains(needle);
    has(l.entry.session_id())
        || title.is_some_and(has)
        || has(l.entry.surface().unwrap_or(""))
        || l.entry.pid().to_string().contains(needle)
        || l.owner.as_ref().is_some_and(|o| has(&o.name))
        || has(&l.entry.live_session_id())
        || has(l.entry.lease_id())
        || l.host.as_deref().is_some_and(has)
        || has(l.liveness.name())
        || has(&super::style::badge(&l.liveness).0)
        || (l.leak.is_some() && "leak?".contains(needle))
}

/// A filter as typed: the lowercase needle, and whether a leading `!` inverts it.
fn parse_filter(text: &str) -> (String, bool) {
    match text.strip_prefix('!') {
        Some(rest) => (rest.to_lowercase(), true),
        None => (text.to_lowercase(), false),
    }
}

fn liveness_rank(l: &Liveness) -> i64 {
    match l {
        Liveness::Dead(_) => 0,
        Liveness::Recycled { .. } => 1,
        Liveness::Unknown(_) | Liveness::WorkRunning { .. } => 2,
        Liveness::Alive | Liveness::AliveInNamespace(_) => 3,
    }
}

/// One line of the lease table.
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    Session { registry: usize, session: String, count: usize, conflict: bool },
    Lease { registry: usize, lease: usize },
}
