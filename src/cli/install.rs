//! `leasectl install`: this binary put on every host `--host` names (see
//! `lease::ssh::install`), all hosts at once; one line a host says what it did.

use crate::lease::address::host_spec::HostSpec;
use crate::lease::ssh::install::{Installed, install};
use crate::lease::ssh::wire::VERSION;
use crate::lease::words::human::escape;

use super::{EXIT_ERROR, EXIT_OK, Failure, fail, usage};

pub(super) fn install_on(hosts: &[HostSpec]) -> Result<i32, Failure> {
    if hosts.is_empty() {
        return Err(usage(
            "install puts this leasectl on other hosts: name them with --host SPEC, LEASECTL_HOSTS or --all-hosts",
        ));
    }
    let exe = std::env::current_exe().map_err(|e| fail(format!("cannot find this leasectl's own file: {e}")))?;
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let runs: Vec<_> = hosts.iter().map(|h| scope.spawn(|| install(h, &exe))).collect();
        runs.into_iter().map(|r| r.join().unwrap_or_else(|_| Err("the install's thread panicked".into()))).collect()
    });
    let mut failed = false;
    for (host, outcome) in hosts.iter().zip(outcomes) {
        let name = escape(&host.name);
        match outcome {
            Ok(o) => {
                let short = &o.sha256[..12];
                match &o.installed {
                    Installed::Put { path } => {
                        say!("{name}: installed leasectl {VERSION} at {path} ({} bytes, sha256 {short}…)", o.bytes)
                    }
                    Installed::Same { path } => {
                        say!("{name}: leasectl {VERSION} is there already ({path}, sha256 {short}…)")
                    }
                }
                if let Some(other) = &o.also {
                    say!("{name}: note: {other} is on its PATH too; --host runs the installed one first");
                }
            }
            Err(why) => {
                say_err!("leasectl: {name}: {why}");
                failed = true;
            }
        }
    }
    Ok(if failed { EXIT_ERROR } else { EXIT_OK })
}
