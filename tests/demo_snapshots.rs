//! Snapshot tests of the demo's playground panel, each refusal panel and a form.

use crate::common;

use common::*;
use leasectl::demo::state::TourNote;
use leasectl::demo::tour::Beat;
use leasectl::demo::{DemoState, Outcome, OwnerView, Verdict};
use leasectl::lease::Reason;
use leasectl::lease::words::refusal::{capacity_message, not_owned_message, unavailable_message};
use leasectl::tui::event::Event;
use leasectl::tui::state::App;
use leasectl::tui::update::update;
use leasectl::tui::view;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const HOLDER: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90";

fn demo_app() -> App {
    let root = registry("root");
    let mut app = app(vec![snap(
        &root,
        None,
        Ok(vec![
            alive(entry(HOLDER, "S1", "tui", 4101, 65.0, Some("tab-1")), "leasectl"),
            alive(entry("b2c3d4e5f60718293a4b5c6d7e8f90a1", "S2", "cli", 4102, 30.0, Some("tab-2")), "leasectl"),
        ]),
    )]);
    let mut demo = DemoState::new("/tmp/leasectl-demo-0123456789".into(), true);
    demo.owners = vec![
        OwnerView { pid: 4101, session: "S1".into(), surface: "tui".into(), live_id: "tab-1".into(), running: true },
        OwnerView { pid: 4102, session: "S2".into(), surface: "cli".into(), live_id: "tab-2".into(), running: true },
        OwnerView { pid: 4100, session: "S0".into(), surface: "gateway".into(), live_id: "gw".into(), running: false },
    ];
    app.extension = Some(Box::new(demo));
    app
}

/// The demo's state inside the console.
fn demo_of(app: &mut App) -> &mut DemoState {
    app.extension.as_mut().and_then(|x| x.as_any_mut().downcast_mut::<DemoState>()).expect("demo")
}

fn refused(app: &mut App, reason: Reason, message: String, holder: Option<&str>) {
    let demo = demo_of(app);
    demo.last = Some(Outcome {
        action: "acquire S1 as a new owner process (live id tab-9)".into(),
        verdict: Verdict::Refused {
            reason,
            message,
            advice: reason.advice().into(),
            holder: holder.map(str::to_owned),
        },
        lease: holder.map(str::to_owned),
    });
}

fn screen(app: &App) -> String {
    let mut terminal = Terminal::new(TestBackend::new(120, 36)).expect("terminal");
    terminal.draw(|f| view::render(app, f)).expect("draw");
    terminal.backend().to_string()
}

#[test]
fn playground_panel() {
    insta::assert_snapshot!(screen(&demo_app()));
}

#[test]
fn refused_session_not_owned() {
    let mut app = demo_app();
    let holder = (*app.registries[0].leases[0].entry).clone();
    refused(&mut app, Reason::SessionNotOwned, not_owned_message("S1", &holder, NOW), Some(HOLDER));
    insta::assert_snapshot!(screen(&app));
}

#[test]
fn refused_max_concurrent_sessions() {
    let mut app = demo_app();
    let entries: Vec<_> = app.registries[0].leases.iter().map(|l| (*l.entry).clone()).collect();
    refused(&mut app, Reason::MaxConcurrentSessions, capacity_message(2, 2, &entries, NOW), Some(HOLDER));
    insta::assert_snapshot!(screen(&app));
}

#[test]
fn refused_session_coordination_unavailable() {
    let mut app = demo_app();
    let err =
        leasectl::lease::Error::Refused("invalid registry: not JSON: EOF while parsing at line 1 column 97".into());
    let path = leasectl::lease::Registry::new("root", "/home/op/.hermes").path();
    refused(&mut app, Reason::SessionCoordinationUnavailable, unavailable_message(&path, &err), None);
    insta::assert_snapshot!(screen(&app));
}

#[test]
fn granted_same_writer_and_the_tour_note() {
    let mut app = demo_app();
    let demo = demo_of(&mut app);
    demo.tour_note = Some(TourNote {
        beat: Beat::Outcome(1),
        title: "2/9 The same writer may re-acquire its own lease".into(),
        why: "Re-entrancy, not a second writer.".into(),
        shows: None,
        summary: vec![],
        of: None,
    });
    demo.next_beat = 3;
    demo.last = Some(Outcome {
        action: "acquire S1 as demo owner #1 (live id tab-1)".into(),
        verdict: Verdict::Granted {
            lease_id: "c3d4e5f60718293a4b5c6d7e8f90a1b2".into(),
            session: "S1".into(),
            pid: 4101,
            replaced: Some(HOLDER.into()),
            pruned: 1,
        },
        lease: Some("c3d4e5f60718293a4b5c6d7e8f90a1b2".into()),
    });
    insta::assert_snapshot!(screen(&app));
}

#[test]
fn spawn_owner_form() {
    let mut app = demo_app();
    update(&mut app, Event::Key(KeyEvent::new(KeyCode::Char('o'), KeyModifiers::NONE)));
    insta::assert_snapshot!(screen(&app));
}

/// Below the smallest size the demo draws in, it says what it is, the size it needs and
/// how to quit; from 70x20 up it draws (80x24, the default terminal, included).
#[test]
fn the_demo_below_its_size_says_what_it_needs() {
    let app = demo_app();
    let mut terminal = Terminal::new(TestBackend::new(60, 18)).expect("terminal");
    terminal.draw(|f| view::render(&app, f)).expect("draw");
    let text = terminal.backend().to_string().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("demo needs 70x20; now 60x18") && text.contains("press q to quit"), "{text}");
    for (w, h) in [(70, 20), (80, 24), (120, 36)] {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("terminal");
        terminal.draw(|f| view::render(&app, f)).expect("draw");
        let shown = terminal.backend().to_string();
        assert!(shown.contains(" result ") && shown.contains(" leases "), "{w}x{h}:\n{shown}");
    }
}

/// The tour corrupts the registry: its banner takes two rows at 120x36. The event log
/// gives way rather than the header's last line (it was squeezed off, found by hand).
#[test]
fn a_corrupted_registry_banner_in_the_demo_keeps_the_header_whole() {
    let mut app = demo_app();
    let broken = snap(
        &registry("root"),
        None,
        Err("invalid registry /tmp/leasectl-demo-0123456789/runtime/active_sessions.json: not JSON: EOF while \
             parsing a string at line 1 column 386"
            .into()),
    );
    update(&mut app, loaded(vec![broken]));
    let text = screen(&app);
    assert!(text.contains("INVALID REGISTRY"), "{text}");
    assert!(text.lines().any(|l| l.contains("│changed ") && l.contains("no cap")), "the header's last line:\n{text}");
    assert!(text.contains("┌ playground"), "{text}");
}
