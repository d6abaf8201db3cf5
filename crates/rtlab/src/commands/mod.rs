//! One module per subcommand, each with `fn run(args) -> anyhow::Result<ExitCode>`.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[cfg_attr(windows, path = "windows/absent.rs")]
pub mod buffer_experiment;
pub mod check;
pub mod compare;
pub mod completions;
#[cfg_attr(windows, path = "windows/absent.rs")]
pub mod daemon;
#[cfg(target_os = "linux")]
pub mod daemon_client;
#[cfg_attr(windows, path = "windows/absent.rs")]
pub mod explain;
pub mod forecast;
#[cfg(target_os = "linux")]
pub mod forecast_trace;
pub mod history;
pub mod import;
#[cfg_attr(windows, path = "windows/absent.rs")]
pub mod monitor;
pub mod plan;
#[cfg_attr(windows, path = "windows/absent.rs")]
pub mod release;
pub mod report;
#[cfg_attr(windows, path = "windows/absent.rs")]
pub mod reservations;
#[cfg_attr(windows, path = "windows/absent.rs")]
pub mod reserve;
#[cfg(not(windows))]
pub mod reserve_auto;
#[cfg(not(windows))]
pub mod reserve_follow;
#[cfg_attr(windows, path = "windows/run.rs")]
pub mod run;
#[cfg(target_os = "linux")]
pub mod run_show;
pub mod show;
#[cfg_attr(windows, path = "windows/absent.rs")]
pub mod study;
#[cfg_attr(windows, path = "windows/timers.rs")]
pub mod timers;
#[cfg_attr(windows, path = "windows/absent.rs")]
pub mod trace;
#[cfg(not(windows))]
pub mod trace_markers;
#[cfg(not(windows))]
pub mod trace_watch;
#[cfg_attr(windows, path = "windows/absent.rs")]
pub mod tune;
#[cfg(not(windows))]
mod tune_app;
#[cfg(not(windows))]
mod tune_profile;
#[cfg_attr(windows, path = "windows/absent.rs")]
pub mod workload;

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
    #[cfg_attr(
        windows,
        command(
            about = "Measure wake-up and interval latency per priority class (rt-high, mmcss, normal)"
        )
    )]
    Run(run::Args),
    /// List stored runs, newest first
    History(history::Args),
    /// Print a stored run (by id, id prefix or `latest`) or a Run record file
    Show(show::Args),
    /// Re-print the explained late wake-ups of a run measured with --explain (worst episodes, top offenders)
    #[cfg_attr(windows, command(hide = true))]
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
    #[cfg_attr(windows, command(hide = true))]
    BufferExperiment(buffer_experiment::Args),
    /// Plan CPU reservations from a request file: grants, denials and per-CPU timelines
    Plan(plan::Args),
    /// What each Linux timer API really delivers per class; --audit, --change-experiment
    #[cfg_attr(
        windows,
        command(
            about = "What each Windows way to wait really delivers, with and without timeBeginPeriod(1); --audit, --change-experiment"
        )
    )]
    Timers(timers::Args),
    /// The change experiment's other process (started by `rtlab timers --change-experiment`)
    #[command(hide = true)]
    TimersChanger(timers::ChangerArgs),
    /// Compare two runs (before/after): percentiles with bootstrap intervals, causes, a verdict
    Compare(compare::Args),
    /// Write a self-contained HTML report (plots, verdicts, episodes) of one or several runs
    Report(report::Args),
    /// Measure continuously and export the latency on /metrics for Prometheus
    #[cfg_attr(windows, command(hide = true))]
    Monitor(monitor::Args),
    /// Run the rtlab daemon in the foreground: shares CPU reservations among programs (rtlab.rpc/1)
    #[cfg_attr(windows, command(hide = true))]
    Daemon(daemon::Args),
    /// Reserve CPU for a thread of any program through the rtlab daemon: AMOUNT of every PERIOD
    #[cfg_attr(windows, command(hide = true))]
    Reserve(reserve::Args),
    /// Give a reservation back to the rtlab daemon
    #[cfg_attr(windows, command(hide = true))]
    Release(release::Args),
    /// List the reservations the rtlab daemon holds and each CPU's reserved fraction
    #[cfg_attr(windows, command(hide = true))]
    Reservations(reservations::Args),
    /// Run a workload model (rtlab TOML or rt-app JSON): underruns, deadline misses, response times
    #[cfg_attr(windows, command(hide = true))]
    Workload(workload::Args),
    /// Reproduce a paper's study on this machine (media-player: paper 003 Table 3-2)
    #[cfg_attr(windows, command(hide = true))]
    Study(study::Args),
    /// Record an application's threads, or analyse a recording or trace-cmd trace.dat: thread
    /// structure, wake-up chains, priority inversions, hangs, starvation
    #[cfg_attr(windows, command(hide = true))]
    Trace(trace::Args),
    /// Change the machine's real-time settings one at a time, measure each, keep only what helps
    #[cfg_attr(windows, command(hide = true))]
    Tune(tune::Args),
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
        Command::Workload(args) => workload::run(args),
        Command::Study(args) => study::run(args),
        Command::Trace(args) => trace::run(args),
        Command::Tune(args) => tune::run(args),
    }
}

/// The flag SIGINT/SIGTERM (on Windows: the console's Ctrl-C) sets, for a measurement to stop
/// early and keep what it has.
pub fn stop_flag() -> anyhow::Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    use anyhow::Context as _;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    #[cfg(target_os = "linux")]
    rtlab_sys::signals::install_stop_flag(&stop)
        .context("installing the SIGINT/SIGTERM handler")?;
    #[cfg(windows)]
    rtlab_sys::windows::console::install_stop_flag(&stop)
        .context("installing the console control handler")?;
    Ok(stop)
}

/// Loads a Run record from a file path or from the store (id, unique prefix, or `latest`).
/// A path that exists wins over an id.
pub fn load_record(run_or_file: &str) -> anyhow::Result<rtlab_core::RunRecord> {
    // exit.rs tells a bad name or file (2) from a failing system (3) by the error's kind.
    Ok(rtlab_store::load_record(run_or_file)?)
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
