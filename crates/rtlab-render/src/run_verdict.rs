//! What `rtlab run` prints for people: a compact summary (80 columns: one table per metric, the
//! tail projection collapsed to one line per series where the data can't support it, repeated
//! warnings collapsed with counts) and the verdict block at the end — per application class ✔/✘/
//! "measure longer" with the MTTF in words, the single worst thing found, and why the numbers
//! differ from cyclictest's. `--verbose` prints today's full tables instead; `--quiet` only the
//! verdict.

use crate::summary::{host_line, micros, percentile, series_by_metric, HostLayout};
use crate::text::{keep_units, truncate, wrapped};
use rtlab_analysis::forecast::VerdictKind;
use rtlab_analysis::run_verdict::RunVerdict;
use rtlab_core::cpuidle::IdleState;
use rtlab_core::{Metric, RunRecord, Series};
use std::fmt::Write;

/// The idle states the measured CPUs could enter, read from sysfs when the run ends (the record
/// does not hold them).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IdleInfo {
    pub driver: String,
    /// The states of the first measured CPU (they are the same on every CPU of one machine).
    pub states: Vec<IdleState>,
}

/// The run, host and one 80-column table per metric, then load, tail and warnings.
/// How the end of a run (or `rtlab show` of one) is shown.
#[derive(Debug, Clone, Default)]
pub struct EndOptions<'a> {
    /// Only the verdict block.
    pub quiet: bool,
    /// Every table in full instead of the compact summary.
    pub verbose: bool,
    /// The verdict for this application class only.
    pub for_class: Option<&'a str>,
}

/// A stored run as `rtlab show` prints it: the summary, then a timer study's tables and a
/// workload's outcome when the record holds them (each after a blank line).
pub fn stored_run(record: &RunRecord) -> String {
    let mut text = crate::summary::summary(record);
    if record.timers.is_some() {
        text.push('\n');
        text.push_str(&crate::timers::study(record));
    }
    if record.workload.is_some() {
        text.push('\n');
        text.push_str(&crate::workload::outcome(record));
    }
    text
}

/// What `rtlab run` prints between its summary and its verdict: paper 000's interval table
/// (`--intervals`), then the explain report of the ten worst late wake-ups (`--explain`).
pub fn extra_reports(record: &RunRecord, intervals: bool, explain: bool) -> String {
    let mut extra = String::new();
    if intervals {
        extra.push_str(&crate::summary::interval_table(record));
    }
    if explain {
        extra.push_str(&crate::explain::report(record, 10));
    }
    extra
}

/// The summary (unless quiet), then `extra` (the interval table, the explain report), then the
/// verdict block; and whether `for_class` found the machine unsuitable.
pub fn run_end(
    record: &RunRecord,
    options: &EndOptions<'_>,
    extra: &str,
    idle: Option<&IdleInfo>,
) -> (String, bool) {
    let mut text = String::new();
    if !options.quiet {
        if options.verbose {
            text.push_str(&crate::summary::summary(record));
        } else {
            text.push_str(&compact_summary(record));
        }
        text.push_str(extra);
    }
    let mut classes = rtlab_analysis::classes::builtin_classes();
    if let Some(name) = options.for_class {
        classes.retain(|class| class.name == name);
    }
    // The interval of every class only where it is shown.
    let detail = if options.verbose {
        rtlab_analysis::run_verdict::Detail::Full
    } else {
        rtlab_analysis::run_verdict::Detail::Decision
    };
    let run_verdict = rtlab_analysis::run_verdict::run_verdict(record, &classes, detail);
    text.push_str(&verdict(record, &run_verdict, idle, options.verbose));
    let unsuitable = options.for_class.is_some()
        && run_verdict
            .classes
            .iter()
            .any(|class| class.kind == VerdictKind::NotSuitable);
    (text, unsuitable)
}

/// The run's compact summary as text: [`write_compact_summary`].
pub fn compact_summary(record: &RunRecord) -> String {
    crate::to_text(|out| write_compact_summary(out, record))
}

/// The verdict block as text: [`write_verdict`].
pub fn verdict(
    record: &RunRecord,
    verdict: &RunVerdict,
    idle: Option<&IdleInfo>,
    verbose: bool,
) -> String {
    crate::to_text(|out| write_verdict(out, record, verdict, idle, verbose))
}

