//! rtlab: can this Linux machine meet real-time deadlines? The binary is glue: argument parsing,
//! rendering and progress; every piece of logic lives in a library crate.
//!
//! Exit codes (a contract, see README): 0 ok, 1 a check or verdict failed, 2 usage or input
//! error, 3 measurement or system error. A broken pipe exits quietly with 0.

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
