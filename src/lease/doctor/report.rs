//! What `doctor` found in one registry, and the leases it names: stale owners and leak
//! suspects, held once and worded only when shown. At 50,000 leases with 35,000 live
//! owners idle, the suspects' copied views and their reasons were 8 MB beside the views
//! they were copied from.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::lease::format::problem::Problem;
use crate::lease::home::config::CapSetting;
use crate::lease::home::context::Leak;
use crate::lease::home::paths::Registry;
use crate::lease::owners::liveness::Liveness;
use crate::lease::view::LeaseView;

/// Everything `doctor` checks in one registry. Sent over `serve --stdio` as it always
/// was (`stale` and `leak_suspects` lists), so peers of other versions read it.
#[derive(Debug, Clone, Serialize)]
pub struct DoctorReport {
    pub registry: Registry,
    pub exists: bool,
    pub cap: CapSetting,
    /// Strict-validation problems, every one, with rule and entry.
    pub problems: Vec<Problem>,
    /// Indexes of entries whose session id is `""` (Hermes can write these; they block every acquire).
    pub empty_session_ids: Vec<usize>,
    /// Sessions held by more than one live entry.
    pub conflicts: BTreeMap<String, Vec<LeaseView>>,
    /// Dead and recycled owners still listed (a prune removes them), and live owners
    /// whose session has ended or gone idle (state.db).
    #[serde(flatten)]
    pub leases: DoctorLeases,
    /// Temp files older than a few seconds: a crashed writer's leftovers.
    pub leftover_temp_files: Vec<PathBuf>,
    /// Who holds the registry lock right now, if anyone.
    pub lock_holder: Option<u32>,
    /// That holder's command name, as lslocks shows it.
    pub lock_holder_command: Option<String>,
    /// How long doctor watched the holder keep the lock (at most [`crate::lease::view::LOCK_WATCH`]),
    /// and whether it still held it then.
    pub lock_watched: Option<(Duration, bool)>,
    /// The lock file is a symlink, FIFO or anything but a regular file: no acquire can work.
    pub lock_problem: Option<String>,
    /// The registry is a symlink (to this target): every write refuses to go through it.
    pub symlink_to: Option<PathBuf>,
    /// Leases whose owner is alive.
    pub live: usize,
    /// More live leases than the cap allows (the cap was lowered, or a writer ignored it).
    pub over_cap: bool,
    /// Why state.db could not tell (no file, locked...), when it could not.
    pub context_unknown: Option<String>,
    /// A bad `leasectl.idle_threshold` in config.yaml, ignored.
    pub idle_warning: Option<String>,
    /// Leases whose owner `/proc` hides from this user (`hidepid`): kept, counted, never
    /// pruned; named so that nobody takes them for dead.
    pub hidden: Vec<LeaseView>,
    /// The pid namespaces live owners run in, when more than one (a container's and the
    /// host's): a hazard, since Hermes in one drops the others' leases.
    pub pid_namespaces: Vec<crate::lease::view::NamespaceShare>,
    /// The owners of the leak suspects, each once: how many sessions it holds here and
    /// its command line (what its kind and the safe move are judged by).
    pub suspect_owners: Vec<SuspectOwner>,
}

/// An owner of leak suspects.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct SuspectOwner {
    pub pid: u64,
    pub process_start_time: Option<f64>,
    pub sessions: usize,
    pub cmdline: Vec<String>,
}

impl DoctorReport {
    /// The owner of `v` among [`DoctorReport::suspect_owners`].
    pub fn suspect_owner(&self, v: &LeaseView) -> Option<&SuspectOwner> {
        let start = v.entry.process_start_time().map(f64::to_bits);
        self.suspect_owners.iter().find(|o| o.pid == v.entry.pid() && o.process_start_time.map(f64::to_bits) == start)
    }

