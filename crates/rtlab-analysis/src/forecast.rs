//! Forecast: mean time to buffer underrun, and the least buffering that reaches a target.
//!
//! Paper 002 section 5 turns a latency distribution into what users care about. An application
//! with `n` buffers of `t` ms that computes `c` ms per buffer is woken once per buffer period; a
//! wake-up fails (the device runs dry) when its latency exceeds the slack `t·(n − 1) − c`. With
//! `P(late)` the probability that one wake-up is later than the slack, the mean time to failure is
//! `MTTF = t / P(late)` (one trial per period). 002 itself divides by `(n − 1)·t` instead — exact
//! only for double buffering — and that variant is kept as [`Model::Paper002`] to reproduce its
//! figures.
//!
//! `P(late)` comes from the measured histogram while the slack lies inside the observed data, with
//! an exact Poisson interval on the count of late wake-ups. Beyond the largest observation the
//! histogram says nothing; a tail projection ([`TailModel`]) may, and otherwise the forecast says
//! only what the data supports: with no late wake-up among `N`, the MTTF is at least the bound
//! below, never a made-up number.

use crate::classes::{ApplicationClass, Rate};
use rtlab_core::{LatencyHistogram, Metric, Nanos, RunRecord, Series};
use serde::Serialize;
use statrs::distribution::{ChiSquared, ContinuousCDF};

/// Two-sided confidence of every interval the forecast reports.
pub const CONFIDENCE: f64 = 0.90;

/// `n` buffers of `t`, `c` compute time per buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BufferConfig {
    pub buffers: u32,
    pub buffer_period: Nanos,
    pub compute: Nanos,
}

impl BufferConfig {
    pub fn of_class(class: &ApplicationClass) -> BufferConfig {
        BufferConfig {
            buffers: class.buffers,
            buffer_period: class.buffer_period,
            compute: class.compute,
        }
    }

    /// `t·(n − 1) − c` in ns; negative when the compute time alone exceeds the buffering.
    pub fn slack_ns(&self) -> i64 {
        let buffering =
            u128::from(self.buffers.saturating_sub(1)) * u128::from(self.buffer_period.0);
        let buffering = i64::try_from(buffering).unwrap_or(i64::MAX);
        buffering.saturating_sub(i64::try_from(self.compute.0).unwrap_or(i64::MAX))
    }

    /// `(n − 1)·t`: the buffering (paper 002's latency tolerance), what a user pays in latency.
    pub fn buffering(&self) -> Nanos {
        Nanos(u64::from(self.buffers.saturating_sub(1)).saturating_mul(self.buffer_period.0))
    }
}

/// How failures per wake-up become failures per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Model {
    /// One wake-up per buffer period `t`: MTTF = t / P(late).
    PerPeriod,
    /// Paper 002 §5: MTTF = (n − 1)·t / P(late), exact for double buffering only.
    Paper002,
}

impl Model {
    fn cycle(self, config: &BufferConfig) -> Nanos {
        match self {
            Model::PerPeriod => config.buffer_period,
            Model::Paper002 => config.buffering(),
        }
    }

    /// The model in words, printed with every forecast.
    pub fn describe(self) -> &'static str {
        match self {
            Model::PerPeriod => {
                "one wake-up per buffer period t; a wake-up fails when its latency exceeds the slack t·(n−1) − c; MTTF = t / P(late)"
            }
            Model::Paper002 => {
                "paper 002 §5: slack t·(n−1) − c, MTTF = (n−1)·t / P(late) (exact for double buffering only)"
            }
        }
    }
}

/// `P(latency > threshold)` for one wake-up, with its interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Exceedance {
    pub probability: f64,
    pub interval: (f64, f64),
}

/// A projection of the latency tail beyond the observed data (peaks over threshold, GPD).
pub trait TailModel {
    /// `P(latency > threshold_ns)` per wake-up, or `None` where the model does not apply.
    fn exceedance(&self, threshold_ns: u64) -> Option<Exceedance>;
    /// One line saying what the model is (e.g. "GPD fit to 200 peaks over 85 µs").
    fn describe(&self) -> String;
}

/// The latency data a forecast stands on.
#[derive(Clone, Copy)]
pub struct LatencyEvidence<'a> {
    pub histogram: &'a LatencyHistogram,
    pub tail: Option<&'a dyn TailModel>,
}

impl std::fmt::Debug for LatencyEvidence<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LatencyEvidence")
            .field("samples", &self.histogram.count())
            .field("tail", &self.tail.map(|tail| tail.describe()))
            .finish()
    }
}

