//! Run comparison: is run B worse than run A, and where, with how much confidence?
//!
//! cyclictest users compare kernels, BIOS settings and tunings by eyeballing two histograms. This
//! module matches the series of two Run records by (metric, class, CPU), puts their percentiles
//! side by side and gives each difference a bootstrap confidence interval computed from the stored
//! HdrHistograms, so "B is worse at p99.9" is a claim the data supports, not noise.
//!
//! The bootstrap needs no resampling of millions of values: in a resample of `n` values drawn from
//! the empirical distribution `F̂`, the `k`-th smallest is `F̂⁻¹(U₍ₖ₎)`, and the `k`-th order
//! statistic of `n` uniforms is `Beta(k, n − k + 1)`. One Beta draw and one binary search over the
//! cumulative bucket counts therefore give one bootstrap replicate of a percentile, exactly. A and
//! B are resampled independently; the interval of `q_B − q_A` is the percentile interval of the
//! replicate differences.
//!
//! Large latencies come in bursts (one hypervisor stall delays several periods, a busy second has
//! many late wake-ups), so treating them as independent makes tail intervals far too narrow. Where
//! every sample at or above a percentile is among the series' kept peaks (which carry their
//! times), the tail is resampled by whole seconds instead (a block bootstrap): the percentile of a
//! replicate is the k-th largest of the peaks of seconds drawn with replacement. The body of the
//! distribution is resampled as independent samples. Differences between runs that no resampling
//! of one run can see (the hypervisor busier during B, another CPU frequency) stay unseen: compare
//! runs long enough to average them out. A percentile is only judged where each run holds at
//! least [`MIN_TAIL_SAMPLES`] samples beyond it.

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use rand_distr::{Beta, Distribution as _};
use rtlab_core::{LatencyHistogram, Metric, Nanos, RunRecord, Series};
use serde::Serialize;
use std::collections::BTreeMap;

/// Percentiles compared, in order: (key as in the record, quantile).
pub const COMPARED_PERCENTILES: [(&str, f64); 5] = [
    ("50", 0.50),
    ("90", 0.90),
    ("99", 0.99),
    ("99.9", 0.999),
    ("99.99", 0.9999),
];

/// A percentile is judged only when each run has at least this many samples above it: fewer,
/// and the percentile is one of a handful of the largest values, which the bootstrap cannot
/// resample meaningfully.
pub const MIN_TAIL_SAMPLES: f64 = 10.0;

/// Relative change below which a difference, even a certain one, is called "the same" in the
/// plain verdict (the `--fail-if-worse` threshold is the user's own).
pub const NEGLIGIBLE_RELATIVE: f64 = 0.05;

/// How the bootstrap runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompareOptions {
    pub resamples: u32,
    /// Two-sided confidence of every interval.
    pub confidence: f64,
    /// Seed of the resampling; the same inputs and seed give the same intervals.
    pub seed: u64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            resamples: 2_000,
            confidence: 0.95,
            seed: 0x7274_6c61_6221,
        }
    }
}

/// Why a confidence was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfidenceError {
    #[error("'{0}' is not a percentage")]
    NotANumber(String),
    #[error("'{0}': give a confidence from 50 to below 100")]
    OutOfRange(String),
}

/// A confidence as people give it, in percent from 50 to below 100 (`95`); below 50 an
/// interval says less than a coin toss, 100 would need infinitely wide intervals.
pub fn parse_confidence_percent(text: &str) -> Result<f64, ConfidenceError> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| ConfidenceError::NotANumber(text.to_owned()))?;
    if !(50.0..100.0).contains(&value) {
        return Err(ConfidenceError::OutOfRange(text.to_owned()));
    }
    Ok(value)
}

/// Which way a percentile moved, as far as the data can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// B is higher, the interval excludes 0 and the change is not negligible.
    Worse,
    /// B is lower, the interval excludes 0 and the change is not negligible.
    Better,
    /// The interval holds 0, or the change is negligible.
    Same,
    /// Too few samples beyond this percentile in A or B to judge it.
    TooFewSamples,
}

/// One percentile of one matched pair of series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PercentileDifference {
    /// `99.9`, as in the record's `percentiles`.
    pub percentile: String,
    pub a_ns: u64,
    pub b_ns: u64,
    /// `b − a`.
    pub difference_ns: i64,
    /// Bootstrap interval of `b − a`; `None` when the percentile is not judged.
    pub difference_ci_ns: Option<[i64; 2]>,
    /// `b / a − 1`.
    pub relative: f64,
    pub relative_ci: Option<[f64; 2]>,
    pub change: Change,
}

/// One (metric, CPU) series present in both runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeriesComparison {
    pub metric: Metric,
    pub class_a: String,
    pub class_b: String,
    pub cpu: u32,
    pub count_a: u64,
    pub count_b: u64,
    pub missed_a: u64,
    pub missed_b: u64,
    pub max_a_ns: u64,
    pub max_b_ns: u64,
    /// Both runs measured this series with a real-time policy (SCHED_FIFO, SCHED_RR or
    /// SCHED_DEADLINE): what `--fail-if-worse` gates when no classes are named.
    pub realtime: bool,
    pub percentiles: Vec<PercentileDifference>,
}

impl SeriesComparison {
    /// `class/metric@cpu`, or `classA→classB/metric@cpu` when the classes were paired by name.
    pub fn label(&self) -> String {
        if self.class_a == self.class_b {
            format!("{}/{}@{}", self.class_a, self.metric, self.cpu)
        } else {
            format!(
                "{}→{}/{}@{}",
                self.class_a, self.class_b, self.metric, self.cpu
            )
        }
    }

    pub fn percentile(&self, key: &str) -> Option<&PercentileDifference> {
        self.percentiles.iter().find(|item| item.percentile == key)
    }
}

/// Time the explained episodes of a run spent in one cause.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CauseTotal {
    pub kind: String,
    pub name: String,
    pub episodes: u64,
    pub ns: u64,
}

/// What changed in the explained episodes, when both runs were measured with `--explain`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CauseChanges {
    /// Causes of B's episodes that A's episodes never had.
    pub appeared: Vec<CauseTotal>,
    /// Causes of A's episodes that B's never had.
    pub vanished: Vec<CauseTotal>,
}

/// How series were paired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pairing {
    /// Same class, metric and CPU.
    ByClass,
    /// Each run has one class for the metric (e.g. an imported cyclictest run against an rtlab
    /// class); paired by metric and CPU.
    OnlyClass,
}

