//! `completions`: generated from the argument definitions, with a callback (`leasectl
//! __complete`) that bash asks for what no definition knows: the profiles of the home the
//! typed words name, the lease ids in its registry, and the hosts file's hosts.

use std::path::PathBuf;

use super::EXIT_OK;
use super::args::{Cli, CompleteArgs};
use super::messages::note_stdout;
use crate::lease::home::paths::{all_registries, registry_for_home};

/// Bash: `--profile` completes the home's profiles, `--host` the hosts file's names, a
/// lease id (release, force-release, stop) the ids in its registry, as `ls` shows
/// them; the rest as generated.
const BASH_DYNAMIC: &str = r#"
_leasectl_dynamic() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" w sub=""
    for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
        case "$w" in release|force-release|stop) sub="$w" ;; esac
    done
    if [[ "$prev" == "--profile" || "$prev" == "--host" ]]; then
        local what=profiles
        [[ "$prev" == "--host" ]] && what=hosts
        COMPREPLY=( $(compgen -W "$(leasectl __complete $what -- "${COMP_WORDS[@]:1:COMP_CWORD-1}" 2>/dev/null)" -- "$cur") )
        return 0
    fi
    if [[ -n "$sub" && "$cur" != -* && "$prev" != --* ]]; then
        COMPREPLY=( $(compgen -W "$(leasectl __complete leases -- "${COMP_WORDS[@]:1:COMP_CWORD-1}" 2>/dev/null)" -- "$cur") )
        return 0
    fi
    _leasectl "$@"
}
complete -F _leasectl_dynamic -o nosort -o bashdefault -o default leasectl
"#;

pub(super) fn print_completions(shell: clap_complete::Shell) -> i32 {
    use clap::CommandFactory as _;
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "leasectl", &mut out);
    if shell == clap_complete::Shell::Bash {
        out.extend_from_slice(BASH_DYNAMIC.as_bytes());
    }
    use std::io::Write as _;
    note_stdout(std::io::stdout().write_all(&out));
    EXIT_OK
}

/// The value after `flag` among the typed words (`--home DIR` or `--home=DIR`).
fn typed(words: &[String], flag: &str) -> Option<String> {
    let eq = format!("{flag}=");
    words.iter().enumerate().find_map(|(i, w)| match w.strip_prefix(&eq) {
        Some(v) => Some(v.to_owned()),
        None if w == flag => words.get(i + 1).cloned(),
        None => None,
    })
}

/// Letters, digits, `.`, `_` and `-`, not only dots: safe as a word for bash to expand.
fn plain(word: &str) -> bool {
    !word.is_empty()
        && word.chars().any(|c| c != '.')
        && word.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// One candidate a line: nothing at all when the home cannot be read (a completion
/// never prints an error into the command line being typed).
pub(super) fn complete(a: &CompleteArgs) -> i32 {
    let home = typed(&a.words, "--home")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HERMES_HOME").map(PathBuf::from).filter(|h| !h.as_os_str().is_empty()))
        .or_else(|| dirs::home_dir().map(|h| h.join(".hermes")));
    let Some(home) = home else { return EXIT_OK };
    let root = crate::lease::home::paths::root_of(&home);
    let candidates: Vec<String> = match a.what.as_str() {
        "profiles" => all_registries(&root)
            .into_iter()
            .skip(1)
            // Live profiles only: a deleted one is listed (marked) while it holds leases,
            // but is not offered as a profile to use.
            .filter(|r| r.standing.is_live())
            .map(|r| r.into_place().profile)
            .collect(),
        // The hosts file's names (`--host NAME` picks one), as `--all-hosts` reads them.
        "hosts" => crate::lease::address::host_spec::hosts_file()
            .and_then(|f| crate::lease::address::host_spec::read_hosts_file(&f).ok())
            .unwrap_or_default()
            .into_iter()
            .map(|h| h.name)
            .collect(),
        "leases" => {
            let reg = match typed(&a.words, "--profile") {
                Some(p) if !plain(&p) => return EXIT_OK,
                Some(p) => registry_for_home(&root.join("profiles").join(p)),
                None => registry_for_home(&home),
            };
            match crate::lease::file::snapshot(&reg).leases {
                Ok(views) => views.iter().map(|v| v.entry.lease_id().chars().take(8).collect()).collect(),
                Err(_) => vec![],
            }
        }
        _ => vec![],
    };
    // Only plain words: bash expands each word of `compgen -W` (a profile named `$(...)`
    // would run), so a name of other characters is not offered.
    let lines: String = candidates.iter().filter(|c| plain(c)).map(|c| format!("{c}\n")).collect();
    use std::io::Write as _;
    note_stdout(std::io::stdout().write_all(lines.as_bytes()));
    EXIT_OK
}
