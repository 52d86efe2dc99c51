//! `prune`: remove the leases of dead and recycled owners.

use super::json::RegistryOutcome;
use super::recap::Outcome;
use super::{EXIT_OK, Failure, output, print_json_streamed};
use crate::lease::{self, LeaseStore, Location};

pub(super) fn prune(
    stores: &mut [Box<dyn LeaseStore>],
    opts: lease::PruneOptions,
    as_json: bool,
) -> Result<i32, Failure> {
    // For `--json`: each registry's removal (or error), written once all are in.
    let mut results: Vec<(Location, Result<lease::Removal, String>)> = Vec::new();
    let mut failed = None;
    let mut outcomes = Vec::new();
    for store in stores {
        let location = store.location().clone();
        match store.prune(opts) {
            Ok(r) => {
                outcomes.push((location.clone(), Outcome::Removed { count: r.removed.len(), dry_run: r.dry_run }));
                if as_json {
                    results.push((location, Ok(r)));
                } else {
                    output::print_removal(&location, &r, "prune");
                    if let Some(note) = super::container::prune_note(&r.removed) {
                        say!("{note}");
                    }
                }
            }
            Err(e) => {
                let outcome = if e.unanswered() { Outcome::NotReached } else { Outcome::Refused };
                outcomes.push((location.clone(), outcome(e.to_string())));
                // A registry file's path is on this line already; a host's is not.
                let beside = if location.registry().is_some() { e.beside_path() } else { e.to_string() };
                let f = Failure::from(e);
                if !as_json {
                    say_err!("leasectl: {} ({}): {beside}", location.label(), location.describe());
                }
                results.push((location, Err(f.message)));
                failed = Some(f.code);
            }
        }
    }
    if as_json {
        // Streamed, lease by lease: built whole first, 15,000 removed leases took 112 MB.
        let registries: Vec<RegistryOutcome> = results
            .iter()
            .map(|(location, r)| match r {
                Ok(r) => RegistryOutcome::Removal(location, r),
                Err(message) => RegistryOutcome::Failed(super::json::failed(location, message)),
            })
            .collect();
        print_json_streamed(&super::json::Registries { registries: &registries, not_reached: None });
    } else {
        super::recap::print("prune", &outcomes);
    }
    Ok(failed.unwrap_or(EXIT_OK))
}
