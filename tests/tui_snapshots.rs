//! Snapshot tests of the console's main screens (ratatui TestBackend + insta).
//! The committed `.snap` files are the expected screens; CI never writes them.

use crate::common;

use common::*;
use leasectl::tui::event::Event;
use leasectl::tui::state::App;
use leasectl::tui::update::update;
use leasectl::tui::view;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn screen(app: &App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
    terminal.draw(|f| view::render(app, f)).expect("draw");
    terminal.backend().to_string()
}

fn key(app: &mut App, code: KeyCode) {
    update(app, Event::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

#[test]
fn empty_registry() {
    let app = app(vec![snap(&registry("root"), None, Ok(vec![]))]);
    insta::assert_snapshot!(screen(&app, 100, 24));
}

#[test]
fn mixed_liveness() {
    let mut app = app(vec![mixed_root()]);
    for t in 1..=30 {
        update(&mut app, Event::Tick(NOW + f64::from(t)));
    }
    insta::assert_snapshot!(screen(&app, 100, 24));
}

#[test]
fn mixed_liveness_at_80x24() {
    let app = app(vec![mixed_root()]);
    insta::assert_snapshot!(screen(&app, 80, 24));
}

#[test]
fn conflict() {
    let root = registry("root");
    let app = app(vec![snap(
        &root,
        Some(2),
        Ok(vec![
            alive(entry("a0000000000000000000000000000001", "chat-1", "gateway", 501, 600.0, Some("g-1")), "hermes-gw"),
            alive(
                entry("b0000000000000000000000000000002", "chat-1", "desktop", 502, 60.0, Some("d-1")),
                "hermes-desk",
            ),
        ]),
    )]);
    insta::assert_snapshot!(screen(&app, 100, 24));
}

#[test]
fn invalid_registry_banner() {
    let mut app = app(vec![mixed_root()]);
    update(
        &mut app,
        loaded(vec![snap(
            &registry("root"),
            Some(4),
            Err("invalid registry /home/op/.hermes/runtime/active_sessions.json: entry 1 (lease x): session_id is blank (\"\")".into()),
        )]),
    );
    insta::assert_snapshot!(screen(&app, 100, 24));
}

#[test]
fn confirm_prune() {
    let mut app = app(vec![mixed_root()]);
    key(&mut app, KeyCode::Char('p'));
    insta::assert_snapshot!(screen(&app, 100, 24));
}

#[test]
fn confirm_release_dead_owner() {
    let mut app = app(vec![mixed_root()]);
    app.filter = "chat-7".into();
    key(&mut app, KeyCode::Char('x'));
    insta::assert_snapshot!(screen(&app, 100, 24));
}

#[test]
fn confirm_release_live_owner() {
    let mut app = app(vec![mixed_root()]);
    app.filter = "chat-42".into();
    key(&mut app, KeyCode::Char('x'));
    for c in "chat".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    insta::assert_snapshot!(screen(&app, 100, 24));
}

#[test]
fn help() {
    let mut app = app(vec![mixed_root()]);
    key(&mut app, KeyCode::Char('?'));
    insta::assert_snapshot!(screen(&app, 80, 24));
}

#[test]
fn details_and_all_tab() {
    let work = registry("work");
    let mut app = app(vec![
        mixed_root(),
        snap(
            &work,
            Some(2),
            Ok(vec![alive(entry("c0ffee00000000000000000000000000", "W", "cli", 77, 5.0, None), "hermes")]),
        ),
    ]);
    key(&mut app, KeyCode::BackTab);
    key(&mut app, KeyCode::Enter);
    insta::assert_snapshot!(screen(&app, 80, 30));
}

/// An owner alive in a container beside one on the host, at 80x24: its row marked `⧉ ns`,
/// the banner naming the two pid namespaces, the details both pids and the container.
#[test]
fn an_owner_in_a_container_beside_a_host_owner() {
    use leasectl::lease::owners::namespaces::{Container, NamespacedOwner};
    let mut in_container =
        alive(entry("c0ffee00000000000000000000000001", "gw-chat", "gateway", 1, 90.0, None), "hermes");
    in_container.liveness = leasectl::lease::Liveness::AliveInNamespace(Box::new(NamespacedOwner {
        host_pid: 13906,
        namespace: Some(4_026_532_175),
        container: Some(Container { runtime: "docker".into(), id: "3f2a9c1b2d4e".into() }),
    }));
    let on_host = alive(entry("b0000000000000000000000000000002", "cli-chat", "cli", 502, 60.0, None), "hermes");
    let mut app = app(vec![snap(&registry("root"), None, Ok(vec![in_container, on_host]))]);
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Enter);
    insta::assert_snapshot!(screen(&app, 80, 24));
}

#[test]
fn a_wrong_session_id_for_a_live_release_is_said_not_to_match() {
    let mut app = app(vec![mixed_root()]);
    app.filter = "chat-42".into();
    key(&mut app, KeyCode::Char('x'));
    for c in "chat-4".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    assert!(!screen(&app, 120, 40).contains("does not match"), "a prefix on its way is not yet wrong");
    key(&mut app, KeyCode::Enter);
    let shown = screen(&app, 120, 40);
    assert!(shown.contains("does not match chat-42: nothing released"), "Enter on a prefix says so:\n{shown}");
    key(&mut app, KeyCode::Char('2'));
    assert!(!screen(&app, 120, 40).contains("does not match"), "typing again clears it");
    key(&mut app, KeyCode::Char('x'));
    key(&mut app, KeyCode::Enter);
    assert!(screen(&app, 120, 40).contains("does not match chat-42: nothing released"));
    assert!(app.dialog.is_some(), "the dialog stays open for another try");
}

#[test]
fn a_prune_of_a_thousand_shows_the_total_scrolls_and_keeps_its_confirm_line() {
    let leases: Vec<_> = (0..1000)
        .map(|i| {
            dead(entry(&format!("{i:08x}{}", "0".repeat(24)), &format!("chat-{i:04}"), "cli", 5000 + i, 600.0, None))
        })
        .collect();
    let mut app = app(vec![snap(&registry("root"), None, Ok(leases))]);
    key(&mut app, KeyCode::Char('p'));
    let first = screen(&app, 80, 24);
    assert!(first.contains("1000"), "the total is shown:\n{first}");
    assert!(first.contains("y prune"), "the confirm line is shown:\n{first}");
    assert!(first.contains("chat-0000") && !first.contains("chat-0999"));
    key(&mut app, KeyCode::End);
    let last = screen(&app, 80, 24);
    assert!(last.contains("chat-0999") && last.contains("y prune"), "End scrolls to the last lease:\n{last}");
    key(&mut app, KeyCode::PageUp);
    key(&mut app, KeyCode::Home);
    assert_eq!(screen(&app, 80, 24), first, "Home scrolls back");
    // The help scrolls too, at the smallest size, and keeps its closing line.
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Char('?'));
    let help = screen(&app, 60, 15);
    assert!(help.contains("Esc closes this help."), "{help}");
    key(&mut app, KeyCode::End);
    assert!(screen(&app, 60, 15).contains("STALE"), "the help's end (its last mark) is reachable");
}

