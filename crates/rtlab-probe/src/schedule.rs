//! The periodic schedule of one timer thread: deadlines, and the periods that never happened.
//!
//! Kept apart from the thread loop so the arithmetic (especially missed periods, which
//! cyclictest skips silently) is tested deterministically without sleeping.

/// Absolute deadlines `first, first + period, …` on CLOCK_MONOTONIC.
#[derive(Clone, Debug)]
pub struct PeriodicSchedule {
    next_deadline_ns: u64,
    period_ns: u64,
}

impl PeriodicSchedule {
    pub fn new(first_deadline_ns: u64, period_ns: u64) -> Self {
        assert!(period_ns > 0, "period must be positive");
        PeriodicSchedule {
            next_deadline_ns: first_deadline_ns,
            period_ns,
        }
    }

    pub fn next_deadline_ns(&self) -> u64 {
        self.next_deadline_ns
    }

    /// Called after waking at `now_ns` for the current deadline. Moves to the next deadline that
    /// is still in the future and returns how many deadlines were skipped because the wake-up was
    /// so late that they had already passed: those periods had no wake-up at all (missed).
    pub fn advance(&mut self, now_ns: u64) -> u64 {
        self.next_deadline_ns += self.period_ns;
        if now_ns <= self.next_deadline_ns {
            return 0;
        }
        let behind = now_ns - self.next_deadline_ns;
        // Deadlines at next, next+period, … that are < now are skipped (a deadline exactly at
        // `now` is still served).
        let skipped = behind.div_ceil(self.period_ns);
        self.next_deadline_ns += skipped * self.period_ns;
        skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_time_wakeups_skip_nothing() {
        let mut schedule = PeriodicSchedule::new(1_000, 1_000);
        assert_eq!(schedule.advance(1_010), 0);
        assert_eq!(schedule.next_deadline_ns(), 2_000);
        assert_eq!(schedule.advance(2_000), 0);
        assert_eq!(schedule.next_deadline_ns(), 3_000);
    }

    #[test]
    fn late_wakeups_count_the_periods_that_never_happened() {
        let mut schedule = PeriodicSchedule::new(1_000, 1_000);
        // Woke at 3.5 periods: deadlines 2000 and 3000 are gone, next is 4000.
        assert_eq!(schedule.advance(3_500), 2);
        assert_eq!(schedule.next_deadline_ns(), 4_000);
        // Waking exactly at the next deadline is not a miss.
        let mut schedule = PeriodicSchedule::new(1_000, 1_000);
        assert_eq!(schedule.advance(2_000), 0);
        assert_eq!(schedule.next_deadline_ns(), 2_000);
    }
}
