//! Owners in other pid namespaces (containers). Hermes records its pid as its own pid
//! namespace numbers it: a `hermes chat` in a container records `"pid": 1`, a process the
//! host knows as 13906. The kernel says who it is: `/proc/13906/status` has `NSpid:
//! 13906 1` (its pid in each namespace from the reader's down), and its start time read
//! here is the one the container recorded (one kernel, one boot). So a pid that does not
//! match here is looked up among the processes of other pid namespaces, once per look.

use std::collections::HashMap;

use rustc_hash::FxBuildHasher as FxBuild;
use serde::{Deserialize, Serialize};

/// The initial pid namespace's inode (the kernel's `PROC_PID_INIT_INO`): fixed, so a
/// leasectl can tell whether it runs on the host or in a container.
pub const INITIAL_PID_NAMESPACE: u64 = 0xEFFF_FFFC;

/// An owner alive in a pid namespace below this one: the process the host knows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamespacedOwner {
    /// Its pid here (the lease records its pid in its own namespace).
    pub host_pid: u64,
    /// Its pid namespace's inode (`pid:[N]`), where this user may read it: tells one
    /// container's owners from another's.
    pub namespace: Option<u64>,
    /// The container its cgroup names, if any (an `unshare` names none).
    pub container: Option<Container>,
}

impl NamespacedOwner {
    /// Where it runs, for people: `docker 3f2a9c1b2d4e`, or the namespace.
    pub fn place(&self) -> String {
        match (&self.container, self.namespace) {
            (Some(c), _) => c.to_string(),
            (None, Some(ns)) => format!("pid namespace {ns}"),
            (None, None) => "another pid namespace".to_owned(),
        }
    }
}

/// A container as its cgroup path names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Container {
    /// Who runs it: `docker`, `containerd`, `cri-o`, `podman`, `kubepods`, `lxc`, `nspawn`.
    pub runtime: String,
    /// Its id (the first 12 characters of a long one) or name.
    pub id: String,
}

impl std::fmt::Display for Container {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.runtime, self.id)
    }
}

/// A process of another pid namespace, as the host sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Candidate {
    host_pid: u64,
    start_ticks: u64,
    namespace: Option<u64>,
}

/// The processes of pid namespaces below this one, by the pid their innermost namespace
/// gives them (the pid they would record). Read from `/proc` once per look.
#[derive(Debug, Default)]
pub(crate) struct Elsewhere {
    by_inner_pid: HashMap<u64, Vec<Candidate>, FxBuild>,
}

/// Who, among other namespaces' processes, a recorded pid and start time name.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Found {
    Nobody,
    One(NamespacedOwner),
    /// More than one process has that pid and start time (host pids): never a guess.
    Several(Vec<u64>),
}

impl Elsewhere {
    /// Reads `/proc`: each process's pid namespace (a readlink), and only for those in
    /// another namespace its `NSpid` and start. This user sees what `/proc` shows it.
    pub(crate) fn scan() -> Elsewhere {
        let mut found = Elsewhere::default();
        let Some(own) = own_pid_namespace() else { return found };
        let Ok(dir) = std::fs::read_dir("/proc") else { return found };
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u64>().ok()) else { continue };
            // Reading another user's ns link needs ptrace access; its status does not.
            let namespace = namespace_of(&format!("/proc/{pid}/ns/pid"));
            if namespace == Some(own) {
                continue;
            }
            let Some(inner) = innermost_pid(pid) else { continue };
            let Ok(Some(stat)) = super::proc_stat::read(pid) else { continue };
            let Some(start_ticks) = stat.start_ticks.filter(|_| !stat.ended()) else { continue };
            found.by_inner_pid.entry(inner).or_default().push(Candidate { host_pid: pid, start_ticks, namespace });
        }
        found
    }

    /// The process of another namespace that recorded `pid` and started at `recorded`
    /// (within 1 ms, as spec §5 compares), its start times computed by `start_of`.
    pub(crate) fn find(&self, pid: u64, recorded: f64, start_of: impl Fn(u64) -> Option<f64>) -> Found {
        let Some(candidates) = self.by_inner_pid.get(&pid) else { return Found::Nobody };
        let matching: Vec<&Candidate> = candidates
            .iter()
            .filter(|c| start_of(c.start_ticks).is_some_and(|t| (t - recorded).abs() < 0.001))
            .collect();
        match matching[..] {
            [] => Found::Nobody,
            [one] => Found::One(NamespacedOwner {
                host_pid: one.host_pid,
                namespace: one.namespace,
                container: container_of(one.host_pid),
            }),
            _ => Found::Several(matching.iter().map(|c| c.host_pid).collect()),
        }
    }
}

