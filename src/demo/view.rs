//! The demo's view: the playground panel (keys, sandbox, owners), the result of the
//! last action (GRANTED / REFUSED with reason, message and advice), and its forms.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::keys::{DEMO_KEYS, DemoKey};
use super::playground::Verdict;
use super::state::{DemoState, Form};
use super::tour::{self, Beat};
use crate::tui::extension::{Footer, PanelRows};

fn style(no_color: bool, c: Color) -> Style {
    let s = Style::default().add_modifier(Modifier::BOLD);
    if no_color { s } else { s.fg(c) }
}

/// The smallest terminal the demo draws in: the header, a table of a few rows, and the
/// result's title, verdict and first lines of why (the rest scrolls).
pub(crate) const MIN_SIZE: (u16, u16) = (70, 20);

/// From this width the playground's box (its keys, sandbox and owners) stands beside
/// the result; below it the footer and the help list the keys, the table the owners.
const BOX_FROM_WIDTH: u16 = 110;
const BOX_WIDTH: u16 = 36;

/// The result panel's share of a panel `width` wide.
fn result_width(width: u16) -> u16 {
    if width >= BOX_FROM_WIDTH { width - BOX_WIDTH } else { width }
}

/// The rows the panel takes: all its result (or the playground box, if longer) when there
/// is room; at least the title, the verdict and three lines of why.
pub(crate) fn panel_rows(demo: &DemoState, width: u16) -> PanelRows {
    let lines = result_lines(demo, true);
    let drawn = wrapped(&lines, result_width(width).saturating_sub(2));
    let boxed = if width >= BOX_FROM_WIDTH { box_lines(demo, true, u16::MAX).len() as u16 } else { 0 };
    PanelRows { least: 7, wanted: drawn.max(boxed).saturating_add(2) }
}

/// How many of the result's lines are out of view in a panel drawn in `panel`.
pub(crate) fn result_hidden(demo: &DemoState, panel: Rect) -> u16 {
    let lines = result_lines(demo, true);
    let width = result_width(panel.width);
    wrapped(&lines, width.saturating_sub(2)).saturating_sub(panel.height.saturating_sub(2))
}

fn wrapped(lines: &[Line<'static>], width: u16) -> u16 {
    Paragraph::new(lines.to_vec()).wrap(Wrap { trim: false }).line_count(width.max(1)) as u16
}

pub(crate) fn render_demo_panel(demo: &DemoState, no_color: bool, frame: &mut Frame, area: Rect) {
    if area.width < BOX_FROM_WIDTH {
        render_result(demo, no_color, frame, area);
        return;
    }
    let cols = Layout::horizontal([Constraint::Length(BOX_WIDTH), Constraint::Min(20)]).split(area);
    let lines = box_lines(demo, no_color, cols[0].height.saturating_sub(2));
    let block = Block::default().borders(Borders::ALL).title(" playground ");
    frame.render_widget(Paragraph::new(lines).block(block), cols[0]);
    render_result(demo, no_color, frame, cols[1]);
}

/// The playground's box: its keys, three to a line, the sandbox, and its owners, the
/// newest first, as many as `rows` leaves room for.
fn box_lines(demo: &DemoState, no_color: bool, rows: u16) -> Vec<Line<'static>> {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let steps = tour::steps().len();
    let at_step = demo.tour_note.as_ref().map_or(0, |n| n.beat.step().map_or(steps, |i| i + 1));
    // The key table, three to a line; the tour's entry says how far it has got.
    const WIDTHS: [usize; 3] = [9, 10, 0];
    let mut lines: Vec<Line> = DEMO_KEYS
        .chunks(3)
        .map(|row| {
            let spans = row.iter().zip(WIDTHS).flat_map(|(b, width)| {
                let (key, word) = match b.footer {
                    Footer::Plain(k, w) | Footer::First(k, w) => (k, w),
                    Footer::None => (b.shown, ""),
                };
                let word = match b.keys.first() {
                    Some((_, DemoKey::Tour)) => format!("{word} {at_step}/{steps}"),
                    _ => word.to_owned(),
                };
                [Span::styled(key, bold), Span::raw(format!(" {word:<width$}"))]
            });
            Line::from(spans.collect::<Vec<_>>())
        })
        .collect();
    lines.push(Line::from(format!("sandbox ({}):", if demo.owned { "removed on exit" } else { "kept" })));
    lines.push(Line::from(format!(" {}", demo.sandbox.display())));
    if demo.owners.is_empty() {
        lines.push(Line::from("no owner processes yet: press o"));
    }
    let room = usize::from(rows).saturating_sub(lines.len());
    for o in demo.owners.iter().rev().take(room) {
        let (mark, c) = if o.running { ("●", Color::Green) } else { ("✖", Color::Red) };
        lines.push(Line::from(vec![
            Span::styled(format!("{mark} "), style(no_color, c)),
            Span::raw(format!("pid {} {} {} {}", o.pid, o.session, o.surface, o.live_id)),
        ]));
    }
    lines
}

