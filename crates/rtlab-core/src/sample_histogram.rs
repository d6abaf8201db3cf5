//! The histogram a measuring thread records into: a window of small counters over the part of the
//! HdrHistogram where the samples fall, emptied exactly into the [`LatencyHistogram`] at the end.
//!
//! A [`LatencyHistogram`] (1 ns–60 s at 3 significant digits) keeps its counts in 200 KiB of
//! `u64`s; wake-ups of 10–80 µs land on about 3,000 of them, six pages. After 1 ms of sleep the
//! counter a sample increments is rarely still in cache, and in a VM its page's TLB entry often
//! is not either: perf put most of the probe's recording time on that one load (BENCHMARKS.md,
//! "CPU cost per sample"). cyclictest's 1 µs buckets stay on one or two cache lines, but coarser
//! buckets would lose precision the record promises. This keeps the HdrHistogram's own buckets
//! (same index, same precision) for a window of [`WINDOW_BUCKETS`] of them in `u16` counters,
//! 16 KiB, a quarter of the bytes per bucket: the same wake-ups touch about 100 cache lines on
//! two pages. A counter about to overflow is first emptied into the HdrHistogram; a value outside
//! the window goes straight there. The exact sums and extremes are kept per sample as before, so
//! [`SamplePathHistogram::into_histogram`] returns the very histogram that recording every sample
//! into a [`LatencyHistogram`] would have built (tested below, encoded bytes included).

use crate::histogram::{LatencyHistogram, HIGHEST_TRACKABLE_NS};

/// Buckets in a window: with the 3-digit layout, from 0 ns this covers everything below
/// 2^17 ns (131 µs).
pub const WINDOW_BUCKETS: usize = 8192;

/// log2 of half the sub-buckets per bucket of the 3-significant-digit layout (2,048
/// sub-buckets, unit 1 ns).
const SUB_BUCKET_HALF_COUNT_MAGNITUDE: u32 = 10;
const SUB_BUCKET_HALF_COUNT: u64 = 1 << SUB_BUCKET_HALF_COUNT_MAGNITUDE;
const SUB_BUCKET_MASK: u64 = (SUB_BUCKET_HALF_COUNT << 1) - 1;

/// The HdrHistogram counts index of `value_ns` in the 1 ns, 3-digit layout (hdrhistogram's own
/// `index_for`, which is private; the tests check the two agree value by value).
#[inline]
fn bucket_index(value_ns: u64) -> usize {
    // Which power-of-two bucket (0 for values below 2,048 ns), then the sub-bucket in it.
    let bucket =
        63 - SUB_BUCKET_HALF_COUNT_MAGNITUDE - (value_ns | SUB_BUCKET_MASK).leading_zeros();
    let sub_bucket = value_ns >> bucket;
    (((u64::from(bucket) + 1) << SUB_BUCKET_HALF_COUNT_MAGNITUDE) + sub_bucket
        - SUB_BUCKET_HALF_COUNT) as usize
}

/// The lowest value of the bucket at `index` (the inverse of [`bucket_index`]).
fn bucket_lowest_value(index: usize) -> u64 {
    let index = index as u64;
    let bucket = index >> SUB_BUCKET_HALF_COUNT_MAGNITUDE;
    if bucket == 0 {
        index
    } else {
        ((index & (SUB_BUCKET_HALF_COUNT - 1)) + SUB_BUCKET_HALF_COUNT) << (bucket - 1)
    }
}

/// A [`LatencyHistogram`] being recorded on a sample path. Allocates in `new` only.
pub struct SamplePathHistogram {
    histogram: LatencyHistogram,
    /// Counts of buckets `first_index ..= first_index + WINDOW_BUCKETS - 1` not yet in
    /// `histogram`.
    window: Box<[u16]>,
    first_index: usize,
    /// Samples counted in `window` (not yet in `histogram`'s count).
    pending: u64,
}

impl std::fmt::Debug for SamplePathHistogram {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SamplePathHistogram")
            .field("count", &self.count())
            .field("max_ns", &self.max())
            .field("window_from_ns", &bucket_lowest_value(self.first_index))
            .finish()
    }
}

impl SamplePathHistogram {
    /// A window starting at 0 ns: for latencies (wake-up, hand-off).
    pub fn for_latencies() -> Self {
        Self::with_window_from(0)
    }

    /// A window centred on `expected_ns` (in buckets): for intervals between periodic wake-ups,
    /// which fall around the period.
    pub fn around(expected_ns: u64) -> Self {
        let centre = bucket_index(expected_ns.min(HIGHEST_TRACKABLE_NS));
        Self::with_window_from(centre.saturating_sub(WINDOW_BUCKETS / 2))
    }

    fn with_window_from(first_index: usize) -> Self {
        SamplePathHistogram {
            histogram: LatencyHistogram::new(),
            window: vec![0; WINDOW_BUCKETS].into_boxed_slice(),
            first_index,
            pending: 0,
        }
    }

    /// Writes every page of both count arrays once (nothing recorded changes), so that the sample
    /// path takes no page fault under `mlockall(MCL_ONFAULT)`.
    pub fn prefault(&mut self) {
        self.histogram.prefault();
        for page in self.window.chunks_mut(2048) {
            page[0] = std::hint::black_box(page[0]);
        }
    }

