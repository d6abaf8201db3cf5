//! `rtlab check`: is a task set schedulable on this machine? Exact response-time analysis for
//! fixed priorities, EDF/CBS demand tests for reservations, with the OS latency of a measured run
//! folded in as paper 002's pseudo worst case at the permitted miss rate. Exit 1 when a task is not
//! schedulable.

use crate::output::PendingOutput;
use rtlab_analysis::classes::Rate;
use rtlab_analysis::forecast::{select_series, TailModel};
use rtlab_analysis::projection::ProjectedTail;
use rtlab_analysis::schedulability::{
    analyse, parse_task_set, pseudo_worst_case, AnalysisOptions, PseudoBasis, PseudoWorstCase,
    Task, TaskResult,
};
use rtlab_core::Nanos;
use serde::Serialize;
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
    /// Write the analysis as JSON to FILE (`-` for stdout, replacing the table)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// The `schema` of `rtlab check --json`.
pub const CHECK_SCHEMA: &str = "rtlab.check/1";

/// What `rtlab check` found (the JSON body under the common header).
#[derive(Serialize)]
pub struct CheckOutput {
    pub taskset: String,
    pub run_id: Option<String>,
    pub series: Option<String>,
    pub miss_rate_per_s: Option<f64>,
    pub schedulable: bool,
    pub tasks: Vec<TaskResult>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !(args.reservation_limit > 0.0 && args.reservation_limit <= 100.0) {
        return Err(crate::exit::input(
            "--reservation-limit: must be a percentage in (0, 100]",
        ));
    }
    let json = args.json.as_deref().map(PendingOutput::json).transpose()?;
    let name = args.taskset.display().to_string();
    let text = std::fs::read_to_string(&args.taskset)
        .map_err(|error| crate::exit::input(format!("{name}: {error}")))?;
    let tasks =
        parse_task_set(&text).map_err(|error| crate::exit::input(format!("{name}: {error}")))?;
    let (record, selection) = match &args.run {
        Some(run) => {
            let record = super::load_record(run)?;
            let selection = select_series(&record, args.series.as_deref())
                .map_err(|error| crate::exit::input(format!("{run}: {error}")))?;
            (Some(record), Some(selection))
        }
        None => (None, None),
    };
    let options = AnalysisOptions {
        reservation_bound: args.reservation_limit / 100.0,
    };
    // Beyond the run's data, the tail projection (when its fit is accepted) gives the quantile.
    let tail = selection
        .as_ref()
        .and_then(|selection| ProjectedTail::fit(&selection.histogram).ok());
    let latency_of = |task: &Task| match &selection {
        Some(selection) => pseudo_worst_case(
            &selection.histogram,
            tail.as_ref().map(|tail| tail as &dyn TailModel),
            task.period,
            args.miss_rate,
        ),
        None => PseudoWorstCase {
            latency: Nanos::ZERO,
            per_activation: 0.0,
            basis: PseudoBasis::None,
        },
    };
    let results = analyse(&tasks, options, &latency_of);
    let schedulable = results.iter().all(|result| result.schedulable);
    let output = CheckOutput {
        taskset: name,
        run_id: record.as_ref().map(|record| record.id.clone()),
        series: selection.as_ref().map(|selection| selection.label.clone()),
        miss_rate_per_s: selection.as_ref().map(|_| args.miss_rate.per_second()),
        schedulable,
        tasks: results,
    };
    if !json.as_ref().is_some_and(PendingOutput::is_stdout) {
        let mut out = std::io::stdout().lock();
        crate::render::check::write_table(&mut out, &output, &tasks, &args.miss_rate)?;
    }
    if let Some(json) = json {
        let host = record.as_ref().map(|record| record.host.clone());
        json.commit_json(CHECK_SCHEMA, host, &output)?;
    }
    Ok(crate::exit::checked(schedulable))
}
