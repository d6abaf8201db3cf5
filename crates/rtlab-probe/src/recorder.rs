//! Per-series recording: histogram, per-second maxima, the largest samples with their times,
//! and the live counters the progress bar reads. Allocation happens once, in `new`; `record`
//! never allocates, locks or makes a syscall.

use rtlab_core::{Peak, SamplePathHistogram};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The `capacity` largest samples with their times, kept cheaply on the sample path.
///
/// A binary heap of the largest samples costs a sift through `log2(capacity)` levels, each on a
/// different cache line, whenever a sample enters it; under a cache-hungry load those lines are
/// gone, and the probe spent most of its recording time there (perf, BENCHMARKS.md). Here a
/// sample enters by one comparison with a floor and one append to a buffer of twice the capacity;
/// when the buffer is full it is compacted to the `capacity` largest (a selection, linear in the
/// buffer) and the floor rises to the smallest kept. A compaction frees `capacity` slots, so it
/// costs O(1) per entering sample, and entering becomes rare as the floor rises.
///
/// Among equal values the earlier samples are kept, and a sample equal to the floor after a
/// compaction does not enter (it would rank after the kept ones).
#[derive(Debug)]
pub struct LargestSamples {
    /// `(value_ns, at_ns)`, unordered; never grows beyond its allocation.
    buffer: Vec<(u64, u64)>,
    capacity: usize,
    /// After the first compaction, the smallest value kept: only larger samples can enter.
    floor_ns: Option<u64>,
}

impl LargestSamples {
    /// Keeps the `capacity` largest samples; allocates here, never afterwards.
    pub fn new(capacity: usize) -> Self {
        LargestSamples {
            buffer: Vec::with_capacity(capacity * 2),
            capacity,
            floor_ns: None,
        }
    }

    /// Writes every slot of the buffer once, so its pages are resident (and, under
    /// `mlockall(MCL_ONFAULT)`, locked) before the first sample.
    pub fn prefault(&mut self) {
        let slots = self.buffer.capacity();
        self.buffer.resize(slots, (0, 0));
        std::hint::black_box(&mut self.buffer);
        self.buffer.clear();
    }

    /// Offers one sample taken `at_ns`.
    #[inline]
    pub fn offer(&mut self, value_ns: u64, at_ns: u64) {
        if self.capacity == 0 || self.floor_ns.is_some_and(|floor| value_ns <= floor) {
            return;
        }
        if self.buffer.len() == self.buffer.capacity() {
            self.compact();
            if self.floor_ns.is_some_and(|floor| value_ns <= floor) {
                return;
            }
        }
        self.buffer.push((value_ns, at_ns));
    }

    /// Keeps the `capacity` largest (earliest first among equals) and raises the floor.
    #[cold]
    fn compact(&mut self) {
        let keep = self.capacity;
        if self.buffer.len() > keep {
            // Largest first; among equal values the earliest first.
            self.buffer
                .select_nth_unstable_by(keep - 1, |a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            self.buffer.truncate(keep);
        }
        self.floor_ns = self.buffer.iter().map(|(value, _)| *value).min();
    }

    /// The kept samples, largest first (earliest first among equals).
    pub fn peaks(&self) -> Vec<Peak> {
        let mut peaks: Vec<Peak> = self
            .buffer
            .iter()
            .map(|&(value_ns, at_ns)| Peak { at_ns, value_ns })
            .collect();
        // The order is total (no two samples of a thread share a time), so an unstable sort of
        // the kept part gives the order a stable sort of all would: up to twice the capacity is
        // buffered, and a run's end sorts every series' buffer.
        let order = |a: &Peak, b: &Peak| b.value_ns.cmp(&a.value_ns).then(a.at_ns.cmp(&b.at_ns));
        if peaks.len() > self.capacity && self.capacity > 0 {
            peaks.select_nth_unstable_by(self.capacity - 1, order);
        }
        peaks.truncate(self.capacity);
        peaks.sort_unstable_by(order);
        peaks
    }
}

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
    /// Exactly a `LatencyHistogram` once finished (`SamplePathHistogram::into_histogram`), with
    /// fewer cache lines per sample on the way.
    pub histogram: SamplePathHistogram,
    max_per_second: Vec<u64>,
    /// The second being measured, `[start, end)` ns after measurement started, and its maximum so
    /// far: kept here, on the recorder's own cache line, and written to `max_per_second` when the
    /// second changes, so a sample touches the table once a second rather than every time.
    second_index: usize,
    second_start_ns: u64,
    second_end_ns: u64,
    second_max_ns: u64,
    peaks: LargestSamples,
    pub missed: u64,
    /// Samples beyond the per-second table (a run longer than planned); still in the histogram.
    pub beyond_table: u64,
    /// The largest value stored in `live.max_ns`, so the live line is only written when it grows.
    published_max_ns: u64,
    live: Arc<LiveCounters>,
}

