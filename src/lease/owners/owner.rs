//! Who an owner is (name, command line, memory, CPU, user), from sysinfo.
//! Display only: liveness and start times come from `liveness`, never from here.

use std::collections::HashMap;

use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind, Users};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OwnerInfo {
    pub name: String,
    pub cmdline: Vec<String>,
    pub rss_bytes: u64,
    pub cpu_percent: f32,
    pub user: Option<String>,
}

/// What the OWNER column says, one rule everywhere (ls, plans, events, the console):
/// the process's name while the owner lives, `-` once it is dead, and for a recycled pid
/// the process that has the pid now, marked as not the owner. `liveness` is the verdict's
/// name ([`crate::lease::owners::liveness::Liveness::name`]), as JSON carries it too. A `clock_step`
/// suspect is most likely the owner itself, seen across a wall-clock step: named as one.
pub fn owner_label(liveness: &str, clock_step: bool, name: Option<&str>) -> String {
    match (liveness, name) {
        ("dead" | "work-running", _) | (_, None) => "-".into(),
        ("recycled", Some(now)) if !clock_step => format!("not owner: {now}"),
        (_, Some(name)) => name.to_owned(),
    }
}

/// Keeps sysinfo's state between looks, so CPU usage is measured over the interval.
pub struct OwnerProbe {
    /// Made at the first look at a pid: a listing without leases looks at none, and
    /// making it reads /proc/stat (18 of an empty `ls`'s 244 page faults).
    sys: Option<System>,
    users: Option<Users>,
}

impl Default for OwnerProbe {
    fn default() -> Self {
        OwnerProbe::new()
    }
}

impl OwnerProbe {
    pub fn new() -> OwnerProbe {
        OwnerProbe { sys: None, users: None }
    }

    /// Look up only the given pids (no full process scan).
    pub fn infos(&mut self, pids: &[u64]) -> HashMap<u64, OwnerInfo> {
        let mut wanted: Vec<Pid> =
            pids.iter().filter(|p| **p <= u32::MAX as u64).map(|p| Pid::from_u32(*p as u32)).collect();
        wanted.sort_unstable();
        wanted.dedup();
        if wanted.is_empty() {
            return HashMap::new();
        }
        if self.sys.is_none() {
            self.sys = System::new().ok();
        }
        let Some(sys) = self.sys.as_mut() else {
            return HashMap::new();
        };
        let kind = ProcessRefreshKind::nothing()
            .with_memory()
            .with_cpu()
            .with_cmd(UpdateKind::OnlyIfNotSet)
            .with_user(UpdateKind::OnlyIfNotSet);
        sys.refresh_processes_specifics(ProcessesToUpdate::Some(&wanted), true, kind);
        if self.users.is_none() {
            self.users = Users::new_with_refreshed_list().ok();
        }
        let users = self.users.as_ref();
        wanted
            .iter()
            .filter_map(|pid| {
                let p = sys.process(*pid)?;
                let info = OwnerInfo {
                    name: p.name().to_string_lossy().into_owned(),
                    cmdline: p.cmd().iter().map(|s| s.to_string_lossy().into_owned()).collect(),
                    rss_bytes: p.memory(),
                    cpu_percent: p.cpu_usage(),
                    user: p.user_id().and_then(|uid| users?.get_user_by_id(uid)).map(|u| u.name().to_owned()),
                };
                Some((u64::from(pid.as_u32()), info))
            })
            .collect()
    }
}

/// One-off lookup of the given pids.
pub fn owner_infos(pids: &[u64]) -> HashMap<u64, OwnerInfo> {
    OwnerProbe::new().infos(pids)
}

/// The name of user `uid`, when the system knows it.
pub fn user_name(uid: u32) -> Option<String> {
    sysinfo::Users::new_with_refreshed_list()
        .ok()
        .and_then(|users| users.iter().find(|u| **u.id() == uid).map(|u| u.name().to_owned()))
}

/// This machine's host name: half of an etcd owner's identity (pids mean nothing across hosts).
pub fn hostname() -> String {
    let name = rustix::system::uname().nodename().to_string_lossy().into_owned();
    if name.is_empty() { "unknown-host".into() } else { name }
}

/// A process's command name (`/proc/<pid>/comm`), as ps and lslocks show it.
pub fn command_name(pid: u64) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).ok().map(|c| c.trim_end().to_owned())
}

/// A process's command line (`/proc/<pid>/cmdline`, split at its NULs): what its kind is
/// told by, without the whole process table sysinfo reads.
pub fn command_line(pid: u64) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let words = raw.split(|b| *b == 0).filter(|w| !w.is_empty()).map(|w| String::from_utf8_lossy(w).into_owned());
    Some(words.collect())
}

/// Command names read once per pid, "-" for a process gone: a registry lists one owner
/// for many leases (a refusal's advice at 10,000 leases read /proc 10,000 times).
#[derive(Default)]
pub struct CommandNames(HashMap<u64, String>);

impl CommandNames {
    pub fn of(&mut self, pid: u64) -> &str {
        self.0.entry(pid).or_insert_with(|| command_name(pid).unwrap_or_else(|| "-".into()))
    }
}

/// True when this process could signal `pid` (the kernel's rule for kill(2): the same
/// user, or root): the test for acting on another process's behalf.
pub fn could_signal(pid: u64) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else { return false };
    !matches!(rustix::process::test_kill_process(pid), Err(rustix::io::Errno::PERM))
}

/// This process and its ancestors, up to init: the owners a plain `release` speaks for.
pub fn self_and_ancestors() -> Vec<u64> {
    let mut chain = vec![u64::from(std::process::id())];
    while let Some(&pid) = chain.last() {
        let parent = proc_stat(pid).map(|s| u64::from(s.ppid));
        match parent {
            Some(p) if p > 1 && !chain.contains(&p) && chain.len() < 256 => chain.push(p),
            _ => break,
        }
    }
    chain
}

/// The stat of a process; None when it is gone or the file unreadable.
pub fn proc_stat(pid: u64) -> Option<crate::lease::owners::proc_stat::ProcStat> {
    crate::lease::owners::proc_stat::read(pid).ok().flatten()
}
