//! The guided tour walked as a person walks it: the real demo in a real pseudo-terminal at
//! 80x24 (the default terminal), 120x36 and 200x60, seconds between keys (longer than the
//! console's 1 s tick and an owner's 250 ms poll). Every screen is checked for what the
//! beat is about: the scene's state in the table and header (the dead owner shown dead,
//! the recycled pid shown recycled, the full cap shown full), then the outcome's verdict
//! with the lease it concerns in view; every result is paged through to its end. Where
//! the event log is on screen, its order is checked: what the playground did, what the
//! registry then showed, then the outcome.

use std::path::Path;
use std::thread;
use std::time::Duration;

use leasectl::demo::tour::{Beat, beats, steps};

use crate::demo_pty::{Demo, children_of, playground_lines, proc_state, sandboxes};

/// Between keys: a person reading, longer than anything the demo or an owner polls at.
const PACE: Duration = Duration::from_millis(2000);
/// How long a beat may take to show (it starts real processes).
const SHOWS_WITHIN: Duration = Duration::from_secs(8);

/// The panel whose top border starts with `┌ {title}`: its inner lines, and its bottom
/// border (which says what is scrolled out of view).
fn panel(screen: &str, title: &str) -> (Vec<String>, String) {
    let rows: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let top = format!("┌ {title}");
    let found = rows.iter().enumerate().find_map(|(y, row)| {
        let text: String = row.iter().collect();
        let byte = text.find(&top)?;
        Some((y, text[..byte].chars().count()))
    });
    let Some((y, x)) = found else { return (vec![], String::new()) };
    let mut inner = Vec::new();
    for row in &rows[y + 1..] {
        let from: String = row.iter().skip(x).collect();
        if from.starts_with('└') {
            return (inner, from);
        }
        // The panel's inner text, between its side borders.
        let body: String = from.chars().skip(1).collect();
        let body = body.split('│').next().unwrap_or_default();
        inner.push(body.trim_end().to_owned());
    }
    (inner, String::new())
}

/// Lines joined as one text, runs of spaces made one: wrapped words read as they were written.
fn flat(lines: &[String]) -> String {
    lines.join(" ").split_whitespace().collect::<Vec<_>>().join(" ")
}

fn result_text(screen: &str) -> String {
    flat(&panel(screen, "result").0)
}

fn table(screen: &str) -> Vec<String> {
    panel(screen, "leases").0
}

fn header(screen: &str) -> String {
    flat(&panel(screen, "leasectl").0)
}

/// The table's lease row for `session` that also says `word` (a row of the session's
/// lease follows its session row).
fn lease_says(screen: &str, session: &str, word: &str) -> bool {
    let rows = table(screen);
    rows.iter().enumerate().any(|(i, r)| {
        r.contains(&format!(" {session} "))
            && rows[i + 1..].iter().take_while(|l| l.starts_with("  ")).any(|l| l.contains(word))
    })
}

