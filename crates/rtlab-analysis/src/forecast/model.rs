//! The underrun model: a buffer configuration against a latency distribution gives `P(late)`, an
//! MTTF and their intervals (the model is described in the `forecast` module's doc).
//!
//! This is the one place that turns a histogram into a probability: the observed data with a
//! Garwood interval while the slack lies inside it, a [`TailModel`] beyond it, and otherwise only
//! the bound the data supports. Everything else in `forecast` calls [`forecast`] per row.

use super::evidence::BufferConfig;
use crate::chi_squared::chi_squared_quantile;
use crate::classes::Rate;
use rtlab_core::{LatencyHistogram, Nanos};
use serde::Serialize;

/// Two-sided confidence of every interval the forecast reports.
pub const CONFIDENCE: f64 = 0.90;

/// How failures per wake-up become failures per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Model {
    /// One wake-up per buffer period `t`: MTTF = t / P(late).
    PerPeriod,
    /// Paper 002 §5: MTTF = (n − 1)·t / P(late), exact for double buffering only.
    Paper002,
    /// The response model (`response.rs`): stalls per second that make the chain's wake-up or
    /// the compute miss the slack, counted once per stall.
    Response,
}

impl Model {
    fn cycle(self, config: &BufferConfig) -> Nanos {
        match self {
            Model::PerPeriod | Model::Response => config.buffer_period,
            Model::Paper002 => config.buffering(),
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
    /// Where `probability` lies against the interval [`TailModel::exceedance`] reports at
    /// `threshold_ns`: `Greater` above it, `Less` below it, `Equal` inside; `None` where the
    /// model does not apply. A verdict needs only this (is the class's limit inside the
    /// interval?), and a model may answer it for less than both ends of the interval cost.
    fn locate(&self, threshold_ns: u64, probability: f64) -> Option<std::cmp::Ordering> {
        let exceedance = self.exceedance(threshold_ns)?;
        let (low, high) = exceedance.interval;
        Some(if probability > high {
            std::cmp::Ordering::Greater
        } else if probability < low {
            std::cmp::Ordering::Less
        } else {
            std::cmp::Ordering::Equal
        })
    }
    /// The point estimate of [`TailModel::exceedance`] without its interval.
    fn estimate(&self, threshold_ns: u64) -> Option<f64> {
        self.exceedance(threshold_ns)
            .map(|exceedance| exceedance.probability)
    }
}

/// The latency data a forecast stands on.
#[derive(Clone, Copy)]
pub struct LatencyEvidence<'a> {
    pub histogram: &'a LatencyHistogram,
    pub tail: Option<&'a dyn TailModel>,
    /// The probe's series as the response model reads them; without them the response model
    /// falls back to the per-period model on `histogram`.
    pub probe: Option<&'a super::response::ProbeEvidence>,
    /// Threads in the application's wake-up chain, each on its own CPU (JACK: driver → client
    /// = 2; a thread woken by its own timer = 1). Only the response model reads it.
    pub chain: u32,
}

impl<'a> LatencyEvidence<'a> {
    /// Evidence of a histogram alone (no tail, no probe series, a chain of one).
    pub fn of_histogram(histogram: &'a LatencyHistogram) -> LatencyEvidence<'a> {
        LatencyEvidence {
            histogram,
            tail: None,
            probe: None,
            chain: 1,
        }
    }
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
    /// The response model: stalls per second from the probe's series (`response.rs`).
    Response {
        samples: u64,
        /// Whether stalls during the compute were measured (a `response` series, or `c = 0`);
        /// when not, the MTTF is an upper bound.
        compute_measured: bool,
        /// The probe's work per wake-up behind the compute term.
        probe_compute_ns: Option<u64>,
        terms: Box<super::response::ResponseTerms>,
    },
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
    /// Underruns per second when every stall's backlog must be produced too and late buffers are
    /// dropped (the backlog model, `forecast::backlog`; not a sound card, which plays late data
    /// late: read `mttf_s` for it), each sample taken as one stall; `None` when the histogram is
    /// empty, or a stall longer than the slack never recovers (`c ≥ t`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog_underruns_per_s: Option<f64>,
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
        chi_squared_quantile(2.0 * count as f64, alpha / 2.0) / 2.0
    };
    let upper = chi_squared_quantile(2.0 * count as f64 + 2.0, 1.0 - alpha / 2.0) / 2.0;
    (lower, upper)
}

/// One-sided upper bound on the Poisson mean when no event was seen, at [`CONFIDENCE`]: −ln(1 − C).
pub fn zero_events_upper_bound() -> f64 {
    -(1.0 - CONFIDENCE).ln()
}

/// Which of the model's cases a configuration falls in, before any tail is asked.
enum Path {
    /// The compute time alone does not fit.
    NoSlack,
    /// `late` wake-ups were later than the slack.
    Observed { late: u64, samples: u64 },
    /// No wake-up was later than `slack`: beyond the observed data.
    Beyond { slack: u64, samples: u64 },
}

fn path(evidence: LatencyEvidence<'_>, config: &BufferConfig) -> Result<Path, ForecastError> {
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
    if slack_ns <= 0 {
        return Ok(Path::NoSlack);
    }
    let slack = slack_ns as u64;
    Ok(match evidence.histogram.count_above(slack) {
        0 => Path::Beyond { slack, samples },
        late => Path::Observed { late, samples },
    })
}

/// Forecasts the mean time to underrun of one buffer configuration.
pub fn forecast(
    evidence: LatencyEvidence<'_>,
    config: BufferConfig,
    model: Model,
) -> Result<Forecast, ForecastError> {
    if model == Model::Response {
        if let Some(response) = super::response::forecast_response(evidence, config) {
            return response;
        }
    }
    let path = path(evidence, &config)?;
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
        backlog_underruns_per_s: super::backlog::expected_underruns_per_period(
            evidence.histogram,
            &config,
        )
        .map(|per_period| per_period / config.buffer_period.as_secs_f64()),
    };
    let mttf_of = |probability: f64| {
        if probability > 0.0 {
            Some(cycle_s / probability)
        } else {
            None
        }
    };
    let (slack, samples) = match path {
        Path::NoSlack => {
            return Ok(row(
                Some(1.0),
                Some([1.0, 1.0]),
                [Some(cycle_s), Some(cycle_s)],
                Basis::NoSlack,
            ))
        }
        Path::Observed { late, samples } => {
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
        Path::Beyond { slack, samples } => (slack, samples),
    };
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

/// A verdict's answer for one configuration, with no more of the forecast than it takes.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// The tail projection's interval lies wholly on one side of what the class needs, so one
    /// exact test decided and the interval's ends were never computed: `suitable` with the
    /// point estimate of the MTTF, s.
    Decided { suitable: bool, mttf_s: f64 },
    /// Every other case: the whole forecast (cheap off the tail, or an interval that straddles
    /// the need, whose ends the verdict shows).
    Forecast(Forecast),
}

/// Whether `config` reaches an MTTF of `needed_s`, asking the tail projection only where the
/// class's limit lies against its interval (`TailModel::locate`): the verdict after every run
/// asks this of 15 classes, and both ends of every interval were most of what rtlab costs
/// after measuring (BENCHMARKS.md, probe cost). Decides exactly as [`forecast`]'s interval
/// would (test `decide_agrees_with_the_whole_forecast`).
pub fn decide(
    evidence: LatencyEvidence<'_>,
    config: BufferConfig,
    model: Model,
    needed_s: f64,
) -> Result<Decision, ForecastError> {
    if model == Model::Response && evidence.probe.is_some() {
        return forecast(evidence, config, model).map(Decision::Forecast);
    }
    if let (Path::Beyond { slack, .. }, Some(tail)) = (path(evidence, &config)?, evidence.tail) {
        let cycle_s = model.cycle(&config).as_secs_f64();
        // MTTF ≥ needed ⇔ P(late) ≤ cycle / needed.
        let limit = cycle_s / needed_s;
        if let Some(estimate) = tail.estimate(slack).filter(|estimate| *estimate > 0.0) {
            if let Some(side) = tail.locate(slack, limit).filter(|side| side.is_ne()) {
                return Ok(Decision::Decided {
                    suitable: side.is_gt(),
                    mttf_s: cycle_s / estimate,
                });
            }
        }
    }
    forecast(evidence, config, model).map(Decision::Forecast)
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
}
