//! `force-release`: an operator takes leases away, one registry or all of them.

use super::args::ForceReleaseArgs;
use super::recap::Outcome;
use super::release::{Named, ambiguous, name_lease};
use super::{EXIT_OK, Failure, fail, output, print_json, usage};
use crate::lease::{self, Error, ForceOptions, LeaseStore, Location, Target};

pub(super) fn force_release(
    store: &mut dyn LeaseStore,
    a: &ForceReleaseArgs,
    elsewhere: &[Location],
    hints: &super::hints::Hints,
) -> Result<i32, Failure> {
    let target = match (&a.lease_id, &a.session) {
        (Some(typed), None) => match name_lease(store, typed, elsewhere, "force-release", &a.options(), hints)? {
            Named::Id(id) => Target::Lease(id),
            Named::Nowhere => Target::Lease(typed.clone()),
        },
        (None, Some(s)) => Target::Session(s.clone()),
        _ => return Err(usage("give either LEASE_ID or --session S")),
    };
    let r = match store.force_release(&target, ForceOptions { allow_live: a.live, dry_run: a.dry_run }) {
        Ok(r) => r,
        Err(e @ lease::Error::LiveOwner(_)) => {
            use crate::lease::owners::kind::OwnerKind;
            let advice = super::owner_moves::advice_for(store, &target);
            let f = match advice {
                // Stopping serves one session's owner; for a gateway or an app it ends every
                // session it serves, so its own safe move is said instead.
                Some((m, said)) if matches!(m.kind, OwnerKind::Gateway { .. } | OwnerKind::AppBackend { .. }) => {
                    let mut f = Failure::from(e);
                    let anyway = match &target {
                        Target::Lease(id) => lease::words::hint::command(&["force-release", id, "--live"]),
                        Target::Session(s) => lease::words::hint::command(&["force-release", "--session", s, "--live"]),
                        Target::Stopped(ids) => {
                            let mut args = vec!["force-release"];
                            args.extend(ids.iter().map(String::as_str).take(1));
                            args.push("--live");
                            lease::words::hint::command(&args)
                        }
                    };
                    f.message = format!("{} {said} To remove the lease anyway, knowing that: {anyway}.", f.message);
                    f
                }
                _ => with_override(e, &target),
            };
            return Err(f);
        }
        Err(e) => return Err(with_override(e, &target)),
    };
    report_force_release(store.location(), &r, a.json);
    Ok(EXIT_OK)
}

/// A live owner's refusal, with the command that overrides it (on the operator's word)
/// as the last thing said: the one hint that was a flag to add ("Pass --live").
fn with_override(e: lease::Error, target: &Target) -> Failure {
    let live = matches!(e, lease::Error::LiveOwner(_));
    let mut f = Failure::from(e);
    if live {
        let (command, stop) = match target {
            Target::Lease(id) => (
                lease::words::hint::command(&["force-release", id, "--live"]),
                lease::words::hint::command(&["stop", id]),
            ),
            Target::Session(s) => (
                lease::words::hint::command(&["force-release", "--session", s, "--live"]),
                lease::words::hint::command(&["stop", "--session", s]),
            ),
            // Never named on the command line: a stop's own removal.
            Target::Stopped(ids) => {
                let id = ids.first().map(String::as_str).unwrap_or_default();
                (
                    lease::words::hint::command(&["force-release", id, "--live"]),
                    lease::words::hint::command(&["stop", id]),
                )
            }
        };
        f.message = format!(
            "{} To end the owner first, then free its slot (the safe way): {stop}. To remove the lease and leave the \
             owner running anyway, knowing that: {command}.",
            f.message
        );
    }
    f
}

