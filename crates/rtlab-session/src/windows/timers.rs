//! The timer study and the change experiment on Windows as library calls, each returning a Run
//! record whose `timers` part has the same types as on Linux.

use super::run::WindowsSessionError;
use crate::study_record::{
    cell_duration, cell_ended_early, study_settings, timer_study_record, StudyOutcome,
    TimerStudyRequest,
};
use rtlab_analysis::timers::windows::windows_findings;
use rtlab_analysis::timers::{timer_row, CellInput};
use rtlab_core::timer_audit::WindowsAudit;
use rtlab_core::timer_study::{
    ChangeExperiment, ChangeStep, DelayStats, Restoration, TimerStudy, UnavailableCell,
};
use rtlab_core::{LatencyHistogram, Nanos, RecordConfig, RunRecord};
use rtlab_probe::windows::change::{measure_sleeps, parse_answer};
use rtlab_probe::windows::timers::{
    RunningWindowsStudy, WindowsStudyConfig, WindowsTimerApi, WindowsTimerClass,
};
use rtlab_sys::windows::clock::monotonic_ns;
use std::io::{BufRead, Write};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// The study's settings.
#[derive(Clone, Debug)]
pub struct StudySettings {
    pub study: WindowsStudyConfig,
    /// Warnings the caller already has (a cell duration raised, …).
    pub warnings: Vec<String>,
    pub cmdline: Vec<String>,
}

/// What to measure on Windows: the APIs by function name (`Sleep`, `timeSetEvent`, …), the CPU
/// `None`: the last.
pub type WindowsStudyRequest = TimerStudyRequest<WindowsTimerClass>;

/// The shortest interval a Windows study measures.
const MIN_INTERVAL_NS: u64 = 100_000;

impl WindowsStudyRequest {
    /// Checks the request and splits the time over the cells; a cell gets at least five of its
    /// longest interval, and at least five milliseconds (whole-millisecond APIs round up).
    pub fn plan(&self, cmdline: Vec<String>) -> Result<StudySettings, WindowsSessionError> {
        let setting = |setting, message: String| WindowsSessionError::Setting { setting, message };
        let apis = if self.apis.is_empty() {
            WindowsTimerApi::ALL.to_vec()
        } else {
            if let Some(unknown) = self.apis.iter().find(|name| {
                !WindowsTimerApi::ALL
                    .iter()
                    .any(|api| api.function() == *name)
            }) {
                return Err(setting("apis", format!(
                    "unknown API '{unknown}' (expected Sleep, WaitForSingleObject, SetWaitableTimer or timeSetEvent)"
                )));
            }
            WindowsTimerApi::ALL
                .into_iter()
                .filter(|api| self.apis.iter().any(|name| name == api.function()))
                .collect()
        };
        if self
            .intervals
            .iter()
            .any(|interval| interval.as_u64() < MIN_INTERVAL_NS)
        {
            return Err(setting(
                "intervals",
                "every interval must be at least 100us".to_owned(),
            ));
        }
        if self.classes.is_empty() {
            return Err(setting("classes", "no class given".to_owned()));
        }
        let mut classes = self.classes.clone();
        classes.sort();
        classes.dedup();
        let mut config = WindowsStudyConfig {
            apis,
            classes,
            intervals: self.intervals.clone(),
            cell_duration: Nanos::ZERO,
            cpu: self.cpu.unwrap_or_else(super::last_cpu),
        };
        // Whole-millisecond APIs round an interval up to 1 ms at least.
        let longest = self.intervals.iter().copied().max().unwrap_or(Nanos::ZERO);
        let (cell_duration, warning) = cell_duration(
            self.duration,
            config.cell_count() as u64,
            longest.max(Nanos::from_millis(1)),
        );
        config.cell_duration = cell_duration;
        let warnings = warning.into_iter().collect();
        Ok(StudySettings {
            study: config,
            warnings,
            cmdline,
        })
    }
}

/// Who asked for the timer resolution cannot be read without administrator rights: where to
/// look instead.
const REQUESTERS: &str = "not readable without administrator rights: run `powercfg /energy /duration 10` as administrator and read 'Platform Timer Resolution: Outstanding Timer Request' in energy-report.html";