#[test]
fn the_liveness_badge_is_never_cut_and_a_tiny_terminal_is_told_so() {
    let mut app = app(vec![mixed_root()]);
    for t in 1..=30 {
        update(&mut app, Event::Tick(NOW + f64::from(t)));
    }
    let badges = ["● alive", "✖ dead", "♻ recycled", "♻ recycled clock step?"];
    for (w, h) in [(80, 24), (200, 60)] {
        let shown = screen(&app, w, h);
        for badge in badges {
            assert!(shown.contains(badge), "{w}x{h}: the badge {badge:?} is cut:\n{shown}");
        }
        assert!(shown.contains("4101"), "{w}x{h}: the pid stays:\n{shown}");
    }
    // At the smallest size the table keeps the room (the event log gives way), and every
    // lease row shown ends with its whole badge.
    let small = screen(&app, 60, 15);
    let rows: Vec<&str> = small.lines().filter(|l| l.contains("│  ") && l.contains(" 4")).collect();
    assert!(rows.len() >= 2, "leases fit at 60x15:\n{small}");
    for row in rows {
        let end = row.trim_end_matches(['│', ' ', '"']);
        assert!(badges.iter().any(|b| end.ends_with(b)) || end.ends_with("alive"), "cut: {row:?}\n{small}");
    }
    let wide = screen(&app, 200, 60);
    assert!(wide.contains("LIVE ID") && wide.contains("tab-1"), "wide: every column:\n{wide}");
    let tiny = screen(&app, 59, 15);
    assert!(tiny.contains("needs 60x15; now 59x15"), "{tiny}");
    assert!(screen(&app, 60, 14).contains("needs 60x15; now 60x14"));
}

#[test]
fn each_column_sorts_with_its_own_key_again_to_reverse_and_the_header_marks_it() {
    let mut app = app(vec![mixed_root()]);
    let sessions = |app: &App| -> Vec<String> {
        app.lease_rows().iter().map(|(r, l)| app.registries[*r].leases[*l].entry.session_id().to_owned()).collect()
    };
    key(&mut app, KeyCode::Char('3'));
    assert_eq!(sessions(&app), ["chat-42", "chat-7", "chat-9", "chat-11"], "by pid");
    assert!(screen(&app, 120, 30).contains("PID ▲"), "{}", screen(&app, 120, 30));
    key(&mut app, KeyCode::Char('3'));
    assert_eq!(sessions(&app), ["chat-11", "chat-9", "chat-7", "chat-42"], "by pid, reversed");
    assert!(screen(&app, 120, 30).contains("PID ▼"));
    key(&mut app, KeyCode::Char('4'));
    assert_eq!(sessions(&app), ["chat-7", "chat-11", "chat-9", "chat-42"], "by owner name (none first)");
    // No HOST column here (every owner is on this host): LIVENESS is the eighth shown.
    key(&mut app, KeyCode::Char('8'));
    assert_eq!(sessions(&app)[0], "chat-7", "by liveness: not alive first");
    assert!(screen(&app, 120, 30).contains("LIVENESS ▲"));
    key(&mut app, KeyCode::Char('0'));
    assert_eq!(sessions(&app), ["chat-11", "chat-42", "chat-7", "chat-9"], "0: back to by session");
}

/// The digits follow the columns on screen: at 80 columns the live id is not shown, so
/// `7` does not sort by it unseen (it did, with no ▲ anywhere); each digit's column is
/// the one the header marks.
#[test]
fn at_80_columns_the_digits_sort_by_the_columns_shown() {
    let mut app = app(vec![mixed_root()]);
    update(&mut app, Event::Resize(80, 24));
    let text = screen(&app, 80, 24);
    let header = text.lines().find(|l| l.contains("LEASE")).expect("the header").to_owned();
    let shown: Vec<&str> = header.trim_matches(['"', '│', ' ']).split_whitespace().collect();
    assert!(!shown.contains(&"LIVE"), "the live id is not on screen at 80 columns: {header}");
    for digit in 1..=shown.len() {
        key(&mut app, KeyCode::Char(char::from(b'0' + digit as u8)));
        let text = screen(&app, 80, 24);
        let header = text.lines().find(|l| l.contains("LEASE")).expect("the header");
        let marked: Vec<&str> = header.trim_matches(['"', '│', ' ']).split_whitespace().collect();
        let at = marked
            .iter()
            .position(|w| *w == "▲" || *w == "▼")
            .unwrap_or_else(|| panic!("{digit}: no column marked: {header}"));
        assert_eq!(
            marked.iter().filter(|w| **w != "▲" && **w != "▼").nth(digit - 1),
            Some(&marked[at - 1]),
            "{digit}: {header}"
        );
        key(&mut app, KeyCode::Char('0'));
    }
    key(&mut app, KeyCode::Char('9'));
    assert!(app.sort != leasectl::tui::sort::SortMode::LiveId, "a column not on screen is not sorted by");
}

