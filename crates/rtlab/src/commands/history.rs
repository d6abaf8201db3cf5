//! `rtlab history`: the stored runs, newest first (the table is `rtlab_render::history`).

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many runs to list
    #[arg(short = 'n', long, default_value_t = 20)]
    pub limit: usize,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let store = rtlab_store::Store::open_default()?;
    let runs = store.list(args.limit)?;
    crate::output::print(&rtlab_render::history::table(&runs, store.path()))?;
    Ok(ExitCode::SUCCESS)
}
