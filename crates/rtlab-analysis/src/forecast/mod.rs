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
//!
//! One module per job: `evidence.rs` (what a forecast reads: the buffering, the histogram, the
//! [`TailModel`] a projection plugs in, the probe's series), `outcome.rs` (what it gives: the
//! [`Forecast`], its basis and Poisson intervals), `model.rs` (the model, [`forecast`] of one
//! configuration), `backlog.rs` and `response.rs` (the other models), `buffers.rs` (tables over
//! buffer counts, least buffering for a target), `verdict.rs` (suitable or not, per application
//! class), `selection.rs` (which series of a record a forecast reads), `words.rs` (the sentences
//! the JSON carries), `trace_rate.rs` (the forecast from an application's own trace: its recorded
//! response times at other bufferings).

mod backlog;
mod buffers;
mod evidence;
mod model;
mod outcome;
mod response;
mod selection;
#[cfg(test)]
mod tests;
mod trace_rate;
mod verdict;
mod words;

pub use backlog::{expected_underruns_per_period, per_period_underruns, underruns_after_stall};
pub use buffers::{buffer_table, default_periods, least_buffering};
pub use evidence::{
    BufferConfig, ComputeEvidence, Counting, Exceedance, LateSamples, LatencyEvidence,
    ProbeEvidence, TailModel,
};
pub use model::{decide, forecast, Decision};
pub use outcome::{
    poisson_interval, zero_events_upper_bound, Basis, Forecast, ForecastError, Model,
    ResponseTerms, CONFIDENCE,
};
pub use response::response_rate;
pub use selection::{
    add_missed_periods, probe_evidence, select_series, SelectionError, SeriesSelection,
};
pub use trace_rate::{
    describe_trace_rate, glitch_threshold_ns, trace_rates, TraceBuffering, TraceRateError,
    TraceRateRow, TraceResponses,
};
pub use verdict::{verdict_kind, VerdictKind};
pub use words::{describe_mttf, describe_seconds, model_description, verdict, Verdict};
