//! Where a set of leases lives: one Hermes registry file, or a prefix on etcd.
//! Plain data, valid in every build: only opening an etcd location needs the feature.

use std::path::PathBuf;
use std::time::Duration;

use super::host_spec::HostSpec;
use crate::lease::home::paths::Registry;
use crate::lease::words::unusable::Unusable;

/// The default etcd key prefix.
pub(crate) const DEFAULT_ETCD_PREFIX: &str = "/leasectl/";
/// The default etcd lease TTL: how long a dead owner keeps its session.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(10);
/// etcd raises shorter TTLs to its minimum (about 2 s with default settings).
pub(crate) const MIN_TTL_SECS: u64 = 2;
/// The shortest TTL a renewed lease keeps through one etcd leader election. A holder
/// renews every TTL/3 and gives up 2/3 TTL after its last renewal: a renewal may fail for
/// up to TTL/3 (then tried on another member every 0.5 s). etcd's default election timeout
/// (1 s, randomized up to 2 s) plus a second to reach the new leader needs TTL/3 >= 2 s.
pub(crate) const ELECTION_SAFE_TTL_SECS: u64 = 6;
pub(crate) const MAX_TTL_SECS: u64 = 86_400;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Location {
    /// `<home>/runtime/active_sessions.json` under flock.
    File(Registry),
    /// Keys under a prefix on an etcd cluster. Boxed, like `Ssh`: a location is then two
    /// words, and a file's (a shared registry) costs no more where it is kept.
    Etcd(Box<EtcdLocation>),
    /// A registry file on another host, reached through `leasectl serve --stdio` there.
    /// Boxed: a host's spec is large, and a console keeps a location per profile (two
    /// at 100,000 profiles cost 14 MB more unboxed).
    Ssh(Box<SshLocation>),
}

/// One registry of a home on another host.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SshLocation {
    pub host: HostSpec,
    /// `root` or a profile's name, as on that host.
    pub profile: String,
}

/// The etcd client URLs and the key prefix (always ending with `/`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EtcdLocation {
    pub endpoints: Vec<String>,
    pub prefix: String,
}

impl EtcdLocation {
    /// Parse `--endpoints URL[,URL]` and `--prefix P`; every problem is named.
    pub fn parse(endpoints: &str, prefix: Option<&str>) -> Result<EtcdLocation, Unusable> {
        EtcdLocation::parse_with(endpoints, prefix, false)
    }

    /// The same; with `tls` (--cacert, --cert given) endpoints may be https, and one
    /// without a scheme is https.
    pub fn parse_with(endpoints: &str, prefix: Option<&str>, tls: bool) -> Result<EtcdLocation, Unusable> {
        let list: Vec<String> =
            endpoints.split(',').map(str::trim).filter(|e| !e.is_empty()).map(str::to_owned).collect();
        if list.is_empty() {
            return Err(Unusable(
                "--endpoints is empty: give the etcd client URL(s), e.g. http://127.0.0.1:2379".into(),
            ));
        }
        for e in &list {
            // Echoed in every header, grant and error: never raw control characters.
            if e.contains(char::is_control) {
                return Err(Unusable(format!(
                    "--endpoints {}: contains a control character",
                    crate::lease::words::human::escape(e)
                )));
            }
            if e.starts_with("https://") && !tls {
                return Err(Unusable(format!(
                    "--endpoints {e}: https needs the CA that signed etcd's certificate: give --cacert FILE (and \
                     --cert/--key when etcd asks for a client certificate)"
                )));
            }
            let rest = match e.strip_prefix("http://").or_else(|| e.strip_prefix("https://")) {
                Some(rest) => rest,
                // host:port without a scheme, as etcdctl takes it: plain http.
                None if !e.contains("://") => e.as_str(),
                None => {
                    return Err(Unusable(format!(
                        "--endpoints {e}: not an http:// URL (expected e.g. http://127.0.0.1:2379 or 127.0.0.1:2379)"
                    )));
                }
            };
            if rest.is_empty() || rest.contains(char::is_whitespace) || rest.contains('/') {
                return Err(Unusable(format!("--endpoints {e}: no host:port")));
            }
        }
        let scheme = if tls { "https" } else { "http" };
        let list: Vec<String> =
            list.into_iter().map(|e| if e.contains("://") { e } else { format!("{scheme}://{e}") }).collect();
        let mut prefix = prefix.unwrap_or(DEFAULT_ETCD_PREFIX).to_owned();
        if prefix.is_empty() {
            return Err(Unusable("--prefix is empty: give a key prefix such as /leasectl/".into()));
        }
        if prefix.contains(char::is_control) {
            return Err(Unusable(format!(
                "--prefix {}: contains a control character (it would reach terminals raw in headers and grant lines)",
                crate::lease::words::human::escape(&prefix)
            )));
        }
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        Ok(EtcdLocation { endpoints: list, prefix })
    }

    /// `etcd http://a:2379,http://b:2379 /leasectl/`: what messages and the console show.
    pub fn describe(&self) -> String {
        format!("etcd {} {}", self.endpoints.join(","), self.prefix)
    }
}

