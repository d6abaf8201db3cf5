//! rtlab-core: the vocabulary every rtlab crate shares.
//!
//! Everything that measures produces a [`RunRecord`]; everything that analyses consumes one. Keeping
//! that record, its units ([`Nanos`]) and its histogram ([`LatencyHistogram`]) in one small crate with
//! no system dependencies is what lets the probe, the tracer, the analyses and the store evolve
//! independently.

pub mod already_reserved;
pub mod apptrace_report;
pub mod apptrace_timeline;
pub mod auto_plan;
pub mod buffer_experiment;
pub mod cause;
pub mod cpuidle;
pub mod enforce_repair;
pub mod error_chain;
pub mod export;
pub mod header;
pub mod histogram;
pub mod label;
pub mod metric;
pub mod packed;
pub mod peak;
pub mod pipewire_count;
pub mod plan_report;
pub mod record;
pub mod recorder;
pub mod rpc;
pub mod rt_high_series;
pub mod run_conditions;
pub mod run_config;
pub mod run_listing;
pub mod run_load;
pub mod run_tail;
pub mod run_workload;
pub mod sample_histogram;
pub mod sched_policy;
pub mod text;
pub mod time_value;
pub mod timer_audit;
pub mod timer_change;
pub mod timer_study;
pub mod trace_record;
pub mod tracepoints;
pub mod tune_profile;
pub mod tune_report;
pub mod units;
pub mod watch_summary;

pub use header::OutputHeader;
pub use histogram::{HistogramError, LatencyHistogram, Summary, PERCENTILE_KEYS};
pub use label::{write_late_marker, SeriesLabel, LATE_MARKER_PREFIX};
pub use record::{
    Cause, CauseKind, Episode, Host, Metric, Peak, RecordError, RecordHeader, RunRecord, Segment,
    Series, WindowsHost, RUN_SCHEMA,
};
pub use rt_high_series::rt_high_wakeup_series;
pub use run_conditions::RunConditions;
pub use run_config::{
    BufferExperiment, ExplainRecorder, ExplainSettings, ExplainTrace, ImportSource, RecordConfig,
    ThresholdKind, UnderrunCount,
};
pub use run_load::{
    CommandRun, CompetitorEntry, CompetitorRun, Load, LoadProfile, LoadUsage, StressorRun,
};
pub use run_tail::{EstimateValue, FitSummary, Tail, TailFit, TailUsage, WindowEstimate, Windows};
pub use run_workload::{
    DeviceOutcome, ExplainedEvent, LatenessKind, LatenessPart, ThreadAccount, ThreadOutcome,
    WorkloadEvent, WorkloadOutcome,
};
pub use sample_histogram::SamplePathHistogram;
pub use timer_study::TimerStudy;
pub use units::{parse_duration, Nanos, UnitError};

/// True when `cause` is a Run record that does not parse or validate: the user's file is at
/// fault, not the system.
pub fn is_input_error(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause.downcast_ref::<RecordError>().is_some()
}
