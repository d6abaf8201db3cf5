//! `rtlab report RUN… --html FILE`: one self-contained HTML report (inline CSS and SVG, no script,
//! no network) of one or several runs, for people who read plots rather than tables.

use crate::output::PendingOutput;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Runs to report: ids (or unique prefixes, or `latest`) or Run record JSON files
    #[arg(required = true, value_name = "RUN")]
    pub runs: Vec<String>,
    /// Write the HTML report to FILE (`-` for stdout)
    #[arg(long, value_name = "FILE", required = true)]
    pub html: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let output = PendingOutput::prepare(&args.html, "--html")?;
    let records = args
        .runs
        .iter()
        .map(|run| super::load_record(run))
        .collect::<anyhow::Result<Vec<_>>>()?;
    output.commit(&rtlab_render::report_html::render(&records))?;
    Ok(ExitCode::SUCCESS)
}
