//! The demo's state: its sandbox, owners, last result, tour step and open form, and
//! what it asks its runner to do and hears back.

use super::playground::{Action, Outcome, OwnerView, Verdict};
use super::tour::Beat;

/// The demo's part of the console: the playground, its owners and the last result.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoState {
    pub sandbox: std::path::PathBuf,
    /// True when the sandbox is a temp directory the demo removes on exit.
    pub owned: bool,
    pub owners: Vec<OwnerView>,
    /// The result panel: the last outcome.
    pub last: Option<Outcome>,
    /// What the same job's earlier actions did, said under it (the force-release or the
    /// stop before the acquire the tour's outcome shows).
    pub first: Vec<Outcome>,
    /// The tour beat shown, and the index (in `tour::beats()`) of the next one.
    pub tour_note: Option<TourNote>,
    pub next_beat: usize,
    /// Lines the result panel is scrolled down (back to 0 with each new result).
    pub scroll: u16,
    /// The lease the last result is about: the console selects it.
    pub focus: Option<String>,
    pub form: Option<Form>,
    /// Incremented for default session names (S1, S2, …).
    pub counter: usize,
    /// `leasectl demo --tour`: run the first step as soon as the console starts.
    pub start_tour: bool,
}

impl DemoState {
    pub fn new(sandbox: std::path::PathBuf, owned: bool) -> DemoState {
        DemoState {
            sandbox,
            owned,
            owners: vec![],
            last: None,
            first: vec![],
            tour_note: None,
            next_beat: 0,
            scroll: 0,
            focus: None,
            form: None,
            counter: 1,
            start_tour: false,
        }
    }

    /// The lease that blocked the last refused acquire, to highlight in the table.
    pub fn blocking_lease(&self) -> Option<&str> {
        match &self.last {
            Some(Outcome { verdict: Verdict::Refused { holder: Some(h), .. }, .. }) => Some(h.as_str()),
            _ => None,
        }
    }
}

/// What the result panel says of the tour beat shown.
#[derive(Debug, Clone, PartialEq)]
pub struct TourNote {
    pub beat: Beat,
    /// The step's title ("3/9 ..."), or the ending's.
    pub title: String,
    pub why: String,
    /// A scene's words: what to look at now, and what the next `t` does.
    pub shows: Option<String>,
    /// The ending's lines.
    pub summary: Vec<String>,
    /// Which beat of how many in its step, when the step has two.
    pub of: Option<(usize, usize)>,
}

/// What a demo form is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormKind {
    SpawnOwner,
    TryAcquire,
    SetCap,
    Corrupt,
}

impl FormKind {
    pub fn title(self) -> &'static str {
        match self {
            FormKind::SpawnOwner => "spawn an owner (a real leasectl hold process)",
            FormKind::TryAcquire => "try to acquire",
            FormKind::SetCap => "set or clear the cap (sandbox config.yaml)",
            FormKind::Corrupt => "corrupt the sandbox registry",
        }
    }
}

/// One field: free text, or a choice among `choices` (←/→ cycles).
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub label: &'static str,
    pub value: String,
    pub choices: Vec<String>,
    pub choice: usize,
}

impl Field {
    pub fn text(label: &'static str, value: impl Into<String>) -> Field {
        Field { label, value: value.into(), choices: vec![], choice: 0 }
    }
    pub fn choice(label: &'static str, choices: Vec<String>) -> Field {
        Field { label, value: String::new(), choices, choice: 0 }
    }
    /// The text, or the chosen option.
    pub fn get(&self) -> &str {
        if self.choices.is_empty() { &self.value } else { self.choices.get(self.choice).map_or("", String::as_str) }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Form {
    pub kind: FormKind,
    pub fields: Vec<Field>,
    pub focus: usize,
    /// Why the last submit was not accepted.
    pub error: Option<String>,
}

impl Form {
    /// A form with the focus on its first field and no error yet.
    pub fn new(kind: FormKind, fields: Vec<Field>) -> Form {
        Form { kind, fields, focus: 0, error: None }
    }
}

/// What the demo asks its runner to do: one playground action, or a tour beat (after
/// resetting the playground, when the tour starts again).
#[derive(Debug, Clone, PartialEq)]
pub enum DemoJob {
    Act(Action),
    Tour { beat: Beat, reset_first: bool },
}

/// Playground actions finished (in order), with the owners as they are now.
#[derive(Debug)]
pub struct DemoDone {
    pub outcomes: Vec<Outcome>,
    pub owners: Vec<OwnerView>,
    /// Set when these were a tour beat: what the result panel says of it.
    pub tour: Option<TourNote>,
}

/// Owner processes that ended on their own (their lease released or taken away),
/// reaped and reported without waiting for the next action.
#[derive(Debug)]
pub struct OwnersExited {
    pub exited: Vec<OwnerView>,
    pub owners: Vec<OwnerView>,
}