/// The whole comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub confidence: f64,
    pub resamples: u32,
    pub series: Vec<SeriesComparison>,
    pub pairing: BTreeMap<String, Pairing>,
    /// Series of A with no partner in B, and of B with none in A (labels).
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
    /// `None` unless both runs have explained episodes.
    pub causes: Option<CauseChanges>,
    /// What else the machine did during each run; `None` unless both records say. In
    /// `compare --json` after the fields above, with its note in words (rtlab-render's
    /// `compare::ComparisonJson`).
    #[serde(skip)]
    pub conditions: Option<ConditionsChange>,
    /// The plain answer; in words by rtlab-render's `compare::verdict`, last in `--json`.
    #[serde(skip)]
    pub verdict: Verdict,
}

/// The one-line answer of a comparison, before it is put in words (rtlab-render's
/// `compare::verdict`).
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// One answer for every wake-up and hand-off series.
    All(Answer),
    /// Real-time series and SCHED_OTHER series side by side: an answer for each.
    Split { realtime: Answer, other: Answer },
}

/// The answer for a group of wake-up and hand-off series.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// B is worse: `at` is the largest judged worsening (by the interval's lower end); worse at
    /// `worse` of `judged` percentiles (those with enough samples), better at `better`.
    Worse {
        at: SeriesDifference,
        worse: usize,
        better: usize,
        judged: usize,
    },
    /// B is better at `at` (the largest judged improvement), and worse nowhere.
    Better { at: SeriesDifference },
    /// No percentile has enough samples beyond it.
    TooShort,
    /// Every judged percentile is within [`NEGLIGIBLE_RELATIVE`] or its interval holds 0.
    NoDifference,
}

/// One percentile's difference, and the label of its series.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesDifference {
    pub series: String,
    pub difference: PercentileDifference,
}

/// The machine's other work and the hypervisor's steal during A and B.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConditionsChange {
    /// Share of the CPU time rtlab left free that other programs used, 0..=1.
    pub other_work_a: f64,
    pub other_work_b: f64,
    /// Share of the machine's CPU time the hypervisor took, 0..=1.
    pub steal_a: f64,
    pub steal_b: f64,
    /// False when the runs differ by more than [`OTHER_WORK_TOLERANCE`] in other work or by more
    /// than [`STEAL_TOLERANCE`] in steal: a difference between them may come from that.
    pub comparable: bool,
    /// The runs differ by more than [`OTHER_WORK_TOLERANCE`] in other work.
    #[serde(skip)]
    pub other_work_differs: bool,
    /// The runs differ by more than [`STEAL_TOLERANCE`] in steal.
    #[serde(skip)]
    pub steal_differs: bool,
}

/// Other work (share of the CPU time rtlab left free) two runs may differ by and still be called
/// comparable.
pub const OTHER_WORK_TOLERANCE: f64 = 0.10;
/// Steal (share of the machine) two runs may differ by and still be called comparable.
pub const STEAL_TOLERANCE: f64 = 0.01;

fn conditions_change(a: &RunRecord, b: &RunRecord) -> Option<ConditionsChange> {
    let (a, b) = (a.conditions.as_ref()?, b.conditions.as_ref()?);
    let (other_work_a, other_work_b) = (a.other_work_fraction(), b.other_work_fraction());
    let (steal_a, steal_b) = (a.steal_fraction(), b.steal_fraction());
    let other_work_differs = (other_work_b - other_work_a).abs() > OTHER_WORK_TOLERANCE;
    let steal_differs = (steal_b - steal_a).abs() > STEAL_TOLERANCE;
    Some(ConditionsChange {
        other_work_a,
        other_work_b,
        steal_a,
        steal_b,
        comparable: !other_work_differs && !steal_differs,
        other_work_differs,
        steal_differs,
    })
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CompareError {
    #[error("the runs have no series in common (A: {a}; B: {b})")]
    NothingInCommon { a: String, b: String },
    #[error("series {label}: {message}")]
    Histogram { label: String, message: String },
    #[error("'{0}' is not a threshold (expected PCTL:LIMIT, e.g. p99.9:10% or p99:20us)")]
    BadThreshold(String),
    #[error("'{0}' is not a compared percentile (one of p50, p90, p99, p99.9, p99.99)")]
    UnknownPercentile(String),
}

/// How much worse is too much: relative (`10%`) or absolute (`20us`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    Relative(f64),
    Absolute(Nanos),
}

/// `--fail-if-worse PCTL:LIMIT`.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    /// Record key (`99.9`).
    pub percentile: String,
    pub limit: Limit,
}

impl std::fmt::Display for Threshold {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.limit {
            Limit::Relative(fraction) => {
                write!(formatter, "p{}:{}%", self.percentile, fraction * 100.0)
            }
            Limit::Absolute(nanos) => write!(formatter, "p{}:{nanos}", self.percentile),
        }
    }
}

/// Parses `p99.9:10%`, `99:20us`, `p50:1ms`.
pub fn parse_threshold(text: &str) -> Result<Threshold, CompareError> {
    let fail = || CompareError::BadThreshold(text.to_owned());
    let (percentile, limit) = text.trim().split_once(':').ok_or_else(fail)?;
    let percentile = percentile.trim();
    let key = percentile.strip_prefix('p').unwrap_or(percentile);
    if !COMPARED_PERCENTILES.iter().any(|(known, _)| *known == key) {
        return Err(CompareError::UnknownPercentile(percentile.to_owned()));
    }
    let limit = limit.trim();
    let limit = if let Some(percent) = limit.strip_suffix('%') {
        let value: f64 = percent.trim().parse().map_err(|_| fail())?;
        if !(value.is_finite() && value >= 0.0) {
            return Err(fail());
        }
        Limit::Relative(value / 100.0)
    } else {
        Limit::Absolute(rtlab_core::parse_duration(limit).map_err(|_| fail())?)
    };
    Ok(Threshold {
        percentile: key.to_owned(),
        limit,
    })
}

/// One series found worse than a threshold allows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Breach {
    pub series: String,
    pub percentile: String,
    pub difference_ns: i64,
    pub difference_ci_ns: [i64; 2],
    pub relative_ci: [f64; 2],
}

/// Which series `--fail-if-worse` judges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum GateScope {
    /// Series both runs measured with a real-time policy; every series when there are none.
    ///
    /// The default, because a SCHED_OTHER thread's tail is what the fair scheduler leaves it:
    /// it moves with whatever else runs (on this project's VM the `normal` class's p99 moved
    /// between ~100 µs and ~700 µs from one idle run to the next), so gating it fails builds on
    /// noise. Name the class to gate it anyway.
    #[default]
    RealTime,
    /// Every wake-up and hand-off series.
    All,
    /// Series of these classes (in A or B).
    Classes(Vec<String>),
}

