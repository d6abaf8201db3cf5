//! The Run record of a timer study or a change experiment, the same on Linux and on Windows: no
//! series, the study in `timers`, the machine's host and a warning when it is a virtual machine.

use rtlab_core::timer_study::TimerStudy;
use rtlab_core::{Host, RecordConfig, RecordError, RecordHeader, RunRecord};
use std::time::SystemTime;

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
