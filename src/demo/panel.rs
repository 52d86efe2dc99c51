//! The demo's part of the console: how keys and playground results change its state
//! (`state`). Plugs into the console as an extension; rendering is in `view`.

use std::any::Any;

use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;

use super::keys::{DEMO_KEYS, DemoKey};
use super::playground::{Action, CorruptKind, OwnerChoice, OwnerView, Verdict};
use super::state::{DemoDone, DemoJob, DemoState, Field, Form, FormKind, OwnersExited, TourNote};
use super::tour::{self, Beat};
use crate::tui::extension::{
    Binding, Extension, Job, JobDone, KeyContext, KeyRow, LogLevel, PanelRows, Reaction, lookup,
};

const SURFACES: [&str; 5] = ["tui", "desktop", "cli", "gateway", "telegram"];

fn surfaces() -> Vec<String> {
    SURFACES.iter().map(|s| (*s).to_owned()).collect()
}

impl DemoState {
    /// A playground key; `None` when the key is not the demo's (the console handles it).
    fn on_demo_key(&mut self, key: &KeyEvent, context: &KeyContext) -> Option<Reaction> {
        if self.form.is_some() {
            return Some(self.on_form_key(key));
        }
        let selected_pid = context.selected.map(|l| l.entry.pid());
        let form = match lookup(DEMO_KEYS, key)? {
            DemoKey::SpawnOwner => self.spawn_form(),
            DemoKey::TryAcquire => self.acquire_form(context),
            DemoKey::SetCap => Form::new(FormKind::SetCap, vec![Field::text("cap (empty: none)", "2")]),
            DemoKey::Corrupt => Form::new(
                FormKind::Corrupt,
                vec![Field::choice("kind", CorruptKind::ALL.iter().map(|k| k.label().to_owned()).collect())],
            ),
            DemoKey::KillOwner => {
                let Some(pid) = selected_pid.filter(|p| self.running().iter().any(|(r, _)| r == p)) else {
                    let why = "K kills the selected lease's owner, which must be a running demo owner";
                    return Some(Reaction { jobs: vec![], log: vec![(LogLevel::Warn, why.into())] });
                };
                return Some(act(Action::KillOwner { owner: OwnerChoice::Existing(pid) }));
            }
            DemoKey::FakeRecycled => {
                self.counter += 1;
                return Some(act(Action::FakeRecycled { session: format!("recycled-{}", self.counter - 1) }));
            }
            DemoKey::Repair => return Some(act(Action::Repair)),
            DemoKey::Tour => return Some(self.next_tour_step()),
            DemoKey::ResultDown | DemoKey::ResultUp => {
                // Bounded by what is out of view at the panel's size now (the view clamps too).
                // A page at a time, keeping one line of the last page in view.
                let hidden = super::view::result_hidden(self, context.panel);
                let page = context.panel.height.saturating_sub(3).max(1);
                self.scroll = match lookup(DEMO_KEYS, key) {
                    Some(DemoKey::ResultDown) => self.scroll.saturating_add(page).min(hidden),
                    _ => self.scroll.min(hidden).saturating_sub(page),
                };
                return Some(Reaction::default());
            }
        };
        self.form = Some(form);
        Some(Reaction::default())
    }

    /// The running demo owners, each with its label for a form's choice.
    fn running(&self) -> Vec<(u64, String)> {
        self.owners
            .iter()
            .filter(|o| o.running)
            .map(|o| (o.pid, format!("pid {} ({} {})", o.pid, o.session, o.live_id)))
            .collect()
    }

    fn spawn_form(&self) -> Form {
        Form::new(
            FormKind::SpawnOwner,
            vec![
                Field::text("session", format!("S{}", self.counter)),
                Field::choice("surface", surfaces()),
                Field::text("live id", format!("tab-{}", self.counter)),
                Field::choice("track liveness", vec!["no".into(), "yes".into()]),
            ],
        )
    }

    /// A try-acquire form, on the selected lease's session and owner when it is one of
    /// the demo's (the same-writer case).
    fn acquire_form(&self, context: &KeyContext) -> Form {
        let selected_pid = context.selected.map(|l| l.entry.pid());
        let running = self.running();
        let mut owners = vec!["new owner process".to_owned()];
        owners.extend(running.iter().map(|(_, label)| label.clone()));
        let mut owner = Field::choice("owner", owners);
        if let Some(i) = running.iter().position(|(pid, _)| Some(*pid) == selected_pid) {
            owner.choice = i + 1;
        }
        let live = self
            .owners
            .iter()
            .find(|o| Some(o.pid) == selected_pid)
            .map(|o| o.live_id.clone())
            .unwrap_or_else(|| format!("tab-{}", self.counter));
        let session = context.selected.map(|l| l.entry.session_id().to_owned()).unwrap_or(format!("S{}", self.counter));
        Form::new(
            FormKind::TryAcquire,
            vec![
                Field::text("session", session),
                Field::choice("surface", surfaces()),
                Field::text("live id", live),
                Field::text("cap (empty: config)", ""),
                owner,
            ],
        )
    }

