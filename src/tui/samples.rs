//! A registry's live count over the last [`HISTORY_LEN`] ticks (the header's sparkline),
//! kept as the ticks where it changed. Sampling every registry on every tick cost an
//! idle console with 100,000 profiles a core's percent and 300 numbers (240 MB) for
//! counts that never moved; a count is now written only when a reading changes it.

/// Ticks a sparkline looks back (about five minutes).
pub(crate) const HISTORY_LEN: u64 = 300;

/// Points (first tick with this count, the count), oldest first; never two equal counts
/// in a row. The oldest is kept in place: most registries' count never moves, and one
/// allocation for it in each of 100,000 tabs was spread among the log's short-lived
/// lines, keeping their pages from going back to the system.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    oldest: Option<(u64, u64)>,
    /// The points after the oldest.
    later: Vec<(u64, u64)>,
}

impl Samples {
    fn count_points(&self) -> usize {
        usize::from(self.oldest.is_some()) + self.later.len()
    }

    fn points(&self) -> impl DoubleEndedIterator<Item = &(u64, u64)> {
        self.oldest.iter().chain(&self.later)
    }

    fn newest_mut(&mut self) -> Option<&mut (u64, u64)> {
        match self.later.last_mut() {
            Some(p) => Some(p),
            None => self.oldest.as_mut(),
        }
    }

    fn push(&mut self, point: (u64, u64)) {
        match self.oldest {
            None => self.oldest = Some(point),
            Some(_) => self.later.push(point),
        }
    }

    fn pop_oldest(&mut self) {
        self.oldest = (!self.later.is_empty()).then(|| self.later.remove(0));
    }

    fn pop_newest(&mut self) {
        if self.later.pop().is_none() {
            self.oldest = None;
        }
    }

    /// The count from `tick` on (a reading between two ticks shows from the next one).
    pub fn record(&mut self, tick: u64, count: u64) {
        match self.newest_mut() {
            Some((_, last)) if *last == count => return,
            Some((at, last)) if *at >= tick => *last = count,
            _ => self.push((tick, count)),
        }
        // Points no sample in the window can see go: the one before the window stays.
        while self.later.first().is_some_and(|(at, _)| at + HISTORY_LEN <= tick) {
            self.pop_oldest();
        }
        if self.points().rev().nth(1).is_some_and(|(_, before)| *before == count) {
            self.pop_newest();
        }
    }

    /// The latest count recorded.
    pub fn back(&self) -> Option<&u64> {
        self.points().next_back().map(|(_, count)| count)
    }

    /// How many ticks up to `now` have a sample (at most [`HISTORY_LEN`]).
    pub fn len(&self, now: u64) -> usize {
        let Some((first, _)) = self.oldest else { return 0 };
        usize::try_from((now + 1).saturating_sub(first).min(HISTORY_LEN)).unwrap_or(0)
    }

    /// The count at tick `tick`, if sampled by then.
    fn at(&self, tick: u64) -> Option<u64> {
        self.points().rev().find(|(at, _)| *at <= tick).map(|(_, count)| *count)
    }

    /// The last `width` samples up to `now`, oldest first (fewer while there are fewer).
    pub fn last(&self, now: u64, width: usize) -> Vec<u64> {
        let n = self.len(now).min(width) as u64;
        (now + 1 - n..=now).filter_map(|t| self.at(t)).collect()
    }

    /// True when the count changed within the last `n` samples up to `now`.
    pub fn changed_within(&self, now: u64, n: u64) -> bool {
        self.count_points() > 1 && self.points().next_back().is_some_and(|(at, _)| *at + n > now && *at <= now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A count that never moves (most registries') is one point, kept in place.
    #[test]
    fn an_unchanging_count_is_one_point_kept_in_place() {
        let mut s = Samples::default();
        for tick in 0..1000 {
            s.record(tick, 0);
        }
        assert_eq!(s.count_points(), 1);
        assert_eq!(s.later.capacity(), 0, "kept in place: no allocation for it");
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
        assert!(s.count_points() <= HISTORY_LEN as usize + 1, "{}", s.count_points());
        assert_eq!(s.len(now), HISTORY_LEN as usize);
        assert_eq!(s.last(now, 4), vec![1, 0, 1, 0]);
    }
}
