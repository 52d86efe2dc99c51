//! The demo's keys, in the console's table form: they drive its dispatch, and the
//! console's help and footer list them.

use ratatui::crossterm::event::KeyCode;

use crate::tui::extension::{Binding, Footer};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DemoKey {
    SpawnOwner,
    TryAcquire,
    KillOwner,
    FakeRecycled,
    SetCap,
    Corrupt,
    Repair,
    Tour,
    ResultDown,
    ResultUp,
}

pub(crate) const DEMO_KEYS: &[Binding<DemoKey>] = &[
    Binding {
        keys: &[(KeyCode::Char('o'), DemoKey::SpawnOwner)],
        shown: "o",
        help: "spawn an owner: a real leasectl hold process on a session you name",
        footer: Footer::Plain("o", "spawn"),
    },
    Binding {
        keys: &[(KeyCode::Char('a'), DemoKey::TryAcquire)],
        shown: "a",
        help: "try to acquire (session, surface, live id, cap, owner: new or a running one)",
        footer: Footer::Plain("a", "acquire"),
    },
    Binding {
        keys: &[(KeyCode::Char('K'), DemoKey::KillOwner)],
        shown: "K",
        help: "kill (SIGKILL) the selected lease's owner process",
        footer: Footer::Plain("K", "kill"),
    },
    Binding {
        keys: &[(KeyCode::Char('f'), DemoKey::FakeRecycled)],
        shown: "f",
        help: "fake a recycled pid: an entry whose live pid has another start time",
        footer: Footer::Plain("f", "recycled"),
    },
    Binding {
        keys: &[(KeyCode::Char('c'), DemoKey::SetCap)],
        shown: "c",
        help: "set or clear the cap (the sandbox's config.yaml)",
        footer: Footer::Plain("c", "cap"),
    },
    Binding {
        keys: &[(KeyCode::Char('C'), DemoKey::Corrupt)],
        shown: "C",
        help: "corrupt the sandbox registry (truncated, duplicate lease id, empty session id)",
        footer: Footer::Plain("C", "corrupt"),
    },
    Binding {
        keys: &[(KeyCode::Char('R'), DemoKey::Repair)],
        shown: "R",
        help: "repair it back",
        footer: Footer::Plain("R", "repair"),
    },
    Binding {
        keys: &[(KeyCode::Char('t'), DemoKey::Tour)],
        shown: "t",
        help: "the guided tour: the next step (a scene, then its outcome); at the end, start again",
        footer: Footer::First("t", "tour"),
    },
    Binding {
        keys: &[(KeyCode::Char('}'), DemoKey::ResultDown), (KeyCode::Char('{'), DemoKey::ResultUp)],
        shown: "} / {",
        help: "page the result panel down / up (a small terminal shows part of it)",
        footer: Footer::First("}", "more"),
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::keys::CONSOLE_KEYS;

    #[test]
    fn demo_keys_do_not_shadow_each_other() {
        let codes: Vec<KeyCode> = DEMO_KEYS.iter().flat_map(|b| b.keys.iter().map(|(c, _)| *c)).collect();
        for (i, c) in codes.iter().enumerate() {
            assert!(!codes[i + 1..].contains(c), "{c:?} is bound twice");
        }
        // The demo's keys come first: none may hide a console key the help promises.
        let console: Vec<KeyCode> = CONSOLE_KEYS.iter().flat_map(|b| b.keys.iter().map(|(c, _)| *c)).collect();
        assert!(codes.iter().all(|c| !console.contains(c)), "a demo key hides a console key");
    }
}
