//! The etcd settings an operator keeps in a file, so a command needs only `--backend
//! etcd`: `$XDG_CONFIG_HOME/leasectl/etcd`, one `name = value` a line (`#` comments),
//! the names of the options (`endpoints`, `prefix`, `cacert`, `cert`, `key`, `user`,
//! `password-file`, `dial-timeout`, `command-timeout`). The command line and etcdctl's
//! environment come first; the file fills what they leave unset. A password is never
//! in it (`password-file` names a file that holds one).

use std::path::{Path, PathBuf};

use super::args::GlobalOptions;
use super::{Failure, usage};

/// The file, under the operator's own configuration directory.
pub(super) const ETCD_FILE: &str = "leasectl/etcd";
/// A few lines; anything far larger is not one.
const MAX: u64 = 1 << 16;

pub(super) fn file() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join(ETCD_FILE))
}

/// With `--backend etcd`: the file fills what the command line and etcdctl's
/// environment left unset.
pub(super) fn apply(global: &mut GlobalOptions) -> Result<(), Failure> {
    match file() {
        Some(path) if global.backend == super::args::Backend::Etcd => fill(global, &path),
        _ => Ok(()),
    }
}

/// Fill what the command line and the environment left unset from the file, if there
/// is one; every problem names the file and the line.
pub(super) fn fill(global: &mut GlobalOptions, path: &Path) -> Result<(), Failure> {
    use crate::lease::home::safe_file::{Spot, read_bounded};
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return Ok(()) };
    let bytes = match read_bounded(&Spot::new(dir, name), MAX) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(()),
        Err(e) => return Err(usage(format!("cannot read the etcd settings {}: {e}", path.display()))),
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| usage(format!("the etcd settings {} are not UTF-8 text", path.display())))?;
    for (n, line) in text.lines().enumerate() {
        let at = |why: String| usage(format!("{}:{}: {why}", path.display(), n + 1));
        let line = line.split_once('#').map_or(line, |(before, _)| before).trim();
        if line.is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once('=').map(|(k, v)| (k.trim(), v.trim())) else {
            return Err(at(format!("{} is not name = value", crate::lease::words::human::escape(line))));
        };
        let a = &mut global.etcd_access;
        let duration =
            |v: &str| crate::lease::words::human::parse_duration(v).map_err(|e| at(format!("{key}: {}", e.0)));
        match key {
            "endpoints" => global.endpoints = global.endpoints.take().or_else(|| Some(value.to_owned())),
            "prefix" => global.prefix = global.prefix.take().or_else(|| Some(value.to_owned())),
            "cacert" => a.cacert = a.cacert.take().or_else(|| Some(value.into())),
            "cert" => a.cert = a.cert.take().or_else(|| Some(value.into())),
            "key" => a.key = a.key.take().or_else(|| Some(value.into())),
            "user" if value.contains(':') => {
                return Err(at("user: a password is not kept here: name password-file instead".into()));
            }
            "user" => a.user = a.user.take().or_else(|| Some(value.to_owned())),
            "password-file" => a.password_file = a.password_file.take().or_else(|| Some(value.into())),
            "dial-timeout" => a.dial_timeout = a.dial_timeout.or(Some(duration(value)?)),
            "command-timeout" => a.command_timeout = a.command_timeout.or(Some(duration(value)?)),
            other => {
                return Err(at(format!(
                    "unknown setting {}: endpoints, prefix, cacert, cert, key, user, password-file, dial-timeout, \
                     command-timeout",
                    crate::lease::words::human::escape(other)
                )));
            }
        }
    }
    Ok(())
}
