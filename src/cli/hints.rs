//! Hints a message gives (`leasectl prune` removes it) name the registry the operator
//! chose: copied as printed, they act on the same home and profile, not on ~/.hermes.

use super::args::{Backend, GlobalOptions};
use crate::lease::words::hint::Reach;

/// `leasectl` and the options that chose the registry, as typed on this command line:
/// made once from the command line and handed to whatever prints a hint.
pub(super) struct Hints {
    reach: Reach,
}

impl Hints {
    /// The options that select a registry (or an etcd prefix) on this command line.
    pub(super) fn of(global: &GlobalOptions) -> Hints {
        let mut options: Vec<String> = Vec::new();
        if global.backend == Backend::Etcd {
            options.extend(["--backend".into(), "etcd".into()]);
            if let Some(e) = &global.endpoints {
                options.extend(["--endpoints".into(), e.clone()]);
            }
            if let Some(x) = &global.prefix {
                options.extend(["--prefix".into(), x.clone()]);
            }
        }
        // Over --host a hint reaches the same hosts (LEASECTL_HOSTS is in the environment).
        for host in global.hosts.iter().filter(|_| !global.hosts_from_env) {
            options.extend(["--host".into(), host.clone()]);
        }
        if global.all_hosts {
            options.push("--all-hosts".into());
        }
        if let Some(h) = global.home.as_ref().filter(|_| !global.home_from_env) {
            options.extend(["--home".into(), h.to_string_lossy().into_owned()]);
        }
        // Last: a hint for another profile replaces it.
        if let Some(name) = &global.profile {
            options.extend(["--profile".into(), name.clone()]);
        }
        Hints { reach: Reach::with(options) }
    }

    /// The options that reach `location` alone (a host's registry named by its SPEC).
    pub(super) fn at(location: &crate::lease::Location) -> Hints {
        Hints { reach: Reach::of(location) }
    }

    /// The command `leasectl OPTIONS ARGS` with this command line's registry options, in
    /// another profile of the home when `profile` is Some (None inside: the root), each
    /// word quoted for a POSIX shell.
    pub(super) fn command(&self, profile: Option<Option<&str>>, args: &[&str]) -> String {
        self.reach.line(profile, args)
    }

    /// `text` with its hints (the core's errors and advice) rendered with this command
    /// line's registry options.
    pub(super) fn apply(&self, text: &str) -> String {
        crate::lease::words::hint::render(text, &self.reach)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::words::human::shell_word as quote;

    #[test]
    fn hints_name_another_profile_in_place_of_the_one_given() {
        let hints = Hints { reach: Reach::with(["--home".into(), "/h".into(), "--profile".into(), "work".into()]) };
        assert_eq!(hints.command(Some(Some("ops")), &["prune"]), "leasectl --home /h --profile ops prune");
        assert_eq!(hints.command(Some(None), &["prune"]), "leasectl --home /h prune");
        assert_eq!(hints.command(None, &["ls"]), "leasectl --home /h --profile work ls");
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
