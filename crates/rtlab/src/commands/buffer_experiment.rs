//! `rtlab buffer-experiment` (hidden): the experiment behind BENCHMARKS.md's "is the forecast
//! right?". Runs a producer of the class under test against a virtual device, counts real
//! underruns for several buffer counts, and writes the producer's wake-up latencies as a Run record
//! with the counts in `config`, so `rtlab forecast` can be compared with what happened.

use crate::output::PendingOutput;
use anyhow::Context as _;
use rtlab_core::{parse_duration, Metric, Nanos, RunRecord, RUN_SCHEMA};
use rtlab_probe::buffer_experiment::{run as run_experiment, ExperimentConfig};
use rtlab_sys::sched::Policy;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Buffer period t (one wake-up and one buffer per period)
    #[arg(long, default_value = "2ms", value_parser = parse_nanos)]
    pub period: Nanos,
    /// CPU work per buffer c
    #[arg(long, default_value = "200us", value_parser = parse_nanos)]
    pub compute: Nanos,
    /// Buffer counts n to count underruns for
    #[arg(long, value_delimiter = ',', default_value = "2,3,4")]
    pub buffers: Vec<u32>,
    /// How long to run
    #[arg(short = 'D', long, default_value = "60s", value_parser = parse_nanos)]
    pub duration: Nanos,
    /// The producer's class: `normal` (SCHED_OTHER) or `fifo:PRIO`
    #[arg(long, default_value = "normal", value_parser = parse_policy)]
    pub producer: Policy,
    /// CPU to pin the producer to
    #[arg(long)]
    pub producer_cpu: Option<usize>,
    /// CPU to pin the device to
    #[arg(long)]
    pub device_cpu: Option<usize>,
    /// Write the Run record to FILE (`-` for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Do not store the record in the run history
    #[arg(long)]
    pub no_store: bool,
}

fn parse_nanos(text: &str) -> Result<Nanos, String> {
    parse_duration(text).map_err(|error| error.to_string())
}

fn parse_policy(text: &str) -> Result<Policy, String> {
    match text.split_once(':') {
        None if text == "normal" => Ok(Policy::Other { nice: 0 }),
        Some(("fifo", priority)) => priority
            .parse::<u32>()
            .ok()
            .filter(|priority| (1..=98).contains(priority))
            .map(|priority| Policy::Fifo { priority })
            .ok_or_else(|| {
                format!("'{priority}' is not a FIFO priority below the device's (1-98)")
            }),
        _ => Err(format!(
            "'{text}' is not a producer class (normal or fifo:PRIO)"
        )),
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json.as_deref().map(PendingOutput::json).transpose()?;
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop)
        .context("installing the SIGINT/SIGTERM handler")?;
    let config = ExperimentConfig {
        buffer_period: args.period,
        compute: args.compute,
        buffer_counts: args.buffers.clone(),
        duration: args.duration,
        producer_policy: args.producer,
        producer_cpu: args.producer_cpu,
        device_priority: 99,
        device_cpu: args.device_cpu,
    };
    let started = std::time::SystemTime::now();
    let result = run_experiment(&config, &stop).map_err(|error| match error {
        rtlab_probe::buffer_experiment::ExperimentError::Policy { .. }
        | rtlab_probe::buffer_experiment::ExperimentError::Pin { .. }
        | rtlab_probe::buffer_experiment::ExperimentError::Spawn(_)
        | rtlab_probe::buffer_experiment::ExperimentError::Panicked => anyhow::Error::new(error),
        other => crate::exit::input(other),
    })?;
    let class = if args.producer.is_realtime() {
        "rt-high"
    } else {
        "normal"
    };
    let series = RunRecord::series_from_histogram(
        Metric::Wakeup,
        class,
        args.producer_cpu.unwrap_or(0) as u32,
        result.producer_policy.name(),
        result.producer_policy.priority_or_nice(),
        args.period.0,
        &result.wakeup,
        0,
        0,
        result.max_per_second.clone(),
        Vec::new(),
    )
    .context("encoding the wake-up histogram")?;
    let underruns: serde_json::Map<String, serde_json::Value> = result
        .underruns
        .iter()
        .map(|(buffers, checked, underruns)| {
            (
                buffers.to_string(),
                serde_json::json!({"checked": checked, "underruns": underruns}),
            )
        })
        .collect();
    let mut warnings = Vec::new();
    if !result.device_realtime {
        warnings.push("the virtual device could not run SCHED_FIFO (not root): it judged by completion times, so counts stay exact, but it may have fallen behind".to_owned());
    }
    if result.unchecked > 0 {
        warnings.push(format!(
            "{} buffers could not be checked: the device fell a whole ring behind",
            result.unchecked
        ));
    }
    let record = RunRecord {
        schema: RUN_SCHEMA.to_owned(),
        id: format!(
            "bufexp-{}",
            started
                .duration_since(std::time::UNIX_EPOCH)
                .map(|elapsed| elapsed.as_nanos())
                .unwrap_or(0)
        ),
        started_at: humantime::format_rfc3339_seconds(started).to_string(),
        duration_ns: result.periods * args.period.0,
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        cmdline: std::env::args().collect(),
        host: rtlab_sys::host::describe(None),
        config: serde_json::json!({
            "buffer_experiment": {
                "buffer_period_ns": args.period.0,
                "compute_ns": args.compute.0,
                "producer_policy": result.producer_policy.name(),
                "producer_priority": result.producer_policy.priority_or_nice(),
                "periods": result.periods,
                "underruns": underruns,
            }
        }),
        series: vec![series],
        load: None,
        episodes: Vec::new(),
        warnings,
        interrupted: result.interrupted,
        timers: None,
    };
    record
        .validate()
        .context("the experiment's record does not validate")?;
    let to_stdout = json.as_ref().is_some_and(PendingOutput::is_stdout);
    if !to_stdout {
        println!(
            "{} periods of {} ms, compute {} µs, producer {} — wake-up p99 {} µs, max {} µs",
            result.periods,
            args.period.0 as f64 / 1e6,
            args.compute.0 / 1_000,
            result.producer_policy.name(),
            crate::render::micros(result.wakeup.value_at_quantile(0.99)),
            crate::render::micros(result.wakeup.max()),
        );
        for (buffers, checked, underruns) in &result.underruns {
            println!("n = {buffers}: {underruns} underruns in {checked} buffers");
        }
    }
    if !args.no_store {
        let store = rtlab_store::Store::open_default()?;
        store.insert(&record, "buffer experiment")?;
        if !to_stdout {
            println!("stored as run {}", record.id);
        }
    }
    if let Some(json) = json {
        json.commit(&(record.to_json_pretty() + "\n"))?;
    }
    Ok(if result.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}