pub fn write_compact_summary(out: &mut impl Write, record: &RunRecord) -> std::fmt::Result {
    let short_id: String = record.id.chars().take(8).collect();
    writeln!(
        out,
        "run {short_id}  started {}  measured {}{}",
        record.started_at,
        rtlab_core::Nanos(record.duration_ns),
        crate::summary::interrupted_note(record)
    )?;
    let host_line = host_line(&record.host, HostLayout::Compact);
    writeln!(out, "{}", wrapped("host ", &host_line, 5))?;
    // The compact summary has never had a table of response times (a workload's series).
    for (metric, rows) in series_by_metric(record).filter(|(metric, _)| *metric != Metric::Response)
    {
        let heading = format!("{} (µs)", crate::summary::metric_explanation(metric));
        write_heading(out, &heading, 2)?;
        writeln!(
            out,
            "{:<10} {:>3} {:>9} {:>6} {:>8} {:>8} {:>8} {:>8} {:>9}",
            "class", "cpu", "count", "missed", "p50", "p99", "p99.9", "p99.99", "max"
        )?;
        for series in rows {
            writeln!(
                out,
                "{:<10} {:>3} {:>9} {:>6} {:>8} {:>8} {:>8} {:>8} {:>9}",
                truncate(&series.class, 10),
                series.cpu,
                series.count,
                series.missed,
                percentile(series, "50"),
                percentile(series, "99"),
                percentile(series, "99.9"),
                percentile(series, "99.99"),
                micros(series.max_ns),
            )?;
        }
    }
    crate::summary::write_load_summary(out, record)?;
    write_compact_tail(out, record)?;
    write_collapsed_warnings(out, &record.warnings)?;
    Ok(())
}

/// The wake-up series that carry a tail projection, in record order.
pub(crate) fn tail_series(record: &RunRecord) -> Vec<&Series> {
    record
        .series
        .iter()
        .filter(|series| series.metric == Metric::Wakeup && series.tail.is_some())
        .collect()
}

/// A blank line, then `heading` wrapped with `indent` spaces before each line after the first.
fn write_heading(out: &mut impl Write, heading: &str, indent: usize) -> std::fmt::Result {
    writeln!(out)?;
    writeln!(out, "{}", wrapped("", heading, indent))
}

/// A window's cell when it has a number: `38.2 [31.0–52.3]`.
fn tail_number(window: &serde_json::Value) -> Option<String> {
    let field = |name: &str| window.get(name).and_then(serde_json::Value::as_u64);
    Some(format!(
        "{} [{}–{}]",
        micros(field("estimate_ns")?),
        micros(field("ci_low_ns")?),
        micros(field("ci_high_ns")?)
    ))
}

/// Why a window has no number, in a few words: "measure ≥ 1.4 min" when the window is too long
/// for the data (the projection's 1000× limit), else "measure longer".
fn tail_refusal(window: &serde_json::Value, window_s: f64, duration_s: f64) -> String {
    let reason = window
        .get("insufficient")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    if reason.contains("more wake-ups than were measured") {
        let needed_s = window_s / 1_000.0;
        if needed_s > duration_s {
            return format!(
                "measure ≥ {}",
                rtlab_analysis::forecast::describe_seconds(needed_s)
            );
        }
    }
    "measure longer".to_owned()
}

