//! After an action over several hosts: one line a host saying what it did there, or why
//! it did nothing (not reached, refused), so an operator reads the fleet's outcome at the
//! end of a long listing.

use crate::lease::Location;
use crate::lease::words::human::{escape, plural};

/// What an action came to in one registry.
pub(super) enum Outcome {
    /// Leases removed (or, on a dry run, that would be).
    Removed { count: usize, dry_run: bool },
    /// The host gave no answer (down, refusing the login, junk): why.
    NotReached(String),
    /// The registry answered with a refusal (invalid, locked): why.
    Refused(String),
}

/// The recap, when the action went to more than one host: nothing otherwise.
pub(super) fn print(what: &str, outcomes: &[(Location, Outcome)]) {
    for line in lines(what, outcomes) {
        say!("{line}");
    }
}

fn lines(what: &str, outcomes: &[(Location, Outcome)]) -> Vec<String> {
    let mut hosts: Vec<(&str, Vec<&Outcome>)> = Vec::new();
    for (location, outcome) in outcomes {
        let Some(host) = location.host() else { continue };
        match hosts.iter_mut().find(|(h, _)| *h == host.name) {
            Some((_, all)) => all.push(outcome),
            None => hosts.push((host.name.as_str(), vec![outcome])),
        }
    }
    if hosts.len() < 2 {
        return vec![];
    }
    let width = hosts.iter().map(|(h, _)| h.chars().count()).max().unwrap_or(0);
    let mut out = vec![format!("{what}, host by host:")];
    for (host, all) in hosts {
        let mut removed = 0;
        let mut dry = false;
        let mut acted = 0;
        let mut why: Vec<String> = Vec::new();
        let mut reached = false;
        for o in &all {
            match o {
                Outcome::Removed { count, dry_run } => {
                    removed += count;
                    dry |= dry_run;
                    acted += 1;
                    reached = true;
                }
                Outcome::Refused(w) => {
                    why.push(format!("refused: {}", escape(w)));
                    reached = true;
                }
                Outcome::NotReached(w) => why.push(escape(w).into_owned()),
            }
        }
        let verb = if dry { "would remove" } else { "removed" };
        let text = match (reached, why.first()) {
            (false, Some(w)) => format!("not reached: {w}"),
            (_, None) => {
                format!("{verb} {} in {}", plural(removed, "lease", "leases"), plural(acted, "registry", "registries"))
            }
            (true, Some(_)) => format!(
                "{verb} {} in {} of {}; {}",
                plural(removed, "lease", "leases"),
                acted,
                plural(all.len(), "registry", "registries"),
                why.join("; ")
            ),
        };
        out.push(format!("  {host:<width$}  {text}"));
    }
    out
}
