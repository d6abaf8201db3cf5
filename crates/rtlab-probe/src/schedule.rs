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
    use proptest::prelude::*;

    proptest! {
        /// `advance` agrees with walking the deadlines one by one: the next deadline is the first
        /// one at or after the wake-up, and every deadline strictly between is counted missed.
        #[test]
        fn advance_matches_walking_the_deadlines(
            first in 0u64..1_000_000,
            period in 1u64..5_000,
            lateness in proptest::collection::vec(0u64..20_000, 1..50),
        ) {
            let mut schedule = PeriodicSchedule::new(first, period);
            let mut walked_next = first;
            let mut total_missed = 0;
            let mut wakeups = 0u64;
            for late in lateness {
                let now = schedule.next_deadline_ns() + late;
                let skipped = schedule.advance(now);
                // The naive walk: step past the deadline just served, then past every one < now.
                walked_next += period;
                let mut walked_skipped = 0;
                while walked_next < now {
                    walked_next += period;
                    walked_skipped += 1;
                }
                prop_assert_eq!(skipped, walked_skipped);
                prop_assert_eq!(schedule.next_deadline_ns(), walked_next);
                prop_assert!(schedule.next_deadline_ns() >= now);
                total_missed += skipped;
                wakeups += 1;
            }
            // Every period up to the next deadline was either served or counted missed.
            prop_assert_eq!(
                (schedule.next_deadline_ns() - first) / period,
                wakeups + total_missed
            );
        }
    }

    #[test]
    #[should_panic(expected = "period must be positive")]
    fn a_zero_period_is_refused() {
        PeriodicSchedule::new(0, 0);
    }

    #[test]
    fn a_long_stall_counts_every_period_it_swallowed() {
        let mut schedule = PeriodicSchedule::new(0, 1_000_000);
        // Woken 4.2 s late at a 1 ms period: deadlines 1 ms … 4200 ms passed unserved.
        assert_eq!(schedule.advance(4_200_000_001), 4_200);
        assert_eq!(schedule.next_deadline_ns(), 4_201_000_000);
    }

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
