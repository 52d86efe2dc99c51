//! The demo's state: its sandbox, owners, last result, tour step and open form, and
//! what it asks its runner to do and hears back.

use super::playground::{Action, Outcome, OwnerView, Verdict};

/// The demo's part of the console: the playground, its owners and the last result.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoState {
    pub sandbox: std::path::PathBuf,
    /// True when the sandbox is a temp directory the demo removes on exit.
    pub owned: bool,
    pub owners: Vec<OwnerView>,
    /// The result panel: the last outcome.
    pub last: Option<Outcome>,
    /// The tour step shown (title, why), and the index of the next one.
    pub tour_note: Option<(String, String)>,
    pub next_step: usize,
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
            tour_note: None,
            next_step: 0,
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

/// What the demo asks its runner to do: one playground action, or a tour step.
#[derive(Debug, Clone, PartialEq)]
pub enum DemoJob {
    Act(Action),
    Tour(usize),
}

/// Playground actions finished (in order), with the owners as they are now.
#[derive(Debug)]
pub struct DemoDone {
    pub outcomes: Vec<Outcome>,
    pub owners: Vec<OwnerView>,
    /// Set when these were a tour step: its index, title and explanation.
    pub tour_step: Option<(usize, String, String)>,
}
