//! `rtlab study media-player`: paper 003's Table 3-2 on this machine (`rtlab_workload::study`):
//! the nine experiments one after another, a progress line each, the table beside the paper's
//! column with the notes on where Linux differs, optional WAV files and `--json`.

use crate::output::PendingOutput;
use rtlab_core::Nanos;
use rtlab_workload::study_run::{self, StudyRequest, StudyRunError};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub study: Study,
}

#[derive(Debug, clap::Subcommand)]
pub enum Study {
    /// Paper 003 Table 3-2: Windows Media Player against a competitor, with and without reservations
    MediaPlayer(MediaPlayerArgs),
}

#[derive(Debug, clap::Args)]
pub struct MediaPlayerArgs {
    /// How long each experiment runs
    #[arg(short = 'D', long, default_value = "5s", value_parser = crate::flags::duration)]
    pub duration: Nanos,
    /// Only these experiments (1-9, comma-separated)
    #[arg(long, value_delimiter = ',')]
    pub experiments: Vec<u32>,
    /// Write experiment-N.wav per experiment into DIR (440 Hz, one silent 10 ms per glitch)
    #[arg(long, value_name = "DIR")]
    pub wav_dir: Option<PathBuf>,
    #[command(flatten)]
    pub output: crate::output::JsonArgs,
    /// Trace each experiment and name the cause of each glitch (needs root and tracefs)
    #[arg(long)]
    pub explain: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.study {
        Study::MediaPlayer(args) => media_player(args),
    }
}

fn media_player(args: MediaPlayerArgs) -> anyhow::Result<ExitCode> {
    let request = StudyRequest {
        experiments: args.experiments.clone(),
        duration: args.duration,
        wav_dir: args.wav_dir.clone(),
        explain: args.explain,
    };
    let study_error = |error: StudyRunError| {
        let setting = error.setting();
        crate::flags::naming_flag(error, setting)
    };
    study_run::select(&request).map_err(study_error)?;
    let json = args.output.prepare()?;
    let to_stdout = json.as_ref().is_some_and(PendingOutput::is_stdout);
    let stop = super::stop_flag()?;
    let study = study_run::run_study(
        &request,
        &stop,
        &mut |experiment, cpu, outcome| match outcome {
            None => eprint!("experiment {} on CPU {cpu}… ", experiment.number),
            Some(outcome) => eprintln!("{} glitches", outcome.underruns),
        },
    )
    .map_err(study_error)?;
    if !to_stdout {
        let mut text = study.report(args.duration);
        text.push_str(&rtlab_render::workload::study_glitches(&study.glitches()));
        if let Some(directory) = &args.wav_dir {
            text.push_str(&format!("WAV files in {}\n", directory.display()));
        }
        crate::output::print(&text)?;
    }
    if let Some(json) = json {
        json.commit(&study.to_json(args.duration)?)?;
    }
    Ok(crate::exit::finished(study.interrupted))
}
