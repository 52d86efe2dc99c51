//! How the demo plugs into the console: its state as the console's extension, and
//! its playground as the runner of the jobs that state asks for.

use super::playground::Playground;
use super::state::{DemoDone, DemoJob, DemoState};
use super::tour;
use crate::tui::extension::{Extension, Job, JobDone, Runner};

/// The demo's extension and runner for a playground; `tour` starts the guided tour at once.
pub fn extension(playground: Playground, tour: bool) -> (Box<dyn Extension>, Box<dyn Runner>) {
    let mut state = DemoState::new(playground.sandbox.home().to_path_buf(), playground.sandbox.owned());
    state.start_tour = tour;
    (Box::new(state), Box::new(playground))
}

/// Playground actions and tour steps, run on the console's worker thread. Dropping the
/// playground kills its owners and removes a temp sandbox.
impl Runner for Playground {
    fn run(&mut self, job: &Job) -> Option<JobDone> {
        let others = if matches!(job.get::<DemoJob>(), Some(DemoJob::Tour(0))) { self.others_leases() } else { Ok(0) };
        let (actions, tour_step) = match job.get::<DemoJob>()? {
            DemoJob::Act(a) => (vec![a.clone()], None),
            // The tour's steps come out as they say only on a home of its own: another
            // owner's leases (a full cap, their sessions) would decide them instead.
            DemoJob::Tour(0) if others != Ok(0) => {
                let holds = match &others {
                    Ok(n) => {
                        format!("this one holds {} of other owners", crate::lease::human::plural(*n, "lease", "leases"))
                    }
                    Err(e) => format!("this one's registry cannot be read ({e})"),
                };
                let why = format!(
                    "the tour needs a home of its own: {holds}, which would decide its steps instead (a full cap, \
                     their sessions), and the tour sets a cap and corrupts the registry. Run `leasectl demo --tour` \
                     without --home for a fresh sandbox, or give --home an empty directory"
                );
                let outcome = super::playground::Outcome {
                    action: "start the guided tour".into(),
                    verdict: super::playground::Verdict::Failed(why),
                };
                return Some(JobDone(Box::new(DemoDone {
                    outcomes: vec![outcome],
                    owners: self.owners(),
                    tour_step: None,
                })));
            }
            DemoJob::Tour(i) => {
                let steps = tour::steps();
                let step = steps.get(*i)?;
                (step.actions.clone(), Some((*i, step.title.to_owned(), step.why.to_owned())))
            }
        };
        let outcomes = actions.iter().map(|a| Playground::run(self, a)).collect();
        Some(JobDone(Box::new(DemoDone { outcomes, owners: self.owners(), tour_step })))
    }
}
