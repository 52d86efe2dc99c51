//! This leasectl put on a host over the operator's own ssh, so that `--host` runs the same
//! build everywhere with no build there: the binary goes on ssh's standard input to a
//! short POSIX shell script, which keeps it only when its SHA-256 is the one sent and it
//! says this version, in the user's own `${XDG_BIN_HOME:-$HOME/.local/bin}` (where the
//! session's command looks first, see [`SERVE_COMMAND`]). A `leasectl` there that this
//! command did not put there (no record of its checksum beside it, or another one) is
//! never replaced.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use super::options;
use super::options::{destination, ssh_program};
use super::wire::VERSION;
use crate::lease::address::host_spec::{HostSpec, HostTarget};

/// The remote's command for a session when no `LEASECTL_REMOTE_COMMAND` is set: leasectl
/// from the folder `install` fills first, then the remote's PATH. One line in single
/// quotes, which every login shell (sh, bash, zsh, fish, csh) passes to `sh` as it is.
pub(crate) const SERVE_COMMAND: &str =
    "sh -c 'PATH=\"${XDG_BIN_HOME:-$HOME/.local/bin}:$PATH\"; export PATH; exec leasectl serve --stdio'";

/// Where `install` puts leasectl, as the remote's shell spells it (for messages).
pub(crate) const REMOTE_PATH: &str = "${XDG_BIN_HOME:-~/.local/bin}/leasectl";

/// The script, run by `sh -c SCRIPT sh SIZE SUM VERSION` with the binary on its input.
/// Each outcome is one line `leasectl-install: WORD DETAIL` on its output, exit 0; a
/// failure of the shell itself (no space left, say) is its exit status and stderr.
const SCRIPT: &str = concat!(
    "set -eu; size=$1; sum=$2; version=$3; ",
    "say() { echo \"leasectl-install: $*\"; exit 0; }; ",
    "[ \"$(uname -s) $(uname -m)\" = \"Linux x86_64\" ] || say unfit \"$(uname -s) $(uname -m)\"; ",
    "command -v sha256sum >/dev/null 2>&1 || say unfit \"no sha256sum\"; ",
    "dir=${XDG_BIN_HOME:-$HOME/.local/bin}; bin=$dir/leasectl; mark=$dir/.leasectl.sha256; ",
    "other=$(command -v leasectl 2>/dev/null || true); ",
    "[ -n \"$other\" ] && [ \"$other\" != \"$bin\" ] && echo \"leasectl-install: also $other\"; ",
    "if [ -e \"$bin\" ] || [ -L \"$bin\" ]; then ",
    "[ -f \"$bin\" ] && [ ! -L \"$bin\" ] && [ -f \"$mark\" ] || say foreign \"$bin\"; ",
    "have=$(sha256sum <\"$bin\" | cut -d\" \" -f1); ",
    "[ \"$have\" = \"$(cat \"$mark\")\" ] || say foreign \"$bin\"; ",
    "[ \"$have\" = \"$sum\" ] && say same \"$bin\"; true; ",
    "fi; ",
    "mkdir -p \"$dir\"; tmp=$(mktemp \"$dir/.leasectl.XXXXXX\"); gone() { rm -f \"$tmp\"; }; trap gone EXIT; ",
    "head -c \"$size\" >\"$tmp\"; got=$(sha256sum <\"$tmp\" | cut -d\" \" -f1); ",
    "[ \"$got\" = \"$sum\" ] || say corrupt \"$got\"; ",
    "chmod 0755 \"$tmp\"; ran=$(\"$tmp\" --version 2>&1 || true); ",
    "[ \"$ran\" = \"leasectl $version\" ] || say broken \"$ran\"; ",
    "mv -f \"$tmp\" \"$bin\"; trap - EXIT; echo \"$sum\" >\"$mark\"; say installed \"$bin\"",
);

