//! Per-thread activation statistics in bounded memory, for threads with more activations than
//! are kept ([`ACTIVATIONS_KEPT`]).
//!
//! A thread's first activations are kept exactly (the periods, CPU statistics and late
//! activations of a short trace are computed from them as before). Every activation also feeds
//! summaries whose size does not grow with the activations: sparse log-linear histograms (32
//! sub-buckets per power of two, each bucket with its count, exact sum and sum of squares) of the
//! intervals between activation starts (all of them, and per waker for the first
//! [`WAKERS_FOLLOWED`] wakers) and of the CPU time per activation. Once a thread's kept
//! activations are full, its period and usual waker are learnt from them and later activations
//! are grouped into jobs as they come (a job is bounded), so late activations are still found,
//! with at most [`LATE_KEPT`] of them kept per thread with their critical paths.
//!
//! The hdrhistogram crate (rtlab-core's `LatencyHistogram`) holds a dense array of some 200 KB
//! for its range; a thread needs only the few buckets its values touch, hence this small map.

use super::period::detect_period;
use super::{Activation, BlockReason};
use rustc_hash::FxHashMap;

/// Activations kept exactly per thread (48 bytes each).
pub(crate) const ACTIVATIONS_KEPT: usize = 2048;
/// Wakers whose activation intervals are followed per thread (the usual one is among the first
/// few seen in practice; otherwise the period comes from all activations).
pub(crate) const WAKERS_FOLLOWED: usize = 4;
/// Late activations kept per thread (with their jobs) beyond the kept activations.
pub(crate) const LATE_KEPT: usize = 200;
/// Activations kept in one job (a job's later ones only add to its response time).
const JOB_KEPT: usize = 64;

const SUB_BUCKET_BITS: u32 = 5;

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    count: u64,
    sum: u128,
    sum_of_squares: f64,
    max: u64,
}

/// A sparse log-linear histogram: values below 32 exact, then 32 buckets per power of two
/// (about 3 % wide), each with its exact sum and sum of squares.
#[derive(Clone, Debug, Default)]
pub(crate) struct SparseHistogram {
    buckets: FxHashMap<u32, Bucket>,
    count: u64,
    sum: u128,
    max: u64,
}

fn bucket_of(value: u64) -> u32 {
    if value < (1 << SUB_BUCKET_BITS) {
        return value as u32;
    }
    let msb = 63 - value.leading_zeros();
    let sub = (value >> (msb - SUB_BUCKET_BITS)) as u32 & ((1 << SUB_BUCKET_BITS) - 1);
    ((msb - SUB_BUCKET_BITS + 1) << SUB_BUCKET_BITS) + sub
}

impl SparseHistogram {
    pub(crate) fn add(&mut self, value: u64) {
        let bucket = self.buckets.entry(bucket_of(value)).or_default();
        bucket.count += 1;
        bucket.sum += u128::from(value);
        bucket.sum_of_squares += (value as f64) * (value as f64);
        bucket.max = bucket.max.max(value);
        self.count += 1;
        self.sum += u128::from(value);
        self.max = self.max.max(value);
    }

