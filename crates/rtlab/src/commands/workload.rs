//! `rtlab workload FILE`: runs a workload model (rtlab TOML or rt-app JSON) on real threads and
//! prints what the user would notice — underruns, deadline misses, starvations — beside each
//! thread's response times (`rtlab_workload`). Flags, progress and printing only.

use crate::output::PendingOutput;
use anyhow::Context as _;
use rtlab_core::Nanos;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workload: rtlab TOML (see examples/media-player.toml) or an rt-app JSON task file
    pub file: String,
    /// How long to run (default: the file's `duration`, else 10s)
    #[arg(short = 'D', long, value_parser = crate::flags::duration)]
    pub duration: Option<Nanos>,
    /// A competing spinner POLICY:PRIO[@CPU] (other:0, rr:9@1, fifo:10@1); repeatable. It stops on its own at the end
    #[arg(long, value_name = "POLICY:PRIO[@CPU]")]
    pub competitor: Vec<String>,
    /// Load during the run: a profile and/or stressors, as `rtlab run --load`
    #[arg(long, value_name = "SPEC")]
    pub load: Option<String>,
    /// Run RT competitors even when RT throttling is off
    #[arg(long)]
    pub force: bool,
    /// Write what the (first) device played as a WAV file: 440 Hz, one silent period per underrun
    #[arg(long, value_name = "FILE")]
    pub wav: Option<PathBuf>,
    /// Write the Run record to FILE (`-` for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Do not store the record in the run history
    #[arg(long)]
    pub no_store: bool,
    /// Trace the run and name the cause of each underrun and deadline miss (needs root and tracefs)
    #[arg(long)]
    pub explain: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (workload, format) =
        rtlab_workload::read_workload(&args.file).map_err(crate::exit::input)?;
    let json = args.json.as_deref().map(PendingOutput::json).transpose()?;
    if workload.rings.iter().all(|ring| ring.device.is_none()) && args.wav.is_some() {
        return Err(crate::exit::input(format!(
            "--wav: {} has no [[device]] to record",
            args.file
        )));
    }
    let duration = args
        .duration
        .or(workload.duration)
        .unwrap_or(Nanos::from_secs(10));
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop)
        .context("installing the SIGINT/SIGTERM handler")?;
    let settings = rtlab_workload::runner::RunSettings {
        duration,
        competitors: args.competitor.clone(),
        load: args.load.clone(),
        force: args.force,
        keep_play_log: args.wav.is_some(),
        explain: args.explain,
    };
    let to_stdout = json.as_ref().is_some_and(PendingOutput::is_stdout);
    if !to_stdout {
        let threads = workload.threads.len();
        eprintln!(
            "{}",
            rtlab_render::workload::start_line(&workload.name, threads, duration)
        );
    }
    let result = rtlab_workload::runner::run(&workload, &settings, &stop).map_err(|error| {
        if error.is_input() {
            crate::exit::input(error)
        } else {
            anyhow::Error::new(error)
        }
    })?;
    let record = rtlab_workload::record::build(
        &workload,
        &result,
        &rtlab_workload::record::Source {
            path: args.file.clone(),
            format: format.to_owned(),
            cmdline: std::env::args().collect(),
        },
    )?;
    if let Some(path) = &args.wav {
        if let Some(device) = result.devices.first() {
            rtlab_workload::wav::write_play_log(path, device.buffer_period.0, &device.play_log)?;
        }
    }
    if !to_stdout {
        crate::output::print(&rtlab_render::workload::outcome(&record))?;
        if let Some(path) = &args.wav {
            println!("wrote {}", path.display());
        }
    }
    if !args.no_store && !record.series.is_empty() {
        let store = rtlab_store::Store::open_default()?;
        store.insert(&record, "workload")?;
        if !to_stdout {
            println!("stored as run {}", record.id);
        }
    }
    if let Some(json) = json {
        json.commit(&(record.to_json_pretty() + "\n"))?;
    }
    Ok(crate::exit::finished(result.interrupted))
}
