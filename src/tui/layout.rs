//! Where each part of the console goes on a terminal of a given size. The view draws
//! there, and a mouse click is found there: one computation, so a click lands on what
//! was drawn under it.

use ratatui::layout::{Constraint, Layout, Rect};

use super::state::{App, Row};

/// Below this the console shows only a note asking for more room.
pub const MIN_SIZE: (u16, u16) = (60, 15);

/// The parts of the screen, in `area`.
pub struct Areas {
    pub tabs: Rect,
    pub header: Rect,
    pub banner: Rect,
    pub table: Rect,
    /// The lease details, when shown (beside the table, or in the log's place).
    pub details: Option<Rect>,
    pub log: Option<Rect>,
    pub panel: Rect,
    pub footer: Rect,
}

/// The room `app` needs, when `area` is smaller (the note to show instead).
pub fn too_small(app: &App, area: Rect) -> Option<(u16, u16)> {
    let (ext_w, ext_h) = app.extension.as_ref().map_or((0, 0), |x| x.min_size());
    let need = (MIN_SIZE.0.max(ext_w), MIN_SIZE.1.max(ext_h));
    (area.width < need.0 || area.height < need.1).then_some(need)
}

/// The areas of the console in `area`; `banner_height` is the banner's wrapped lines.
pub fn areas(app: &App, area: Rect, banner_height: u16) -> Areas {
    let panel_height = app.extension.as_ref().map_or(0, |x| x.panel_height(area.height));
    let log_height = match (panel_height, app.show_details && area.width < 120) {
        (_, true) => 12,
        (1.., false) if area.height < 36 => 0,
        // A small terminal keeps its rows for the leases.
        _ if area.height < 20 => 0,
        _ => 6,
    };
    let chunks = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(5),
        Constraint::Length(banner_height),
        Constraint::Min(4),
        Constraint::Length(panel_height),
        Constraint::Length(log_height),
        Constraint::Length(1),
    ])
    .split(area);
    let (main, below) = (chunks[3], chunks[5]);
    let (table, details, log) = if app.show_details && main.width >= 120 {
        let split = Layout::horizontal([Constraint::Percentage(58), Constraint::Percentage(42)]).split(main);
        (split[0], Some(split[1]), Some(below))
    } else if app.show_details {
        // Narrow: the details take the event log's place.
        (main, Some(below), None)
    } else {
        (main, None, Some(below))
    };
    Areas {
        tabs: chunks[0],
        header: chunks[1],
        banner: chunks[2],
        table,
        details,
        log: log.filter(|l| l.height > 0),
        panel: chunks[4],
        footer: chunks[6],
    }
}

/// The first of the table's rows in view: the selection sits in the lower part of the
/// window, so its session row stays in view. `height` is the rows' room.
pub fn table_offset(rows: &[Row], selected_row: usize, height: usize) -> usize {
    let offset = selected_row.saturating_sub(height.saturating_sub(1).min(height * 3 / 4));
    offset.min(rows.len().saturating_sub(height))
}

/// The tab whose title is at `column` of the tab bar (titles padded by a space each
/// side and parted by `│`, as ratatui's Tabs draws them).
pub fn tab_at(titles: &[String], column: u16) -> Option<usize> {
    let mut x = 0u16;
    for (i, title) in titles.iter().enumerate() {
        let end = x.saturating_add(2).saturating_add(title.chars().count() as u16);
        if column < end {
            return Some(i);
        }
        x = end.saturating_add(1);
        if column < x {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_click_finds_the_tab_drawn_under_it() {
        let titles = ["root".to_owned(), "p1".into(), "all".into()];
        // " root │ p1 │ all "
        assert_eq!(tab_at(&titles, 0), Some(0));
        assert_eq!(tab_at(&titles, 5), Some(0));
        assert_eq!(tab_at(&titles, 6), None, "the divider");
        assert_eq!(tab_at(&titles, 7), Some(1));
        assert_eq!(tab_at(&titles, 12), Some(2));
        assert_eq!(tab_at(&titles, 40), None);
    }
}
