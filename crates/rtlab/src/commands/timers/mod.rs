//! `rtlab timers`: what each Linux timer API really delivers per scheduling class (paper 000 §4.1),
//! `--audit` of the settings that change everyone's timing, and `--change-experiment`, paper
//! 004's measure/change pair. Argument parsing, progress and rendering only: the measuring is in
//! `rtlab_probe::timers`, the statistics and findings in `rtlab_analysis::timers`.

mod audit;
mod change;

pub use change::{run_changer, ChangerArgs};

use crate::output::PendingOutput;
use anyhow::Context as _;
use rtlab_core::{Nanos, RunRecord};
use rtlab_probe::timers::{RunningStudy, TimerClass};
use rtlab_render::svg_timers::{interval_distributions, millis_label};
use rtlab_session::timers::{study_record, StudyRequest};
use rtlab_sys::timer_apis::TimerApi;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Total measuring time, split evenly over every (API, class, interval) cell
    #[arg(short = 'D', long, default_value = "30s", value_parser = crate::flags::duration)]
    pub duration: Nanos,
    /// The intervals to request, each measured with every API and class
    #[arg(long, value_delimiter = ',', default_value = "1ms,2ms,10ms,16.667ms", value_parser = crate::flags::duration)]
    pub intervals: Vec<Nanos>,
    /// Only these APIs (function names; `timerfd` means both its periodic and re-armed loops)
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub apis: Vec<String>,
    /// Classes: normal (SCHED_OTHER, default slack), normal-slack1ns, rt-high (SCHED_FIFO 90)
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "normal,normal-slack1ns,rt-high"
    )]
    pub classes: Vec<TimerClass>,
    /// CPU to pin the measuring threads to (default: the last online CPU)
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Write the Run record (or, with --audit, the audit) as JSON to FILE (`-` for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the plots as SVG files into DIR (created if missing)
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// Do not store the study in the run history
    #[arg(long)]
    pub no_store: bool,
    /// Instead of measuring: list the settings that change everyone's timing, and who set them
    #[arg(long, conflicts_with = "change_experiment")]
    pub audit: bool,
    /// Paper 004's pair: another process cycles cpu_dma_latency and this thread's timer slack
    /// while this one measures its own sleeps (needs root)
    #[arg(long)]
    pub change_experiment: bool,
    /// With --change-experiment: how long each setting is held
    #[arg(long, default_value = "3s", value_parser = crate::flags::duration)]
    pub hold: Nanos,
}

fn selected_apis(names: &[String]) -> anyhow::Result<Vec<TimerApi>> {
    if names.is_empty() {
        return Ok(TimerApi::ALL.to_vec());
    }
    for name in names {
        if !TimerApi::ALL.iter().any(|api| api.function() == name) {
            return Err(crate::exit::input(format!(
                "--apis: unknown API '{name}' (expected {})",
                rtlab_core::timer_study::TIMER_APIS.join(", ")
            )));
        }
    }
    Ok(TimerApi::ALL
        .into_iter()
        .filter(|api| names.iter().any(|name| name == api.function()))
        .collect())
}

/// The SVG files of a run, opened before measuring (a bad directory fails at once).
fn prepare_svgs(
    directory: Option<&Path>,
    names: &[String],
) -> anyhow::Result<Vec<(String, PendingOutput)>> {
    let Some(directory) = directory else {
        return Ok(Vec::new());
    };
    std::fs::create_dir_all(directory).map_err(|error| {
        crate::exit::input(format!(
            "--svg: cannot create {}: {error}",
            directory.display()
        ))
    })?;
    names
        .iter()
        .map(|name| {
            PendingOutput::prepare(&directory.join(name), "--svg").map(|file| (name.clone(), file))
        })
        .collect()
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.audit {
        return audit::run(&args);
    }
    if args.change_experiment {
        return change::run(&args);
    }
    study(&args)
}

fn last_online_cpu() -> anyhow::Result<usize> {
    rtlab_sys::cpu::online_cpus()
        .context("reading the online CPUs")?
        .last()
        .copied()
        .context("no online CPU")
}