/// The result panel's lines: the tour beat's title and which beat it is, then the verdict
/// (or what the scene set up), then why, then the action and what the core said.
fn result_lines(demo: &DemoState, no_color: bool) -> Vec<Line<'static>> {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut lines: Vec<Line> = Vec::new();
    let note = demo.tour_note.as_ref();
    if let Some(n) = note {
        let mut title = vec![Span::styled(n.title.clone(), style(no_color, Color::Cyan))];
        match (n.beat, n.of) {
            (Beat::Scene(_), Some((k, of))) => title.push(Span::styled(format!("  · scene {k}/{of}"), bold)),
            (Beat::Outcome(_), Some((k, of))) => title.push(Span::styled(format!("  · outcome {k}/{of}"), bold)),
            _ => {}
        }
        lines.push(Line::from(title));
        if n.beat == Beat::End {
            lines.extend(n.summary.iter().map(|l| Line::from(l.clone())));
            return lines;
        }
        if let Some(shows) = &n.shows {
            lines.push(Line::from(vec![Span::styled("▶ ", style(no_color, Color::Cyan)), Span::raw(shows.clone())]));
            if let Some(o @ super::playground::Outcome { verdict: Verdict::Failed(_), .. }) = &demo.last {
                lines.extend(verdict_lines(o, no_color));
            }
            lines.push(Line::from(n.why.clone()));
            return lines;
        }
    }
    let Some(o) = &demo.last else {
        lines.push(Line::from(
            "Results of playground actions appear here. Press t for the guided tour: a scene, then its outcome.",
        ));
        return lines;
    };
    lines.extend(verdict_lines(o, no_color));
    for before in &demo.first {
        if let Verdict::Done(what) = &before.verdict {
            lines.push(Line::from(vec![
                Span::styled("first: ", bold),
                Span::raw(format!("{} → {what}", before.action)),
            ]));
        }
    }
    if let Some(n) = note {
        lines.push(Line::from(n.why.clone()));
    }
    lines.push(Line::from(Span::raw(format!("› {}", o.action))));
    match &o.verdict {
        Verdict::Granted { replaced, pruned, .. } => {
            if let Some(old) = replaced {
                lines.push(Line::from(format!(
                    "same writer: replaced its own lease {}, not a second entry",
                    short(old)
                )));
            }
            if *pruned > 0 {
                lines.push(Line::from(format!(
                    "pruned {} first",
                    crate::lease::words::human::plural(*pruned, "dead or recycled owner", "dead or recycled owners")
                )));
            }
        }
        Verdict::Refused { message, advice, holder, .. } => {
            lines.push(Line::from(message.clone()));
            lines.push(Line::from(vec![Span::styled("what to do: ", bold), Span::raw(advice.clone())]));
            if let Some(h) = holder {
                lines.push(Line::from(format!("blocking lease {} is marked ◀ in the table", short(h))));
            }
        }
        Verdict::Done(_) | Verdict::Failed(_) => {}
    }
    lines
}