impl GateScope {
    /// From `--gate-classes`: nothing → [`GateScope::RealTime`], `all` → [`GateScope::All`].
    pub fn from_classes(classes: &[String]) -> GateScope {
        match classes {
            [] => GateScope::RealTime,
            [only] if only == "all" => GateScope::All,
            _ => GateScope::Classes(classes.to_vec()),
        }
    }

    /// Whether `series` is gated; `any_realtime`: the comparison has a real-time series.
    fn includes(&self, series: &SeriesComparison, any_realtime: bool) -> bool {
        match self {
            GateScope::RealTime if any_realtime => series.realtime,
            GateScope::RealTime | GateScope::All => true,
            GateScope::Classes(classes) => {
                classes.contains(&series.class_a) || classes.contains(&series.class_b)
            }
        }
    }

    fn describe(&self, any_realtime: bool) -> String {
        match self {
            GateScope::RealTime if any_realtime => {
                "real-time series (SCHED_FIFO, SCHED_RR, SCHED_DEADLINE)".to_owned()
            }
            GateScope::RealTime | GateScope::All => "every series".to_owned(),
            GateScope::Classes(classes) => format!("classes {}", classes.join(", ")),
        }
    }
}

/// What `--fail-if-worse` found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Gate {
    pub threshold: String,
    /// Which series were gated, in words.
    pub scope: String,
    /// Series whose difference exceeds the threshold even at the interval's lower end.
    pub breaches: Vec<Breach>,
    /// Series where the percentile could be judged at all.
    pub judged: usize,
    /// Wake-up and hand-off series left out of the gate by its scope (labels).
    pub not_gated: Vec<String>,
}

impl Comparison {
    /// Applies a threshold to the judged wake-up and hand-off series in `scope` (intervals are
    /// compared but not gated: a shorter interval is no better than a longer one).
    pub fn gate(&self, threshold: &Threshold, scope: &GateScope) -> Gate {
        let gated_series: Vec<&SeriesComparison> = self
            .series
            .iter()
            .filter(|series| series.metric != Metric::Interval)
            .collect();
        let any_realtime = gated_series.iter().any(|series| series.realtime);
        let scope_text = scope.describe(any_realtime);
        let mut breaches = Vec::new();
        let mut judged = 0;
        let mut not_gated = Vec::new();
        for series in gated_series {
            if !scope.includes(series, any_realtime) {
                not_gated.push(series.label());
                continue;
            }
            let Some(item) = series.percentile(&threshold.percentile) else {
                continue;
            };
            let (Some(difference_ci), Some(relative_ci)) =
                (item.difference_ci_ns, item.relative_ci)
            else {
                continue;
            };
            judged += 1;
            let beyond = match threshold.limit {
                Limit::Relative(fraction) => relative_ci[0] > fraction,
                Limit::Absolute(nanos) => difference_ci[0] > nanos.0 as i64,
            };
            if beyond {
                breaches.push(Breach {
                    series: series.label(),
                    percentile: item.percentile.clone(),
                    difference_ns: item.difference_ns,
                    difference_ci_ns: difference_ci,
                    relative_ci,
                });
            }
        }
        Gate {
            threshold: threshold.to_string(),
            scope: scope_text,
            breaches,
            judged,
            not_gated,
        }
    }
}

/// A histogram as cumulative counts, for exact order statistics.
struct Cumulative {
    /// (highest value of the bucket, samples up to and including it).
    steps: Vec<(u64, u64)>,
    total: u64,
    max: u64,
}

impl Cumulative {
    fn new(histogram: &LatencyHistogram) -> Cumulative {
        let mut running = 0;
        let steps = histogram
            .buckets()
            .into_iter()
            .map(|(value, count)| {
                running += count;
                (value, running)
            })
            .collect();
        Cumulative {
            steps,
            total: running,
            max: histogram.max(),
        }
    }

    /// The `rank`-th smallest sample (1-based), to histogram precision.
    fn at_rank(&self, rank: u64) -> u64 {
        let index = self
            .steps
            .partition_point(|&(_, cumulative)| cumulative < rank);
        self.steps
            .get(index)
            .map_or(self.max, |&(value, _)| value.min(self.max))
    }

    fn rank_of(&self, quantile: f64) -> u64 {
        ((quantile * self.total as f64).ceil() as u64).clamp(1, self.total.max(1))
    }

    fn quantile(&self, quantile: f64) -> u64 {
        self.at_rank(self.rank_of(quantile))
    }

    /// One bootstrap replicate of the quantile: the k-th smallest of a resample of n.
    fn replicate(&self, beta: &Beta<f64>, rng: &mut StdRng) -> u64 {
        let uniform: f64 = beta.sample(rng);
        let rank = ((uniform * self.total as f64).ceil() as u64).clamp(1, self.total);
        self.at_rank(rank)
    }
}

/// Fewest seconds of measurement for which the tail is resampled by seconds rather than by
/// samples.
pub const MIN_BLOCKS: usize = 5;

/// How one side's percentile is resampled.
enum Sampler {
    /// Samples taken as independent: one Beta order statistic per replicate.
    Independent(Beta<f64>),
    /// The tail resampled by whole seconds of measurement (a block bootstrap), because large
    /// latencies come in bursts: every sample above the percentile is among the series' kept
    /// peaks, so each second's share of the tail is known.
    Seconds {
        /// Tail samples of each second, by second.
        by_second: Vec<Vec<u64>>,
        /// Samples at or above the percentile in a replicate: the percentile is the
        /// `from_top`-th largest.
        from_top: usize,
        /// The smallest kept peak: a replicate with fewer tail samples than `from_top` has its
        /// percentile at or below it.
        floor: u64,
    },
}