    /// Records one value: one `u16` increment inside the window, else the HdrHistogram's own.
    #[inline]
    pub fn record(&mut self, value_ns: u64) {
        let offset = bucket_index(value_ns).wrapping_sub(self.first_index);
        match self.window.get_mut(offset) {
            Some(slot) if value_ns <= HIGHEST_TRACKABLE_NS => {
                if *slot == u16::MAX {
                    self.spill(offset);
                }
                self.window[offset] += 1;
                self.pending += 1;
                self.histogram.record_exact_side(value_ns);
            }
            _ => self.histogram.record(value_ns),
        }
    }

    /// Moves one full counter into the HdrHistogram (once per 65,535 samples of a bucket).
    #[cold]
    #[inline(never)]
    fn spill(&mut self, offset: usize) {
        let count = u64::from(std::mem::take(&mut self.window[offset]));
        self.histogram
            .add_to_bucket(bucket_lowest_value(self.first_index + offset), count);
        self.pending -= count;
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.histogram.count() + self.pending
    }

    /// Largest value recorded, exact (0 when empty).
    pub fn max(&self) -> u64 {
        self.histogram.max()
    }

    /// The histogram of everything recorded, as if each sample had gone into it directly.
    pub fn into_histogram(mut self) -> LatencyHistogram {
        for offset in 0..self.window.len() {
            if self.window[offset] != 0 {
                self.spill(offset);
            }
        }
        debug_assert_eq!(self.pending, 0);
        self.histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every value of the first 2^21 ns, and a spread of larger ones, maps to the bucket
    /// hdrhistogram itself uses: same lowest value, and that lowest value maps back to it.
    #[test]
    fn buckets_are_hdrhistograms_own() {
        let reference = LatencyHistogram::new();
        let inner = reference.inner();
        let larger = (21..36).flat_map(|bit| {
            let base = 1u64 << bit;
            [
                base - 1,
                base,
                base + 1,
                base + base / 3,
                base + base / 2 + 7,
            ]
        });
        for value in (0..(1u64 << 21))
            .chain(larger)
            .chain([HIGHEST_TRACKABLE_NS])
        {
            let index = bucket_index(value);
            assert_eq!(
                bucket_lowest_value(index),
                inner.lowest_equivalent(value),
                "value {value}"
            );
            assert_eq!(bucket_index(bucket_lowest_value(index)), index);
        }
    }

    fn recorded_directly(values: &[u64]) -> LatencyHistogram {
        let mut histogram = LatencyHistogram::new();
        for value in values {
            histogram.record(*value);
        }
        histogram
    }

    fn assert_same(windowed: &LatencyHistogram, direct: &LatencyHistogram) {
        assert_eq!(windowed.summary(), direct.summary());
        assert_eq!(windowed.saturated(), direct.saturated());
        assert_eq!(windowed.buckets(), direct.buckets());
        assert_eq!(windowed.inner().max(), direct.inner().max());
        assert_eq!(windowed.inner().min_nz(), direct.inner().min_nz());
        assert_eq!(windowed.inner().min(), direct.inner().min());
        assert_eq!(
            windowed.to_base64().expect("encodes"),
            direct.to_base64().expect("encodes")
        );
    }

    proptest! {
        /// Whatever the values (inside the window, beyond it, below an interval's window, past
        /// 60 s, zero), the histogram equals one recorded sample by sample.
        #[test]
        fn equals_recording_every_sample_directly(
            values in proptest::collection::vec(
                prop_oneof![
                    0u64..3_000,
                    0u64..200_000,
                    900_000u64..1_100_000,
                    0u64..100_000_000_000,
                    Just(0u64),
                ],
                0..400,
            ),
            centred in any::<bool>(),
        ) {
            let mut windowed = if centred {
                SamplePathHistogram::around(1_000_000)
            } else {
                SamplePathHistogram::for_latencies()
            };
            for value in &values {
                windowed.record(*value);
            }
            prop_assert_eq!(windowed.count(), values.len() as u64);
            prop_assert_eq!(windowed.max(), values.iter().copied().max().unwrap_or(0).min(HIGHEST_TRACKABLE_NS));
            assert_same(&windowed.into_histogram(), &recorded_directly(&values));
        }
    }

    /// A counter that fills up is emptied into the HdrHistogram, and nothing is lost.
    #[test]
    fn full_counters_spill_exactly() {
        let mut windowed = SamplePathHistogram::for_latencies();
        let mut direct = LatencyHistogram::new();
        let samples = 3 * u64::from(u16::MAX) + 11;
        for index in 0..samples {
            let value = if index % 2 == 0 { 25_000 } else { 25_017 };
            windowed.record(value);
            direct.record(value);
        }
        windowed.record(17);
        direct.record(17);
        assert_eq!(windowed.count(), samples + 1);
        assert_same(&windowed.into_histogram(), &direct);
    }

    #[test]
    fn an_interval_window_sits_around_the_period() {
        let windowed = SamplePathHistogram::around(1_000_000);
        let low = bucket_lowest_value(windowed.first_index);
        let high = bucket_lowest_value(windowed.first_index + WINDOW_BUCKETS - 1);
        assert!(low < 500_000 && high > 2_000_000, "{low}..{high}");
        let latencies = SamplePathHistogram::for_latencies();
        assert_eq!(latencies.first_index, 0);
        assert_eq!(
            bucket_lowest_value(WINDOW_BUCKETS),
            1 << 17,
            "the latency window ends at 2^17 ns"
        );
    }

    #[test]
    fn prefaulting_records_nothing() {
        let mut windowed = SamplePathHistogram::around(20_000);
        windowed.prefault();
        assert_eq!(windowed.count(), 0);
        assert_same(&windowed.into_histogram(), &LatencyHistogram::new());
    }
}
