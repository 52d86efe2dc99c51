//! How leasectl reaches a secured etcd, as the operator gave it and as read: TLS
//! (`--cacert`, `--cert`, `--key`, as etcdctl names them) and a user (`--user`, its
//! password from `ETCDCTL_PASSWORD` or a file, so it is never in a process list). Plain
//! data in every build; the etcd backend keeps it for the process.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::lease::home::safe_file::read_named;

/// How to reach a secured etcd, as the operator gave it (`--cacert`, `--cert`, `--key`,
/// `--user NAME[:PASSWORD]`, `--password-file`, the timeouts): plain data in every build;
/// [`crate::lease::use_etcd_access`] reads its files and keeps it for the process.
#[derive(Debug, Clone, Default)]
pub struct EtcdAccessGiven {
    pub cacert: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub user: Option<String>,
    pub password_file: Option<PathBuf>,
    pub dial_timeout: Option<Duration>,
    pub command_timeout: Option<Duration>,
}

/// The TLS files' contents and the user, as the command line gave them.
#[derive(Clone, Default)]
pub struct EtcdAccess {
    /// The CA that signed etcd's certificate (PEM).
    pub ca: Option<Vec<u8>>,
    /// This client's certificate and key (PEM).
    pub identity: Option<Identity>,
    /// The name and password; the password is never shown.
    pub user: Option<(String, String)>,
    /// How long to wait for a member to take a connection (`--dial-timeout`).
    pub dial_timeout: Option<std::time::Duration>,
    /// How long a request may take, every member tried (`--command-timeout`).
    pub command_timeout: Option<std::time::Duration>,
}

impl std::fmt::Debug for EtcdAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdAccess")
            .field("ca", &self.ca.is_some())
            .field("identity", &self.identity.is_some())
            .field("user", &self.user.as_ref().map(|(name, _)| name))
            .field("dial_timeout", &self.dial_timeout)
            .field("command_timeout", &self.command_timeout)
            .finish()
    }
}

/// A client certificate and its key (PEM).
pub type Identity = (Vec<u8>, Vec<u8>);

/// A PEM file is a few kilobytes; a chain, a few more.
const TLS_FILE_MAX: u64 = 1 << 20;

/// Read `--cacert`, `--cert` and `--key` once, as the command line starts: each must be a
/// file (links followed, a FIFO refused at once), and `--cert` and `--key` go together.
fn tls_files(
    cacert: Option<&Path>,
    cert: Option<&Path>,
    key: Option<&Path>,
) -> Result<(Option<Vec<u8>>, Option<Identity>), String> {
    let read = |what: &str, path: &Path| {
        read_named(path, TLS_FILE_MAX).map_err(|e| format!("cannot read {what} {}: {e}", path.display()))
    };
    let ca = cacert.map(|p| read("--cacert", p)).transpose()?;
    let identity = match (cert, key) {
        (Some(c), Some(k)) => Some((read("--cert", c)?, read("--key", k)?)),
        (None, None) => None,
        _ => return Err("--cert and --key go together: give both (the client certificate and its key)".into()),
    };
    Ok((ca, identity))
}

impl EtcdAccessGiven {
    /// What the operator gave, its files read: the password from `NAME:PASSWORD`, else
    /// `ETCDCTL_PASSWORD`, else `--password-file` (the first line). Errors name the option.
    pub fn read(&self) -> Result<EtcdAccess, String> {
        let given = self;
        let user = match given.user.as_deref().filter(|u| !u.is_empty()) {
            None => None,
            Some(named) => {
                let (name, inline) = match named.split_once(':') {
                    Some((n, p)) => (n.to_owned(), Some(p.to_owned())),
                    None => (named.to_owned(), None),
                };
                let password = match (inline, std::env::var("ETCDCTL_PASSWORD"), &given.password_file) {
                    (Some(p), _, _) | (None, Ok(p), _) => p,
                    (None, Err(_), Some(file)) => {
                        let bytes =
                            read_named(file, 4096).map_err(|e| format!("--password-file {}: {e}", file.display()))?;
                        String::from_utf8_lossy(&bytes).lines().next().unwrap_or_default().to_owned()
                    }
                    (None, Err(_), None) => {
                        return Err(format!(
                            "--user {name} needs its password: set ETCDCTL_PASSWORD or give --password-file FILE"
                        ));
                    }
                };
                Some((name, password))
            }
        };
        let (ca, identity) = tls_files(given.cacert.as_deref(), given.cert.as_deref(), given.key.as_deref())?;
        Ok(EtcdAccess { ca, identity, user, dial_timeout: given.dial_timeout, command_timeout: given.command_timeout })
    }
}
