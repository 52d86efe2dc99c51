//! How the console draws what every screen shares: its palette (NO_COLOR aware), the
//! liveness badges, text from files shown safely, a lease in one line, a centred box.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};

use super::event::LeaseRow;
use crate::lease::Liveness;

/// The console's colours, or none (`NO_COLOR`): bold and reverse video then carry it.
pub(super) struct Palette {
    pub(super) no_color: bool,
}

impl Palette {
    pub(super) fn fg(&self, c: Color) -> Style {
        if self.no_color { Style::default() } else { Style::default().fg(c) }
    }
    pub(super) fn bold(&self, c: Color) -> Style {
        self.fg(c).add_modifier(Modifier::BOLD)
    }
    pub(super) fn alert(&self) -> Style {
        if self.no_color {
            Style::default().add_modifier(Modifier::BOLD | Modifier::REVERSED)
        } else {
            Style::default().fg(Color::White).bg(Color::Red).add_modifier(Modifier::BOLD)
        }
    }
}

/// Symbol + word for a verdict, so it reads without colour.
pub(super) fn badge(l: &Liveness) -> (String, Color) {
    let (text, color) = match l {
        Liveness::Alive => ("● alive".to_owned(), Color::Green),
        // Alive in a container: its pid here is not the one the lease records.
        Liveness::AliveInNamespace(_) => ("● alive ⧉ ns".to_owned(), Color::Green),
        Liveness::Dead(_) => ("✖ dead".to_owned(), Color::Red),
        Liveness::Recycled { .. } => ("♻ recycled".to_owned(), Color::Magenta),
        Liveness::Unknown(crate::lease::owners::liveness::UnknownCause::Hidden(_)) => {
            ("◌ hidden".to_owned(), Color::Yellow)
        }
        Liveness::Unknown(_) => ("? unknown".to_owned(), Color::Yellow),
        Liveness::WorkRunning { .. } => ("⚙ WORK RUNNING".to_owned(), Color::Yellow),
    };
    if l.clock_step_suspected() { (format!("{text} clock step?"), color) } else { (text, color) }
}

/// Text from files and other processes as the screen may show it (one function with
/// the CLI: control characters and bidi overrides written visibly).
pub(super) fn shown_text(text: &str) -> String {
    crate::lease::words::human::escape(text).into_owned()
}

/// A box of at most `width` x `height` in the middle of `area`.
pub(super) fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h }
}

/// A lease in one line: short id, session, surface, pid, badge.
pub(super) fn lease_summary(l: &LeaseRow) -> String {
    format!(
        "{}  session {}  {}  pid {}  {}",
        shown_text(&l.entry.lease_id().chars().take(8).collect::<String>()),
        shown_text(l.entry.session_id()),
        shown_text(l.entry.surface().unwrap_or("-")),
        l.entry.pid(),
        badge(&l.liveness).0
    )
}
