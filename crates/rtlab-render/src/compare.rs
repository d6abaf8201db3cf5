//! The terminal form of `rtlab compare`: two run headers, one table per metric (percentiles of A
//! and B, the difference with its interval), missed periods, causes, the verdict. 80 columns.
//! Also the words of the verdict and of the conditions note, for the text and for
//! `compare --json` ([`ComparisonJson`]).

use rtlab_analysis::compare::{
    Answer, Change, Comparison, ConditionsChange, Gate, SeriesDifference, Verdict,
    NEGLIGIBLE_RELATIVE,
};
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
    writeln!(out, "{}", wrapped("verdict: ", &verdict(comparison), 9))?;
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

/// A comparison as `compare --json` writes it: its fields, then the conditions with their note
/// and the verdict in words.
#[derive(Serialize)]
pub struct ComparisonJson<'a> {
    #[serde(flatten)]
    comparison: &'a Comparison,
    conditions: Option<ConditionsJson<'a>>,
    verdict: String,
}

/// `rtlab compare --json` under the common header: both runs, the comparison, and the gate
/// when `--fail-if-worse` asked for one.
#[derive(Serialize)]
pub struct CompareJson<'a> {
    pub a: RunSummary,
    pub b: RunSummary,
    #[serde(flatten)]
    comparison: ComparisonJson<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gate: Option<&'a Gate>,
}

impl<'a> CompareJson<'a> {
    /// The output of `comparison` of `a` (read from `a_source`) and `b`, gated by `gate`.
    pub fn of(
        (a_source, a): (&str, &RunRecord),
        (b_source, b): (&str, &RunRecord),
        comparison: &'a Comparison,
        gate: Option<&'a Gate>,
    ) -> CompareJson<'a> {
        CompareJson {
            a: RunSummary::of(a_source, a),
            b: RunSummary::of(b_source, b),
            comparison: ComparisonJson::of(comparison),
            gate,
        }
    }

    /// The terminal form of the same.
    pub fn text(&self) -> String {
        comparison(&self.a, &self.b, self.comparison.comparison, self.gate)
    }
}

/// Why `--fail-if-worse` judged nothing: no gated series reaches its percentile.
pub fn gate_unjudged(threshold: &impl std::fmt::Display) -> String {
    format!(
        "--fail-if-worse {threshold}: no wake-up or hand-off series has enough samples beyond that percentile to judge it (measure longer, or gate a lower percentile)"
    )
}

/// The conditions of both runs, and their difference in words when not comparable.
#[derive(Serialize)]
struct ConditionsJson<'a> {
    #[serde(flatten)]
    conditions: &'a ConditionsChange,
    note: Option<String>,
}