/// The verdict's own line: GRANTED, REFUSED and its code, what was done, or FAILED.
fn verdict_lines(o: &super::playground::Outcome, no_color: bool) -> Vec<Line<'static>> {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    match &o.verdict {
        Verdict::Granted { lease_id, session, pid, .. } => vec![Line::from(vec![
            Span::styled("✔ GRANTED ", style(no_color, Color::Green)),
            Span::raw(format!("lease {} for {session} to pid {pid}", short(lease_id))),
        ])],
        Verdict::Refused { reason, .. } => vec![Line::from(vec![
            Span::styled("✖ REFUSED ", style(no_color, Color::Red)),
            Span::styled(reason.code(), bold),
        ])],
        Verdict::Done(what) => vec![Line::from(what.clone())],
        Verdict::Failed(why) => {
            vec![Line::from(vec![Span::styled("FAILED ", style(no_color, Color::Yellow)), Span::raw(why.clone())])]
        }
    }
}

fn render_result(demo: &DemoState, no_color: bool, frame: &mut Frame, area: Rect) {
    let lines = result_lines(demo, no_color);
    // What does not fit is scrolled to, and the panel's foot says how much is where.
    let total = wrapped(&lines, area.width.saturating_sub(2));
    let visible = area.height.saturating_sub(2);
    let hidden = total.saturating_sub(visible);
    let offset = demo.scroll.min(hidden);
    let mut block = Block::default().borders(Borders::ALL).title(" result ");
    let below = hidden - offset;
    let mut foot = Vec::new();
    if offset > 0 {
        foot.push(format!("↑ {offset} above: {{"));
    }
    if below > 0 {
        foot.push(format!(
            "↓ {}: }}",
            crate::lease::words::human::plural(usize::from(below), "more line", "more lines")
        ));
    }
    if !foot.is_empty() {
        block = block.title_bottom(format!(" {} ", foot.join(" · ")));
    }
    frame.render_widget(Paragraph::new(lines).block(block).wrap(Wrap { trim: false }).scroll((offset, 0)), area);
}

fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}

pub(crate) fn render_form(form: &Form, no_color: bool, frame: &mut Frame, area: Rect) {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut lines = Vec::new();
    for (i, f) in form.fields.iter().enumerate() {
        let focus = i == form.focus;
        let value = if f.choices.is_empty() {
            format!("{}{}", f.value, if focus { "▏" } else { "" })
        } else {
            format!("‹ {} ›", f.get())
        };
        let marker = if focus { "▸ " } else { "  " };
        let value_style = if focus { style(no_color, Color::Yellow) } else { Style::default() };
        lines.push(Line::from(vec![
            Span::raw(marker),
            Span::styled(format!("{:<22}", f.label), bold),
            Span::styled(value, value_style),
        ]));
    }
    lines.push(Line::from(""));
    if let Some(e) = &form.error {
        lines.push(Line::from(Span::styled(e.clone(), style(no_color, Color::Red))));
    }
    lines.push(Line::from(Span::styled(
        "Tab/↑↓ field · ←→ choose · Enter go · Esc cancel",
        if no_color { Style::default() } else { Style::default().fg(Color::DarkGray) },
    )));
    let width = area.width.saturating_sub(4).min(72);
    let height = (lines.len() as u16 + 2).min(area.height);
    let rect = Rect {
        x: area.x + (area.width.saturating_sub(width)) / 2,
        y: area.y + (area.height.saturating_sub(height)) / 2,
        width,
        height,
    };
    frame.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", form.kind.title()))
        .border_style(style(no_color, Color::Cyan));
    frame.render_widget(Paragraph::new(lines).block(block), rect);
}
