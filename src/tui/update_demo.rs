//! `update` for the demo: playground keys, its forms, and playground results.

use ratatui::crossterm::event::{KeyCode, KeyEvent};

use super::event::{DemoDone, Effect};
use super::state::{App, Field, Form, FormKind, LogLevel};
use crate::demo::tour;
use crate::demo::{Action, CorruptKind, OwnerChoice, Verdict};

const SURFACES: [&str; 5] = ["tui", "desktop", "cli", "gateway", "telegram"];

fn surfaces() -> Vec<String> {
    SURFACES.iter().map(|s| (*s).to_owned()).collect()
}

/// A playground key; `None` when the key is not the demo's (the console handles it).
pub fn on_demo_key(app: &mut App, key: &KeyEvent) -> Option<Vec<Effect>> {
    let selected_session = app.selected_lease().map(|l| l.entry.session_id().to_owned());
    let selected_pid = app.selected_lease().map(|l| l.entry.pid());
    let demo = app.demo.as_mut()?;
    if demo.form.is_some() {
        return Some(on_form_key(app, key));
    }
    let fresh = format!("S{}", demo.counter);
    let running: Vec<(u64, String)> = demo
        .owners
        .iter()
        .filter(|o| o.running)
        .map(|o| (o.pid, format!("pid {} ({} {})", o.pid, o.session, o.live_id)))
        .collect();
    let form = match key.code {
        KeyCode::Char('o') => Form {
            kind: FormKind::SpawnOwner,
            fields: vec![
                Field::text("session", fresh),
                Field::choice("surface", surfaces()),
                Field::text("live id", format!("tab-{}", demo.counter)),
                Field::choice("track liveness", vec!["no".into(), "yes".into()]),
            ],
            focus: 0,
            error: None,
        },
        KeyCode::Char('a') => {
            let mut owners = vec!["new owner process".to_owned()];
            owners.extend(running.iter().map(|(_, label)| label.clone()));
            let mut owner = Field::choice("owner", owners);
            // Default to the selected lease's owner, if it is one of ours: the same-writer case.
            if let Some(i) = running.iter().position(|(pid, _)| Some(*pid) == selected_pid) {
                owner.choice = i + 1;
            }
            let live = demo
                .owners
                .iter()
                .find(|o| Some(o.pid) == selected_pid)
                .map(|o| o.live_id.clone())
                .unwrap_or_else(|| format!("tab-{}", demo.counter));
            Form {
                kind: FormKind::TryAcquire,
                fields: vec![
                    Field::text("session", selected_session.unwrap_or(fresh)),
                    Field::choice("surface", surfaces()),
                    Field::text("live id", live),
                    Field::text("cap (empty: config)", ""),
                    owner,
                ],
                focus: 0,
                error: None,
            }
        }
        KeyCode::Char('c') => {
            Form { kind: FormKind::SetCap, fields: vec![Field::text("cap (empty: none)", "2")], focus: 0, error: None }
        }
        KeyCode::Char('C') => Form {
            kind: FormKind::Corrupt,
            fields: vec![Field::choice("kind", CorruptKind::ALL.iter().map(|k| k.label().to_owned()).collect())],
            focus: 0,
            error: None,
        },
        KeyCode::Char('K') => {
            let Some(pid) = selected_pid.filter(|p| running.iter().any(|(r, _)| r == p)) else {
                app.log(
                    "demo",
                    LogLevel::Warn,
                    "K kills the selected lease's owner, which must be a running demo owner",
                );
                return Some(vec![]);
            };
            return Some(vec![Effect::Demo(Action::KillOwner { owner: OwnerChoice::Existing(pid) })]);
        }
        KeyCode::Char('f') => {
            demo.counter += 1;
            return Some(vec![Effect::Demo(Action::FakeRecycled {
                session: format!("recycled-{}", demo.counter - 1),
            })]);
        }
        KeyCode::Char('R') => return Some(vec![Effect::Demo(Action::Repair)]),
        KeyCode::Char('t') => {
            let steps = tour::steps().len();
            if demo.next_step >= steps {
                app.log(
                    "demo",
                    LogLevel::Info,
                    "the tour is over; quit and run `leasectl demo --tour` for a fresh one",
                );
                return Some(vec![]);
            }
            demo.next_step += 1;
            return Some(vec![Effect::Tour(demo.next_step - 1)]);
        }
        _ => return None,
    };
    demo.form = Some(form);
    Some(vec![])
}

fn on_form_key(app: &mut App, key: &KeyEvent) -> Vec<Effect> {
    let Some(demo) = app.demo.as_mut() else { return vec![] };
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
                return vec![Effect::Demo(action)];
            }
            Err(e) => form.error = Some(e),
        },
        _ => {}
    }
    vec![]
}

/// The action a filled form asks for, or what is wrong with it.
fn submit(form: &Form, owners: &[crate::demo::OwnerView]) -> Result<Action, String> {
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
pub fn on_demo_done(app: &mut App, done: DemoDone) {
    for o in &done.outcomes {
        let (level, text) = match &o.verdict {
            Verdict::Granted { lease_id, replaced, pruned, .. } => {
                let mut t = format!("{} → GRANTED lease {}", o.action, &lease_id[..lease_id.len().min(8)]);
                if replaced.is_some() {
                    t.push_str(" (replaced its own entry)");
                }
                if *pruned > 0 {
                    t.push_str(&format!(" after pruning {pruned} dead owner(s)"));
                }
                (LogLevel::Change, t)
            }
            Verdict::Refused { reason, .. } => (LogLevel::Warn, format!("{} → REFUSED {}", o.action, reason.code())),
            Verdict::Done(what) => (LogLevel::Info, format!("{} → {what}", o.action)),
            Verdict::Failed(why) => (LogLevel::Warn, format!("{} → FAILED: {why}", o.action)),
        };
        app.log("demo", level, text);
    }
    if let Some(demo) = app.demo.as_mut() {
        demo.owners = done.owners;
        if let Some(last) = done.outcomes.last() {
            demo.last = Some(last.clone());
        }
        demo.tour_note = done.tour_step.map(|(_, title, why)| (title, why));
    }
}