/// What `install` did on one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Installed {
    /// The binary is there now, at this path (as the remote names it).
    Put { path: String },
    /// The same build was there already.
    Same { path: String },
}

/// The outcome on one host, with the other `leasectl` the remote's PATH finds, if any
/// (the session's command runs the installed one first).
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    pub installed: Installed,
    pub also: Option<String>,
    pub bytes: u64,
    pub sha256: String,
}

/// Put the binary at `exe` (this leasectl) on `host`. Err says why not, in words.
pub(crate) fn install(host: &HostSpec, exe: &Path) -> Result<Outcome, String> {
    let HostTarget::Ssh(target) = &host.target else {
        return Err("this machine runs this leasectl already: nothing to install".to_owned());
    };
    // one door: this leasectl's own executable (current_exe), not a file in a home.
    let bytes = std::fs::read(exe).map_err(|e| format!("cannot read this leasectl ({}): {e}", exe.display()))?;
    let mut hasher = Sha256::new();
    hasher.update(&bytes);
    let sha256: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let size = bytes.len() as u64;

    // The operator's ssh config first, as for a session (`ssh -G` reads it without
    // connecting); then leasectl's timeouts where it is silent, and no sharing: one
    // command, then gone.
    let mut ask = ssh_program();
    ask.arg("-G");
    destination(&mut ask, target);
    let config = options::ask_ssh(&mut ask);
    let mut ssh: Command = ssh_program();
    ssh.args(["-T", "-o", "BatchMode=yes"]);
    ssh.args(options::added(&options::SshConfig { shares: true, ..config }));
    destination(&mut ssh, target);
    // Every word after the script is digits, hex or this version: nothing for a shell.
    ssh.arg(format!("sh -c '{SCRIPT}' sh {size} {sha256} {VERSION}"));
    ssh.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = ssh.spawn().map_err(|e| format!("cannot start ssh: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("cannot talk to ssh (no pipe)")?;
    // Written from a thread: the remote may answer (and ssh end) before reading it all,
    // and that write then fails, which is no error of its own.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&bytes);
    });
    let out = child.wait_with_output().map_err(|e| format!("ssh: {e}"))?;
    let _ = writer.join();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut also = None;
    let mut said = None;
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("leasectl-install: ") else { continue };
        let (word, detail) = rest.split_once(' ').unwrap_or((rest, ""));
        let detail = crate::lease::words::human::escape(detail).into_owned();
        match word {
            "also" => also = Some(detail),
            _ => said = Some((word.to_owned(), detail)),
        }
    }
    let Some((word, detail)) = said else {
        let stderr = crate::lease::words::human::escape(String::from_utf8_lossy(&out.stderr).trim()).into_owned();
        let code = out.status.code().map_or_else(|| "a signal".to_owned(), |c| format!("exit {c}"));
        return Err(match code.as_str() {
            "exit 255" => format!("ssh could not connect or log in ({stderr})"),
            _ => format!("the install ended without a word ({code}): {stderr}"),
        });
    };
    let installed = match word.as_str() {
        "installed" => Installed::Put { path: detail },
        "same" => Installed::Same { path: detail },
        "foreign" => {
            return Err(format!(
                "{detail} is there and is not one leasectl installed (no record of its checksum beside it): not \
                 replaced; remove it there, or leave it and set LEASECTL_REMOTE_COMMAND to the leasectl to run"
            ));
        }
        "unfit" => {
            return Err(format!(
                "the host is {detail}, this leasectl is for Linux x86_64 (with sha256sum): build leasectl there \
                 (pip install of the sdist, or cargo install)"
            ));
        }
        "corrupt" => return Err(format!("the copy arrived with SHA-256 {detail}, not {sha256}: nothing replaced")),
        "broken" => return Err(format!("the copy does not run there (it said {detail:?}): nothing replaced")),
        other => return Err(format!("the install said {other:?} {detail:?}")),
    };
    Ok(Outcome { installed, also, bytes: size, sha256 })
}
