//! `rtlab timers`: what each Linux timer API really delivers per scheduling class (paper 000 §4.1),
//! `--audit` of the settings that change everyone's timing, and `--change-experiment`, paper
//! 004's measure/change pair. Flags, progress and printing only: the plan, the measuring loop and
//! the record are `rtlab_session::timers`, the text and SVG `rtlab_render`.

mod audit;
mod change;

pub use change::{run_changer, ChangerArgs};

use crate::output::{PendingOutput, RecordOutputs};
use rtlab_core::{Nanos, RunRecord};
use rtlab_probe::timers::TimerClass;
use rtlab_render::svg_timers::{study_file_names, study_pictures};
use rtlab_session::timers::{run_study, StudyRequest, TimersError};
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
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
    #[command(flatten)]
    pub record: crate::output::RecordArgs,
    /// Write the plots as SVG files into DIR (created if missing)
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
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

/// A session error naming the flag it is about.
fn session_error(error: TimersError) -> anyhow::Error {
    let setting = error.setting();
    crate::flags::naming_flag(error, setting)
}

/// The SVG files of a run, opened before measuring (a bad directory fails at once).
fn prepare_svgs(
    directory: Option<&Path>,
    names: &[String],
) -> anyhow::Result<Vec<(PathBuf, PendingOutput)>> {
    match directory {
        Some(directory) => Ok(PendingOutput::prepare_in(directory, names, "--svg")?),
        None => Ok(Vec::new()),
    }
}

/// Names the SVG files of `--svg` and says so (unless JSON goes to stdout).
fn commit_svgs(
    svgs: Vec<(PathBuf, PendingOutput)>,
    pictures: Vec<String>,
    quiet: bool,
) -> anyhow::Result<()> {
    for ((path, output), picture) in svgs.into_iter().zip(pictures) {
        output.commit(&picture)?;
        if !quiet {
            println!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// Prints the study (unless JSON goes to stdout), writes its files and stores it.
fn finish(
    record: &RunRecord,
    outputs: RecordOutputs,
    svgs: Vec<(PathBuf, PendingOutput)>,
    pictures: Vec<String>,
    summary: &str,
) -> anyhow::Result<ExitCode> {
    let quiet = outputs.json_to_stdout();
    if !quiet {
        crate::output::print(&rtlab_render::timers::study(record))?;
    }
    commit_svgs(svgs, pictures, quiet)?;
    outputs.finish(record, summary, false)?;
    Ok(crate::exit::finished(record.interrupted))
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

fn study(args: &Args) -> anyhow::Result<ExitCode> {
    let request = StudyRequest {
        apis: args.apis.clone(),
        classes: args.classes.clone(),
        intervals: args.intervals.clone(),
        duration: args.duration,
        cpu: args.cpu,
    };
    let plan = request.plan().map_err(session_error)?;
    let outputs = RecordOutputs::open(&args.record)?;
    let svgs = prepare_svgs(args.svg.as_deref(), &study_file_names(&args.intervals))?;
    let stop = super::stop_flag()?;
    let bar = progress_bar(plan.config.cell_count().max(1) as u64);
    let poll = Duration::from_millis(if bar.is_some() { 100 } else { 250 });
    let record = run_study(
        &plan,
        stop,
        poll,
        &mut |done, cell| {
            if let (Some(bar), Some((interval, api, class))) = (&bar, cell) {
                bar.set_position(done as u64);
                bar.set_message(rtlab_render::timers::cell_progress(
                    api.function(),
                    api.mode(),
                    class.name(),
                    interval,
                ));
            }
        },
        std::env::args().collect(),
    )?;
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let pictures = match svgs.is_empty() {
        true => Vec::new(),
        false => study_pictures(
            &record.timers.as_ref().expect("a study").rows,
            &args.intervals,
        )?,
    };
    finish(&record, outputs, svgs, pictures, "timer study")
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