    pub(crate) fn mean(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            (self.sum / u128::from(self.count)) as u64
        }
    }

    pub(crate) fn max(&self) -> u64 {
        self.max
    }

    fn sorted(&self) -> Vec<(u32, Bucket)> {
        let mut buckets: Vec<(u32, Bucket)> = self.buckets.iter().map(|(k, b)| (*k, *b)).collect();
        buckets.sort_unstable_by_key(|(key, _)| *key);
        buckets
    }

    /// The `p`-th percentile, nearest rank: the largest value seen in the bucket holding that
    /// rank (at most one bucket, about 3 %, above the exact figure).
    pub(crate) fn percentile(&self, p: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((p / 100.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (_, bucket) in self.sorted() {
            seen += bucket.count;
            if seen >= rank {
                return bucket.max;
            }
        }
        self.max
    }

    /// `(period, jitter)` of the intervals held, as `period::detect_period` decides from exact
    /// intervals: the intervals within 10 % of their median (here: the buckets whose mean is)
    /// must be at least 60 % of all (at least 4); the period is their mean, the jitter their
    /// standard deviation, both exact over those buckets.
    pub(crate) fn period(&self) -> Option<(u64, u64)> {
        if self.count < 4 {
            return None;
        }
        let buckets = self.sorted();
        let median_rank = self.count / 2;
        let mut seen = 0;
        let mut median = 0.0;
        for (_, bucket) in &buckets {
            seen += bucket.count;
            if seen > median_rank {
                median = bucket.sum as f64 / bucket.count as f64;
                break;
            }
        }
        if median < 1.0 {
            return None;
        }
        let tolerance = median / 10.0;
        let (mut count, mut sum, mut squares) = (0u64, 0f64, 0f64);
        for (_, bucket) in &buckets {
            let mean = bucket.sum as f64 / bucket.count as f64;
            if (mean - median).abs() <= tolerance {
                count += bucket.count;
                sum += bucket.sum as f64;
                squares += bucket.sum_of_squares;
            }
        }
        if count < 4 || count * 10 < self.count * 6 {
            return None;
        }
        let mean = sum / count as f64;
        let variance = (squares / count as f64 - mean * mean).max(0.0);
        Some((mean.round() as u64, variance.sqrt().round() as u64))
    }
}

/// A thread's activations beyond the kept ones: summaries, and the jobs under way.
#[derive(Clone, Debug, Default)]
pub(crate) struct ActivationSummary {
    pub n_activations: u64,
    pub cpu: SparseHistogram,
    /// CPU per cycle (`super::cycles`) once the period is learnt: the kept activations' then,
    /// each later one as it ends (`last_end`: the end of the one before).
    cycle_cpu: SparseHistogram,
    last_end: Option<u64>,
    /// The kept activations' median CPU (`cycles::usual_cpu`).
    usual_cpu: u64,
    all_intervals: SparseHistogram,
    pub(crate) last_start: Option<u64>,
    /// waker → (its last activation's start, intervals between its activations).
    by_waker: FxHashMap<i32, (u64, SparseHistogram)>,
    /// Learnt from the kept activations when they were full: (period, usual waker).
    learnt: Option<(u64, i32)>,
    job: Vec<Activation>,
    job_end: u64,
    /// The late jobs found beyond the kept activations (the first [`LATE_KEPT`]), with their
    /// (start, response) in `late_responses`, and how many there were in all.
    pub late: Vec<Vec<Activation>>,
    pub late_responses: Vec<(u64, u64)>,
    pub late_total: u64,
    /// The gaps without activation found beyond the kept activations (the first
    /// [`LATE_KEPT`]: the activation after the gap, and the periods it spans), and how many.
    pub missed: Vec<(Activation, u64, Option<u64>)>,
    pub missed_total: u64,
    /// The job before the one under way: its start, whether it was late, its end.
    previous_job: Option<(u64, bool, u64)>,
}

impl ActivationSummary {
    /// Counts one completed activation. `kept` are the thread's kept activations (full once
    /// `n_activations` passes [`ACTIVATIONS_KEPT`]); `dominant` its usual waker so far.
    pub(crate) fn add(&mut self, activation: &Activation, kept: &[Activation], dominant: i32) {
        self.n_activations += 1;
        self.cpu.add(activation.cpu_ns);
        self.add_start(activation.start, activation.waker);
        if self.n_activations as usize <= ACTIVATIONS_KEPT {
            return;
        }
        if self.n_activations as usize == ACTIVATIONS_KEPT + 1 {
            let starts: Vec<u64> = kept
                .iter()
                .filter(|kept| kept.waker == dominant)
                .map(|kept| kept.start)
                .collect();
            let all: Vec<u64> = kept.iter().map(|kept| kept.start).collect();
            self.learnt = detect_period(&starts)
                .or_else(|| detect_period(&all))
                .map(|(period, _)| (period, dominant));
            if let Some((period, _)) = self.learnt {
                for each in super::cycles::per_cycle(kept, None, Some(period)) {
                    self.cycle_cpu.add(each);
                }
                self.last_end = kept.last().map(|kept| kept.end);
                self.usual_cpu = super::cycles::usual_cpu(kept);
            }
        }
        if let Some((period, waker)) = self.learnt {
            let cycles =
                super::cycles::cycles_in(activation, self.last_end, period, self.usual_cpu);
            let each = super::cycles::cpu_of_each(activation, cycles);
            for _ in 0..cycles {
                self.cycle_cpu.add(each);
            }
            self.last_end = Some(activation.end);
            self.job_step(activation, period, waker);
        }
    }

    /// CPU per cycle over every completed activation (per activation without a learnt period).
    pub(crate) fn cycle_cpu(&self) -> &SparseHistogram {
        if self.learnt.is_some() {
            &self.cycle_cpu
        } else {
            &self.cpu
        }
    }

    fn add_start(&mut self, start: u64, waker: i32) {
        if let Some(last) = self.last_start {
            self.all_intervals.add(start.saturating_sub(last));
        }
        self.last_start = Some(start);
        let followed = self.by_waker.len();
        match self.by_waker.get_mut(&waker) {
            Some((last, intervals)) => {
                intervals.add(start.saturating_sub(*last));
                *last = start;
            }
            None if followed < WAKERS_FOLLOWED => {
                self.by_waker
                    .insert(waker, (start, SparseHistogram::default()));
            }
            None => {}
        }
    }

    /// The job grouping of `findings::jobs`, one activation at a time.
    fn job_step(&mut self, activation: &Activation, period: u64, waker: i32) {
        let continues = activation.waker != waker
            && activation.woke_from == Some(BlockReason::Futex)
            && self
                .job
                .first()
                .is_some_and(|first| activation.start < first.start + period);
        if continues {
            if self.job.len() < JOB_KEPT {
                self.job.push(*activation);
            }
            self.job_end = activation.end;
            return;
        }
        self.close_job(period);
        if super::xrun_rule::restarted_at_once(self.previous_job, activation, period) {
            self.late_total += 1;
        }
        if let Some((periods, late_start)) =
            super::xrun_rule::missed_periods(self.previous_job, activation, period)
        {
            self.missed_total += 1;
            let due = self
                .previous_job
                .filter(|_| late_start)
                .map(|(start, _, _)| start + period);
            if late_start {
                self.late_total += 1;
            }
            if self.missed.len() < LATE_KEPT {
                self.missed.push((*activation, periods, due));
            }
        }
        self.job.push(*activation);
        self.job_end = activation.end;
    }

    fn close_job(&mut self, period: u64) {
        let Some(first) = self.job.first() else {
            return;
        };
        let response = self.job_end.saturating_sub(first.start);
        self.previous_job = Some((first.start, response > period, self.job_end));
        if response > period {
            // One deadline, however long the job took (JACK reports an xrun for the first
            // failing cycle only, `JackEngine::ProcessCurrent`), and a second when its waker's
            // cycle ran while it was held back (see docs/trace.md).
            let held = super::xrun_rule::held_through_its_wakers_cycle(&self.job);
            self.late_total += 1 + u64::from(held);
            if self.late.len() < LATE_KEPT {
                self.late_responses.push((first.start, response));
                self.late.push(std::mem::take(&mut self.job));
            }
        }
        self.job.clear();
    }

    /// The usual waker learnt when the kept activations were full.
    pub(crate) fn learnt_waker(&self) -> Option<i32> {
        self.learnt.map(|(_, waker)| waker)
    }

    /// Ends the last job (at the end of the pass); the period the jobs were judged by.
    pub(crate) fn finish_jobs(&mut self) -> Option<u64> {
        let (period, _) = self.learnt?;
        self.close_job(period);
        Some(period)
    }

    /// `(period, jitter)` from the summaries, with the current activation's start (if any)
    /// counted: the usual waker's intervals first, then all.
    pub(crate) fn period(
        &self,
        dominant: Option<i32>,
        current: Option<&Activation>,
    ) -> Option<(u64, u64)> {
        let mut all = self.all_intervals.clone();
        let mut of_waker = dominant
            .and_then(|waker| self.by_waker.get(&waker))
            .map(|(last, intervals)| (*last, intervals.clone()));
        if let Some(current) = current {
            if let Some(last) = self.last_start {
                all.add(current.start.saturating_sub(last));
            }
            if let Some((last, intervals)) = &mut of_waker {
                if Some(current.waker) == dominant {
                    intervals.add(current.start.saturating_sub(*last));
                }
            }
        }
        of_waker
            .and_then(|(_, intervals)| intervals.period())
            .or_else(|| all.period())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_are_monotonic_and_about_3_percent_wide() {
        let mut last = 0;
        for value in (0..1_000_000u64).step_by(7) {
            let bucket = bucket_of(value);
            assert!(bucket >= last);
            last = bucket;
        }
        assert_eq!(bucket_of(10_000_000), bucket_of(10_200_000));
        assert_ne!(bucket_of(10_000_000), bucket_of(10_400_000));
    }

    #[test]
    fn percentile_and_mean_of_a_known_set() {
        let mut histogram = SparseHistogram::default();
        for value in 1..=1000u64 {
            histogram.add(value * 1000);
        }
        assert_eq!(histogram.mean(), 500_500);
        assert_eq!(histogram.max(), 1_000_000);
        let p99 = histogram.percentile(99.0);
        assert!((990_000..=1_000_000).contains(&p99), "{p99}");
    }

    proptest! {
        #[test]
        fn the_histogram_period_matches_the_exact_one(
            period in 1_000_000u64..1_000_000_000,
            jitters in proptest::collection::vec(0u64..1000, 10..300),
        ) {
            let mut starts = Vec::new();
            let mut histogram = SparseHistogram::default();
            for (index, jitter) in jitters.iter().enumerate() {
                let offset = period * 2 / 100 * jitter / 1000;
                starts.push(period * (index as u64 + 1) + offset);
            }
            for pair in starts.windows(2) {
                histogram.add(pair[1] - pair[0]);
            }
            let (exact, _) = detect_period(&starts).unwrap();
            let (streamed, _) = histogram.period().unwrap();
            prop_assert!(streamed.abs_diff(exact) * 100 <= exact, "{streamed} vs {exact}");
        }
    }
}
