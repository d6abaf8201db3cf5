//! A workload run as a Run record: per thread a `wakeup` series (release → start) and a
//! `response` series (release → completion), labelled with the thread's name as their class, so
//! `rtlab show`, `compare` and `forecast --series NAME/wakeup` read them like any run; and the
//! counted events in the record's `workload` part.

use crate::model::Workload;
use crate::runner::RunResult;
use rtlab_core::{
    DeviceOutcome, HistogramError, Metric, RecordConfig, RecordError, RunRecord, ThreadOutcome,
    WorkloadOutcome,
};

#[derive(Debug, thiserror::Error)]
pub enum RecordBuildError {
    #[error("encoding a histogram: {0}")]
    Histogram(#[from] HistogramError),
    #[error("the workload's record does not validate: {0}")]
    Invalid(#[from] RecordError),
}

/// Where the workload came from, for the record.
#[derive(Clone, Debug)]
pub struct Source {
    pub path: String,
    pub format: String,
    pub cmdline: Vec<String>,
}

/// Builds the record of one run.
pub fn build(
    workload: &Workload,
    result: &RunResult,
    source: &Source,
) -> Result<RunRecord, RecordBuildError> {
    let mut series = Vec::new();
    let mut threads = Vec::new();
    for (index, thread) in result.threads.iter().enumerate() {
        let spec = &workload.threads[index];
        let cpu = spec.cpus.first().copied().unwrap_or(0) as u32;
        let period = workload.nominal_period(index).0.max(1);
        let policy = if spec.reserve.is_some() {
            "reservation"
        } else {
            thread.policy.name()
        };
        // A thread that ran has a wake-up and a response series (one that never ran, none).
        if thread.activations > 0 {
            let measured = [
                (
                    Metric::Wakeup,
                    &thread.wakeup,
                    thread.wakeup_max_per_second.clone(),
                ),
                (Metric::Response, &thread.response, Vec::new()),
            ];
            for (metric, histogram, max_per_second) in measured {
                series.push(RunRecord::series_from_histogram(
                    metric,
                    &thread.name,
                    cpu,
                    policy,
                    thread.policy.priority_or_nice(),
                    period,
                    histogram,
                    0,
                    0,
                    max_per_second,
                    Vec::new(),
                )?);
            }
        }
        threads.push(ThreadOutcome {
            name: thread.name.clone(),
            scheduling: thread.scheduling.clone(),
            activations: thread.activations,
            deadline_misses: thread.deadline_misses,
            starvations: thread.starvations,
            cpu_time_ns: thread.cpu_time_ns,
            deadline_miss_events: thread.deadline_miss_events.clone(),
            starvation_events: thread.starvation_events.clone(),
        });
    }
    let devices = result
        .devices
        .iter()
        .map(|device| DeviceOutcome {
            name: device.name.clone(),
            buffer_period_ns: device.buffer_period.0,
            buffers: device.buffers,
            periods: device.periods,
            underruns: device.underruns,
            underrun_events: device.underrun_events.clone(),
        })
        .collect();
    let mut warnings = result.warnings.clone();
    if series.is_empty() {
        warnings.push("no thread completed an activation".to_owned());
    }
    let mut record = RunRecord::new(
        &uuid::Uuid::new_v4().to_string(),
        &humantime::format_rfc3339_seconds(result.started).to_string(),
        result.duration.0,
        series,
    );
    record.cmdline = source.cmdline.clone();
    record.host = rtlab_sys::host::describe(None);
    record.config = RecordConfig {
        duration_ns: Some(result.duration.0),
        ..RecordConfig::default()
    };
    record.load = result.load.clone();
    record.warnings = warnings;
    record.interrupted = result.interrupted;
    record.workload = Some(WorkloadOutcome {
        name: workload.name.clone(),
        source: source.path.clone(),
        format: source.format.clone(),
        threads,
        devices,
        explained: result.explained.clone(),
    });
    if !record.series.is_empty() {
        record.validate()?;
    }
    Ok(record)
}