impl Sampler {
    fn new(
        series: &Series,
        histogram: &LatencyHistogram,
        cumulative: &Cumulative,
        quantile: f64,
    ) -> Sampler {
        let rank = cumulative.rank_of(quantile);
        let independent = || {
            Sampler::Independent(
                Beta::new(rank as f64, cumulative.total as f64 - rank as f64 + 1.0)
                    .expect("positive Beta parameters"),
            )
        };
        let seconds = series.max_per_second.len();
        let from_top = (cumulative.total - rank + 1) as usize;
        let value = cumulative.at_rank(rank);
        // The peaks hold every sample at or above the percentile only when more of them were
        // kept than the histogram has there.
        let at_or_above =
            histogram.count() - histogram.inner().count_between(0, value.saturating_sub(1));
        // The peaks, with the skipped periods put back as the histogram has them (see
        // `crate::forecast::add_missed_periods`), at the time of the peak that skipped them.
        let mut tail_samples: Vec<(u64, u64)> = Vec::with_capacity(series.peaks.len());
        let mut restored = 0;
        for peak in &series.peaks {
            tail_samples.push((peak.at_ns, peak.value_ns));
            if series.metric != Metric::Wakeup || series.period_ns == 0 {
                continue;
            }
            let mut latency = peak.value_ns;
            while latency >= series.period_ns && restored < series.missed {
                latency -= series.period_ns;
                tail_samples.push((peak.at_ns, latency));
                restored += 1;
            }
        }
        let floor = series
            .peaks
            .iter()
            .map(|peak| peak.value_ns)
            .min()
            .unwrap_or(0);
        let kept_at_or_above = tail_samples
            .iter()
            .filter(|(_, value)| *value >= floor)
            .count() as u64;
        if seconds < MIN_BLOCKS
            || series.peaks.is_empty()
            || kept_at_or_above <= at_or_above
            || value < floor
        {
            return independent();
        }
        let mut by_second = vec![Vec::new(); seconds];
        for (at_ns, value_ns) in tail_samples
            .into_iter()
            .filter(|(_, value)| *value >= floor)
        {
            let second = ((at_ns / 1_000_000_000) as usize).min(seconds - 1);
            by_second[second].push(value_ns);
        }
        // The k-th largest of a union is among each part's k largest: keep only those.
        for values in &mut by_second {
            values.sort_unstable_by(|left, right| right.cmp(left));
            values.truncate(from_top);
        }
        Sampler::Seconds {
            by_second,
            from_top,
            floor,
        }
    }

    fn replicate(&self, cumulative: &Cumulative, rng: &mut StdRng) -> u64 {
        match self {
            Sampler::Independent(beta) => cumulative.replicate(beta, rng),
            Sampler::Seconds {
                by_second,
                from_top,
                floor,
            } => {
                let mut tail: Vec<u64> = Vec::new();
                for _ in 0..by_second.len() {
                    let second = rng.gen_range(0..by_second.len());
                    tail.extend_from_slice(&by_second[second]);
                }
                if tail.len() < *from_top {
                    return *floor;
                }
                let index = tail.len() - from_top;
                *tail.select_nth_unstable(index).1
            }
        }
    }
}

/// A series' histogram with the periods it skipped put back (wake-ups only), as a forecast
/// counts them (see [`crate::forecast::add_missed_periods`]).
fn histogram_of(series: &Series) -> Result<LatencyHistogram, CompareError> {
    let mut histogram = series
        .histogram()
        .map_err(|error| CompareError::Histogram {
            label: series.label(),
            message: error.to_string(),
        })?;
    if series.metric == Metric::Wakeup {
        crate::forecast::add_missed_periods(series, &mut histogram);
    }
    Ok(histogram)
}

/// Sorted percentile interval of `values` at `confidence` (two-sided).
fn interval<T: Copy + PartialOrd>(values: &mut [T], confidence: f64) -> [T; 2] {
    values.sort_by(|left, right| left.partial_cmp(right).expect("no NaN"));
    let alpha = (1.0 - confidence) / 2.0;
    let last = values.len() - 1;
    let low = ((alpha * last as f64).floor() as usize).min(last);
    let high = (((1.0 - alpha) * last as f64).ceil() as usize).min(last);
    [values[low], values[high]]
}

fn compare_pair(
    a: &Series,
    b: &Series,
    options: &CompareOptions,
    rng: &mut StdRng,
) -> Result<SeriesComparison, CompareError> {
    let (histogram_a, histogram_b) = (histogram_of(a)?, histogram_of(b)?);
    let (cumulative_a, cumulative_b) =
        (Cumulative::new(&histogram_a), Cumulative::new(&histogram_b));
    let mut percentiles = Vec::new();
    for (key, quantile) in COMPARED_PERCENTILES {
        if cumulative_a.total == 0 || cumulative_b.total == 0 {
            break;
        }
        let (a_ns, b_ns) = (
            cumulative_a.quantile(quantile),
            cumulative_b.quantile(quantile),
        );
        let difference_ns = b_ns as i64 - a_ns as i64;
        let relative = relative_change(a_ns, b_ns);
        let beyond = |total: u64| total as f64 * (1.0 - quantile);
        let judged = beyond(cumulative_a.total) >= MIN_TAIL_SAMPLES
            && beyond(cumulative_b.total) >= MIN_TAIL_SAMPLES
            && options.resamples > 0;
        let (difference_ci_ns, relative_ci, change) = if judged {
            let sampler_a = Sampler::new(a, &histogram_a, &cumulative_a, quantile);
            let sampler_b = Sampler::new(b, &histogram_b, &cumulative_b, quantile);
            let mut differences = Vec::with_capacity(options.resamples as usize);
            let mut ratios = Vec::with_capacity(options.resamples as usize);
            for _ in 0..options.resamples {
                let replicate_a = sampler_a.replicate(&cumulative_a, rng);
                let replicate_b = sampler_b.replicate(&cumulative_b, rng);
                differences.push(replicate_b as i64 - replicate_a as i64);
                ratios.push(relative_change(replicate_a, replicate_b));
            }
            let difference_ci = interval(&mut differences, options.confidence);
            let relative_ci = interval(&mut ratios, options.confidence);
            let change = if difference_ci[0] > 0 && relative_ci[0] > NEGLIGIBLE_RELATIVE {
                Change::Worse
            } else if difference_ci[1] < 0 && relative_ci[1] < -NEGLIGIBLE_RELATIVE {
                Change::Better
            } else {
                Change::Same
            };
            (Some(difference_ci), Some(relative_ci), change)
        } else {
            (None, None, Change::TooFewSamples)
        };
        percentiles.push(PercentileDifference {
            percentile: key.to_owned(),
            a_ns,
            b_ns,
            difference_ns,
            difference_ci_ns,
            relative,
            relative_ci,
            change,
        });
    }
    Ok(SeriesComparison {
        metric: a.metric,
        class_a: a.class.clone(),
        class_b: b.class.clone(),
        cpu: a.cpu,
        count_a: a.count,
        count_b: b.count,
        missed_a: a.missed,
        missed_b: b.missed,
        max_a_ns: a.max_ns,
        max_b_ns: b.max_ns,
        realtime: is_realtime_policy(&a.policy) && is_realtime_policy(&b.policy),
        percentiles,
    })
}