/// The live sample count is published every this many samples (a power of two): the progress
/// display reads it ten times a second, and the store is one more cache line per sample.
const LIVE_COUNT_EVERY: u64 = 64;

/// `second_index` when no second of the table is being measured.
const NO_SECOND: usize = usize::MAX;

impl Recorder {
    /// `seconds` is the planned measuring time in whole seconds (the per-second table's size);
    /// `peak_capacity` how many of the largest samples to keep with their times; `histogram`
    /// where its samples are expected to fall (`SamplePathHistogram::for_latencies` or
    /// `SamplePathHistogram::around` the period).
    pub fn new(
        seconds: usize,
        peak_capacity: usize,
        histogram: SamplePathHistogram,
        live: Arc<LiveCounters>,
    ) -> Self {
        let max_per_second = vec![0; seconds + 1];
        Recorder {
            histogram,
            max_per_second,
            second_index: NO_SECOND,
            second_start_ns: 0,
            second_end_ns: 0,
            second_max_ns: 0,
            peaks: LargestSamples::new(peak_capacity),
            missed: 0,
            beyond_table: 0,
            published_max_ns: 0,
            live,
        }
    }

    /// Writes every page of the recorder's buffers (histogram counts, per-second table, peaks)
    /// once, so the sample path never takes a page fault: the probe locks memory with
    /// `MCL_ONFAULT`, which locks pages as they are touched instead of populating everything.
    pub fn prefault(&mut self) {
        self.histogram.prefault();
        // One write per page; `black_box` keeps the compiler from dropping a store of the
        // zero the allocator already promised.
        for page in self.max_per_second.chunks_mut(512) {
            page[0] = std::hint::black_box(0);
        }
        self.peaks.prefault();
    }

    /// Records one sample taken `at_ns` after measurement started.
    #[inline]
    pub fn record(&mut self, value_ns: u64, at_ns: u64) {
        self.histogram.record(value_ns);
        if (self.second_start_ns..self.second_end_ns).contains(&at_ns) {
            self.second_max_ns = self.second_max_ns.max(value_ns);
        } else {
            self.enter_second(value_ns, at_ns);
        }
        self.peaks.offer(value_ns, at_ns);
        let count = self.histogram.count();
        if count.is_multiple_of(LIVE_COUNT_EVERY) {
            self.live.samples.store(count, Ordering::Relaxed);
        }
        if value_ns > self.published_max_ns {
            self.published_max_ns = value_ns;
            self.live.max_ns.store(value_ns, Ordering::Relaxed);
        }
    }

