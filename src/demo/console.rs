//! How the demo plugs into the console: its state as the console's extension, and
//! its playground as the runner of the jobs that state asks for.

use super::playground::Playground;
use super::state::{DemoDone, DemoJob, DemoState, OwnersExited, TourNote};
use super::tour;
use crate::tui::extension::{Extension, Job, JobDone, Runner};

/// The demo's extension and runner for a playground; `tour` starts the guided tour at once.
pub(crate) fn extension(playground: Playground, tour: bool) -> (Box<dyn Extension>, Box<dyn Runner>) {
    let mut state = DemoState::new(playground.sandbox.home().to_path_buf(), playground.sandbox.owned());
    state.start_tour = tour;
    (Box::new(state), Box::new(playground))
}

/// Playground actions and tour beats, run on the console's worker thread. Dropping the
/// playground kills its owners and removes a temp sandbox.
impl Runner for Playground {
    fn run(&mut self, job: &Job) -> Option<JobDone> {
        let (actions, tour) = match job.get::<DemoJob>()? {
            DemoJob::Act(a) => (vec![a.clone()], None),
            DemoJob::Tour { beat, reset_first } => {
                // The tour's steps come out as they say only on a home of its own: another
                // owner's leases (a full cap, their sessions) would decide them instead.
                if *beat == tour::Beat::Scene(0)
                    && !reset_first
                    && let Some(refusal) = self.not_a_tour_home()
                {
                    return Some(JobDone(Box::new(refusal)));
                }
                let mut actions = if *reset_first { vec![super::playground::Action::Reset] } else { vec![] };
                let note = self.note(*beat, &mut actions)?;
                (actions, Some(note))
            }
        };
        let outcomes = actions.iter().map(|a| Playground::run(self, a)).collect();
        Some(JobDone(Box::new(DemoDone { outcomes, owners: self.owners(), tour })))
    }

    /// Owners that ended by themselves are reaped and reported at once.
    fn poll(&mut self) -> Option<JobDone> {
        let (exited, owners) = self.newly_exited();
        if exited.is_empty() {
            return None;
        }
        Some(JobDone(Box::new(OwnersExited { exited, owners })))
    }
}

impl Playground {
    /// What the result panel says of `beat`, with the beat's actions added to `actions`.
    /// Hints in the words name the sandbox: pasted as shown, they act on it.
    fn note(&self, beat: tour::Beat, actions: &mut Vec<super::playground::Action>) -> Option<TourNote> {
        let steps = tour::steps();
        let index = beat.step()?;
        let step = steps.get(index)?;
        let at = crate::lease::Location::File(self.sandbox.registry());
        let hint = |text: &str| crate::lease::words::hint::hinted(&at, text);
        let two = step.scene.is_some();
        let (shows, of) = match (beat, &step.scene) {
            (tour::Beat::Scene(_), Some(scene)) => {
                actions.extend(scene.actions.iter().cloned());
                (Some(hint(scene.shows)), Some((1, 2)))
            }
            _ => {
                actions.extend(step.actions.iter().cloned());
                (None, two.then_some((2, 2)))
            }
        };
        Some(TourNote { beat, title: step.title.to_owned(), why: hint(step.why), shows, summary: vec![], of })
    }

    /// Why the tour cannot start on this home, when it holds other owners' leases.
    fn not_a_tour_home(&mut self) -> Option<DemoDone> {
        let others = self.others_leases();
        if others == Ok(0) {
            return None;
        }
        let holds = match &others {
            Ok(n) => {
                format!("this one holds {} of other owners", crate::lease::words::human::plural(*n, "lease", "leases"))
            }
            Err(e) => format!("this one's registry cannot be read ({e})"),
        };
        let why = format!(
            "the tour needs a home of its own: {holds}, which would decide its steps instead (a full cap, their \
             sessions), and the tour sets a cap and corrupts the registry. Run `leasectl demo --tour` without \
             --home for a fresh sandbox, or give --home an empty directory"
        );
        let outcome = super::playground::Outcome {
            action: "start the guided tour".into(),
            verdict: super::playground::Verdict::Failed(why),
            lease: None,
        };
        Some(DemoDone { outcomes: vec![outcome], owners: self.owners(), tour: None })
    }
}
