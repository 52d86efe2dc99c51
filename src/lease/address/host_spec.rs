//! Which hosts an operator names: `--host SPEC` (repeatable), `LEASECTL_HOSTS`, and the
//! hosts file (`$XDG_CONFIG_HOME/leasectl/hosts`), whose names `--host NAME` also takes.
//!
//! A SPEC is `ssh://[user@]host[:port][/path/to/hermes-home]` or `local[:/path]`, either
//! after an optional display name (`name=SPEC`). Where `--host` takes a name it also
//! takes a glob over the hosts file's names (`gw*`) and a group, a `[section]` of it.

use std::path::{Path, PathBuf};

use crate::lease::words::unusable::Unusable;

/// The hosts file, under the operator's own configuration directory.
pub const HOSTS_FILE: &str = "leasectl/hosts";
/// The hosts file is a few lines; anything far larger is not one.
const HOSTS_FILE_MAX: u64 = 1 << 20;

/// One host as named: what it is called and where its home is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostSpec {
    /// Shown in tabs, tables and events (`gw1`, or the host name when none was given).
    pub name: String,
    pub target: HostTarget,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostTarget {
    /// This machine: the given home, else `--home`/`$HERMES_HOME`/`~/.hermes`.
    Local { home: Option<PathBuf> },
    /// Another machine over the operator's own `ssh`.
    Ssh(SshTarget),
}

/// Where `ssh` goes: each part is handed to `ssh` as its own argument (never through a shell).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SshTarget {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
    /// The Hermes home there (no path: the remote's `$HERMES_HOME`, else `~/.hermes`).
    pub home: Option<String>,
}

impl SshTarget {
    /// `ssh://user@host:port/path`, as it was given (for messages).
    pub fn url(&self) -> String {
        let user = self.user.as_deref().map(|u| format!("{u}@")).unwrap_or_default();
        let port = self.port.map(|p| format!(":{p}")).unwrap_or_default();
        format!("ssh://{user}{}{port}{}", self.host, self.home.as_deref().unwrap_or(""))
    }
}

impl HostSpec {
    /// Parse one SPEC; every problem is named, with the SPEC.
    pub fn parse(text: &str) -> Result<HostSpec, Unusable> {
        let text = text.trim();
        let bad = |why: &str| {
            Unusable(format!(
                "host {}: {why} (expected ssh://[user@]host[:port][/path], local[:/path], or name=SPEC)",
                crate::lease::words::human::escape(text)
            ))
        };
        if text.is_empty() {
            return Err(bad("empty"));
        }
        if text.contains(char::is_control) {
            return Err(bad("contains a control character"));
        }
        let (name, spec) = split_name(text);
        if let Some(name) = name {
            check_name(name).map_err(|why| bad(&why))?;
        }
        let target = if spec == "local" {
            HostTarget::Local { home: None }
        } else if let Some(path) = spec.strip_prefix("local:") {
            if !path.starts_with('/') {
                return Err(bad("the path after local: must be absolute"));
            }
            HostTarget::Local { home: Some(PathBuf::from(path)) }
        } else if let Some(rest) = spec.strip_prefix("ssh://") {
            HostTarget::Ssh(parse_ssh(rest).map_err(|why| bad(&why))?)
        } else if spec.contains("://") {
            return Err(bad("only ssh:// is supported"));
        } else {
            return Err(bad(&format!("not a host SPEC nor a name in the hosts file; for SSH write ssh://{spec}")));
        };
        let name = match (name, &target) {
            (Some(n), _) => n.to_owned(),
            (None, HostTarget::Local { .. }) => "local".to_owned(),
            (None, HostTarget::Ssh(t)) => t.host.trim_start_matches('[').trim_end_matches(']').to_owned(),
        };
        Ok(HostSpec { name, target })
    }

    pub fn is_local(&self) -> bool {
        matches!(self.target, HostTarget::Local { .. })
    }

    /// The SPEC that names this host again: `gw1=ssh://ops@gw1:2222/srv/hermes`.
    pub fn text(&self) -> String {
        let spec = match &self.target {
            HostTarget::Local { home: Some(h) } => format!("local:{}", h.display()),
            HostTarget::Local { home: None } => "local".to_owned(),
            HostTarget::Ssh(t) => t.url(),
        };
        format!("{}={spec}", self.name)
    }

