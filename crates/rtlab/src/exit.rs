//! The exit-code contract and the one place errors are printed and mapped to codes.
//!
//! 0 ok, 1 a check or verdict failed, 2 usage or input error, 3 measurement or system error,
//! 130 interrupted (SIGINT/SIGTERM; the partial result was still written). A broken pipe exits
//! quietly with 0. Library errors are mapped here by kind, so commands just use `?`.

use std::fmt::Display;
use std::process::ExitCode;

pub const CHECK_FAILED: u8 = 1;
pub const USAGE_OR_INPUT: u8 = 2;
pub const SYSTEM: u8 = 3;
pub const INTERRUPTED: u8 = 130;

/// An error caused by what the user gave us (a flag, a file): exit code 2.
#[derive(Debug)]
pub struct InputError(pub String);

impl Display for InputError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

/// Wraps anything displayable as an input error (exit code 2).
pub fn input(error: impl Display) -> anyhow::Error {
    anyhow::Error::new(InputError(error.to_string()))
}

/// 130 when the run was interrupted, else 0.
pub fn finished(interrupted: bool) -> ExitCode {
    if interrupted {
        ExitCode::from(INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    }
}

/// 0 when the check passed, else 1.
pub fn checked(passed: bool) -> ExitCode {
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(CHECK_FAILED)
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| {
            io.kind() == std::io::ErrorKind::BrokenPipe
                    // Windows: ERROR_NO_DATA maps to BrokenPipe; a reader that went away can
                    // also give ERROR_PIPE_NOT_CONNECTED (233).
                    || (cfg!(windows) && io.raw_os_error() == Some(233))
        })
    })
}

/// True when anything in the chain is the user's fault: an [`InputError`], a Run record or
/// request file that does not parse, or a library error of the input kind.
fn is_input(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause.downcast_ref::<InputError>().is_some()
            || cause.downcast_ref::<rtlab_core::RecordError>().is_some()
            || cause
                .downcast_ref::<rtlab_store::LoadError>()
                .is_some_and(rtlab_store::LoadError::is_input)
            || cause
                .downcast_ref::<rtlab_import::ReadError>()
                .is_some_and(rtlab_import::ReadError::is_input)
            || is_library_input(cause)
    })
}

/// True for the errors of this platform's libraries that are of the input kind.
#[cfg(target_os = "linux")]
fn is_library_input(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause
        .downcast_ref::<rtlab_session::SessionError>()
        .is_some_and(rtlab_session::SessionError::is_input)
        || cause
            .downcast_ref::<rtlab_probe::ProbeError>()
            .is_some_and(rtlab_session::probe_error_is_input)
        || cause
            .downcast_ref::<rtlab_session::buffer::BufferExperimentError>()
            .is_some_and(rtlab_session::buffer::BufferExperimentError::is_input)
        || cause
            .downcast_ref::<rtlab_session::timers::TimersError>()
            .is_some_and(rtlab_session::timers::TimersError::is_input)
        || cause
            .downcast_ref::<rtlab_workload::study_run::StudyRunError>()
            .is_some_and(rtlab_workload::study_run::StudyRunError::is_input)
        || cause
            .downcast_ref::<rtlab_client::ClientError>()
            .is_some_and(rtlab_client::ClientError::is_input)
        || cause
            .downcast_ref::<rtlab_session::supply::VerifyError>()
            .is_some_and(rtlab_session::supply::VerifyError::is_input)
        || cause
            .downcast_ref::<rtlab_sched::PlanReportError>()
            .is_some_and(|error| matches!(error, rtlab_sched::PlanReportError::Planner(_)))
}

/// True for the errors of this platform's libraries that are of the input kind.
#[cfg(windows)]
fn is_library_input(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause
        .downcast_ref::<rtlab_session::windows::WindowsSessionError>()
        .is_some_and(rtlab_session::windows::WindowsSessionError::is_input)
        || cause
            .downcast_ref::<rtlab_probe::windows::run::WindowsProbeError>()
            .is_some_and(rtlab_probe::windows::run::WindowsProbeError::is_input)
        || cause
            .downcast_ref::<rtlab_sched::PlanReportError>()
            .is_some_and(|error| matches!(error, rtlab_sched::PlanReportError::Planner(_)))
}

/// The exit code of an error.
pub fn code(error: &anyhow::Error) -> u8 {
    if is_input(error) {
        USAGE_OR_INPUT
    } else {
        SYSTEM
    }
}

/// Prints `rtlab: error: …` and maps the error to its exit code.
pub fn report(error: &anyhow::Error) -> ExitCode {
    if is_broken_pipe(error) {
        return ExitCode::SUCCESS;
    }
    eprintln!("rtlab: error: {error:#}");
    ExitCode::from(code(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn error_kinds_map_to_their_codes() {
        assert_eq!(code(&input("--cpus: bad")), USAGE_OR_INPUT);
        let record = rtlab_core::RunRecord::from_json("{}").unwrap_err();
        assert_eq!(
            code(&anyhow::Error::new(record).context("x.json")),
            USAGE_OR_INPUT
        );
        let system = std::io::Error::other("disk on fire");
        assert_eq!(code(&anyhow::Error::new(system)), SYSTEM);
        let probe = rtlab_probe::ProbeError::NoClasses;
        assert_eq!(code(&anyhow::Error::new(probe)), USAGE_OR_INPUT);
        let spawn = rtlab_probe::ProbeError::Spawn(std::io::Error::other("no threads"));
        assert_eq!(code(&anyhow::Error::new(spawn)), SYSTEM);
        let planner = rtlab_sched::plan_requests(0, rtlab_core::Nanos(1), 0.5, &[]).unwrap_err();
        assert_eq!(code(&anyhow::Error::new(planner)), USAGE_OR_INPUT);
        assert_eq!(finished(true), ExitCode::from(130));
    }
}