/// This process's pid namespace inode.
pub fn own_pid_namespace() -> Option<u64> {
    namespace_of("/proc/self/ns/pid")
}

/// The namespace inode a `/proc/…/ns/pid` link names (`pid:[4026531836]`).
fn namespace_of(link: &str) -> Option<u64> {
    let target = std::fs::read_link(link).ok()?;
    let text = target.to_str()?;
    text.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// The pid `pid` has in its innermost pid namespace, when that is not this one: the
/// last of its `NSpid` line's several numbers.
fn innermost_pid(pid: u64) -> Option<u64> {
    let line = super::proc_stat::status_line(pid, "NSpid:").ok()??;
    let pids: Vec<u64> = line.split_ascii_whitespace().filter_map(|p| p.parse().ok()).collect();
    (pids.len() > 1).then(|| pids.last().copied()).flatten()
}

/// Where this leasectl runs, when that is not the host's pid namespace: its inode.
/// None on the host (or where `/proc` does not say).
pub fn inside_a_container() -> Option<u64> {
    own_pid_namespace().filter(|&ns| ns != INITIAL_PID_NAMESPACE)
}

/// The start time (psutil's, epoch seconds) of this pid namespace's first process (its
/// pid 1, its init): every process of this namespace started at or after it. None on
/// the host or where it cannot be read.
pub fn namespace_init_start() -> Option<f64> {
    inside_a_container()?;
    let ticks = super::proc_stat::read(1).ok()??.start_ticks?;
    super::liveness::start_time_of_ticks(ticks).ok()
}

/// The container `host_pid` runs in, as its cgroup path names it.
fn container_of(host_pid: u64) -> Option<Container> {
    let text = std::fs::read_to_string(format!("/proc/{host_pid}/cgroup")).ok()?;
    text.lines().filter_map(|l| l.splitn(3, ':').nth(2)).find_map(container_in_cgroup)
}

/// The container a cgroup path names: docker (`/docker/ID`, `docker-ID.scope`),
/// containerd (`cri-containerd-ID.scope`), CRI-O (`crio-ID.scope`), podman
/// (`libpod-ID.scope`), Kubernetes with cgroupfs (`/kubepods/…/podUID/ID`), LXC and
/// Proxmox (`/lxc/NAME`, `/lxc.payload.NAME`), systemd-nspawn (`systemd-nspawn@NAME.service`).
pub(crate) fn container_in_cgroup(path: &str) -> Option<Container> {
    let short = |id: &str| id.chars().take(12).collect::<String>();
    // A name is whatever the host's runtime chose; one that is not a plain word is not
    // taken (it would reach terminals and shell hints).
    let found = |runtime: &str, id: &str| {
        let plain = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        plain.then(|| Container { runtime: runtime.to_owned(), id: id.to_owned() })
    };
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    // The innermost part that names one wins: a pod's container, not the pod.
    for (i, part) in parts.iter().enumerate().rev() {
        let scope = part.strip_suffix(".scope").unwrap_or(part);
        for (prefix, runtime) in
            [("docker-", "docker"), ("cri-containerd-", "containerd"), ("crio-", "cri-o"), ("libpod-", "podman")]
        {
            if let Some(id) = scope.strip_prefix(prefix).filter(|id| is_hex_id(id)) {
                return found(runtime, &short(id));
            }
        }
        if let Some(name) = part.strip_prefix("systemd-nspawn@").and_then(|p| p.strip_suffix(".service")) {
            return found("nspawn", name);
        }
        if let Some(name) = part.strip_prefix("lxc.payload.") {
            return found("lxc", name);
        }
        let parent = i.checked_sub(1).map(|p| parts[p]);
        match parent {
            Some("docker") if is_hex_id(part) => return found("docker", &short(part)),
            Some("lxc") => return found("lxc", part),
            Some(pod)
                if pod.starts_with("pod") && is_hex_id(part) && parts.iter().any(|p| p.starts_with("kubepods")) =>
            {
                return found("kubepods", &short(part));
            }
            _ => {}
        }
    }
    None
}

/// A container id: 64 hex digits (docker, containerd, podman, CRI-O).
fn is_hex_id(s: &str) -> bool {
    s.len() >= 12 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f2a9c1b2d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";

    #[test]
    fn container_runtimes_are_read_from_their_cgroup_paths() {
        let cases = [
            (format!("/system.slice/docker-{ID}.scope"), Some("docker 3f2a9c1b2d4e")),
            (format!("/docker/{ID}"), Some("docker 3f2a9c1b2d4e")),
            (
                format!(
                    "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1a2b.slice/cri-containerd-{ID}.scope"
                ),
                Some("containerd 3f2a9c1b2d4e"),
            ),
            (format!("/kubepods/besteffort/pod0f1e2d3c-aaaa/{ID}"), Some("kubepods 3f2a9c1b2d4e")),
            (format!("/machine.slice/libpod-{ID}.scope/container"), Some("podman 3f2a9c1b2d4e")),
            (format!("/kubepods.slice/crio-{ID}.scope"), Some("cri-o 3f2a9c1b2d4e")),
            ("/lxc/105/ns/system.slice/hermes.service".to_owned(), Some("lxc 105")),
            ("/lxc.payload.hermes/system.slice".to_owned(), Some("lxc hermes")),
            ("/machine.slice/systemd-nspawn@box.service/payload".to_owned(), Some("nspawn box")),
            ("/user.slice/user-0.slice/session-3.scope".to_owned(), None),
            ("/".to_owned(), None),
            ("/system.slice/docker.service".to_owned(), None),
            ("/lxc/a\u{1b}[2Jb/init.scope".to_owned(), None),
            ("/machine.slice/systemd-nspawn@x y.service/payload".to_owned(), None),
        ];
        for (path, want) in cases {
            assert_eq!(container_in_cgroup(&path).map(|c| c.to_string()).as_deref(), want, "{path}");
        }
    }

    /// Three containers each with a pid 1: only the start time picks the owner, and two
    /// that started in the same clock tick are never a guess.
    #[test]
    fn only_the_start_time_picks_among_pid_ones_and_a_tie_is_several() {
        let candidate = |host_pid, start_ticks| Candidate { host_pid, start_ticks, namespace: Some(host_pid + 7) };
        let mut elsewhere = Elsewhere::default();
        elsewhere.by_inner_pid.insert(1, vec![candidate(101, 500), candidate(202, 700), candidate(303, 700)]);
        elsewhere.by_inner_pid.insert(9, vec![candidate(404, 900)]);
        // Ticks at 100 Hz after a boot at 1000 s, as psutil computes them.
        let start_of = |ticks: u64| Some(super::super::liveness::start_time_from(ticks, 100.0, 1000));
        let Found::One(owner) = elsewhere.find(1, 1005.0, start_of) else { panic!("pid 1 at 1005.0 is one owner") };
        assert_eq!((owner.host_pid, owner.namespace), (101, Some(108)));
        assert_eq!(elsewhere.find(1, 1007.0, start_of), Found::Several(vec![202, 303]));
        assert_eq!(elsewhere.find(1, 1006.0, start_of), Found::Nobody, "no pid 1 started then");
        assert_eq!(elsewhere.find(1, 1005.002, start_of), Found::Nobody, "1 ms is the tolerance");
        assert!(matches!(elsewhere.find(9, 1009.0, start_of), Found::One(o) if o.host_pid == 404));
        assert_eq!(elsewhere.find(2, 1005.0, start_of), Found::Nobody);
    }

    #[test]
    fn this_process_is_in_its_own_namespace_and_no_candidate_of_itself() {
        let own = own_pid_namespace().expect("/proc/self/ns/pid");
        assert!(own > 0);
        let me = u64::from(std::process::id());
        // /proc shows NSpid from its own namespace down: one number for this process.
        assert_eq!(innermost_pid(me), None);
        let scan = Elsewhere::scan();
        assert!(scan.by_inner_pid.values().flatten().all(|c| c.host_pid != me));
    }
}
