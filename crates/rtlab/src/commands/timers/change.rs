//! `rtlab timers --change-experiment` and the hidden `rtlab timers-changer`: paper 004's pair.

use super::{finish, prepare_svgs, Args};
use crate::output::RecordOutputs;
use anyhow::Context as _;
use rtlab_probe::timers::change;
use rtlab_render::svg_timers::{change_experiment, CHANGE_EXPERIMENT_FILE};
use rtlab_session::timers::{change_config, default_cpu, run_change_experiment};
use std::process::ExitCode;

/// `rtlab timers-changer` (hidden): the change experiment's other process.
#[derive(Debug, clap::Args)]
pub struct ChangerArgs {}

pub(super) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let cpu = match args.cpu {
        Some(cpu) => cpu,
        None => default_cpu()?,
    };
    let outputs = RecordOutputs::open(&args.record)?;
    let svgs = prepare_svgs(args.svg.as_deref(), &[CHANGE_EXPERIMENT_FILE.to_owned()])?;
    let config = change_config(cpu, args.hold);
    let stop = super::super::stop_flag()?;
    let mut changer = std::process::Command::new(
        std::env::current_exe().context("finding the rtlab binary to start the changer")?,
    );
    changer.arg("timers-changer");
    if !outputs.json_to_stdout() {
        eprint!("{}", rtlab_render::timers::change_plan(&config));
    }
    let record = run_change_experiment(&config, changer, &stop, std::env::args().collect())
        .context("--change-experiment")?;
    let experiment = record
        .timers
        .as_ref()
        .and_then(|study| study.change_experiment.as_ref())
        .expect("a change experiment's record");
    let pictures = vec![change_experiment(experiment)];
    finish(&record, outputs, svgs, pictures, "change experiment")
}

/// The hidden changer: serves commands from stdin until told to quit or stdin closes.
pub fn run_changer(_args: ChangerArgs) -> anyhow::Result<ExitCode> {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    change::serve_changer(stdin.lock(), stdout.lock()).context("serving the change experiment")?;
    Ok(ExitCode::SUCCESS)
}
