//! A registry's live count over the last [`HISTORY_LEN`] ticks (the header's sparkline),
//! kept as the ticks where it changed. Sampling every registry on every tick cost an
//! idle console with 100,000 profiles a core's percent and 300 numbers (240 MB) for
//! counts that never moved; a count is now written only when a reading changes it.

use std::collections::VecDeque;

/// Ticks a sparkline looks back (about five minutes).
pub const HISTORY_LEN: u64 = 300;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    /// (first tick with this count, the count), oldest first; never two equal counts in a row.
    points: VecDeque<(u64, u64)>,
}

impl Samples {
    /// The count from `tick` on (a reading between two ticks shows from the next one).
    pub fn record(&mut self, tick: u64, count: u64) {
        match self.points.back_mut() {
            Some((_, last)) if *last == count => return,
            Some((at, last)) if *at >= tick => *last = count,
            Some(_) => self.points.push_back((tick, count)),
            // Most registries' count never moves: one point, in an allocation its size
            // (a first push would make room for four: 48 bytes more for each of 100,000).
            None => {
                self.points.reserve_exact(1);
                self.points.push_back((tick, count));
            }
        }
        // Points no sample in the window can see go: the one before the window stays.
        while self.points.len() > 1 && self.points[1].0 + HISTORY_LEN <= tick {
            self.points.pop_front();
        }
        if self.points.len() > 1 && self.points[self.points.len() - 2].1 == count {
            self.points.pop_back();
        }
    }

    /// The latest count recorded.
    pub fn back(&self) -> Option<&u64> {
        self.points.back().map(|(_, count)| count)
    }

    /// How many ticks up to `now` have a sample (at most [`HISTORY_LEN`]).
    pub fn len(&self, now: u64) -> usize {
        let Some((first, _)) = self.points.front() else { return 0 };
        usize::try_from((now + 1).saturating_sub(*first).min(HISTORY_LEN)).unwrap_or(0)
    }

    /// The count at tick `tick`, if sampled by then.
    fn at(&self, tick: u64) -> Option<u64> {
        self.points.iter().rev().find(|(at, _)| *at <= tick).map(|(_, count)| *count)
    }

    /// The last `width` samples up to `now`, oldest first (fewer while there are fewer).
    pub fn last(&self, now: u64, width: usize) -> Vec<u64> {
        let n = self.len(now).min(width) as u64;
        (now + 1 - n..=now).filter_map(|t| self.at(t)).collect()
    }

    /// True when the count changed within the last `n` samples up to `now`.
    pub fn changed_within(&self, now: u64, n: u64) -> bool {
        self.points.len() > 1 && self.points.back().is_some_and(|(at, _)| *at + n > now && *at <= now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A count that never moves (most registries') is one point in room for one.
    #[test]
    fn an_unchanging_count_is_one_point_in_room_for_one() {
        let mut s = Samples::default();
        for tick in 0..1000 {
            s.record(tick, 0);
        }
        assert_eq!(s.points.len(), 1);
        assert_eq!(s.points.capacity(), 1, "no room kept for points that never come");
        s.record(1000, 2);
        assert_eq!(s.last(1000, 3), vec![0, 0, 2], "a change later is kept as before");
    }

    /// What one sample per tick would hold, for counts read between ticks.
    #[test]
    fn samples_are_the_count_at_each_tick() {
        let mut s = Samples::default();
        s.record(1, 0);
        assert_eq!(s.last(0, 10), Vec::<u64>::new(), "nothing sampled before the first tick");
        s.record(3, 2);
        s.record(3, 1); // two readings before tick 3: the later stands
        s.record(6, 1); // unchanged: nothing kept
        assert_eq!(s.last(5, 10), vec![0, 0, 1, 1, 1]);
        assert_eq!(s.back(), Some(&1));
        assert_eq!(s.len(5), 5);
        assert!(s.changed_within(5, 3) && !s.changed_within(5, 2));
        s.record(7, 0);
        assert_eq!(s.last(8, 3), vec![1, 0, 0]);
    }

    /// A count that changes every tick keeps at most a window of points.
    #[test]
    fn a_long_run_keeps_a_window() {
        let mut s = Samples::default();
        for t in 1..=10 * HISTORY_LEN {
            s.record(t, t % 2);
        }
        let now = 10 * HISTORY_LEN;
        assert!(s.points.len() <= HISTORY_LEN as usize + 1, "{}", s.points.len());
        assert_eq!(s.len(now), HISTORY_LEN as usize);
        assert_eq!(s.last(now, 4), vec![1, 0, 1, 0]);
    }
}