    /// The kind of `v`'s owner, its situation as doctor judged it (`judged`: see
    /// [`DoctorLeases::leak_suspects_judged`]) and the safe move for it.
    pub fn owner_move(&self, v: &LeaseView, judged: Option<(bool, bool)>) -> crate::lease::owners::kind::OwnerMove {
        use crate::lease::owners::kind::{OwnerKind, OwnerMove, Situation, safe_move};
        let owner = self.suspect_owner(v);
        let kind = OwnerKind::of(&v.entry, owner.map(|o| o.cmdline.as_slice()));
        let (ended, between) = judged.unwrap_or_default();
        let situation = Situation {
            gateway_turn: between.then_some(false),
            past_turn_grace: between,
            session_ended: ended,
            sessions_held: owner.map_or(1, |o| o.sessions),
        };
        OwnerMove { safe: safe_move(&kind, situation), kind, situation }
    }
}

impl DoctorReport {
    /// True when something needs an operator (doctor exits non-zero).
    pub fn has_problems(&self) -> bool {
        !self.problems.is_empty()
            || !self.conflicts.is_empty()
            || !self.leftover_temp_files.is_empty()
            || self.lock_problem.is_some()
            || self.symlink_to.is_some()
            || self.over_cap
            || !self.pid_namespaces.is_empty()
    }
}

/// The leases doctor names: dead and recycled owners (stale, a prune removes them) and
/// live owners whose session has ended or gone idle (leak suspects: worth a look, not a
/// problem). One list in the registry's order (a suspect is live, so never stale), each
/// suspect's reason kept as its parts.
#[derive(Debug, Clone, Default)]
pub struct DoctorLeases {
    views: Vec<LeaseView>,
    /// The suspects, in the registry's order.
    suspects: Vec<Suspect>,
    /// Owner names, end reasons and reasons worded elsewhere, each held once.
    words: Vec<Box<str>>,
    /// When the suspects were judged: a reason's "ago" counts from then.
    judged_at: f64,
}

/// A leak suspect: its place in [`DoctorLeases::views`] and why.
#[derive(Debug, Clone, Copy)]
struct Suspect {
    place: u32,
    /// The owner's name in `words` (for [`Why::Worded`], the whole reason).
    word: u32,
    why: Why,
}

// 35,000 suspects in 840 KB.
const _: () = assert!(std::mem::size_of::<Suspect>() == 24);

/// No word (an ended session without an end reason).
const NO_WORD: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
enum Why {
    /// The session ended at this time, for the reason at this place in `words` (or
    /// [`NO_WORD`]).
    Ended { at: f64, reason: u32 },
    /// No activity since this time.
    Idle { since: f64 },
    /// A gateway's lease taken at this time, no turn running for its chat.
    BetweenTurns { since: f64 },
    /// Worded by the peer that sent the report.
    Worded,
}

impl DoctorLeases {
    /// Dead and recycled owners still listed: every lease here but the suspects.
    pub fn stale(&self) -> impl Iterator<Item = &LeaseView> {
        let mut suspects = self.suspects.iter().map(|s| s.place as usize).peekable();
        self.views.iter().enumerate().filter_map(move |(i, v)| suspects.next_if_eq(&i).is_none().then_some(v))
    }

    /// Live owners whose session has ended or gone idle, each with the reason.
    pub fn leak_suspects(&self) -> impl Iterator<Item = (&LeaseView, Cow<'_, str>)> {
        self.suspects.iter().filter_map(|s| {
            let view = self.views.get(s.place as usize)?;
            Some((view, self.reason(view, s)))
        })
    }

    /// Each leak suspect with what its reason tells of its situation: its session ended
    /// (Some(true)), or a gateway's chat with no turn running (Some(false) in the second);
    /// None where a peer worded the reason.
    pub fn leak_suspects_judged(&self) -> impl Iterator<Item = (&LeaseView, Cow<'_, str>, Option<(bool, bool)>)> {
        self.suspects.iter().filter_map(|s| {
            let view = self.views.get(s.place as usize)?;
            Some((view, self.reason(view, s), judged(s.why)))
        })
    }

