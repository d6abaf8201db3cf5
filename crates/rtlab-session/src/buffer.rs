//! The buffer experiment as a run: a producer of the class under test against a virtual device
//! (`rtlab_probe::buffer_experiment`), with the producer's wake-up latencies as a Run record and
//! the real underrun counts in its `config`, so a forecast can be compared with what happened.

use rtlab_core::{
    BufferExperiment, HistogramError, Metric, RecordConfig, RecordError, RecordHeader, RunRecord,
    UnderrunCount,
};
pub use rtlab_probe::buffer_experiment::ExperimentResult;
use rtlab_probe::buffer_experiment::{run as run_experiment, ExperimentConfig, ExperimentError};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum BufferExperimentError {
    #[error(transparent)]
    Experiment(#[from] ExperimentError),
    #[error("encoding the wake-up histogram: {0}")]
    Histogram(#[from] HistogramError),
    #[error("the experiment's record does not validate: {0}")]
    Record(#[from] RecordError),
}

impl BufferExperimentError {
    /// True when the configuration was at fault, not the system.
    pub fn is_input(&self) -> bool {
        matches!(self, BufferExperimentError::Experiment(error) if !is_system(error))
    }
}

fn is_system(error: &ExperimentError) -> bool {
    matches!(
        error,
        ExperimentError::Policy { .. }
            | ExperimentError::Pin { .. }
            | ExperimentError::Spawn(_)
            | ExperimentError::Panicked
    )
}

/// Runs the experiment until its end or `stop`, and returns its record with the raw result.
pub fn run(
    config: &ExperimentConfig,
    stop: &Arc<AtomicBool>,
    cmdline: Vec<String>,
) -> Result<(RunRecord, ExperimentResult), BufferExperimentError> {
    let started = std::time::SystemTime::now();
    let result = run_experiment(config, stop)?;
    let class = if config.producer_policy.is_realtime() {
        "rt-high"
    } else {
        "normal"
    };
    let period_ns = config.buffer_period.as_u64();
    let series = RunRecord::series_from_histogram(
        Metric::Wakeup,
        class,
        config.producer_cpu.unwrap_or(0) as u32,
        result.producer_policy.name(),
        result.producer_policy.priority_or_nice(),
        period_ns,
        &result.wakeup,
        0,
        0,
        result.max_per_second.clone(),
        Vec::new(),
    )?;
    let underruns: BTreeMap<u32, UnderrunCount> = result
        .underruns
        .iter()
        .map(|&(buffers, checked, underruns)| (buffers, UnderrunCount { checked, underruns }))
        .collect();
    let mut warnings = Vec::new();
    if !result.device_realtime {
        warnings.push("the virtual device could not run SCHED_FIFO (not root): it judged by completion times, so counts stay exact, but it may have fallen behind".to_owned());
    }
    if result.unchecked > 0 {
        warnings.push(format!(
            "{} buffers could not be checked: the device fell a whole ring behind",
            result.unchecked
        ));
    }
    let mut record = RunRecord::with_header(
        RecordHeader {
            id: format!(
                "bufexp-{}",
                started
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|elapsed| elapsed.as_nanos())
                    .unwrap_or(0)
            ),
            started_at: humantime::format_rfc3339_seconds(started).to_string(),
            duration_ns: result.periods * period_ns,
            cmdline,
            host: rtlab_sys::host::describe(None),
        },
        RecordConfig {
            buffer_experiment: Some(BufferExperiment {
                buffer_period_ns: period_ns,
                compute_ns: config.compute.as_u64(),
                producer_policy: result.producer_policy.name().to_owned(),
                producer_priority: result.producer_policy.priority_or_nice(),
                periods: result.periods,
                underruns,
            }),
            ..RecordConfig::default()
        },
        vec![series],
    );
    record.warnings = warnings;
    record.interrupted = result.interrupted;
    record.validate()?;
    Ok((record, result))
}