    /// Where, in full: `gw1 (ssh://ops@gw1:2222/srv/hermes)`.
    pub fn describe(&self) -> String {
        match &self.target {
            HostTarget::Local { home: Some(h) } => format!("{} (local:{})", self.name, h.display()),
            HostTarget::Local { home: None } => format!("{} (this machine)", self.name),
            HostTarget::Ssh(t) => format!("{} ({})", self.name, t.url()),
        }
    }
}

/// `name=SPEC`: the name is before the first `=`, when that part is a plain word (an
/// `=` inside a URL's path is not a name).
fn split_name(text: &str) -> (Option<&str>, &str) {
    match text.split_once('=') {
        Some((name, spec)) if !name.contains([':', '/', '@']) => (Some(name), spec),
        _ => (None, text),
    }
}

/// Names are shown in tables, tabs and metric labels: a plain word.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name before = is empty".into());
    }
    if !name.chars().all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.')) {
        return Err(format!("the name {name:?} may hold only letters, digits, '-', '_' and '.'"));
    }
    Ok(())
}

fn parse_ssh(rest: &str) -> Result<SshTarget, String> {
    let (authority, home) = match rest.find('/') {
        Some(i) => (&rest[..i], Some(&rest[i..])),
        None => (rest, None),
    };
    let (user, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if let Some(u) = user
        && (u.is_empty() || u.starts_with('-') || u.contains(char::is_whitespace))
    {
        return Err(format!("the user {u:?} is not a user name"));
    }
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (inner, after) = v6.split_once(']').ok_or("an IPv6 address needs its closing ]")?;
        (format!("[{inner}]"), after.strip_prefix(':'))
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (hostport.to_owned(), None),
        }
    };
    if host.is_empty() || host == "[]" {
        return Err("no host name".into());
    }
    // ssh would read a leading '-' as an option.
    if host.starts_with('-') || host.contains(char::is_whitespace) || host.contains(['\'', '"', '\\', '`', '$', ';']) {
        return Err(format!("{host:?} is not a host name"));
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(format!("the port {p:?} is not a number from 1 to 65535")),
        },
    };
    let home = home.filter(|h| *h != "/").map(str::to_owned);
    Ok(SshTarget { user: user.map(str::to_owned), host, port, home })
}

/// The hosts file: one SPEC a line (`name=SPEC` to name it), `#` comments.
pub fn hosts_file() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join(HOSTS_FILE))
}

/// The hosts file's hosts, in order, and its groups: a `[name]` line starts a group,
/// which holds each host defined after it, and each host named again by its name alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostsFile {
    pub hosts: Vec<HostSpec>,
    pub groups: Vec<(String, Vec<String>)>,
}

impl HostsFile {
    fn group(&self, name: &str) -> Option<&[String]> {
        self.groups.iter().find(|(g, _)| g == name).map(|(_, members)| members.as_slice())
    }

    fn host(&self, name: &str) -> Option<&HostSpec> {
        self.hosts.iter().find(|h| h.name == name)
    }
}

/// Every host in the hosts file, in order; none when there is no file.
pub fn read_hosts_file(path: &Path) -> Result<Vec<HostSpec>, Unusable> {
    read_hosts_groups(path).map(|f| f.hosts)
}

