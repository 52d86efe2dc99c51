//! `force-release`: an operator takes leases away, one registry or all of them.

use serde_json::json;

use super::args::ForceReleaseArgs;
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
    let r = store.force_release(&target, ForceOptions { allow_live: a.live, dry_run: a.dry_run })?;
    report_force_release(store.location(), &r, a.json);
    Ok(EXIT_OK)
}

pub(super) fn report_force_release(location: &Location, r: &lease::Removal, as_json: bool) {
    if r.live_owner {
        say_err!("{}", output::live_owner_warning(location, r));
    }
    if as_json {
        print_json(&output::removal_json(location, r));
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
    use lease::lookup::{Lookup, lookup};
    if let Some(typed) = &a.lease_id {
        let mut hits = Vec::new();
        for (i, store) in stores.iter_mut().enumerate() {
            let Ok(views) = store.read().leases else { continue };
            match lookup(&views, typed) {
                Lookup::Found(id) => hits.push((i, id)),
                Lookup::Ambiguous(c) => return Err(ambiguous(typed, store.location(), &c)),
                Lookup::Missing => {}
            }
        }
        return match hits.as_slice() {
            [] => Err(fail(format!(
                "no lease {typed} in any of {} registries (the root and every profile)",
                stores.len()
            ))),
            [(i, id)] => {
                let store = &mut stores[*i];
                let r = store.force_release(
                    &Target::Lease(id.clone()),
                    ForceOptions { allow_live: a.live, dry_run: a.dry_run },
                )?;
                report_force_release(store.location(), &r, a.json);
                Ok(EXIT_OK)
            }
            many => {
                let places: Vec<&str> = many.iter().map(|(i, _)| stores[*i].location().name()).collect();
                Err(usage(format!(
                    "lease id {typed} is in several registries ({}): name one with --profile",
                    places.join(", ")
                )))
            }
        };
    }
    let Some(session) = &a.session else { return Err(usage("give either LEASE_ID or --session S")) };
    let target = Target::Session(session.clone());
    // All or nothing: a live owner in one registry stops the release in every one.
    if !a.live && !a.dry_run {
        for store in stores.iter_mut() {
            match store.force_release(&target, ForceOptions { allow_live: false, dry_run: true }) {
                Ok(plan) if !plan.needs_live.is_empty() => {
                    store.force_release(&target, ForceOptions::default())?;
                }
                Ok(_) | Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    let mut results = Vec::new();
    for store in stores.iter_mut() {
        match store.force_release(&target, ForceOptions { allow_live: a.live, dry_run: a.dry_run }) {
            Ok(r) => {
                if !a.json {
                    report_force_release(store.location(), &r, false);
                } else {
                    if r.live_owner {
                        say_err!("{}", output::live_owner_warning(store.location(), &r));
                    }
                }
                results.push(output::removal_json(store.location(), &r));
            }
            Err(Error::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if results.is_empty() {
        return Err(fail(format!("no lease holds session {session} in any of {} registries", stores.len())));
    }
    if a.json {
        print_json(&json!({ "registries": results }));
    }
    Ok(EXIT_OK)
}
