//! Who is alive (spec §5). A pid is alive when it exists, is a process (not a
//! thread id, not a zombie) and, when a start time was recorded, still has it.

use std::collections::HashMap;

use crate::lease::format::entry::Entry;
use crate::lease::owners::namespaces::{Elsewhere, Found, NamespacedOwner};
use crate::lease::owners::pidfds;
use crate::lease::words::unusable::Unusable;
use rustc_hash::FxBuildHasher as FxBuild;
use rustix::time::ClockId;

/// How an owner stands, as judged now.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Liveness {
    Alive,
    /// Alive in a pid namespace below this one (a container): the lease records its pid
    /// there, this host knows it by another (`host_pid`), and its start time matches.
    AliveInNamespace(Box<NamespacedOwner>),
    Dead(DeadCause),
    /// The pid runs, but its start time differs from the recorded one: another process.
    Recycled {
        recorded: f64,
        actual: f64,
    },
    Unknown(UnknownCause),
    /// The owner (a `leasectl run` keeper) is dead or recycled, but processes of its work
    /// still run (found by the lease id in their environment): the session is still
    /// being written, so the lease is kept like a live one.
    WorkRunning {
        pids: Vec<u32>,
    },
}

pub use crate::lease::format::entry::WORK_KEY;
/// The environment variable that names the lease in the work's processes.
pub const WORK_ENV: &str = "LEASECTL_LEASE_ID";

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum DeadCause {
    PidGone,
    Zombie,
    /// The number is a thread of process `tgid`, not a process of its own.
    ThreadId {
        tgid: u64,
    },
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum UnknownCause {
    /// Whether the pid exists could not be found out.
    ProbeFailed(String),
    /// The pid exists but its start time could not be read.
    StartTimeUnreadable(String),
    /// The kernel says the pid exists, but `/proc` does not show it to this user
    /// (`hidepid`): another user's owner, alive for all anyone here can tell.
    Hidden(String),
    /// More than one process of other pid namespaces recorded this pid and start time.
    Ambiguous(String),
    /// Seen from inside a container: the owner started before this pid namespace's first
    /// process did, so it runs (or ran) outside it, where nobody here can look.
    Outside(String),
}

impl Liveness {
    /// The name used in JSON and tables.
    pub fn name(&self) -> &'static str {
        match self {
            Liveness::Alive | Liveness::AliveInNamespace(_) => "alive",
            Liveness::Dead(_) => "dead",
            Liveness::Recycled { .. } => "recycled",
            Liveness::Unknown(UnknownCause::Hidden(_)) => "hidden",
            Liveness::Unknown(_) => "unknown",
            Liveness::WorkRunning { .. } => "work-running",
        }
    }

    /// Alive, or hidden by `/proc` (the kernel says it runs): what counts as a live lease
    /// and a slot in use in every count shown, as the fence keeps both.
    pub fn counts_as_live(&self) -> bool {
        matches!(self, Liveness::Alive | Liveness::AliveInNamespace(_) | Liveness::Unknown(UnknownCause::Hidden(_)))
    }

    /// Proven alive: here, or in another pid namespace.
    pub fn is_alive(&self) -> bool {
        matches!(self, Liveness::Alive | Liveness::AliveInNamespace(_))
    }

    /// The owner in another pid namespace, where it runs there.
    pub fn namespaced(&self) -> Option<&NamespacedOwner> {
        match self {
            Liveness::AliveInNamespace(owner) => Some(owner),
            _ => None,
        }
    }

    /// True when a recycled verdict differs by a whole number of seconds: the
    /// signature of a clock step moving `btime`, not of a new process.
    pub fn clock_step_suspected(&self) -> bool {
        match self {
            Liveness::Recycled { recorded, actual } => {
                let diff = actual - recorded;
                diff.round() != 0.0 && (diff - diff.round()).abs() < 0.001
            }
            _ => false,
        }
    }

    /// One line for people: why this verdict.
    pub fn explain(&self) -> String {
        match self {
            Liveness::Alive => "alive".into(),
            Liveness::AliveInNamespace(owner) => {
                format!("alive in another pid namespace: pid {} on this host, in {}", owner.host_pid, owner.place())
            }
            Liveness::Dead(DeadCause::PidGone) => "dead: pid gone".into(),
            Liveness::Dead(DeadCause::Zombie) => "dead: zombie".into(),
            Liveness::Dead(DeadCause::ThreadId { tgid }) => format!("dead: a thread of pid {tgid}"),
            Liveness::Recycled { recorded, actual } => {
                let diff = actual - recorded;
                let by = crate::lease::words::human::duration(diff.abs());
                if self.clock_step_suspected() {
                    format!("recycled: start time differs by exactly {by} (clock step?)")
                } else {
                    let when = if diff < 0.0 { "earlier" } else { "later" };
                    format!("recycled: pid now belongs to a process started {by} {when}")
                }
            }
            Liveness::Unknown(UnknownCause::ProbeFailed(why)) => format!("unknown: {why}"),
            Liveness::Unknown(UnknownCause::StartTimeUnreadable(why)) => {
                format!("unknown: start time unreadable ({why})")
            }
            Liveness::Unknown(UnknownCause::Hidden(why)) => format!("hidden: {why}"),
            Liveness::Unknown(UnknownCause::Ambiguous(why) | UnknownCause::Outside(why)) => format!("unknown: {why}"),
            Liveness::WorkRunning { pids } => {
                let shown: Vec<String> = pids.iter().take(5).map(u32::to_string).collect();
                let more = if pids.len() > 5 { format!(" and {} more", pids.len() - 5) } else { String::new() };
                format!("WORK RUNNING: the owner is gone but its work runs on (pid {}{more})", shown.join(", "))
            }
        }
    }
}

