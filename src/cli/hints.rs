//! Hints a message gives (`leasectl prune` removes it) name the registry the operator
//! chose: copied as printed, they act on the same home and profile, not on ~/.hermes.

use super::args::{Backend, Cli};
use crate::lease::human::shell_word as quote;

/// `leasectl` and the options that chose the registry, as typed on this command line:
/// made once from the command line and handed to whatever prints a hint.
pub(super) struct Hints {
    prefix: String,
}

impl Hints {
    /// The options that select a registry (or an etcd prefix) on this command line.
    pub(super) fn of(cli: &Cli) -> Hints {
        let mut p = String::from("leasectl");
        if cli.backend == Backend::Etcd {
            p.push_str(" --backend etcd");
            if let Some(e) = &cli.endpoints {
                p.push_str(&format!(" --endpoints {}", quote(e)));
            }
            if let Some(x) = &cli.prefix {
                p.push_str(&format!(" --prefix {}", quote(x)));
            }
        }
        // Over --host a hint reaches the same hosts (LEASECTL_HOSTS is in the environment).
        for host in &cli.hosts {
            p.push_str(&format!(" --host {}", quote(host)));
        }
        if cli.all_hosts {
            p.push_str(" --all-hosts");
        }
        if let Some(h) = &cli.home {
            p.push_str(&format!(" --home {}", quote(&h.to_string_lossy())));
        }
        if let Some(name) = &cli.profile {
            p.push_str(&format!(" --profile {}", quote(name)));
        }
        Hints { prefix: p }
    }

    /// The options that reach `location` alone (a host's registry named by its SPEC).
    pub(super) fn at(location: &crate::lease::Location) -> Hints {
        Hints { prefix: crate::lease::human::leasectl_at(location) }
    }

    /// `leasectl` with this command line's home (and backend) but another profile (None:
    /// the root).
    pub(super) fn in_profile(&self, profile: Option<&str>) -> String {
        let base = self.prefix.as_str();
        // The profile option is always last in the prefix: cut it, then add the wanted one.
        let base = base.find(" --profile ").map(|at| &base[..at]).unwrap_or(base);
        match profile {
            Some(name) => format!("{base} --profile {}", quote(name)),
            None => base.to_owned(),
        }
    }

    /// `text` with every quoted command hint (`` `leasectl CMD...` ``) given this command
    /// line's registry options; a hint that names its own options (`` `leasectl --profile
    /// work ...` ``) is left as it is. For text made where the command line is not known
    /// (the core's errors and advice): the CLI's own hints use [`Hints::in_profile`].
    pub(super) fn apply(&self, text: &str) -> String {
        crate::lease::human::with_options(text, &self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_get_the_registry_options_unless_they_name_their_own() {
        let hints = Hints { prefix: "leasectl --home /h --profile work".into() };
        assert_eq!(hints.apply("run `leasectl prune` now"), "run `leasectl --home /h --profile work prune` now");
        assert_eq!(hints.apply("`leasectl --profile ops ls`"), "`leasectl --profile ops ls`");
        assert_eq!(hints.apply("no hint here"), "no hint here");
        assert_eq!(hints.in_profile(Some("ops")), "leasectl --home /h --profile ops");
        assert_eq!(hints.in_profile(None), "leasectl --home /h");
    }

    #[test]
    fn words_are_quoted_only_when_a_shell_would_change_them() {
        assert_eq!(quote("/tmp/h"), "/tmp/h");
        assert_eq!(quote("my home"), "'my home'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("~x"), "'~x'");
        assert_eq!(quote(""), "''");
    }
}