/// `--ttl SECS` for an etcd lease: the default when not given, else within etcd's bounds.
pub(crate) fn lease_ttl(secs: Option<u64>) -> Result<Duration, Unusable> {
    match secs {
        None => Ok(DEFAULT_TTL),
        Some(s) if (MIN_TTL_SECS..=MAX_TTL_SECS).contains(&s) => Ok(Duration::from_secs(s)),
        Some(s) => Err(Unusable(format!("--ttl must be between {MIN_TTL_SECS} and {MAX_TTL_SECS} seconds, not {s}"))),
    }
}

impl Location {
    /// The registry of `profile` on `host`, over ssh.
    pub fn on_host(host: HostSpec, profile: String) -> Location {
        Location::Ssh(Box::new(SshLocation { host, profile }))
    }

    /// The short name tabs and tables show: `root`, a profile's name (on another host too:
    /// see [`Location::host`]), or `etcd`.
    pub fn name(&self) -> &str {
        match self {
            Location::File(r) => &r.profile,
            Location::Etcd(_) => "etcd",
            Location::Ssh(s) => &s.profile,
        }
    }

    /// What a person is shown: the name, after its host's when on another host (`gw1:root`),
    /// marked when its directory is no profile by Hermes 0.22's rules (`gone (deleted)`).
    pub fn label(&self) -> String {
        match self {
            Location::Ssh(s) => format!("{}:{}", s.host.name, s.profile),
            Location::File(r) if !r.standing.is_live() => format!("{} ({})", r.profile, r.standing.mark()),
            _ => self.name().to_owned(),
        }
    }

    /// The host a registry is on, when it is on another host (`--host`).
    pub fn host(&self) -> Option<&HostSpec> {
        match self {
            Location::Ssh(s) => Some(&s.host),
            _ => None,
        }
    }

    /// Where, in full: the registry file's path or the etcd endpoints and prefix.
    pub fn describe(&self) -> String {
        match self {
            Location::File(r) => r.path().display().to_string(),
            Location::Etcd(e) => e.describe(),
            Location::Ssh(s) => match &s.host.target {
                super::host_spec::HostTarget::Ssh(t) => format!("{} profile {}", t.url(), s.profile),
                super::host_spec::HostTarget::Local { home } => {
                    let home = home.as_ref().map(|h| h.display().to_string()).unwrap_or_default();
                    format!("local:{home} profile {}", s.profile)
                }
            },
        }
    }

    /// The registry, for what only a file has (its lock, config.yaml, repair).
    pub fn registry(&self) -> Option<&Registry> {
        match self {
            Location::File(r) => Some(r),
            Location::Etcd(_) | Location::Ssh(_) => None,
        }
    }

    /// The lock file guarding a registry file; etcd has none.
    pub fn lock_path(&self) -> Option<PathBuf> {
        self.registry().map(Registry::lock_path)
    }

    pub fn is_remote(&self) -> bool {
        matches!(self, Location::Etcd(_))
    }
}

impl From<Registry> for Location {
    fn from(r: Registry) -> Location {
        Location::File(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_location_names_what_is_wrong() {
        let c = EtcdLocation::parse("http://127.0.0.1:2379, http://h2:2379", Some("/x")).expect("valid");
        assert_eq!(c.endpoints, vec!["http://127.0.0.1:2379", "http://h2:2379"]);
        assert_eq!(c.prefix, "/x/");
        assert!(EtcdLocation::parse("", None).unwrap_err().0.contains("--endpoints is empty"));
        // host:port as etcdctl takes it: plain http (it was refused).
        let c = EtcdLocation::parse("127.0.0.1:2379,h2:2379", None).expect("no scheme");
        assert_eq!(c.endpoints, vec!["http://127.0.0.1:2379", "http://h2:2379"]);
        assert!(EtcdLocation::parse("ftp://h:2379", None).unwrap_err().0.contains("not an http:// URL"));
        assert!(EtcdLocation::parse("h:2379/x", None).unwrap_err().0.contains("no host:port"));
        assert!(EtcdLocation::parse("https://h:2379", None).unwrap_err().0.contains("--cacert"));
        assert!(EtcdLocation::parse("http://h:1", Some("")).unwrap_err().0.contains("--prefix is empty"));
        assert!(lease_ttl(Some(1)).unwrap_err().0.contains("--ttl must be between"));
        assert_eq!(lease_ttl(Some(30)), Ok(Duration::from_secs(30)));
        assert_eq!(lease_ttl(None), Ok(DEFAULT_TTL));
    }

    #[test]
    fn names_and_places() {
        let file = Location::File(Registry::new("work", "/h/profiles/work"));
        assert_eq!(file.name(), "work");
        assert_eq!(file.describe(), "/h/profiles/work/runtime/active_sessions.json");
        assert!(file.lock_path().is_some());
        let etcd = Location::Etcd(Box::new(EtcdLocation::parse("http://h:1", None).expect("valid")));
        assert_eq!(etcd.name(), "etcd");
        assert_eq!(etcd.describe(), "etcd http://h:1 /leasectl/");
        assert_eq!(etcd.lock_path(), None);
    }
}
