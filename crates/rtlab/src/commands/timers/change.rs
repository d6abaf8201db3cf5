//! `rtlab timers --change-experiment` and the hidden `rtlab timers-changer`: paper 004's pair.

use super::{commit_svg, last_online_cpu, open_store, prepare_svgs, store_and_write, Args};
use crate::output::PendingOutput;
use anyhow::Context as _;
use rtlab_probe::timers::change;
use rtlab_render::svg_timers::change_experiment;
use rtlab_session::timers::{change_config, change_record};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// `rtlab timers-changer` (hidden): the change experiment's other process.
#[derive(Debug, clap::Args)]
pub struct ChangerArgs {}

pub(super) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    // The changer must open /dev/cpu_dma_latency and write another task's
    // timerslack_ns, both root-only.
    if std::fs::OpenOptions::new()
        .write(true)
        .open(rtlab_sys::dma_latency::PATH)
        .is_err()
    {
        anyhow::bail!(
            "--change-experiment needs root: the other process holds {} and writes this thread's /proc/TID/timerslack_ns",
            rtlab_sys::dma_latency::PATH
        );
    }
    let cpu = match args.cpu {
        Some(cpu) => cpu,
        None => last_online_cpu()?,
    };
    let json_output = args.json.as_deref().map(PendingOutput::json).transpose()?;
    let svg_outputs = prepare_svgs(args.svg.as_deref(), &["change-experiment.svg".to_owned()])?;
    let store = open_store(args.no_store)?;
    let config = change_config(cpu, args.hold);
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop)
        .context("installing the SIGINT/SIGTERM handler")?;
    let mut changer = std::process::Command::new(
        std::env::current_exe().context("finding the rtlab binary to start the changer")?,
    );
    changer.arg("timers-changer");
    rtlab_sys::load_syscalls::configure_load_command(&mut changer);
    let to_stdout = json_output.as_ref().is_some_and(PendingOutput::is_stdout);
    if !to_stdout {
        eprintln!(
            "holding {} settings for {} each: {}",
            config.settings.len(),
            args.hold,
            config
                .settings
                .iter()
                .map(|setting| setting.describe())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let started = std::time::SystemTime::now();
    let began_ns = rtlab_sys::clock::monotonic_ns();
    let outcome = change::run(&config, changer, &stop)?;
    let measured_ns = rtlab_sys::clock::monotonic_ns() - began_ns;
    let svg = change_experiment(&outcome.experiment);
    let interrupted = outcome.interrupted;
    let record = change_record(
        &config,
        outcome,
        started,
        measured_ns,
        std::env::args().collect(),
    )?;
    if !to_stdout {
        crate::output::print(&rtlab_render::timers::study(&record))?;
    }
    for (name, output) in svg_outputs {
        commit_svg(args, &name, output, &svg, to_stdout)?;
    }
    store_and_write(&record, store, json_output, to_stdout, "change experiment")?;
    Ok(if interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// The hidden changer: serves commands from stdin until told to quit or stdin closes.
pub fn run_changer(_args: ChangerArgs) -> anyhow::Result<ExitCode> {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    change::serve_changer(stdin.lock(), stdout.lock()).context("serving the change experiment")?;
    Ok(ExitCode::SUCCESS)
}