/// The tail projection of the wake-up series: a row with the numbers where there are any, one
/// line per series saying what to measure where there are none.
pub fn write_compact_tail(out: &mut impl Write, record: &RunRecord) -> std::fmt::Result {
    let rows = tail_series(record);
    if rows.is_empty() {
        return Ok(());
    }
    let duration_s = record.duration_ns as f64 / 1e9;
    write_heading(
        out,
        "worst wake-up latency expected per hour / day / week of use, µs, median [95 % interval]:",
        0,
    )?;
    // Series with the same line are listed together.
    let mut lines: Vec<(Vec<String>, String)> = Vec::new();
    for series in rows {
        let tail = serde_json::to_value(series.tail.as_ref().expect("filtered on tail"))
            .unwrap_or_default();
        let mut cells = Vec::new();
        let mut any_number = false;
        for (window, name) in [
            ("per_hour", "hour"),
            ("per_day", "day"),
            ("per_week", "week"),
        ] {
            let value = &tail[window];
            let window_s = tail["window_seconds"][window].as_f64().unwrap_or(0.0);
            match tail_number(value) {
                Some(number) => {
                    any_number = true;
                    cells.push(format!("{name} {number}"));
                }
                None => cells.push(format!(
                    "{name}: {}",
                    tail_refusal(value, window_s, duration_s)
                )),
            }
        }
        let label = format!("{}@{}", series.class, series.cpu);
        let line = if any_number {
            cells.join("; ")
        } else {
            // One line: the same advice for every window collapses into one.
            let advice: Vec<&str> = cells
                .iter()
                .map(|cell| cell.split_once(": ").map_or("", |(_, advice)| advice))
                .collect();
            if advice.iter().all(|item| *item == advice[0]) {
                format!("no projection: {}", advice[0])
            } else {
                format!("no projection ({})", cells.join(", "))
            }
        };
        match lines.iter_mut().find(|(_, known)| *known == line) {
            Some((labels, _)) => labels.push(label),
            None => lines.push((vec![label], line)),
        }
    }
    for (labels, line) in lines {
        let head = format!("  {}: ", labels.join(", "));
        writeln!(out, "{}", wrapped("", &format!("{head}{line}"), 4))?;
    }
    Ok(())
}

/// A series label at the start of a warning (`rt-high/wakeup@1: …`), split off.
fn series_prefix(warning: &str) -> Option<(&str, &str)> {
    let (label, rest) = warning.split_once(": ")?;
    let (class_metric, cpu) = label.split_once('@')?;
    if class_metric.contains('/') && cpu.chars().all(|character| character.is_ascii_digit()) {
        Some((label, rest))
    } else {
        None
    }
}

/// The warning with every number replaced, to find warnings that say the same thing.
fn shape(text: &str) -> String {
    let mut shaped = String::new();
    let mut in_number = false;
    for character in text.chars() {
        if character.is_ascii_digit() || (in_number && character == '.') {
            if !in_number {
                shaped.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            shaped.push(character);
        }
    }
    shaped
}

/// Warnings that say the same thing.
struct WarningGroup {
    /// The text with its numbers blanked out ([`shape`]).
    shape: String,
    /// The first warning's text, without its series.
    first: String,
    members: Vec<WarningMember>,
}

/// One warning of a group: its series and its leading number.
struct WarningMember {
    /// The series' label, empty for a warning about no series.
    label: String,
    leading: Option<u64>,
}

/// Warnings, each kind once: warnings that differ only in their series and numbers become one
/// line with the series counted ("… in 8 series: rt-high/wakeup@1 (4), …").
pub fn write_collapsed_warnings(out: &mut impl Write, warnings: &[String]) -> std::fmt::Result {
    if warnings.is_empty() {
        return Ok(());
    }
    let mut groups: Vec<WarningGroup> = Vec::new();
    for warning in warnings {
        let (label, rest) = match series_prefix(warning) {
            Some((label, rest)) => (label.to_owned(), rest),
            None => (String::new(), warning.as_str()),
        };
        let key = shape(rest);
        let leading = rest
            .split_whitespace()
            .next()
            .and_then(|word| word.parse::<u64>().ok());
        let member = WarningMember { label, leading };
        match groups.iter_mut().find(|group| group.shape == key) {
            Some(group) => group.members.push(member),
            None => groups.push(WarningGroup {
                shape: key,
                first: rest.to_owned(),
                members: vec![member],
            }),
        }
    }
    writeln!(out)?;
    for WarningGroup { first, members, .. } in groups {
        let text = if members.len() == 1 {
            match &members[0].label {
                label if label.is_empty() => first,
                label => format!("{label}: {first}"),
            }
        } else if members.iter().all(|member| !member.label.is_empty()) {
            let total: Option<u64> = members.iter().map(|member| member.leading).sum();
            let (message, shown) = match total {
                Some(total) => {
                    // "4 periods had …" → "38 periods had …", with each series' count.
                    let tail = first.split_once(' ').map_or("", |(_, tail)| tail);
                    let shown: Vec<String> = members
                        .iter()
                        .map(|member| format!("{} ({})", member.label, member.leading.unwrap_or(0)))
                        .collect();
                    (format!("{total} {tail}"), shown)
                }
                None => (
                    first.clone(),
                    members.iter().map(|member| member.label.clone()).collect(),
                ),
            };
            let listed: Vec<String> = shown.iter().take(3).cloned().collect();
            let more = if shown.len() > 3 {
                format!(", and {} more", shown.len() - 3)
            } else {
                String::new()
            };
            format!(
                "{message} — in {} series: {}{more}",
                members.len(),
                listed.join(", ")
            )
        } else {
            format!("{first} (and {} more like it)", members.len() - 1)
        };
        writeln!(out, "{}", wrapped("warning: ", &text, 9))?;
    }
    Ok(())
}

fn mark(kind: VerdictKind) -> &'static str {
    match kind {
        VerdictKind::Suitable => "✔",
        VerdictKind::NotSuitable => "✘",
        VerdictKind::Undetermined => "?",
    }
}