/// What a beat must show, on the screen as drawn, before the next key.
fn beat_shows(beat: Beat, screen: &str) -> Result<(), String> {
    let result = result_text(screen);
    let head = header(screen);
    let step = beat.step().map(|i| steps()[i].clone());
    if let Some(step) = &step {
        let title = step.title.split_whitespace().collect::<Vec<_>>().join(" ");
        if !result.starts_with(&title) {
            return Err(format!("the result does not open with the step's title {title:?}"));
        }
    }
    let tag = |t: &str| if result.contains(t) { Ok(()) } else { Err(format!("the result does not say {t:?}")) };
    let on_screen = |ok: bool, what: &str| if ok { Ok(()) } else { Err(format!("not on screen: {what}")) };
    match beat {
        Beat::Scene(0) => {
            tag("· scene 1/2")?;
            on_screen(lease_says(screen, "tour-1", "● alive"), "tour-1's lease, alive")
        }
        Beat::Outcome(0) => {
            tag("· outcome 2/2")?;
            tag("✖ REFUSED SESSION_NOT_OWNED")?;
            on_screen(lease_says(screen, "tour-1", "◀ blocking"), "tour-1's lease marked blocking")
        }
        Beat::Outcome(1) => {
            tag("✔ GRANTED")?;
            on_screen(lease_says(screen, "tour-1", "● alive"), "tour-1's lease, alive")
        }
        Beat::Scene(2) => {
            tag("· scene 1/2")?;
            on_screen(head.contains("2/2 FULL"), "the header's 2/2 FULL")?;
            on_screen(lease_says(screen, "tour-1", "● alive") && lease_says(screen, "tour-2", "● alive"), "both owners")
        }
        Beat::Outcome(2) => {
            tag("· outcome 2/2")?;
            tag("✖ REFUSED MAX_CONCURRENT_SESSIONS")?;
            on_screen(table(screen).iter().any(|r| r.contains("◀ blocking")), "the blocking lease")
        }
        Beat::Scene(3) => {
            tag("· scene 1/2")?;
            on_screen(head.contains("✖ 1 dead"), "the header's ✖ 1 dead")?;
            on_screen(lease_says(screen, "tour-1", "✖ dead"), "tour-1's lease, dead")
        }
        Beat::Outcome(3) => {
            tag("· outcome 2/2")?;
            tag("✔ GRANTED")?;
            on_screen(head.contains("✖ 0 dead"), "the header's ✖ 0 dead")?;
            on_screen(lease_says(screen, "tour-1", "desktop"), "tour-1's new desktop lease")
        }
        Beat::Scene(4) => {
            tag("· scene 1/2")?;
            tag("The cap is cleared")?;
            on_screen(head.contains("♻ 1 recycled") && head.contains("no cap"), "♻ 1 recycled, no cap")?;
            on_screen(lease_says(screen, "tour-5", "♻ recycled"), "tour-5's lease, recycled")
        }
        Beat::Outcome(4) => {
            tag("· outcome 2/2")?;
            tag("✔ GRANTED")?;
            on_screen(head.contains("♻ 0 recycled"), "the header's ♻ 0 recycled")?;
            on_screen(lease_says(screen, "tour-5", "● alive"), "tour-5's new lease, alive")
        }
        Beat::Outcome(5) => {
            tag("LEAK?: session ended")?;
            on_screen(lease_says(screen, "tour-2", "LEAK?"), "tour-2's lease marked LEAK?")
        }
        Beat::Scene(6) => {
            tag("· scene 1/2")?;
            on_screen(lease_says(screen, "tour-7", "● alive"), "tour-7's unwatching owner, alive")
        }
        Beat::Outcome(6) => {
            tag("· outcome 2/2")?;
            tag("✔ GRANTED")?;
            on_screen(lease_says(screen, "tour-7", "cli"), "tour-7's second owner's lease")
        }
        Beat::Scene(7) => {
            tag("· scene 1/2")?;
            on_screen(lease_says(screen, "tour-8", "● alive"), "tour-8's unwatching owner, alive")
        }
        Beat::Outcome(7) => {
            tag("· outcome 2/2")?;
            tag("✔ GRANTED")?;
            on_screen(lease_says(screen, "tour-8", "cli"), "tour-8's new owner's lease")
        }
        Beat::Scene(8) => {
            tag("· scene 1/2")?;
            on_screen(screen.contains("INVALID REGISTRY"), "the invalid-registry banner")
        }
        Beat::Outcome(8) => {
            tag("· outcome 2/2")?;
            tag("✖ REFUSED SESSION_COORDINATION_UNAVAILABLE")
        }
        Beat::End => tag("The end of the tour"),
        other => Err(format!("no check written for {other:?}")),
    }
}

/// Page the result panel to its end (`}`, a person's pause between pages), and return all
/// of it as read; then page back to its top (`{`).
fn read_whole_result(demo: &mut Demo) -> String {
    let mut read = result_text(&demo.text());
    for page in 0.. {
        let (_, foot) = panel(&demo.text(), "result");
        if !foot.contains('↓') {
            break;
        }
        assert!(page < 20, "the result never ends:\n{}", demo.text());
        let before = demo.text();
        demo.send(b"}");
        demo.wait_for("the next page of the result", Duration::from_secs(3), |s| s != before);
        thread::sleep(PACE);
        read.push(' ');
        read.push_str(&result_text(&demo.text()));
    }
    let (_, foot) = panel(&demo.text(), "result");
    if foot.contains('↑') {
        demo.send(b"{");
        demo.wait_for("the result paged back up", Duration::from_secs(3), |s| {
            !panel(s, "result").1.contains('↑') || s.contains('↓')
        });
    }
    read
}

/// The event log's lines, oldest first (where the log is on screen).
fn log_lines(screen: &str) -> Vec<String> {
    panel(screen, "events").0
}

/// `firsts` appear in the log in this order (each the first line after the previous that
/// contains it).
fn in_order(log: &[String], firsts: &[&str]) -> Result<(), String> {
    let mut at = 0;
    for want in firsts {
        match log[at..].iter().position(|l| l.contains(want)) {
            Some(i) => at += i + 1,
            None => return Err(format!("{want:?} is not after {:?}", firsts.split(|w| w == want).next())),
        }
    }
    Ok(())
}