    /// `t`: the next beat of the tour (its actions said in the log before they run), the
    /// ending after the last, and after the ending the tour again on a reset playground.
    fn next_tour_step(&mut self) -> Reaction {
        let beats = tour::beats();
        let (beat, reset_first) = match beats.get(self.next_beat) {
            Some(Beat::End) => {
                self.next_beat += 1;
                let at = crate::lease::Location::File(crate::lease::Registry::new("root", self.sandbox.clone()));
                self.tour_note = Some(TourNote {
                    beat: Beat::End,
                    title: "The end of the tour".into(),
                    why: String::new(),
                    shows: None,
                    summary: tour::summary(&at),
                    of: None,
                });
                self.last = None;
                self.scroll = 0;
                let line =
                    "tour: the end; the result panel sums up each reason and the command for it (t starts again)";
                return Reaction { jobs: vec![], log: vec![(LogLevel::Info, line.into())] };
            }
            Some(beat) => (*beat, false),
            None => (beats[0], true),
        };
        self.next_beat = beats.iter().position(|b| *b == beat).map_or(0, |i| i + 1);
        let mut log = Vec::new();
        if reset_first {
            log.push((LogLevel::Info, "tour: starting again; the playground is reset first".to_owned()));
        }
        log.push((LogLevel::Info, announce(beat)));
        Reaction { jobs: vec![Job::new(DemoJob::Tour { beat, reset_first })], log }
    }

    fn on_form_key(&mut self, key: &KeyEvent) -> Reaction {
        let demo = self;
        let Some(form) = demo.form.as_mut() else { return Reaction::default() };
        let n = form.fields.len();
        match key.code {
            KeyCode::Esc => demo.form = None,
            KeyCode::Tab | KeyCode::Down => form.focus = (form.focus + 1) % n,
            KeyCode::BackTab | KeyCode::Up => form.focus = (form.focus + n - 1) % n,
            KeyCode::Left | KeyCode::Right => {
                let f = &mut form.fields[form.focus];
                if !f.choices.is_empty() {
                    let m = f.choices.len();
                    f.choice = if key.code == KeyCode::Right { (f.choice + 1) % m } else { (f.choice + m - 1) % m };
                }
            }
            KeyCode::Backspace => {
                form.fields[form.focus].value.pop();
            }
            KeyCode::Char(c) => {
                let f = &mut form.fields[form.focus];
                if f.choices.is_empty() {
                    f.value.push(c);
                }
            }
            KeyCode::Enter => match submit(form, &demo.owners) {
                Ok(action) => {
                    demo.form = None;
                    demo.counter += 1;
                    return act(action);
                }
                Err(e) => form.error = Some(e),
            },
            _ => {}
        }
        Reaction::default()
    }
}

/// A job for one playground action, said in the log before it runs.
fn act(action: Action) -> Reaction {
    let said = (LogLevel::Info, format!("playground: {}", action.describe()));
    Reaction { jobs: vec![Job::new(DemoJob::Act(action))], log: vec![said] }
}

/// The log's line for a tour beat about to run: which beat, and what it will do.
fn announce(beat: Beat) -> String {
    let steps = tour::steps();
    let Some(step) = beat.step().and_then(|i| steps.get(i)) else { return "tour: the end".into() };
    let n = format!("{}/{}", beat.step().map_or(0, |i| i + 1), steps.len());
    let (what, actions) = match (beat, &step.scene) {
        (Beat::Scene(_), Some(scene)) => ("the scene", &scene.actions),
        (_, Some(_)) => ("the outcome", &step.actions),
        _ => ("", &step.actions),
    };
    let did: Vec<String> = actions.iter().map(Action::describe).collect();
    if what.is_empty() {
        format!("tour {n}: {}", did.join("; "))
    } else {
        format!("tour {n}, {what}: {}", did.join("; "))
    }
}

/// The action a filled form asks for, or what is wrong with it.
fn submit(form: &Form, owners: &[OwnerView]) -> Result<Action, String> {
    let get = |i: usize| form.fields.get(i).map(Field::get).unwrap_or_default().trim().to_owned();
    let cap = |text: String| -> Result<Option<u64>, String> {
        if text.is_empty() {
            return Ok(None);
        }
        text.parse::<u64>().map(Some).map_err(|_| format!("the cap must be a whole number, not {text:?}"))
    };
    match form.kind {
        FormKind::SpawnOwner => Ok(Action::SpawnOwner {
            session: get(0),
            surface: get(1),
            live_id: get(2),
            track_liveness: get(3) == "yes",
        }),
        FormKind::TryAcquire => {
            let choice = form.fields.get(4).map(|f| f.choice).unwrap_or(0);
            let running: Vec<u64> = owners.iter().filter(|o| o.running).map(|o| o.pid).collect();
            let owner = match choice {
                0 => OwnerChoice::New,
                i => OwnerChoice::Existing(*running.get(i - 1).ok_or("that owner is gone")?),
            };
            Ok(Action::TryAcquire { session: get(0), surface: get(1), live_id: get(2), cap: cap(get(3))?, owner })
        }
        FormKind::SetCap => Ok(Action::SetCap(cap(get(0))?.filter(|c| *c > 0))),
        FormKind::Corrupt => {
            let choice = form.fields.first().map(|f| f.choice).unwrap_or(0);
            Ok(Action::Corrupt(CorruptKind::ALL[choice.min(CorruptKind::ALL.len() - 1)]))
        }
    }
}

