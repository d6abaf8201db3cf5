//! `rtlab forecast --trace`'s answer as plain data: the thread forecast for, one row per
//! buffering (`forecast::trace_rates` with its words), the periodic interferers among its
//! culprits, the warnings. rtlab-trace's `forecast` fills it from a trace's analysis,
//! rtlab-render's `trace_forecast` writes it out, `--json` serialises it.

use crate::forecast::TraceRateRow;
use crate::interference::PeriodicInterferer;
use serde::Serialize;

/// The `schema` of `rtlab forecast --trace --json`.
pub const FORECAST_TRACE_SCHEMA: &str = "rtlab.forecast-trace/1";

/// The rule a row's count follows, in the JSON and the docs.
pub const RULE: &str = "each late activation (work ended after the next period began) or gap without activation in the trace is one glitch at the recorded buffering (2 buffers of the detected period); at n buffers of t' it is one when its response plus the extra compute c·(t'/t − 1) exceeds (n − 1)·t'";

/// The thread forecast for.
#[derive(Clone, Debug, Serialize)]
pub struct ForecastThread {
    pub tid: i32,
    pub name: String,
    pub policy: String,
    pub priority: i32,
    pub period_ns: u64,
    pub activations: u64,
    pub compute_mean_ns: u64,
    pub late_activations: u64,
    pub missed_periods: u64,
}

/// One buffering's forecast.
#[derive(Debug, Serialize)]
pub struct ForecastRow {
    #[serde(flatten)]
    pub rate: TraceRateRow,
    /// The period in frames, with `--rate`.
    pub frames: Option<u64>,
    /// This row is the recorded buffering.
    pub recorded: bool,
    pub words: String,
}

/// The whole answer (`--json`'s body).
#[derive(Debug, Serialize)]
pub struct TraceForecast {
    pub source: String,
    /// The trace's first and last event (the recording's clock: CLOCK_MONOTONIC for `rtlab
    /// trace record`).
    pub first_ns: u64,
    pub last_ns: u64,
    pub duration_ns: u64,
    pub sample_rate: Option<u32>,
    pub thread: ForecastThread,
    /// Late activations and gaps of the thread listed in the trace analysis.
    pub glitches_listed: u64,
    pub rule: &'static str,
    pub rows: Vec<ForecastRow>,
    /// Periodic interferers among the culprits of the thread's late activations (issue 35).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub periodic: Vec<PeriodicFound>,
    pub warnings: Vec<String>,
}

/// A periodic interferer with its sentence.
#[derive(Debug, Serialize)]
pub struct PeriodicFound {
    #[serde(flatten)]
    pub interferer: PeriodicInterferer,
    pub text: String,
}
