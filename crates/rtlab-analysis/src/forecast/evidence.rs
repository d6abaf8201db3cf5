//! What a forecast reads: the buffer configuration it judges, the latency histogram with its
//! tail projection, and (for the response model) the probe's series. A module of its own because
//! every model (`model.rs`, `backlog.rs`, `response.rs`) takes these and `model.rs` calls the
//! others: shared types below all three.

pub use crate::application::Counting;
use crate::classes::ApplicationClass;
use rtlab_core::{LatencyHistogram, Nanos};
use serde::Serialize;

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
    pub probe: Option<&'a ProbeEvidence>,
    /// Threads in the application's wake-up chain, each on its own CPU (JACK: driver → client
    /// = 2; a thread woken by its own timer = 1). Only the response model reads it.
    pub chain: u32,
    /// How the application counts the failures one stall costs it. Only the response model
    /// reads it.
    pub counting: Counting,
}

impl<'a> LatencyEvidence<'a> {
    /// Evidence of a histogram alone (no tail, no probe series, a chain of one).
    pub fn of_histogram(histogram: &'a LatencyHistogram) -> LatencyEvidence<'a> {
        LatencyEvidence {
            histogram,
            tail: None,
            probe: None,
            chain: 1,
            counting: Counting::Restart,
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

/// What the probe measured, pooled over CPUs, for the response model.
#[derive(Clone, Debug)]
pub struct ProbeEvidence {
    /// Wake-up latencies as measured (missed periods not restored: one sample per stall).
    pub wakeup: LatencyHistogram,
    /// Probe periods covered: samples plus the periods the probe skipped.
    pub trials: u64,
    /// CPUs pooled.
    pub cpus: u32,
    /// The probe's wake-up period.
    pub period: Nanos,
    /// The response series and the work per wake-up it was measured with.
    pub response: Option<ComputeEvidence>,
    /// The largest wake-up samples of every CPU with their times (the series' peaks): which
    /// stalls of different CPUs were one stall. `None` when the record has no peaks.
    pub late: Option<LateSamples>,
}

/// Wake-up samples with their times, from every CPU's kept peaks.
#[derive(Clone, Debug, Default)]
pub struct LateSamples {
    /// `(intended wake-up since the start of measurement, latency)`, in ns, of every CPU: the
    /// stall behind a sample covered `[at, at + latency]`.
    pub samples: Vec<(u64, u64)>,
    /// Every sample above this latency is in `samples` (the peaks kept all of them).
    pub complete_above_ns: u64,
}

/// The `response` series of a probe that computed after each wake-up.
#[derive(Clone, Debug)]
pub struct ComputeEvidence {
    /// Deadline → end of the work, per activation (missed periods not restored).
    pub histogram: LatencyHistogram,
    /// Work per wake-up, `c_p`.
    pub compute: Nanos,
}