/// What `/proc` says about one pid.
#[derive(Debug, Clone, PartialEq)]
pub enum ProcState {
    Running {
        start_time: Result<f64, String>,
    },
    Gone,
    Zombie,
    Thread {
        tgid: u64,
    },
    Unprobeable(String),
    /// Not in this user's `/proc`, but the kernel says the pid exists.
    Hidden(String),
}

/// Probes pids for one operation: each distinct pid once, `btime` read once.
#[derive(Debug, Default)]
pub struct Prober {
    boot: Option<Result<BootClock, String>>,
    cache: HashMap<u64, ProcState, FxBuild>,
    /// Lease id -> pids whose environment names it; read from /proc once, when first needed.
    work: Option<HashMap<String, Vec<u32>>>,
    /// The owner (pid, start time's bits) last judged alive: consecutive entries of one
    /// owner (a gateway's sessions) are judged once. A prober's verdicts do not change.
    last_alive: Option<(u64, u64)>,
    /// Processes of other pid namespaces: read from /proc once, when an owner first does
    /// not match here (a host where every owner matches never reads it).
    elsewhere: Option<Elsewhere>,
    /// What was found there for each (pid, start time's bits): a container's gateway
    /// holds many leases, and its cgroup is read once.
    found_elsewhere: HashMap<(u64, u64), Option<Liveness>, FxBuild>,
    /// Inside a container: when its pid namespace's first process started (None on the host).
    namespace_init: Option<Option<f64>>,
}

#[derive(Debug, Clone, Copy)]
struct BootClock {
    btime: u64,
    clk_tck: f64,
}

impl Prober {
    pub fn new() -> Prober {
        Prober::default()
    }

    /// The state of `pid`, probed at most once per prober.
    pub fn state(&mut self, pid: u64) -> ProcState {
        self.state_ref(pid).clone()
    }

    fn state_ref(&mut self, pid: u64) -> &ProcState {
        let boot = &mut self.boot;
        self.cache.entry(pid).or_insert_with(|| probe(pid, boot.get_or_insert_with(read_boot_clock).clone()))
    }

    /// The liveness of an entry's owner; a dead `run` owner whose work still runs is
    /// [`Liveness::WorkRunning`].
    pub fn judge(&mut self, entry: &Entry) -> Liveness {
        let owner = (entry.pid(), entry.process_start_time().map_or(f64::NAN.to_bits(), f64::to_bits));
        if self.last_alive == Some(owner) {
            return Liveness::Alive;
        }
        let verdict = self.judge_pid(entry.pid(), entry.process_start_time());
        if matches!(verdict, Liveness::Alive) {
            self.last_alive = Some(owner);
        }
        if matches!(verdict, Liveness::Dead(_) | Liveness::Recycled { .. }) && entry.work_marked() {
            let work = self.work.get_or_insert_with(scan_work);
            if let Some(pids) = work.get(entry.lease_id()) {
                return Liveness::WorkRunning { pids: pids.clone() };
            }
        }
        verdict
    }