pub(super) fn report_force_release(location: &Location, r: &lease::Removal, as_json: bool) {
    if r.live_owner {
        say_err!("{}", output::live_owner_warning(location, r));
    }
    for id in &r.gateway_leftovers {
        say_err!(
            "leasectl: lease {} was a gateway's leftover: no turn runs for its chat (state.db), and the gateway's next \
             turn for it asks the fence again",
            output::short_id(id)
        );
    }
    if as_json {
        super::print_json_streamed(&super::json::RegistryOutcome::Removal(location, r));
    } else {
        output::print_removal(location, r, "force-release");
    }
}

/// `force-release --all-profiles`: a lease id is looked for in every registry and acted
/// on where it is; a session's leases are released in every registry that has them.
pub(super) fn force_release_everywhere(
    stores: &mut [Box<dyn LeaseStore>],
    a: &ForceReleaseArgs,
) -> Result<i32, Failure> {
    if let Some(typed) = &a.lease_id {
        return release_id_everywhere(stores, typed, a);
    }
    let Some(session) = &a.session else { return Err(usage("give either LEASE_ID or --session S")) };
    release_session_everywhere(stores, session, a)
}

/// A lease id (or its prefix) looked for in every registry and released where it is.
fn release_id_everywhere(
    stores: &mut [Box<dyn LeaseStore>],
    typed: &str,
    a: &ForceReleaseArgs,
) -> Result<i32, Failure> {
    use lease::address::lookup::{Lookup, lookup};
    let mut hits = Vec::new();
    // Registries that could not be read (a host not reached): not searched, and said.
    let mut unread: Vec<String> = Vec::new();
    for (i, store) in stores.iter_mut().enumerate() {
        let views = match store.read().leases {
            Ok(views) => views,
            Err(e) => {
                unread.push(format!("{} ({e})", store.location().label()));
                continue;
            }
        };
        match lookup(&views, typed) {
            Lookup::Found(id) => hits.push((i, id)),
            Lookup::Ambiguous(c) => return Err(ambiguous(typed, store.location(), &c)),
            Lookup::Missing => {}
        }
    }
    match hits.as_slice() {
        [] if !unread.is_empty() => Err(Failure {
            code: lease::Reason::SessionCoordinationUnavailable.exit_code(),
            message: format!(
                "no lease {typed} in the {} registries read; not searched: {}",
                stores.len() - unread.len(),
                unread.join("; ")
            ),
        }),
        [] => Err(fail(format!(
            "no lease {typed} in any of {} registries (the root and every profile{}){}",
            stores.len(),
            if stores.iter().any(|s| s.location().host().is_some()) { " of every host" } else { "" },
            lease::address::lookup::too_short(typed)
        ))),
        [(i, id)] => {
            let store = &mut stores[*i];
            let target = Target::Lease(id.clone());
            let r = store
                .force_release(&target, ForceOptions { allow_live: a.live, dry_run: a.dry_run })
                .map_err(|e| at_host(store.location(), with_override(e, &target)))?;
            report_force_release(store.location(), &r, a.json);
            Ok(EXIT_OK)
        }
        many => {
            let places: Vec<String> = many.iter().map(|(i, _)| stores[*i].location().label()).collect();
            let on_hosts = many.iter().any(|(i, _)| stores[*i].location().host().is_some());
            if !on_hosts {
                return Err(usage(format!(
                    "lease id {typed} is in several registries ({}): name one with --profile",
                    places.join(", ")
                )));
            }
            // A profile alone cannot choose a host: each place with the words that reach it.
            let mut options = a.options();
            options.insert(0, String::new());
            let commands: Vec<String> = many
                .iter()
                .map(|(i, id)| {
                    let location = stores[*i].location();
                    options[0].clone_from(id);
                    let mut words = vec!["force-release"];
                    words.extend(options.iter().map(String::as_str));
                    format!("{}: `{}`", location.label(), lease::words::hint::Reach::of(location).line(None, &words))
                })
                .collect();
            Err(usage(format!("lease id {typed} is in several registries; name one: {}", commands.join("; "))))
        }
    }
}

