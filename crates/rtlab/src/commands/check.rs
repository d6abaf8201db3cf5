//! `rtlab check`: is a task set schedulable on this machine? Exact response-time analysis for
//! fixed priorities, EDF/CBS demand tests for reservations, with the OS latency of a measured run
//! folded in as paper 002's pseudo worst case at the permitted miss rate. Exit 1 when a task is not
//! schedulable.

use crate::output::PendingOutput;
use anyhow::Context as _;
use rtlab_analysis::classes::{parse_rate, Rate};
use rtlab_analysis::forecast::{select_series, TailModel};
use rtlab_analysis::projection::ProjectedTail;
use rtlab_analysis::schedulability::{
    analyse, parse_task_set, pseudo_worst_case, AnalysisOptions, PseudoBasis, PseudoWorstCase,
    Scheduling, Task, TaskResult,
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
    #[arg(long, value_name = "RATE", default_value = "1/hour", value_parser = parse_rate_arg)]
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

fn parse_rate_arg(text: &str) -> Result<Rate, String> {
    parse_rate(text).map_err(|error| error.to_string())
}

#[derive(Serialize)]
struct Output {
    schema: &'static str,
    tool_version: &'static str,
    cmdline: Vec<String>,
    started_at: String,
    taskset: String,
    run_id: Option<String>,
    series: Option<String>,
    miss_rate_per_s: Option<f64>,
    schedulable: bool,
    tasks: Vec<TaskResult>,
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
    let output = Output {
        schema: "rtlab.check/1",
        tool_version: env!("CARGO_PKG_VERSION"),
        cmdline: std::env::args().collect(),
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        taskset: name,
        run_id: record.as_ref().map(|record| record.id.clone()),
        series: selection.as_ref().map(|selection| selection.label.clone()),
        miss_rate_per_s: selection.as_ref().map(|_| args.miss_rate.per_second()),
        schedulable,
        tasks: results,
    };
    if !json.as_ref().is_some_and(PendingOutput::is_stdout) {
        let mut out = std::io::stdout().lock();
        write_table(&mut out, &output, &tasks, &args)?;
    }
    if let Some(json) = json {
        let text =
            serde_json::to_string_pretty(&output).context("serialising the analysis")? + "\n";
        json.commit(&text)?;
    }
    Ok(if schedulable {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::exit::CHECK_FAILED)
    })
}

fn micros(nanos: u64) -> String {
    crate::render::micros(nanos)
}

fn write_table(
    out: &mut impl std::io::Write,
    output: &Output,
    tasks: &[Task],
    args: &Args,
) -> std::io::Result<()> {
    match (&output.run_id, &output.series) {
        (Some(run), Some(series)) => writeln!(
            out,
            "OS latency from run {run}, series {series}: the pseudo worst case each task meets at {} misses (paper 002 §5.2), as release jitter",
            args.miss_rate
        )?,
        _ => writeln!(
            out,
            "no run given: OS latency taken as zero (give --run to fold in this machine's measured latency)"
        )?,
    }
    writeln!(
        out,
        "times in µs; latency = the OS latency budgeted as release jitter"
    )?;
    writeln!(
        out,
        "{:<16} {:>3} {:<14} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10}  verdict",
        "task",
        "cpu",
        "scheduling",
        "period",
        "compute",
        "deadline",
        "latency",
        "response",
        "slack"
    )?;
    for (task, result) in tasks.iter().zip(&output.tasks) {
        let scheduling = match task.scheduling {
            Scheduling::FixedPriority(priority) => format!("FIFO {priority}"),
            Scheduling::Reservation {
                runtime, period, ..
            } => {
                format!("DL {}/{}", runtime, period)
            }
        };
        let latency = match result.os_latency.basis {
            PseudoBasis::None => "-".to_owned(),
            PseudoBasis::ObservedMaximum => format!("≥{}", micros(result.os_latency.latency.0)),
            _ => micros(result.os_latency.latency.0),
        };
        let response = result
            .response_ns
            .map(micros)
            .unwrap_or_else(|| format!(">{}", micros(task.deadline.0)));
        let slack = result
            .slack_ns
            .map(|slack| format!("{:.1}", slack as f64 / 1_000.0))
            .unwrap_or_else(|| "-".to_owned());
        writeln!(
            out,
            "{:<16} {:>3} {:<14} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10}  {}",
            task.name,
            task.cpu,
            scheduling,
            micros(task.period.0),
            micros(task.compute.0),
            micros(task.deadline.0),
            latency,
            response,
            slack,
            if result.schedulable {
                "schedulable"
            } else {
                "NOT schedulable"
            }
        )?;
        if let Some(note) = &result.note {
            writeln!(out, "{:<16} {note}", "")?;
        }
    }
    writeln!(
        out,
        "\n{}",
        if output.schedulable {
            "all tasks meet their deadlines"
        } else {
            "some tasks miss their deadlines (exit 1)"
        }
    )?;
    Ok(())
}