    /// A sample outside the current second: the finished second's maximum goes to the table.
    #[inline(never)]
    fn enter_second(&mut self, value_ns: u64, at_ns: u64) {
        self.flush_second();
        let second = (at_ns / 1_000_000_000) as usize;
        if second < self.max_per_second.len() {
            self.second_index = second;
            self.second_start_ns = second as u64 * 1_000_000_000;
            self.second_end_ns = self.second_start_ns + 1_000_000_000;
            self.second_max_ns = value_ns;
        } else {
            // Beyond the table: every such sample comes here and is counted.
            self.beyond_table += 1;
            self.second_index = NO_SECOND;
            self.second_start_ns = 0;
            self.second_end_ns = 0;
        }
    }

    fn flush_second(&mut self) {
        if let Some(slot) = self.max_per_second.get_mut(self.second_index) {
            *slot = (*slot).max(self.second_max_ns);
        }
    }

    /// Per-second maxima, trimmed to the seconds that were measured (`measured_ns`).
    pub fn max_per_second(&self, measured_ns: u64) -> Vec<u64> {
        let seconds = (measured_ns.div_ceil(1_000_000_000) as usize).min(self.max_per_second.len());
        let mut maxima = self.max_per_second[..seconds].to_vec();
        if let Some(slot) = maxima.get_mut(self.second_index) {
            *slot = (*slot).max(self.second_max_ns);
        }
        maxima
    }

    /// Samples recorded so far.
    pub fn count(&self) -> u64 {
        self.histogram.count()
    }

