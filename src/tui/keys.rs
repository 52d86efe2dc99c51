//! Keys as data: one table of bindings per mode drives dispatch, the `?` help, the
//! footer and the dialogs' hints (the table, the input line, the dialogs, the event
//! log). An extension (the demo) brings a table of its own in the same form.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::sort::SortMode;

/// What to show at the bottom of the screen for a binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Footer {
    /// Not in the footer (help only).
    None,
    /// Always shown, before everything else (`?`, `q`).
    First(&'static str, &'static str),
    /// Shown when no extension brings footer entries of its own.
    Plain(&'static str, &'static str),
}

/// One line of the help: the keys, what they do, and the action each key runs.
#[derive(Debug, Clone, Copy)]
pub struct Binding<A: 'static> {
    /// Each key and the action it runs (a line may cover related actions: ↑ and ↓).
    pub keys: &'static [(KeyCode, A)],
    /// The keys as the help shows them.
    pub shown: &'static str,
    pub help: &'static str,
    pub footer: Footer,
}

/// A binding's text, whatever its action type: what help and footer are drawn from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRow {
    pub shown: &'static str,
    pub help: &'static str,
    pub footer: Footer,
}

impl<A: Copy> Binding<A> {
    pub fn row(&self) -> KeyRow {
        KeyRow { shown: self.shown, help: self.help, footer: self.footer }
    }
}

/// The action bound to `key` in `table`, if any. Shift is part of a key (`X`, Shift-Tab);
/// a key with Ctrl, Alt or another modifier held is bound to nothing here.
pub fn lookup<A: Copy>(table: &[Binding<A>], key: &KeyEvent) -> Option<A> {
    if !is_plain(key) {
        return None;
    }
    table.iter().flat_map(|b| b.keys.iter()).find(|(code, _)| *code == key.code).map(|(_, a)| *a)
}

/// No modifier but Shift: a key as typed.
pub(crate) fn is_plain(key: &KeyEvent) -> bool {
    (key.modifiers - KeyModifiers::SHIFT).is_empty()
}

/// The character a plain key types into an input line (the filter, a session id).
pub(crate) fn typed_char(key: &KeyEvent) -> Option<char> {
    match key.code {
        KeyCode::Char(c) if is_plain(key) => Some(c),
        _ => None,
    }
}

/// Keys that move through a dialog's list (the console's moving actions, without the
/// letters: a dialog may be typed into).
pub(crate) const SCROLL_KEYS: &[Binding<Action>] = &[Binding {
    keys: &[
        (KeyCode::Down, Action::Down),
        (KeyCode::Up, Action::Up),
        (KeyCode::PageDown, Action::PageDown),
        (KeyCode::PageUp, Action::PageUp),
        (KeyCode::Home, Action::First),
        (KeyCode::End, Action::Last),
    ],
    shown: "↑↓ PgUp PgDn Home End",
    help: "scroll",
    footer: Footer::None,
}];

/// The answer to a dialog's question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    Yes,
    /// Yes, although a live owner's lease may be lost: a key of its own.
    Force,
    No,
}

const CANCEL: Binding<Answer> = Binding {
    keys: &[(KeyCode::Char('n'), Answer::No), (KeyCode::Esc, Answer::No), (KeyCode::Char('q'), Answer::No)],
    shown: "n / Esc / q",
    help: "cancel",
    footer: Footer::Plain("n/Esc", "cancel"),
};

/// A yes/no question.
pub(crate) const CONFIRM_KEYS: &[Binding<Answer>] = &[
    Binding {
        keys: &[(KeyCode::Char('y'), Answer::Yes), (KeyCode::Char('Y'), Answer::Yes)],
        shown: "y",
        help: "yes",
        footer: Footer::Plain("y", ""),
    },
    CANCEL,
];

/// A question only a deliberate key answers yes (not y, nor the key that opened it:
/// a double press must not force it).
pub(crate) const FORCE_KEYS: &[Binding<Answer>] = &[
    Binding {
        keys: &[(KeyCode::Char('!'), Answer::Force)],
        shown: "!",
        help: "yes, anyway",
        footer: Footer::Plain("!", "anyway"),
    },
    CANCEL,
];

/// A dialog's hint line from its table: `y release · n/Esc cancel`, the yes word `verb`.
pub(crate) fn answer_hint(table: &[Binding<Answer>], verb: &str) -> String {
    let words: Vec<String> = table
        .iter()
        .filter_map(|b| match (b.footer, b.keys.first()) {
            (Footer::Plain(k, w) | Footer::First(k, w), Some((_, answer))) => Some(match answer {
                Answer::Yes => format!("{k} {verb}"),
                Answer::Force => format!("{k} {verb} {w}"),
                Answer::No => format!("{k} {w}"),
            }),
            _ => None,
        })
        .collect();
    words.join(" · ")
}

