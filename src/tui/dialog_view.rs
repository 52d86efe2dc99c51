//! The console's dialogs: one builder per dialog (what it says, the list that scrolls,
//! the lines always shown below it), and the one layout that draws any of them.

use crate::lease::words::human::plural;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::event::LeaseRow;
use super::keys::{self, CONFIRM_KEYS, CONSOLE_KEYS, Edit, FORCE_KEYS, KeyRow, answer_hint};
use super::state::{App, Dialog};
use super::style::{Palette, centered, lease_summary, shown_text};
use crate::lease::Location;

/// A dialog's text: its title, the list that scrolls, the lines always shown below it.
struct DialogText<'a> {
    title: &'static str,
    lines: Vec<Line<'a>>,
    footer: Vec<Line<'a>>,
}

fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

/// The marks the console shows and what each means (the help lists them all).
const MARKS: &[(&str, &str)] = &[
    ("● alive", "the owner process runs (its start time matches)"),
    ("⧉ ns", "alive in a container (another pid namespace): its pid here differs from the recorded one"),
    ("✖ dead", "the owner is gone: prune or release removes the lease"),
    ("♻ recycled", "the pid now belongs to another process: the owner is gone"),
    ("clock step?", "recycled by whole seconds: most likely the owner across a clock step"),
    ("? unknown", "cannot tell (another user's process, /proc unreadable): kept"),
    ("◌ hidden", "/proc hides the owner from this user (hidepid): kept, counted live"),
    ("⏻ ENDING", "a stop (S) is ending its owner: SIGTERM, then SIGKILL after the grace"),
    ("⚙ WORK RUNNING", "a dead `run` owner whose work still runs"),
    ("CONFLICT", "two live owners of one session"),
    ("OVER CAP", "more live leases than the cap (FULL: exactly at it)"),
    ("LEAK?", "a live owner whose session ended or went idle (state.db)"),
    (
        "STALE",
        "the registry cannot be read now (invalid, or etcd or its host unreachable): its last good reading is shown",
    ),
    ("HOST UNREACHABLE", "--host: no ssh session to it; tried again after 1 s, doubling to 30 s"),
    ("HOST CANNOT SERVE", "--host: it answered that it cannot (no such home, another leasectl); tried again as above"),
    ("HOST LAGGING", "--host: its answers take over 1 s; what is shown may be that late"),
];

fn help(app: &App) -> DialogText<'static> {
    let bold = bold();
    let help_line = |r: KeyRow| Line::from(vec![Span::styled(format!("{:<16}", r.shown), bold), Span::raw(r.help)]);
    let mut lines: Vec<Line> = CONSOLE_KEYS.iter().map(|b| help_line(b.row())).collect();
    if let Some(ext) = &app.extension {
        lines.push(Line::from(Span::styled(ext.help_title(), bold)));
        lines.extend(ext.keys().into_iter().map(help_line));
    }
    lines.push(Line::from(""));
    // Every mark the console draws, each a word or symbol as well as a colour.
    lines.push(Line::from(Span::styled("Marks", bold)));
    for (mark, meaning) in MARKS {
        lines.push(Line::from(vec![Span::styled(format!("{mark:<16}"), bold), Span::raw(*meaning)]));
    }
    DialogText { title: " help ", lines, footer: vec![Line::from("Esc closes this help.")] }
}

fn repair(location: &Location, plan: &[String], needs_force: bool, p: &Palette) -> DialogText<'static> {
    let bold = bold();
    let mut lines = vec![Line::from(Span::styled(format!("Repair {}:", location.describe()), bold))];
    lines.extend(plan.iter().map(|l| Line::from(format!("  {l}"))));
    let mut footer =
        vec![Line::from(""), Line::from("The exact old bytes are kept beside it (.bak-YYYYMMDD-HHMMSS, mode 0600).")];
    if needs_force {
        footer.push(Line::from(Span::styled(
            "It would lose leases whose owners may be alive (above): a second writer could get in.",
            p.bold(Color::Red),
        )));
        footer.push(Line::from(Span::styled(answer_hint(FORCE_KEYS, "repair"), p.bold(Color::Cyan))));
    } else {
        footer.push(Line::from("No lease whose owner may be alive is lost."));
        footer.push(Line::from(Span::styled(answer_hint(CONFIRM_KEYS, "repair"), p.bold(Color::Cyan))));
    }
    DialogText { title: " repair? ", lines, footer }
}

