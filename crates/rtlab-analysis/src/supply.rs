//! The CPU a thread really received, judged the way a reservation promises it: "at least X in
//! *every* window of length Y". Given when the thread ran (intervals from sched_switch events),
//! every sliding window of length Y, stepped by 10 µs, is measured; the report says what share of
//! windows held at least X, the least any window got, and the 1st percentile.
//!
//! Pure: `rtlab reserve --verify`, the supply benchmark and the backends' property tests all use it.

use rtlab_core::Nanos;
use serde::Serialize;

/// The step between successive window starts: fine enough that the worst window is found to within
/// 10 µs of its true position.
pub const DEFAULT_STEP: Nanos = Nanos(10_000);

/// What a reserved thread received, window by window.
#[derive(Debug, Clone, Serialize)]
pub struct VerifiedSupply {
    pub tid: u32,
    #[serde(flatten)]
    pub supply: SupplyReport,
    /// Switches the kernel dropped (a full ring): when non-zero the figures may be off.
    pub lost_events: u64,
}

/// Why no report can be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SupplyError {
    #[error("period is zero")]
    ZeroPeriod,
    #[error("step is zero")]
    ZeroStep,
    #[error("the observation [{from}, {to}) is shorter than one period {period}")]
    TooShort {
        from: Nanos,
        to: Nanos,
        period: Nanos,
    },
    #[error("run interval {index} [{start}, {end}) is reversed or overlaps the one before")]
    BadInterval {
        index: usize,
        start: Nanos,
        end: Nanos,
    },
}

/// The supply one thread received in every sliding window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SupplyReport {
    pub amount_ns: u64,
    pub period_ns: u64,
    pub step_ns: u64,
    /// Windows measured: every start `from + k·step` with the window inside the observation.
    pub windows: u64,
    /// Windows that received at least `amount`.
    pub windows_meeting: u64,
    /// `windows_meeting / windows`.
    pub share_meeting: f64,
    /// The least CPU time any window received.
    pub min_ns: u64,
    /// Start of (the first) window that received `min_ns`.
    pub min_window_start_ns: u64,
    /// The 1st percentile of the windows' CPU time (nearest rank).
    pub p1_ns: u64,
    /// The mean CPU time per window.
    pub mean_ns: f64,
    /// CPU time received over the whole observation.
    pub total_run_ns: u64,
}

/// Cumulative run time of sorted, disjoint intervals, evaluated at arbitrary times.
struct Cumulative<'a> {
    intervals: &'a [(u64, u64)],
    before: Vec<u64>,
}