    /// The owner that recorded `pid` and `recorded` (its start time, if it recorded one):
    /// here, or in another pid namespace; inside a container, outside it. What an entry
    /// that cannot be read whole is judged by too (a repair's dropped entries).
    pub fn judge_pid(&mut self, pid: u64, recorded: Option<f64>) -> Liveness {
        let verdict = judge_state(self.state_ref(pid), recorded);
        match (&verdict, recorded) {
            (Liveness::Dead(_) | Liveness::Recycled { .. }, Some(recorded)) => {
                self.look_elsewhere(pid, recorded).or_else(|| self.outside(recorded)).unwrap_or(verdict)
            }
            _ => verdict,
        }
    }

    /// The owner that recorded `pid` and `recorded` in another pid namespace, when one
    /// process there is it; two that match are unknown, never a guess. Only the start
    /// time picks it: every container has a pid 1.
    fn look_elsewhere(&mut self, pid: u64, recorded: f64) -> Option<Liveness> {
        if let Some(found) = self.found_elsewhere.get(&(pid, recorded.to_bits())) {
            return found.clone();
        }
        let boot = self.boot.get_or_insert_with(read_boot_clock).clone().ok()?;
        let elsewhere = self.elsewhere.get_or_insert_with(Elsewhere::scan);
        let found = match elsewhere.find(pid, recorded, |ticks| Some(start_time_from(ticks, boot.clk_tck, boot.btime)))
        {
            Found::Nobody => None,
            Found::One(owner) => Some(Liveness::AliveInNamespace(Box::new(owner))),
            Found::Several(host_pids) => Some(Liveness::Unknown(UnknownCause::Ambiguous(format!(
                "{} processes in other pid namespaces recorded pid {pid} with this start time (pids {} on this \
                 host): which one owns it cannot be told",
                host_pids.len(),
                host_pids.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
            )))),
        };
        self.found_elsewhere.insert((pid, recorded.to_bits()), found.clone());
        found
    }

    /// Inside a container: an owner that started before this pid namespace's first
    /// process is not one of its processes, whatever its pid shows here. Unknown, so
    /// kept: Hermes in the same place would drop it, and let a second writer in.
    fn outside(&mut self, recorded: f64) -> Option<Liveness> {
        let init = (*self.namespace_init.get_or_insert_with(super::namespaces::namespace_init_start))?;
        (recorded < init - 0.001).then(|| {
            Liveness::Unknown(UnknownCause::Outside(format!(
                "its owner started {} before this pid namespace's first process: it runs or ran outside this \
                 container, where leasectl here cannot see; judge it on the host",
                crate::lease::words::human::duration(init - recorded)
            )))
        })
    }

    /// The start time of `pid` as psutil computes it, if it is a live process.
    pub fn start_time(&mut self, pid: u64) -> Option<f64> {
        match self.state(pid) {
            ProcState::Running { start_time: Ok(t) } => Some(t),
            _ => None,
        }
    }
}

/// Every process whose environment carries `LEASECTL_LEASE_ID=<id>`, by id. An
/// environment this user may not read (another user's, without root) is not seen.
fn scan_work() -> HashMap<String, Vec<u32>> {
    use std::io::Read;
    let mut found: HashMap<String, Vec<u32>> = HashMap::new();
    let prefix = format!("{WORK_ENV}=");
    let Ok(dir) = std::fs::read_dir("/proc") else { return found };
    let mut buf = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(f) = std::fs::File::open(format!("/proc/{pid}/environ")) else { continue };
        buf.clear();
        // An environment is at most a few hundred KiB; more is not read.
        if f.take(1 << 20).read_to_end(&mut buf).is_err() {
            continue;
        }
        for var in buf.split(|b| *b == 0) {
            if let Some(id) = var.strip_prefix(prefix.as_bytes()).and_then(|v| std::str::from_utf8(v).ok()) {
                found.entry(id.to_owned()).or_default().push(pid);
            }
        }
    }
    found
}

/// Apply the rule: exists as a process, and same start time within 0.001 s when recorded.
pub fn judge_state(state: &ProcState, recorded: Option<f64>) -> Liveness {
    match state {
        ProcState::Gone => Liveness::Dead(DeadCause::PidGone),
        ProcState::Zombie => Liveness::Dead(DeadCause::Zombie),
        ProcState::Thread { tgid } => Liveness::Dead(DeadCause::ThreadId { tgid: *tgid }),
        ProcState::Unprobeable(why) => Liveness::Unknown(UnknownCause::ProbeFailed(why.clone())),
        ProcState::Hidden(why) => Liveness::Unknown(UnknownCause::Hidden(why.clone())),
        ProcState::Running { start_time } => match (recorded, start_time) {
            (None, _) => Liveness::Alive,
            (Some(_), Err(why)) => Liveness::Unknown(UnknownCause::StartTimeUnreadable(why.clone())),
            (Some(rec), Ok(actual)) => {
                if (actual - rec).abs() < 0.001 {
                    Liveness::Alive
                } else {
                    Liveness::Recycled { recorded: rec, actual: *actual }
                }
            }
        },
    }
}

