//! How leasectl reaches a secured etcd: TLS (`--cacert`, `--cert`, `--key`, as etcdctl
//! names them) and a user (`--user`, its password from `ETCDCTL_PASSWORD` or a file, so
//! it is never in a process list), set once for the process by the command line. etcd's
//! own refusals (a certificate, a password, a role, a size) are said in words, once, and
//! are not taken for an outage.

use std::sync::OnceLock;

use etcd_client::{Certificate, ConnectOptions, TlsOptions};

pub(crate) use crate::lease::address::etcd_access::EtcdAccess as Access;

static ACCESS: OnceLock<Access> = OnceLock::new();

/// Set by the command line, once, before etcd is reached.
pub(crate) fn set(access: Access) {
    let _ = ACCESS.set(access);
}

fn access() -> &'static Access {
    static NONE: Access = Access { ca: None, identity: None, user: None, dial_timeout: None, command_timeout: None };
    ACCESS.get().unwrap_or(&NONE)
}

/// TLS is asked for (a CA or a client certificate given).
pub(crate) fn tls() -> bool {
    let a = access();
    a.ca.is_some() || a.identity.is_some()
}

/// `--dial-timeout`, if given.
pub(crate) fn dial_timeout() -> Option<std::time::Duration> {
    access().dial_timeout
}

/// `--command-timeout`, if given.
pub(crate) fn command_timeout() -> Option<std::time::Duration> {
    access().command_timeout
}

/// The user leasectl authenticates as, if any (for messages).
pub(crate) fn user() -> Option<&'static str> {
    access().user.as_ref().map(|(name, _)| name.as_str())
}

/// `options` with TLS and the user added, as set.
pub(crate) fn apply(options: ConnectOptions) -> ConnectOptions {
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
pub(crate) fn refusal(error_text: &str, prefix: &str) -> Option<String> {
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