/// A refusal from one registry among several hosts': said with the host and profile it
/// came from, its hints reaching that registry (not every host of the command line).
fn at_host(location: &Location, f: Failure) -> Failure {
    if location.host().is_none() || f.message.is_empty() {
        return f;
    }
    let message = lease::words::hint::hinted(location, &f.message);
    Failure { code: f.code, message: format!("{}: {message}", location.label()) }
}

/// A host not reached (--host): said once, and true, so the caller leaves it out.
fn not_reached(store: &dyn LeaseStore, e: &Error, unreached: &mut Vec<String>) -> bool {
    let host_down = matches!(e, Error::Unreachable { .. } | Error::Connecting { .. });
    if host_down && !unreached.contains(&store.location().label()) {
        say_err!("leasectl: {}: not reached, its leases are as they were: {e}", store.location().label());
        unreached.push(store.location().label());
    }
    host_down
}

/// A session's leases released in every registry that has them.
fn release_session_everywhere(
    stores: &mut [Box<dyn LeaseStore>],
    session: &str,
    a: &ForceReleaseArgs,
) -> Result<i32, Failure> {
    let target = Target::Session(session.to_owned());
    // A host not reached (--host) is left out and said; every other registry is acted on
    // with its own guards, and the exit says not everything was reached.
    let mut unreached: Vec<String> = Vec::new();
    let mut outcomes: Vec<(Location, Outcome)> = Vec::new();
    // All or nothing: a live owner in one registry stops the release in every one.
    if !a.live && !a.dry_run {
        for store in stores.iter_mut() {
            match store.force_release(&target, ForceOptions { allow_live: false, dry_run: true }) {
                Ok(plan) if !plan.needs_live.is_empty() => {
                    store
                        .force_release(&target, ForceOptions::default())
                        .map_err(|e| at_host(store.location(), with_override(e, &target)))?;
                }
                Ok(_) | Err(Error::NotFound(_)) => {}
                Err(e) if not_reached(&**store, &e, &mut unreached) => {
                    outcomes.push((store.location().clone(), Outcome::NotReached(e.to_string())));
                }
                Err(e) => return Err(at_host(store.location(), with_override(e, &target))),
            }
        }
    }
    let mut results = Vec::new();
    for store in stores.iter_mut() {
        if unreached.contains(&store.location().label()) {
            continue;
        }
        match store.force_release(&target, ForceOptions { allow_live: a.live, dry_run: a.dry_run }) {
            Ok(r) => {
                outcomes
                    .push((store.location().clone(), Outcome::Removed { count: r.removed.len(), dry_run: r.dry_run }));
                if !a.json {
                    report_force_release(store.location(), &r, false);
                } else {
                    if r.live_owner {
                        say_err!("{}", output::live_owner_warning(store.location(), &r));
                    }
                }
                results.push(super::json::removal(store.location(), &r));
            }
            Err(Error::NotFound(_)) => {
                outcomes.push((store.location().clone(), Outcome::Removed { count: 0, dry_run: a.dry_run }));
            }
            Err(e) if not_reached(&**store, &e, &mut unreached) => {
                outcomes.push((store.location().clone(), Outcome::NotReached(e.to_string())));
            }
            Err(e) => return Err(at_host(store.location(), with_override(e, &target))),
        }
    }
    if !a.json {
        super::recap::print("force-release", &outcomes);
    }
    let unavailable = lease::Reason::SessionCoordinationUnavailable.exit_code();
    if results.is_empty() {
        let searched = stores.len() - unreached.len();
        return Err(match unreached.is_empty() {
            true => fail(format!("no lease holds session {session} in any of {} registries", stores.len())),
            false => Failure {
                code: unavailable,
                message: format!(
                    "no lease holds session {session} in the {searched} registries reached; not reached: {}",
                    unreached.join(", ")
                ),
            },
        });
    }
    if a.json {
        let shape = super::json::Registries { registries: &results, not_reached: Some(&unreached) };
        print_json(&super::json::value(&shape));
    }
    Ok(if unreached.is_empty() { EXIT_OK } else { unavailable })
}
