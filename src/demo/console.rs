//! How the demo plugs into the console: its state as the console's extension, and
//! its playground as the runner of the jobs that state asks for.

use super::panel::{DemoDone, DemoJob, DemoState};
use super::playground::Playground;
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
        let (actions, tour_step) = match job.get::<DemoJob>()? {
            DemoJob::Act(a) => (vec![a.clone()], None),
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
