//! `rtlab forecast`: what a run's latency distribution means for applications with `n` buffers of
//! `t` ms — the mean time to buffer underrun (paper 002 §5), a table over buffer counts like its
//! Figures 6-7, the least buffering that reaches a target, and a plain verdict per class.

pub(crate) mod text;

use crate::output::PendingOutput;
use anyhow::Context as _;
use rtlab_analysis::classes::{builtin_classes, parse_classes, parse_rate, Rate};
use rtlab_analysis::forecast::{
    buffer_table, default_periods, forecast, least_buffering, select_series, BufferConfig,
    Forecast, LatencyEvidence, Model, TailModel, VerdictKind, CONFIDENCE,
};
use rtlab_analysis::projection::ProjectedTail;
use rtlab_core::{Nanos, RunRecord};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;
use text::{describe_mttf, describe_seconds, model_description, verdict, Verdict};

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ModelArg {
    /// One wake-up per buffer period: MTTF = t / P(late)
    PerPeriod,
    /// Paper 002 §5: MTTF = (n−1)·t / P(late), exact for double buffering only
    Paper002,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A run id (or unique prefix, or `latest`) from `rtlab history`, or a Run record JSON file
    pub run: String,
    /// Forecast for one application class (see the list with no --class); exit 1 if unsuitable
    #[arg(long, value_name = "NAME", conflicts_with_all = ["buffers", "buffer_ms"])]
    pub class: Option<String>,
    /// More classes, from a TOML file of [[class]] tables (name, buffers, buffer, compute, acceptable)
    #[arg(long, value_name = "FILE")]
    pub classes_file: Option<PathBuf>,
    /// Number of buffers n (with --buffer-ms)
    #[arg(long, value_name = "N", requires = "buffer_ms")]
    pub buffers: Option<u32>,
    /// Length of one buffer t, in ms (the wake-up period)
    #[arg(long, value_name = "T", value_parser = parse_millis)]
    pub buffer_ms: Option<Nanos>,
    /// Compute time per buffer c, in ms
    #[arg(long, value_name = "C", value_parser = parse_millis)]
    pub compute_ms: Option<Nanos>,
    /// Which series to read (default: rt-high/wakeup pooled over CPUs)
    #[arg(long, value_name = "CLASS/METRIC")]
    pub series: Option<String>,
    /// Find the least buffering whose MTTF reaches this rate (1/day, 1/hour, 1/10min)
    #[arg(long, value_name = "RATE", value_parser = parse_rate_arg)]
    pub target: Option<Rate>,
    /// How failures per wake-up become failures per second
    #[arg(long, value_enum, default_value = "per-period")]
    pub model: ModelArg,
    /// Write the forecast as JSON to FILE (`-` for stdout, replacing the tables)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

fn parse_millis(text: &str) -> Result<Nanos, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a number of milliseconds"))?;
    if !(value.is_finite() && (0.0..1e9).contains(&value)) {
        return Err(format!("'{text}' is not a usable number of milliseconds"));
    }
    Ok(Nanos((value * 1e6).round() as u64))
}

fn parse_rate_arg(text: &str) -> Result<Rate, String> {
    parse_rate(text).map_err(|error| error.to_string())
}

/// One row of the JSON output.
#[derive(Serialize)]
struct Row {
    #[serde(skip_serializing_if = "Option::is_none")]
    class: Option<String>,
    #[serde(flatten)]
    forecast: Forecast,
    #[serde(skip_serializing_if = "Option::is_none")]
    verdict: Option<Verdict>,
}

#[derive(Serialize)]
struct Output {
    schema: &'static str,
    tool_version: &'static str,
    cmdline: Vec<String>,
    started_at: String,
    host: rtlab_core::Host,
    run_id: String,
    series: String,
    cpus: Vec<u32>,
    samples: u64,
    observed_max_ns: u64,
    missed_restored: u64,
    missed_unknown: u64,
    model: Model,
    model_description: &'static str,
    tail_projection: Option<String>,
    tail_refused: Option<String>,
    confidence: f64,
    rows: Vec<Row>,
    #[serde(skip_serializing_if = "Option::is_none")]
    least_buffering: Option<LeastBuffering>,
}