fn walk(rows: u16, cols: u16) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start_sized(tmp.path(), rows, cols);
    demo.wait_for("the demo drawn", Duration::from_secs(5), |s| s.contains("Press t for the guided tour"));
    let found = sandboxes(tmp.path());
    assert_eq!(found.len(), 1, "one sandbox: {found:?}");
    let sandbox = found[0].clone();
    demo.remember(&sandbox, &[]);
    // At 120x36 the log keeps its last 4 lines: the whole story of a beat needs 200x60.
    let with_log = rows >= 60;
    let with_box = cols >= 110;
    thread::sleep(PACE);
    for beat in beats() {
        demo.send(b"t");
        let took = demo.wait_for(&format!("{rows}x{cols} {beat:?}"), SHOWS_WITHIN, |s| beat_shows(beat, s).is_ok());
        eprintln!("{cols}x{rows} {beat:?} shown after {took:?}");
        thread::sleep(PACE);
        let screen = demo.text();
        if let Err(why) = beat_shows(beat, &screen) {
            panic!("{cols}x{rows} {beat:?}, {PACE:?} later: {why}:\n{screen}");
        }
        remember_owners(&mut demo, &sandbox);
        let read = read_whole_result(&mut demo);
        check_read(beat, &read, &screen);
        if with_log {
            check_log(beat, &demo.text());
        }
        if beat == Beat::Outcome(5) {
            release_the_leak_and_see_its_owner_reaped(&mut demo, with_box);
        }
    }
    // Start again: the playground reset (no banner, no tour-5), step 1's scene on screen.
    demo.send(b"t");
    demo.wait_for("the tour again, on a reset playground", SHOWS_WITHIN, |s| {
        beat_shows(Beat::Scene(0), s).is_ok() && !s.contains("INVALID REGISTRY") && !lease_says(s, "tour-5", "")
    });
    thread::sleep(PACE);
    demo.send(b"q");
    let (status, _) = demo.wait_exit(Duration::from_secs(5));
    assert!(status.success(), "q: {status:?}");
    assert!(!sandbox.exists(), "the sandbox is removed");
}

/// The pids the playground's box lists, for the cleanup if the test fails.
fn remember_owners(demo: &mut Demo, sandbox: &Path) {
    let pids: Vec<u32> =
        playground_lines(&demo.text()).iter().filter_map(|l| l.split_whitespace().nth(2)?.parse().ok()).collect();
    demo.remember(sandbox, &pids);
}

/// Paged to its end, each result says all it has: the why, and for a refusal what to do.
fn check_read(beat: Beat, read: &str, screen: &str) {
    let Some(step) = beat.step().map(|i| steps()[i].clone()) else {
        for want in [
            "SESSION_NOT_OWNED (exit 3)",
            "MAX_CONCURRENT_SESSIONS (exit 4)",
            "SESSION_COORDINATION_UNAVAILABLE (exit 5)",
            " prune`",
            " doctor --repair`",
            " force-release ID --live`",
            "Press t to start again",
        ] {
            assert!(read.contains(want), "the ending does not say {want:?}: {read}\n{screen}");
        }
        return;
    };
    let why: String = step.why.split_whitespace().take(8).collect::<Vec<_>>().join(" ");
    assert!(read.contains(&why), "{beat:?}: the why ({why:?}) was never on screen: {read}");
    if matches!(beat, Beat::Outcome(0 | 2 | 8)) {
        assert!(read.contains("what to do:"), "{beat:?}: no advice on any page: {read}");
    }
    if let Beat::Scene(_) = beat {
        assert!(read.contains("Press t:"), "{beat:?}: the scene does not say what t does next: {read}");
    }
}

/// The log reads cause, effect, outcome: the tour's announcement, the registry's change,
/// then what the action came to.
fn check_log(beat: Beat, screen: &str) {
    let log = log_lines(screen);
    let order: &[&str] = match beat {
        Beat::Scene(2) => &["tour 3/9, the scene", "cap-changed: none -> 2", "acquired: session tour-2", "→ GRANTED"],
        Beat::Outcome(2) => &["acquired: session tour-2", "tour 3/9, the outcome", "→ REFUSED MAX_CONCURRENT_SESSIONS"],
        Beat::Scene(3) => &["tour 4/9, the scene", "owner-died: session tour-1", "SIGKILL"],
        Beat::Outcome(3) => {
            &["tour 4/9, the outcome", "pruned: session tour-1", "acquired: session tour-1", "after pruning 1"]
        }
        Beat::Scene(4) => &["tour 5/9, the scene", "cap-changed: 2 -> none", "session tour-5", "fake a recycled pid"],
        _ => &[],
    };
    if let Err(why) = in_order(&log, order) {
        panic!("{beat:?}: the log is out of order: {why}:\n{}", log.join("\n"));
    }
}

