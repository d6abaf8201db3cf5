//! A directed probe the random attack did not find in 10 minutes: a user's thread made SCHED_RR
//! through RealtimeKit1, then reserved by the same user with the `dispatch` backend, rests at its
//! SCHED_RR between its slots (the enforcer's saved policy), while the watchdog skips reserved
//! threads when it meters the user's share. The thread's duty-cycled spin (90 ms on, 100 µs off)
//! then runs unmetered and is never demoted.
//!
//! ```sh
//! cargo build -p rtlab -p rtlab-hostile --example rtkit_reserved_spinner
//! flock -o /work/measure.lock target/debug/examples/rtkit_reserved_spinner [BACKEND]
//! ```
//!
//! Sends the two requests as nobody to a fresh stage (the harness's daemon, bus and victims),
//! then checks for 8 s. Exit 1 when the checker sees a violation (the hole is there), 0 when not,
//! 3 when the probe itself failed. BACKEND: `dispatch` (default), `deadline`, `edf`.

use rtlab_hostile::RunConfig;
use std::process::ExitCode;

fn main() -> ExitCode {
    match probe() {
        Ok(true) => ExitCode::from(1),
        Ok(false) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("rtkit_reserved_spinner: error: {error:#}");
            ExitCode::from(3)
        }
    }
}

fn probe() -> anyhow::Result<bool> {
    let backend = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "dispatch".to_owned());
    let examples = std::env::current_exe()?;
    let debug = examples
        .parent()
        .and_then(|directory| directory.parent())
        .ok_or_else(|| anyhow::anyhow!("run it from target/*/examples"))?;
    let config = RunConfig::standard(debug.join("rtlab-hostile"), debug.join("rtlab"), 0, 30.0);
    let probed = rtlab_hostile::probe::reserved_rtkit_spinner(&config, &backend)?;
    for answer in &probed.answers {
        println!("{answer}");
    }
    for violation in &probed.violations {
        println!("VIOLATION {:?}: {}", violation.kind, violation.detail);
    }
    Ok(!probed.violations.is_empty())
}