    /// [`DoctorLeases::leak_suspects_judged`] without the reasons' words.
    pub fn leak_suspect_situations(&self) -> impl Iterator<Item = (&LeaseView, Option<(bool, bool)>)> {
        self.suspects.iter().filter_map(|s| Some((self.views.get(s.place as usize)?, judged(s.why))))
    }

    pub fn stale_count(&self) -> usize {
        self.views.len() - self.suspects.len()
    }

    pub fn leak_suspect_count(&self) -> usize {
        self.suspects.len()
    }

    fn word(&self, at: u32) -> Option<&str> {
        self.words.get(at as usize).map(|w| &**w)
    }

    fn reason(&self, view: &LeaseView, s: &Suspect) -> Cow<'_, str> {
        let leak = match s.why {
            Why::Ended { at, reason } => Leak::Ended { at, reason: self.word(reason) },
            Why::Idle { since } => Leak::Idle { since },
            Why::BetweenTurns { since } => Leak::BetweenTurns { since },
            Why::Worded => return Cow::Borrowed(self.word(s.word).unwrap_or_default()),
        };
        Cow::Owned(leak.worded(view.entry.pid(), self.word(s.word).unwrap_or("-"), self.judged_at))
    }
}

/// What a suspect's reason tells of its situation: (its session ended, a gateway's chat
/// with no turn running); None where a peer worded it.
fn judged(why: Why) -> Option<(bool, bool)> {
    match why {
        Why::Ended { .. } => Some((true, false)),
        Why::Idle { .. } => Some((false, false)),
        Why::BetweenTurns { .. } => Some((false, true)),
        Why::Worded => None,
    }
}

/// As a report always went over `serve --stdio`: `stale`, a list of leases, and
/// `leak_suspects`, a list of `[lease, reason]`.
impl Serialize for DoctorLeases {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        struct Stale<'a>(&'a DoctorLeases);
        impl Serialize for Stale<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.stale())
            }
        }
        struct LeakSuspects<'a>(&'a DoctorLeases);
        impl Serialize for LeakSuspects<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.leak_suspects())
            }
        }
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("stale", &Stale(self))?;
        map.serialize_entry("leak_suspects", &LeakSuspects(self))?;
        map.end()
    }
}

fn is_stale(v: &LeaseView) -> bool {
    matches!(v.liveness, Liveness::Dead(_) | Liveness::Recycled { .. })
}

/// Leak suspects as they are judged, then kept with the stale leases in one list.
pub(crate) struct Suspects {
    /// Placed by their index in the registry until kept.
    found: Vec<Suspect>,
    words: Vec<Box<str>>,
    placed: HashMap<Box<str>, u32>,
    judged_at: f64,
}

impl Suspects {
    /// Room for `live` suspects at most: made once, not grown by doubling while the
    /// sessions' context is held (35,000 suspects grew to 2 MB).
    pub(crate) fn judged_at(judged_at: f64, live: usize) -> Suspects {
        Suspects { found: Vec::with_capacity(live), words: vec![], placed: HashMap::new(), judged_at }
    }

    /// The lease at `index` of the registry looks leaked: `leak`, its owner named `owner`.
    /// Indexes come in increasing order.
    pub(crate) fn add(&mut self, index: usize, leak: Leak<'_>, owner: &str) {
        let Ok(index) = u32::try_from(index) else { return };
        let word = self.place(owner);
        let why = match leak {
            Leak::Ended { at, reason } => Why::Ended { at, reason: reason.map_or(NO_WORD, |r| self.place(r)) },
            Leak::Idle { since } => Why::Idle { since },
            Leak::BetweenTurns { since } => Why::BetweenTurns { since },
        };
        self.found.push(Suspect { place: index, word, why });
    }