/// Where owners run on other hosts (etcd, --host) the HOST column is the eighth in the
/// header, and 8 sorts by it; 9 is LIVENESS (8 sorted by liveness while the header's
/// eighth column was HOST).
#[test]
fn eight_sorts_by_host_and_nine_by_liveness_in_header_order() {
    let at = leasectl::lease::Location::Etcd(Box::new(
        leasectl::lease::EtcdLocation::parse("http://10.0.0.5:2379", None).expect("a location"),
    ));
    let on = |lease: &str, session: &str, host: &str, liveness: leasectl::lease::Liveness| {
        let mut row = alive(entry(lease, session, "gateway", 4101, 120.0, None), "hermes");
        row.host = Some(host.into());
        row.liveness = liveness;
        row
    };
    let dead = leasectl::lease::Liveness::Dead(leasectl::lease::owners::liveness::DeadCause::PidGone);
    let mut app = app(vec![snap(
        &at,
        None,
        Ok(vec![
            on("a1000000000000000000000000000001", "chat-a", "gw-3", leasectl::lease::Liveness::Alive),
            on("b2000000000000000000000000000002", "chat-b", "gw-1", leasectl::lease::Liveness::Alive),
            on("c3000000000000000000000000000003", "chat-c", "gw-2", dead),
        ]),
    )]);
    let sessions = |app: &App| -> Vec<String> {
        app.lease_rows().iter().map(|(r, l)| app.registries[*r].leases[*l].entry.session_id().to_owned()).collect()
    };
    key(&mut app, KeyCode::Char('8'));
    assert_eq!(sessions(&app), ["chat-b", "chat-c", "chat-a"], "by host");
    let text = screen(&app, 200, 30);
    assert!(text.contains("HOST ▲") && text.contains("sort: host"), "{text}");
    key(&mut app, KeyCode::Char('8'));
    assert_eq!(sessions(&app), ["chat-a", "chat-c", "chat-b"], "by host, reversed");
    key(&mut app, KeyCode::Char('9'));
    assert_eq!(sessions(&app)[0], "chat-c", "by liveness: not alive first");
    assert!(screen(&app, 200, 30).contains("LIVENESS ▲"));
}

#[test]
fn the_event_log_can_be_focused_and_scrolled() {
    let mut app = app(vec![mixed_root()]);
    for i in 0..100 {
        app.log("root", leasectl::tui::event::LogLevel::Info, format!("event number {i:03}"));
    }
    let shown = screen(&app, 100, 30);
    assert!(shown.contains("event number 099") && !shown.contains("event number 050"), "{shown}");
    key(&mut app, KeyCode::Char('e'));
    assert!(screen(&app, 100, 30).contains("events (focused"), "the log says it has the keys");
    let selected = app.selected;
    key(&mut app, KeyCode::PageUp);
    key(&mut app, KeyCode::Up);
    let older = screen(&app, 100, 30);
    assert!(!older.contains("event number 099") && older.contains("event number 085"), "{older}");
    assert_eq!(app.selected, selected, "the table's selection did not move");
    key(&mut app, KeyCode::Home);
    assert!(screen(&app, 100, 30).contains("event number 000"));
    // New events do not move what the operator is reading.
    app.log("root", leasectl::tui::event::LogLevel::Info, "event number 100");
    assert!(screen(&app, 100, 30).contains("event number 000"));
    key(&mut app, KeyCode::End);
    assert!(screen(&app, 100, 30).contains("event number 100"));
    key(&mut app, KeyCode::Esc);
    assert!(!screen(&app, 100, 30).contains("events (focused"));
    key(&mut app, KeyCode::Down);
    assert_eq!(app.selected, selected + 1, "the arrows move the table again");
}

#[test]
fn names_from_the_registry_are_shown_escaped_on_the_console() {
    // Written as Hermes writes them (control characters as JSON escapes): the parsed
    // entry holds the raw characters.
    let hostile =
        entry("e5ca1ee5e5ca1ee5e5ca1ee5e5ca1ee5", "S\u{1b}[2J\u{202e}x", "cli\u{7}", 4101, 30.0, Some("t\u{9b}1"));
    assert_eq!(hostile.session_id(), "S\u{1b}[2J\u{202e}x");
    let mut app = app(vec![snap(&registry("root"), None, Ok(vec![alive(hostile, "evil\u{1b}]0;pwned\u{7}")]))]);
    key(&mut app, KeyCode::Enter);
    let shown = screen(&app, 200, 40);
    let raw = ['\u{1b}', '\u{202e}', '\u{7}', '\u{9b}'];
    assert!(!shown.chars().any(|c| raw.contains(&c)), "a raw control character reached the screen:\n{shown}");
    assert!(shown.contains("S\\u{1b}[2J\\u{202e}x"), "the session id is shown escaped:\n{shown}");
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Char('x'));
    let dialog = screen(&app, 200, 40);
    assert!(!dialog.chars().any(|c| raw.contains(&c)), "the release dialog:\n{dialog}");
}

#[test]
fn the_longest_age_fits_its_column() {
    // 18h21m: six characters, the widest the duration format writes below 100 days.
    let old = entry("a9e0a9e0a9e0a9e0a9e0a9e0a9e0a9e0", "chat-age", "cli", 4101, 18.0 * 3600.0 + 21.0 * 60.0, None);
    let app = app(vec![snap(&registry("root"), None, Ok(vec![alive(old, "hermes")]))]);
    for w in [80, 200] {
        let shown = screen(&app, w, 24);
        assert!(shown.contains(" 18h21m "), "{w} columns:\n{shown}");
    }
}

/// Session context: the title and last activity on each session row, LEAK? on a live
/// owner whose session ended, the context in the details pane; `l` shows only suspects.
fn leaked_home() -> App {
    app(vec![leaked_snapshot()])
}

