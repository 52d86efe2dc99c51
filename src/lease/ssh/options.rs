//! How `ssh` is started for a host: the operator's own ssh configuration wins where it
//! sets a timeout or multiplexing (asked with `ssh -G`, which reads it without
//! connecting); where it is silent, leasectl's defaults: a connect timeout (the operator's
//! `--connect-timeout` first), keep-alives, and one shared connection per host kept a
//! short while in a private directory, so a second look pays no handshake.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// Replaces `ssh` (as `GIT_SSH_COMMAND` does for git): run by `sh -c` with leasectl's
/// arguments after it as `"$@"`, never spliced into its text.
pub(crate) const SSH_COMMAND_ENV: &str = "LEASECTL_SSH_COMMAND";
/// Seconds a shared connection outlives its last use (0: no sharing).
pub(crate) const SHARE_FOR_ENV: &str = "LEASECTL_SSH_PERSIST";
/// Reaching a host and logging in, when neither the operator nor ssh's config says.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A shared connection's life after its last use: a second look within it pays no
/// handshake; the socket is gone soon after.
pub(crate) const DEFAULT_SHARE_FOR: Duration = Duration::from_secs(60);

/// The operator's connect timeout for this process (`--connect-timeout`), if given.
static CONNECT_TIMEOUT: OnceLock<Duration> = OnceLock::new();

/// Set once by the command line: its word beats ssh's config for this run.
pub(crate) fn set_connect_timeout(timeout: Duration) {
    let _ = CONNECT_TIMEOUT.set(timeout);
}

/// What ssh's configuration says for one host, where leasectl would otherwise choose.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SshConfig {
    pub connect_timeout: Option<Duration>,
    pub server_alive: bool,
    /// The config multiplexes itself (ControlMaster or ControlPath set).
    pub shares: bool,
}

impl SshConfig {
    /// `ssh -G`'s output: `connecttimeout none`, `serveraliveinterval 0`,
    /// `controlmaster false`, `controlpath none` when unset.
    pub(crate) fn parse(text: &str) -> SshConfig {
        let mut c = SshConfig::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(' ') else { continue };
            let value = value.trim();
            match key.to_ascii_lowercase().as_str() {
                "connecttimeout" => c.connect_timeout = value.parse::<u64>().ok().map(Duration::from_secs),
                "serveraliveinterval" => c.server_alive = value.parse::<u64>().is_ok_and(|n| n > 0),
                "controlmaster" => c.shares |= !matches!(value, "false" | "no"),
                "controlpath" => c.shares |= value != "none",
                _ => {}
            }
        }
        c
    }
}

/// What the operator's config says for `destination` (with its `-p`/`-l`), read by the
/// same ssh command leasectl connects with. Nothing known (no `-G`, an error): empty,
/// and leasectl's defaults apply.
pub(crate) fn ask_ssh(ssh: &mut Command) -> SshConfig {
    ssh.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
    match ssh.output() {
        Ok(out) if out.status.success() => SshConfig::parse(&String::from_utf8_lossy(&out.stdout)),
        _ => SshConfig::default(),
    }
}

/// The timeout to reach and log in to a host: the operator's, else the config's, else
/// leasectl's default. `None` in the second place: ssh's config already says it.
pub(crate) fn connect_timeout(config: &SshConfig) -> (Duration, Option<Duration>) {
    match (CONNECT_TIMEOUT.get(), config.connect_timeout) {
        (Some(t), _) => (*t, Some(*t)),
        (None, Some(t)) => (t, None),
        (None, None) => (DEFAULT_CONNECT_TIMEOUT, Some(DEFAULT_CONNECT_TIMEOUT)),
    }
}

/// How long leasectl waits for a host's hello: its connect timeout and as long again
/// (five seconds at most) for the login and the remote leasectl to start.
pub(crate) fn hello_within(connect: Duration) -> Duration {
    connect + connect.min(Duration::from_secs(5))
}

/// How long a shared connection is kept (`LEASECTL_SSH_PERSIST` seconds; 0: none).
pub(crate) fn share_for() -> Result<Duration, String> {
    match std::env::var(SHARE_FOR_ENV) {
        Err(_) => Ok(DEFAULT_SHARE_FOR),
        Ok(text) => text
            .trim()
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| format!("{SHARE_FOR_ENV}={text:?} is not a number of seconds")),
    }
}