fn open_store(no_store: bool) -> anyhow::Result<Option<rtlab_store::Store>> {
    if no_store {
        return Ok(None);
    }
    rtlab_store::Store::open_default()
        .map(Some)
        .context("opening the run history (use --no-store to skip it)")
}

fn study(args: &Args) -> anyhow::Result<ExitCode> {
    let apis = selected_apis(&args.apis)?;
    let cpu = match args.cpu {
        Some(cpu) => cpu,
        None => last_online_cpu()?,
    };
    let request = StudyRequest {
        apis,
        classes: args.classes.clone(),
        intervals: args.intervals.clone(),
        duration: args.duration,
        cpu,
    };
    let plan = request
        .plan()
        .map_err(|error| crate::exit::input(format!("--intervals: {error}")))?;
    let json_output = args.json.as_deref().map(PendingOutput::json).transpose()?;
    let svg_names: Vec<String> = args
        .intervals
        .iter()
        .map(|interval| format!("timers-{}.svg", millis_label(interval.0)))
        .collect();
    let svg_outputs = prepare_svgs(args.svg.as_deref(), &svg_names)?;
    let store = open_store(args.no_store)?;
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop)
        .context("installing the SIGINT/SIGTERM handler")?;
    let started = std::time::SystemTime::now();
    let began_ns = rtlab_sys::clock::monotonic_ns();
    let config = &plan.config;
    let running = RunningStudy::start(config.clone(), Arc::clone(&stop))?;
    let bar = progress_bar(config.cell_count().max(1) as u64);
    while !running.is_finished() {
        std::thread::sleep(Duration::from_millis(if bar.is_some() { 100 } else { 250 }));
        if let Some(bar) = &bar {
            let done = running.progress().0;
            bar.set_position(done as u64);
            if let Some((interval, api, class)) = config.cell(done) {
                bar.set_message(format!(
                    "{} ({}) in {} at {}",
                    api.function(),
                    api.mode(),
                    class.name(),
                    millis_label(interval.0)
                ));
            }
        }
    }
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let result = running.finish()?;
    let measured_ns = rtlab_sys::clock::monotonic_ns() - began_ns;
    let interrupted = result.interrupted;
    let record = study_record(
        &plan,
        result,
        started,
        measured_ns,
        std::env::args().collect(),
    )?;
    let to_stdout = json_output.as_ref().is_some_and(PendingOutput::is_stdout);
    if !to_stdout {
        crate::output::print(&rtlab_render::timers::study(&record))?;
    }
    let study = record.timers.as_ref().expect("set above");
    for ((name, output), interval) in svg_outputs.into_iter().zip(&args.intervals) {
        let picture = interval_distributions(&study.rows, interval.0)?;
        commit_svg(args, &name, output, &picture, to_stdout)?;
    }
    store_and_write(&record, store, json_output, to_stdout, "timer study")?;
    Ok(if interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// Names one SVG file of `--svg` and says so (unless JSON goes to stdout).
fn commit_svg(
    args: &Args,
    name: &str,
    output: PendingOutput,
    picture: &str,
    quiet: bool,
) -> anyhow::Result<()> {
    output.commit(picture)?;
    if !quiet {
        let directory = args.svg.as_deref().unwrap_or(Path::new("."));
        println!("wrote {}", directory.join(name).display());
    }
    Ok(())
}

fn store_and_write(
    record: &RunRecord,
    store: Option<rtlab_store::Store>,
    json_output: Option<PendingOutput>,
    to_stdout: bool,
    summary: &str,
) -> anyhow::Result<()> {
    if let Some(store) = &store {
        store.insert(record, summary)?;
        if !to_stdout {
            let short_id: String = record.id.chars().take(8).collect();
            println!("\nstored as run {short_id} (rtlab show {short_id})");
        }
    }
    if let Some(output) = json_output {
        output.commit(&(record.to_json_pretty() + "\n"))?;
    }
    Ok(())
}

fn progress_bar(length: u64) -> Option<indicatif::ProgressBar> {
    if !std::io::stdout().is_terminal() || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(length);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}",
        )
        .expect("constant template"),
    );
    Some(bar)
}