fn leaked_snapshot() -> leasectl::tui::event::RegistrySnapshot {
    use leasectl::lease::home::context::{Contexts, SessionContext};
    use std::sync::Arc;
    let root = registry("root");
    let ctx = |id: &str, title: &str, ended: Option<(f64, &str)>, last: f64| {
        let mut c = SessionContext::new(id, Some(title), Some("telegram"), ended.map(|e| e.1));
        c.started_at = Some(NOW - 86_400.0);
        c.ended_at = ended.map(|e| e.0);
        c.last_activity = Some(last);
        c.messages = 42;
        c
    };
    let contexts = Contexts::Read(
        [
            ("chat-1".to_owned(), ctx("chat-1", "Quarterly report", None, NOW - 120.0)),
            (
                "chat-2".to_owned(),
                ctx("chat-2", "Trip to Lisbon", Some((NOW - 3.0 * 3600.0, "tui_shutdown")), NOW - 3.0 * 3600.0),
            ),
        ]
        .into_iter()
        .collect(),
    );
    let mut leaked =
        alive(entry("b0000000000000000000000000000002", "chat-2", "gateway", 502, 7200.0, Some("g-2")), "hermes-gw");
    leaked.leak = Some(Arc::from("session ended 3h00m ago (tui_shutdown) but pid 502 (hermes-gw) still holds it"));
    let mut snapshot = snap(
        &root,
        Some(4),
        Ok(vec![
            alive(entry("a0000000000000000000000000000001", "chat-1", "cli", 501, 600.0, Some("c-1")), "hermes"),
            leaked,
        ]),
    );
    snapshot.sessions = Some(Arc::new(contexts));
    snapshot
}

#[test]
fn session_context_and_a_leak_suspect() {
    let mut app = leaked_home();
    insta::assert_snapshot!(screen(&app, 120, 30));
    key(&mut app, KeyCode::Char('l'));
    key(&mut app, KeyCode::Enter);
    insta::assert_snapshot!(screen(&app, 160, 30));
    key(&mut app, KeyCode::Char('x'));
    insta::assert_snapshot!(screen(&app, 80, 24));
}

/// The filter finds what the screen shows: the LEAK? mark, a session's title from
/// state.db, an owner's host (an etcd or ssh tab), a badge's words ("clock step?", "work
/// running"). Found by hand on a realistic home: `/LEAK` matched none of the rows it marked.
#[test]
fn the_filter_matches_marks_titles_and_hosts_as_shown() {
    let shown = |app: &App| -> Vec<String> {
        app.lease_rows().iter().map(|(r, l)| app.registries[*r].leases[*l].entry.session_id().to_owned()).collect()
    };
    let mut app = leaked_home();
    for (needle, expected) in [("leak?", vec!["chat-2"]), ("lisbon", vec!["chat-2"]), ("QUARTERLY", vec!["chat-1"])] {
        app.filter = needle.into();
        assert_eq!(shown(&app), expected, "filter {needle:?}");
    }
    app.filter = "!leak".into();
    assert_eq!(shown(&app), ["chat-1"], "!leak hides the suspect");
    // A title state.db changes, the leases unchanged: the rows follow it.
    app.filter = "lisbon".into();
    assert_eq!(shown(&app), ["chat-2"]);
    let mut renamed = leaked_snapshot();
    if let Some(leasectl::lease::home::context::Contexts::Read(by_id)) =
        renamed.sessions.as_mut().and_then(std::sync::Arc::get_mut)
    {
        let renamed_title = |c: leasectl::lease::home::context::ContextRef<'_>| {
            let mut c = c.to_context();
            if c.session_id == "chat-2" {
                c.title = Some("Trip to Porto".into());
            }
            c
        };
        *by_id = by_id.values().map(renamed_title).collect();
    }
    update(&mut app, loaded(vec![renamed]));
    assert_eq!(shown(&app), Vec::<String>::new(), "the old title still matched");

    let at = leasectl::lease::Location::Etcd(Box::new(
        leasectl::lease::EtcdLocation::parse("http://10.0.0.5:2379", None).expect("a location"),
    ));
    let on = |lease: &str, session: &str, host: &str| {
        let mut row = alive(entry(lease, session, "gateway", 4101, 120.0, None), "hermes");
        row.host = Some(host.into());
        row
    };
    let mut app = common::app(vec![snap(
        &at,
        None,
        Ok(vec![
            on("a1000000000000000000000000000001", "chat-a", "gw-1"),
            on("b2000000000000000000000000000002", "chat-b", "gw-2.example.net"),
        ]),
    )]);
    app.filter = "example.net".into();
    assert_eq!(shown(&app), ["chat-b"], "the HOST column");

    let mut app = common::app(vec![mixed_root()]);
    let (r, l) = app.lease_rows()[0];
    app.registries[r].leases[l].liveness = leasectl::lease::Liveness::Recycled { recorded: 100.0, actual: 118.0 };
    app.filter = "clock step".into();
    assert_eq!(shown(&app).len(), 1, "the badge's words: {}", screen(&app, 120, 30));
}

/// A registry the console has never been able to read (chmod 000, another user's): it
/// says so and why, and shows no counts, slots or "no leases held" (none is known).
#[test]
fn a_registry_never_read_shows_no_counts() {
    let app = app(vec![snap(
        &registry("root"),
        None,
        Err("invalid registry /home/op/.hermes/runtime/active_sessions.json: cannot open: Permission denied (os error 13)"
            .into()),
    )]);
    let text = screen(&app, 120, 24);
    assert!(text.contains("leases unknown: the registry cannot be read"), "{text}");
    assert!(text.contains("Permission denied") && text.contains("its leases are unknown"), "{text}");
    for wrong in ["0 alive", "no leases held", "slots 0", "last good snapshot"] {
        assert!(!text.contains(wrong), "says {wrong:?}:\n{text}");
    }
}

