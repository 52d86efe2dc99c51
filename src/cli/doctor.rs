//! `doctor`: what is wrong in each registry, and `doctor --repair`.

use serde_json::Value;

use super::{EXIT_ERROR, EXIT_OK, Failure, fail, output, print_json};
use crate::lease::words::human::plural;
use crate::lease::{self, Error, LeaseStore};

pub(super) fn doctor(
    stores: &mut [Box<dyn LeaseStore>],
    as_json: bool,
    hints: &super::hints::Hints,
) -> Result<i32, Failure> {
    if stores.iter().any(|s| s.location().host().is_some()) {
        return doctor_hosts(stores, as_json);
    }
    let reports = stores.iter_mut().map(|s| s.doctor()).collect::<Result<Vec<lease::DoctorReport>, Error>>()?;
    let bad = reports.iter().any(lease::DoctorReport::has_problems);
    let summary = output::DoctorSummary::of(&reports);
    if as_json {
        // Written as it is built: the stale leases of 50,000 are never one JSON tree.
        let registries: Vec<super::json::DoctorRegistry> = reports.iter().map(super::json::doctor_registry).collect();
        super::print_json_streamed(&super::json::Doctored {
            ok: !bad,
            registries: &registries,
            summary: super::json::value(&summary),
        });
    } else {
        for (i, d) in reports.iter().enumerate() {
            if i > 0 {
                say!();
            }
            output::doctor_text(d, hints, &mut output::StdoutText::new());
        }
        say!("\n{}", summary.line());
    }
    Ok(if bad { EXIT_ERROR } else { EXIT_OK })
}

/// Doctor over `--host`: each registry checked where it is and named with its host; a
/// host that cannot be reached is said and the others are checked all the same.
fn doctor_hosts(stores: &mut [Box<dyn LeaseStore>], as_json: bool) -> Result<i32, Failure> {
    let results: Vec<(lease::Location, Result<lease::DoctorReport, Error>)> =
        stores.iter_mut().map(|s| (s.location().clone(), s.doctor())).collect();
    let reports: Vec<lease::DoctorReport> = results.iter().filter_map(|(_, r)| r.as_ref().ok().cloned()).collect();
    let unchecked = results.iter().filter(|(_, r)| r.is_err()).count();
    let bad = unchecked > 0 || reports.iter().any(lease::DoctorReport::has_problems);
    let summary = output::DoctorSummary::of(&reports);
    if as_json {
        let registries: Vec<Value> = results
            .iter()
            .map(|(location, r)| {
                let mut v = match r {
                    Ok(d) => super::json::doctor(d),
                    Err(e) => super::json::failed(location, &e.to_string()),
                };
                v["host"] = location.host().map(|h| h.name.clone()).into();
                v
            })
            .collect();
        let mut summary = super::json::value(&summary);
        summary["unchecked"] = unchecked.into();
        print_json(&super::json::value(&super::json::Doctored { ok: !bad, registries: &registries, summary }));
    } else {
        for (i, (location, r)) in results.iter().enumerate() {
            if i > 0 {
                say!();
            }
            match r {
                Ok(d) => {
                    say!("{}:", location.label());
                    output::doctor_text(d, &super::hints::Hints::at(location), &mut output::StdoutText::new());
                }
                Err(e) => say!("{} ({}): cannot check: {e}", location.label(), location.describe()),
            }
        }
        let unchecked = match unchecked {
            0 => String::new(),
            n => format!("; {} could not be checked", crate::lease::words::human::plural(n, "registry", "registries")),
        };
        say!("\n{}{unchecked}", summary.line());
    }
    Ok(if bad { EXIT_ERROR } else { EXIT_OK })
}

pub(super) fn repair(
    stores: &mut [Box<dyn LeaseStore>],
    yes: bool,
    force: bool,
    as_json: bool,
) -> Result<i32, Failure> {
    use lease::doctor::repair::RepairOptions;
    use std::io::{BufRead, IsTerminal, Write};
    let mut results = Vec::new();
    for store in stores {
        let (name, place) = (store.location().name().to_owned(), store.location().describe());
        let unchanged = || super::json::repaired(&name, &place, None);
        let plan = store.repair(RepairOptions { dry_run: true, force })?;
        if !plan.needed {
            if !as_json {
                say!("{name} ({place}): valid, nothing to repair");
            }
            results.push(unchanged());
            continue;
        }
        if !as_json {
            if plan.invalid {
                say_raw!("{}", output::repair_text(store.location(), &plan.plan, force));
            } else {
                say!("{name} ({place}): valid");
            }
            for t in &plan.temp_files {
                say!(
                    "  remove a crashed writer's temp file: {}",
                    lease::words::human::escape(&t.display().to_string())
                );
            }
        }
        let risks = plan.plan.live_risks();
        if !risks.is_empty() && !force {
            return Err(fail(format!(
                "not repairing {place}: it would lose leases whose owners may be alive ({}). A live owner keeps \
                 writing its session; losing its lease lets a second writer in. To repair anyway, knowing that: \
                 `leasectl doctor --repair --force`.",
                lease::words::human::escape(&risks.join("; "))
            )));
        }
        if !yes {
            if !std::io::stdin().is_terminal() {
                return Err(fail("not repairing without confirmation: pass --yes"));
            }
            say_raw!("Repair {place}? [y/N] ");
            let _ = std::io::stdout().flush();
            let mut answer = String::new();
            let _ = std::io::stdin().lock().read_line(&mut answer);
            if !matches!(answer.trim(), "y" | "Y" | "yes") {
                say!("not repaired");
                results.push(unchanged());
                continue;
            }
        }
        let done = store.repair(RepairOptions { dry_run: false, force })?;
        let backup = done.backup.as_ref().map(|b| b.display().to_string());
        if !as_json {
            if done.invalid {
                say!(
                    "repaired: kept {}; old bytes saved as {}",
                    plural(done.plan.kept.len(), "lease", "leases"),
                    backup.clone().unwrap_or_default()
                );
            }
            if !done.temp_files.is_empty() {
                say!("removed {}", plural(done.temp_files.len(), "leftover temp file", "leftover temp files"));
            }
        }
        // Whole entries kept here (the audit keeps their ids).
        results.push(super::json::repaired(&name, &place, Some(&done)));
    }
    if as_json {
        print_json(&super::json::value(&super::json::Registries { registries: &results, not_reached: None }));
    }
    Ok(EXIT_OK)
}
