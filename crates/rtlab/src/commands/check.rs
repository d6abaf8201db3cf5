//! `rtlab check`: is a task set schedulable on this machine? Exact response-time analysis for
//! fixed priorities, EDF/CBS demand tests for reservations, with the OS latency of a measured run
//! folded in as paper 002's pseudo worst case at the permitted miss rate. Exit 1 when a task is not
//! schedulable.

use crate::output::PendingOutput;
use rtlab_analysis::check_study::check;
use rtlab_analysis::classes::Rate;
use rtlab_analysis::schedulability::{parse_task_set, AnalysisOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Task-set file (TOML: [[task]] with name, period, compute, deadline, priority or
    /// reservation = { runtime, period }, cpu)
    pub taskset: PathBuf,
    /// Fold in the OS latency measured in this run (id, prefix, `latest`, or a Run record file)
    #[arg(long, value_name = "RUN_OR_FILE")]
    pub run: Option<String>,
    /// Permitted rate of deadline misses caused by OS latency (1/hour, 1/day, 1/10min)
    #[arg(long, value_name = "RATE", default_value = "1/hour", value_parser = crate::flags::rate)]
    pub miss_rate: Rate,
    /// Which series of the run gives the OS latency (default: rt-high/wakeup pooled over CPUs)
    #[arg(long, value_name = "CLASS/METRIC", requires = "run")]
    pub series: Option<String>,
    /// Largest share of a CPU that reservations may take, in % (Linux admits 95 by default)
    #[arg(long, value_name = "PERCENT", default_value_t = 95.0)]
    pub reservation_limit: f64,
    #[command(flatten)]
    pub output: crate::output::JsonArgs,
}

/// The `schema` of `rtlab check --json`.
pub const CHECK_SCHEMA: &str = "rtlab.check/1";

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !(args.reservation_limit > 0.0 && args.reservation_limit <= 100.0) {
        return Err(crate::exit::input(
            "--reservation-limit: must be a percentage in (0, 100]",
        ));
    }
    let json = args.output.prepare()?;
    let name = args.taskset.display().to_string();
    let text = std::fs::read_to_string(&args.taskset)
        .map_err(|error| crate::exit::input(format!("{name}: {error}")))?;
    let tasks =
        parse_task_set(&text).map_err(|error| crate::exit::input(format!("{name}: {error}")))?;
    let record = args.run.as_deref().map(super::load_record).transpose()?;
    let options = AnalysisOptions {
        reservation_bound: args.reservation_limit / 100.0,
    };
    let run = record
        .as_ref()
        .map(|record| (record, args.series.as_deref()));
    let output = check(&name, &tasks, run, args.miss_rate, options).map_err(|error| {
        crate::exit::input(format!("{}: {error}", args.run.as_deref().unwrap_or("")))
    })?;
    if !json.as_ref().is_some_and(PendingOutput::is_stdout) {
        crate::output::print(&rtlab_render::check::table(
            &output,
            &tasks,
            &args.miss_rate,
        ))?;
    }
    if let Some(json) = json {
        let host = record.as_ref().map(|record| record.host.clone());
        json.commit_json(CHECK_SCHEMA, host, &output)?;
    }
    Ok(crate::exit::checked(output.schedulable))
}