impl<'a> Cumulative<'a> {
    fn new(intervals: &'a [(u64, u64)]) -> Cumulative<'a> {
        let mut before = Vec::with_capacity(intervals.len() + 1);
        let mut sum = 0u64;
        for &(start, end) in intervals {
            before.push(sum);
            sum += end - start;
        }
        before.push(sum);
        Cumulative { intervals, before }
    }

    /// Run time in `(-∞, t)`.
    fn at(&self, t: u64) -> u64 {
        let index = self.intervals.partition_point(|&(start, _)| start < t);
        if index == 0 {
            return 0;
        }
        let (start, end) = self.intervals[index - 1];
        self.before[index - 1] + end.min(t) - start
    }
}

/// Measures every window `[from + k·step, from + k·step + period)` inside `[from, to)`.
///
/// `runs` are the intervals the thread was on a CPU, in time order and disjoint (touching is
/// fine); parts outside `[from, to)` are ignored.
pub fn sliding_window_supply(
    runs: &[(Nanos, Nanos)],
    from: Nanos,
    to: Nanos,
    amount: Nanos,
    period: Nanos,
    step: Nanos,
) -> Result<SupplyReport, SupplyError> {
    if period.0 == 0 {
        return Err(SupplyError::ZeroPeriod);
    }
    if step.0 == 0 {
        return Err(SupplyError::ZeroStep);
    }
    if to.0 < from.0.saturating_add(period.0) {
        return Err(SupplyError::TooShort { from, to, period });
    }
    let mut clipped: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
    let mut previous_end = 0u64;
    for (index, &(start, end)) in runs.iter().enumerate() {
        if end < start || (index > 0 && start.0 < previous_end) {
            return Err(SupplyError::BadInterval { index, start, end });
        }
        previous_end = end.0;
        let (start, end) = (start.0.max(from.0), end.0.min(to.0));
        if start < end {
            clipped.push((start, end));
        }
    }
    let cumulative = Cumulative::new(&clipped);
    let n_windows = (to.0 - from.0 - period.0) / step.0 + 1;
    let mut supplies = Vec::with_capacity(n_windows as usize);
    let (mut min_ns, mut min_window_start_ns) = (u64::MAX, 0u64);
    let mut meeting = 0u64;
    let mut sum = 0u128;
    for k in 0..n_windows {
        let start = from.0 + k * step.0;
        let supply = cumulative.at(start + period.0) - cumulative.at(start);
        if supply < min_ns {
            (min_ns, min_window_start_ns) = (supply, start);
        }
        if supply >= amount.0 {
            meeting += 1;
        }
        sum += u128::from(supply);
        supplies.push(supply);
    }
    let rank = (n_windows as usize).div_ceil(100).max(1) - 1;
    let (_, p1, _) = supplies.select_nth_unstable(rank);
    Ok(SupplyReport {
        amount_ns: amount.0,
        period_ns: period.0,
        step_ns: step.0,
        windows: n_windows,
        windows_meeting: meeting,
        share_meeting: meeting as f64 / n_windows as f64,
        min_ns,
        min_window_start_ns,
        p1_ns: *p1,
        mean_ns: sum as f64 / n_windows as f64,
        total_run_ns: cumulative.at(to.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ns(value: u64) -> Nanos {
        Nanos(value)
    }

    #[test]
    fn a_periodic_slot_gives_exactly_its_amount_in_every_window_of_its_period() {
        // 2 of every 10, for 100: every window of 10 holds exactly 2.
        let runs: Vec<(Nanos, Nanos)> = (0..10).map(|k| (ns(k * 10), ns(k * 10 + 2))).collect();
        let report = sliding_window_supply(&runs, ns(0), ns(100), ns(2), ns(10), ns(1)).unwrap();
        assert_eq!(report.windows, 91);
        assert_eq!(report.windows_meeting, 91);
        assert_eq!(report.min_ns, 2);
        assert_eq!(report.p1_ns, 2);
        assert_eq!(report.total_run_ns, 20);
    }

    #[test]
    fn a_gap_is_found_at_its_position() {
        // Runs at [0,2) and [16,18): the window [2,12) gets nothing.
        let runs = [(ns(0), ns(2)), (ns(16), ns(18))];
        let report = sliding_window_supply(&runs, ns(0), ns(20), ns(2), ns(10), ns(1)).unwrap();
        assert_eq!(report.min_ns, 0);
        assert_eq!(report.min_window_start_ns, 2);
        // Windows starting at 0..=10: those holding 2 are start 0 (gets [0,2)) and 8..=10.
        assert_eq!(report.windows, 11);
        assert_eq!(report.windows_meeting, 4);
    }

    #[test]
    fn refuses_bad_input() {
        let overlap = [(ns(0), ns(5)), (ns(4), ns(6))];
        assert!(matches!(
            sliding_window_supply(&overlap, ns(0), ns(20), ns(1), ns(10), ns(1)),
            Err(SupplyError::BadInterval { index: 1, .. })
        ));
        assert!(matches!(
            sliding_window_supply(&[], ns(0), ns(5), ns(1), ns(10), ns(1)),
            Err(SupplyError::TooShort { .. })
        ));
        assert_eq!(
            sliding_window_supply(&[], ns(0), ns(50), ns(1), ns(0), ns(1)),
            Err(SupplyError::ZeroPeriod)
        );
    }

    proptest! {
        /// Against a brute force over a unit-step occupancy array.
        #[test]
        fn matches_brute_force(
            gaps in proptest::collection::vec((0u64..7, 1u64..6), 0..20),
            period in 1u64..15,
            amount in 0u64..10,
        ) {
            let mut runs = Vec::new();
            let mut time = 0u64;
            for (gap, length) in gaps {
                time += gap;
                runs.push((ns(time), ns(time + length)));
                time += length;
            }
            let to = time.max(period) + 3;
            let mut busy = vec![0u64; to as usize];
            for &(start, end) in &runs {
                for t in start.0..end.0 {
                    busy[t as usize] = 1;
                }
            }
            let report = sliding_window_supply(&runs, ns(0), ns(to), ns(amount), ns(period), ns(1)).unwrap();
            let windows: Vec<u64> = (0..=(to - period)).map(|a| busy[a as usize..(a + period) as usize].iter().sum()).collect();
            prop_assert_eq!(report.windows, windows.len() as u64);
            prop_assert_eq!(report.min_ns, *windows.iter().min().unwrap());
            prop_assert_eq!(report.windows_meeting, windows.iter().filter(|&&w| w >= amount).count() as u64);
        }
    }
}