fn read_boot_clock() -> Result<BootClock, String> {
    let btime = match boot_time_from_clocks() {
        Some(b) => b,
        None => boot_time_from_proc_stat()?,
    };
    let clk = rustix::param::clock_ticks_per_second();
    if clk == 0 {
        return Err("the kernel gave no clock tick rate (AT_CLKTCK)".into());
    }
    Ok(BootClock { btime, clk_tck: clk as f64 })
}

/// `btime` as psutil reads it from /proc/stat (whole seconds of the boot instant).
pub fn boot_time_from_proc_stat() -> Result<u64, Unusable> {
    let stat = std::fs::read_to_string("/proc/stat").map_err(|e| Unusable(format!("cannot read /proc/stat: {e}")))?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or_else(|| Unusable("no btime line in /proc/stat".into()))
}

/// The same `btime` without /proc: the kernel prints whole seconds of
/// CLOCK_REALTIME − CLOCK_BOOTTIME (both in the caller's time namespace). Two
/// realtime reads bracket the exact value; None when the bracket is wide or lies
/// within a millisecond of a whole second, where only /proc/stat can tell.
pub fn boot_time_from_clocks() -> Option<u64> {
    fn ns(clock: ClockId) -> Option<i128> {
        let ts = rustix::time::clock_gettime(clock);
        Some(i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec))
    }
    const SECOND: i128 = 1_000_000_000;
    const GUARD: i128 = 1_000_000;
    let before = ns(ClockId::Realtime)?;
    let boot = ns(ClockId::Boottime)?;
    let after = ns(ClockId::Realtime)?;
    let (low, high) = (before - boot, after - boot);
    let seconds = low.div_euclid(SECOND);
    let into_second = low.rem_euclid(SECOND);
    if high - low > GUARD || into_second < GUARD || into_second + (high - low) > SECOND - GUARD {
        return None;
    }
    u64::try_from(seconds).ok()
}

fn probe(pid: u64, boot: Result<BootClock, String>) -> ProcState {
    // Linux pids fit in 22 bits; larger numbers cannot name a process.
    if pid == 0 || pid > i32::MAX as u64 {
        return ProcState::Gone;
    }
    if let Some(ticks) = pidfds::running_start_ticks(pid) {
        return running(pid, boot, Some(ticks));
    }
    // The pidfd is opened before the stat is read: if that process still runs
    // afterwards, the stat was its own (a pid is not reused while its process lives).
    let pidfd = pidfds::open(pid);
    let parsed = match crate::lease::owners::proc_stat::read(pid) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return gone_or_hidden(pid),
        Err(e) => return exists_without_proc(pid, format!("cannot read /proc/{pid}/stat: {e}")),
    };
    let Some(stat) = parsed else {
        return ProcState::Unprobeable(format!("unparsable /proc/{pid}/stat"));
    };
    let ticks = stat.start_ticks;
    if stat.ended() {
        return ProcState::Zombie;
    }
    // /proc/<tid> is reachable for thread ids too; only a thread-group leader has a
    // pidfd, so a pidfd proves a process. Without one, /proc/<pid>/status decides.
    if let Ok(Some(fd)) = pidfd {
        if let Some(t) = ticks.filter(|_| !pidfds::exited(&fd)) {
            pidfds::remember(pid, fd, t);
        }
        return running(pid, boot, ticks);
    }
    match read_tgid(pid) {
        Ok(tgid) if tgid != pid => return ProcState::Thread { tgid },
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return ProcState::Gone,
        Err(e) => return ProcState::Unprobeable(format!("cannot read /proc/{pid}/status: {e}")),
    }
    running(pid, boot, ticks)
}

fn running(pid: u64, boot: Result<BootClock, String>, ticks: Option<u64>) -> ProcState {
    let start_time = match (boot, ticks) {
        (Ok(b), Some(t)) => Ok(start_time_from(t, b.clk_tck, b.btime)),
        (Err(e), _) => Err(e),
        (_, None) => Err(format!("no starttime in /proc/{pid}/stat")),
    };
    ProcState::Running { start_time }
}