    /// The kept peaks, largest first.
    pub fn peaks(&self) -> Vec<Peak> {
        self.peaks.peaks()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The specification the buffer must meet: every sample sorted largest first, earliest first
    /// among equals, cut to `capacity`.
    fn largest_by_sorting(samples: &[(u64, u64)], capacity: usize) -> Vec<Peak> {
        let mut all: Vec<Peak> = samples
            .iter()
            .map(|&(value_ns, at_ns)| Peak { at_ns, value_ns })
            .collect();
        all.sort_by(|a, b| b.value_ns.cmp(&a.value_ns).then(a.at_ns.cmp(&b.at_ns)));
        all.truncate(capacity);
        all
    }

    proptest! {
        /// Whatever the order and however many ties, the buffer keeps exactly the largest samples
        /// (values from a small range make ties at the floor common).
        #[test]
        fn largest_samples_match_a_full_sort(
            values in proptest::collection::vec(0u64..40, 0..600),
            capacity in 0usize..70,
        ) {
            let samples: Vec<(u64, u64)> = values
                .iter()
                .enumerate()
                .map(|(index, value)| (*value, index as u64 * 1_000))
                .collect();
            let mut largest = LargestSamples::new(capacity);
            for &(value_ns, at_ns) in &samples {
                largest.offer(value_ns, at_ns);
            }
            prop_assert_eq!(largest.peaks(), largest_by_sorting(&samples, capacity));
        }
    }

    #[test]
    fn the_buffer_never_grows_beyond_its_allocation() {
        let mut largest = LargestSamples::new(8);
        let allocated = largest.buffer.capacity();
        // Rising values: every sample enters, so the buffer is compacted again and again.
        for index in 0..10_000u64 {
            largest.offer(index, index);
            assert_eq!(largest.buffer.capacity(), allocated);
        }
        assert_eq!(largest.floor_ns, Some(9_984));
        assert_eq!(
            largest.peaks().first().map(|peak| peak.value_ns),
            Some(9_999)
        );
        assert_eq!(largest.peaks().len(), 8);
    }

    #[test]
    fn zero_capacity_keeps_nothing() {
        let mut largest = LargestSamples::new(0);
        largest.offer(5, 0);
        assert!(largest.peaks().is_empty());
    }

    #[test]
    fn samples_after_the_table_are_counted_and_still_histogrammed() {
        let mut recorder = recorder(2, 4);
        recorder.record(40, 2_999_999_999);
        recorder.record(50, 3_000_000_000);
        assert_eq!(recorder.beyond_table, 1);
        assert_eq!(recorder.max_per_second(3_000_000_000), vec![0, 0, 40]);
        assert_eq!(recorder.histogram.count(), 2);
        // Peaks keep every sample, inside the table or not.
        assert_eq!(recorder.peaks().len(), 2);
    }

    #[test]
    fn a_zero_latency_is_a_sample_like_any_other() {
        let mut recorder = recorder(1, 2);
        recorder.record(0, 0);
        assert_eq!(recorder.histogram.count(), 1);
        assert_eq!(
            recorder.peaks(),
            vec![Peak {
                at_ns: 0,
                value_ns: 0
            }]
        );
    }

    fn recorder(seconds: usize, peaks: usize) -> Recorder {
        Recorder::new(
            seconds,
            peaks,
            SamplePathHistogram::for_latencies(),
            Arc::new(LiveCounters::default()),
        )
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

    /// Prefaulting writes memory, never data: a prefaulted recorder records exactly what a
    /// fresh one does, and its peak buffer keeps its allocation.
    #[test]
    fn prefaulting_changes_nothing_recorded() {
        let mut plain = recorder(3, 4);
        let mut touched = recorder(3, 4);
        touched.prefault();
        assert_eq!(touched.count(), 0);
        assert!(touched.peaks().is_empty());
        let capacity = touched.peaks.buffer.capacity();
        for (index, value) in [7u64, 3, 90, 12, 90, 5, 44, 1].into_iter().enumerate() {
            let at_ns = index as u64 * 400_000_000;
            plain.record(value, at_ns);
            touched.record(value, at_ns);
        }
        assert_eq!(touched.peaks(), plain.peaks());
        assert_eq!(
            touched.max_per_second(3_000_000_000),
            plain.max_per_second(3_000_000_000)
        );
        assert_eq!(touched.histogram.count(), plain.histogram.count());
        assert_eq!(touched.histogram.max(), plain.histogram.max());
        assert_eq!(touched.peaks.buffer.capacity(), capacity);
    }

    #[test]
    fn live_counters_follow_the_samples() {
        let live = Arc::new(LiveCounters::default());
        let mut recorder = Recorder::new(
            1,
            4,
            SamplePathHistogram::for_latencies(),
            Arc::clone(&live),
        );
        recorder.record(7, 0);
        recorder.record(3, 1);
        // The maximum at once, the count every LIVE_COUNT_EVERY samples.
        assert_eq!(live.max_ns.load(Ordering::Relaxed), 7);
        assert_eq!(live.samples.load(Ordering::Relaxed), 0);
        for index in 2..LIVE_COUNT_EVERY {
            recorder.record(1, index);
        }
        assert_eq!(live.samples.load(Ordering::Relaxed), LIVE_COUNT_EVERY);
        recorder.record(9, LIVE_COUNT_EVERY);
        assert_eq!(live.max_ns.load(Ordering::Relaxed), 9);
        assert_eq!(recorder.count(), LIVE_COUNT_EVERY + 1);
    }

    proptest! {
        /// The per-second table with its pending second equals the maxima computed directly, for
        /// samples in time order that may skip seconds or run past the table.
        #[test]
        fn per_second_maxima_match_a_direct_computation(
            steps in proptest::collection::vec((0u64..700_000_000, 0u64..1_000), 1..200),
            seconds in 1usize..8,
        ) {
            let mut recorder = recorder(seconds, 0);
            let mut expected = vec![0u64; seconds + 1];
            let mut beyond = 0;
            let mut at_ns = 0;
            for (step, value) in steps {
                at_ns += step;
                recorder.record(value, at_ns);
                match expected.get_mut((at_ns / 1_000_000_000) as usize) {
                    Some(slot) => *slot = (*slot).max(value),
                    None => beyond += 1,
                }
            }
            let measured_ns = (seconds as u64 + 1) * 1_000_000_000;
            prop_assert_eq!(recorder.max_per_second(measured_ns), expected);
            prop_assert_eq!(recorder.beyond_table, beyond);
        }
    }
}
