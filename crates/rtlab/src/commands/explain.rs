//! `rtlab explain RUN_ID|FILE`: re-prints the episodes of a run measured with `--explain`: the
//! worst late wake-ups with what delayed each (paper 002's Table 4, with names and durations) and
//! the run's top offenders. `--json` gives the same for machines, `--perfetto FILE` a trace
//! viewers open.

use crate::output::PendingOutput;
use rtlab_render::explain::{report, short_id, ExplainJson};
use rtlab_render::explain_perfetto::chrome_trace;
use std::process::ExitCode;

/// Schema of `rtlab explain --json` output.
pub const EXPLAIN_SCHEMA: &str = "rtlab.explain/1";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A run id (or unique prefix, or `latest`) from `rtlab history`, or a Run record JSON file
    pub run: String,
    #[command(flatten)]
    pub output: crate::output::ReprintJsonArgs,
    /// How many of the worst episodes to print (all with --json)
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub worst: usize,
    /// Also write the episodes as a Chrome trace-event JSON file (`-` for stdout) to open in
    /// ui.perfetto.dev or chrome://tracing: one track per series, each episode's causes in order
    #[arg(long, value_name = "FILE")]
    pub perfetto: Option<std::path::PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.output.prepare()?;
    let perfetto = args
        .perfetto
        .as_deref()
        .map(|path| PendingOutput::prepare(path, "--perfetto"))
        .transpose()?;
    let record = super::load_record(&args.run)?;
    let explained = record
        .config
        .explain
        .as_ref()
        .map(|explain| explain.recorded);
    if explained.is_none() && record.episodes.is_empty() {
        return Err(crate::exit::input(format!(
            "run {} was not measured with --explain: it has no episodes (rtlab run --explain records them)",
            short_id(&record)
        )));
    }
    if let Some(target) = perfetto {
        let to_stdout = target.is_stdout();
        target.commit(&serde_json::to_string(&chrome_trace(&record))?)?;
        if to_stdout {
            return Ok(ExitCode::SUCCESS);
        }
    }
    match json {
        Some(json) => {
            let output = ExplainJson::of(&record);
            let to_stdout = json.is_stdout();
            json.commit_json(EXPLAIN_SCHEMA, Some(record.host.clone()), &output)?;
            if !to_stdout {
                crate::output::print(&report(&record, args.worst))?;
            }
        }
        None => crate::output::print(&report(&record, args.worst))?,
    }
    Ok(ExitCode::SUCCESS)
}
