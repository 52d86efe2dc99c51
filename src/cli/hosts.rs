//! `--host`, `--all-hosts` and `LEASECTL_HOSTS`: which registries on which hosts a
//! command acts on. Each host is asked for its profiles over its one session, all at
//! once, so a host that is slow to answer holds up no other.

use crate::lease::address::host_spec::{self as spec, HostSpec, HostTarget};
use crate::lease::{Location, home::paths};

use super::args::{Backend, Command, GlobalOptions};
use super::{Failure, Selection, fail, usage};

/// The commands that work across hosts (the others take or give back a lease, which
/// is done where its owner runs).
const HOST_COMMANDS: &str = "ls, events, metrics, doctor, prune, force-release, stop and the console";

/// The hosts named on this command line, else in `LEASECTL_HOSTS`; none: this machine.
pub(super) fn selected(global: &GlobalOptions) -> Result<Vec<HostSpec>, Failure> {
    // LEASECTL_HOSTS, as clap read it: one comma-separated value (a SPEC named with --host
    // is one SPEC, commas and all).
    let (given, env): (&[String], Option<&str>) = match global.hosts_from_env {
        true => (&[], global.hosts.first().map(String::as_str)),
        false => (&global.hosts, None),
    };
    let file = spec::hosts_file();
    let mut hosts = spec::select(given, env, global.all_hosts, file.as_deref()).map_err(usage)?;
    // `local` without a path is the home this command line names.
    for h in &mut hosts {
        if let HostTarget::Local { home: home @ None } = &mut h.target {
            *home = Some(paths::resolve_home(global.home.as_deref()).map_err(|m| fail(m.0))?);
        }
    }
    if !hosts.is_empty() {
        ssh_settings(global)?;
    }
    Ok(hosts)
}

/// `--connect-timeout` for every host of this run, and `LEASECTL_SSH_PERSIST` checked
/// before any host is reached (a typo there is said, not taken as "no sharing").
fn ssh_settings(global: &GlobalOptions) -> Result<(), Failure> {
    use crate::lease::ssh::options;
    if let Some(secs) = global.connect_timeout {
        options::set_connect_timeout(std::time::Duration::from_secs(secs));
    }
    options::share_for().map(|_| ()).map_err(usage)
}

/// The registry a SPEC's path stands for, as `--home` means it here: a path
/// `<root>/profiles/NAME` is that profile; anything else (or no path) the root.
fn named_registry(host: &HostSpec) -> String {
    let path = match &host.target {
        HostTarget::Ssh(t) => t.home.as_ref().map(std::path::PathBuf::from),
        HostTarget::Local { home } => home.clone(),
    };
    path.map_or_else(|| "root".to_owned(), |p| paths::registry_for_home(&p).profile.clone())
}

pub(super) fn select_locations(
    global: &GlobalOptions,
    command: &Command,
    implicit: bool,
    hosts: Vec<HostSpec>,
) -> Result<Selection, Failure> {
    if global.backend == Backend::Etcd {
        return Err(usage("--host reaches registry files on other hosts; etcd is reached with --endpoints"));
    }
    let what = match command {
        Command::Ls(_)
        | Command::Events(_)
        | Command::Metrics
        | Command::Prune(_)
        | Command::ForceRelease(_)
        | Command::Stop(_) => None,
        Command::Tui => None,
        Command::Doctor(a) if !a.repair => None,
        Command::Doctor(_) => Some("doctor --repair (run it on the host itself: it shows what it keeps, and asks)"),
        Command::Acquire(_) => Some("acquire"),
        Command::Release(_) => Some("release"),
        Command::Run(_) => Some("run"),
        Command::Hold(_) => Some("hold"),
        Command::Demo(_) => Some("demo"),
        Command::Completions(_) | Command::Complete(_) | Command::Man | Command::Serve(_) | Command::Install => None,
    };
    if let Some(what) = what {
        return Err(usage(format!(
            "{what} runs on the owner's host, not over --host; --host works with {HOST_COMMANDS}"
        )));
    }
    // The console opens on what each SPEC names and adds the rest as each host answers:
    // a slow host does not hold its first screen up.
    // So do the followers (ls -w, events -f): each host's registries are said as it answers.
    let follows = matches!(command, Command::Ls(a) if a.watch) || matches!(command, Command::Events(a) if a.follow);
    if matches!(command, Command::Tui) || follows {
        let locations = hosts
            .into_iter()
            .map(|host| {
                let profile = global.profile.clone().unwrap_or_else(|| named_registry(&host));
                Location::on_host(host, profile)
            })
            .collect();
        return Ok(Selection { locations, root: None });
    }
    // An id is looked for in every profile of every host, as `--all-profiles` does here.
    let by_id = matches!(command, Command::ForceRelease(a) if a.lease_id.is_some())
        || matches!(command, Command::Stop(a) if a.lease_id.is_some());
    let every_profile = global.all_profiles || ((implicit || by_id) && global.profile.is_none());
    // Each host's registries (every one, or the one its home names), asked of all hosts
    // at once.
    let answers: Vec<Option<Vec<String>>> = std::thread::scope(|scope| {
        let asks: Vec<_> =
            hosts.iter().map(|h| scope.spawn(move || crate::lease::host_registries(h, every_profile).ok())).collect();
        asks.into_iter().map(|a| a.join().ok().flatten()).collect()
    });
    let mut locations = Vec::new();
    for (host, profiles) in hosts.into_iter().zip(answers) {
        let names = match (&global.profile, profiles) {
            (Some(p), _) => vec![p.clone()],
            (None, Some(found)) if !found.is_empty() => found,
            // Not reached: listed (as unreachable) under its root.
            _ => vec!["root".to_owned()],
        };
        for profile in names {
            locations.push(Location::on_host(host.clone(), profile));
        }
    }
    Ok(Selection { locations, root: None })
}