    fn place(&mut self, word: &str) -> u32 {
        if let Some(&at) = self.placed.get(word) {
            return at;
        }
        let at = u32::try_from(self.words.len()).unwrap_or(NO_WORD);
        self.words.push(word.into());
        self.placed.insert(word.into(), at);
        at
    }

    /// The stale leases and these suspects among `views` (the registry's leases, judged),
    /// kept in place; the others let go.
    pub(crate) fn keep(self, mut views: Vec<LeaseView>) -> DoctorLeases {
        let mut suspects = self.found;
        let mut found = 0;
        let (mut index, mut kept) = (0u32, 0u32);
        views.retain(|v| {
            let at = index;
            index += 1;
            let keep = match suspects.get_mut(found).filter(|s| s.place == at) {
                Some(suspect) => {
                    suspect.place = kept;
                    found += 1;
                    true
                }
                None => is_stale(v),
            };
            kept += u32::from(keep);
            keep
        });
        suspects.truncate(found);
        suspects.shrink_to_fit();
        DoctorLeases { views, suspects, words: self.words, judged_at: self.judged_at }
    }
}

impl<'de> Deserialize<'de> for DoctorReport {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<DoctorReport, D::Error> {
        Received::deserialize(d).map(DoctorReport::from)
    }
}

/// A report as it arrives over `serve --stdio`.
#[derive(Deserialize)]
struct Received {
    registry: Registry,
    exists: bool,
    cap: CapSetting,
    problems: Vec<Problem>,
    empty_session_ids: Vec<usize>,
    conflicts: BTreeMap<String, Vec<LeaseView>>,
    stale: Vec<LeaseView>,
    leak_suspects: Vec<(LeaseView, String)>,
    leftover_temp_files: Vec<PathBuf>,
    lock_holder: Option<u32>,
    lock_holder_command: Option<String>,
    lock_watched: Option<(Duration, bool)>,
    lock_problem: Option<String>,
    symlink_to: Option<PathBuf>,
    live: usize,
    over_cap: bool,
    context_unknown: Option<String>,
    idle_warning: Option<String>,
    /// Absent from an older leasectl's report.
    #[serde(default)]
    hidden: Vec<LeaseView>,
    #[serde(default)]
    pid_namespaces: Vec<crate::lease::view::NamespaceShare>,
    #[serde(default)]
    suspect_owners: Vec<SuspectOwner>,
}

