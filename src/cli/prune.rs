//! `prune`: remove the leases of dead and recycled owners.

use super::recap::Outcome;
use super::{EXIT_OK, Failure, output, print_json};
use crate::lease::{self, LeaseStore};

pub(super) fn prune(
    stores: &mut [Box<dyn LeaseStore>],
    opts: lease::PruneOptions,
    as_json: bool,
) -> Result<i32, Failure> {
    let mut results = Vec::new();
    let mut failed = None;
    let mut outcomes = Vec::new();
    for store in stores {
        let location = store.location().clone();
        match store.prune(opts) {
            Ok(r) => {
                if !as_json {
                    output::print_removal(&location, &r, "prune");
                }
                results.push(super::json::removal(&location, &r));
                outcomes.push((location, Outcome::Removed { count: r.removed.len(), dry_run: r.dry_run }));
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
                results.push(super::json::failed(&location, &f.message));
                failed = Some(f.code);
            }
        }
    }
    if as_json {
        print_json(&super::json::value(&super::json::Registries { registries: &results, not_reached: None }));
    } else {
        super::recap::print("prune", &outcomes);
    }
    Ok(failed.unwrap_or(EXIT_OK))
}