/// What a colour says is also said in words (NO_COLOR, a colour-blind reader): a registry
/// over its cap says OVER CAP beside the slots, a full one FULL. A long path is cut from
/// the left, never run into the gauge.
#[test]
fn over_cap_is_a_word_and_a_long_path_keeps_its_end_at_80_columns() {
    let long = leasectl::lease::Location::File(leasectl::lease::home::paths::Registry::new(
        "a-profile-with-a-long-name",
        "/home/operator-with-a-long-name/.hermes/profiles/a-profile-with-a-long-name",
    ));
    let two = vec![
        alive(entry("a1b2c3d4e5f60718293a4b5c6d7e8f90", "S1", "cli", 4101, 60.0, None), "hermes"),
        alive(entry("b1b2c3d4e5f60718293a4b5c6d7e8f90", "S2", "cli", 4102, 60.0, None), "hermes"),
    ];
    let app = app(vec![snap(&long, Some(1), Ok(two))]);
    let text = screen(&app, 80, 24);
    let header = text.lines().nth(2).unwrap_or_default();
    assert!(header.contains("slots 2/1 OVER CAP"), "{text}");
    assert!(header.contains("…") && header.contains("runtime/active_sessions.json "), "cut from the left: {header}");
}

/// A home as operators have them: the root with session titles and a leak suspect, a
/// profile with a conflict over its cap, and one with long surfaces, owners and live ids.
fn rich_home() -> App {
    let mut root = leaked_home();
    let work = registry("work");
    let conflict = snap(
        &work,
        Some(1),
        Ok(vec![
            alive(
                entry("c0000000000000000000000000000003", "chat-9", "desktop", 503, 90.0, Some("d-9")),
                "hermes-desk",
            ),
            alive(entry("d0000000000000000000000000000004", "chat-9", "tui", 504, 30.0, Some("t-9")), "hermes"),
        ]),
    );
    let long = registry("a-profile-with-a-rather-long-name");
    let named = snap(
        &long,
        None,
        Ok(vec![alive(
            entry(
                "e0000000000000000000000000000005",
                "chat-with-a-long-id-0123456789",
                "matrix-gateway-eu-west",
                123456,
                45.0,
                Some("live-session-id-abcdefghijklmnop"),
            ),
            "hermes-gateway-worker",
        )]),
    );
    update(&mut root, loaded(vec![conflict, named]));
    root.tab = root.tab_count() - 1;
    root
}

/// The console at every size an operator uses, on the all tab: snapshots of each, and
/// under NO_COLOR not one coloured cell while every state is still said in words.
#[test]
fn a_rich_home_at_every_size_with_and_without_colour() {
    for (w, h) in [(200, 60), (120, 30), (80, 24), (60, 15), (40, 10)] {
        let mut app = rich_home();
        let text = screen(&app, w, h);
        insta::assert_snapshot!(format!("rich_home_{w}x{h}"), text);
        app.no_color = true;
        let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("terminal");
        terminal.draw(|f| view::render(&app, f)).expect("draw");
        let buffer = terminal.backend().buffer().clone();
        let coloured = buffer
            .content
            .iter()
            .filter(|c| c.fg != ratatui::style::Color::Reset || c.bg != ratatui::style::Color::Reset)
            .count();
        assert_eq!(coloured, 0, "{w}x{h}: coloured cells under NO_COLOR");
        assert_eq!(terminal.backend().to_string(), text, "{w}x{h}: the same words without colour");
        if w >= 80 {
            for word in ["CONFLICT", "LEAK?", "OVER CAP"] {
                assert!(text.contains(word), "{w}x{h}: {word} said in words:\n{text}");
            }
        }
    }
}

/// The details pane and the event log scroll (keys and the wheel over them), and a long
/// log line opens whole: at 120x30 the details cut the session and the owner off, and a
/// 14-lease prune's line was cut with no way to read it.
#[test]
fn details_scroll_and_a_long_log_line_opens_whole() {
    use ratatui::crossterm::event::{MouseEvent, MouseEventKind};
    let mut app = leaked_home();
    app.size = (120, 30);
    app.mouse = true;
    key(&mut app, KeyCode::Enter);
    let before = screen(&app, 120, 30);
    assert!(before.contains("more below (] and [)"), "the cut is said:\n{before}");
    key(&mut app, KeyCode::Char(']'));
    let after = screen(&app, 120, 30);
    assert!(after.contains("↑ 1 more above"), "] scrolled the details:\n{after}");
    // The wheel over the details (beside the table at 120 columns).
    let (title_row, title) =
        after.lines().enumerate().find(|(_, l)| l.contains(" details ")).expect("the details pane");
    // Each screen line is quoted: one character before column 0.
    let column = title.split(" details ").next().map_or(0, |l| l.chars().count()) as u16 + 2;
    let details_row = title_row as u16 + 2;
    let wheel = |kind, row| Event::Mouse(MouseEvent { kind, column, row, modifiers: KeyModifiers::NONE });
    update(&mut app, wheel(MouseEventKind::ScrollDown, details_row));
    assert!(screen(&app, 120, 30).contains("↑ 4 more above"), "{}", screen(&app, 120, 30));
    update(&mut app, wheel(MouseEventKind::ScrollUp, details_row));
    update(&mut app, wheel(MouseEventKind::ScrollUp, details_row));
    assert!(!screen(&app, 120, 30).contains("more above"), "back at the top");
    // A long log line, opened whole from the focused log.
    key(&mut app, KeyCode::Enter);
    let long =
        format!("prune: removed 14 leases {}", (0..14).map(|i| format!("{i:08x}")).collect::<Vec<_>>().join(" "));
    app.log("root", leasectl::tui::event::LogLevel::Change, long.clone());
    key(&mut app, KeyCode::Char('e'));
    key(&mut app, KeyCode::Enter);
    let opened = screen(&app, 120, 30);
    assert!(opened.contains(" event ") && opened.contains("0000000d"), "the whole line:\n{opened}");
    key(&mut app, KeyCode::Esc);
    assert!(!screen(&app, 120, 30).contains(" event "));
}