/// The options leasectl adds for one host, given what its config says.
pub(crate) fn added(config: &SshConfig) -> Vec<String> {
    let mut args = Vec::new();
    if let (_, Some(t)) = connect_timeout(config) {
        args.push(format!("ConnectTimeout={}", t.as_secs().max(1)));
    }
    if !config.server_alive {
        args.extend(["ServerAliveInterval=10".to_owned(), "ServerAliveCountMax=3".to_owned()]);
    }
    if !config.shares
        && let Ok(persist) = share_for()
        && !persist.is_zero()
        && let Some(dir) = control_dir()
    {
        args.push("ControlMaster=auto".to_owned());
        // %C: a hash of this host, the remote, its port and user: one a destination. The
        // ssh command's own hash before it: a connection opened with one config (its keys,
        // its known hosts) is never reused by a command run with another.
        args.push(format!("ControlPath={}/{:016x}-%C", dir.display(), command_hash()));
        args.push(format!("ControlPersist={}", persist.as_secs()));
    }
    args.into_iter().flat_map(|o| ["-o".to_owned(), o]).collect()
}

/// Which ssh command leasectl runs (`LEASECTL_SSH_COMMAND`, or plain `ssh`).
fn command_hash() -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    std::env::var_os(SSH_COMMAND_ENV).hash(&mut h);
    h.finish()
}

/// The directory of shared connections: `$XDG_RUNTIME_DIR/leasectl-ssh`, else
/// `/tmp/leasectl-ssh-UID`; made mode 0700 and used only when it is this user's own
/// directory that no one else can enter (a planted symlink or a shared one: no sharing).
pub(crate) fn control_dir() -> Option<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let uid = rustix::process::geteuid().as_raw();
        let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
            Some(run) => PathBuf::from(run).join("leasectl-ssh"),
            None => std::env::temp_dir().join(format!("leasectl-ssh-{uid}")),
        };
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
        let meta = std::fs::symlink_metadata(&dir).ok()?;
        let private = meta.is_dir() && meta.uid() == uid && meta.mode() & 0o077 == 0;
        // A unix socket's path holds at most 107 bytes; the name is 57, and ssh adds a suffix while binding.
        (private && dir.as_os_str().len() + 58 < 104).then_some(dir)
    })
    .clone()
}

/// `ssh`, or the operator's replacement for it (`LEASECTL_SSH_COMMAND`, run by `sh -c`
/// with leasectl's arguments as `"$@"`, never spliced into its text).
pub(super) fn ssh_program() -> Command {
    match std::env::var(SSH_COMMAND_ENV).ok().filter(|c| !c.trim().is_empty()) {
        Some(text) => {
            let mut c = Command::new("sh");
            c.arg("-c").arg(format!("{text} \"$@\"")).arg("ssh");
            c
        }
        None => Command::new("ssh"),
    }
}

/// `-p PORT -l USER -- HOST`: each its own argument.
pub(super) fn destination(c: &mut Command, t: &crate::lease::address::host_spec::SshTarget) {
    if let Some(p) = t.port {
        c.arg("-p").arg(p.to_string());
    }
    if let Some(u) = &t.user {
        c.arg("-l").arg(u);
    }
    c.arg("--").arg(t.host.trim_start_matches('[').trim_end_matches(']'));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configs_word_is_read_from_ssh_g() {
        let unset = "user root\nconnecttimeout none\nserveraliveinterval 0\ncontrolmaster false\ncontrolpath none\n";
        assert_eq!(SshConfig::parse(unset), SshConfig::default());
        let set = "connecttimeout 3\nserveraliveinterval 15\ncontrolmaster auto\ncontrolpath /x/%C\n";
        let c = SshConfig::parse(set);
        assert_eq!(c, SshConfig { connect_timeout: Some(Duration::from_secs(3)), server_alive: true, shares: true });
        assert_eq!(connect_timeout(&c), (Duration::from_secs(3), None), "the config's timeout stands");
        assert!(!added(&c).iter().any(|a| a.starts_with("ConnectTimeout") || a.starts_with("Control")));
        let d = added(&SshConfig::default());
        assert!(d.contains(&"ConnectTimeout=10".to_owned()) && d.contains(&"ServerAliveInterval=10".to_owned()));
        assert_eq!(hello_within(Duration::from_secs(1)), Duration::from_secs(2));
        assert_eq!(hello_within(Duration::from_secs(10)), Duration::from_secs(15));
    }
}
