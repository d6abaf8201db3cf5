//! The terminal form of `rtlab compare`: two run headers, one table per metric (percentiles of A
//! and B, the difference with its interval), missed periods, causes, the verdict. 80 columns.

use rtlab_analysis::compare::{signed_latency, Change, Comparison, Gate};
use rtlab_core::{Metric, RunRecord};
use serde::Serialize;
use std::fmt::Write;

/// What a compared run was: its header line here and its entry in `compare --json`.
#[derive(Debug, Serialize)]
pub struct RunSummary {
    pub id: String,
    pub source: String,
    pub started_at: String,
    pub duration_ns: u64,
    pub host: rtlab_core::Host,
    pub cmdline: Vec<String>,
}

impl RunSummary {
    /// The summary of `record`, read from `source` (a file or a stored run).
    pub fn of(source: &str, record: &RunRecord) -> RunSummary {
        RunSummary {
            id: record.id.clone(),
            source: source.to_owned(),
            started_at: record.started_at.clone(),
            duration_ns: record.duration_ns,
            host: record.host.clone(),
            cmdline: record.cmdline.clone(),
        }
    }
}

fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
}

fn run_line(name: &str, run: &RunSummary) -> String {
    let host = if run.host.hostname.is_empty() {
        "unknown host".to_owned()
    } else {
        run.host.hostname.clone()
    };
    let line = format!(
        "{name}  {}  {}  {host}  {}  {}",
        short_id(&run.id),
        run.started_at,
        rtlab_core::Nanos(run.duration_ns),
        run.source
    );
    truncate(&line, 80)
}

use crate::text::{truncate, wrapped};

fn micros(nanos: u64) -> String {
    crate::summary::micros(nanos)
}

fn change_mark(change: Change) -> &'static str {
    match change {
        Change::Worse => "worse",
        Change::Better => "better",
        Change::Same => "",
        Change::TooFewSamples => "few samples",
    }
}

/// The comparison as text: [`write_comparison`].
pub fn comparison(
    a: &RunSummary,
    b: &RunSummary,
    comparison: &Comparison,
    gate: Option<&Gate>,
) -> String {
    crate::to_text(|out| write_comparison(out, a, b, comparison, gate))
}

/// Writes the comparison: both runs' headers, a table per metric, missed periods, series only in
/// one run, causes, conditions, the verdict and the gate's result.
pub fn write_comparison(
    out: &mut impl Write,
    a: &RunSummary,
    b: &RunSummary,
    comparison: &Comparison,
    gate: Option<&Gate>,
) -> std::fmt::Result {
    writeln!(out, "{}", run_line("A", a))?;
    writeln!(out, "{}", run_line("B", b))?;
    let confidence = (comparison.confidence * 100.0).round();
    for metric in [Metric::Wakeup, Metric::Handoff, Metric::Interval] {
        write_metric_table(out, comparison, metric, confidence)?;
    }
    write_missed(out, comparison)?;
    write_only_in_one(out, comparison)?;
    writeln!(out)?;
    write_causes(out, comparison)?;
    write_conditions(out, comparison)?;
    writeln!(out)?;
    writeln!(out, "{}", wrapped("verdict: ", &comparison.verdict, 9))?;
    if let Some(gate) = gate {
        write_gate(out, gate)?;
    }
    Ok(())
}

/// Writes one metric's table: each series' percentiles in A and B with the difference and its
/// interval, then the maxima. Nothing when no series has that metric.
fn write_metric_table(
    out: &mut impl Write,
    comparison: &Comparison,
    metric: Metric,
    confidence: f64,
) -> std::fmt::Result {
    let rows: Vec<_> = comparison
        .series
        .iter()
        .filter(|series| series.metric == metric)
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "{}, µs; B − A with its {confidence} % bootstrap interval",
        match metric {
            Metric::Wakeup => "wake-up latency",
            Metric::Handoff => "hand-off latency",
            Metric::Interval => "interval",
            Metric::Response => "response time",
            Metric::Irq => "irq latency",
            Metric::Thread => "thread latency",
        }
    )?;
    writeln!(
        out,
        "{:<18} {:>6} {:>9} {:>9}  B − A [interval]",
        "series", "pct", "A", "B"
    )?;
    for series in rows {
        let label = truncate(&series.label().replace(&format!("/{metric}"), ""), 18);
        for (index, item) in series.percentiles.iter().enumerate() {
            let difference = match item.difference_ci_ns {
                Some([low, high]) => format!(
                    "{} [{}, {}]",
                    signed_micros(item.difference_ns),
                    signed_micros(low),
                    signed_micros(high)
                ),
                None => signed_micros(item.difference_ns),
            };
            writeln!(
                out,
                "{:<18} {:>6} {:>9} {:>9}  {:<22} {}",
                if index == 0 { label.as_str() } else { "" },
                format!("p{}", item.percentile),
                micros(item.a_ns),
                micros(item.b_ns),
                difference,
                change_mark(item.change)
            )?;
        }
        writeln!(
            out,
            "{:<18} {:>6} {:>9} {:>9}",
            "",
            "max",
            micros(series.max_a_ns),
            micros(series.max_b_ns)
        )?;
    }
    Ok(())
}