/// Where `P(late)` came from.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Basis {
    /// The compute time alone does not fit: every period fails.
    NoSlack,
    /// `late` of `samples` observed wake-ups exceeded the slack.
    Observed { late: u64, samples: u64 },
    /// The slack lies beyond the observed data; the tail projection gave `P(late)`.
    TailProjection { samples: u64, model: String },
    /// The slack lies beyond the observed data and no tail projection reaches it.
    BeyondData { samples: u64 },
}

/// One forecast: a buffer configuration against a latency distribution.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Forecast {
    pub buffers: u32,
    pub buffer_period_ns: u64,
    pub compute_ns: u64,
    pub slack_ns: i64,
    /// Probability that one wake-up is late; `None` when the data cannot say.
    pub p_late: Option<f64>,
    pub p_late_ci: Option<[f64; 2]>,
    /// Mean time to underrun, s; `None` when the data cannot say.
    pub mttf_s: Option<f64>,
    /// Interval of the MTTF, s; `[lower bound, None]` when only a lower bound is known.
    pub mttf_ci_s: [Option<f64>; 2],
    pub basis: Basis,
    pub model: Model,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ForecastError {
    #[error("the latency histogram is empty: nothing to forecast from")]
    NoSamples,
    #[error("a buffer period of 0 is not a configuration")]
    ZeroPeriod,
    #[error("{0} buffers leave no slack (need at least 2)")]
    TooFewBuffers(u32),
}

/// Exact (Garwood) interval of a Poisson mean given `count` events, at [`CONFIDENCE`].
pub fn poisson_interval(count: u64) -> (f64, f64) {
    let alpha = 1.0 - CONFIDENCE;
    let lower = if count == 0 {
        0.0
    } else {
        ChiSquared::new(2.0 * count as f64)
            .expect("positive degrees of freedom")
            .inverse_cdf(alpha / 2.0)
            / 2.0
    };
    let upper = ChiSquared::new(2.0 * count as f64 + 2.0)
        .expect("positive degrees of freedom")
        .inverse_cdf(1.0 - alpha / 2.0)
        / 2.0;
    (lower, upper)
}

/// One-sided upper bound on the Poisson mean when no event was seen, at [`CONFIDENCE`]: −ln(1 − C).
pub fn zero_events_upper_bound() -> f64 {
    -(1.0 - CONFIDENCE).ln()
}

/// Forecasts the mean time to underrun of one buffer configuration.
pub fn forecast(
    evidence: LatencyEvidence<'_>,
    config: BufferConfig,
    model: Model,
) -> Result<Forecast, ForecastError> {
    if config.buffer_period.0 == 0 {
        return Err(ForecastError::ZeroPeriod);
    }
    if config.buffers < 2 {
        return Err(ForecastError::TooFewBuffers(config.buffers));
    }
    let samples = evidence.histogram.count();
    if samples == 0 {
        return Err(ForecastError::NoSamples);
    }
    let slack_ns = config.slack_ns();
    let cycle_s = model.cycle(&config).as_secs_f64();
    let row = |p_late: Option<f64>,
               p_late_ci: Option<[f64; 2]>,
               mttf_ci_s: [Option<f64>; 2],
               basis: Basis| Forecast {
        buffers: config.buffers,
        buffer_period_ns: config.buffer_period.0,
        compute_ns: config.compute.0,
        slack_ns,
        p_late,
        p_late_ci,
        mttf_s: p_late.map(|probability| cycle_s / probability),
        mttf_ci_s,
        basis,
        model,
    };
    let mttf_of = |probability: f64| {
        if probability > 0.0 {
            Some(cycle_s / probability)
        } else {
            None
        }
    };
    if slack_ns <= 0 {
        return Ok(row(
            Some(1.0),
            Some([1.0, 1.0]),
            [Some(cycle_s), Some(cycle_s)],
            Basis::NoSlack,
        ));
    }
    let slack = slack_ns as u64;
    let late = evidence.histogram.count_above(slack);
    if late > 0 {
        let (lower, upper) = poisson_interval(late);
        let samples_f = samples as f64;
        let p_low = lower / samples_f;
        let p_high = (upper / samples_f).min(1.0);
        return Ok(row(
            Some(late as f64 / samples_f),
            Some([p_low, p_high]),
            [mttf_of(p_high), mttf_of(p_low)],
            Basis::Observed { late, samples },
        ));
    }
    if let Some(tail) = evidence.tail {
        if let Some(exceedance) = tail.exceedance(slack) {
            if exceedance.probability > 0.0 {
                let (low, high) = exceedance.interval;
                return Ok(row(
                    Some(exceedance.probability),
                    Some([low, high]),
                    [mttf_of(high), mttf_of(low)],
                    Basis::TailProjection {
                        samples,
                        model: tail.describe(),
                    },
                ));
            }
        }
    }
    let p_high = (zero_events_upper_bound() / samples as f64).min(1.0);
    Ok(row(
        None,
        Some([0.0, p_high]),
        [mttf_of(p_high), None],
        Basis::BeyondData { samples },
    ))
}