fn prune(
    targets: &[(Location, Vec<LeaseRow>)],
    kept_clock_step: usize,
    skipped: &[String],
    p: &Palette,
) -> DialogText<'static> {
    let bold = bold();
    let total: usize = targets.iter().map(|(_, l)| l.len()).sum();
    let mut lines = vec![Line::from(Span::styled(
        if total == 1 {
            "Prune removes this dead or recycled owner's lease:".to_owned()
        } else {
            format!("Prune removes these {total} dead or recycled owners' leases:")
        },
        bold,
    ))];
    for (reg, leases) in targets {
        lines.push(Line::from(format!("{} ({})", reg.label(), reg.describe())));
        lines.extend(leases.iter().map(|l| Line::from(format!("  {}", lease_summary(l)))));
    }
    let mut footer = vec![Line::from("")];
    if !skipped.is_empty() {
        let skipped: Vec<String> = skipped.iter().map(|s| crate::lease::words::human::escape(s).into_owned()).collect();
        footer.push(Line::from(format!("Not pruned (cannot be read now): {}.", skipped.join("; "))));
    }
    if kept_clock_step > 0 {
        footer.push(Line::from(format!(
            "Kept: {} flagged clock step? (alive; start time off by whole seconds).",
            plural(kept_clock_step, "owner", "owners")
        )));
    }
    footer.push(Line::from(Span::styled(answer_hint(CONFIRM_KEYS, &format!("prune {total}")), p.bold(Color::Cyan))));
    DialogText { title: " prune? ", lines, footer }
}

/// What a force-release dialog shows: the leases, and for a live owner the session id typed so far.
struct Release<'a> {
    location: &'a Location,
    leases: &'a [LeaseRow],
    live: bool,
    expected: &'a str,
    typed: &'a str,
    mismatch: bool,
}

fn release(r: Release, p: &Palette) -> DialogText<'static> {
    let Release { location, leases, live, expected, typed, mismatch } = r;
    let bold = bold();
    let mut lines = vec![Line::from(Span::styled(
        format!("Force-release {} in {}:", plural(leases.len(), "lease", "leases"), location.label()),
        bold,
    ))];
    for l in leases {
        lines.push(Line::from(format!("  {}", lease_summary(l))));
        // Why it looks leaked: the operator's reason to override a live owner.
        if let Some(why) = &l.leak {
            lines.push(Line::from(Span::styled(format!("    LEAK?: {}", shown_text(why)), p.bold(Color::Yellow))));
        }
        // What is safe for this kind of owner: a gateway's leftover goes alone, a chat is
        // ended, an app's session is closed where it is open.
        if let Some(m) = &l.owner_move {
            let said = super::view::safe_move_text(l, m);
            lines.push(Line::from(Span::styled(format!("    safe move: {}", shown_text(&said)), p.fg(Color::Cyan))));
        }
    }
    let mut footer = vec![Line::from("")];
    if live {
        footer.push(Line::from(Span::styled(" DANGER: the owner is ALIVE (or cannot be proven dead). ", p.alert())));
        footer.push(Line::from(
            "A live owner keeps writing to the session: releasing its lease lets a second owner in, \
             and two replies that never saw each other end up in one transcript.",
        ));
        footer.push(Line::from(""));
        footer.push(Line::from(vec![
            Span::raw("Type the session id "),
            Span::styled(shown_text(expected), bold),
            Span::raw(" and press Enter to release anyway:"),
        ]));
        let hint = if mismatch {
            format!("  does not match {}: nothing released", shown_text(expected))
        } else if typed.is_empty() || expected.starts_with(typed) {
            String::new()
        } else {
            "  (does not match)".to_owned()
        };
        footer.push(Line::from(vec![
            Span::styled(format!("> {}▏", shown_text(typed)), p.bold(Color::Yellow)),
            Span::styled(hint, p.alert()),
        ]));
        footer.push(Line::from(Span::styled(keys::line_key_hint(Edit::Cancel), p.fg(Color::DarkGray))));
    } else if leases.iter().any(|l| crate::lease::view::may_be_alive(&l.liveness)) {
        // Not live, yet alive: a gateway's leftover (no turn runs for its chat).
        footer.push(Line::from(
            "The gateway runs no turn for this chat: it holds nothing now, and its next turn asks the fence again. \
             Releasing frees the chat and its slot; the gateway runs on.",
        ));
        footer.push(Line::from(Span::styled(answer_hint(CONFIRM_KEYS, "release"), p.bold(Color::Cyan))));
    } else {
        footer.push(Line::from("The owner is gone: releasing frees the session and its slot."));
        footer.push(Line::from(Span::styled(answer_hint(CONFIRM_KEYS, "release"), p.bold(Color::Cyan))));
    }
    DialogText { title: " force-release? ", lines, footer }
}

