//! `leasectl man`: the manual page, whole. clap_mangen renders what the argument
//! definitions say (synopsis, options, each command's options and notes); the sections
//! no definition holds (exit status, environment, files) are written here, once.

use clap::CommandFactory as _;
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, italic, roman};

use super::args::Cli;
use super::messages::note_stdout;
use super::{EXIT_OK, Failure, fail};

/// What each exit code means (docs/commands.md's table says the same; a test compares them).
pub(super) const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "success; the lease was granted"),
    (
        "1",
        "an error: a bad registry (ls, doctor), a live owner refused by force-release, an unknown lease, an owner stop may not or could not end",
    ),
    ("2", "usage: a bad option, or an ambiguous lease id prefix"),
    ("3", "SESSION_NOT_OWNED: a live owner holds the session"),
    ("4", "MAX_CONCURRENT_SESSIONS: every slot is taken"),
    ("5", "SESSION_COORDINATION_UNAVAILABLE: the registry or its lock cannot be used; nothing was changed"),
    ("6", "hold or run lost its lease while holding it"),
];

const ENVIRONMENT: &[(&str, &str)] = &[
    ("HERMES_HOME", "the Hermes home when --home is not given (trimmed; empty means unset)"),
    ("HOME", "~/.hermes is the Hermes home when neither --home nor HERMES_HOME is given"),
    ("LEASECTL_HOSTS", "the hosts (--host SPECs, comma-separated) when no --host is given"),
    ("XDG_CONFIG_HOME", "the hosts file is $XDG_CONFIG_HOME/leasectl/hosts (default ~/.config)"),
    ("LEASECTL_CONNECT_TIMEOUT", "--connect-timeout when it is not given: seconds to reach a host and log in"),
    (
        "LEASECTL_SSH_PERSIST",
        "seconds a host's shared ssh connection outlives its last use (default 60; 0: none shared)",
    ),
    (
        "XDG_RUNTIME_DIR",
        "shared ssh connections' sockets are kept in $XDG_RUNTIME_DIR/leasectl-ssh (mode 0700; default \
         /tmp/leasectl-ssh-UID)",
    ),
    ("LEASECTL_SSH_COMMAND", "replaces ssh (run by sh -c, leasectl's arguments after it)"),
    ("ETCDCTL_ENDPOINTS", "with --backend etcd: the endpoints when --endpoints is not given (as etcdctl reads it)"),
    ("ETCDCTL_CACERT, ETCDCTL_CERT, ETCDCTL_KEY", "with --backend etcd: --cacert, --cert and --key when not given"),
    ("ETCDCTL_USER", "with --backend etcd: --user when not given"),
    (
        "ETCDCTL_DIAL_TIMEOUT, ETCDCTL_COMMAND_TIMEOUT",
        "with --backend etcd: --dial-timeout and --command-timeout when not given",
    ),
    ("ETCDCTL_PASSWORD", "with --backend etcd: --user's password (kept out of the process list)"),
    ("LEASECTL_REMOTE_COMMAND", "the program run on a host instead of leasectl"),
    (
        "XDG_STATE_HOME",
        "an etcd prefix's event journal is kept under $XDG_STATE_HOME/leasectl (default ~/.local/state)",
    ),
    ("LEASECTL_NO_MOUSE", "the console starts with the mouse off (the terminal selects text; m turns it on)"),
    ("NO_COLOR", "the console draws without colour (every state is also a word or a symbol)"),
    ("TZ", "the time zone of the console's clock times and syslog's stamps (default /etc/localtime)"),
    ("LEASECTL_SYSLOG_SOCKET", "the syslog socket audit records are sent to (default /dev/log)"),
    ("LEASECTL_LEASE_ID, LEASECTL_SESSION_ID", "set by run for CMD: the lease it runs under"),
    ("LEASECTL_FENCING_TOKEN", "set by run for CMD on etcd: the grant's fencing token"),
];

const FILES: &[(&str, &str)] = &[
    ("$HERMES_HOME/runtime/active_sessions.json", "the registry: who owns which session (Hermes' file)"),
    ("$HERMES_HOME/runtime/active_sessions.lock", "the registry's lock (flock), shared with Hermes"),
    ("$HERMES_HOME/config.yaml", "max_concurrent_sessions (the cap) and leasectl.idle_threshold"),
    ("$HERMES_HOME/state.db", "Hermes' sessions, read-only: the last activity behind LEAK?"),
    ("$HERMES_HOME/logs/leasectl-audit.jsonl", "who removed what: every force-release, stop, prune and repair"),
    ("$HERMES_HOME/logs/leasectl-events.jsonl", "the event journal events --follow --record keeps (--since reads it)"),
    ("$HERMES_HOME/runtime/active_sessions.json.bak-*", "the exact old bytes of a repaired registry"),
    ("$HERMES_HOME/profiles/NAME/", "a profile: a home of its own, with the same files"),
    ("$XDG_CONFIG_HOME/leasectl/hosts", "the hosts --host NAME and --all-hosts name, and their [groups]"),
    (
        "$XDG_CONFIG_HOME/leasectl/etcd",
        "with --backend etcd: name = value lines (endpoints, prefix, cacert, cert, key, user, password-file, \
         dial-timeout, command-timeout) for what the command line and ETCDCTL_* leave unset",
    ),
    ("$XDG_STATE_HOME/leasectl/fleet/", "the fleet recorder's journal (events --follow --record over --host)"),
];

