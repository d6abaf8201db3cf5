//! One module per subcommand, each with `fn run(args) -> anyhow::Result<ExitCode>`.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

pub mod buffer_experiment;
pub mod check;
pub mod compare;
pub mod completions;
pub mod daemon;
pub mod daemon_client;
pub mod explain;
pub mod forecast;
pub mod history;
pub mod import;
pub mod monitor;
pub mod plan;
pub mod release;
pub mod report;
pub mod reservations;
pub mod reserve;
pub mod run;
pub mod run_show;
pub mod show;
pub mod timers;
pub mod trace;

/// rtlab: can this Linux machine meet real-time deadlines? Measure timer and thread wake-up
/// latency, explain every long delay, forecast what it means for your application, and reserve CPU.
#[derive(Debug, Parser)]
#[command(name = "rtlab", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure wake-up, interval and hand-off latency per CPU and priority class
    Run(run::Args),
    /// List stored runs, newest first
    History(history::Args),
    /// Print a stored run (by id, id prefix or `latest`) or a Run record file
    Show(show::Args),
    /// Re-print the explained late wake-ups of a run measured with --explain (worst episodes, top offenders)
    Explain(explain::Args),
    /// Print shell completions (bash, zsh, fish, elvish, powershell) or the man page (`man`)
    Completions(completions::Args),
    /// Forecast the mean time to buffer underrun for n buffers of t ms, per application class
    Forecast(forecast::Args),
    /// Check a task set for schedulability, with this machine's measured latency folded in
    Check(check::Args),
    /// Import cyclictest, rtla timerlat, HdrHistogram log or CSV latency data as a Run record
    Import(import::Args),
    /// Producer/consumer buffer experiment: real underruns vs the forecast (BENCHMARKS.md)
    #[command(hide = true)]
    BufferExperiment(buffer_experiment::Args),
    /// Plan CPU reservations from a request file: grants, denials and per-CPU timelines
    Plan(plan::Args),
    /// What each Linux timer API really delivers per class; --audit, --change-experiment
    Timers(timers::Args),
    /// The change experiment's other process (started by `rtlab timers --change-experiment`)
    #[command(hide = true)]
    TimersChanger(timers::ChangerArgs),
    /// Compare two runs (before/after): percentiles with bootstrap intervals, causes, a verdict
    Compare(compare::Args),
    /// Write a self-contained HTML report (plots, verdicts, episodes) of one or several runs
    Report(report::Args),
    /// Measure continuously and export the latency on /metrics for Prometheus
    Monitor(monitor::Args),
    /// Run the rtlab daemon in the foreground: shares CPU reservations among programs (rtlab.rpc/1)
    Daemon(daemon::Args),
    /// Reserve CPU for a thread of any program through the rtlab daemon: AMOUNT of every PERIOD
    Reserve(reserve::Args),
    /// Give a reservation back to the rtlab daemon
    Release(release::Args),
    /// List the reservations the rtlab daemon holds and each CPU's reserved fraction
    Reservations(reservations::Args),
    /// Record an application's threads, or analyse a recording or trace-cmd trace.dat: thread
    /// structure, wake-up chains, priority inversions, hangs, starvation
    Trace(trace::Args),
}

pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::History(args) => history::run(args),
        Command::Show(args) => show::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Forecast(args) => forecast::run(args),
        Command::Check(args) => check::run(args),
        Command::Import(args) => import::run(args),
        Command::BufferExperiment(args) => buffer_experiment::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Timers(args) => timers::run(args),
        Command::TimersChanger(args) => timers::run_changer(args),
        Command::Compare(args) => compare::run(args),
        Command::Report(args) => report::run(args),
        Command::Monitor(args) => monitor::run(args),
        Command::Daemon(args) => daemon::run(args),
        Command::Reserve(args) => reserve::run(args),
        Command::Release(args) => release::run(args),
        Command::Reservations(args) => reservations::run(args),
        Command::Trace(args) => trace::run(args),
    }
}

/// Loads a Run record from a file path or from the store (id, unique prefix, or `latest`).
/// A path that exists wins over an id.
pub fn load_record(run_or_file: &str) -> anyhow::Result<rtlab_core::RunRecord> {
    use anyhow::Context as _;
    let path = std::path::Path::new(run_or_file);
    if run_or_file == "-" || path.exists() {
        let bytes = if run_or_file == "-" {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)
                .context("reading a Run record from stdin")?;
            bytes
        } else {
            std::fs::read(path).with_context(|| format!("reading {run_or_file}"))?
        };
        // A binary file is the user's mistake (exit 2), not a failing system.
        let text = String::from_utf8(bytes).map_err(|error| {
            crate::exit::input(format!(
                "{run_or_file}: not a Run record: not text (invalid UTF-8 at byte {})",
                error.utf8_error().valid_up_to()
            ))
        })?;
        return rtlab_core::RunRecord::from_json(&text)
            .map_err(|error| crate::exit::input(format!("{run_or_file}: {error}")));
    }
    let store = rtlab_store::Store::open_default()?;
    store.get(run_or_file).map_err(|error| match error {
        rtlab_store::StoreError::NotFound(_) | rtlab_store::StoreError::Ambiguous { .. } => {
            crate::exit::input(format!(
                "'{run_or_file}' is neither a file nor a stored run: {error}"
            ))
        }
        other => anyhow::Error::new(other),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