/// Editing an input line; any other plain key types its character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Edit {
    Done,
    Cancel,
    Erase,
}

pub(crate) const LINE_KEYS: &[Binding<Edit>] = &[
    Binding {
        keys: &[(KeyCode::Enter, Edit::Done)],
        shown: "Enter",
        help: "apply",
        footer: Footer::Plain("Enter", "apply"),
    },
    Binding {
        keys: &[(KeyCode::Esc, Edit::Cancel)],
        shown: "Esc",
        help: "cancel",
        footer: Footer::Plain("Esc", "cancel"),
    },
    Binding { keys: &[(KeyCode::Backspace, Edit::Erase)], shown: "Backspace", help: "erase", footer: Footer::None },
];

/// The filter line's keys: as an input line's, but Esc clears the filter (k9s), and a
/// filter opened on the one in force is replaced by what is typed.
pub(crate) const FILTER_KEYS: &[Binding<Edit>] = &[
    Binding {
        keys: &[(KeyCode::Enter, Edit::Done)],
        shown: "Enter",
        help: "keep",
        footer: Footer::Plain("Enter", "keep"),
    },
    Binding {
        keys: &[(KeyCode::Esc, Edit::Cancel)],
        shown: "Esc",
        help: "clear",
        footer: Footer::Plain("Esc", "clear"),
    },
    Binding {
        keys: &[(KeyCode::Backspace, Edit::Erase)],
        shown: "Backspace",
        help: "edit",
        footer: Footer::Plain("Backspace", "edit"),
    },
];

/// An input line's hint from its table: `Enter apply · Esc cancel`; `done` renames Enter's word.
pub(crate) fn line_hint(done: Option<&str>) -> String {
    table_hint(LINE_KEYS, done)
}

/// The filter line's hint: `Enter keep · Esc clear · Backspace edit`.
pub(crate) fn filter_hint() -> String {
    table_hint(FILTER_KEYS, None)
}

fn table_hint(table: &[Binding<Edit>], done: Option<&str>) -> String {
    let words: Vec<String> = table
        .iter()
        .filter_map(|b| match (b.footer, b.keys.first()) {
            (Footer::Plain(k, w), Some((_, Edit::Done))) => Some(format!("{k} {}", done.unwrap_or(w))),
            (Footer::Plain(k, w), _) => Some(format!("{k} {w}")),
            _ => None,
        })
        .collect();
    words.join(" · ")
}

/// One input-line key's hint: `Esc cancel`.
pub(crate) fn line_key_hint(edit: Edit) -> String {
    LINE_KEYS
        .iter()
        .filter(|b| b.keys.iter().any(|(_, e)| *e == edit))
        .find_map(|b| match b.footer {
            Footer::Plain(k, w) => Some(format!("{k} {w}")),
            _ => None,
        })
        .unwrap_or_default()
}

/// What closes the help.
pub(crate) const HELP_KEYS: &[Binding<()>] = &[Binding {
    keys: &[(KeyCode::Esc, ()), (KeyCode::Char('?'), ()), (KeyCode::Char('q'), ()), (KeyCode::Enter, ())],
    shown: "Esc / ? / q / Enter",
    help: "close",
    footer: Footer::None,
}];

/// What the console's own keys do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Help,
    Quit,
    /// Esc: clear the filter, else close the details; never quits.
    Back,
    Down,
    Up,
    PageDown,
    PageUp,
    First,
    Last,
    NextTab,
    PreviousTab,
    ToggleDetails,
    Filter,
    /// Jump to a registry's tab by typing its name (thousands of profiles: Tab is one step).
    GoToTab,
    Sort,
    /// Sort by this column; again to reverse.
    SortBy(SortMode),
    /// Sort by the Nth column the table shows now (1-based, liveness last).
    SortColumn(usize),
    /// Give the arrow keys to the event log, or back to the table.
    FocusLog,
    OnlyNotAlive,
    /// Only the leases that look leaked (LEAK?).
    OnlyLeaks,
    Prune,
    ReleaseLease,
    ReleaseSession,
    /// End the selected lease's owner process, then clean its leases (`leasectl stop`).
    StopOwner,
    Reload,
    Repair,
    /// Take the mouse, or give it back to the terminal (for selecting text).
    Mouse,
    /// Scroll the details pane.
    DetailsDown,
    DetailsUp,
}