impl From<Received> for DoctorReport {
    fn from(r: Received) -> DoctorReport {
        let mut views = r.stale;
        views.reserve_exact(r.leak_suspects.len());
        let mut words = Vec::with_capacity(r.leak_suspects.len());
        let mut suspects = Vec::with_capacity(r.leak_suspects.len());
        for (view, reason) in r.leak_suspects {
            let (Ok(place), Ok(word)) = (u32::try_from(views.len()), u32::try_from(words.len())) else { break };
            suspects.push(Suspect { place, word, why: Why::Worded });
            views.push(view);
            words.push(reason.into_boxed_str());
        }
        DoctorReport {
            registry: r.registry,
            exists: r.exists,
            cap: r.cap,
            problems: r.problems,
            empty_session_ids: r.empty_session_ids,
            conflicts: r.conflicts,
            leases: DoctorLeases { views, suspects, words, judged_at: 0.0 },
            leftover_temp_files: r.leftover_temp_files,
            lock_holder: r.lock_holder,
            lock_holder_command: r.lock_holder_command,
            lock_watched: r.lock_watched,
            lock_problem: r.lock_problem,
            symlink_to: r.symlink_to,
            live: r.live,
            over_cap: r.over_cap,
            context_unknown: r.context_unknown,
            idle_warning: r.idle_warning,
            hidden: r.hidden,
            pid_namespaces: r.pid_namespaces,
            suspect_owners: r.suspect_owners,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::owners::liveness::DeadCause;

    fn lease(i: usize, liveness: Liveness) -> LeaseView {
        crate::lease::view::test_lease(i, &format!("S-{i}"), liveness)
    }

    /// Doctor keeps only the stale leases and the suspects, each once, in the registry's
    /// order; a suspect's reason is worded as it always was. Over `serve --stdio` the
    /// report is the lists it always was (`stale`, `leak_suspects` of `[lease, reason]`),
    /// and a report read from there says the same.
    #[test]
    fn a_report_keeps_its_stale_leases_and_suspects_once_and_sends_them_as_lists() {
        let views = vec![
            lease(0, Liveness::Alive),
            lease(1, Liveness::Dead(DeadCause::PidGone)),
            lease(2, Liveness::Alive),
            lease(3, Liveness::Recycled { recorded: 1.0, actual: 2.0 }),
            lease(4, Liveness::Alive),
            lease(5, Liveness::Alive),
        ];
        let now = 100_000.0;
        let mut suspects = Suspects::judged_at(now, 4);
        suspects.add(2, Leak::Ended { at: now - 3.0 * 3600.0, reason: Some("tui_shutdown") }, "python3");
        suspects.add(4, Leak::Idle { since: now - 7300.0 }, "python3");
        suspects.add(5, Leak::Ended { at: now - 60.0, reason: None }, "hermes");
        let leases = suspects.keep(views.clone());
        let id = |v: &LeaseView| v.entry.lease_id().to_owned();
        assert_eq!(leases.stale().map(id).collect::<Vec<_>>(), ["lease-1", "lease-3"]);
        let said: Vec<(String, String)> = leases.leak_suspects().map(|(v, why)| (id(v), why.into_owned())).collect();
        let worded = [
            ("lease-2", "session ended 3h00m ago (tui_shutdown) but pid 102 (python3) still holds it"),
            ("lease-4", "no activity for 2h01m but pid 104 (python3) still holds it"),
            ("lease-5", "session ended 1m ago but pid 105 (hermes) still holds it"),
        ];
        assert_eq!(said, worded.map(|(i, w)| (i.to_owned(), w.to_owned())));
        assert_eq!((leases.stale_count(), leases.leak_suspect_count()), (2, 3));
        // Lease 0 (live, no suspect) is let go: five of six kept, no copies.
        assert_eq!(leases.views.len(), 5);

        let report = DoctorReport {
            registry: Registry::new("root", "/h"),
            exists: true,
            cap: CapSetting::default(),
            problems: vec![],
            empty_session_ids: vec![],
            conflicts: BTreeMap::new(),
            leases,
            leftover_temp_files: vec![],
            lock_holder: None,
            lock_holder_command: None,
            lock_watched: None,
            lock_problem: None,
            symlink_to: None,
            live: 4,
            over_cap: false,
            context_unknown: None,
            idle_warning: None,
            hidden: vec![],
            pid_namespaces: vec![],
            suspect_owners: vec![],
        };
        let sent = serde_json::to_value(&report).expect("to json");
        let listed = |v: &LeaseView| serde_json::to_value(v).expect("a lease");
        assert_eq!(sent["stale"], serde_json::json!([listed(&views[1]), listed(&views[3])]));
        assert_eq!(
            sent["leak_suspects"],
            serde_json::json!([
                [listed(&views[2]), worded[0].1],
                [listed(&views[4]), worded[1].1],
                [listed(&views[5]), worded[2].1]
            ])
        );
        let back: DoctorReport = serde_json::from_value(sent.clone()).expect("from json");
        assert_eq!(back.leases.leak_suspects().map(|(v, why)| (id(v), why.into_owned())).collect::<Vec<_>>(), said);
        assert_eq!(back.leases.stale().map(id).collect::<Vec<_>>(), ["lease-1", "lease-3"]);
        assert_eq!(serde_json::to_value(&back).expect("again"), sent);
    }
}