/// SCHED_FIFO, SCHED_RR and SCHED_DEADLINE (as the record spells them, with or without the
/// `SCHED_` prefix, any case).
pub fn is_realtime_policy(policy: &str) -> bool {
    let upper = policy.trim().to_ascii_uppercase();
    let name = upper.strip_prefix("SCHED_").unwrap_or(&upper);
    matches!(name, "FIFO" | "RR" | "DEADLINE")
}

/// `b / a − 1`, with a zero `a` read as 1 ns (latencies of 0 are on time, not infinitely good).
fn relative_change(a: u64, b: u64) -> f64 {
    b as f64 / a.max(1) as f64 - 1.0
}

fn classes_of(record: &RunRecord, metric: Metric) -> Vec<&str> {
    let mut classes: Vec<&str> = record
        .series
        .iter()
        .filter(|series| series.metric == metric)
        .map(|series| series.class.as_str())
        .collect();
    classes.sort_unstable();
    classes.dedup();
    classes
}

fn cause_totals(record: &RunRecord) -> BTreeMap<(String, String), CauseTotal> {
    let mut totals: BTreeMap<(String, String), CauseTotal> = BTreeMap::new();
    for episode in &record.episodes {
        for cause in &episode.causes {
            let kind = cause.kind.as_str().to_owned();
            let entry = totals
                .entry((kind.clone(), cause.name.clone()))
                .or_insert_with(|| CauseTotal {
                    kind,
                    name: cause.name.clone(),
                    episodes: 0,
                    ns: 0,
                });
            entry.episodes += 1;
            entry.ns += cause.ns;
        }
    }
    totals
}

fn cause_changes(a: &RunRecord, b: &RunRecord) -> Option<CauseChanges> {
    if a.episodes.is_empty() || b.episodes.is_empty() {
        return None;
    }
    let (totals_a, totals_b) = (cause_totals(a), cause_totals(b));
    let only = |from: &BTreeMap<(String, String), CauseTotal>,
                other: &BTreeMap<(String, String), CauseTotal>| {
        let mut causes: Vec<CauseTotal> = from
            .iter()
            .filter(|(key, _)| !other.contains_key(*key))
            .map(|(_, total)| total.clone())
            .collect();
        causes.sort_by(|left, right| right.ns.cmp(&left.ns).then(left.name.cmp(&right.name)));
        causes
    };
    Some(CauseChanges {
        appeared: only(&totals_b, &totals_a),
        vanished: only(&totals_a, &totals_b),
    })
}

/// Compares run B against run A.
pub fn compare(
    a: &RunRecord,
    b: &RunRecord,
    options: &CompareOptions,
) -> Result<Comparison, CompareError> {
    let mut rng = StdRng::seed_from_u64(options.seed);
    let mut series = Vec::new();
    let mut pairing = BTreeMap::new();
    let mut used_b = vec![false; b.series.len()];
    let mut only_in_a = Vec::new();
    for metric in [Metric::Wakeup, Metric::Handoff, Metric::Interval] {
        let (classes_a, classes_b) = (classes_of(a, metric), classes_of(b, metric));
        let share_a_class = classes_a.iter().any(|class| classes_b.contains(class));
        let single_classes = classes_a.len() == 1 && classes_b.len() == 1;
        let rule = if !share_a_class && single_classes {
            Pairing::OnlyClass
        } else {
            Pairing::ByClass
        };
        for series_a in a.series.iter().filter(|series| series.metric == metric) {
            let partner = b.series.iter().enumerate().position(|(index, series_b)| {
                !used_b[index]
                    && series_b.metric == metric
                    && series_b.cpu == series_a.cpu
                    && (rule == Pairing::OnlyClass || series_b.class == series_a.class)
            });
            match partner {
                Some(index) => {
                    used_b[index] = true;
                    let compared = compare_pair(series_a, &b.series[index], options, &mut rng)?;
                    pairing.insert(compared.label(), rule);
                    series.push(compared);
                }
                None => only_in_a.push(series_a.label()),
            }
        }
    }
    let only_in_b: Vec<String> = b
        .series
        .iter()
        .zip(&used_b)
        .filter(|(_, used)| !**used)
        .map(|(series, _)| series.label())
        .collect();
    if series.is_empty() {
        let labels = |record: &RunRecord| {
            let labels: Vec<String> = record.series.iter().map(Series::label).collect();
            if labels.is_empty() {
                "no series".to_owned()
            } else {
                labels.join(", ")
            }
        };
        return Err(CompareError::NothingInCommon {
            a: labels(a),
            b: labels(b),
        });
    }
    let verdict = plain_verdict(&series);
    Ok(Comparison {
        confidence: options.confidence,
        resamples: options.resamples,
        series,
        pairing,
        only_in_a,
        only_in_b,
        causes: cause_changes(a, b),
        conditions: conditions_change(a, b),
        verdict,
    })
}

/// The one-line answer: where B is worse (the largest judged worsening of a wake-up or hand-off
/// percentile), else where it is better, else that the runs can't be told apart.
///
/// With real-time and SCHED_OTHER series side by side, each group gets its own answer, the
/// real-time one first: a SCHED_OTHER tail moves with whatever else runs, and its swings would
/// otherwise hide what happened to the threads that have deadlines.
fn plain_verdict(series: &[SeriesComparison]) -> Verdict {
    let compared = || {
        series
            .iter()
            .filter(|series| series.metric != Metric::Interval)
    };
    let realtime = compared().filter(|series| series.realtime).count();
    if realtime == 0 || realtime == compared().count() {
        return Verdict::All(answer_of(series, |_| true));
    }
    Verdict::Split {
        realtime: answer_of(series, |series| series.realtime),
        other: answer_of(series, |series| !series.realtime),
    }
}

