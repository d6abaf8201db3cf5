//! The wake-up series of the `run` probe's default class, rt-high (SCHED_FIFO 90 woken every
//! 1 ms), built from a histogram: the series that examples and tests in every crate start from.
//!
//! [`RunRecord::series_from_histogram`] takes eleven positional arguments; a fixture that wants
//! "an rt-high series on CPU 1 with these samples" names only what differs, so the class, the
//! policy, the priority and the period are written once, here.

use crate::histogram::{HistogramError, LatencyHistogram};
use crate::metric::Metric;
use crate::peak::Peak;
use crate::record::{RunRecord, Series};

/// The rt-high wake-up series on `cpu` of `histogram`, with `missed` periods skipped, no lost
/// samples, the per-second maxima `max_per_second` and the `peaks` kept.
pub fn rt_high_wakeup_series(
    cpu: u32,
    histogram: &LatencyHistogram,
    missed: u64,
    max_per_second: Vec<u64>,
    peaks: Vec<Peak>,
) -> Result<Series, HistogramError> {
    RunRecord::series_from_histogram(
        Metric::Wakeup,
        "rt-high",
        cpu,
        "SCHED_FIFO",
        90,
        1_000_000,
        histogram,
        missed,
        0,
        max_per_second,
        peaks,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_series_is_the_default_class_of_the_run_probe() {
        let mut histogram = LatencyHistogram::new();
        histogram.record_n(20_000, 3);
        let series = rt_high_wakeup_series(2, &histogram, 1, vec![20_000], Vec::new()).unwrap();
        assert_eq!(series.metric, Metric::Wakeup);
        assert_eq!(series.class, "rt-high");
        assert_eq!(series.cpu, 2);
        assert_eq!(series.policy, "SCHED_FIFO");
        assert_eq!(series.priority, 90);
        assert_eq!(series.period_ns, 1_000_000);
        assert_eq!((series.count, series.missed, series.lost), (3, 1, 0));
        assert_eq!(series.max_per_second, vec![20_000]);
    }
}