/// What a stop will end: each owner (who, what it runs, since when), its leases with
/// their sessions, what it started; then what happens, and the question.
fn stop(app: &App, location: &Location, plan: &crate::lease::stop::StopPlan, p: &Palette) -> DialogText<'static> {
    use crate::lease::words::human::duration;
    let now = app.now;
    let bold = bold();
    let mut lines = vec![Line::from(Span::styled(
        format!(
            "End {} in {}, then clean its leases:",
            plural(plan.owners.len(), "process", "processes"),
            shown_text(&location.label())
        ),
        bold,
    ))];
    for o in &plan.owners {
        let name = o.info.as_ref().map(|i| shown_text(&i.name)).unwrap_or_else(|| "-".into());
        let user = o.info.as_ref().and_then(|i| i.user.clone()).unwrap_or_else(|| format!("uid {}", o.uid));
        lines.push(Line::from(vec![
            Span::styled(format!("  {}  {name}", o.pid_text()), bold),
            Span::raw(format!("  user {}  started {} ago", shown_text(&user), duration(now - o.start_time))),
        ]));
        if let Some(info) = o.info.as_ref().filter(|i| !i.cmdline.is_empty()) {
            lines.push(Line::from(format!("    {}", shown_text(&info.cmdline.join(" ")))));
        }
        let session = |id: &str| -> String {
            let Some(n) = o.sessions.iter().find(|n| n.session_id == id) else { return String::new() };
            let title = n.title.as_deref().map(|t| format!(" \"{}\"", shown_text(t))).unwrap_or_default();
            let active = match (n.ended_at, n.last_activity) {
                (Some(at), _) => format!(" (ended {} ago)", duration(now - at)),
                (None, Some(at)) => format!(" (active {} ago)", duration(now - at)),
                (None, None) => String::new(),
            };
            format!("{title}{active}")
        };
        for (v, also) in o.leases.iter().map(|v| (v, false)).chain(o.also_holds.iter().map(|v| (v, true))) {
            let id: String = v.entry.lease_id().chars().take(8).collect();
            let sid = v.entry.session_id();
            let tail = if also { "  (it ends with it)" } else { "" };
            lines.push(Line::from(format!("    lease {id}  session {}{}{tail}", shown_text(sid), session(sid))));
        }
        if !o.family.is_empty() {
            let m: Vec<String> = o.family.iter().map(|m| format!("{} ({})", m.pid, shown_text(&m.name))).collect();
            lines.push(Line::from(format!("    processes it started: {}", m.join(", "))));
        }
        let elsewhere = app.held_elsewhere(location, o);
        for (profile, l) in &elsewhere {
            let id: String = l.entry.lease_id().chars().take(8).collect();
            lines.push(Line::from(format!(
                "    also in {}: lease {id}  session {}  (it ends with it)",
                shown_text(profile),
                shown_text(l.entry.session_id())
            )));
        }
        // What ending it costs, for an owner that serves more than this session.
        let kind = o.kind();
        let held = o.all_leases().count() + elsewhere.len();
        if held > 1 || kind.serves_many() {
            let turns = o.sessions.iter().filter(|n| n.gateway_turn == Some(true)).count();
            let turns = if turns > 0 { format!(", {turns} running a turn") } else { String::new() };
            lines.push(Line::from(Span::styled(
                format!(
                    "    it is the {}: stopping it ends every session it holds ({held} here{turns})",
                    shown_text(&kind.noun())
                ),
                p.bold(Color::Yellow),
            )));
        }
    }
    let grace = duration(crate::lease::stop::DEFAULT_GRACE.as_secs_f64());
    let footer = vec![
        Line::from(""),
        Line::from(format!(
            "SIGTERM first, SIGKILL after {grace} if it has not ended; its leases then go by its own release, or are \
             removed as a dead owner's. The owner ends first, so no second writer gets in beside it."
        )),
        Line::from(Span::styled(
            answer_hint(
                CONFIRM_KEYS,
                &format!("stop pid {}", plan.owners.iter().map(|o| o.pid.to_string()).collect::<Vec<_>>().join(", ")),
            ),
            p.bold(Color::Cyan),
        )),
    ];
    DialogText { title: " stop? ", lines, footer }
}

