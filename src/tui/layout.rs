//! Where each part of the console goes on a terminal of a given size. The view draws
//! there, and a mouse click is found there: one computation, so a click lands on what
//! was drawn under it.

use ratatui::layout::{Constraint, Layout, Rect};

use super::extension::PanelRows;
use super::state::{App, Row};

/// Below this the console shows only a note asking for more room.
pub(crate) const MIN_SIZE: (u16, u16) = (60, 15);

/// The parts of the screen, in `area`.
pub(crate) struct Areas {
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
pub(crate) fn too_small(app: &App, area: Rect) -> Option<(u16, u16)> {
    let (ext_w, ext_h) = app.extension.as_ref().map_or((0, 0), |x| x.min_size());
    let need = (MIN_SIZE.0.max(ext_w), MIN_SIZE.1.max(ext_h));
    (area.width < need.0 || area.height < need.1).then_some(need)
}

/// The areas of the console in `area`; `banner_height` is the banner's wrapped lines.
pub(crate) fn areas(app: &App, area: Rect, banner_height: u16) -> Areas {
    let (table_height, panel_height, log_height) = match &app.extension {
        Some(ext) => heights_with_panel(app, ext.panel_rows(area.width, area.height), area, banner_height),
        None => heights_without_panel(app, area, banner_height),
    };
    let chunks = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(5),
        Constraint::Length(banner_height),
        Constraint::Min(table_height),
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

/// The console alone: the table takes what the log (six rows, when there is room) leaves.
fn heights_without_panel(app: &App, area: Rect, banner_height: u16) -> (u16, u16, u16) {
    // Everything but the log at its least: tabs, header, banner, four table rows, footer.
    let least = 1 + 5 + banner_height + 4 + 1;
    let log_height = if app.show_details && area.width < 120 {
        12
    } else if area.height < 20 || least + 6 > area.height {
        // A small terminal keeps its rows for the leases.
        0
    } else {
        6
    };
    (4, 0, log_height)
}

/// With an extension's panel: the table gets its rows (the leases being talked about),
/// the panel what its content fills, and the log the rest; a small terminal gives the log
/// nothing and the panel its least, and the panel scrolls.
fn heights_with_panel(app: &App, panel: PanelRows, area: Rect, banner_height: u16) -> (u16, u16, u16) {
    let room = area.height.saturating_sub(1 + 5 + banner_height + 1);
    let details_narrow = app.show_details && area.width < 120;
    let below_least = if details_narrow {
        10
    } else if area.height >= 36 {
        6
    } else {
        0
    };
    // Borders and the column header, then a row for each session and each lease.
    let mut table_want = (app.rows().len() as u16).saturating_add(3).max(6);
    if app.show_details && !details_narrow {
        table_want = table_want.max(14);
    }
    let table = table_want.min(room.saturating_sub(panel.least + below_least)).max(4);
    let rest = room.saturating_sub(table);
    let panel_height = panel.wanted.min(rest.saturating_sub(below_least)).max(panel.least.min(rest));
    let below = rest - panel_height;
    // A log of fewer than three lines is noise: its rows go to the panel.
    if !details_narrow && below < 5 { (table, panel_height + below, 0) } else { (table, panel_height, below) }
}

/// The first of the table's rows in view: the selection sits in the lower part of the
/// window, so its session row stays in view. `height` is the rows' room.
pub(crate) fn table_offset(rows: &[Row], selected_row: usize, height: usize) -> usize {
    let offset = selected_row.saturating_sub(height.saturating_sub(1).min(height * 3 / 4));
    offset.min(rows.len().saturating_sub(height))
}

/// The tab bar as drawn in a given width: the tabs around the selected one, and how
/// many are left out each side (a home with thousands of profiles has more tabs than
/// any terminal is wide; formatting all of them for every frame cost most of a frame).
pub struct TabBar {
    /// The first tab shown.
    pub first: usize,
    /// The titles shown: a "more" marker first when tabs are left out before, the tabs
    /// from `first` on, and a marker last when tabs are left out after.
    pub titles: Vec<String>,
    pub before: usize,
    pub after: usize,
}

impl TabBar {
    /// The tab a title of this bar stands for: a marker stands for the nearest tab it hides.
    pub fn tab(&self, title: usize) -> usize {
        let shown = self.titles.len() - usize::from(self.before > 0) - usize::from(self.after > 0);
        match title.checked_sub(usize::from(self.before > 0)) {
            None => self.first - 1,
            Some(i) if i < shown => self.first + i,
            Some(_) => self.first + shown,
        }
    }

    /// The index among `titles` of the selected tab.
    pub fn selected(&self, tab: usize) -> usize {
        let shown = self.titles.len() - usize::from(self.before > 0) - usize::from(self.after > 0);
        tab.saturating_sub(self.first).min(shown.saturating_sub(1)) + usize::from(self.before > 0)
    }
}

/// "‹ N more" / "N more ›": tabs left out on that side.
fn more_marker(count: usize, before: bool) -> String {
    if before { format!("‹ {count} more") } else { format!("{count} more ›") }
}

/// The tabs that fit `width` around `selected`, of `count` titled by `title`. Each tab
/// takes its title and a space each side, and a `│` parts two (as ratatui's Tabs draws).
pub(crate) fn tab_bar(count: usize, selected: usize, width: u16, title: impl Fn(usize) -> String) -> TabBar {
    if count == 0 {
        return TabBar { first: 0, titles: vec![], before: 0, after: 0 };
    }
    let width = usize::from(width);
    let selected = selected.min(count - 1);
    let cost = |t: &str| t.chars().count() + 3;
    // Room for the markers each side that needs one (the widest count they could say).
    // Every tab costs 4 columns at least: only a few can all fit, and then need no marker.
    if count * 4 <= width + 1 {
        let all: Vec<String> = (0..count).map(&title).collect();
        if all.iter().map(|t| cost(t)).sum::<usize>() <= width + 1 {
            return TabBar { first: 0, titles: all, before: 0, after: 0 };
        }
    }
    let marker_cost = cost(&more_marker(count, true));
    let (mut first, mut last) = (selected, selected);
    let mut titles = std::collections::VecDeque::from([title(selected)]);
    let mut used = titles.iter().map(|t| cost(t)).sum::<usize>();
    for reserve in [2 * marker_cost, 0] {
        loop {
            let room = |used: usize, first: usize, last: usize| {
                let markers = usize::from(first > 0) + usize::from(last + 1 < count);
                let reserved = if reserve == 0 { markers * marker_cost } else { reserve };
                used + reserved <= width + 1
            };
            let mut grew = false;
            if last + 1 < count {
                let t = title(last + 1);
                if room(used + cost(&t), first, last + 1) {
                    used += cost(&t);
                    titles.push_back(t);
                    last += 1;
                    grew = true;
                }
            }
            if first > 0 {
                let t = title(first - 1);
                if room(used + cost(&t), first - 1, last) {
                    used += cost(&t);
                    titles.push_front(t);
                    first -= 1;
                    grew = true;
                }
            }
            if !grew {
                break;
            }
        }
    }
    let (before, after) = (first, count.saturating_sub(last + 1));
    let mut shown: Vec<String> = Vec::with_capacity(titles.len() + 2);
    if before > 0 {
        shown.push(more_marker(before, true));
    }
    shown.extend(titles);
    if after > 0 {
        shown.push(more_marker(after, false));
    }
    TabBar { first, titles: shown, before, after }
}

/// The title at `column` of the tab bar (titles padded by a space each side and parted
/// by `│`, as ratatui's Tabs draws them).
pub(crate) fn tab_at(titles: &[String], column: u16) -> Option<usize> {
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

    fn numbered(i: usize) -> String {
        format!("p{i:05}")
    }

    #[test]
    fn a_bar_that_fits_shows_every_tab_and_no_marker() {
        let bar = tab_bar(3, 1, 80, numbered);
        assert_eq!(bar.titles, ["p00000", "p00001", "p00002"]);
        assert_eq!((bar.first, bar.before, bar.after), (0, 0, 0));
        // Exactly the width: 3 x 8 columns, 2 dividers.
        assert_eq!(tab_bar(3, 0, 26, numbered).after, 0);
        assert!(tab_bar(3, 0, 25, numbered).after > 0, "one column short: a marker");
    }

    #[test]
    fn many_tabs_show_a_window_round_the_selected_one_with_markers() {
        let bar = tab_bar(100_000, 50_000, 120, numbered);
        let drawn: usize = bar.titles.iter().map(|t| t.chars().count() + 3).sum::<usize>() - 1;
        assert!(drawn <= 120, "{drawn} columns: {:?}", bar.titles);
        assert!(bar.titles.contains(&numbered(50_000)));
        assert_eq!(bar.titles[bar.selected(50_000)], numbered(50_000));
        assert_eq!(bar.titles.first().map(String::as_str), Some(format!("‹ {} more", bar.before).as_str()));
        assert_eq!(bar.titles.last().map(String::as_str), Some(format!("{} more ›", bar.after).as_str()));
        assert_eq!(bar.before + (bar.titles.len() - 2) + bar.after, 100_000);
        // A marker stands for the nearest tab it hides; a title for its own tab.
        assert_eq!(bar.tab(0), bar.first - 1);
        assert_eq!(bar.tab(bar.titles.len() - 1), bar.first + bar.titles.len() - 2);
        assert_eq!(bar.tab(bar.selected(50_000)), 50_000);
        // At either end only one marker, and the room it leaves is used.
        let start = tab_bar(100_000, 0, 120, numbered);
        assert_eq!((start.first, start.before), (0, 0));
        assert!(start.titles.len() > bar.titles.len() - 1);
        let end = tab_bar(100_000, 99_999, 120, numbered);
        assert_eq!(end.after, 0);
        assert_eq!(end.titles.last(), Some(&numbered(99_999)));
    }
}
