//! rtlab: can this Linux machine meet real-time deadlines? The binary: clap flags, progress,
//! printing and storing over the library crates, which hold the logic (ARCHITECTURE.md says
//! which; `commands/trace_watch.rs` and `reserve_auto.rs` still hold observation loops).
//!
//! Exit codes (a contract, see README and `exit.rs`): 0 ok, 1 a check or verdict failed, 2 usage
//! or input error, 3 measurement or system error, 130 interrupted by SIGINT/SIGTERM. A broken
//! pipe exits quietly with 0.

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
