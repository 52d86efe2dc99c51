//! How leasectl reaches a secured etcd: TLS (`--cacert`, `--cert`, `--key`, as etcdctl
//! names them) and a user (`--user`, its password from `ETCDCTL_PASSWORD` or a file, so
//! it is never in a process list), set once for the process by the command line. etcd's
//! own refusals (a certificate, a password, a role, a size) are said in words, once, and
//! are not taken for an outage.

use std::path::Path;
use std::sync::OnceLock;

use etcd_client::{Certificate, ConnectOptions, TlsOptions};

/// The TLS files' contents and the user, as the command line gave them.
#[derive(Clone, Default)]
pub struct Access {
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

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
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
pub fn tls_files(
    cacert: Option<&Path>,
    cert: Option<&Path>,
    key: Option<&Path>,
) -> Result<(Option<Vec<u8>>, Option<Identity>), String> {
    let read = |what: &str, path: &Path| {
        crate::lease::home::safe_file::read_named(path, TLS_FILE_MAX)
            .map_err(|e| format!("cannot read {what} {}: {e}", path.display()))
    };
    let ca = cacert.map(|p| read("--cacert", p)).transpose()?;
    let identity = match (cert, key) {
        (Some(c), Some(k)) => Some((read("--cert", c)?, read("--key", k)?)),
        (None, None) => None,
        _ => return Err("--cert and --key go together: give both (the client certificate and its key)".into()),
    };
    Ok((ca, identity))
}

impl Access {
    /// What the operator gave, its files read: the password from `NAME:PASSWORD`, else
    /// `ETCDCTL_PASSWORD`, else `--password-file` (the first line). Errors name the option.
    pub fn from_given(given: &crate::lease::address::location::EtcdAccessGiven) -> Result<Access, String> {
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
                        let bytes = crate::lease::home::safe_file::read_named(file, 4096)
                            .map_err(|e| format!("--password-file {}: {e}", file.display()))?;
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
        Ok(Access { ca, identity, user, dial_timeout: given.dial_timeout, command_timeout: given.command_timeout })
    }
}

static ACCESS: OnceLock<Access> = OnceLock::new();

/// Set by the command line, once, before etcd is reached.
pub fn set(access: Access) {
    let _ = ACCESS.set(access);
}

fn access() -> &'static Access {
    static NONE: Access = Access { ca: None, identity: None, user: None, dial_timeout: None, command_timeout: None };
    ACCESS.get().unwrap_or(&NONE)
}

/// TLS is asked for (a CA or a client certificate given).
pub fn tls() -> bool {
    let a = access();
    a.ca.is_some() || a.identity.is_some()
}

/// `--dial-timeout`, if given.
pub fn dial_timeout() -> Option<std::time::Duration> {
    access().dial_timeout
}

/// `--command-timeout`, if given.
pub fn command_timeout() -> Option<std::time::Duration> {
    access().command_timeout
}

/// The user leasectl authenticates as, if any (for messages).
pub fn user() -> Option<&'static str> {
    access().user.as_ref().map(|(name, _)| name.as_str())
}

/// `options` with TLS and the user added, as set.
pub fn apply(options: ConnectOptions) -> ConnectOptions {
    let a = access();
    let mut options = options;
    if tls() {
        let mut tls = TlsOptions::new();
        if let Some(ca) = &a.ca {
            tls = tls.ca_certificate(Certificate::from_pem(ca));
        }
        if let Some((cert, key)) = &a.identity {
            tls = tls.identity(etcd_client::Identity::from_pem(cert, key));
        }
        options = options.with_tls(tls);
    }
    if let Some((name, password)) = &a.user {
        // The token etcd hands out lasts --auth-token-ttl: renewed when etcd says it ran out.
        options = options.with_user(name.clone(), password.clone()).with_auto_token_refresh(true);
    }
    options
}

/// etcd's answer in words when it is a refusal that trying again will not change (a
/// certificate, a password, a role, a size): None for an outage.
pub fn refusal(error_text: &str, prefix: &str) -> Option<String> {
    let t = error_text;
    let user = user().unwrap_or("(none)");
    let said = if t.contains("UnknownIssuer") || t.contains("unknown issuer") || t.contains("invalid peer certificate")
    {
        format!("etcd's certificate is not signed by the CA given (--cacert): {t}")
    } else if t.contains("certificate required") || t.contains("bad certificate") || t.contains("CertificateRequired") {
        format!("etcd did not accept the client certificate (--cert/--key; etcd runs with --client-cert-auth): {t}")
    } else if t.contains("Expired") || t.contains("expired") && t.contains("certificate") {
        format!("a certificate has expired: {t}")
    } else if t.contains("NotValidForName") || t.contains("not valid for") {
        format!("etcd's certificate does not name the host of the endpoint: {t}")
    } else if t.contains("authentication failed") || t.contains("invalid user ID or password") {
        format!("etcd refused user {user}: wrong name or password (ETCDCTL_PASSWORD or --password-file)")
    } else if t.contains("user name is empty") || t.contains("user name not found") {
        "etcd has authentication on: give --user NAME (its password in ETCDCTL_PASSWORD or --password-file)".to_owned()
    } else if t.contains("permission denied") && user == "(none)" {
        format!(
            "etcd refused the user its client certificate names (its CN; no --user given): that user's role does \
             not allow read and write on the key range {prefix}; give --user NAME (ETCDCTL_PASSWORD), or grant that \
             user a role with it"
        )
    } else if t.contains("permission denied") {
        format!(
            "etcd refused user {user}: its role does not allow read and write on the key range {prefix} (grant it: \
             etcdctl role grant-permission ROLE --prefix=true readwrite {prefix})"
        )
    } else if t.contains("request is too large") || t.contains("message length too large") {
        format!("etcd refused a request as too large (its --max-request-bytes): {t}")
    } else {
        return None;
    };
    Some(said)
}
