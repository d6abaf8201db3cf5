//! `rtlab compare A B`: before/after. Series matched by metric, class and CPU; percentiles side by
//! side with bootstrap intervals of the difference; missed periods; episode causes that appeared
//! or vanished; one plain verdict; `--fail-if-worse` for CI pipelines that gate kernel or
//! configuration changes.

use crate::output::PendingOutput;
use rtlab_analysis::compare::{compare, parse_threshold, CompareOptions, GateScope, Threshold};
use rtlab_render::compare::CompareJson;
use std::process::ExitCode;

/// The `schema` of `rtlab compare --json`.
pub const COMPARE_SCHEMA: &str = "rtlab.compare/1";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The baseline: a run id (or unique prefix, or `latest`), or a Run record JSON file
    /// (`rtlab import` turns cyclictest output into one)
    pub a: String,
    /// The run judged against A, in the same forms
    pub b: String,
    /// Exit 1 when B is worse than A at PCTL by more than LIMIT even at the lower end of the
    /// confidence interval: `p99.9:10%` (relative) or `p99:20us` (absolute); wake-up and
    /// hand-off series are gated
    #[arg(long, value_name = "PCTL:LIMIT", value_parser = parse_threshold_arg)]
    pub fail_if_worse: Option<Threshold>,
    /// Gate only series of these classes (comma-separated, e.g. rt-high,normal), or `all`;
    /// default: the series measured with a real-time policy (a SCHED_OTHER thread's tail moves
    /// with whatever else runs), or every series when none is
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "CLASS",
        requires = "fail_if_worse"
    )]
    pub gate_classes: Vec<String>,
    #[command(flatten)]
    pub output: crate::output::JsonArgs,
    /// Confidence of the bootstrap intervals, in percent
    #[arg(long, value_name = "PERCENT", default_value_t = 95.0, value_parser = crate::flags::confidence)]
    pub confidence: f64,
    /// Bootstrap resamples per percentile
    #[arg(long, value_name = "N", default_value_t = 2_000, value_parser = clap::value_parser!(u32).range(100..=1_000_000))]
    pub resamples: u32,
}

fn parse_threshold_arg(text: &str) -> Result<Threshold, String> {
    parse_threshold(text).map_err(|error| error.to_string())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.output.prepare()?;
    let record_a = super::load_record(&args.a)?;
    let record_b = super::load_record(&args.b)?;
    let options = CompareOptions {
        resamples: args.resamples,
        confidence: args.confidence / 100.0,
        ..CompareOptions::default()
    };
    let comparison = compare(&record_a, &record_b, &options)
        .map_err(|error| crate::exit::input(format!("{} against {}: {error}", args.b, args.a)))?;
    let gate = args
        .fail_if_worse
        .as_ref()
        .map(|threshold| comparison.gate(threshold, &GateScope::from_classes(&args.gate_classes)));
    let output = CompareJson::of(
        (&args.a, &record_a),
        (&args.b, &record_b),
        &comparison,
        gate.as_ref(),
    );
    let to_stdout = json.as_ref().is_some_and(PendingOutput::is_stdout);
    if !to_stdout {
        crate::output::print(&output.text())?;
    }
    if let Some(json) = json {
        let host = rtlab_sys::host::describe(None);
        json.commit_json(COMPARE_SCHEMA, Some(host), &output)?;
    }
    match gate {
        Some(gate) if !gate.breaches.is_empty() => Ok(ExitCode::from(crate::exit::CHECK_FAILED)),
        Some(gate) if gate.judged == 0 => Err(crate::exit::input(
            rtlab_render::compare::gate_unjudged(&gate.threshold),
        )),
        _ => Ok(ExitCode::SUCCESS),
    }
}
