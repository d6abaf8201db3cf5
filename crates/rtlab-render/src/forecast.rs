//! `rtlab forecast`'s report.

use crate::summary::micros;
use rtlab_analysis::forecast::{describe_seconds, Forecast, CONFIDENCE};
use rtlab_analysis::forecast::{Basis, Counting};
use rtlab_analysis::forecast_periodic::{describe_answer, PeriodicAnswer};
use rtlab_analysis::forecast_study::ForecastStudy;

/// `no class 'NAME' (known: …)`: `--for`'s refusal of a name that is no built-in application
/// class, listing the classes there are.
pub fn unknown_class(name: &str) -> String {
    format!(
        "no class '{name}' (known: {})",
        rtlab_analysis::classes::builtin_classes()
            .iter()
            .map(|class| class.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// How the row's application counts a stall's failures (restart where the model does not say).
fn counting_of(forecast: &Forecast) -> Counting {
    match &forecast.basis {
        Basis::Response { counting, .. } => *counting,
        _ => Counting::Restart,
    }
}

fn millis(nanos: u64) -> String {
    let text = format!("{:.3}", nanos as f64 / 1e6);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A row's MTTF as the buffer table shows it: the estimate and its confidence interval.
struct MttfCells {
    estimate: String,
    interval: String,
}

/// The MTTF cells of `row`: `-` where there is no estimate or no interval.
fn mttf_cells(row: &Forecast) -> MttfCells {
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
    MttfCells { estimate, interval }
}

/// The forecast as text: [`write_report`].
pub fn report(output: &ForecastStudy) -> String {
    crate::to_text(|out| write_report(out, output))
}

/// Writes the forecast report: the series, the model, a line per class (or configuration), the
/// buffer table and the least buffering.
pub fn write_report(out: &mut impl std::fmt::Write, output: &ForecastStudy) -> std::fmt::Result {
    write_header(out, output)?;
    write_response_stalls(out, output)?;
    for found in &output.periodic {
        writeln!(out, "periodic: {}", found.text)?;
    }
    writeln!(out)?;
    write_rows(out, output)?;
    write_buffer_table(out, output)?;
    write_least_buffering(out, output)
}

/// Writes the series, the model, the missed periods counted and what lies beyond the data.
fn write_header(out: &mut impl std::fmt::Write, output: &ForecastStudy) -> std::fmt::Result {
    writeln!(
        out,
        "run {}  series {} pooled over CPU {}  {} wake-ups, worst {} µs",
        output.run_id,
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
    let response_model = output.model == rtlab_analysis::forecast::Model::Response;
    if !response_model && (output.missed_restored > 0 || output.missed_unknown > 0) {
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
        // The response model counts stalls; it reads no tail projection.
        _ if response_model => {}
        Some(tail) => writeln!(out, "beyond the observed data: {tail}")?,
        None => writeln!(
            out,
            "beyond the observed data ({} µs): no tail projection ({}), so slack beyond it is beyond what the data supports",
            micros(output.observed_max_ns),
            output.tail_refused.as_deref().unwrap_or("not fitted")
        )?,
    }
    Ok(())
}

/// Writes the stalls the response model counted, when the first row is on that model.
fn write_response_stalls(
    out: &mut impl std::fmt::Write,
    output: &ForecastStudy,
) -> std::fmt::Result {
    let Some(rtlab_analysis::forecast::Basis::Response {
        terms,
        probe_compute_ns,
        ..
    }) = output.rows.first().map(|row| &row.forecast.basis)
    else {
        return Ok(());
    };
    let compute = match (terms.compute_per_s, probe_compute_ns) {
        (Some(rate), Some(probe_compute)) => format!(
            "{} stalls longer than the slack during the probe's {} µs of work after each wake-up ({:.3}/s for this compute)",
            terms.late_computes.unwrap_or(0),
            micros(*probe_compute),
            rate
        ),
        _ => "stalls during the compute not measured (measure with `rtlab run --compute TIME`)".to_owned(),
    };
    writeln!(
        out,
        "stalls: {} late wake-ups counted on {} CPU(s) of the chain ({:.3}/s); {compute}",
        terms.late_wakeups, terms.chain_cpus, terms.wakeup_per_s
    )
}

/// Writes one line per class (its verdict) or per configuration (its slack and MTTF).
fn write_rows(out: &mut impl std::fmt::Write, output: &ForecastStudy) -> std::fmt::Result {
    for row in &output.rows {
        match (&row.class, &row.verdict) {
            (Some(class), Some(verdict)) => {
                writeln!(out, "{class:<22} {}", verdict.text)?;
            }
            _ => {
                let forecast = &row.forecast;
                // Beside a periodic interferer: its range over alignments, or why there is none.
                let answer = match (&row.alignment, &row.refused) {
                    (Some(alignment), _) => Some(describe_answer(
                        &PeriodicAnswer::Alignment(alignment.clone()),
                        "underrun",
                        counting_of(forecast),
                    )),
                    (_, Some(refusal)) => Some(refusal.text.clone()),
                    _ => None,
                };
                let counted = match &forecast.basis {
                    rtlab_analysis::forecast::Basis::Response { counting, .. } => {
                        format!("; counting {}", counting.describe("underrun"))
                    }
                    _ => String::new(),
                };
                let mttf = answer.unwrap_or_else(|| forecast.describe_mttf("underrun") + &counted);
                writeln!(
                    out,
                    "{} buffers × {} ms, compute {} ms: slack {} ms; {mttf}",
                    forecast.buffers,
                    millis(forecast.buffer_period_ns),
                    millis(forecast.compute_ns),
                    millis(forecast.slack_ns.max(0) as u64),
                )?;
            }
        }
    }
    Ok(())
}

/// Writes the mean time to underrun by number of buffers (paper 002's Figures 6-7).
fn write_buffer_table(out: &mut impl std::fmt::Write, output: &ForecastStudy) -> std::fmt::Result {
    let table = &output.table;
    let Some(first) = table.first() else {
        return Ok(());
    };
    let confidence = (CONFIDENCE * 100.0).round();
    writeln!(out)?;
    writeln!(
        out,
        "mean time to underrun by number of buffers (t = {} ms, c = {} ms; paper 002 Figures 6-7)",
        millis(first.buffer_period_ns),
        millis(first.compute_ns)
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
    for row in table.iter() {
        let MttfCells { estimate, interval } = mttf_cells(row);
        let late = match &row.basis {
            rtlab_analysis::forecast::Basis::Observed { late, .. } => late.to_string(),
            rtlab_analysis::forecast::Basis::BeyondData { .. } => "0".to_owned(),
            rtlab_analysis::forecast::Basis::TailProjection { .. } => "tail".to_owned(),
            rtlab_analysis::forecast::Basis::NoSlack => "all".to_owned(),
            rtlab_analysis::forecast::Basis::Response { terms, .. } => {
                (terms.late_wakeups + terms.late_computes.unwrap_or(0)).to_string()
            }
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
    Ok(())
}

/// Writes the least buffering that reaches the target MTTF, or why none is known to.
fn write_least_buffering(
    out: &mut impl std::fmt::Write,
    output: &ForecastStudy,
) -> std::fmt::Result {
    let Some(least) = &output.least_buffering else {
        return Ok(());
    };
    writeln!(out)?;
    let target = describe_seconds(least.target_mttf_s);
    match &least.found {
        Some(found) => {
            let estimate = mttf_cells(found).estimate;
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
            if output.asked_target {
                "the data supports no MTTF that long (measure longer or under the real load)"
            } else {
                "measure longer or under the real load"
            }
        )?,
    }
    Ok(())
}
