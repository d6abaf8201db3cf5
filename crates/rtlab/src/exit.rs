//! The exit-code contract and the one place errors are printed.

use std::fmt::Display;
use std::process::ExitCode;

pub const CHECK_FAILED: u8 = 1;
pub const USAGE_OR_INPUT: u8 = 2;
pub const SYSTEM: u8 = 3;

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

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Prints `rtlab: error: …` and maps the error to its exit code.
pub fn report(error: &anyhow::Error) -> ExitCode {
    if is_broken_pipe(error) {
        return ExitCode::SUCCESS;
    }
    eprintln!("rtlab: error: {error:#}");
    let is_input = error
        .chain()
        .any(|cause| cause.downcast_ref::<InputError>().is_some());
    ExitCode::from(if is_input { USAGE_OR_INPUT } else { SYSTEM })
}
