//! rtlab: can this Linux machine meet real-time deadlines? The binary is glue: argument parsing,
//! rendering and progress; every piece of logic lives in a library crate.
//!
//! Exit codes (a contract, see README): 0 ok, 1 a check or verdict failed, 2 usage or input
//! error, 3 measurement or system error. A broken pipe exits quietly with 0.

// The Windows build leaves out the Linux-only commands, and with them some users of the shared
// flag parsers and text helpers; the Linux build still denies dead code.
#![cfg_attr(windows, allow(dead_code))]
// On Windows every Linux-only command is the same file, `commands/windows/absent.rs`, compiled
// under the command's name (it says which command is absent and why).
#![cfg_attr(windows, allow(clippy::duplicate_mod))]

mod commands;
mod exit;
mod flags;
mod output;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = commands::Cli::parse();
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(error) => exit::report(&error),
    }
}