/// Hundreds of profiles: the tab bar shows the tabs round the selected one and says how
/// many are left out each side; a click on a marker steps to the nearest tab it hides.
/// (All tabs were drawn from the first: the selected one was off the screen.)
#[test]
fn many_profiles_keep_the_selected_tab_in_view_with_more_markers() {
    use ratatui::crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let mut snapshots = vec![snap(&registry("root"), None, Ok(vec![]))];
    snapshots.extend((1..300).map(|i| snap(&registry(&format!("p{i:03}")), None, Ok(vec![]))));
    let mut app = app(snapshots);
    app.size = (80, 24);
    app.mouse = true;
    app.tab = 150;
    let text = screen(&app, 80, 24);
    insta::assert_snapshot!(text);
    let tabs = text.lines().next().unwrap_or_default();
    assert!(tabs.contains("p150") && tabs.contains("‹ ") && tabs.contains(" more ›"), "{tabs}");
    // The "‹ N more" marker is the bar's first title: a click there steps back one tab.
    let first_shown = app.tab;
    let click = Event::Mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: 2,
        row: 0,
        modifiers: KeyModifiers::NONE,
    });
    update(&mut app, click);
    assert!(app.tab < first_shown, "the marker before went back: tab {}", app.tab);
    let back = screen(&app, 80, 24);
    let shown = back.lines().next().unwrap_or_default().to_owned();
    assert!(shown.contains(&format!("p{:03}", app.tab)), "the tab stepped to is shown: {shown}");
    // At the far end only the marker before, and "all" last.
    app.tab = app.tab_count() - 1;
    let end = screen(&app, 80, 24);
    let bar = end.lines().next().unwrap_or_default();
    assert!(bar.contains("all") && bar.contains("‹ ") && !bar.contains("more ›"), "{bar}");
}

/// Where the start time drops its year and seconds, a start on another day keeps its date
/// and time whole (`MM-DD HH:MM`, not `11-26 22…`).
#[test]
fn a_start_on_another_day_is_not_cut_in_a_narrow_column() {
    let started_days_ago =
        alive(entry("f0000000000000000000000000000006", "chat-old", "cli", 606, 3.0 * 86_400.0, None), "hermes");
    let today = alive(entry("a0000000000000000000000000000007", "chat-new", "cli", 607, 60.0, None), "hermes");
    let app = app(vec![snap(&registry("root"), None, Ok(vec![started_days_ago, today]))]);
    let expected = leasectl::tui::time::clock(NOW - 3.0 * 86_400.0 - 5.25, NOW, &jiff::tz::TimeZone::UTC);
    assert_eq!(expected.chars().count(), 11, "{expected}");
    let mut narrow_seen = 0;
    for width in 80..=140 {
        let text = screen(&app, width, 24);
        if !text.contains("STARTED") || text.contains("2026-") {
            continue;
        }
        narrow_seen += 1;
        let row = text.lines().find(|l| l.contains("f0000000")).unwrap_or_default();
        assert!(row.contains(&expected), "{width} columns: {expected} whole in: {row}\n{text}");
    }
    assert!(narrow_seen > 0, "some width shows the narrow start column");
}

/// The banner is as tall as its words wrap to: at 80 columns an invalid registry's banner
/// lost its last line ("rewritten") when its height was the characters over the width.
#[test]
fn an_invalid_registry_banner_is_whole_at_80_columns() {
    let mut app = app(vec![mixed_root()]);
    let err = "invalid registry /home/op/.hermes/profiles/p3/runtime/active_sessions.json: not JSON: key must be a \
               string at line 1 column 2";
    update(&mut app, loaded(vec![snap(&registry("root"), Some(4), Err(err.into()))]));
    for width in [60, 80, 100, 120] {
        let text = screen(&app, width, 24);
        let banner: String = text
            .lines()
            .skip_while(|l| !l.contains("INVALID REGISTRY"))
            .take_while(|l| !l.contains("┌ leases"))
            .collect::<Vec<_>>()
            .join("");
        assert!(banner.contains("rewritten"), "{width}: the banner ends with its last word:\n{text}");
    }
    // Never read: the header says so whole at 80 columns (it was cut at "(see belo").
    let never = common::app(vec![snap(&registry("root"), Some(4), Err(err.into()))]);
    let text = screen(&never, 80, 24);
    assert!(text.contains("leases unknown: cannot be read (see below)"), "{text}");
}

/// On etcd each lease's owner may run on another host: a HOST column, and the details
/// say where the owner is and its TTL (they said "owner process: not running" while the
/// badge said alive). Registry files have no HOST column.
#[test]
fn an_etcd_tab_shows_each_owners_host_and_a_remote_owner_in_words() {
    let at = leasectl::lease::Location::Etcd(Box::new(
        leasectl::lease::EtcdLocation::parse("http://10.0.0.5:2379", None).expect("a location"),
    ));
    let remote = |lease: &str, session: &str, pid: u64, host: &str, ttl: i64| {
        let mut row = alive(entry(lease, session, "gateway", pid, 120.0, None), "hermes");
        row.owner = None;
        row.host = Some(host.into());
        row.ttl_left = Some(ttl);
        row
    };
    let mut app = app(vec![snap(
        &at,
        None,
        Ok(vec![
            remote("a1000000000000000000000000000001", "chat-gw1", 4101, "gw-1", 8),
            remote("b2000000000000000000000000000002", "chat-gw2", 4202, "gw-2.example.net", 7),
        ]),
    )]);
    app.size = (120, 30);
    let table = screen(&app, 120, 30);
    assert!(table.contains("HOST") && table.contains("gw-2.example.net"), "{table}");
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Enter);
    let details = screen(&app, 120, 30);
    insta::assert_snapshot!(details);
    assert!(details.contains("on host gw-2.example.net, pid 4202"), "{details}");
    assert!(details.contains("etcd lease TTL: 7s left when last read"), "{details}");
    assert!(!details.contains("not running"), "{details}");
    // A registry file: no HOST column.
    let files = screen(&common::app(vec![mixed_root()]), 120, 30);
    assert!(!files.contains("HOST"), "{files}");
}