/// Every key the console knows, in the order the help lists them.
pub(crate) const CONSOLE_KEYS: &[Binding<Action>] = &[
    Binding {
        keys: &[
            (KeyCode::Down, Action::Down),
            (KeyCode::Char('j'), Action::Down),
            (KeyCode::Up, Action::Up),
            (KeyCode::Char('k'), Action::Up),
            (KeyCode::PageDown, Action::PageDown),
            (KeyCode::PageUp, Action::PageUp),
            (KeyCode::Char('g'), Action::First),
            (KeyCode::Home, Action::First),
            (KeyCode::Char('G'), Action::Last),
            (KeyCode::End, Action::Last),
        ],
        shown: "↑/↓, j/k",
        help: "move (PgUp/PgDn, g/G: page, first, last)",
        // Not in the footer: the arrows are every list's; 80 columns keep x and S instead.
        footer: Footer::None,
    },
    Binding {
        keys: &[(KeyCode::Tab, Action::NextTab), (KeyCode::BackTab, Action::PreviousTab)],
        shown: "Tab / Shift-Tab",
        help: "next / previous registry tab",
        footer: Footer::Plain("Tab", "tabs"),
    },
    Binding {
        keys: &[(KeyCode::Char('T'), Action::GoToTab)],
        shown: "T",
        help: "go to a profile's tab by name: typing jumps to the first that starts with it (Enter stay, Esc back)",
        footer: Footer::None,
    },
    Binding {
        keys: &[(KeyCode::Enter, Action::ToggleDetails)],
        shown: "Enter",
        help: "show or hide the lease details",
        footer: Footer::Plain("⏎", "details"),
    },
    Binding {
        keys: &[(KeyCode::Char('/'), Action::Filter)],
        shown: "/",
        help: "filter any column as you type; !text hides matches (Enter keep, Esc clear; typing replaces it)",
        footer: Footer::Plain("/", "filter"),
    },
    Binding {
        keys: &[(KeyCode::Char('s'), Action::Sort)],
        shown: "s",
        help: "cycle the sort: session, age, pid, surface, liveness",
        footer: Footer::None,
    },
    Binding {
        keys: &[
            (KeyCode::Char('0'), Action::SortBy(SortMode::Session)),
            (KeyCode::Char('1'), Action::SortColumn(1)),
            (KeyCode::Char('2'), Action::SortColumn(2)),
            (KeyCode::Char('3'), Action::SortColumn(3)),
            (KeyCode::Char('4'), Action::SortColumn(4)),
            (KeyCode::Char('5'), Action::SortColumn(5)),
            (KeyCode::Char('6'), Action::SortColumn(6)),
            (KeyCode::Char('7'), Action::SortColumn(7)),
            (KeyCode::Char('8'), Action::SortColumn(8)),
            (KeyCode::Char('9'), Action::SortColumn(9)),
        ],
        shown: "0-9",
        help: "sort by session (0) or by the Nth column on screen (1-9, as the header shows them: a narrow \
               terminal hides some); again reverses",
        footer: Footer::None,
    },
    Binding {
        keys: &[(KeyCode::Char('e'), Action::FocusLog)],
        shown: "e",
        help: "scroll the event log: arrows, pages, Home, End; Esc back",
        footer: Footer::None,
    },
    Binding {
        keys: &[(KeyCode::Char('d'), Action::OnlyNotAlive)],
        shown: "d",
        help: "show only owners that are not alive",
        footer: Footer::None,
    },
    Binding {
        keys: &[(KeyCode::Char('l'), Action::OnlyLeaks)],
        shown: "l",
        help: "show only leak suspects (LEAK?: a live owner whose session ended or went idle)",
        footer: Footer::None,
    },
    Binding {
        keys: &[(KeyCode::Char('p'), Action::Prune)],
        shown: "p",
        help: "prune dead and recycled owners (asks first)",
        footer: Footer::Plain("p", "prune"),
    },
    Binding {
        keys: &[(KeyCode::Char('x'), Action::ReleaseLease)],
        shown: "x",
        help: "force-release the selected lease (asks first)",
        footer: Footer::Plain("x", "release"),
    },
    Binding {
        keys: &[(KeyCode::Char('X'), Action::ReleaseSession)],
        shown: "X",
        help: "force-release every lease of the selected session",
        footer: Footer::None,
    },
    Binding {
        keys: &[(KeyCode::Char('S'), Action::StopOwner)],
        shown: "S",
        help: "stop the selected lease's owner: end the process (SIGTERM, then SIGKILL), then its leases go (asks \
               first); the safe way to free a live owner's slot",
        footer: Footer::Plain("S", "stop"),
    },
    Binding {
        keys: &[(KeyCode::Char('r'), Action::Reload)],
        shown: "r",
        help: "re-read the registries now (a host down: try it now)",
        footer: Footer::None,
    },
    Binding {
        keys: &[(KeyCode::Char(']'), Action::DetailsDown), (KeyCode::Char('['), Action::DetailsUp)],
        shown: "] / [",
        help: "scroll the details down / up (the wheel over them too)",
        footer: Footer::None,
    },
    Binding {
        keys: &[(KeyCode::Char('m'), Action::Mouse)],
        shown: "m",
        help: "mouse on/off: click a row or tab, wheel scrolls; off, the terminal selects text",
        footer: Footer::None,
    },
    Binding {
        keys: &[(KeyCode::Char('F'), Action::Repair)],
        shown: "F",
        help: "repair an invalid registry (asks first; keeps a backup)",
        footer: Footer::None,
    },
    Binding {
        keys: &[(KeyCode::Char('?'), Action::Help)],
        shown: "?",
        help: "this help",
        footer: Footer::First("?", "help"),
    },
    Binding {
        keys: &[(KeyCode::Esc, Action::Back)],
        shown: "Esc",
        help: "clear the filter, else close details (never quits)",
        footer: Footer::None,
    },
    Binding {
        keys: &[(KeyCode::Char('q'), Action::Quit)],
        shown: "q",
        help: "quit",
        footer: Footer::First("q", "quit"),
    },
];

