//! The console (`leasectl`, `tui`) and the demo: they need a terminal.

use std::time::Duration;

use super::{EXIT_OK, Failure, fail, usage};
use crate::lease::{self, Location, StoreOptions};

/// The console draws on standard output: without a terminal there, say so before
/// anything is set up (a demo sandbox included) rather than fail half-way.
pub(super) fn needs_terminal(what: &str) -> Result<(), Failure> {
    if dumb_terminal() {
        return Err(usage(format!("{what} needs a full-screen terminal, and this one is TERM=dumb")));
    }
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return Ok(());
    }
    Err(usage(format!("{what} needs a terminal; in scripts and pipes use `leasectl ls` (or `leasectl ls --json`)")))
}

/// A terminal that cannot move its cursor (TERM=dumb: Emacs' shell, some CI logs): the
/// console declines there and lists instead, as `less` and `htop` decline.
pub(super) fn dumb_terminal() -> bool {
    std::env::var_os("TERM").is_some_and(|t| t == "dumb")
}

pub(super) fn console(
    discover_root: Option<std::path::PathBuf>,
    discover_hosts: bool,
    locations: Vec<Location>,
    timeout: Duration,
    idle_threshold: Option<Duration>,
) -> Result<i32, Failure> {
    needs_terminal("the console")?;
    // Open each location once now, so a console never starts on one it cannot read
    // (etcd in a build without it).
    for location in &locations {
        lease::open(location, StoreOptions::default())?;
    }
    let opts = crate::tui::ConsoleOptions {
        locations,
        discover_root,
        discover_hosts,
        // The console must stay responsive: a held lock is reported, not waited out.
        lock_timeout: timeout.min(Duration::from_secs(3)),
        idle_threshold,
        extension: None,
    };
    crate::tui::run(opts).map_err(|e| fail(format!("console: {e}")))?;
    Ok(EXIT_OK)
}

/// The console on a sandbox: never `$HERMES_HOME` or `~/.hermes`, only a temp dir or `--home`.
pub(super) fn demo(home: Option<&std::path::Path>, tour: bool) -> Result<i32, Failure> {
    needs_terminal("the demo")?;
    let failed = |what: &str, e: std::io::Error| fail(format!("{what}: {e}"));
    let sandbox = match home {
        Some(h) => crate::demo::Sandbox::at(h).map_err(|e| failed("cannot use the demo home", e))?,
        None => crate::demo::Sandbox::create_temp().map_err(|e| failed("cannot create a sandbox", e))?,
    };
    let exe = std::env::current_exe().map_err(|e| failed("cannot find the leasectl binary", e))?;
    let reg = sandbox.registry();
    let opts = crate::tui::ConsoleOptions {
        locations: vec![Location::File(reg)],
        discover_root: None,
        discover_hosts: false,
        lock_timeout: Duration::from_secs(3),
        idle_threshold: None,
        extension: Some(crate::demo::console::extension(crate::demo::Playground::new(sandbox, exe), tour)),
    };
    crate::tui::run(opts).map_err(|e| fail(format!("demo: {e}")))?;
    Ok(EXIT_OK)
}