/// etcd not answering is said as that, with since when, in the banner and the log; the
/// time the leases last changed does not move (nothing changed in them).
#[test]
fn an_etcd_outage_is_unreachable_since_a_time_not_an_invalid_registry() {
    let at = leasectl::lease::Location::Etcd(Box::new(
        leasectl::lease::EtcdLocation::parse("http://10.0.0.5:2379", None).expect("a location"),
    ));
    let mut row = alive(entry("a1000000000000000000000000000001", "chat-gw1", "gateway", 4101, 120.0, None), "hermes");
    row.owner = None;
    row.host = Some("gw-1".into());
    let mut app = app(vec![snap(&at, None, Ok(vec![row]))]);
    let changed = app.registries[0].last_change;
    let why = "cannot list the leases on etcd: no endpoint answered (http://10.0.0.5:2379: cannot connect: \
               connection refused; http://10.0.0.6:2379: cannot connect: no route to host; tried again for 5s)";
    let mut down = snap(&at, None, Err(why.into()));
    down.modified = None;
    update(
        &mut app,
        Event::Loaded(leasectl::tui::event::Loaded {
            at: NOW + 30.0,
            first: 0,
            initial: false,
            snapshots: vec![down],
            large_read_done: false,
            owners_moved: None,
        }),
    );
    let text = screen(&app, 120, 30);
    assert!(text.contains("ETCD UNREACHABLE since 22:19:48"), "{text}");
    assert!(!text.contains("INVALID"), "{text}");
    let log: Vec<&str> = app.log.iter().map(|l| l.text.as_str()).collect();
    assert!(log.iter().any(|l| l.starts_with("etcd-unreachable: ")), "{log:?}");
    assert_eq!(app.registries[0].last_change, changed, "an outage changes no lease");
    // At 80x24 the banner is whole (it was cut at 4 lines) and the stale lease still shows.
    let small = screen(&app, 80, 24);
    let flat = small.lines().map(|l| l.trim_matches(|c| c == '"' || c == ' ')).collect::<Vec<_>>().join(" ");
    assert!(flat.contains("no route to host; tried again for 5s)"), "{small}");
    assert!(flat.contains("nothing is rewritten") && small.contains("chat-gw1"), "{small}");
}

/// Hundreds of profiles: `T` and a name jump to that profile's tab as it is typed (Tab is
/// one step at a time); Enter stays there, Esc goes back, a name no tab has is said.
#[test]
fn t_jumps_to_a_profile_tab_by_name_as_it_is_typed() {
    let mut snapshots = vec![snap(&registry("root"), None, Ok(vec![]))];
    snapshots.extend((1..300).map(|i| snap(&registry(&format!("p{i:03}")), None, Ok(vec![]))));
    let mut app = app(snapshots);
    let name = |app: &App| app.registries.get(app.tab).map(|r| r.location.name().to_owned()).unwrap_or_default();
    key(&mut app, KeyCode::Char('T'));
    for c in "p25".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    assert_eq!(name(&app), "p250", "the first that starts with p25");
    key(&mut app, KeyCode::Char('7'));
    assert_eq!(name(&app), "p257");
    let text = screen(&app, 80, 24);
    assert!(text.contains("go to tab: p257▏") && text.contains("Enter stay"), "{text}");
    assert!(text.lines().next().is_some_and(|tabs| tabs.contains("p257")), "the tab is in view:\n{text}");
    key(&mut app, KeyCode::Enter);
    assert!(app.tab_input.is_none() && name(&app) == "p257", "Enter stays");
    // A name no tab has: said, and the tab stays; Esc goes back to where it started.
    key(&mut app, KeyCode::Char('T'));
    for c in "p0".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    assert_eq!(name(&app), "p001");
    for c in "zz".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    assert_eq!(name(&app), "p001", "no tab is p0zz: the tab stays");
    assert!(screen(&app, 80, 24).contains("no tab has that in its name"));
    key(&mut app, KeyCode::Esc);
    assert_eq!(name(&app), "p257", "Esc goes back");
    // The "all" tab is a tab too ("no tab has that" would be false).
    key(&mut app, KeyCode::Char('T'));
    for c in "al".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    assert_eq!(app.tab, app.registries.len(), "the all tab");
    assert!(!screen(&app, 80, 24).contains("no tab has"));
    key(&mut app, KeyCode::Enter);
    // The help lists it.
    key(&mut app, KeyCode::Char('?'));
    assert!(screen(&app, 120, 60).contains("go to a profile's tab by name"));
}

/// Over --host a host that cannot be reached is one banner line for all its registries
/// (not one a profile), with its count; the header says the cap is unknown, not "no cap";
/// a host that answers is not bannered.
#[test]
fn an_unreachable_host_is_one_banner_for_all_its_registries() {
    use leasectl::lease::address::host_spec::HostSpec;
    use leasectl::lease::{Error, Location};
    let at = |spec: &str, profile: &str| Location::on_host(HostSpec::parse(spec).expect("spec"), profile.into());
    let down = |location: Location| {
        let mut s = snap(&location, None, Ok(vec![]));
        s.leases = Err(Error::Unreachable {
            host: "gw2".into(),
            why: "ssh could not connect or log in".into(),
            fault: leasectl::lease::HostFault::Unreachable,
        });
        s
    };
    let snapshots = vec![
        snap(&at("gw1=ssh://gw1", "root"), Some(4), Ok(vec![])),
        down(at("gw2=ssh://gw2", "root")),
        down(at("gw2=ssh://gw2", "work")),
    ];
    let mut app = app(snapshots);
    key(&mut app, KeyCode::Char('T'));
    for c in "all".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    key(&mut app, KeyCode::Enter);
    let text = screen(&app, 120, 30);
    assert_eq!(text.matches("HOST UNREACHABLE").count(), 1, "{text}");
    assert!(text.contains("(gw2: 2 registries)"), "{text}");
    assert!(text.contains("3 registries on 2 hosts"), "{text}");
    key(&mut app, KeyCode::Char('T'));
    for c in "gw2:w".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    key(&mut app, KeyCode::Enter);
    let text = screen(&app, 120, 30);
    assert!(text.contains("HOST UNREACHABLE since") && text.contains("(gw2:work): host gw2 is unreachable"), "{text}");
    assert!(text.contains("cap unknown"), "{text}");
    assert!(!text.contains("no cap") && !text.contains("no file yet"), "{text}");
}

