//! `/proc/<pid>/stat`, read and parsed in one place: a process's state, its place in
//! the process tree, and its start (the owner's identity, spec §5); and the one line of
//! `/proc/<pid>/status` that stat lacks (`Tgid:`, `Uid:`, `NSpid:`).

use std::io::Read;

/// The fields of `/proc/<pid>/stat` leasectl reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// The state letter (field 3): `R`, `S`, `Z` (zombie), `X` (dead)...
    pub state: u8,
    pub ppid: u32,
    pub pgrp: u32,
    /// num_threads (field 20); None when it does not parse.
    pub threads: Option<u32>,
    /// starttime (field 22) in clock ticks after boot; None when it does not parse.
    pub start_ticks: Option<u64>,
}

impl ProcStat {
    /// A zombie (or dead) process: it has ended, only its exit status is left.
    pub fn ended(&self) -> bool {
        matches!(self.state, b'Z' | b'X' | b'x')
    }
}

/// Parse a stat line. The command name may hold spaces and parentheses: the fields
/// follow the LAST `)`.
pub(crate) fn parse(stat: &[u8]) -> Option<ProcStat> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.bytes().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    // Fields after ')' start at field 3; num_threads is field 20, 14 after pgrp (field 5),
    // and starttime field 22.
    let threads = fields.nth(14).and_then(|t| t.parse().ok());
    let start_ticks = fields.nth(1).and_then(|t| t.parse().ok());
    Some(ProcStat { state, ppid, pgrp, threads, start_ticks })
}

/// `/proc/<pid>/stat`, read with one read(2) into a stack buffer (the line is well under
/// 1 KiB: this runs for every owner on every look); Ok(None) when it does not parse.
pub(crate) fn read(pid: u64) -> std::io::Result<Option<ProcStat>> {
    let mut file = std::fs::File::open(format!("/proc/{pid}/stat"))?;
    let mut buf = [0u8; 2048];
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => return Ok(parse(&buf[..len])),
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    // Longer than any stat line seen: read the rest the ordinary way.
    let mut all = buf.to_vec();
    file.read_to_end(&mut all)?;
    Ok(parse(&all))
}

/// The value of the `key` line (`Tgid:`) of `/proc/<pid>/status`, if it has one.
pub(crate) fn status_line(pid: u64, key: &str) -> std::io::Result<Option<String>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok(status.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_takes_the_last_paren() {
        let line = b"123 (we) ird) name) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 987654 20 21";
        let stat = parse(line).expect("parses");
        assert_eq!((stat.state, stat.ppid, stat.pgrp, stat.start_ticks), (b'S', 1, 2, Some(987654)));
        assert_eq!(stat.threads, Some(17));
        assert!(!stat.ended());
        assert!(parse(b"9 (z) Z 1 9 9").is_some_and(|s| s.ended() && s.start_ticks.is_none()));
        assert_eq!(parse(b"9 no paren S 1 2"), None);
    }

    #[test]
    fn this_process_reads_as_running_with_its_parent() {
        let me = read(u64::from(std::process::id())).expect("readable").expect("parses");
        assert!(!me.ended() && me.start_ticks.is_some());
        assert_eq!(me.ppid, std::os::unix::process::parent_id());
        assert!(me.threads.is_some_and(|n| n >= 1));
    }
}
