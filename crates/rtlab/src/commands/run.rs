//! `rtlab run` (being written; the foundation issue fills this in).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("rtlab run is being written")
}