/// Writes the wake-up series that missed periods in either run, if any did.
fn write_missed(out: &mut impl Write, comparison: &Comparison) -> std::fmt::Result {
    let missed: Vec<_> = comparison
        .series
        .iter()
        .filter(|series| series.metric == Metric::Wakeup && series.missed_a + series.missed_b > 0)
        .collect();
    if missed.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "missed periods (no wake-up at all; counted in the percentiles above)"
    )?;
    for series in missed {
        writeln!(
            out,
            "  {:<30} A {:>6}   B {:>6}",
            series.label(),
            series.missed_a,
            series.missed_b
        )?;
    }
    Ok(())
}

/// Writes the series only one run has (not compared), if there are any.
fn write_only_in_one(out: &mut impl Write, comparison: &Comparison) -> std::fmt::Result {
    if comparison.only_in_a.is_empty() && comparison.only_in_b.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    for (name, labels) in [("A", &comparison.only_in_a), ("B", &comparison.only_in_b)] {
        if !labels.is_empty() {
            let text = list_with_more(labels, 4);
            writeln!(
                out,
                "{}",
                wrapped(&format!("only in {name} (not compared): "), &text, 4)
            )?;
        }
    }
    Ok(())
}

/// Writes the causes that appeared in B and vanished from A (five of each at most), or why they
/// were not compared.
fn write_causes(out: &mut impl Write, comparison: &Comparison) -> std::fmt::Result {
    let Some(causes) = &comparison.causes else {
        return writeln!(
            out,
            "causes: not compared (both runs need explained episodes: rtlab run --explain)"
        );
    };
    for (name, list) in [
        ("appeared in B", &causes.appeared),
        ("vanished from A", &causes.vanished),
    ] {
        if list.is_empty() {
            writeln!(out, "causes {name}: none")?;
            continue;
        }
        writeln!(out, "causes {name}:")?;
        for cause in list.iter().take(5) {
            writeln!(
                out,
                "  {:<8} {:<32} {:>4} episodes {:>10} µs",
                cause.kind,
                truncate(&cause.name, 32),
                cause.episodes,
                micros(cause.ns)
            )?;
        }
        if list.len() > 5 {
            writeln!(out, "  and {} more", list.len() - 5)?;
        }
    }
    Ok(())
}

/// Writes how much of the CPU other programs and the hypervisor took in each run, when known.
fn write_conditions(out: &mut impl Write, comparison: &Comparison) -> std::fmt::Result {
    let Some(conditions) = &comparison.conditions else {
        return Ok(());
    };
    let line = format!(
        "other programs used {:.0}\u{a0}% of the CPU time rtlab left free in A, {:.0}\u{a0}% in B; hypervisor steal {:.1}\u{a0}% in A, {:.1}\u{a0}% in B{}",
        conditions.other_work_a * 100.0,
        conditions.other_work_b * 100.0,
        conditions.steal_a * 100.0,
        conditions.steal_b * 100.0,
        if conditions.comparable {
            ""
        } else {
            " — NOT the same conditions"
        }
    );
    writeln!(out, "{}", wrapped("conditions: ", &line, 12))
}

/// Writes the `--fail-if-worse` gate's result: passed, or failed with each breach.
fn write_gate(out: &mut impl Write, gate: &Gate) -> std::fmt::Result {
    let mut scope = format!("on {}", gate.scope);
    if !gate.not_gated.is_empty() {
        scope.push_str(&format!(
            "; not gated: {} (to gate them: --gate-classes all)",
            list_with_more(&gate.not_gated, 3)
        ));
    }
    if gate.breaches.is_empty() {
        let line = format!("passed ({} series judged) {scope}", gate.judged);
        let lead = format!("--fail-if-worse {}: ", gate.threshold);
        writeln!(out, "{}", wrapped(&lead, &line, 4))?;
    } else {
        let line = format!(
            "FAILED in {} of {} series judged {scope}:",
            gate.breaches.len(),
            gate.judged
        );
        let lead = format!("--fail-if-worse {}: ", gate.threshold);
        writeln!(out, "{}", wrapped(&lead, &line, 4))?;
        for breach in &gate.breaches {
            let line = format!(
                "{} p{}: {} [{}, {}] ({:+.0} % at least)",
                breach.series,
                breach.percentile,
                signed_latency(breach.difference_ns),
                signed_latency(breach.difference_ci_ns[0]),
                signed_latency(breach.difference_ci_ns[1]),
                breach.relative_ci[0] * 100.0
            );
            writeln!(out, "{}", wrapped("  ", &line, 4))?;
        }
    }
    Ok(())
}

fn signed_micros(nanos: i64) -> String {
    let sign = if nanos < 0 { "-" } else { "+" };
    format!("{sign}{}", micros(nanos.unsigned_abs()))
}

fn list_with_more(labels: &[String], shown: usize) -> String {
    let mut text = labels
        .iter()
        .take(shown)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if labels.len() > shown {
        text.push_str(&format!(" and {} more", labels.len() - shown));
    }
    text
}
