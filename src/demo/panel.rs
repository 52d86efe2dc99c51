//! The demo's part of the console: how keys and playground results change its state
//! (`state`). Plugs into the console as an extension; rendering is in `view`.

use std::any::Any;

use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;

use super::keys::{DEMO_KEYS, DemoKey};
use super::playground::{Action, CorruptKind, OwnerChoice, OwnerView, Verdict};
use super::state::{DemoDone, DemoJob, DemoState, Field, Form, FormKind};
use super::tour;
use crate::tui::extension::{Binding, Extension, Job, JobDone, KeyContext, KeyRow, LogLevel, Reaction, lookup};

const SURFACES: [&str; 5] = ["tui", "desktop", "cli", "gateway", "telegram"];

fn surfaces() -> Vec<String> {
    SURFACES.iter().map(|s| (*s).to_owned()).collect()
}

impl DemoState {
    /// A playground key; `None` when the key is not the demo's (the console handles it).
    fn on_demo_key(&mut self, key: &KeyEvent, context: &KeyContext) -> Option<Reaction> {
        if self.form.is_some() {
            return Some(Reaction { jobs: self.on_form_key(key), log: vec![] });
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

    fn next_tour_step(&mut self) -> Reaction {
        if self.next_step >= tour::steps().len() {
            let why = "the tour is over; quit and run `leasectl demo --tour` for a fresh one";
            return Reaction { jobs: vec![], log: vec![(LogLevel::Info, why.into())] };
        }
        self.next_step += 1;
        Reaction { jobs: vec![Job::new(DemoJob::Tour(self.next_step - 1))], log: vec![] }
    }

    fn on_form_key(&mut self, key: &KeyEvent) -> Vec<Job> {
        let demo = self;
        let Some(form) = demo.form.as_mut() else { return vec![] };
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
                    return vec![Job::new(DemoJob::Act(action))];
                }
                Err(e) => form.error = Some(e),
            },
            _ => {}
        }
        vec![]
    }
}

/// A job for one playground action.
fn act(action: Action) -> Reaction {
    Reaction { jobs: vec![Job::new(DemoJob::Act(action))], log: vec![] }
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

/// Playground results: the result panel, the owners, the log.
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
                        crate::lease::human::plural(*pruned, "dead owner", "dead owners")
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
    if let Some(last) = done.outcomes.last() {
        demo.last = Some(last.clone());
    }
    demo.tour_note = done.tour_step.map(|(_, title, why)| (title, why));
    log
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
        self.next_step = 1;
        vec![Job::new(DemoJob::Tour(0))]
    }

    fn on_done(&mut self, done: JobDone) -> Vec<(LogLevel, String)> {
        match done.0.downcast::<DemoDone>() {
            Ok(done) => on_demo_done(self, *done),
            Err(_) => vec![],
        }
    }

    /// 18 rows: every tour step's reason and advice fit at 120 columns; a taller terminal
    /// gives its rows to the table, which holds the leases being talked about.
    fn panel_height(&self, screen_height: u16) -> u16 {
        if screen_height >= 36 { 18 } else { 12 }
    }

    /// The playground, its result, the table and the event log: below this a refusal's
    /// advice is cut off, or the event log gives way (at 30 rows it did).
    fn min_size(&self) -> (u16, u16) {
        (120, 36)
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

    fn box_clone(&self) -> Box<dyn Extension> {
        Box::new(self.clone())
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
