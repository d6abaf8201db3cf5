//! rtlab: can this Linux machine meet real-time deadlines? The binary: clap flags, progress,
//! printing and storing over the library crates, which hold the logic (ARCHITECTURE.md says
//! which; the architecture test holds the binary at 200 lines a command at most on average).
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

// The allocator. glibc's malloc shares a few arenas between all of a process's threads, each
// behind a lock that lends no priority. In the daemon, a connection thread serving a user runs at
// nice 19; preempted inside `malloc` it held an arena's lock, the thread holding the registry
// (its watcher) waited for that lock, and root, waiting for the registry, waited 645 ms although
// the registry's own lock inherits priority (rtlab-hostile, traced: BENCHMARKS.md, "10 minutes
// with RealtimeKit1 in the attack", run 11). mimalloc gives each thread its own heap, and a block
// freed by another thread goes back through an atomic list, so no thread waits for another's
// allocation.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = commands::Cli::parse();
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(error) => exit::report(&error),
    }
}