/// The plain answer over the wake-up and hand-off series `include` accepts.
fn answer_of(series: &[SeriesComparison], include: impl Fn(&SeriesComparison) -> bool) -> Answer {
    let judged = || {
        series
            .iter()
            .filter(|series| series.metric != Metric::Interval && include(series))
            .flat_map(|series| series.percentiles.iter().map(move |item| (series, item)))
    };
    let by_relative_low = |change: Change| {
        judged()
            .filter(move |(_, item)| item.change == change)
            .max_by(|(_, left), (_, right)| {
                let key = |item: &PercentileDifference| {
                    let [low, high] = item.relative_ci.unwrap_or([0.0, 0.0]);
                    if change == Change::Worse {
                        low
                    } else {
                        -high
                    }
                };
                key(left).total_cmp(&key(right))
            })
            .map(|(series, item)| SeriesDifference {
                series: series.label(),
                difference: item.clone(),
            })
    };
    let count = |change: Change| judged().filter(|(_, item)| item.change == change).count();
    if let Some(at) = by_relative_low(Change::Worse) {
        return Answer::Worse {
            at,
            worse: count(Change::Worse),
            better: count(Change::Better),
            judged: judged()
                .filter(|(_, item)| item.change != Change::TooFewSamples)
                .count(),
        };
    }
    if let Some(at) = by_relative_low(Change::Better) {
        return Answer::Better { at };
    }
    if count(Change::Same) == 0 {
        return Answer::TooShort;
    }
    Answer::NoDifference
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confidence_is_a_percentage_from_50_to_below_100() {
        assert_eq!(parse_confidence_percent(" 95 "), Ok(95.0));
        assert_eq!(parse_confidence_percent("50"), Ok(50.0));
        for refused in ["100", "49.9", "NaN"] {
            assert_eq!(
                parse_confidence_percent(refused),
                Err(ConfidenceError::OutOfRange(refused.to_owned()))
            );
        }
        assert_eq!(
            parse_confidence_percent("high"),
            Err(ConfidenceError::NotANumber("high".to_owned()))
        );
    }

    fn series(class: &str, cpu: u32, values: impl IntoIterator<Item = u64>) -> Series {
        let mut histogram = LatencyHistogram::new();
        for value in values {
            histogram.record(value);
        }
        RunRecord::series_from_histogram(
            Metric::Wakeup,
            class,
            cpu,
            "SCHED_FIFO",
            90,
            1_000_000,
            &histogram,
            0,
            0,
            Vec::new(),
            Vec::new(),
        )
        .unwrap()
    }

    fn lognormal(seed: u64, n: usize, median_ns: f64, sigma: f64) -> Vec<u64> {
        let mut rng = StdRng::seed_from_u64(seed);
        let normal = rand_distr::Normal::new(0.0, sigma).unwrap();
        (0..n)
            .map(|_| (median_ns * normal.sample(&mut rng).exp()) as u64)
            .collect()
    }

    fn record(series: Vec<Series>) -> RunRecord {
        RunRecord::new("run", "2026-01-01T00:00:00Z", 1, series)
    }

    #[test]
    fn same_distribution_is_not_called_worse() {
        let a = record(vec![series(
            "rt-high",
            0,
            lognormal(1, 50_000, 20_000.0, 0.4),
        )]);
        let b = record(vec![series(
            "rt-high",
            0,
            lognormal(2, 50_000, 20_000.0, 0.4),
        )]);
        let comparison = compare(&a, &b, &CompareOptions::default()).unwrap();
        for item in &comparison.series[0].percentiles {
            assert_ne!(item.change, Change::Worse, "{item:?}");
            assert_ne!(item.change, Change::Better, "{item:?}");
        }
        assert_eq!(comparison.verdict, Verdict::All(Answer::NoDifference));
        let gate = comparison.gate(&parse_threshold("p99:10%").unwrap(), &GateScope::default());
        assert!(gate.breaches.is_empty());
        assert_eq!(gate.judged, 1);
    }

    #[test]
    fn a_shifted_tail_is_worse_with_an_interval_around_the_shift() {
        let a = record(vec![series(
            "rt-high",
            0,
            lognormal(1, 50_000, 20_000.0, 0.4),
        )]);
        let b = record(vec![series(
            "rt-high",
            0,
            lognormal(2, 50_000, 20_000.0, 0.4)
                .into_iter()
                .map(|value| value * 3 / 2),
        )]);
        let comparison = compare(&a, &b, &CompareOptions::default()).unwrap();
        let p99 = comparison.series[0].percentile("99").unwrap();
        assert_eq!(p99.change, Change::Worse);
        let [low, high] = p99.relative_ci.unwrap();
        assert!(
            low < 0.5 && 0.5 < high,
            "interval {low}..{high} misses the true +50 %"
        );
        assert!(
            matches!(&comparison.verdict, Verdict::All(Answer::Worse { .. })),
            "{:?}",
            comparison.verdict
        );
        let gate = comparison.gate(&parse_threshold("p99:20%").unwrap(), &GateScope::default());
        assert_eq!(gate.breaches.len(), 1);
        assert!(comparison
            .gate(&parse_threshold("p99:80%").unwrap(), &GateScope::default())
            .breaches
            .is_empty());
        assert_eq!(
            comparison
                .gate(&parse_threshold("p99:5us").unwrap(), &GateScope::default())
                .breaches
                .len(),
            1
        );
        // Reversed, B is better and no gate trips.
        let reversed = compare(&b, &a, &CompareOptions::default()).unwrap();
        assert!(
            matches!(&reversed.verdict, Verdict::All(Answer::Better { .. })),
            "{:?}",
            reversed.verdict
        );
        assert!(reversed
            .gate(&parse_threshold("p99:0%").unwrap(), &GateScope::default())
            .breaches
            .is_empty());
    }

    #[test]
    fn interval_coverage_of_the_bootstrap_is_near_nominal() {
        // Independent samples from one distribution: the 95 % interval of the p90 difference
        // holds 0 in most repetitions (a wrong bootstrap, e.g. one that resamples only one side,
        // covers far less often).
        let mut rng = StdRng::seed_from_u64(7);
        let mut covered = 0;
        let repetitions = 60;
        for _ in 0..repetitions {
            let a = record(vec![series(
                "x",
                0,
                lognormal(rng.gen(), 4_000, 20_000.0, 0.5),
            )]);
            let b = record(vec![series(
                "x",
                0,
                lognormal(rng.gen(), 4_000, 20_000.0, 0.5),
            )]);
            let options = CompareOptions {
                resamples: 400,
                seed: rng.gen(),
                ..CompareOptions::default()
            };
            let comparison = compare(&a, &b, &options).unwrap();
            let [low, high] = comparison.series[0]
                .percentile("90")
                .unwrap()
                .difference_ci_ns
                .unwrap();
            if low <= 0 && 0 <= high {
                covered += 1;
            }
        }
        assert!(covered >= 52, "covered {covered} of {repetitions}");
    }

    #[test]
    fn far_percentiles_of_short_runs_are_not_judged() {
        let a = record(vec![series(
            "rt-high",
            0,
            lognormal(1, 2_000, 20_000.0, 0.4),
        )]);
        let b = record(vec![series(
            "rt-high",
            0,
            lognormal(2, 2_000, 80_000.0, 0.4),
        )]);
        let comparison = compare(&a, &b, &CompareOptions::default()).unwrap();
        let p999 = comparison.series[0].percentile("99.9").unwrap();
        assert_eq!(p999.change, Change::TooFewSamples);
        assert_eq!(p999.difference_ci_ns, None);
        assert_eq!(
            comparison.series[0].percentile("99").unwrap().change,
            Change::Worse
        );
        assert_eq!(
            comparison
                .gate(&parse_threshold("p99.9:1%").unwrap(), &GateScope::default())
                .judged,
            0
        );
    }

    #[test]
    fn series_pair_by_class_and_cpu_or_by_cpu_when_each_run_has_one_class() {
        let a = record(vec![
            series("rt-high", 0, [10_000, 20_000]),
            series("rt-high", 1, [10_000]),
            series("normal", 0, [10_000]),
        ]);
        let b = record(vec![
            series("rt-high", 0, [10_000]),
            series("rt-mid", 0, [10_000]),
        ]);
        let comparison = compare(&a, &b, &CompareOptions::default()).unwrap();
        assert_eq!(comparison.series.len(), 1);
        assert_eq!(comparison.series[0].label(), "rt-high/wakeup@0");
        assert_eq!(
            comparison.only_in_a,
            ["rt-high/wakeup@1", "normal/wakeup@0"]
        );
        assert_eq!(comparison.only_in_b, ["rt-mid/wakeup@0"]);

        let imported = record(vec![
            series("cyclictest", 0, [10_000]),
            series("cyclictest", 1, [1]),
        ]);
        let measured = record(vec![
            series("rt-high", 0, [10_000]),
            series("rt-high", 1, [1]),
        ]);
        let comparison = compare(&imported, &measured, &CompareOptions::default()).unwrap();
        assert_eq!(comparison.series.len(), 2);
        assert_eq!(comparison.series[0].label(), "cyclictest→rt-high/wakeup@0");
        assert_eq!(
            comparison.pairing["cyclictest→rt-high/wakeup@0"],
            Pairing::OnlyClass
        );

        let other = record(vec![series("normal", 5, [1])]);
        assert!(matches!(
            compare(&a, &other, &CompareOptions::default()),
            Err(CompareError::NothingInCommon { .. })
        ));
    }

    #[test]
    fn the_same_inputs_and_seed_give_the_same_intervals() {
        let a = record(vec![series("x", 0, lognormal(1, 10_000, 20_000.0, 0.4))]);
        let b = record(vec![series("x", 0, lognormal(2, 10_000, 22_000.0, 0.4))]);
        let options = CompareOptions::default();
        assert_eq!(compare(&a, &b, &options), compare(&a, &b, &options));
    }

    #[test]
    fn order_statistics_match_the_histogram_percentiles() {
        let values = lognormal(3, 10_000, 20_000.0, 0.6);
        let mut histogram = LatencyHistogram::new();
        for value in &values {
            histogram.record(*value);
        }
        let cumulative = Cumulative::new(&histogram);
        for (_, quantile) in COMPARED_PERCENTILES {
            assert_eq!(
                cumulative.quantile(quantile),
                histogram.value_at_quantile(quantile),
                "q {quantile}"
            );
        }
    }

    #[test]
    fn thresholds_parse_relative_and_absolute_limits() {
        assert_eq!(
            parse_threshold("p99.9:10%").unwrap(),
            Threshold {
                percentile: "99.9".to_owned(),
                limit: Limit::Relative(0.10)
            }
        );
        assert_eq!(
            parse_threshold("99:20us").unwrap().limit,
            Limit::Absolute(Nanos(20_000))
        );
        assert_eq!(
            parse_threshold("p99.9:10%").unwrap().to_string(),
            "p99.9:10%"
        );
        for bad in ["p99.9", "p99.9:", "p99.9:x%", "p99.9:-1%", ":10%"] {
            assert!(parse_threshold(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_threshold("p42:10%"),
            Err(CompareError::UnknownPercentile("p42".to_owned()))
        );
    }

    #[test]
    fn causes_that_appeared_and_vanished_are_listed() {
        use rtlab_core::{Cause, CauseKind, Episode};
        let episode = |name: &str, kind: CauseKind| Episode {
            series: "rt-high/wakeup@0".to_owned(),
            cpu: 0,
            at_ns: 0,
            latency_ns: 100_000,
            causes: vec![Cause {
                kind,
                name: name.to_owned(),
                pid: None,
                ns: 90_000,
                detail: None,
            }],
            steal_ns: None,
            stack: None,
            timeline: Vec::new(),
        };
        let mut a = record(vec![series("rt-high", 0, [1])]);
        let mut b = a.clone();
        assert_eq!(
            compare(&a, &b, &CompareOptions::default()).unwrap().causes,
            None
        );
        a.episodes = vec![
            episode("eth0", CauseKind::Irq),
            episode("RCU", CauseKind::Softirq),
        ];
        b.episodes = vec![
            episode("RCU", CauseKind::Softirq),
            episode("cc1", CauseKind::Task),
        ];
        let causes = compare(&a, &b, &CompareOptions::default())
            .unwrap()
            .causes
            .unwrap();
        assert_eq!(causes.appeared.len(), 1);
        assert_eq!(causes.appeared[0].name, "cc1");
        assert_eq!(causes.vanished.len(), 1);
        assert_eq!(causes.vanished[0].name, "eth0");
    }

    /// A run of `seconds` at 1 kHz: lognormal around 20 µs, plus bursts of 60 samples of ~2 ms
    /// in the given seconds; every sample above 30 µs kept as a peak with its time.
    fn bursty(seed: u64, seconds: u64, bursts: &[u64]) -> Series {
        let mut values: Vec<(u64, u64)> =
            lognormal(seed, (seconds * 1_000) as usize, 20_000.0, 0.3)
                .into_iter()
                .enumerate()
                .map(|(index, value)| (index as u64 * 1_000_000, value))
                .collect();
        for (burst, second) in bursts.iter().enumerate() {
            for index in 0..60u64 {
                let at = second * 1_000_000_000 + index * 1_000_000;
                values[(at / 1_000_000) as usize] =
                    (at, 2_000_000 + burst as u64 * 1_000 + index * 100);
            }
        }
        let mut histogram = LatencyHistogram::new();
        let mut max_per_second = vec![0u64; seconds as usize];
        let mut peaks = Vec::new();
        for &(at, value) in &values {
            histogram.record(value);
            let slot = &mut max_per_second[(at / 1_000_000_000) as usize];
            *slot = (*slot).max(value);
            if value > 30_000 {
                peaks.push(rtlab_core::Peak {
                    at_ns: at,
                    value_ns: value,
                });
            }
        }
        rtlab_core::rt_high_wakeup_series(0, &histogram, 0, max_per_second, peaks).unwrap()
    }

    #[test]
    fn bursts_are_not_mistaken_for_a_regression_when_resampled_by_seconds() {
        // Two runs of one machine whose stalls come in bursts: two bursts against four.
        let a = record(vec![bursty(1, 20, &[4, 13])]);
        let b = record(vec![bursty(2, 20, &[2, 7, 12, 17])]);
        let by_seconds = compare(&a, &b, &CompareOptions::default()).unwrap();
        let strip = |record: &RunRecord| {
            let mut record = record.clone();
            record.series[0].peaks.clear();
            record
        };
        let by_samples = compare(&strip(&a), &strip(&b), &CompareOptions::default()).unwrap();
        let width = |comparison: &Comparison| {
            let [low, high] = comparison.series[0]
                .percentile("99")
                .unwrap()
                .difference_ci_ns
                .unwrap();
            (high - low) as f64
        };
        // By samples the 120 against 240 burst samples around the 200th largest look certain:
        // B "worse" by ~2 ms. By seconds, how many bursts a resample holds varies as it does
        // between runs, and the interval reaches down to no difference.
        assert_eq!(
            by_samples.series[0].percentile("99").unwrap().change,
            Change::Worse
        );
        assert!(width(&by_seconds) > width(&by_samples));
        assert_ne!(
            by_seconds.series[0].percentile("99").unwrap().change,
            Change::Worse
        );
    }

    fn with_policy(mut series: Series, policy: &str) -> Series {
        series.policy = policy.to_owned();
        series
    }

    #[test]
    fn the_default_gate_judges_real_time_series_and_names_the_rest() {
        let steady = |seed| lognormal(seed, 50_000, 20_000.0, 0.4);
        let worse = lognormal(9, 50_000, 60_000.0, 0.4);
        let a = record(vec![
            series("rt-high", 0, steady(1)),
            with_policy(series("normal", 0, steady(2)), "SCHED_OTHER"),
        ]);
        let b = record(vec![
            series("rt-high", 0, steady(3)),
            with_policy(series("normal", 0, worse), "SCHED_OTHER"),
        ]);
        let comparison = compare(&a, &b, &CompareOptions::default()).unwrap();
        assert!(
            matches!(
                &comparison.verdict,
                Verdict::Split {
                    realtime: Answer::NoDifference,
                    other: Answer::Worse { at, .. },
                } if at.series == "normal/wakeup@0"
            ),
            "{:?}",
            comparison.verdict
        );
        let threshold = parse_threshold("p99:10%").unwrap();
        let default = comparison.gate(&threshold, &GateScope::from_classes(&[]));
        assert!(default.breaches.is_empty(), "{default:?}");
        assert_eq!(default.judged, 1);
        assert_eq!(default.not_gated, vec!["normal/wakeup@0".to_owned()]);
        assert!(default.scope.contains("real-time"));
        let all = comparison.gate(&threshold, &GateScope::from_classes(&["all".to_owned()]));
        assert_eq!(all.breaches.len(), 1, "{all:?}");
        assert_eq!(all.breaches[0].series, "normal/wakeup@0");
        let named = comparison.gate(&threshold, &GateScope::from_classes(&["normal".to_owned()]));
        assert_eq!((named.judged, named.breaches.len()), (1, 1));
    }

    #[test]
    fn without_real_time_series_the_default_gate_judges_every_series() {
        let a = record(vec![with_policy(
            series("normal", 0, lognormal(1, 50_000, 20_000.0, 0.4)),
            "SCHED_OTHER",
        )]);
        let b = record(vec![with_policy(
            series("normal", 0, lognormal(2, 50_000, 60_000.0, 0.4)),
            "SCHED_OTHER",
        )]);
        let comparison = compare(&a, &b, &CompareOptions::default()).unwrap();
        let gate = comparison.gate(&parse_threshold("p99:10%").unwrap(), &GateScope::RealTime);
        assert_eq!((gate.judged, gate.breaches.len()), (1, 1), "{gate:?}");
        assert_eq!(gate.scope, "every series");
    }

    #[test]
    fn real_time_policies_are_recognised_in_every_spelling() {
        for policy in ["SCHED_FIFO", "fifo", "SCHED_RR", "sched_deadline", " FIFO "] {
            assert!(is_realtime_policy(policy), "{policy}");
        }
        for policy in ["SCHED_OTHER", "SCHED_BATCH", "SCHED_IDLE", "other", ""] {
            assert!(!is_realtime_policy(policy), "{policy}");
        }
    }

    #[test]
    fn runs_under_different_other_work_are_called_not_comparable() {
        let conditions = |busy_ns, steal_ns| rtlab_core::RunConditions {
            elapsed_ns: 10_000_000_000,
            cpus: 2,
            busy_ns,
            steal_ns,
            rtlab_cpu_ns: 500_000_000,
        };
        let same = || series("rt-high", 0, lognormal(1, 20_000, 20_000.0, 0.4));
        let mut a = record(vec![same()]);
        let mut b = record(vec![same()]);
        let options = CompareOptions::default();
        assert_eq!(compare(&a, &b, &options).unwrap().conditions, None);
        a.conditions = Some(conditions(1_500_000_000, 0));
        b.conditions = Some(conditions(2_000_000_000, 100_000_000));
        let close = compare(&a, &b, &options).unwrap().conditions.unwrap();
        assert!(close.comparable, "{close:?}");
        b.conditions = Some(conditions(13_000_000_000, 0));
        let apart = compare(&a, &b, &options).unwrap().conditions.unwrap();
        assert!(!apart.comparable && apart.other_work_differs && !apart.steal_differs);
        assert!((apart.other_work_b - 12.5 / 19.5).abs() < 1e-9, "{apart:?}");
        b.conditions = Some(conditions(1_500_000_000, 400_000_000));
        let stolen = compare(&a, &b, &options).unwrap().conditions.unwrap();
        assert!(!stolen.comparable && stolen.steal_differs && !stolen.other_work_differs);
        assert!((stolen.steal_b - 0.02).abs() < 1e-9, "{stolen:?}");
    }
}