/// The second question of a stop whose owner holds more than one session: each named.
fn stop_again(app: &App, location: &Location, plan: &crate::lease::stop::StopPlan, p: &Palette) -> DialogText<'static> {
    let bold = bold();
    let mut lines = Vec::new();
    for o in &plan.owners {
        let elsewhere = app.held_elsewhere(location, o);
        let count = o.all_leases().count() + elsewhere.len();
        if count < 2 {
            continue;
        }
        let kind = o.kind();
        lines.push(Line::from(Span::styled(
            format!(
                "pid {} ({}) holds {}; stopping it ends every one:",
                o.pid,
                shown_text(&kind.noun()),
                plural(count, "session", "sessions")
            ),
            bold,
        )));
        for v in o.all_leases() {
            let turn = o.sessions.iter().find(|n| n.session_id == v.entry.session_id()).and_then(|n| n.gateway_turn);
            let running = if turn == Some(true) { "  (a turn runs now)" } else { "" };
            lines.push(Line::from(format!("  session {}{running}", shown_text(v.entry.session_id()))));
        }
        for (profile, l) in &elsewhere {
            lines.push(Line::from(format!(
                "  session {} (in {})",
                shown_text(l.entry.session_id()),
                shown_text(profile)
            )));
        }
    }
    let footer = vec![
        Line::from(""),
        Line::from(
            "To free one leaked lease instead, press n and use x on it: its dialog says the safe move for this kind \
             of owner.",
        ),
        Line::from(Span::styled(answer_hint(CONFIRM_KEYS, "end every session"), p.bold(Color::Cyan))),
    ];
    DialogText { title: " stop every session? ", lines, footer }
}

pub(super) fn render_dialog(app: &App, d: &Dialog, p: &Palette, frame: &mut Frame, area: Rect) {
    let DialogText { title, lines, footer } = match d {
        Dialog::Help => help(app),
        Dialog::LogLine { at, profile, text } => DialogText {
            title: " event ",
            lines: vec![
                Line::from(format!("{}  {}", super::time::full(*at, &app.tz), shown_text(profile))),
                Line::from(shown_text(text)),
            ],
            footer: vec![Line::from("Esc closes it.")],
        },
        Dialog::ConfirmRepair { location, lines, needs_force } => repair(location, lines, *needs_force, p),
        Dialog::ConfirmPrune { targets, kept_clock_step, skipped } => prune(targets, *kept_clock_step, skipped, p),
        Dialog::ConfirmStop { location, plan, again: false } => stop(app, location, plan, p),
        Dialog::ConfirmStop { location, plan, again: true } => stop_again(app, location, plan, p),
        Dialog::ConfirmRelease { location, leases, live, expected, typed, mismatch, .. } => {
            release(Release { location, leases, live: *live, expected, typed, mismatch: *mismatch }, p)
        }
    };
    let width = area.width.saturating_sub(4).min(100);
    let inner_width = width.saturating_sub(2).max(1) as usize;
    let rows = |ls: &[Line]| -> usize { ls.iter().map(|l| l.width().max(1).div_ceil(inner_width)).sum() };
    let (list_rows, footer_rows) = (rows(&lines), rows(&footer));
    // The footer (what to press) always shows; the list gets what is left, and scrolls.
    let room = usize::from(area.height.saturating_sub(2));
    let overflow = list_rows + footer_rows > room;
    let list_room = room.saturating_sub(footer_rows + usize::from(overflow)).max(1);
    let shown = list_rows.min(list_room);
    let offset = app.dialog_scroll.min(list_rows.saturating_sub(shown));
    let height = (shown + footer_rows + usize::from(overflow) + 2).min(usize::from(area.height));
    let rect = centered(area, width, height as u16);
    frame.render_widget(Clear, rect);
    let block = Block::default().borders(Borders::ALL).title(title).border_style(p.bold(Color::Cyan));
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    let parts = Layout::vertical([
        Constraint::Length(shown as u16),
        Constraint::Length(u16::from(overflow)),
        Constraint::Min(0),
    ])
    .split(inner);
    let scroll = u16::try_from(offset).unwrap_or(u16::MAX);
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }).scroll((scroll, 0)), parts[0]);
    if overflow {
        let at = format!(
            "rows {}–{} of {list_rows} · ↑↓ PgUp PgDn Home End scroll",
            offset + 1,
            (offset + shown).min(list_rows)
        );
        frame.render_widget(Paragraph::new(Line::from(Span::styled(at, p.fg(Color::DarkGray)))), parts[1]);
    }
    frame.render_widget(Paragraph::new(footer).wrap(Wrap { trim: false }), parts[2]);
}