/// The start time (epoch seconds, as psutil reads it) of a process started `ticks` clock
/// ticks after boot.
pub fn start_time_of_ticks(ticks: u64) -> Result<f64, String> {
    let boot = read_boot_clock()?;
    Ok(start_time_from(ticks, boot.clk_tck, boot.btime))
}

/// psutil's `create_time()` on Linux, in this order of operations (bit for bit).
pub fn start_time_from(ticks: u64, clk_tck: f64, btime: u64) -> f64 {
    (ticks as f64) / clk_tck + (btime as f64)
}

/// /proc was not readable (hidepid?): ask kill(pid, 0) whether the pid exists.
fn exists_without_proc(pid: u64, why: String) -> ProcState {
    let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else {
        return ProcState::Gone;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => ProcState::Running { start_time: Err(why) },
        Err(rustix::io::Errno::SRCH) => ProcState::Gone,
        Err(rustix::io::Errno::PERM) => ProcState::Running { start_time: Err(why) },
        Err(_) => ProcState::Unprobeable(why),
    }
}

/// Not in `/proc`: gone, unless the kernel says the pid exists. `/proc` mounted with
/// `hidepid` (systemd's `ProtectProc=invisible`) hides another user's processes, and
/// `kill(pid, 0)` answers EPERM for them: there, only hidden.
fn gone_or_hidden(pid: u64) -> ProcState {
    let Some(raw) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else {
        return ProcState::Gone;
    };
    match rustix::process::test_kill_process(raw) {
        Ok(()) | Err(rustix::io::Errno::PERM) => ProcState::Hidden(hidden_why(pid)),
        Err(_) => ProcState::Gone,
    }
}

/// Why `pid` is hidden, and how to see it: `/proc`'s mount options say how it hides.
fn hidden_why(pid: u64) -> String {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let option = mounts
        .lines()
        .filter(|l| l.split(' ').nth(1) == Some("/proc"))
        .filter_map(|l| l.split(' ').nth(3))
        .flat_map(|opts| opts.split(','))
        .filter(|o| o.starts_with("hidepid=") || o.starts_with("gid="))
        .collect::<Vec<_>>()
        .join(",");
    let how = if option.is_empty() { "/proc hides it".to_owned() } else { format!("/proc is mounted {option}") };
    format!(
        "pid {pid} runs (the kernel says so) but this user cannot see it ({how}); run as root or in /proc's gid \
         group to see its owner"
    )
}

fn read_tgid(pid: u64) -> std::io::Result<u64> {
    crate::lease::owners::proc_stat::status_line(pid, "Tgid:")?
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| std::io::Error::other("no Tgid line"))
}

