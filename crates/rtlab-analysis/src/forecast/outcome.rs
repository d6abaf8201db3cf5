//! What a forecast gives: the [`Forecast`] of one configuration, where its `P(late)` came from
//! ([`Basis`]), the [`Model`] that counted it, and the Poisson intervals every model reports at
//! [`CONFIDENCE`]. Below the models (`model.rs`, `response.rs`), which both build these.

use super::evidence::{BufferConfig, Counting};
use crate::chi_squared::chi_squared_quantile;
use crate::classes::Rate;
use rtlab_core::Nanos;
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
        /// How the application counts a stall's failures (`restart`: one; `catch-up`: one per
        /// period it made late).
        counting: Counting,
        terms: Box<ResponseTerms>,
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

/// The terms of one response forecast, failures per second (point estimates).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ResponseTerms {
    /// Stalls that covered a wake-up of the chain by more than the slack.
    pub wakeup_per_s: f64,
    /// Stalls of more than the slack during the compute; `None` when not measured.
    pub compute_per_s: Option<f64>,
    /// Late wake-ups of the probe behind the first term.
    pub late_wakeups: u64,
    /// Stalls during the probe's work behind the second term.
    pub late_computes: Option<u64>,
    /// CPUs the chain's wake-ups were counted on.
    pub chain_cpus: u32,
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
