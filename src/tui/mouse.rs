//! The mouse: the wheel scrolls what the arrow keys scroll (the table, the event log
//! when it has the focus, a dialog's list), a click on a tab shows it, a click on a
//! lease row selects it. Where things are is `layout`'s, as the view draws them.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;

use super::layout::{areas, tab_at, table_offset, too_small};
use super::state::{App, Row};
use super::view::{banner_height, tab_bar};

/// Rows one notch of the wheel moves.
const WHEEL_ROWS: usize = 3;

/// A click or the wheel: what it changed itself, and the keys it stands for (the wheel
/// over the table is the arrows), which the caller runs as keys.
pub(super) fn on_mouse(app: &mut App, m: MouseEvent) -> Vec<KeyEvent> {
    if !app.mouse {
        return vec![];
    }
    let arrow = |code| KeyEvent::new(code, KeyModifiers::NONE);
    let down = match m.kind {
        MouseEventKind::ScrollDown => true,
        MouseEventKind::ScrollUp => false,
        MouseEventKind::Down(MouseButton::Left) => {
            click(app, m.column, m.row);
            return vec![];
        }
        _ => return vec![],
    };
    // The wheel over the details or the event log scrolls them; elsewhere it is the arrows.
    match pane_at(app, m.column, m.row) {
        Some(Pane::Details) => {
            app.details_scroll = if down {
                app.details_scroll.saturating_add(WHEEL_ROWS)
            } else {
                app.details_scroll.saturating_sub(WHEEL_ROWS)
            };
            vec![]
        }
        Some(Pane::Log) => {
            // The log counts up from its newest line: down the wheel is towards it.
            let newest_up = app.log.len().saturating_sub(1);
            app.log_scroll = if down {
                app.log_scroll.saturating_sub(WHEEL_ROWS)
            } else {
                (app.log_scroll + WHEEL_ROWS).min(newest_up)
            };
            vec![]
        }
        None => {
            let code = if down { KeyCode::Down } else { KeyCode::Up };
            (0..WHEEL_ROWS).map(|_| arrow(code)).collect()
        }
    }
}

/// The pane under the pointer that scrolls on its own.
enum Pane {
    Details,
    Log,
}

fn pane_at(app: &App, column: u16, row: u16) -> Option<Pane> {
    if app.mode() == super::state::Mode::Dialog {
        return None;
    }
    let screen = Rect::new(0, 0, app.size.0, app.size.1);
    if too_small(app, screen).is_some() {
        return None;
    }
    let parts = areas(app, screen, banner_height(&super::view::banner_lines(app), screen.width));
    let inside = |r: Rect| column >= r.x && column < r.x + r.width && row >= r.y && row < r.y + r.height;
    if parts.details.is_some_and(inside) {
        Some(Pane::Details)
    } else if parts.log.is_some_and(inside) {
        Some(Pane::Log)
    } else {
        None
    }
}

/// A click on the screen as last drawn: a tab, or a row of the lease table. Nothing
/// while a dialog, a form or the filter line has the keys.
fn click(app: &mut App, column: u16, row: u16) {
    let busy = app.mode().is_modal() || app.extension.as_ref().is_some_and(|x| x.has_overlay());
    let screen = Rect::new(0, 0, app.size.0, app.size.1);
    if busy || too_small(app, screen).is_some() {
        return;
    }
    let banner = super::view::banner_lines(app);
    let parts = areas(app, screen, banner_height(&banner, screen.width));
    if row == parts.tabs.y {
        let bar = tab_bar(app, parts.tabs.width);
        if let Some(title) = tab_at(&bar.titles, column.saturating_sub(parts.tabs.x)) {
            app.tab = bar.tab(title);
            app.selected = 0;
        }
        return;
    }
    let table = parts.table;
    // Inside the frame, below the column names: the rows as drawn.
    let first = table.y + 2;
    let last = table.y + table.height.saturating_sub(1);
    if column <= table.x || column >= table.x + table.width.saturating_sub(1) || row < first || row >= last {
        return;
    }
    let rows = app.rows();
    let height = usize::from(table.height.saturating_sub(3));
    let leases: Vec<usize> =
        rows.iter().enumerate().filter(|(_, r)| matches!(r, Row::Lease { .. })).map(|(i, _)| i).collect();
    let selected_row = leases.get(app.selected).copied().unwrap_or(0);
    let at = table_offset(&rows, selected_row, height) + usize::from(row - first);
    // A session's row selects its first lease.
    if let Some(index) = leases.iter().position(|i| *i >= at) {
        app.selected = index;
    }
}