/// The footer line's entries (key, word): the console's first ones, then the
/// extension's when it brings any, else the console's plain ones.
pub(crate) fn footer_entries(console: &[KeyRow], extension: &[KeyRow]) -> Vec<(&'static str, &'static str)> {
    // The console's first entries, then an extension's: what a narrow footer must keep.
    let first = console.iter().chain(extension).filter_map(|r| match r.footer {
        Footer::First(k, w) => Some((k, w)),
        _ => None,
    });
    let plain = |rows: &[KeyRow]| -> Vec<(&'static str, &'static str)> {
        rows.iter()
            .filter_map(|r| match r.footer {
                Footer::Plain(k, w) | Footer::First(k, w) => Some((k, w)),
                Footer::None => None,
            })
            .collect()
    };
    let rest = if plain(extension).is_empty() { plain(console) } else { plain(extension) };
    let first: Vec<_> = first.collect();
    first.iter().copied().chain(rest.into_iter().filter(|e| !first.contains(e))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::KeyModifiers;

    fn rows() -> Vec<KeyRow> {
        CONSOLE_KEYS.iter().map(Binding::row).collect()
    }

    #[test]
    fn every_key_is_bound_once() {
        let codes: Vec<KeyCode> = CONSOLE_KEYS.iter().flat_map(|b| b.keys.iter().map(|(c, _)| *c)).collect();
        for (i, c) in codes.iter().enumerate() {
            assert!(!codes[i + 1..].contains(c), "{c:?} is bound twice");
        }
    }

    #[test]
    fn lookup_finds_the_action_of_each_key() {
        let key = |c| KeyEvent::new(c, KeyModifiers::NONE);
        assert_eq!(lookup(CONSOLE_KEYS, &key(KeyCode::Char('j'))), Some(Action::Down));
        assert_eq!(lookup(CONSOLE_KEYS, &key(KeyCode::BackTab)), Some(Action::PreviousTab));
        assert_eq!(lookup(CONSOLE_KEYS, &key(KeyCode::Char('z'))), None);
        let ctrl_x = KeyEvent::new(KeyCode::Char('x'), KeyModifiers::CONTROL);
        assert_eq!(lookup(CONSOLE_KEYS, &ctrl_x), None, "Ctrl-x is not x");
        let shift_x = KeyEvent::new(KeyCode::Char('X'), KeyModifiers::SHIFT);
        assert_eq!(lookup(CONSOLE_KEYS, &shift_x), Some(Action::ReleaseSession));
    }

    #[test]
    fn dialog_hints_come_from_their_tables() {
        assert_eq!(answer_hint(CONFIRM_KEYS, "prune 3"), "y prune 3 · n/Esc cancel");
        assert_eq!(answer_hint(FORCE_KEYS, "repair"), "! repair anyway · n/Esc cancel");
        assert_eq!(line_hint(None), "Enter apply · Esc cancel");
        assert_eq!(filter_hint(), "Enter keep · Esc clear · Backspace edit");
        assert_eq!(line_key_hint(Edit::Cancel), "Esc cancel");
    }

    #[test]
    fn the_footer_comes_from_the_table() {
        let plain: Vec<String> = footer_entries(&rows(), &[]).iter().map(|(k, w)| format!("{k} {w}")).collect();
        assert_eq!(plain.join("  "), "? help  q quit  Tab tabs  ⏎ details  / filter  p prune  x release  S stop");
        let ext = [KeyRow { shown: "o", help: "spawn", footer: Footer::Plain("o", "spawn") }];
        let with: Vec<String> = footer_entries(&rows(), &ext).iter().map(|(k, w)| format!("{k} {w}")).collect();
        assert_eq!(with.join("  "), "? help  q quit  o spawn");
    }
}
