//! One Windows run as a library call: the probe's threads per class → the Run record.

use crate::run_warnings::{short_run_warning, vm_warning};
use crate::{attach_tails, Observer, SessionProgress};
use rtlab_analysis::tail::UsageModel;
use rtlab_core::{HistogramError, Metric, RecordConfig, RecordError, RecordHeader, RunRecord};
use rtlab_probe::windows::run::{
    RunningWindowsProbe, WindowsProbeConfig, WindowsProbeError, WindowsProbeResult,
};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Everything a Windows run needs.
#[derive(Clone, Debug)]
pub struct WindowsRunConfig {
    pub probe: WindowsProbeConfig,
    /// The command line that asked for the run (kept in the record to repeat it).
    pub cmdline: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum WindowsSessionError {
    #[error(transparent)]
    Probe(#[from] WindowsProbeError),
    #[error("encoding a histogram: {0}")]
    Histogram(#[from] HistogramError),
    #[error("the run produced an invalid record: {0}")]
    Record(#[from] RecordError),
    #[error("{0}")]
    Study(#[source] std::io::Error),
    /// A setting the caller gave that cannot be measured (`apis`, `intervals`, `classes`).
    #[error("{message}")]
    Setting {
        setting: &'static str,
        message: String,
    },
}

impl WindowsSessionError {
    /// True when the configuration was at fault (the caller's input), not the system.
    pub fn is_input(&self) -> bool {
        match self {
            WindowsSessionError::Probe(error) => error.is_input(),
            WindowsSessionError::Study(error) => error.kind() == std::io::ErrorKind::InvalidInput,
            WindowsSessionError::Setting { .. } => true,
            _ => false,
        }
    }

    /// The setting an input error is about (`classes`, `period`, `cpu`, `apis`, …), for the
    /// caller to name (the CLI names its flag).
    pub fn setting(&self) -> Option<&'static str> {
        match self {
            WindowsSessionError::Probe(WindowsProbeError::NoClasses) => Some("classes"),
            WindowsSessionError::Probe(WindowsProbeError::PeriodTooShort(_)) => Some("period"),
            WindowsSessionError::Probe(WindowsProbeError::NoSuchCpu { .. }) => Some("cpu"),
            WindowsSessionError::Setting { setting, .. } => Some(setting),
            _ => None,
        }
    }
}

/// One line on stderr when measuring starts and ends (only on a terminal): an observer that calls
/// its function once, at the first progress report (none: it stays silent).
pub struct AnnounceOnce<F: FnMut()>(pub Option<F>);

impl<F: FnMut()> Observer for AnnounceOnce<F> {
    fn progress(&mut self, _progress: &SessionProgress) {
        if let Some(mut announce) = self.0.take() {
            announce();
        }
    }
}

/// Runs the probe until its end (or `stop`), reporting to `observer`, and returns the validated
/// record with its tails.
pub fn run(
    config: &WindowsRunConfig,
    stop: Arc<AtomicBool>,
    observer: &mut dyn Observer,
) -> Result<RunRecord, WindowsSessionError> {
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let probe = RunningWindowsProbe::start(config.probe.clone(), stop)?;
    let poll = observer.poll_interval();
    let warmup_ns = config.probe.warmup.as_u64();
    while !probe.is_finished() {
        std::thread::sleep(poll);
        let (elapsed_ns, total_ns) = probe.elapsed();
        let progress = probe.progress();
        observer.progress(&SessionProgress {
            total_ns,
            elapsed_ns,
            warming_up: elapsed_ns < warmup_ns,
            samples: progress.iter().map(|(_, samples, _)| samples).sum(),
            max_wakeup_ns: progress.iter().map(|(_, _, max)| *max).max().unwrap_or(0),
        });
    }
    observer.measured();
    let result = probe.finish()?;
    let mut record = build(config, result, started_at)?;
    attach_tails(&mut record, &UsageModel::CONTINUOUS, true);
    record.validate()?;
    Ok(record)
}

/// The record of one probe run, validated.
fn build(
    config: &WindowsRunConfig,
    result: WindowsProbeResult,
    started_at: String,
) -> Result<RunRecord, WindowsSessionError> {
    let probe = &config.probe;
    let mut warnings = result.warnings;
    let period_ns = result.period.as_u64();
    let mut classes: Vec<String> = Vec::new();
    let mut series = Vec::with_capacity(result.series.len());
    for measured in result.series {
        let class = measured.class.name();
        if !classes.iter().any(|known| known == class) {
            classes.push(class.to_owned());
        }
        if measured.missed > 0 && measured.metric != Metric::Interval {
            warnings.push(format!(
                "{class}/{}@{}: {} periods had no wake-up at all because an earlier one was so late",
                measured.metric.as_str(),
                measured.cpu,
                measured.missed
            ));
        }
        series.push(RunRecord::series_from_histogram(
            measured.metric,
            class,
            measured.cpu as u32,
            &measured.policy,
            measured.priority,
            period_ns,
            &measured.histogram,
            measured.missed,
            0,
            measured.max_per_second,
            measured.peaks,
        )?);
    }
    let host = rtlab_sys::host::describe(None);
    warnings.extend(super::wine_warning(&host));
    warnings.extend(vm_warning(&host));
    warnings.extend(short_run_warning(result.measured_ns));
    let mut other = std::collections::BTreeMap::new();
    other.insert(
        "timer".to_owned(),
        serde_json::Value::String(
            "CreateWaitableTimerExW(HIGH_RESOLUTION), absolute QueryPerformanceCounter deadlines"
                .to_owned(),
        ),
    );
    let mut record = RunRecord::with_header(
        RecordHeader {
            id: uuid::Uuid::new_v4().to_string(),
            started_at,
            duration_ns: result.measured_ns,
            cmdline: config.cmdline.clone(),
            host,
        },
        RecordConfig {
            cpus: vec![probe.cpu],
            classes,
            period_ns: Some(period_ns),
            duration_ns: Some(probe.duration.as_u64()),
            warmup_ns: Some(probe.warmup.as_u64()),
            handoff: Some(false),
            keep_peaks: Some(probe.peaks_per_series),
            other,
            ..RecordConfig::default()
        },
        series,
    );
    record.warnings = warnings;
    record.interrupted = result.interrupted;
    record.validate()?;
    Ok(record)
}