/// Step 6's LEAK? lease is selected: `x`, then `!` (a live owner: the deliberate key)
/// releases it; its `hold` exits and the playground reaps it at once and shows it gone.
fn release_the_leak_and_see_its_owner_reaped(demo: &mut Demo, with_box: bool) {
    demo.send(b"x");
    demo.wait_for("the release dialog for the LEAK? lease", Duration::from_secs(3), |s| {
        s.contains("Type the session id tour-2")
    });
    thread::sleep(PACE);
    demo.send(b"tour-2");
    thread::sleep(PACE);
    demo.send(b"\r");
    demo.wait_for("tour-2's lease gone", Duration::from_secs(5), |s| !lease_says(s, "tour-2", ""));
    let demo_pid = demo.pid();
    let reaped = crate::common::pty::eventually(Duration::from_secs(3), || {
        children_of(demo_pid).iter().all(|(_, state)| *state != 'Z')
    });
    assert!(reaped, "the demo left a zombie: {:?}", children_of(demo_pid));
    if with_box {
        demo.wait_for("the exited owner shown ✖ in the playground", Duration::from_secs(3), |s| {
            playground_lines(s).iter().any(|l| l.starts_with('✖') && l.contains("tour-2"))
        });
    }
    thread::sleep(PACE);
    let _ = proc_state;
}

#[test]
fn the_tour_at_80x24() {
    crate::common::clock::again_if_the_clock_stepped("the tour at 80x24", || walk(24, 80));
}

#[test]
fn the_tour_at_120x36() {
    crate::common::clock::again_if_the_clock_stepped("the tour at 120x36", || walk(36, 120));
}

#[test]
fn the_tour_at_200x60() {
    crate::common::clock::again_if_the_clock_stepped("the tour at 200x60", || walk(60, 200));
}

/// Below its smallest size the demo says what it is, what it needs and how to quit, and
/// no key acts but `?` and `q`: every playground and console key typed there (a person
/// trying them, seconds apart) starts nothing; enlarged, it is where it was.
#[test]
fn a_size_note_swallows_every_acting_key() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start_sized(tmp.path(), 18, 60);
    demo.wait_for("the size note", Duration::from_secs(5), |s| {
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        s.contains("leasectl: demo needs 70x20; now 60x18") && s.contains("press q to quit")
    });
    let found = sandboxes(tmp.path());
    assert_eq!(found.len(), 1, "one sandbox: {found:?}");
    let sandbox = found[0].clone();
    demo.remember(&sandbox, &[]);
    let registry = sandbox.join("runtime").join("active_sessions.json");
    for key in [&b"t"[..], b"o", b"\r", b"a", b"\r", b"c", b"C", b"f", b"K", b"R", b"}", b"p", b"x", b"F", b"\t", b"/"]
    {
        demo.send(key);
        thread::sleep(Duration::from_millis(1200));
        let kids = children_of(demo.pid());
        assert!(kids.is_empty(), "{:?} started processes {kids:?} behind the size note", String::from_utf8_lossy(key));
        let entries = crate::common::pty::registry_entries(&registry).unwrap_or_default();
        assert!(
            entries.is_empty(),
            "{:?} wrote the registry behind the note: {entries:?}",
            String::from_utf8_lossy(key)
        );
        assert!(!sandbox.join("config.yaml").exists(), "{:?} set a cap behind the note", String::from_utf8_lossy(key));
        assert!(
            demo.text().contains("Enlarge the window"),
            "{:?} left the note:\n{}",
            String::from_utf8_lossy(key),
            demo.text()
        );
    }
    // `?` shows the help, drawn whole over the note; Esc goes back to the note.
    demo.send(b"?");
    demo.wait_for("the help over the note", Duration::from_secs(3), |s| {
        s.contains("┌ help") && s.contains("Esc closes this help") && !s.contains("Enlarge the window")
    });
    thread::sleep(PACE);
    demo.send(b"\x1b");
    demo.wait_for("the note again", Duration::from_secs(3), |s| s.contains("Enlarge the window"));
    // Enlarged to the default terminal: the demo as it started, no tour step begun, no owner.
    demo.resize(24, 80);
    demo.wait_for("the demo at 80x24", Duration::from_secs(3), |s| s.contains("Press t for the guided tour"));
    thread::sleep(PACE);
    let screen = demo.text();
    assert!(!screen.contains("1/9") && children_of(demo.pid()).is_empty(), "something ran unseen:\n{screen}");
    assert!(table(&screen).iter().any(|r| r.contains("no leases held")), "{screen}");
    demo.send(b"q");
    let (status, _) = demo.wait_exit(Duration::from_secs(5));
    assert!(status.success(), "q: {status:?}");
}
