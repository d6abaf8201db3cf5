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

/// Each library's own judgement of whether an error of its making is the user's input's fault.
type InputJudge = fn(&(dyn std::error::Error + 'static)) -> bool;

const LIBRARY_INPUT_ERRORS: &[InputJudge] = &[
    rtlab_core::is_input_error,
    rtlab_store::is_input_error,
    rtlab_import::is_input_error,
    rtlab_plan::is_input_error,
    rtlab_session::is_input_error,
    #[cfg(target_os = "linux")]
    rtlab_workload::is_input_error,
    #[cfg(target_os = "linux")]
    rtlab_client::is_input_error,
];

/// True when anything in the chain is the user's fault: an [`InputError`] or a library error of
/// the input kind (a Run record or request file that does not parse, a bad setting).
fn is_input(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause.downcast_ref::<InputError>().is_some()
            || LIBRARY_INPUT_ERRORS.iter().any(|judge| judge(cause))
    })
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
        let planner = rtlab_plan::plan_requests(0, rtlab_core::Nanos(1), 0.5, &[]).unwrap_err();
        assert_eq!(code(&anyhow::Error::new(planner)), USAGE_OR_INPUT);
        let output = crate::output::PendingOutput::json(std::path::Path::new("/nonexistent/d/x"));
        assert_eq!(
            code(&anyhow::Error::new(output.unwrap_err())),
            USAGE_OR_INPUT
        );
        assert_eq!(finished(true), ExitCode::from(130));
    }
}
