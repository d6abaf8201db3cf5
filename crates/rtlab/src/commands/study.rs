//! `rtlab study media-player`: paper 003's Table 3-2 on this machine (`rtlab_workload::study`):
//! the nine experiments one after another, a progress line each, the table beside the paper's
//! column with the notes on where Linux differs, optional WAV files and `--json`.

use crate::output::PendingOutput;
use anyhow::Context as _;
use rtlab_core::Nanos;
use rtlab_workload::study::{self, ExperimentOutcome, EXPERIMENTS};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.study {
        Study::MediaPlayer(args) => media_player(args),
    }
}

fn media_player(args: MediaPlayerArgs) -> anyhow::Result<ExitCode> {
    if let Some(bad) = args
        .experiments
        .iter()
        .find(|number| !(1..=9).contains(*number))
    {
        return Err(crate::exit::input(format!(
            "--experiments: {bad} is not an experiment of Table 3-2 (1-9)"
        )));
    }
    let json = args.output.prepare()?;
    if let Some(directory) = &args.wav_dir {
        std::fs::create_dir_all(directory)
            .with_context(|| format!("--wav-dir: creating {}", directory.display()))?;
    }
    let to_stdout = json.as_ref().is_some_and(PendingOutput::is_stdout);
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop)
        .context("installing the SIGINT/SIGTERM handler")?;
    let cpu = study::study_cpu()?;
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let mut outcomes: Vec<ExperimentOutcome> = Vec::new();
    for experiment in EXPERIMENTS.iter().filter(|experiment| {
        args.experiments.is_empty() || args.experiments.contains(&experiment.number)
    }) {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        eprint!("experiment {} on CPU {cpu}… ", experiment.number);
        let mut outcome =
            study::run_experiment(experiment, args.duration, cpu, &stop).map_err(|error| {
                match &error {
                    study::StudyError::Run { source, .. } if source.is_input() => {
                        crate::exit::input(error)
                    }
                    _ => anyhow::Error::new(error),
                }
            })?;
        eprintln!("{} glitches", outcome.underruns);
        if let Some(directory) = &args.wav_dir {
            let path = directory.join(format!("experiment-{}.wav", experiment.number));
            rtlab_workload::wav::write_play_log(&path, 10_000_000, &outcome.play_log)?;
            outcome.wav = Some(path.display().to_string());
        }
        outcomes.push(outcome);
    }
    if !to_stdout {
        print!("{}", study::render_table(&outcomes, args.duration));
        print!("{}", study::render_notes(&outcomes));
        for outcome in &outcomes {
            for granted in &outcome.granted {
                println!("granted in {}: {granted}", outcome.experiment);
            }
        }
        if let Some(directory) = &args.wav_dir {
            println!("WAV files in {}", directory.display());
        }
    }
    if let Some(json) = json {
        let document = study::StudyJson {
            header: rtlab_core::OutputHeader {
                schema: "rtlab.study-media-player/1".to_owned(),
                tool_version: env!("CARGO_PKG_VERSION").to_owned(),
                cmdline: std::env::args().collect(),
                started_at,
                host: Some(rtlab_sys::host::describe(None)),
            },
            duration_ns: args.duration.0,
            cpu,
            experiments: &outcomes,
        };
        json.commit(&(serde_json::to_string_pretty(&document)? + "\n"))?;
    }
    Ok(crate::exit::finished(stop.load(Ordering::Relaxed)))
}