/// The hosts file with its groups; empty when there is no file. Problems name the file
/// and line.
pub fn read_hosts_groups(path: &Path) -> Result<HostsFile, Unusable> {
    use crate::lease::home::safe_file::{Spot, read_bounded};
    let (dir, name) = match (path.parent(), path.file_name()) {
        (Some(d), Some(n)) => (d, n),
        _ => return Err(Unusable(format!("{}: not a file path", path.display()))),
    };
    let bytes = match read_bounded(&Spot::new(dir, name), HOSTS_FILE_MAX) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(HostsFile::default()),
        Err(e) => return Err(Unusable(format!("cannot read the hosts file {}: {e}", path.display()))),
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| Unusable(format!("the hosts file {} is not UTF-8 text", path.display())))?;
    let mut file = HostsFile::default();
    for (n, line) in text.lines().enumerate() {
        let at = |why: String| Unusable(format!("{}:{}: {why}", path.display(), n + 1));
        let line = line.split_once('#').map_or(line, |(before, _)| before).trim();
        if line.is_empty() {
            continue;
        }
        if let Some(group) = line.strip_prefix('[') {
            let group = group.strip_suffix(']').ok_or_else(|| at(format!("{line:?}: a group is [name]")))?.trim();
            check_name(group)
                .map_err(|why| at(format!("group {}: {why}", crate::lease::words::human::escape(group))))?;
            if file.group(group).is_some() {
                return Err(at(format!("group {group} is named twice")));
            }
            file.groups.push((group.to_owned(), Vec::new()));
            continue;
        }
        // A host named before, by its name alone: in this group too.
        let name = match file.host(line) {
            Some(known) if !file.groups.is_empty() => known.name.clone(),
            _ => {
                let spec = HostSpec::parse(line).map_err(|e| at(e.0))?;
                let name = spec.name.clone();
                file.hosts.push(spec);
                name
            }
        };
        if let Some((_, members)) = file.groups.last_mut()
            && !members.contains(&name)
        {
            members.push(name);
        }
    }
    unique_names(&file.hosts)?;
    if let Some((g, _)) = file.groups.iter().find(|(g, _)| file.host(g).is_some()) {
        return Err(Unusable(format!(
            "{}: {g} is both a host and a group: --host {g} could not say which",
            path.display()
        )));
    }
    Ok(file)
}

/// A name with `*`, `?` or `[` in it is a pattern over the hosts file's names.
fn is_pattern(text: &str) -> bool {
    text.contains(['*', '?', '['])
}

