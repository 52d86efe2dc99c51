//! The lease table's columns. Each takes the width its widest cell needs (the whole
//! lease id, a full date and time) while the terminal has room, and gives it back in a
//! fixed order as the terminal narrows (as htop and k9s do); narrower still, columns give
//! way whole. The lease id, the pid and the liveness badge always stay.

pub(super) const HEADERS: [&str; 9] =
    ["  LEASE", "SURFACE", "PID", "OWNER", "STARTED", "AGE", "LIVE ID", "HOST", "LIVENESS"];
/// The liveness badge's place among the headers (after every column of `Columns`).
pub(super) const BADGE: usize = 8;

/// Each column's narrow width: the short id, the clock time, cut names.
// AGE fits the longest duration, `18h21m`, and a space.
// HOST (etcd's owners, on other hosts too) shows only where a lease has one.
const NARROW: [usize; 8] = [11, 9, 8, 11, 10, 7, 11, 9];
/// The widest a column grows: a name longer than this is cut even on a wide terminal.
const WIDEST: usize = 40;
/// Room kept for the widest badge, `♻ recycled clock step?`.
const BADGE_ROOM: usize = 22;
/// The order columns give their extra width back: the whole lease id first (the short
/// one names it, and it takes 24 columns), then the date, the live id, owner, surface.
const GIVE_BACK: [usize; 6] = [0, 4, 6, 3, 1, 7];
/// The order columns give way whole on a narrow terminal: live id, started, owner,
/// surface, host, age.
const GIVE_WAY: [usize; 6] = [6, 4, 3, 1, 7, 5];
/// The width of a whole lease id column (two spaces, 32 hex digits, a space).
const WHOLE_ID: usize = 35;
/// The width of a full start time column, `2026-11-29 22:18:07` and a space.
const FULL_TIME: usize = 20;

/// How wide each column is, and which are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Columns {
    pub(super) widths: [usize; 8],
    pub(super) shown: [bool; 8],
}

/// The widest cell of the columns whose cells vary (in characters).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Widest {
    pub(super) surface: usize,
    pub(super) pid: usize,
    pub(super) owner: usize,
    pub(super) live_id: usize,
    /// The owner's host (etcd); 0 when no lease has one: no HOST column then.
    pub(super) host: usize,
    /// The start time as the narrow column writes it: `HH:MM:SS`, or `MM-DD HH:MM` for
    /// another day (cut to `11-30 14…` in a column sized for the clock alone).
    pub(super) started: usize,
}

impl Columns {
    /// The lease id column shows whole ids.
    pub(super) fn whole_id(&self) -> bool {
        self.widths[0] >= WHOLE_ID
    }

    /// The start time column shows the date too.
    pub(super) fn full_time(&self) -> bool {
        self.widths[4] >= FULL_TIME
    }

    /// The columns for `width` terminal columns, given the widest cells.
    pub(super) fn fit(width: usize, widest: Widest) -> Columns {
        let want = |cell: usize, narrow: usize| (cell + 1).clamp(narrow, WIDEST);
        let mut widths = [
            WHOLE_ID,
            want(widest.surface, NARROW[1]),
            want(widest.pid, NARROW[2]),
            want(widest.owner, NARROW[3]),
            FULL_TIME,
            NARROW[5],
            want(widest.live_id, NARROW[6]),
            want(widest.host, NARROW[7]),
        ];
        let narrow = [
            NARROW[0],
            NARROW[1],
            NARROW[2],
            NARROW[3],
            want(widest.started, NARROW[4]),
            NARROW[5],
            NARROW[6],
            NARROW[7],
        ];
        // HOST only where a lease has a host (etcd).
        let mut shown = [true, true, true, true, true, true, true, widest.host > 0];
        let used = |w: &[usize; 8], s: &[bool; 8]| w.iter().zip(s).filter(|(_, s)| **s).map(|(w, _)| w).sum::<usize>();
        for i in GIVE_BACK {
            if used(&widths, &shown) + BADGE_ROOM <= width {
                break;
            }
            widths[i] = narrow[i];
        }
        for i in GIVE_WAY {
            if used(&widths, &shown) + BADGE_ROOM <= width {
                break;
            }
            shown[i] = false;
        }
        Columns { widths, shown }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CELLS: Widest = Widest { surface: 8, pid: 7, owner: 14, live_id: 12, host: 0, started: 8 };

    #[test]
    fn a_host_column_only_where_a_lease_has_a_host() {
        assert!(!Columns::fit(200, CELLS).shown[7], "files: no HOST");
        let fleet = Columns::fit(200, Widest { host: 12, ..CELLS });
        assert!(fleet.shown[7] && fleet.widths[7] == 13, "{fleet:?}");
        // Narrow, it gives way before AGE, after the others.
        let narrow = Columns::fit(70, Widest { host: 12, ..CELLS });
        assert!(!narrow.shown[6] && !narrow.shown[4], "{narrow:?}");
    }

    #[test]
    fn a_start_on_another_day_keeps_its_date_and_time_whole_when_narrow() {
        let today = Columns::fit(80, CELLS);
        assert_eq!(today.widths[4], NARROW[4], "`HH:MM:SS` and a space: {today:?}");
        let other_day = Columns::fit(80, Widest { started: 11, ..CELLS });
        assert!(!other_day.full_time() && other_day.shown[4], "{other_day:?}");
        assert_eq!(other_day.widths[4], 12, "`MM-DD HH:MM` and a space: {other_day:?}");
    }

    #[test]
    fn wide_terminals_show_whole_ids_and_dates_narrow_ones_give_them_back_in_order() {
        let wide = Columns::fit(200, CELLS);
        assert!(wide.whole_id() && wide.full_time() && wide.shown[..7].iter().all(|s| *s), "{wide:?}");
        assert_eq!(wide.widths[3], 15, "the owner column fits its longest name");
        let mid = Columns::fit(120, CELLS);
        assert!(mid.shown[..7].iter().all(|s| *s), "{mid:?}");
        assert!(!mid.full_time() || !mid.whole_id() || mid.widths[6] == NARROW[6], "something was given back: {mid:?}");
        let narrow = Columns::fit(80, CELLS);
        assert!(!narrow.whole_id() && !narrow.full_time(), "{narrow:?}");
        // The lease id, the pid and the badge always stay.
        let tiny = Columns::fit(40, CELLS);
        assert!(tiny.shown[0] && tiny.shown[2], "{tiny:?}");
        // Every width used stays within the terminal where it can.
        for w in [80, 100, 120, 160, 200] {
            let c = Columns::fit(w, CELLS);
            let used: usize = c.widths.iter().zip(c.shown).filter(|(_, s)| *s).map(|(w, _)| w).sum();
            assert!(used + BADGE_ROOM <= w, "{w}: {c:?}");
        }
    }
}
