//! `rtlab show`: re-prints a stored run or a Run record file.

use std::io::Write as _;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A run id (or unique prefix, or `latest`) from `rtlab history`, or a Run record JSON file
    pub run: String,
    /// Print the whole Run record as JSON instead of the summary
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut record = super::load_record(&args.run)?;
    // Records made before tail projection existed (or imported ones) get it computed now.
    let usage = rtlab_session::usage_of_record(&record);
    rtlab_session::attach_tails(&mut record, &usage, false);
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", record.to_json_pretty())?;
    } else {
        crate::render::write_summary(&mut out, &record)?;
    }
    Ok(ExitCode::SUCCESS)
}