impl<'a> ComparisonJson<'a> {
    pub fn of(comparison: &'a Comparison) -> ComparisonJson<'a> {
        ComparisonJson {
            comparison,
            conditions: comparison
                .conditions
                .as_ref()
                .map(|conditions| ConditionsJson {
                    conditions,
                    note: conditions_note(conditions),
                }),
            verdict: verdict(comparison),
        }
    }
}

/// The runs' difference in other work and steal in words, when they are not comparable.
pub fn conditions_note(conditions: &ConditionsChange) -> Option<String> {
    let mut differences = Vec::new();
    if conditions.other_work_differs {
        differences.push(format!(
            "other programs used {:.0} % of the CPU time rtlab left free during A and {:.0} % during B",
            conditions.other_work_a * 100.0,
            conditions.other_work_b * 100.0
        ));
    }
    if conditions.steal_differs {
        differences.push(format!(
            "the hypervisor took {:.1} % of the CPU time during A and {:.1} % during B",
            conditions.steal_a * 100.0,
            conditions.steal_b * 100.0
        ));
    }
    (!differences.is_empty()).then(|| {
        format!(
            "the runs were not made under the same conditions: {}; a difference between them may come from that, not from what you changed",
            differences.join(", and ")
        )
    })
}

/// The one-line verdict in words, with the conditions note when the runs were not made under
/// the same conditions.
pub fn verdict(comparison: &Comparison) -> String {
    let confidence = (comparison.confidence * 100.0).round();
    let text = match &comparison.verdict {
        Verdict::All(answer) => answer_words(answer, confidence),
        Verdict::Split { realtime, other } => format!(
            "real-time series: {}. SCHED_OTHER series: {}",
            answer_words(realtime, confidence),
            answer_words(other, confidence)
        ),
    };
    match comparison.conditions.as_ref().and_then(conditions_note) {
        Some(note) => format!("{text} — but {note}"),
        None => text,
    }
}

/// One group's answer in words.
fn answer_words(answer: &Answer, confidence: f64) -> String {
    match answer {
        Answer::Worse {
            at,
            worse,
            better,
            judged,
        } => {
            let also = if *better > 0 {
                format!("; better at {better}")
            } else {
                String::new()
            };
            format!(
                "B is worse at {} — worse at {worse} of {judged} judged percentiles{also} ({confidence} % intervals)",
                describe_difference(at),
            )
        }
        Answer::Better { at } => format!(
            "B is better at {}, and worse nowhere ({confidence} % intervals)",
            describe_difference(at)
        ),
        Answer::TooShort => {
            "the runs are too short to tell apart: no percentile has enough samples beyond it"
                .to_owned()
        }
        Answer::NoDifference => format!(
            "no difference the data can tell: every judged percentile of B is within {:.0} % of A or its {confidence} % interval holds 0",
            NEGLIGIBLE_RELATIVE * 100.0
        ),
    }
}

/// `p99 of rt-high/wakeup@0: +35.0 µs [+20.1 µs, +50.2 µs] (+40 %)`.
fn describe_difference(at: &SeriesDifference) -> String {
    let item = &at.difference;
    let ci = item
        .difference_ci_ns
        .map(|[low, high]| format!(" [{}, {}]", signed_latency(low), signed_latency(high)))
        .unwrap_or_default();
    format!(
        "p{} of {}: {}{ci} ({:+.0} %)",
        item.percentile,
        at.series,
        signed_latency(item.difference_ns),
        item.relative * 100.0
    )
}

/// `+35.0 µs`, `−1.2 ms`.
pub fn signed_latency(nanos: i64) -> String {
    let sign = if nanos < 0 { "−" } else { "+" };
    let magnitude = nanos.unsigned_abs() as f64;
    let text = if magnitude < 1e6 {
        format!("{:.1} µs", magnitude / 1e3)
    } else if magnitude < 1e9 {
        format!("{:.2} ms", magnitude / 1e6)
    } else {
        format!("{:.2} s", magnitude / 1e9)
    };
    format!("{sign}{text}")
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

#[cfg(test)]
mod tests {
    use super::*;

    fn conditions(other_work_b: f64, steal_b: f64) -> ConditionsChange {
        let (other_work_a, steal_a) = (1.0 / 19.5, 0.0);
        let other_work_differs = (other_work_b - other_work_a).abs() > 0.10;
        let steal_differs = (steal_b - steal_a).abs() > 0.01;
        ConditionsChange {
            other_work_a,
            other_work_b,
            steal_a,
            steal_b,
            comparable: !other_work_differs && !steal_differs,
            other_work_differs,
            steal_differs,
        }
    }

    #[test]
    fn the_conditions_note_names_what_differs() {
        assert_eq!(conditions_note(&conditions(0.06, 0.005)), None);
        let note = conditions_note(&conditions(12.5 / 19.5, 0.0)).unwrap();
        assert!(
            note.contains("5 % of the CPU time rtlab left free during A and 64 % during B"),
            "{note}"
        );
        let stolen = conditions_note(&conditions(0.06, 0.02)).unwrap();
        assert!(
            stolen.contains("hypervisor took 0.0 % of the CPU time during A and 2.0 %"),
            "{stolen}"
        );
    }

    #[test]
    fn a_signed_latency_picks_its_unit() {
        assert_eq!(signed_latency(35_000), "+35.0 µs");
        assert_eq!(signed_latency(-1_200_000), "−1.20 ms");
    }
}