/// The psutil-compatible start time of `pid`, if it is a live process.
pub fn process_start_time(pid: u64) -> Option<f64> {
    Prober::new().start_time(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recycled_pid_says_how_much_later_in_words_people_read() {
        let t = 1_795_990_758.0;
        let later = Liveness::Recycled { recorded: t, actual: t + 96_048_293.46 };
        assert_eq!(later.explain(), "recycled: pid now belongs to a process started 1111d16h later");
        let earlier = Liveness::Recycled { recorded: t, actual: t - 90.5 };
        assert_eq!(earlier.explain(), "recycled: pid now belongs to a process started 1m earlier");
        let step = Liveness::Recycled { recorded: t, actual: t + 3.0 };
        assert_eq!(step.explain(), "recycled: start time differs by exactly 3s (clock step?)");
    }

    #[test]
    fn start_time_uses_psutils_order_of_operations() {
        // Same expression in Python: 12345678 / 100 + 1795989000
        let t = start_time_from(12_345_678, 100.0, 1_795_989_000);
        assert_eq!(t.to_bits(), (12_345_678f64 / 100.0 + 1_795_989_000f64).to_bits());
        assert_eq!(crate::lease::format::pyjson::float_repr(t), "1796112456.78");
    }

    #[test]
    fn own_process_is_alive_and_start_time_matches_itself() {
        let me = u64::from(std::process::id());
        let mut p = Prober::new();
        let start = p.start_time(me).expect("own start time");
        assert!(matches!(judge_state(&p.state(me), Some(start)), Liveness::Alive));
        assert!(matches!(judge_state(&p.state(me), Some(1.0)), Liveness::Recycled { .. }));
        assert!(matches!(judge_state(&p.state(me), None), Liveness::Alive));
    }

    #[test]
    fn an_owner_judged_alive_once_is_not_its_pid_judged_alive() {
        let me = u64::from(std::process::id());
        let start = Prober::new().start_time(me).expect("own start time");
        let entry = |lease: &str, start: &str| {
            let text = format!(
                "{{\"lease_id\": \"{lease}\", \"pid\": {me}, \"process_start_time\": {start}, \"session_id\": \"S\"}}"
            );
            Entry::from_text(0, &text, &crate::lease::format::entry::NothingSeen).expect("valid")
        };
        let own = crate::lease::format::pyjson::float_repr(start);
        let (alive, recycled, unknown) = (entry("a", &own), entry("b", "1.5"), entry("c", "null"));
        // Each after an entry of the same pid judged alive: the start time decides.
        let mut prober = Prober::new();
        let verdicts = [&alive, &recycled, &alive, &alive, &unknown, &recycled].map(|e| prober.judge(e));
        assert!(matches!(verdicts[0], Liveness::Alive));
        assert!(matches!(verdicts[1], Liveness::Recycled { recorded: 1.5, .. }), "{:?}", verdicts[1]);
        assert!(matches!(verdicts[2..5], [Liveness::Alive, Liveness::Alive, Liveness::Alive]));
        assert!(matches!(verdicts[5], Liveness::Recycled { .. }));
    }

    #[test]
    fn clock_step_is_told_apart() {
        let step = Liveness::Recycled { recorded: 100.25, actual: 103.25 };
        assert!(step.clock_step_suspected());
        assert!(step.explain().contains("clock step?"));
        let other = Liveness::Recycled { recorded: 100.25, actual: 103.75 };
        assert!(!other.clock_step_suspected());
    }

    #[test]
    fn boot_time_from_clocks_is_the_kernels_btime() {
        // Outside the guard band the two must agree exactly, or start times would
        // differ from psutil's by a whole second.
        let mut compared = 0;
        for _ in 0..50 {
            if let Some(b) = boot_time_from_clocks() {
                assert_eq!(Ok(b), boot_time_from_proc_stat());
                compared += 1;
            }
        }
        assert!(compared > 0, "the clocks never gave a btime");
    }

    #[test]
    fn a_remembered_owner_that_exits_is_seen_dead_then_gone() {
        let mut child = std::process::Command::new("sleep").arg("60").spawn().expect("spawn sleep");
        let pid = u64::from(child.id());
        let first = Prober::new().state(pid);
        assert!(matches!(first, ProcState::Running { start_time: Ok(_) }), "{first:?}");
        // The second probe answers from the pidfd, with the same start time.
        assert!(pidfds::running_start_ticks(pid).is_some());
        assert_eq!(Prober::new().state(pid), first);
        child.kill().expect("kill");
        // Not reaped yet: a zombie, whose pidfd polls readable.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let state = Prober::new().state(pid);
            if state == ProcState::Zombie {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "still {state:?}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.wait().expect("reap");
        assert_eq!(Prober::new().state(pid), ProcState::Gone);
        assert_eq!(pidfds::running_start_ticks(pid), None);
    }

    #[test]
    fn owners_beyond_the_pidfd_bound_are_still_probed() {
        let mut children: Vec<std::process::Child> = (0..pidfds::MAX_TRACKED + 8)
            .map(|_| std::process::Command::new("sleep").arg("60").spawn().expect("spawn sleep"))
            .collect();
        for _ in 0..2 {
            let mut prober = Prober::new();
            for c in &children {
                let state = prober.state(u64::from(c.id()));
                assert!(matches!(state, ProcState::Running { start_time: Ok(_) }), "{state:?}");
            }
            assert!(pidfds::tracked_count() <= pidfds::MAX_TRACKED);
        }
        for c in &mut children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let mut prober = Prober::new();
        for c in &children {
            assert_eq!(prober.state(u64::from(c.id())), ProcState::Gone);
        }
    }

    #[test]
    fn a_thread_id_is_not_remembered_as_a_process() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            let _ = tx.send(rustix::thread::gettid().as_raw_nonzero().get() as u64);
            let _ = stop_rx.recv();
        });
        let tid = rx.recv().expect("thread id");
        let me = u64::from(std::process::id());
        assert_eq!(Prober::new().state(tid), ProcState::Thread { tgid: me });
        assert_eq!(pidfds::running_start_ticks(tid), None);
        let _ = stop_tx.send(());
        handle.join().expect("join");
    }

    #[test]
    fn impossible_pids_are_gone() {
        let mut p = Prober::new();
        assert_eq!(p.state(0x7FFF_FFFE), ProcState::Gone);
        assert_eq!(p.state(u64::MAX), ProcState::Gone);
    }
}