impl Forecast {
    /// Whether the MTTF reaches `target`: `Some(true/false)`, or `None` when the data can't tell.
    ///
    /// A point estimate decides when there is one; with only a lower bound, reaching the target
    /// with the bound is a yes and anything else is "can't tell".
    pub fn meets(&self, target: Rate) -> Option<bool> {
        let needed = target.mean_interval_s();
        match (self.mttf_s, self.mttf_ci_s[0]) {
            (Some(mttf), _) => Some(mttf >= needed),
            (None, Some(lower)) if lower >= needed => Some(true),
            _ => None,
        }
    }

    pub fn config(&self) -> BufferConfig {
        BufferConfig {
            buffers: self.buffers,
            buffer_period: Nanos(self.buffer_period_ns),
            compute: Nanos(self.compute_ns),
        }
    }

    /// The MTTF in words: "one underrun every 3.2 h (90 % CI 1.1 h–9 h)".
    pub fn describe_mttf(&self, event: &str) -> String {
        let confidence = (CONFIDENCE * 100.0).round();
        match (&self.basis, self.mttf_s) {
            (Basis::NoSlack, _) => {
                format!("one {event} every period: the compute time leaves no slack")
            }
            (Basis::BeyondData { samples }, _) => {
                let bound = self.mttf_ci_s[0]
                    .map(|lower| {
                        format!(
                            "; at {confidence} % confidence the MTTF is above {}",
                            describe_seconds(lower)
                        )
                    })
                    .unwrap_or_default();
                format!(
                    "no {event} expected within the horizon the data supports: none of {samples} wake-ups exceeded the slack, which lies beyond the data{bound}"
                )
            }
            (_, Some(mttf)) => {
                let interval = match self.mttf_ci_s {
                    [Some(low), Some(high)] => format!(
                        " ({confidence} % CI {}–{})",
                        describe_seconds(low),
                        describe_seconds(high)
                    ),
                    [Some(low), None] => {
                        format!(" ({confidence} % CI above {})", describe_seconds(low))
                    }
                    _ => String::new(),
                };
                format!("one {event} every {}{interval}", describe_seconds(mttf))
            }
            (_, None) => format!("no estimate of the time between {event}s"),
        }
    }
}

/// A time in seconds in the unit people read it in: "850 ms", "12 s", "14 min", "3.2 h", "9.1 days".
pub fn describe_seconds(seconds: f64) -> String {
    let significant = |value: f64| {
        if value >= 10.0 {
            format!("{value:.0}")
        } else {
            let text = format!("{value:.1}");
            text.strip_suffix(".0").map(str::to_owned).unwrap_or(text)
        }
    };
    if !seconds.is_finite() {
        return "forever".to_owned();
    }
    if seconds < 1.0 {
        format!("{} ms", significant(seconds * 1e3))
    } else if seconds < 120.0 {
        format!("{} s", significant(seconds))
    } else if seconds < 2.0 * 3_600.0 {
        format!("{} min", significant(seconds / 60.0))
    } else if seconds < 48.0 * 3_600.0 {
        format!("{} h", significant(seconds / 3_600.0))
    } else if seconds < 365.0 * 86_400.0 {
        format!("{} days", significant(seconds / 86_400.0))
    } else {
        format!("{} years", significant(seconds / (365.25 * 86_400.0)))
    }
}

/// Forecasts for `n = 2..=max_buffers` buffers of one period: the table of 002's Figures 6-7.
pub fn buffer_table(
    evidence: LatencyEvidence<'_>,
    buffer_period: Nanos,
    compute: Nanos,
    max_buffers: u32,
    model: Model,
) -> Result<Vec<Forecast>, ForecastError> {
    (2..=max_buffers.max(2))
        .map(|buffers| {
            forecast(
                evidence,
                BufferConfig {
                    buffers,
                    buffer_period,
                    compute,
                },
                model,
            )
        })
        .collect()
}