/// The verdict block: one line per class, the worst thing, the cyclictest note.
pub fn write_verdict(
    out: &mut impl Write,
    record: &RunRecord,
    verdict: &RunVerdict,
    idle: Option<&IdleInfo>,
    verbose: bool,
) -> std::fmt::Result {
    writeln!(out)?;
    let cpus: Vec<u32> = record
        .series
        .iter()
        .filter(|series| format!("{}/{}", series.class, series.metric) == verdict.series)
        .map(|series| series.cpu)
        .collect();
    match &verdict.no_forecast {
        Some(reason) => writeln!(out, "{}", wrapped("verdict: no forecast: ", reason, 9))?,
        None => {
            writeln!(
                out,
                "{}",
                wrapped(
                    "",
                    &format!(
                        "VERDICT ({}, {} CPU{}, {}): ✔ suitable  ✘ not  ? measure longer",
                        verdict.series,
                        cpus.len(),
                        if cpus.len() == 1 { "" } else { "s" },
                        rtlab_core::Nanos(record.duration_ns)
                    ),
                    2
                )
            )?;
            for class in &verdict.classes {
                let answer = match class.kind {
                    VerdictKind::Undetermined => format!(
                        "measure longer: {}, it needs {}",
                        class.mttf_text, class.acceptable_text
                    ),
                    _ => format!("{}; needs {}", class.mttf_text, class.acceptable_text),
                };
                let head = format!("  {} {:<22} ", mark(class.kind), class.name);
                writeln!(out, "{}", wrapped(&head, &keep_units(&answer), 27))?;
                if let Some(detail) = class.detail.as_deref().filter(|_| verbose) {
                    writeln!(out, "{}", wrapped("      ", detail, 6))?;
                }
            }
        }
    }
    if let Some(worst) = &verdict.worst {
        writeln!(out, "{}", wrapped("worst: ", &worst.text, 7))?;
    }
    for periodic in &verdict.periodic {
        let text = format!(
            "{periodic}; the lines above take stalls as random in time: `rtlab forecast` gives the range over how its bursts line up with a cycle"
        );
        writeln!(out, "{}", wrapped("periodic: ", &text, 10))?;
    }
    writeln!(out, "{}", wrapped("", &cyclictest_note(record, idle), 2))?;
    Ok(())
}

