//! `rtlab plan`: feeds a file of reservation requests to the planner, without enforcing anything,
//! and shows what would be granted, what denied and why, and each CPU's timeline. It exists so the
//! planner's admission and layout can be explored (and scripted, with `--json`) before reserving.

use crate::output::PendingOutput;
use anyhow::Context as _;
use rtlab_core::Nanos;
use rtlab_plan::{plan_requests, Request};
use std::process::ExitCode;

/// The `schema` of `rtlab plan --json`.
pub const PLAN_SCHEMA: &str = "rtlab.plan/1";

#[derive(Debug, clap::Args)]
#[command(
    after_help = "FILE holds one request per line, `OWNER AMOUNT/PERIOD` (e.g. `decoder 1ms/16ms`, \
`tid:4242 500us/10ms`), `#` starts a comment. Exit status: 0 when every request is granted, 1 when \
any is denied, 2 for a malformed file or flag."
)]
pub struct Args {
    /// Request file (`-` reads standard input)
    pub file: String,
    /// CPUs to plan for [default: the CPUs of this machine]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub cpus: Option<u16>,
    /// Base quantum: every granted period is a power-of-two multiple of it
    #[arg(long, value_name = "D", default_value = "1ms", value_parser = crate::flags::positive_duration)]
    pub quantum: Nanos,
    /// Largest fraction of a CPU that reservations may take, in (0, 1]
    #[arg(long, value_name = "F", default_value_t = rtlab_plan::DEFAULT_CAP)]
    pub cap: f64,
    #[command(flatten)]
    pub output: crate::output::JsonArgs,
}

fn read_requests(file: &str) -> anyhow::Result<Vec<Request>> {
    let text = if file == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading requests from standard input")?
    } else {
        std::fs::read_to_string(file)
            .map_err(|error| crate::exit::input(format!("reading {file}: {error}")))?
    };
    rtlab_plan::parse_requests(&text)
        .map_err(|error| crate::exit::input(format!("{file}: {error}")))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let n_cpus = match args.cpus {
        Some(cpus) => usize::from(cpus),
        None => std::thread::available_parallelism().map_or(1, usize::from),
    };
    let json = args.output.prepare()?;
    let requests = read_requests(&args.file)?;
    let report = plan_requests(n_cpus, args.quantum, args.cap, &requests)
        .map_err(|error| anyhow::Error::new(error).context("--cap/--cpus/--quantum"))?;
    let to_stdout = json.as_ref().is_some_and(PendingOutput::is_stdout);
    if let Some(json) = json {
        json.commit_json(PLAN_SCHEMA, None, &report)?;
    }
    if !to_stdout {
        crate::output::print(&rtlab_render::plan::text(&report))?;
    }
    Ok(crate::exit::checked(report.denied.is_empty()))
}