#[derive(Serialize)]
struct LeastBuffering {
    target_mttf_s: f64,
    found: Option<Forecast>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json.as_deref().map(PendingOutput::json).transpose()?;
    let record = super::load_record(&args.run)?;
    let selection = select_series(&record, args.series.as_deref())
        .map_err(|error| crate::exit::input(format!("{}: {error}", args.run)))?;
    let model = match args.model {
        ModelArg::PerPeriod => Model::PerPeriod,
        ModelArg::Paper002 => Model::Paper002,
    };
    let mut classes = builtin_classes();
    if let Some(path) = &args.classes_file {
        let text = std::fs::read_to_string(path).map_err(|error| {
            crate::exit::input(format!("--classes-file {}: {error}", path.display()))
        })?;
        let extra = parse_classes(&text)
            .map_err(|error| crate::exit::input(format!("{}: {error}", path.display())))?;
        for class in extra {
            classes.retain(|existing| existing.name != class.name);
            classes.push(class);
        }
    }
    let (tail, tail_refused) = match ProjectedTail::fit(&selection.histogram) {
        Ok(tail) => (Some(tail), None),
        Err(reason) => (None, Some(reason)),
    };
    let evidence = LatencyEvidence {
        histogram: &selection.histogram,
        tail: tail.as_ref().map(|tail| tail as &dyn TailModel),
    };
    let compute = args.compute_ms.unwrap_or(Nanos::ZERO);
    let mut rows = Vec::new();
    let mut exit = ExitCode::SUCCESS;
    let mut table: Option<(Nanos, Nanos, u32)> = None;
    let mut search: Option<(Rate, Vec<Nanos>, Nanos)> = None;
    if let Some(name) = &args.class {
        let class = classes
            .iter()
            .find(|class| &class.name == name)
            .ok_or_else(|| {
                crate::exit::input(format!(
                    "--class: no class '{name}' (known: {})",
                    classes
                        .iter()
                        .map(|class| class.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        let mut config = BufferConfig::of_class(class);
        if let Some(compute) = args.compute_ms {
            config.compute = compute;
        }
        let row = forecast(evidence, config, model).map_err(crate::exit::input)?;
        let class_verdict = verdict(class, &row);
        if class_verdict.kind == VerdictKind::NotSuitable {
            exit = ExitCode::from(crate::exit::CHECK_FAILED);
        }
        rows.push(Row {
            class: Some(class.name.clone()),
            forecast: row,
            verdict: Some(class_verdict),
        });
        table = Some((
            config.buffer_period,
            config.compute,
            config.buffers.max(2) + 4,
        ));
        search = Some((
            args.target.unwrap_or(class.acceptable),
            vec![config.buffer_period],
            config.compute,
        ));
    } else if let Some(buffer_period) = args.buffer_ms {
        let buffers = args.buffers.unwrap_or(2);
        if buffer_period.0 == 0 {
            return Err(crate::exit::input("--buffer-ms: must be more than 0"));
        }
        let config = BufferConfig {
            buffers,
            buffer_period,
            compute,
        };
        let row = forecast(evidence, config, model)
            .map_err(|error| crate::exit::input(format!("--buffers: {error}")))?;
        rows.push(Row {
            class: None,
            forecast: row,
            verdict: None,
        });
        table = Some((buffer_period, compute, (buffers + 4).max(8)));
        if let Some(target) = args.target {
            search = Some((target, vec![buffer_period], compute));
        }
    } else {
        for class in &classes {
            let mut config = BufferConfig::of_class(class);
            if let Some(compute) = args.compute_ms {
                config.compute = compute;
            }
            let row = forecast(evidence, config, model).map_err(crate::exit::input)?;
            let class_verdict = verdict(class, &row);
            rows.push(Row {
                class: Some(class.name.clone()),
                forecast: row,
                verdict: Some(class_verdict),
            });
        }
        if let Some(target) = args.target {
            search = Some((target, default_periods(), compute));
        }
    }
    let least = match &search {
        Some((target, periods, compute)) => Some(LeastBuffering {
            target_mttf_s: target.mean_interval_s(),
            found: least_buffering(evidence, *target, periods, *compute, 64, model)
                .map_err(crate::exit::input)?,
        }),
        None => None,
    };
    let table_rows = match table {
        Some((period, compute, max_buffers)) => {
            buffer_table(evidence, period, compute, max_buffers, model)
                .map_err(crate::exit::input)?
        }
        None => Vec::new(),
    };
    let output = Output {
        schema: "rtlab.forecast/1",
        tool_version: env!("CARGO_PKG_VERSION"),
        cmdline: std::env::args().collect(),
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        host: record.host.clone(),
        run_id: record.id.clone(),
        series: selection.label.clone(),
        cpus: selection.cpus.clone(),
        samples: selection.histogram.count(),
        observed_max_ns: selection.histogram.max(),
        missed_restored: selection.missed_restored,
        missed_unknown: selection.missed_unknown,
        model,
        model_description: model_description(model),
        tail_projection: tail.as_ref().map(|tail| tail.describe()),
        tail_refused,
        confidence: CONFIDENCE,
        rows,
        least_buffering: least,
    };
    let to_stdout = json.as_ref().is_some_and(PendingOutput::is_stdout);
    if !to_stdout {
        let mut out = std::io::stdout().lock();
        write_report(
            &mut out,
            &record,
            &output,
            &table_rows,
            args.target.is_some(),
        )?;
    }
    if let Some(json) = json {
        let text =
            serde_json::to_string_pretty(&output).context("serialising the forecast")? + "\n";
        json.commit(&text)?;
    }
    Ok(exit)
}

fn micros(nanos: u64) -> String {
    crate::render::micros(nanos)
}

fn millis(nanos: u64) -> String {
    let text = format!("{:.3}", nanos as f64 / 1e6);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn mttf_cells(row: &Forecast) -> (String, String) {
    let estimate = row
        .mttf_s
        .map(describe_seconds)
        .unwrap_or_else(|| match row.mttf_ci_s[0] {
            Some(lower) => format!("> {}", describe_seconds(lower)),
            None => "-".to_owned(),
        });
    let interval = match row.mttf_ci_s {
        [Some(low), Some(high)] => {
            format!("{} – {}", describe_seconds(low), describe_seconds(high))
        }
        [Some(low), None] => format!("> {}", describe_seconds(low)),
        _ => "-".to_owned(),
    };
    (estimate, interval)
}

fn write_report(
    out: &mut impl std::io::Write,
    record: &RunRecord,
    output: &Output,
    table: &[Forecast],
    asked_target: bool,
) -> std::io::Result<()> {
    writeln!(
        out,
        "run {}  series {} pooled over CPU {}  {} wake-ups, worst {} µs",
        record.id,
        output.series,
        output
            .cpus
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
        output.samples,
        micros(output.observed_max_ns)
    )?;
    writeln!(out, "model: {}", output.model_description)?;
    if output.missed_restored > 0 || output.missed_unknown > 0 {
        writeln!(
            out,
            "periods the probe skipped after a late wake-up count as wake-ups: {} restored from the largest samples{}",
            output.missed_restored,
            if output.missed_unknown > 0 {
                format!(
                    ", {} not (their latency is unknown: the forecast flatters the machine by that much)",
                    output.missed_unknown
                )
            } else {
                String::new()
            }
        )?;
    }
    match &output.tail_projection {
        Some(tail) => writeln!(out, "beyond the observed data: {tail}")?,
        None => writeln!(
            out,
            "beyond the observed data ({} µs): no tail projection ({}), so slack beyond it is beyond what the data supports",
            micros(output.observed_max_ns),
            output.tail_refused.as_deref().unwrap_or("not fitted")
        )?,
    }
    let confidence = (CONFIDENCE * 100.0).round();
    writeln!(out)?;
    for row in &output.rows {
        match (&row.class, &row.verdict) {
            (Some(class), Some(verdict)) => {
                writeln!(out, "{class:<22} {}", verdict.text)?;
            }
            _ => {
                let forecast = &row.forecast;
                writeln!(
                    out,
                    "{} buffers × {} ms, compute {} ms: slack {} ms; {}",
                    forecast.buffers,
                    millis(forecast.buffer_period_ns),
                    millis(forecast.compute_ns),
                    millis(forecast.slack_ns.max(0) as u64),
                    describe_mttf(forecast, "underrun")
                )?;
            }
        }
    }
    if !table.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "mean time to underrun by number of buffers (t = {} ms, c = {} ms; paper 002 Figures 6-7)",
            millis(table[0].buffer_period_ns),
            millis(table[0].compute_ns)
        )?;
        writeln!(
            out,
            "{:>3} {:>11} {:>10} {:>9} {:>12} {:>24}",
            "n",
            "(n−1)·t ms",
            "slack ms",
            "late",
            "MTTF",
            format!("{confidence} % CI")
        )?;
        for row in table {
            let (estimate, interval) = mttf_cells(row);
            let late = match &row.basis {
                rtlab_analysis::forecast::Basis::Observed { late, .. } => late.to_string(),
                rtlab_analysis::forecast::Basis::BeyondData { .. } => "0".to_owned(),
                rtlab_analysis::forecast::Basis::TailProjection { .. } => "tail".to_owned(),
                rtlab_analysis::forecast::Basis::NoSlack => "all".to_owned(),
            };
            writeln!(
                out,
                "{:>3} {:>11} {:>10} {:>9} {:>12} {:>24}",
                row.buffers,
                millis(row.config().buffering().0),
                millis(row.slack_ns.max(0) as u64),
                late,
                estimate,
                interval
            )?;
        }
    }
    if let Some(least) = &output.least_buffering {
        writeln!(out)?;
        let target = describe_seconds(least.target_mttf_s);
        match &least.found {
            Some(found) => {
                let (estimate, _) = mttf_cells(found);
                writeln!(
                    out,
                    "least buffering for one underrun per {target} or fewer: {} buffers × {} ms ((n−1)·t = {} ms), MTTF {estimate}",
                    found.buffers,
                    millis(found.buffer_period_ns),
                    millis(found.config().buffering().0)
                )?;
            }
            None => writeln!(
                out,
                "no configuration searched is known to reach one underrun per {target}: {}",
                if asked_target {
                    "the data supports no MTTF that long (measure longer or under the real load)"
                } else {
                    "measure longer or under the real load"
                }
            )?,
        }
    }
    Ok(())
}
