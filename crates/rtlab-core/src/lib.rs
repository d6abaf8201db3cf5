//! rtlab-core: the vocabulary every rtlab crate shares.
//!
//! Everything that measures produces a [`RunRecord`]; everything that analyses consumes one. Keeping
//! that record, its units ([`Nanos`]) and its histogram ([`LatencyHistogram`]) in one small crate with
//! no system dependencies is what lets the probe, the tracer, the analyses and the store evolve
//! independently.

pub mod export;
pub mod histogram;
pub mod record;
pub mod rpc;
pub mod units;

pub use histogram::{HistogramError, LatencyHistogram, Summary, PERCENTILE_KEYS};
pub use record::{
    Cause, CauseKind, Episode, Host, Metric, Peak, RecordError, RunRecord, Segment, Series,
    RUN_SCHEMA,
};
pub use units::{parse_duration, Nanos, UnitError};