/// A host that answered it cannot serve (a home it does not have) is not "unreachable".
#[test]
fn a_host_that_answered_it_cannot_serve_is_not_said_unreachable() {
    use leasectl::lease::address::host_spec::HostSpec;
    use leasectl::lease::{Error, Location};
    let at = Location::on_host(HostSpec::parse("gw3=ssh://gw3/srv/h").expect("spec"), "root".into());
    let mut s = snap(&at, None, Ok(vec![]));
    s.leases = Err(Error::Unreachable {
        host: "gw3".into(),
        why: "the Hermes home /srv/h does not exist on gw3".into(),
        fault: leasectl::lease::HostFault::CannotServe,
    });
    let app = app(vec![s]);
    let text = screen(&app, 120, 30);
    assert!(text.contains("HOST CANNOT SERVE since") && text.contains("host gw3 answered: the Hermes home"), "{text}");
    assert!(!text.contains("UNREACHABLE") && !text.contains("unreachable"), "{text}");
    let log: Vec<&str> = app.log.iter().map(|l| l.text.as_str()).collect();
    assert!(!log.iter().any(|l| l.contains("unreachable")), "{log:?}");
    assert!(log.iter().any(|l| l.starts_with("host-cannot-serve: host gw3 answered: ")), "the README's event: {log:?}");
}

/// The all tab over mixed caps: one empty profile without a cap does not turn the total
/// into `slots N live, no cap` while another registry is over its cap (it did); the
/// header's `+N` says of what.
#[test]
fn the_all_tab_over_mixed_caps_says_who_is_over() {
    let root = registry("root");
    let over = snap(
        &root,
        Some(1),
        Ok(vec![
            alive(entry("a1000000000000000000000000000001", "chat-1", "cli", 4101, 60.0, None), "hermes"),
            alive(entry("a2000000000000000000000000000002", "chat-2", "cli", 4102, 30.0, None), "hermes"),
        ]),
    );
    let mut snapshots = vec![over];
    snapshots
        .extend((1..=6).map(|i| snap(&registry(&format!("p{i}")), if i == 1 { None } else { Some(8) }, Ok(vec![]))));
    let mut app = app(snapshots);
    app.tab = app.registries.len();
    let text = screen(&app, 80, 24);
    let header: String = text.lines().skip(1).take(4).collect();
    assert!(!header.contains("no cap   "), "the total is not 'no cap':\n{text}");
    assert!(header.contains("slots 2/41 1 OVER CAP"), "{text}");
    assert!(header.contains("root 2/1 OVER CAP") && header.contains("registries"), "{text}");
}

/// An owner `/proc` hides from this user (hidepid) is shown as hidden, not dead: its
/// badge, the count beside the others, and in its details why and how to see it.
#[test]
fn an_owner_proc_hides_is_shown_hidden_with_why() {
    use leasectl::lease::owners::liveness::{Liveness, UnknownCause};
    let why = "pid 4242 runs (the kernel says so) but this user cannot see it (/proc is mounted hidepid=invisible); \
               run as root or in /proc's gid group to see its owner";
    let mut hidden = dead(entry("c0000000000000000000000000000003", "chat-h", "gateway", 4242, 600.0, Some("g-h")));
    hidden.liveness = Liveness::Unknown(UnknownCause::Hidden(why.into()));
    let busy = alive(entry("a0000000000000000000000000000001", "chat-a", "cli", 501, 60.0, Some("t-a")), "hermes");
    let mut app = app(vec![snap(&registry("root"), Some(2), Ok(vec![busy, hidden]))]);
    let shown = screen(&app, 120, 30);
    assert!(shown.contains("◌ hidden"), "{shown}");
    assert!(shown.contains("♻ 0 recycled  ◌ 1 hidden"), "{shown}");
    assert!(!shown.contains("✖ dead") && shown.contains("2/2"), "counted toward the cap, not dead: {shown}");
    app.filter = "hidden".into();
    key(&mut app, KeyCode::Enter);
    let details = screen(&app, 160, 30);
    assert!(details.contains("liveness: hidden: pid 4242 runs (the kernel says so)"), "{details}");
    assert!(details.contains("owner process: pid 4242, hidden from this user by /proc"), "{details}");
}

/// A registry left in a deleted profile (its leases still held) has a tab, marked, and
/// the tab says why it is there.
#[test]
fn a_deleted_profiles_registry_is_shown_marked_with_why() {
    use leasectl::lease::home::profiles::Standing;
    let gone = leasectl::lease::Location::File(leasectl::lease::Registry::with_standing(
        "gone",
        "/home/op/.hermes/profiles/gone",
        Standing::Deleted,
    ));
    let held = alive(entry("d0000000000000000000000000000004", "chat-g", "cli", 601, 60.0, Some("t-g")), "hermes");
    let mut app = app(vec![snap(&registry("root"), None, Ok(vec![])), snap(&gone, None, Ok(vec![held]))]);
    key(&mut app, KeyCode::Tab);
    let shown = screen(&app, 120, 30);
    assert!(shown.contains("gone (deleted)"), "{shown}");
    assert!(
        shown.contains("NOT A LIVE PROFILE: gone, deleted (profiles/.deleted/gone); shown while its registry holds"),
        "{shown}"
    );
    assert!(shown.contains("chat-g"), "its lease is shown: {shown}");
}