/// Pages the SEE ALSO section names: only ones a system with leasectl's test tools has.
const SEE_ALSO: &[&str] = &["flock(1)"];

pub(super) fn print_man() -> Result<i32, Failure> {
    let page = render().map_err(|e| fail(format!("cannot render the manual: {e}")))?;
    use std::io::Write as _;
    note_stdout(std::io::stdout().write_all(&page));
    Ok(EXIT_OK)
}

fn render() -> std::io::Result<Vec<u8>> {
    let cli = Cli::command();
    let man = Man::new(cli.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    synopsis(&cli).to_writer(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    commands(&cli, &mut out)?;
    let mut roff = Roff::new();
    list(&mut roff, "EXIT STATUS", EXIT_STATUS);
    list(&mut roff, "ENVIRONMENT", ENVIRONMENT);
    list(&mut roff, "FILES", FILES);
    roff.control("SH", ["SEE ALSO"]);
    roff.text([roman(format!(
        "{}; the docs/ folder of leasectl's repository for the console, cleaning up, events, hosts and the protocol",
        SEE_ALSO.join(", ")
    ))]);
    roff.to_writer(&mut out)?;
    man.render_version_section(&mut out)?;
    Ok(out)
}

/// The SYNOPSIS with each option's value named (`--home DIR`), as `--help` names them
/// (clap_mangen's own lists the options bare).
fn synopsis(cli: &clap::Command) -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["SYNOPSIS"]);
    let mut words = vec![bold("leasectl"), roman(" ")];
    for arg in cli.get_arguments().filter(|a| !a.is_hide_set()) {
        let Some(long) = arg.get_long() else { continue };
        let takes_value = arg.get_action().takes_values();
        words.push(roman("["));
        words.push(bold(format!("--{long}")));
        if takes_value {
            let name = arg.get_value_names().and_then(|v| v.first()).map_or("VALUE".to_owned(), ToString::to_string);
            words.push(roman(" "));
            words.push(italic(name));
        }
        words.push(roman("] "));
    }
    words.push(italic("COMMAND"));
    words.push(roman(" ["));
    words.push(italic("ARGS"));
    words.push(roman("]"));
    roff.text(words);
    roff
}

/// A COMMANDS section: each command's usage, its own options and its notes, as a
/// subsection (one page holds everything, so SEE ALSO names no page that is not there).
fn commands(cli: &clap::Command, out: &mut Vec<u8>) -> std::io::Result<()> {
    let mut head = Roff::new();
    head.control("SH", ["COMMANDS"]);
    head.to_writer(out)?;
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("leasectl {}", sub.get_name());
        let mut roff = Roff::new();
        roff.control("SS", [name.as_str()]);
        if let Some(about) = sub.get_long_about().or_else(|| sub.get_about()) {
            roff.text([roman(about.to_string())]);
        }
        let usage = sub.clone().bin_name(&name).render_usage().to_string();
        roff.control("PP", [] as [&str; 0]);
        roff.text([bold(usage.trim_start_matches("Usage: ").to_owned())]);
        roff.to_writer(out)?;
        // The command's own options (clap_mangen's list), under this subsection's heading.
        let mut options = Vec::new();
        Man::new(sub.clone()).render_options_section(&mut options)?;
        let options = String::from_utf8_lossy(&options).replace(".SH OPTIONS\n", "");
        out.extend_from_slice(options.as_bytes());
        if let Some(notes) = sub.get_after_long_help().or_else(|| sub.get_after_help()) {
            let mut roff = Roff::new();
            for paragraph in notes.to_string().split("\n\n") {
                roff.control("PP", [] as [&str; 0]);
                for line in paragraph.lines() {
                    roff.text([roman(line.to_owned())]);
                    roff.control("br", [] as [&str; 0]);
                }
            }
            roff.to_writer(out)?;
        }
    }
    Ok(())
}

fn list(roff: &mut Roff, title: &str, items: &[(&str, &str)]) {
    roff.control("SH", [title]);
    // What only etcd reads is listed only by a build with etcd, as --help offers it.
    let offered = |(_, meaning): &&(&str, &str)| crate::lease::HAS_ETCD || !meaning.contains("etcd");
    for (term, meaning) in items.iter().filter(offered) {
        roff.control("TP", [] as [&str; 0]);
        roff.text([bold(*term)]);
        roff.text([italic(""), roman(*meaning)]);
    }
}
