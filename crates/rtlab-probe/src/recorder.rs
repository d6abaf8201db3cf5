//! Per-series recording: histogram, per-second maxima, the largest samples with their times,
//! and the live counters the progress bar reads. Allocation happens once, in `new`; `record`
//! never allocates, locks or makes a syscall.

use rtlab_core::{LatencyHistogram, Peak};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Counters the measuring thread publishes for the progress display (relaxed stores only).
/// Aligned to 128 bytes (two cache lines, the prefetch pair on x86) so that threads on different
/// CPUs never share a line: false sharing would put cache-line transfers on the sample path.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct LiveCounters {
    pub samples: AtomicU64,
    pub max_ns: AtomicU64,
}

/// Everything one series records.
#[derive(Debug)]
pub struct Recorder {
    pub histogram: LatencyHistogram,
    max_per_second: Vec<u64>,
    /// Min-heap of the largest samples: (value, at).
    peaks: BinaryHeap<Reverse<(u64, u64)>>,
    peak_capacity: usize,
    pub missed: u64,
    /// Samples beyond the per-second table (a run longer than planned); still in the histogram.
    pub beyond_table: u64,
    live: Arc<LiveCounters>,
}

impl Recorder {
    /// `seconds` is the planned measuring time in whole seconds (the per-second table's size);
    /// `peak_capacity` how many of the largest samples to keep with their times.
    pub fn new(seconds: usize, peak_capacity: usize, live: Arc<LiveCounters>) -> Self {
        let max_per_second = vec![0; seconds + 1];
        Recorder {
            histogram: LatencyHistogram::new(),
            max_per_second,
            peaks: BinaryHeap::with_capacity(peak_capacity + 1),
            peak_capacity,
            missed: 0,
            beyond_table: 0,
            live,
        }
    }

    /// Records one sample taken `at_ns` after measurement started.
    #[inline]
    pub fn record(&mut self, value_ns: u64, at_ns: u64) {
        self.histogram.record(value_ns);
        let second = (at_ns / 1_000_000_000) as usize;
        match self.max_per_second.get_mut(second) {
            Some(slot) => *slot = (*slot).max(value_ns),
            None => self.beyond_table += 1,
        }
        if self.peak_capacity > 0 {
            if self.peaks.len() < self.peak_capacity {
                self.peaks.push(Reverse((value_ns, at_ns)));
            } else if let Some(mut smallest) = self.peaks.peek_mut() {
                if value_ns > smallest.0 .0 {
                    *smallest = Reverse((value_ns, at_ns));
                }
            }
        }
        let count = self.histogram.count();
        self.live.samples.store(count, Ordering::Relaxed);
        if value_ns > self.live.max_ns.load(Ordering::Relaxed) {
            self.live.max_ns.store(value_ns, Ordering::Relaxed);
        }
    }

    /// Per-second maxima, trimmed to the seconds that were measured (`measured_ns`).
    pub fn max_per_second(&self, measured_ns: u64) -> Vec<u64> {
        let seconds = (measured_ns.div_ceil(1_000_000_000) as usize).min(self.max_per_second.len());
        self.max_per_second[..seconds].to_vec()
    }

    /// The kept peaks, largest first.
    pub fn peaks(&self) -> Vec<Peak> {
        let mut peaks: Vec<Peak> = self
            .peaks
            .iter()
            .map(|Reverse((value_ns, at_ns))| Peak {
                at_ns: *at_ns,
                value_ns: *value_ns,
            })
            .collect();
        peaks.sort_by(|a, b| b.value_ns.cmp(&a.value_ns).then(a.at_ns.cmp(&b.at_ns)));
        peaks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorder(seconds: usize, peaks: usize) -> Recorder {
        Recorder::new(seconds, peaks, Arc::new(LiveCounters::default()))
    }

    #[test]
    fn keeps_the_largest_samples_with_their_times() {
        let mut recorder = recorder(10, 3);
        for (index, value) in [5u64, 1, 9, 3, 7, 8, 2].into_iter().enumerate() {
            recorder.record(value, index as u64 * 1_000);
        }
        let peaks = recorder.peaks();
        assert_eq!(
            peaks,
            vec![
                Peak {
                    at_ns: 2_000,
                    value_ns: 9
                },
                Peak {
                    at_ns: 5_000,
                    value_ns: 8
                },
                Peak {
                    at_ns: 4_000,
                    value_ns: 7
                },
            ]
        );
        assert_eq!(recorder.histogram.count(), 7);
    }

    #[test]
    fn per_second_maxima() {
        let mut recorder = recorder(3, 0);
        recorder.record(10, 100);
        recorder.record(30, 900_000_000);
        recorder.record(20, 1_000_000_000);
        recorder.record(5, 2_500_000_000);
        recorder.record(99, 9_000_000_000);
        assert_eq!(recorder.max_per_second(3_000_000_000), vec![30, 20, 5]);
        assert_eq!(recorder.max_per_second(1_500_000_000), vec![30, 20]);
        assert_eq!(recorder.beyond_table, 1);
        assert_eq!(recorder.histogram.count(), 5);
    }

    #[test]
    fn live_counters_follow_the_samples() {
        let live = Arc::new(LiveCounters::default());
        let mut recorder = Recorder::new(1, 4, Arc::clone(&live));
        recorder.record(7, 0);
        recorder.record(3, 1);
        assert_eq!(live.samples.load(Ordering::Relaxed), 2);
        assert_eq!(live.max_ns.load(Ordering::Relaxed), 7);
    }
}