/// The buffer periods searched when the question leaves `t` open: 125 µs to 128 ms, doubling.
pub fn default_periods() -> Vec<Nanos> {
    (0..=10).map(|step| Nanos(125_000u64 << step)).collect()
}

/// The least buffering `(n − 1)·t` among `periods` × `2..=max_buffers` whose MTTF meets `target`.
///
/// Ties in buffering go to the larger `t` (fewer wake-ups). Configurations whose compute time does
/// not fit a period are skipped. `None` when nothing searched reaches the target, or the data can't
/// tell for any configuration that would.
pub fn least_buffering(
    evidence: LatencyEvidence<'_>,
    target: Rate,
    periods: &[Nanos],
    compute: Nanos,
    max_buffers: u32,
    model: Model,
) -> Result<Option<Forecast>, ForecastError> {
    let mut best: Option<Forecast> = None;
    for &buffer_period in periods {
        if compute >= buffer_period {
            continue;
        }
        for buffers in 2..=max_buffers.max(2) {
            let config = BufferConfig {
                buffers,
                buffer_period,
                compute,
            };
            let row = forecast(evidence, config, model)?;
            if row.meets(target) != Some(true) {
                continue;
            }
            let better = match &best {
                None => true,
                Some(current) => {
                    let (mine, theirs) = (config.buffering(), current.config().buffering());
                    mine < theirs || (mine == theirs && buffer_period.0 > current.buffer_period_ns)
                }
            };
            if better {
                best = Some(row);
            }
            // More buffers at this period only add buffering.
            break;
        }
    }
    Ok(best)
}

/// A plain verdict for one class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    Suitable,
    NotSuitable,
    /// The run is too short to tell (and no tail projection reaches the slack).
    Undetermined,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    pub kind: VerdictKind,
    pub text: String,
}

/// "suitable for pro audio, 128 frames × 2 at 48 kHz: one glitch every ~9 days expected …".
pub fn verdict(class: &ApplicationClass, forecast: &Forecast) -> Verdict {
    let kind = match forecast.meets(class.acceptable) {
        Some(true) => VerdictKind::Suitable,
        Some(false) => VerdictKind::NotSuitable,
        None => VerdictKind::Undetermined,
    };
    let head = match kind {
        VerdictKind::Suitable => "suitable for",
        VerdictKind::NotSuitable => "NOT suitable for",
        VerdictKind::Undetermined => "cannot tell yet for",
    };
    let needed = describe_seconds(class.acceptable.mean_interval_s());
    let tail = match kind {
        VerdictKind::Undetermined => {
            format!("; it needs an MTTF of {needed}: measure longer, or under load, to decide")
        }
        _ => format!(" (acceptable: one per {needed})"),
    };
    Verdict {
        kind,
        text: format!(
            "{head} {}: {}{tail}",
            class.description,
            forecast.describe_mttf("glitch")
        ),
    }
}

/// Which series a forecast or check reads.
#[derive(Clone, Debug)]
pub struct SeriesSelection {
    /// `class/metric`, and the CPUs pooled.
    pub label: String,
    pub histogram: LatencyHistogram,
    pub cpus: Vec<u32>,
    /// Missed periods put back into the histogram from the peaks (see [`add_missed_periods`]).
    pub missed_restored: u64,
    /// Missed periods whose latency the record cannot tell (more than its peaks cover).
    pub missed_unknown: u64,
}

