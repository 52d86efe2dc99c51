//! The console's extension point: a panel under the lease table, key bindings of
//! its own (listed in the help and footer), and jobs run on the worker thread. The
//! demo plugs in here; the console knows nothing of what an extension does.

use std::any::Any;

use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::Rect;

use super::event::LeaseRow;

// What an extension speaks, given here so that an extension imports this module alone:
// the jobs it runs and their answers, the log's levels, and its key bindings (a table
// like the console's, drawn in the help and the footer).
pub use super::event::{Job, JobDone, LogLevel};
pub use super::keys::{Binding, Footer, KeyRow, lookup};

/// What the console lets an extension see when a key arrives.
pub struct KeyContext<'a> {
    /// The lease under the cursor.
    pub selected: Option<&'a LeaseRow>,
    /// Where the extension's panel is drawn now (what a scroll key can move over).
    pub panel: Rect,
}

/// The rows an extension's panel takes: never fewer than `least`, and `wanted` (what
/// its content fills) when the screen has room after the table's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PanelRows {
    pub least: u16,
    pub wanted: u16,
}

/// An extension's answer to a key it took: jobs to run and lines for the event log.
#[derive(Debug, Default)]
pub struct Reaction {
    pub jobs: Vec<Job>,
    pub log: Vec<(LogLevel, String)>,
}

/// The state, update and view of an extension, kept in the console's `App`.
/// Rendering never does I/O, as for the console itself.
pub trait Extension: Send {
    /// The name its log lines carry.
    fn name(&self) -> &'static str;
    /// The title of its section in the help.
    fn help_title(&self) -> &'static str {
        self.name()
    }
    /// Its key bindings, for the help and the footer.
    fn keys(&self) -> Vec<KeyRow>;
    /// A key, before the console's own keys. `None`: not the extension's key.
    fn on_key(&mut self, key: &KeyEvent, context: &KeyContext) -> Option<Reaction>;
    /// Jobs to run as soon as the console starts.
    fn start(&mut self) -> Vec<Job> {
        vec![]
    }
    /// A job finished on the worker thread.
    fn on_done(&mut self, done: JobDone) -> Vec<(LogLevel, String)>;
    /// Rows of screen its panel takes on a screen this wide and tall.
    fn panel_rows(&self, width: u16, height: u16) -> PanelRows;
    /// The smallest terminal (columns, rows) its view can be read in: below it the
    /// console says what it needs rather than cut what matters.
    fn min_size(&self) -> (u16, u16) {
        (0, 0)
    }
    fn render_panel(&self, no_color: bool, frame: &mut Frame, area: Rect);
    /// Drawn over everything (a form), when it has one open.
    fn render_overlay(&self, _no_color: bool, _frame: &mut Frame, _area: Rect) {}
    /// It has something open over the console (a form): a click is not the console's.
    fn has_overlay(&self) -> bool {
        false
    }
    /// A lease to mark in the table, by lease id, with the mark's text.
    fn marked_lease(&self) -> Option<(&str, &'static str)> {
        None
    }
    /// The lease its last job was about, by lease id: the console selects it (so it is in
    /// view) when a job finishes.
    fn focus_lease(&self) -> Option<&str> {
        None
    }
    fn box_clone(&self) -> Box<dyn Extension>;
    /// For tests and for the extension itself: the concrete state.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl Clone for Box<dyn Extension> {
    fn clone(&self) -> Box<dyn Extension> {
        self.box_clone()
    }
}

impl std::fmt::Debug for dyn Extension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Extension({})", self.name())
    }
}

/// The I/O side of an extension: runs its jobs on the worker thread, and is dropped
/// (cleaning up whatever it started) before the console restores the terminal.
pub trait Runner: Send {
    fn run(&mut self, job: &Job) -> Option<JobDone>;
    /// Asked about once a second, between jobs: news of its own (a process it started has
    /// ended), as a job's answer would bring it.
    fn poll(&mut self) -> Option<JobDone> {
        None
    }
}