/// `rtlab timers --audit` on Windows: the timer resolution in force, its limits, the power plan.
pub fn audit() -> WindowsAudit {
    let facts = rtlab_sys::windows::host::windows_facts();
    WindowsAudit {
        version: facts.version,
        wine: facts.wine,
        timer_resolution_ns: facts.timer_resolution_ns,
        timer_resolution_finest_ns: facts.timer_resolution_finest_ns,
        timer_resolution_coarsest_ns: facts.timer_resolution_coarsest_ns,
        multimedia_period_range_ms: rtlab_sys::windows::resolution::multimedia_period_range_ms()
            .ok(),
        power_plan: facts.power_plan,
        requesters: REQUESTERS.to_owned(),
    }
}

fn record(
    started: std::time::SystemTime,
    duration_ns: u64,
    cmdline: Vec<String>,
    config: serde_json::Value,
    study: TimerStudy,
    mut warnings: Vec<String>,
    interrupted: bool,
) -> Result<RunRecord, WindowsSessionError> {
    let host = rtlab_sys::host::describe(None);
    warnings.extend(super::wine_warning(&host));
    let mut other = std::collections::BTreeMap::new();
    other.insert("timers".to_owned(), config);
    let outcome = StudyOutcome {
        started,
        duration_ns,
        cmdline,
        config: RecordConfig {
            other,
            ..RecordConfig::default()
        },
        study,
        warnings,
        interrupted,
    };
    Ok(timer_study_record(outcome, host)?)
}

