//! `rtlab show`: re-prints a stored run or a Run record file.

use crate::output::PendingOutput;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A run id (or unique prefix, or `latest`) from `rtlab history`, or a Run record JSON file
    pub run: String,
    #[command(flatten)]
    pub output: crate::output::ReprintJsonArgs,
    /// With --json: write every series' `max_per_second` and `peaks` as plain JSON arrays, not
    /// packed (`rtlab-packed/1`), so jq and pandas can read them; rtlab reads both
    #[arg(long, requires = "json")]
    pub plain: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.output.prepare()?;
    let mut record = super::load_record(&args.run)?;
    // Records made before tail projection existed (or imported ones) get it computed now.
    let usage = rtlab_session::usage_of_record(&record);
    rtlab_session::attach_tails(&mut record, &usage, false);
    let to_stdout = json.as_ref().is_some_and(PendingOutput::is_stdout);
    if let Some(json) = json {
        let text = if args.plain {
            record.to_json_pretty_plain()
        } else {
            record.to_json_pretty()
        };
        json.commit(&(text + "\n"))?;
    }
    if !to_stdout {
        crate::output::print(&rtlab_render::run_verdict::stored_run(&record))?;
    }
    Ok(ExitCode::SUCCESS)
}
