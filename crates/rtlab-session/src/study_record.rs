//! The Run record of a timer study or a change experiment, the same on Linux and on Windows: no
//! series, the study in `timers`, the machine's host and a warning when it is a virtual machine.
//! Also the study's request, likewise the same on both.

use rtlab_core::timer_study::TimerStudy;
use rtlab_core::{Host, RecordConfig, RecordError, RecordHeader, RunRecord};
use std::time::SystemTime;

/// What to measure: every API × class × interval, `duration` split evenly over the cells. The
/// same request on Linux and on Windows, over each platform's own class type.
#[derive(Clone, Debug)]
pub struct TimerStudyRequest<Class> {
    /// The APIs by function name; empty: every one.
    pub apis: Vec<String>,
    pub classes: Vec<Class>,
    pub intervals: Vec<rtlab_core::Nanos>,
    pub duration: rtlab_core::Nanos,
    /// The CPU to pin the measuring threads to; `None`: the last online one.
    pub cpu: Option<usize>,
}

/// What a study measured, for its record.
pub(crate) struct StudyOutcome {
    pub started: SystemTime,
    pub duration_ns: u64,
    pub cmdline: Vec<String>,
    pub config: RecordConfig,
    pub study: TimerStudy,
    pub warnings: Vec<String>,
    pub interrupted: bool,
}

/// The validated record of `outcome` measured on `host`.
pub(crate) fn timer_study_record(
    outcome: StudyOutcome,
    host: Host,
) -> Result<RunRecord, RecordError> {
    let mut warnings = outcome.warnings;
    if host.virtualization != "none" {
        warnings.push(format!(
            "running in a virtual machine ({}): the hypervisor's own timers and descheduling show up in every API",
            host.virtualization
        ));
    }
    let header = RecordHeader {
        id: uuid::Uuid::new_v4().to_string(),
        started_at: humantime::format_rfc3339_seconds(outcome.started).to_string(),
        duration_ns: outcome.duration_ns,
        cmdline: outcome.cmdline,
        host,
    };
    let mut record = RunRecord::with_header(header, outcome.config, Vec::new());
    record.warnings = warnings;
    record.interrupted = outcome.interrupted;
    record.timers = Some(outcome.study);
    record.validate()?;
    Ok(record)
}

/// Each of `cells` cells' share of `duration`, raised to five of the `longest` interval when
/// shorter; a raised share comes with the warning that says so.
pub(crate) fn cell_duration(
    duration: rtlab_core::Nanos,
    cells: u64,
    longest: rtlab_core::Nanos,
) -> (rtlab_core::Nanos, Option<String>) {
    use rtlab_core::Nanos;
    let share = duration.0 / cells.max(1);
    if share >= 5 * longest.0 {
        return (Nanos(share), None);
    }
    let raised = Nanos(5 * longest.0);
    let warning = format!(
        "a measuring time of {duration} gives each of the {cells} cells less than 5 intervals of {longest}: each cell measured {raised} instead"
    );
    (raised, Some(warning))
}

/// A study's settings as its record keeps them (under `timers`), the same keys on Linux and on
/// Windows: the APIs as `function/mode`, the classes, the intervals, each cell's share of the
/// measuring time and the CPU. `$config` is a Linux `StudyConfig` or a Windows
/// `WindowsStudyConfig`: the same fields and methods over each platform's own API and class
/// types, which is why this is a macro and not a function.
macro_rules! study_settings {
    ($config:expr) => {{
        let config = $config;
        serde_json::json!({
            "apis": config.apis.iter().map(|api| format!("{}/{}", api.function(), api.mode())).collect::<Vec<_>>(),
            "classes": config.classes.iter().map(|class| class.name()).collect::<Vec<_>>(),
            "intervals_ns": config.intervals.iter().map(|interval| interval.0).collect::<Vec<_>>(),
            "cell_duration_ns": config.cell_duration.0,
            "cpu": config.cpu,
        })
    }};
}
pub(crate) use study_settings;

/// The warning for a cell whose measuring stopped with `$error`: `API (mode) in CLASS at
/// INTERVAL: ended early: …`. `$cell` is a Linux or a Windows study cell (the same fields over
/// each platform's types, as for [`study_settings`]).
macro_rules! cell_ended_early {
    ($cell:expr, $error:expr) => {{
        let cell = $cell;
        format!(
            "{} ({}) in {} at {}: ended early: {}",
            cell.api.function(),
            cell.api.mode(),
            cell.class.name(),
            rtlab_core::Nanos(cell.requested_ns),
            $error
        )
    }};
}
pub(crate) use cell_ended_early;