/// Measures every cell (reporting `(done, total)` to `progress` about four times a second) and
/// returns the record.
pub fn timer_study(
    settings: StudySettings,
    stop: Arc<AtomicBool>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<RunRecord, WindowsSessionError> {
    let config = settings.study;
    let started = std::time::SystemTime::now();
    let began_ns = monotonic_ns();
    let total = config.cell_count();
    let running =
        RunningWindowsStudy::start(config.clone(), stop).map_err(WindowsSessionError::Study)?;
    while !running.is_finished() {
        std::thread::sleep(Duration::from_millis(250));
        progress(running.progress(), total);
    }
    let result = running.finish().map_err(WindowsSessionError::Study)?;
    let measured_ns = monotonic_ns() - began_ns;
    let mut warnings = settings.warnings;
    let mut study = TimerStudy {
        cpu: config.cpu as u32,
        ..TimerStudy::default()
    };
    let mut resolutions: Vec<String> = Vec::new();
    for cell in &result.cells {
        if let Some(reason) = &cell.unavailable {
            let entry = UnavailableCell {
                api: cell.api.function().to_owned(),
                mode: cell.api.mode().to_owned(),
                class: Some(cell.class.name().to_owned()),
                reason: reason.clone(),
            };
            if !study.unavailable.contains(&entry) {
                study.unavailable.push(entry);
            }
            continue;
        }
        if let Some(error) = &cell.error {
            warnings.push(cell_ended_early!(cell, error));
        }
        if let Some(resolution) = cell.resolution_in_force_ns {
            let text = format!("{} in {}", Nanos(resolution), cell.class.name());
            if !resolutions.contains(&text) {
                resolutions.push(text);
            }
        }
        study.rows.push(timer_row(&CellInput {
            api: cell.api.function(),
            mode: cell.api.mode(),
            class: cell.class.name(),
            policy: "NORMAL/NORMAL",
            priority: 8,
            timer_slack_ns: 0,
            requested_ns: cell.requested_ns,
            asked_ns: cell.asked_ns,
            intervals: &cell.intervals,
            reported_overruns: None,
        }));
    }
    study.findings = windows_findings(&study.rows);
    if !resolutions.is_empty() {
        study.findings.push(format!(
            "timer resolution in force while measuring (NtQueryTimerResolution): {}",
            resolutions.join(", ")
        ));
    }
    let config_json = study_settings!(&config);
    record(
        started,
        measured_ns,
        settings.cmdline,
        config_json,
        study,
        warnings,
        result.interrupted,
    )
}

/// The change experiment's settings.
#[derive(Clone, Debug)]
pub struct ChangeSettings {
    /// How long each setting is held.
    pub hold: Nanos,
    /// The periods the changer asks for in turn (after a first step with no request), ms.
    pub periods_ms: Vec<u32>,
    pub cmdline: Vec<String>,
}

fn delay_stats(values: &[u64]) -> DelayStats {
    let mut histogram = LatencyHistogram::new();
    for &value in values {
        histogram.record(value);
    }
    let count = histogram.count();
    DelayStats {
        count,
        mean_ns: if count == 0 { 0.0 } else { histogram.mean() },
        p50_ns: histogram.value_at_quantile(0.5),
        p99_ns: histogram.value_at_quantile(0.99),
        max_ns: if count == 0 { 0 } else { histogram.max() },
        hdr: histogram.to_base64().unwrap_or_default(),
    }
}

/// Paper 004's pair: `changer` is the other process (the hidden `rtlab timers-changer`, with
/// piped stdin and stdout); this process measures its Sleep(1) while the changer holds no
/// request, then each of `periods_ms` in turn. The changer is told to quit (and waited for)
/// whatever happens.
pub fn change_experiment(
    settings: &ChangeSettings,
    mut changer: std::process::Child,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<RunRecord, WindowsSessionError> {
    let started = std::time::SystemTime::now();
    let began_ns = monotonic_ns();
    let outcome = drive_changer(settings, &mut changer, stop, progress);
    if let Some(mut input) = changer.stdin.take() {
        let _ = writeln!(input, "quit");
    }
    let _ = changer.wait();
    let steps = outcome?;
    let interrupted = stop.load(std::sync::atomic::Ordering::SeqCst);
    let restored_ns = rtlab_sys::windows::resolution::query()
        .ok()
        .map(|value| u64::from(value.current_100ns) * 100);
    let experiment = ChangeExperiment {
        hold_ns: settings.hold.as_u64(),
        sleep_ns: 1_000_000,
        policy: "NORMAL/NORMAL".to_owned(),
        steps,
        restored: Restoration {
            timer_slack_ns_before: 0,
            timer_slack_ns_after: 0,
            ..Restoration::default()
        },
    };
    let mut study = TimerStudy {
        change_experiment: Some(experiment),
        ..TimerStudy::default()
    };
    if let Some(restored) = restored_ns {
        study.findings.push(format!(
            "after the changer quit, the resolution in force was {} (NtQueryTimerResolution)",
            Nanos(restored)
        ));
    }
    record(
        started,
        monotonic_ns() - began_ns,
        settings.cmdline.clone(),
        serde_json::json!({
            "change_experiment": {
                "hold_ns": settings.hold.as_u64(),
                "periods_ms": settings.periods_ms,
            }
        }),
        study,
        Vec::new(),
        interrupted,
    )
}

fn drive_changer(
    settings: &ChangeSettings,
    changer: &mut std::process::Child,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<ChangeStep>, WindowsSessionError> {
    let changer_error = |what: String| WindowsSessionError::Study(std::io::Error::other(what));
    let mut input = changer
        .stdin
        .take()
        .ok_or_else(|| changer_error("the changer has no stdin pipe".to_owned()))?;
    let output = changer
        .stdout
        .take()
        .ok_or_else(|| changer_error("the changer has no stdout pipe".to_owned()))?;
    let mut answers = std::io::BufReader::new(output);
    let commands: Vec<(String, String)> =
        std::iter::once(("none".to_owned(), "no request".to_owned()))
            .chain(settings.periods_ms.iter().map(|period| {
                (
                    format!("period {period}"),
                    format!("timeBeginPeriod({period})"),
                )
            }))
            .collect();
    let mut steps = Vec::with_capacity(commands.len());
    for (index, (command, setting)) in commands.iter().enumerate() {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        progress(index, commands.len());
        writeln!(input, "{command}")
            .and_then(|()| input.flush())
            .map_err(|error| changer_error(format!("writing to the changer: {error}")))?;
        let mut answer = String::new();
        answers
            .read_line(&mut answer)
            .map_err(|error| changer_error(format!("reading the changer's answer: {error}")))?;
        if answer.is_empty() {
            return Err(changer_error("the changer exited".to_owned()));
        }
        let in_force = parse_answer(&answer).map_err(changer_error)?;
        let sleeps = measure_sleeps(1, settings.hold, stop);
        let wakeups: Vec<u64> = sleeps
            .iter()
            .map(|took| took.saturating_sub(1_000_000))
            .collect();
        let setting = match in_force {
            Some(resolution) => format!("{setting}, in force {}", Nanos(resolution)),
            None => setting.clone(),
        };
        steps.push(ChangeStep {
            setting,
            timer_slack_ns: 0,
            wakeup: delay_stats(&wakeups),
            sleep: delay_stats(&sleeps),
            ..ChangeStep::default()
        });
    }
    progress(commands.len(), commands.len());
    let _ = writeln!(input, "quit");
    Ok(steps)
}