/// Puts the periods a probe skipped back into a histogram, as cyclictest would have measured them.
///
/// A wake-up `L` late with `L ≥ t` makes the probe skip the periods it overslept; an application
/// with an absolute timer would instead have run them at once, `L − t`, `L − 2t`, … late. Those are
/// trials of the forecast's model too, and many of them fail, so leaving them out would flatter the
/// machine. They are rebuilt from the largest samples the series kept (`peaks`); `(restored,
/// unknown)` says how many were rebuilt and how many the peaks did not cover.
pub fn add_missed_periods(series: &Series, histogram: &mut LatencyHistogram) -> (u64, u64) {
    if series.missed == 0 {
        return (0, 0);
    }
    if series.period_ns == 0 {
        return (0, series.missed);
    }
    let mut restored = 0;
    for peak in &series.peaks {
        let mut latency = peak.value_ns;
        while latency >= series.period_ns && restored < series.missed {
            latency -= series.period_ns;
            histogram.record(latency);
            restored += 1;
        }
    }
    (restored, series.missed - restored)
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectionError {
    #[error("'{0}' is not a series selector (expected CLASS/METRIC, e.g. rt-high/wakeup)")]
    BadSelector(String),
    #[error("the run has no series {wanted} (it has: {available})")]
    NoSuchSeries { wanted: String, available: String },
    #[error("the run has no rt-high wake-up series and several classes; pick one with --series (it has: {0})")]
    Ambiguous(String),
    #[error("series {label}: {message}")]
    Histogram { label: String, message: String },
}

/// Pools the series `CLASS/METRIC` over CPUs. Without a selector: `rt-high/wakeup`, or the only
/// class with wake-up series (e.g. an imported cyclictest run).
pub fn select_series(
    record: &RunRecord,
    selector: Option<&str>,
) -> Result<SeriesSelection, SelectionError> {
    let available = || {
        let mut labels: Vec<String> = record
            .series
            .iter()
            .map(|series| format!("{}/{}", series.class, series.metric))
            .collect();
        labels.sort();
        labels.dedup();
        if labels.is_empty() {
            "no series".to_owned()
        } else {
            labels.join(", ")
        }
    };
    let (class, metric) = match selector {
        Some(text) => {
            let (class, metric) = text
                .split_once('/')
                .ok_or_else(|| SelectionError::BadSelector(text.to_owned()))?;
            let metric: Metric = metric
                .parse()
                .map_err(|_| SelectionError::BadSelector(text.to_owned()))?;
            (class.to_owned(), metric)
        }
        None => {
            let mut classes: Vec<&str> = record
                .series
                .iter()
                .filter(|series| series.metric == Metric::Wakeup)
                .map(|series| series.class.as_str())
                .collect();
            classes.sort_unstable();
            classes.dedup();
            if classes.contains(&"rt-high") {
                ("rt-high".to_owned(), Metric::Wakeup)
            } else if classes.len() == 1 {
                (classes[0].to_owned(), Metric::Wakeup)
            } else if classes.is_empty() {
                return Err(SelectionError::NoSuchSeries {
                    wanted: "*/wakeup".to_owned(),
                    available: available(),
                });
            } else {
                return Err(SelectionError::Ambiguous(available()));
            }
        }
    };
    let label = format!("{class}/{metric}");
    let mut pooled = LatencyHistogram::new();
    let mut cpus = Vec::new();
    let (mut missed_restored, mut missed_unknown) = (0, 0);
    for series in record
        .series
        .iter()
        .filter(|series| series.class == class && series.metric == metric)
    {
        let histogram = series
            .histogram()
            .map_err(|error| SelectionError::Histogram {
                label: series.label(),
                message: error.to_string(),
            })?;
        let mut histogram = histogram;
        let (restored, unknown) = add_missed_periods(series, &mut histogram);
        missed_restored += restored;
        missed_unknown += unknown;
        pooled.add(&histogram);
        cpus.push(series.cpu);
    }
    if cpus.is_empty() {
        return Err(SelectionError::NoSuchSeries {
            wanted: label,
            available: available(),
        });
    }
    Ok(SeriesSelection {
        label,
        histogram: pooled,
        cpus,
        missed_restored,
        missed_unknown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classes::parse_rate;
    use proptest::prelude::*;

    /// 10^6 wake-ups: 999 000 at 100 µs, 900 at 2 ms, 90 at 5 ms, 10 at 20 ms.
    fn constructed() -> LatencyHistogram {
        let mut histogram = LatencyHistogram::new();
        histogram.record_n(100_000, 999_000);
        histogram.record_n(2_000_000, 900);
        histogram.record_n(5_000_000, 90);
        histogram.record_n(20_000_000, 10);
        histogram
    }

    fn evidence(histogram: &LatencyHistogram) -> LatencyEvidence<'_> {
        LatencyEvidence {
            histogram,
            tail: None,
        }
    }

    fn config(buffers: u32, period_ms: u64, compute_us: u64) -> BufferConfig {
        BufferConfig {
            buffers,
            buffer_period: Nanos::from_millis(period_ms),
            compute: Nanos::from_micros(compute_us),
        }
    }

    #[test]
    fn mttf_matches_hand_computed_values() {
        let histogram = constructed();
        // n=2, t=4 ms, c=1 ms: slack 3 ms; 100 of 10^6 are later (5 ms, 20 ms): P = 1e-4,
        // MTTF = 4 ms / 1e-4 = 40 s.
        let row = forecast(evidence(&histogram), config(2, 4, 1_000), Model::PerPeriod).unwrap();
        assert_eq!(row.slack_ns, 3_000_000);
        assert_eq!(
            row.basis,
            Basis::Observed {
                late: 100,
                samples: 1_000_000
            }
        );
        assert!((row.p_late.unwrap() - 1e-4).abs() < 1e-12);
        assert!((row.mttf_s.unwrap() - 40.0).abs() < 1e-9);
        let [low, high] = row.mttf_ci_s;
        assert!(low.unwrap() < 40.0 && 40.0 < high.unwrap());
        // n=3: slack 7 ms, only the 10 at 20 ms: P = 1e-5, MTTF = 400 s.
        let row = forecast(evidence(&histogram), config(3, 4, 1_000), Model::PerPeriod).unwrap();
        assert!((row.mttf_s.unwrap() - 400.0).abs() < 1e-6);
        // 002's method divides by (n−1)·t = 8 ms instead: 800 s.
        let row = forecast(evidence(&histogram), config(3, 4, 1_000), Model::Paper002).unwrap();
        assert!((row.mttf_s.unwrap() - 800.0).abs() < 1e-6);
        // Double buffering: both models agree.
        let per_period =
            forecast(evidence(&histogram), config(2, 4, 1_000), Model::PerPeriod).unwrap();
        let paper = forecast(evidence(&histogram), config(2, 4, 1_000), Model::Paper002).unwrap();
        assert_eq!(per_period.mttf_s, paper.mttf_s);
    }

    #[test]
    fn reproduces_paper_002_audio_thread_example() {
        // 002 §4.3: a 16 ms latency once in 165 000 waits is "roughly once every 44 minutes" for
        // an audio thread with a 16 ms period; with the virus scanner, once in 1000 waits, "roughly
        // every 16 seconds".
        let mut histogram = LatencyHistogram::new();
        histogram.record_n(1_000_000, 164_999);
        histogram.record_n(17_000_000, 1);
        let row = forecast(evidence(&histogram), config(2, 16, 0), Model::Paper002).unwrap();
        assert!(
            (row.mttf_s.unwrap() / 60.0 - 44.0).abs() < 0.01,
            "{:?}",
            row.mttf_s
        );
        let mut scanner = LatencyHistogram::new();
        scanner.record_n(1_000_000, 999);
        scanner.record_n(17_000_000, 1);
        let row = forecast(evidence(&scanner), config(2, 16, 0), Model::Paper002).unwrap();
        assert!((row.mttf_s.unwrap() - 16.0).abs() < 1e-9);
    }

    #[test]
    fn poisson_interval_matches_tables() {
        // Garwood 90 % intervals: k=1 → (0.0513, 4.744); k=10 → (5.425, 17.00).
        let (low, high) = poisson_interval(1);
        assert!(
            (low - 0.05129).abs() < 1e-4 && (high - 4.7439).abs() < 1e-3,
            "{low} {high}"
        );
        let (low, high) = poisson_interval(10);
        assert!(
            (low - 5.4254).abs() < 1e-3 && (high - 16.962).abs() < 1e-2,
            "{low} {high}"
        );
        assert!((zero_events_upper_bound() - std::f64::consts::LN_10).abs() < 1e-12);
    }

    #[test]
    fn beyond_the_data_gives_only_a_bound() {
        let histogram = constructed();
        // Slack 39 ms > the 20 ms maximum: no estimate, a lower bound of t·N/2.303.
        let row = forecast(evidence(&histogram), config(2, 40, 1_000), Model::PerPeriod).unwrap();
        assert_eq!(row.basis, Basis::BeyondData { samples: 1_000_000 });
        assert_eq!(row.p_late, None);
        assert_eq!(row.mttf_s, None);
        let bound = row.mttf_ci_s[0].unwrap();
        assert!(
            (bound - 0.040 * 1e6 / std::f64::consts::LN_10).abs() < 1e-6,
            "{bound}"
        );
        assert_eq!(row.mttf_ci_s[1], None);
        let text = row.describe_mttf("underrun");
        assert!(text.contains("beyond the data"), "{text}");
        // The bound decides only when it reaches the target.
        assert_eq!(row.meets(parse_rate("1/hour").unwrap()), Some(true));
        assert_eq!(row.meets(parse_rate("1/week").unwrap()), None);
    }

    struct FixedTail;
    impl TailModel for FixedTail {
        fn exceedance(&self, threshold_ns: u64) -> Option<Exceedance> {
            (threshold_ns > 20_000_000).then_some(Exceedance {
                probability: 1e-7,
                interval: (1e-8, 1e-6),
            })
        }
        fn describe(&self) -> String {
            "fixed".to_owned()
        }
    }

    #[test]
    fn tail_projection_is_used_only_beyond_the_data() {
        let histogram = constructed();
        let with_tail = LatencyEvidence {
            histogram: &histogram,
            tail: Some(&FixedTail),
        };
        let row = forecast(with_tail, config(2, 40, 1_000), Model::PerPeriod).unwrap();
        assert!(matches!(row.basis, Basis::TailProjection { .. }));
        assert!((row.mttf_s.unwrap() - 0.040 / 1e-7).abs() < 1e-3);
        assert_eq!(row.mttf_ci_s, [Some(0.040 / 1e-6), Some(0.040 / 1e-8)]);
        let inside = forecast(with_tail, config(2, 4, 1_000), Model::PerPeriod).unwrap();
        assert!(matches!(inside.basis, Basis::Observed { .. }));
    }

    #[test]
    fn no_slack_fails_every_period() {
        let histogram = constructed();
        let row = forecast(evidence(&histogram), config(2, 1, 1_500), Model::PerPeriod).unwrap();
        assert_eq!(row.basis, Basis::NoSlack);
        assert_eq!(row.mttf_s, Some(0.001));
        assert!(forecast(evidence(&histogram), config(1, 1, 0), Model::PerPeriod).is_err());
        assert_eq!(
            forecast(
                evidence(&LatencyHistogram::new()),
                config(2, 1, 0),
                Model::PerPeriod
            ),
            Err(ForecastError::NoSamples)
        );
    }

    #[test]
    fn least_buffering_finds_the_smallest_configuration() {
        let histogram = constructed();
        // 1/hour with t = 4 ms and c = 1 ms: n=2 → 40 s, n=3 → 400 s, n=6 (slack 19 ms) → 400 s,
        // n=7 (slack 23 ms) is beyond the data: bound 4 ms·10^6/2.303 = 1737 s < 3600 → can't tell.
        // So no configuration at t = 4 ms is known to reach 1/hour.
        let target = parse_rate("1/hour").unwrap();
        let found = least_buffering(
            evidence(&histogram),
            target,
            &[Nanos::from_millis(4)],
            Nanos::from_micros(1_000),
            16,
            Model::PerPeriod,
        )
        .unwrap();
        assert_eq!(found, None);
        // 1/5min is reached at n=3 (400 s).
        let found = least_buffering(
            evidence(&histogram),
            parse_rate("1/5min").unwrap(),
            &[Nanos::from_millis(4)],
            Nanos::from_micros(1_000),
            16,
            Model::PerPeriod,
        )
        .unwrap()
        .unwrap();
        assert_eq!(found.buffers, 3);
        // Over several periods, the least (n−1)·t wins: t = 8 ms, n = 2 (slack 7 ms, MTTF 800 s).
        let found = least_buffering(
            evidence(&histogram),
            parse_rate("1/5min").unwrap(),
            &[
                Nanos::from_millis(2),
                Nanos::from_millis(4),
                Nanos::from_millis(8),
            ],
            Nanos::from_micros(1_000),
            16,
            Model::PerPeriod,
        )
        .unwrap()
        .unwrap();
        assert_eq!((found.buffers, found.buffer_period_ns), (2, 8_000_000));
    }

    #[test]
    fn verdicts_are_plain() {
        let histogram = constructed();
        let classes = crate::classes::builtin_classes();
        let modem = classes.iter().find(|class| class.name == "modem").unwrap();
        // Modem: 3 × 6 ms, c 1.5 ms → slack 10.5 ms → 10 late → MTTF 6 ms / 1e-5 = 600 s < 1 h.
        let row = forecast(
            evidence(&histogram),
            BufferConfig::of_class(modem),
            Model::PerPeriod,
        )
        .unwrap();
        let verdict = verdict(modem, &row);
        assert_eq!(verdict.kind, VerdictKind::NotSuitable);
        assert!(
            verdict.text.starts_with("NOT suitable for soft modem"),
            "{}",
            verdict.text
        );
        assert!(
            verdict.text.contains("one glitch every 10 min"),
            "{}",
            verdict.text
        );
    }

    #[test]
    fn describes_times_readably() {
        assert_eq!(describe_seconds(0.85), "850 ms");
        assert_eq!(describe_seconds(12.0), "12 s");
        assert_eq!(describe_seconds(840.0), "14 min");
        assert_eq!(describe_seconds(3.2 * 3600.0), "3.2 h");
        assert_eq!(describe_seconds(9.0 * 86_400.0), "9 days");
    }

    #[test]
    fn selects_and_pools_series() {
        let mut record = test_record();
        let selection = select_series(&record, None).unwrap();
        assert_eq!(selection.label, "rt-high/wakeup");
        assert_eq!(selection.cpus, vec![0, 1]);
        assert_eq!(selection.histogram.count(), 300);
        assert!(select_series(&record, Some("normal/wakeup")).is_err());
        assert!(select_series(&record, Some("rt-high")).is_err());
        record.series[0].class = "mid".to_owned();
        record.series[1].class = "other".to_owned();
        let message = select_series(&record, None).unwrap_err().to_string();
        assert!(message.contains("several classes"), "{message}");
    }

    #[test]
    fn missed_periods_are_restored_from_peaks() {
        let mut histogram = LatencyHistogram::new();
        histogram.record_n(10_000, 97);
        histogram.record(2_500_000);
        let mut series = RunRecord::series_from_histogram(
            Metric::Wakeup,
            "rt-high",
            0,
            "SCHED_FIFO",
            90,
            1_000_000,
            &histogram,
            3,
            0,
            vec![],
            vec![rtlab_core::Peak {
                at_ns: 5,
                value_ns: 2_500_000,
            }],
        )
        .unwrap();
        // 2.5 ms late with t = 1 ms skipped 2 periods: they would have been 1.5 ms and 0.5 ms late.
        // The record says 3 were missed: one is not covered by the peaks.
        let mut restored = series.histogram().unwrap();
        assert_eq!(add_missed_periods(&series, &mut restored), (2, 1));
        assert_eq!(restored.count(), 100);
        assert_eq!(restored.count_above(1_000_000), 2);
        series.period_ns = 0;
        assert_eq!(
            add_missed_periods(&series, &mut series.histogram().unwrap()),
            (0, 3)
        );
    }

    fn test_record() -> RunRecord {
        let series = |cpu: u32, count: u64| {
            let mut histogram = LatencyHistogram::new();
            histogram.record_n(10_000, count);
            RunRecord::series_from_histogram(
                Metric::Wakeup,
                "rt-high",
                cpu,
                "SCHED_FIFO",
                90,
                1_000_000,
                &histogram,
                0,
                0,
                vec![],
                vec![],
            )
            .unwrap()
        };
        RunRecord {
            schema: rtlab_core::RUN_SCHEMA.to_owned(),
            id: "test".to_owned(),
            started_at: "2026-01-01T00:00:00Z".to_owned(),
            duration_ns: 0,
            tool_version: "test".to_owned(),
            cmdline: vec![],
            host: Default::default(),
            config: rtlab_core::RecordConfig::default(),
            series: vec![series(0, 100), series(1, 200)],
            load: None,
            episodes: vec![],
            warnings: vec![],
            interrupted: false,
        }
    }

    proptest! {
        #[test]
        fn more_buffering_never_lowers_the_mttf(
            values in proptest::collection::vec(1u64..50_000_000, 1..400),
            period_us in 100u64..20_000,
            compute_permille in 0u64..900,
            buffers in 2u32..12,
        ) {
            let mut histogram = LatencyHistogram::new();
            for value in &values {
                histogram.record(*value);
            }
            let period = Nanos::from_micros(period_us);
            let compute = Nanos(period.0 * compute_permille / 1000);
            let fewer = forecast(evidence(&histogram), BufferConfig { buffers, buffer_period: period, compute }, Model::PerPeriod).unwrap();
            let more = forecast(evidence(&histogram), BufferConfig { buffers: buffers + 1, buffer_period: period, compute }, Model::PerPeriod).unwrap();
            // Compare the lower ends, which always exist, and the estimates when both have one.
            prop_assert!(more.mttf_ci_s[0].unwrap() >= fewer.mttf_ci_s[0].unwrap() - 1e-12);
            if let (Some(a), Some(b)) = (fewer.mttf_s, more.mttf_s) {
                prop_assert!(b >= a - 1e-12);
            }
            prop_assert!(more.slack_ns > fewer.slack_ns);
        }
    }
}