/// Playground results: the result panel, the owners, the log (what each action came to;
/// what it was is logged before it ran, what it changed as the registry was read).
fn on_demo_done(demo: &mut DemoState, done: DemoDone) -> Vec<(LogLevel, String)> {
    let mut log = Vec::new();
    for o in &done.outcomes {
        let (level, text) = match &o.verdict {
            Verdict::Granted { lease_id, replaced, pruned, .. } => {
                let mut t = format!("{} → GRANTED lease {}", o.action, &lease_id[..lease_id.len().min(8)]);
                if replaced.is_some() {
                    t.push_str(" (replaced its own entry)");
                }
                if *pruned > 0 {
                    t.push_str(&format!(
                        " after pruning {}",
                        crate::lease::words::human::plural(*pruned, "dead owner", "dead owners")
                    ));
                }
                (LogLevel::Change, t)
            }
            Verdict::Refused { reason, .. } => (LogLevel::Warn, format!("{} → REFUSED {}", o.action, reason.code())),
            Verdict::Done(what) => (LogLevel::Info, format!("{} → {what}", o.action)),
            Verdict::Failed(why) => (LogLevel::Warn, format!("{} → FAILED: {why}", o.action)),
        };
        log.push((level, text));
    }
    demo.owners = done.owners;
    // A scene's result is what it set up; a failure among its actions is what to show.
    let failed = done.outcomes.iter().find(|o| matches!(o.verdict, Verdict::Failed(_)));
    if let Some(shown) = failed.or(done.outcomes.last()) {
        demo.last = Some(shown.clone());
        demo.first = match failed {
            Some(_) => vec![],
            None => done.outcomes[..done.outcomes.len() - 1]
                .iter()
                .filter(|o| matches!(o.verdict, Verdict::Done(_)))
                .cloned()
                .collect(),
        };
        demo.focus = shown.lease.clone().or_else(|| done.outcomes.iter().rev().find_map(|o| o.lease.clone()));
    }
    demo.tour_note = done.tour;
    demo.scroll = 0;
    log
}

/// Owners that ended by themselves: shown gone in the playground, said in the log.
fn on_owners_exited(demo: &mut DemoState, news: OwnersExited) -> Vec<(LogLevel, String)> {
    demo.owners = news.owners;
    news.exited
        .iter()
        .map(|o| (LogLevel::Info, format!("owner pid {} ({} {}) exited: reaped", o.pid, o.session, o.live_id)))
        .collect()
}

impl Extension for DemoState {
    fn name(&self) -> &'static str {
        "demo"
    }

    fn help_title(&self) -> &'static str {
        "demo playground"
    }

    fn keys(&self) -> Vec<KeyRow> {
        DEMO_KEYS.iter().map(Binding::row).collect()
    }

    fn on_key(&mut self, key: &KeyEvent, context: &KeyContext) -> Option<Reaction> {
        self.on_demo_key(key, context)
    }

    fn start(&mut self) -> Vec<Job> {
        if !self.start_tour {
            return vec![];
        }
        let beats = tour::beats();
        self.next_beat = 1;
        vec![Job::new(DemoJob::Tour { beat: beats[0], reset_first: false })]
    }

    fn on_done(&mut self, done: JobDone) -> Vec<(LogLevel, String)> {
        match done.0.downcast::<DemoDone>() {
            Ok(done) => on_demo_done(self, *done),
            Err(other) => match other.downcast::<OwnersExited>() {
                Ok(news) => on_owners_exited(self, *news),
                Err(_) => vec![],
            },
        }
    }

    /// What the result fills (the playground's box beside it, on a wide screen); at least
    /// the title, the verdict and a few lines of why, the rest scrolled to with `}`.
    fn panel_rows(&self, width: u16, _height: u16) -> PanelRows {
        super::view::panel_rows(self, width)
    }

    /// Below this the table, the tour's title and verdict cannot all be shown.
    fn min_size(&self) -> (u16, u16) {
        super::view::MIN_SIZE
    }

    fn render_panel(&self, no_color: bool, frame: &mut Frame, area: Rect) {
        super::view::render_demo_panel(self, no_color, frame, area);
    }

    fn render_overlay(&self, no_color: bool, frame: &mut Frame, area: Rect) {
        if let Some(form) = &self.form {
            super::view::render_form(form, no_color, frame, area);
        }
    }

    fn has_overlay(&self) -> bool {
        self.form.is_some()
    }

    fn marked_lease(&self) -> Option<(&str, &'static str)> {
        self.blocking_lease().map(|id| (id, " ◀ blocking"))
    }

    fn focus_lease(&self) -> Option<&str> {
        self.focus.as_deref()
    }

    fn box_clone(&self) -> Box<dyn Extension> {
        Box::new(self.clone())
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
