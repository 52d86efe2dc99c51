//! Commands a message tells a person to paste, made as words and rendered once, each
//! word quoted for the POSIX shell it is pasted into: a lease id, a session, a profile or
//! a path is whatever a file or a host says, and `$(...)`, `;` or `#` in one must stay
//! part of that one word.
//!
//! The core does not know how the operator named the registry (`--home`, `--profile`,
//! `--host`...), so its messages carry hints as marked words ([`command`]); the CLI and
//! the console render them with the words that reach the registry ([`Reach`]). A marker
//! holds JSON, so the words come back exactly as they went in.

use serde_json::{Value, json};

use super::human::shell_word;

/// Around a marked hint's JSON: private-use characters, never shown (a marker that does
/// not parse loses them and its text is shown as data).
const OPEN: char = '\u{e000}';
const CLOSE: char = '\u{e001}';

/// A hint in a message: `` `leasectl ARGS` ``, given the registry's options where it is
/// rendered.
pub fn command(args: &[&str]) -> String {
    marked(json!({ "args": args }))
}

/// The same in another registry of the same home: profile `name` (None: the root).
pub fn command_in_profile(profile: Option<&str>, args: &[&str]) -> String {
    marked(json!({ "args": args, "profile": profile }))
}

/// The same, run through `via` first (`sudo -u alice`, `ssh gw1`): another user's or
/// another host's command.
pub fn command_via(via: &[&str], args: &[&str]) -> String {
    marked(json!({ "args": args, "via": via }))
}

fn marked(payload: Value) -> String {
    format!("`{OPEN}{payload}{CLOSE}`")
}

/// The words that reach a registry: `leasectl` and the options that chose it, any
/// `--profile NAME` last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    words: Vec<String>,
}

impl Reach {
    /// Plain `leasectl`: the default home.
    pub fn plain() -> Reach {
        Reach { words: vec!["leasectl".into()] }
    }

    /// `leasectl` followed by `options` (as a command line gave them).
    pub fn with(options: impl IntoIterator<Item = String>) -> Reach {
        let mut words = vec!["leasectl".to_owned()];
        words.extend(options);
        Reach { words }
    }

    /// The words that reach `location`, as the console and a host's answers name it.
    pub fn of(location: &crate::lease::Location) -> Reach {
        match location {
            crate::lease::Location::File(reg) => {
                let root = crate::lease::home::paths::root_of(&reg.home);
                let mut options = vec!["--home".to_owned(), root.to_string_lossy().into_owned()];
                if reg.home != root {
                    options.extend(["--profile".to_owned(), reg.profile.clone()]);
                }
                Reach::with(options)
            }
            crate::lease::Location::Etcd(at) => Reach::with([
                "--backend".to_owned(),
                "etcd".to_owned(),
                "--endpoints".to_owned(),
                at.endpoints.join(","),
                "--prefix".to_owned(),
                at.prefix.clone(),
            ]),
            crate::lease::Location::Ssh(at) => {
                let mut options = vec!["--host".to_owned(), at.host.text()];
                if at.profile != "root" {
                    options.extend(["--profile".to_owned(), at.profile.clone()]);
                }
                Reach::with(options)
            }
        }
    }

    /// These words in profile `profile` of the same home (None: the root): a `--profile`
    /// given is replaced.
    fn in_profile(&self, profile: Option<&str>) -> Vec<String> {
        let mut words = self.words.clone();
        let n = words.len();
        if n >= 3 && words[n - 2] == "--profile" {
            words.truncate(n - 2);
        }
        if let Some(name) = profile {
            words.extend(["--profile".to_owned(), name.to_owned()]);
        }
        words
    }

    /// `leasectl`, these options and `args`, each word quoted for a POSIX shell;
    /// `profile` Some(..) names another registry of the home.
    pub fn line(&self, profile: Option<Option<&str>>, args: &[&str]) -> String {
        let mut words = match profile {
            Some(p) => self.in_profile(p),
            None => self.words.clone(),
        };
        words.extend(args.iter().map(|a| (*a).to_owned()));
        words.iter().map(|w| shell_word(w)).collect::<Vec<_>>().join(" ")
    }

    /// `leasectl` and these options alone, quoted.
    pub fn prefix(&self) -> String {
        self.line(None, &[])
    }
}

/// `text` (the core's words) with its hints naming `location`: pasted as shown, they act
/// on that registry, not on ~/.hermes (the console and the demo know the registry, not
/// how the operator named it).
pub fn hinted(location: &crate::lease::Location, text: &str) -> String {
    render(text, &Reach::of(location))
}

