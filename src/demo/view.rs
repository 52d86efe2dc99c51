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
use super::tour;
use crate::tui::extension::Footer;

fn style(no_color: bool, c: Color) -> Style {
    let s = Style::default().add_modifier(Modifier::BOLD);
    if no_color { s } else { s.fg(c) }
}

pub fn render_demo_panel(demo: &DemoState, no_color: bool, frame: &mut Frame, area: Rect) {
    let cols = Layout::horizontal([Constraint::Length(36), Constraint::Min(20)]).split(area);
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let steps = tour::steps().len();
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
                    Some((_, DemoKey::Tour)) => format!("{word} {}/{steps}", demo.next_step.min(steps)),
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
    for o in demo.owners.iter().rev().take(area.height.saturating_sub(7) as usize) {
        let (mark, c) = if o.running { ("●", Color::Green) } else { ("✖", Color::Red) };
        lines.push(Line::from(vec![
            Span::styled(format!("{mark} "), style(no_color, c)),
            Span::raw(format!("pid {} {} {} {}", o.pid, o.session, o.surface, o.live_id)),
        ]));
    }
    let block = Block::default().borders(Borders::ALL).title(" playground ");
    frame.render_widget(Paragraph::new(lines).block(block), cols[0]);
    render_result(demo, no_color, frame, cols[1]);
}

fn render_result(demo: &DemoState, no_color: bool, frame: &mut Frame, area: Rect) {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut lines: Vec<Line> = Vec::new();
    if let Some((title, why)) = &demo.tour_note {
        lines.push(Line::from(Span::styled(title.clone(), style(no_color, Color::Cyan))));
        lines.push(Line::from(why.clone()));
    }
    match &demo.last {
        None => lines.push(Line::from("Results of playground actions appear here. Press t for the guided tour.")),
        Some(o) => {
            lines.push(Line::from(Span::raw(format!("› {}", o.action))));
            match &o.verdict {
                Verdict::Granted { lease_id, session, pid, replaced, pruned } => {
                    lines.push(Line::from(vec![
                        Span::styled("✔ GRANTED ", style(no_color, Color::Green)),
                        Span::raw(format!("lease {} for {session} to pid {pid}", short(lease_id))),
                    ]));
                    if let Some(old) = replaced {
                        lines.push(Line::from(format!(
                            "same writer: replaced its own lease {}, not a second entry",
                            short(old)
                        )));
                    }
                    if *pruned > 0 {
                        lines.push(Line::from(format!(
                            "pruned {} first",
                            crate::lease::human::plural(*pruned, "dead or recycled owner", "dead or recycled owners")
                        )));
                    }
                }
                Verdict::Refused { reason, message, advice, holder } => {
                    lines.push(Line::from(vec![
                        Span::styled("✖ REFUSED ", style(no_color, Color::Red)),
                        Span::styled(reason.code(), bold),
                    ]));
                    lines.push(Line::from(message.clone()));
                    lines.push(Line::from(vec![Span::styled("what to do: ", bold), Span::raw(advice.clone())]));
                    if let Some(h) = holder {
                        lines.push(Line::from(format!("blocking lease {} is marked ◀ in the table", short(h))));
                    }
                }
                Verdict::Done(what) => lines.push(Line::from(what.clone())),
                Verdict::Failed(why) => lines.push(Line::from(vec![
                    Span::styled("FAILED ", style(no_color, Color::Yellow)),
                    Span::raw(why.clone()),
                ])),
            }
        }
    }
    // A result longer than the panel says so at its foot rather than end mid-advice.
    let inner_width = usize::from(area.width.saturating_sub(2).max(1));
    let total: usize = lines.iter().map(|l| l.width().max(1).div_ceil(inner_width)).sum();
    let cut = total.saturating_sub(usize::from(area.height.saturating_sub(2)));
    let mut block = Block::default().borders(Borders::ALL).title(" result ");
    if cut > 0 {
        let more = crate::lease::human::plural(cut, "more line", "more lines");
        block = block.title_bottom(format!(" ↓ {more}: a wider or taller terminal shows them "));
    }
    frame.render_widget(Paragraph::new(lines).block(block).wrap(Wrap { trim: false }), area);
}

fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}

pub fn render_form(form: &Form, no_color: bool, frame: &mut Frame, area: Rect) {
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