/// The hosts a command acts on: each `--host` (a SPEC, or a name from the hosts file),
/// else `LEASECTL_HOSTS`; with `all_hosts`, every host in the hosts file too. Empty: this
/// machine only, as without any of them.
pub fn select(
    given: &[String],
    env: Option<&str>,
    all_hosts: bool,
    file: Option<&Path>,
) -> Result<Vec<HostSpec>, Unusable> {
    let env_list: Vec<String> = env
        .map(|e| e.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default();
    let named = if given.is_empty() { &env_list } else { given };
    let mut from_file: Option<HostsFile> = None;
    let mut file_hosts = |file: Option<&Path>| -> Result<HostsFile, Unusable> {
        if let Some(h) = &from_file {
            return Ok(h.clone());
        }
        let hosts = match file {
            Some(f) => read_hosts_groups(f)?,
            None => HostsFile::default(),
        };
        from_file = Some(hosts.clone());
        Ok(hosts)
    };
    let place = file.map_or("no configuration directory".to_owned(), |f| f.display().to_string());
    let mut hosts = Vec::new();
    if all_hosts {
        let listed = file_hosts(file)?.hosts;
        if listed.is_empty() {
            return Err(Unusable(format!("--all-hosts: the hosts file lists no host ({place})")));
        }
        hosts.extend(listed);
    }
    for text in named {
        let looks_like_spec =
            text.contains("://") || text.contains('=') || text == "local" || text.starts_with("local:");
        let specs = if looks_like_spec {
            vec![HostSpec::parse(text)?]
        } else {
            let listed = file_hosts(file)?;
            named_in_file(&listed, text, &place)?
        };
        for spec in specs {
            if !hosts.contains(&spec) {
                hosts.push(spec);
            }
        }
    }
    unique_names(&hosts)?;
    Ok(hosts)
}

/// What a word names in the hosts file: a host, every host of a group, or every host
/// whose name a pattern matches (in the file's order). Nothing: said, with what there is.
fn named_in_file(file: &HostsFile, text: &str, place: &str) -> Result<Vec<HostSpec>, Unusable> {
    let known = || {
        let hosts: Vec<&str> = file.hosts.iter().map(|h| h.name.as_str()).collect();
        let groups: Vec<&str> = file.groups.iter().map(|(g, _)| g.as_str()).collect();
        let hosts = if hosts.is_empty() { "none".to_owned() } else { hosts.join(", ") };
        match groups.is_empty() {
            true => format!("hosts: {hosts}"),
            false => format!("hosts: {hosts}; groups: {}", groups.join(", ")),
        }
    };
    let shown = crate::lease::words::human::escape(text);
    if is_pattern(text) {
        let pattern = glob::Pattern::new(text)
            .map_err(|e| Unusable(format!("host pattern {shown}: {e} (a glob: *, ?, [abc])")))?;
        let matched: Vec<HostSpec> = file.hosts.iter().filter(|h| pattern.matches(&h.name)).cloned().collect();
        if matched.is_empty() {
            return Err(Unusable(format!("no host in the hosts file ({place}) matches {shown}; {}", known())));
        }
        return Ok(matched);
    }
    if let Some(h) = file.host(text) {
        return Ok(vec![h.clone()]);
    }
    if let Some(members) = file.group(text) {
        return Ok(members.iter().filter_map(|m| file.host(m)).cloned().collect());
    }
    HostSpec::parse(text)
        .map(|h| vec![h])
        .map_err(|e| Unusable(format!("{} (the hosts file {place} names no such host or group; {})", e.0, known())))
}

/// Two hosts shown under one name could not be told apart.
fn unique_names(hosts: &[HostSpec]) -> Result<(), Unusable> {
    for (i, h) in hosts.iter().enumerate() {
        if let Some(other) = hosts[..i].iter().find(|o| o.name == h.name) {
            return Err(Unusable(format!(
                "two hosts are both named {}: {} and {}; name them (name=SPEC)",
                h.name,
                other.describe(),
                h.describe()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssh(spec: &str) -> SshTarget {
        match HostSpec::parse(spec).map(|h| h.target) {
            Ok(HostTarget::Ssh(t)) => t,
            other => panic!("{spec}: {other:?}"),
        }
    }

    #[test]
    fn every_part_of_an_ssh_spec_is_read() {
        let t = ssh("ssh://ops@gw1.example:2222/srv/hermes home");
        assert_eq!(t.user.as_deref(), Some("ops"));
        assert_eq!(t.host, "gw1.example");
        assert_eq!(t.port, Some(2222));
        assert_eq!(t.home.as_deref(), Some("/srv/hermes home"));
        let t = ssh("ssh://gw1");
        assert_eq!((t.user, t.port, t.home), (None, None, None));
        let t = ssh("ssh://[::1]:22/h");
        assert_eq!((t.host.as_str(), t.port), ("[::1]", Some(22)));
        assert_eq!(HostSpec::parse("ssh://ops@gw1:22").map(|h| h.name).ok().as_deref(), Some("gw1"));
    }

    #[test]
    fn names_and_local_specs() {
        let h = HostSpec::parse("build=ssh://ci@build-box/var/hermes").expect("named");
        assert_eq!(h.name, "build");
        assert_eq!(HostSpec::parse("local").expect("local").target, HostTarget::Local { home: None });
        let h = HostSpec::parse("mine=local:/tmp/h").expect("named local");
        assert_eq!((h.name.as_str(), h.target), ("mine", HostTarget::Local { home: Some("/tmp/h".into()) }));
        // An '=' in a path is not a name.
        assert_eq!(ssh("ssh://h/a=b").home.as_deref(), Some("/a=b"));
    }

    #[test]
    fn bad_specs_are_named_with_why() {
        for (spec, why) in [
            ("gw1", "for SSH write ssh://gw1"),
            ("http://x", "only ssh://"),
            ("ssh://", "no host"),
            ("ssh://-oProxyCommand=x", "not a host name"),
            ("ssh://h:0", "port"),
            ("ssh://h:99999", "port"),
            ("ssh://h;rm", "not a host name"),
            ("local:relative", "absolute"),
            ("a b=local", "may hold only"),
            ("ssh://h\x1b[2J", "control character"),
            ("ssh://@h", "not a user name"),
        ] {
            let e = HostSpec::parse(spec).expect_err(spec).0;
            assert!(e.contains(why), "{spec}: {e}");
            assert!(!e.contains('\x1b'), "escaped: {e}");
        }
    }

    #[test]
    fn the_hosts_file_names_hosts_that_host_and_all_hosts_take() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("hosts");
        std::fs::write(&file, "# fleet\ngw1=ssh://ops@gw1/srv/hermes\n\n  gw2=ssh://gw2:2222 # second\nlocal\n")
            .expect("write");
        let all = select(&[], None, true, Some(&file)).expect("all");
        let names: Vec<&str> = all.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["gw1", "gw2", "local"]);
        let one = select(&["gw2".into()], None, false, Some(&file)).expect("by name");
        assert_eq!(one[0].target, HostTarget::Ssh(ssh("ssh://gw2:2222")));
        // The environment is the default list; --host replaces it.
        let env = select(&[], Some("gw1, ssh://x"), false, Some(&file)).expect("env");
        assert_eq!(env.iter().map(|h| h.name.as_str()).collect::<Vec<_>>(), ["gw1", "x"]);
        let given = select(&["local".into()], Some("gw1"), false, Some(&file)).expect("given");
        assert_eq!(given.len(), 1);
        // Nothing named: this machine alone, as without hosts.
        assert!(select(&[], None, false, Some(&file)).expect("none").is_empty());
        let e = select(&["gw9".into()], None, false, Some(&file)).expect_err("unknown").0;
        assert!(e.contains("names no such host or group"), "{e}");
    }

    #[test]
    fn groups_and_patterns_name_hosts_of_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("hosts");
        let text = "local\n[gateways]\ngw1=ssh://a\ngw2=ssh://b\n[build] # ci\nci=ssh://c\ngw1\n";
        std::fs::write(&file, text).expect("write");
        let names = |given: &[&str]| -> Vec<String> {
            let given: Vec<String> = given.iter().map(|g| (*g).to_owned()).collect();
            select(&given, None, false, Some(&file)).expect("select").into_iter().map(|h| h.name).collect()
        };
        assert_eq!(names(&["gateways"]), ["gw1", "gw2"]);
        assert_eq!(names(&["build"]), ["ci", "gw1"], "a host named again joins the group");
        assert_eq!(names(&["gw*"]), ["gw1", "gw2"]);
        assert_eq!(names(&["gw[2]", "build"]), ["gw2", "ci", "gw1"], "each once, in the order named");
        let env = select(&[], Some("gw?,local"), false, Some(&file)).expect("env");
        assert_eq!(env.iter().map(|h| h.name.as_str()).collect::<Vec<_>>(), ["gw1", "gw2", "local"]);
        let e = select(&["db*".into()], None, false, Some(&file)).expect_err("no match").0;
        assert!(e.contains("matches db*") && e.contains("hosts: local, gw1, gw2, ci; groups: gateways, build"), "{e}");
        let e = select(&["nope".into()], None, false, Some(&file)).expect_err("unknown").0;
        assert!(e.contains("no such host or group"), "{e}");
        assert_eq!(read_hosts_file(&file).expect("hosts").len(), 4, "a host named again is one host");

        std::fs::write(&file, "gw1=ssh://a\n[gw1]\n").expect("write");
        assert!(read_hosts_groups(&file).expect_err("clash").0.contains("both a host and a group"));
        std::fs::write(&file, "[a b]\n").expect("write");
        assert!(read_hosts_groups(&file).expect_err("bad group").0.contains(":1: group a b"));
        std::fs::write(&file, "[x\n").expect("write");
        assert!(read_hosts_groups(&file).expect_err("unclosed").0.contains("a group is [name]"));
    }

    #[test]
    fn hosts_file_problems_name_file_and_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("hosts");
        std::fs::write(&file, "gw1=ssh://a\nbad spec here\n").expect("write");
        let e = read_hosts_file(&file).expect_err("bad").0;
        assert!(e.contains(&format!("{}:2:", file.display())), "{e}");
        std::fs::write(&file, "ssh://a/x\nssh://a/y\n").expect("write");
        let e = read_hosts_file(&file).expect_err("same name").0;
        assert!(e.contains("two hosts are both named a"), "{e}");
        assert!(read_hosts_file(&dir.path().join("none")).expect("missing").is_empty());
        // A hosts file that is a symlink or a FIFO is not read (nor waited on).
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).expect("symlink");
        assert!(read_hosts_file(&link).expect_err("symlink").0.contains("cannot read the hosts file"));
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success()));
        assert!(read_hosts_file(&fifo).expect_err("fifo").0.contains("cannot read the hosts file"));
        let e = select(&[], None, true, Some(&dir.path().join("none"))).expect_err("empty").0;
        assert!(e.contains("lists no host"), "{e}");
    }
}