/// `text` with every marked hint in it rendered for `reach`. A marker that does not parse
/// (text from a file that imitates one) is dropped and what it held shown as text.
/// Outside markers, a fixed hint the core writes plainly (`` `leasectl doctor` ``, words
/// of its own, none from a file) gets the registry's options after `leasectl`, unless it
/// names its own (`` `leasectl --profile ops ...` ``).
pub fn render(text: &str, reach: &Reach) -> String {
    let prefix = reach.prefix();
    let plain = |segment: &str| with_options(&segment.replace(CLOSE, ""), &prefix);
    if !text.contains(OPEN) {
        return plain(text);
    }
    let mut out = String::with_capacity(text.len() + 64);
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&plain(&rest[..start]));
        let after = &rest[start + OPEN.len_utf8()..];
        let Some(end) = after.find(CLOSE) else {
            rest = after;
            continue;
        };
        match parse(&after[..end]) {
            Some((profile, args, via)) => {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                for word in &via {
                    out.push_str(&shell_word(word));
                    out.push(' ');
                }
                out.push_str(&reach.line(profile.as_ref().map(|p| p.as_deref()), &args));
            }
            None => out.push_str(&after[..end]),
        }
        rest = &after[end + CLOSE.len_utf8()..];
    }
    out.push_str(&plain(rest));
    out
}

/// `text` with each plain `` `leasectl `` hint given `prefix` in place of `leasectl`.
fn with_options(text: &str, prefix: &str) -> String {
    const HINT: &str = "`leasectl ";
    if prefix == "leasectl" || !text.contains(HINT) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 64);
    let mut rest = text;
    while let Some(at) = rest.find(HINT) {
        let after = &rest[at + HINT.len()..];
        out.push_str(&rest[..at]);
        out.push('`');
        out.push_str(if after.starts_with("--") { "leasectl" } else { prefix });
        out.push(' ');
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A marker's words: the profile it names (Some(None): the root), the arguments, and
/// what runs it (`sudo -u USER`, `ssh HOST`; none: run here).
type Parsed = (Option<Option<String>>, Vec<String>, Vec<String>);

fn parse(payload: &str) -> Option<Parsed> {
    let v: Value = serde_json::from_str(payload).ok()?;
    let words = |key: &str| -> Option<Vec<String>> {
        v.get(key)?.as_array()?.iter().map(|a| a.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>()
    };
    let args = words("args")?;
    let via = match v.get("via") {
        None => vec![],
        Some(_) => words("via")?,
    };
    let profile = match v.get("profile") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(Value::String(p)) => Some(Some(p.clone())),
        Some(_) => return None,
    };
    Some((profile, args, via))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_rendered_with_the_registry_and_quoted() {
        let reach = Reach::with(["--home".to_owned(), "/my home".to_owned(), "--profile".to_owned(), "w".to_owned()]);
        let text = format!("remove it: {}.", command(&["force-release", "$(id);x#", "--live"]));
        assert_eq!(
            render(&text, &reach),
            "remove it: `leasectl --home '/my home' --profile w force-release '$(id);x#' --live`."
        );
        let other = command_in_profile(Some("ops"), &["prune"]);
        assert_eq!(render(&other, &reach), "`leasectl --home '/my home' --profile ops prune`");
        let root = command_in_profile(None, &["prune"]);
        assert_eq!(render(&root, &reach), "`leasectl --home '/my home' prune`");
        let as_user = command_via(&["sudo", "-u", "a b"], &["stop", "S"]);
        assert_eq!(render(&as_user, &reach), "`sudo -u 'a b' leasectl --home '/my home' --profile w stop S`");
    }

    #[test]
    fn a_marker_that_does_not_parse_is_text() {
        let forged = format!("a{OPEN}not json{CLOSE}b{CLOSE}");
        assert_eq!(render(&forged, &Reach::plain()), "anot jsonb");
    }

    #[test]
    fn fixed_hints_get_the_registry_options_unless_they_name_their_own() {
        let reach = Reach::with(["--home".to_owned(), "/h".to_owned()]);
        assert_eq!(render("run `leasectl prune` now", &reach), "run `leasectl --home /h prune` now");
        assert_eq!(render("`leasectl --profile ops ls`", &reach), "`leasectl --profile ops ls`");
        assert_eq!(render("no hint here", &reach), "no hint here");
    }
}
