//! A timer study as a Run record (`rtlab timers`, paper 000 §4.1 and paper 004): the study's
//! plan (each cell's share of the measuring time), the record from the cells the probe measured
//! (rows, what could not be measured, findings), and the change experiment's set-up and record.
//! Measuring is `rtlab_probe::timers`, the statistics `rtlab_analysis::timers`; this is the glue
//! between them that any caller (the CLI, a daemon) needs.

pub use crate::study_record::TimerStudyRequest;
use crate::study_record::{
    cell_duration, cell_ended_early, study_settings, timer_study_record, StudyOutcome,
};
use rtlab_analysis::timers::{change_findings, findings, judge_audit, timer_row, CellInput};
use rtlab_core::timer_audit::{AuditReport, AUDIT_SCHEMA};
use rtlab_core::timer_study::{TimerStudy, UnavailableCell};
use rtlab_core::{Nanos, RecordError, RunRecord};
use rtlab_probe::timers::change::{self, ChangeConfig, ChangeOutcome};
use rtlab_probe::timers::{RunningStudy, StudyConfig, StudyError, StudyResult, TimerClass};
use rtlab_sys::timer_apis::TimerApi;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The shortest interval a study measures.
pub const MIN_INTERVAL: Nanos = Nanos(10_000);

/// Why a study's record could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TimersError {
    /// An interval below [`MIN_INTERVAL`] (the caller's input).
    #[error("every interval must be at least 10us")]
    IntervalTooShort,
    #[error("the study's settings: {0}")]
    Settings(#[source] serde_json::Error),
    #[error("the study produced an invalid record: {0}")]
    Record(#[from] RecordError),
    /// An API name the study does not know (the caller's input, setting `apis`).
    #[error("unknown API '{0}' (expected {list})", list = rtlab_core::timer_study::TIMER_APIS.join(", "))]
    UnknownApi(String),
    /// The change experiment's other process needs root (`cpu_dma_latency`, another task's
    /// timer slack).
    #[error("the change experiment needs root: the other process holds {path} and writes this thread's /proc/TID/timerslack_ns", path = rtlab_sys::dma_latency::PATH)]
    NeedsRoot,
    #[error(transparent)]
    Study(#[from] StudyError),
    #[error(transparent)]
    Change(#[from] change::ChangeError),
    #[error("reading the online CPUs: {0}")]
    Cpus(#[source] std::io::Error),
}

impl TimersError {
    /// True when the request was at fault, not the system.
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            TimersError::IntervalTooShort | TimersError::UnknownApi(_)
        )
    }

    /// The setting an input error is about, for the caller to name.
    pub fn setting(&self) -> Option<&'static str> {
        match self {
            TimersError::IntervalTooShort => Some("intervals"),
            TimersError::UnknownApi(_) => Some("apis"),
            _ => None,
        }
    }
}

/// The APIs named (function names; `timerfd` means both its loops); none named: every one.
pub fn select_apis(names: &[String]) -> Result<Vec<TimerApi>, TimersError> {
    if let Some(unknown) = names
        .iter()
        .find(|name| !TimerApi::ALL.iter().any(|api| api.function() == *name))
    {
        return Err(TimersError::UnknownApi(unknown.clone()));
    }
    Ok(TimerApi::ALL
        .into_iter()
        .filter(|api| names.is_empty() || names.iter().any(|name| name == api.function()))
        .collect())
}

/// The CPU a study measures on when the caller names none: the last online one.
pub fn default_cpu() -> Result<usize, TimersError> {
    rtlab_sys::cpu::online_cpus()
        .map_err(TimersError::Cpus)?
        .last()
        .copied()
        .ok_or_else(|| TimersError::Cpus(std::io::Error::other("no online CPU")))
}

/// Measures every cell of `plan`, calling `progress` with the index of the cell under way every
/// `poll`, and returns the study's record.
pub fn run_study(
    plan: &StudyPlan,
    stop: Arc<AtomicBool>,
    poll: Duration,
    progress: &mut dyn FnMut(usize, Option<(Nanos, TimerApi, TimerClass)>),
    cmdline: Vec<String>,
) -> Result<RunRecord, TimersError> {
    let started = SystemTime::now();
    let began_ns = rtlab_sys::clock::monotonic_ns();
    let running = RunningStudy::start(plan.config.clone(), stop)?;
    while !running.is_finished() {
        std::thread::sleep(poll);
        let done = running.progress().0;
        progress(done, plan.config.cell(done));
    }
    let result = running.finish()?;
    let measured_ns = rtlab_sys::clock::monotonic_ns() - began_ns;
    study_record(plan, result, started, measured_ns, cmdline)
}

/// Paper 004's pair: `changer` is the command that starts the other process (the hidden
/// `rtlab timers-changer`); refused without root. Returns the experiment's record.
pub fn run_change_experiment(
    config: &ChangeConfig,
    mut changer: std::process::Command,
    stop: &Arc<AtomicBool>,
    cmdline: Vec<String>,
) -> Result<RunRecord, TimersError> {
    if std::fs::OpenOptions::new()
        .write(true)
        .open(rtlab_sys::dma_latency::PATH)
        .is_err()
    {
        return Err(TimersError::NeedsRoot);
    }
    rtlab_sys::load_syscalls::configure_load_command(&mut changer);
    let started = SystemTime::now();
    let began_ns = rtlab_sys::clock::monotonic_ns();
    let outcome = change::run(config, changer, stop)?;
    let measured_ns = rtlab_sys::clock::monotonic_ns() - began_ns;
    change_record(config, outcome, started, measured_ns, cmdline)
}

/// `rtlab timers --audit`: the settings that change everyone's timing, read and judged.
pub fn audit(cmdline: Vec<String>) -> AuditReport {
    let facts = rtlab_sys::timer_audit::collect();
    let items = judge_audit(&facts);
    let mut skipped = facts.skipped.clone();
    if !facts.as_root {
        skipped.push("not root: other processes' open files and timer slack are hidden, and debugfs (the fair server) is unreadable; run as root for the whole picture".to_owned());
    }
    skipped.push("what each cpu_dma_latency holder asked for: the kernel keeps it inside the open file and shows only the least of all requests (reading /dev/cpu_dma_latency)".to_owned());
    AuditReport {
        schema: AUDIT_SCHEMA.to_owned(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        cmdline,
        started_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        host: rtlab_sys::host::describe(None),
        items,
        skipped,
        facts,
    }
}

/// What to measure on Linux: the APIs by function name (see [`select_apis`]), the CPU `None`:
/// the last online one ([`default_cpu`]).
pub type StudyRequest = TimerStudyRequest<TimerClass>;

/// A study ready to start: the probe's configuration and what the plan had to change.
#[derive(Debug, Clone)]
pub struct StudyPlan {
    pub config: StudyConfig,
    pub warnings: Vec<String>,
}

impl StudyRequest {
    /// Splits the time over the cells; a cell gets at least five of its longest interval.
    pub fn plan(&self) -> Result<StudyPlan, TimersError> {
        let apis = select_apis(&self.apis)?;
        let cpu = match self.cpu {
            Some(cpu) => cpu,
            None => default_cpu()?,
        };
        if self
            .intervals
            .iter()
            .any(|interval| *interval < MIN_INTERVAL)
        {
            return Err(TimersError::IntervalTooShort);
        }
        let mut classes = self.classes.clone();
        classes.sort();
        classes.dedup();
        let mut config = StudyConfig {
            apis,
            classes,
            intervals: self.intervals.clone(),
            cell_duration: Nanos::ZERO,
            cpu,
        };
        let longest = self.intervals.iter().copied().max().unwrap_or(Nanos::ZERO);
        let (cell_duration, warning) =
            cell_duration(self.duration, config.cell_count() as u64, longest);
        config.cell_duration = cell_duration;
        let warnings = warning.into_iter().collect();
        Ok(StudyPlan { config, warnings })
    }
}

/// The study's Run record from what the probe measured (`measured_ns` of wall time from
/// `started`).
pub fn study_record(
    plan: &StudyPlan,
    result: StudyResult,
    started: SystemTime,
    measured_ns: u64,
    cmdline: Vec<String>,
) -> Result<RunRecord, TimersError> {
    let config = &plan.config;
    let mut warnings = plan.warnings.clone();
    warnings.extend(result.warnings);
    let mut study = TimerStudy {
        cpu: config.cpu as u32,
        ..TimerStudy::default()
    };
    let mut unavailable_reasons: Vec<(String, String, String, String)> = Vec::new();
    for cell in &result.cells {
        if let Some(reason) = &cell.unavailable {
            unavailable_reasons.push((
                cell.api.function().to_owned(),
                cell.api.mode().to_owned(),
                cell.class.name().to_owned(),
                reason.clone(),
            ));
            continue;
        }
        if let Some(error) = &cell.error {
            warnings.push(cell_ended_early!(cell, error));
        }
        study.rows.push(timer_row(&CellInput {
            api: cell.api.function(),
            mode: cell.api.mode(),
            class: cell.class.name(),
            policy: cell.policy.name(),
            priority: cell.policy.priority_or_nice(),
            timer_slack_ns: cell.timer_slack_ns,
            requested_ns: cell.requested_ns,
            asked_ns: cell.api.effective_request_ns(cell.requested_ns),
            intervals: &cell.intervals,
            reported_overruns: cell
                .api
                .reports_overruns()
                .then_some(cell.reported_overruns),
        }));
    }
    // One entry per (api, mode, class) and reason, not per interval.
    unavailable_reasons.dedup();
    for (api, mode, class, reason) in unavailable_reasons {
        let entry = UnavailableCell {
            api,
            mode,
            class: Some(class),
            reason,
        };
        if !study.unavailable.contains(&entry) {
            study.unavailable.push(entry);
        }
    }
    study.findings = findings(&study.rows);
    let settings = serde_json::json!({ "timers": study_settings!(config) });
    base_record(
        started,
        measured_ns,
        cmdline,
        settings,
        study,
        warnings,
        result.interrupted,
    )
}

/// The change experiment on `cpu` (its SCHED_FIFO companion on another online CPU), each
/// setting held for `hold`: the settings are the cpu_dma_latency steps this machine's idle
/// states make meaningful, and the timer-slack steps.
pub fn change_config(cpu: usize, hold: Nanos) -> ChangeConfig {
    let facts = rtlab_sys::timer_audit::collect();
    let latencies: Vec<u64> = facts
        .idle_states
        .iter()
        .filter(|state| !state.disabled)
        .map(|state| state.exit_latency_us)
        .collect();
    let rt_cpu = rtlab_sys::cpu::online_cpus()
        .unwrap_or_default()
        .into_iter()
        .find(|other| *other != cpu);
    ChangeConfig {
        settings: change::settings_for(&latencies),
        hold,
        sleep: Nanos::from_millis(1),
        cpu,
        rt_cpu,
    }
}

/// The change experiment's Run record.
pub fn change_record(
    config: &ChangeConfig,
    outcome: ChangeOutcome,
    started: SystemTime,
    measured_ns: u64,
    cmdline: Vec<String>,
) -> Result<RunRecord, TimersError> {
    let mut warnings = Vec::new();
    let restored = &outcome.experiment.restored;
    if restored.timer_slack_ns_after != restored.timer_slack_ns_before {
        warnings.push(format!(
            "the measuring thread's timer slack reads {} after restoring, not {}",
            Nanos(restored.timer_slack_ns_after),
            Nanos(restored.timer_slack_ns_before)
        ));
    }
    let study = TimerStudy {
        cpu: config.cpu as u32,
        findings: change_findings(&outcome.experiment),
        change_experiment: Some(outcome.experiment),
        ..TimerStudy::default()
    };
    let settings = serde_json::json!({
        "change_experiment": {
            "settings": config.settings.iter().map(|setting| setting.describe()).collect::<Vec<_>>(),
            "hold_ns": config.hold.0,
            "sleep_ns": config.sleep.0,
            "cpu": config.cpu,
        }
    });
    base_record(
        started,
        measured_ns,
        cmdline,
        settings,
        study,
        warnings,
        outcome.interrupted,
    )
}

fn base_record(
    started: SystemTime,
    duration_ns: u64,
    cmdline: Vec<String>,
    settings: serde_json::Value,
    study: TimerStudy,
    warnings: Vec<String>,
    interrupted: bool,
) -> Result<RunRecord, TimersError> {
    let outcome = StudyOutcome {
        started,
        duration_ns,
        cmdline,
        config: serde_json::from_value(settings).map_err(TimersError::Settings)?,
        study,
        warnings,
        interrupted,
    };
    Ok(timer_study_record(
        outcome,
        rtlab_sys::host::describe(None),
    )?)
}