/// Why rtlab's numbers differ from cyclictest's, when the reason is known.
pub fn cyclictest_note(record: &RunRecord, idle: Option<&IdleInfo>) -> String {
    let states = idle
        .filter(|idle| !idle.states.is_empty())
        .map(|idle| {
            let names: Vec<String> = idle
                .states
                .iter()
                .map(|state| {
                    let disabled = if state.disabled { ", disabled" } else { "" };
                    format!(
                        "{} (exit {} µs{disabled})",
                        state.name, state.exit_latency_us
                    )
                })
                .collect();
            format!(
                " The CPUs could enter these idle states (driver {}): {}.",
                idle.driver,
                names.join(", ")
            )
        })
        .unwrap_or_default();
    let guest = if !matches!(record.host.virtualization.as_str(), "none" | "" | "unknown") {
        " In a virtual machine an idle vCPU halts and its wake-up goes through the hypervisor, which costs far more than the declared exit latency."
    } else {
        ""
    };
    match record.host.cpu_dma_latency_us {
        Some(0) => format!(
            "vs cyclictest: like cyclictest's default, this run held /dev/cpu_dma_latency at 0, so the CPUs stayed out of idle states: the numbers compare like with like.{states}"
        ),
        Some(held) => format!(
            "vs cyclictest: this run held /dev/cpu_dma_latency at {held} µs; cyclictest holds it at 0 by default (CPUs never idle), so its numbers can be lower.{states}{guest}"
        ),
        None => format!(
            "vs cyclictest: cyclictest holds /dev/cpu_dma_latency at 0 by default, keeping CPUs out of idle states; rtlab measured the machine as configured, idle states included, so its latencies can be higher. Add --cpu-dma-latency 0 to compare like with like.{states}{guest}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_analysis::classes::builtin_classes;
    use rtlab_analysis::run_verdict::{run_verdict, Detail};

    fn fixture(name: &str) -> RunRecord {
        let path = format!("{}/test_data/records/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
        RunRecord::from_json(&text).unwrap()
    }

    fn haltpoll() -> IdleInfo {
        IdleInfo {
            driver: "haltpoll".to_owned(),
            states: vec![
                IdleState {
                    name: "POLL".to_owned(),
                    description: "CPUIDLE CORE POLL IDLE".to_owned(),
                    exit_latency_us: 0,
                    disabled: false,
                },
                IdleState {
                    name: "haltpoll".to_owned(),
                    description: "default architecture idle".to_owned(),
                    exit_latency_us: 1,
                    disabled: false,
                },
            ],
        }
    }

    fn render(record: &RunRecord, verbose: bool) -> String {
        let mut out = String::new();
        write_compact_summary(&mut out, record).unwrap();
        let detail = if verbose {
            Detail::Full
        } else {
            Detail::Decision
        };
        let verdict = run_verdict(record, &builtin_classes(), detail);
        write_verdict(&mut out, record, &verdict, Some(&haltpoll()), verbose).unwrap();
        out
    }

    fn assert_fits(text: &str) {
        for line in text.lines() {
            assert!(line.chars().count() <= 80, "wider than 80 columns: {line}");
        }
    }

    #[test]
    fn short_vm_run_summary_and_verdict() {
        let text = render(&fixture("vm-5s.json"), false);
        assert_fits(&text);
        insta::assert_snapshot!(text);
    }

    #[test]
    fn short_vm_run_verdict_verbose() {
        let record = fixture("vm-5s.json");
        let mut out = String::new();
        let verdict = run_verdict(&record, &builtin_classes(), Detail::Full);
        write_verdict(&mut out, &record, &verdict, None, true).unwrap();
        let text = out;
        assert_fits(&text);
        insta::assert_snapshot!(text);
    }

    #[test]
    fn imported_cyclictest_run_held_at_zero() {
        let mut record = fixture("vm-5s.json");
        record.host.cpu_dma_latency_us = Some(0);
        record.warnings.clear();
        let note = cyclictest_note(&record, Some(&haltpoll()));
        assert!(note.contains("compare like with like"), "{note}");
        assert!(note.contains("haltpoll (exit 1 µs)"), "{note}");
    }

    #[test]
    fn repeated_warnings_collapse_with_counts() {
        let warnings = vec![
            "rt-high/wakeup@1: 4 periods had no wake-up at all because an earlier one was so late"
                .to_owned(),
            "rt-mid/wakeup@1: 6 periods had no wake-up at all because an earlier one was so late"
                .to_owned(),
            "running in a virtual machine (kvm): expect hiccups".to_owned(),
            "the hypervisor took 12ms from CPU 0 during the run (steal time)".to_owned(),
            "the hypervisor took 3ms from CPU 1 during the run (steal time)".to_owned(),
        ];
        let mut out = String::new();
        write_collapsed_warnings(&mut out, &warnings).unwrap();
        let text = out;
        assert_fits(&text);
        insta::assert_snapshot!(text);
    }
}
