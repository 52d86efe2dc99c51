//! CMD's processes, found in /proc by parentage and signalled through pidfds.
//!
//! The keeper is a child subreaper, so a process CMD leaves behind (a `&` job, a
//! double fork, a `setsid`) is re-parented to it and stays in its family: parentage,
//! unlike a process group, cannot be left.

use std::collections::{HashMap, HashSet};

use rustix::process::{self, Pid, PidfdFlags, Signal};

/// Who belongs to the work: the running descendants of `root` (the keeper, or CMD
/// when run in-process), not `root` itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Family {
    pub root: u32,
    /// A member signalled another way (CMD, through its own pidfd): left out here, so it
    /// gets each signal once.
    pub except: Option<u32>,
}

use crate::lease::owners::owner::proc_stat as stat_of;

impl Family {
    /// Every descendant of the root (ended ones and the left-out one too: they still link
    /// their children to the tree until those are re-parented), with its process group.
    fn tree(&self) -> Vec<(u32, u32, bool)> {
        let mut children: HashMap<u32, Vec<(u32, u32, bool)>> = HashMap::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let Some(stat) = stat_of(u64::from(pid)) else { continue };
            children.entry(stat.ppid).or_default().push((pid, stat.pgrp, stat.ended()));
        }
        let mut found = Vec::new();
        let mut queue = vec![self.root];
        let mut seen = HashSet::from([self.root]);
        while let Some(parent) = queue.pop() {
            for &(pid, pgrp, ended) in children.get(&parent).map(Vec::as_slice).unwrap_or_default() {
                if seen.insert(pid) {
                    found.push((pid, pgrp, ended));
                    queue.push(pid);
                }
            }
        }
        found
    }

    /// The members still running (the left-out one apart), with their process groups.
    #[cfg(test)]
    pub(crate) fn members(&self) -> Vec<(u32, u32)> {
        self.tree()
            .into_iter()
            .filter(|(pid, _, ended)| !ended && Some(*pid) != self.except)
            .map(|(pid, pgrp, _)| (pid, pgrp))
            .collect()
    }

    /// Send `sig` to every member, except those in process group `skip_pgrp` (they got
    /// it already, from the terminal). Returns how many were signalled.
    pub(crate) fn signal(&self, sig: Signal, skip_pgrp: Option<u32>) -> usize {
        let tree = self.tree();
        // Any process of the tree may be a parent: CMD (left out) and one that just ended too.
        let mut family: HashSet<u32> = tree.iter().map(|(pid, _, _)| *pid).collect();
        family.insert(self.root);
        let members =
            tree.into_iter().filter(|(pid, _, ended)| !ended && Some(*pid) != self.except).map(|(p, g, _)| (p, g));
        let mut sent = 0;
        for (pid, pgrp) in members {
            if Some(pgrp) == skip_pgrp {
                continue;
            }
            let Some(p) = Pid::from_raw(pid as i32) else { continue };
            let Ok(fd) = process::pidfd_open(p, PidfdFlags::empty()) else { continue };
            // The pidfd pins one process; it is still ours if its parent is (a pid reused
            // between the /proc walk and the open has another parent).
            let ours = stat_of(u64::from(pid)).is_some_and(|s| family.contains(&s.ppid));
            if ours && process::pidfd_send_signal(&fd, sig).is_ok() {
                sent += 1;
            }
        }
        sent
    }
}

/// This process's group: a terminal signal (Ctrl-C) reached every member in it.
pub(crate) fn own_process_group() -> u32 {
    process::getpgrp().as_raw_nonzero().get() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A grandchild in its own session is still family; a process that is not a
    /// descendant is not.
    #[test]
    fn descendants_are_found_across_sessions_and_strangers_are_not() {
        let mut stranger = Command::new("sleep").arg("30").spawn().expect("sleep");
        let mut cmd = Command::new("sh").args(["-c", "setsid sleep 30 & sleep 30 & wait"]).spawn().expect("sh");
        let family = Family { root: cmd.id(), except: None };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while family.members().len() < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let pids: Vec<u32> = family.members().iter().map(|(p, _)| *p).collect();
        assert_eq!(pids.len(), 2, "sh's two sleeps: {pids:?}");
        assert!(!pids.contains(&cmd.id()) && !pids.contains(&stranger.id()));
        // One member left out (signalled another way): its descendants are still found.
        let first = pids[0];
        let without = Family { root: cmd.id(), except: Some(first) };
        assert_eq!(without.members().iter().map(|(p, _)| *p).collect::<Vec<_>>(), [pids[1]]);
        assert_eq!(family.signal(Signal::KILL, None), 2);
        let _ = cmd.wait();
        let _ = stranger.kill();
        let _ = stranger.wait();
    }
}
