//! A timer study as text (`rtlab timers`): the table per requested interval, what was not
//! measured, the findings; the change experiment's table; the audit of the settings that change
//! everyone's timing.

use crate::svg_timers::millis_label;
use rtlab_analysis::timers::change_findings;
use rtlab_core::timer_audit::AuditReport;
use rtlab_core::timer_study::ChangeExperiment;
use rtlab_core::{Nanos, RunRecord};
use std::fmt::Write;

fn micros(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

/// The study's text (or, for a change experiment, its table), warnings last.
pub fn study(record: &RunRecord) -> String {
    crate::to_text(|out| write_study(out, record))
}

/// The audit's text.
pub fn audit(report: &AuditReport) -> String {
    crate::to_text(|out| write_audit(out, report))
}

/// The study's table per interval, what was not measured, and the findings.
fn write_study(out: &mut impl Write, record: &RunRecord) -> std::fmt::Result {
    let Some(study) = &record.timers else {
        return Ok(());
    };
    if let Some(experiment) = &study.change_experiment {
        return write_change_experiment(out, experiment, &record.warnings);
    }
    writeln!(
        out,
        "timer study {}  started {}  on CPU {}  kernel {}{}",
        record.id.chars().take(8).collect::<String>(),
        record.started_at,
        study.cpu,
        record.host.kernel,
        if record.interrupted {
            "  (interrupted)"
        } else {
            ""
        }
    )?;
    let mut intervals: Vec<u64> = study.rows.iter().map(|row| row.requested_ns).collect();
    intervals.sort_unstable();
    intervals.dedup();
    for requested in intervals {
        writeln!(out)?;
        writeln!(
            out,
            "requested {}: times between returns (µs); drift = mean against the request",
            millis_label(requested)
        )?;
        writeln!(
            out,
            "{:<23} {:<9} {:<16} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}",
            "api",
            "mode",
            "class",
            "count",
            "mean",
            "drift",
            "p50",
            "p99",
            "max",
            "catchup",
            "skipped"
        )?;
        for row in study
            .rows
            .iter()
            .filter(|row| row.requested_ns == requested)
        {
            writeln!(
                out,
                "{:<23} {:<9} {:<16} {:>6} {:>9} {:>8.2}% {:>9} {:>9} {:>9} {:>7} {:>7}",
                row.api,
                row.mode,
                row.class,
                row.count,
                micros(row.mean_ns),
                row.drift_ppm / 1e4,
                micros(row.p50_ns as f64),
                micros(row.p99_ns as f64),
                micros(row.max_ns as f64),
                row.catchups,
                format!(
                    "{}{}",
                    row.skipped,
                    if row.skipped_from == "reported" {
                        "r"
                    } else {
                        ""
                    }
                ),
            )?;
        }
    }
    writeln!(
        out,
        "\ncatchup: returns less than a quarter period after the previous one; skipped: periods with no return (r: the API's own overrun count)"
    )?;
    if !study.unavailable.is_empty() {
        writeln!(out, "\nnot measured:")?;
        // One line per class and reason (without root, rt-high fails the same way for all).
        let mut groups: Vec<(&str, &str, Vec<String>)> = Vec::new();
        for cell in &study.unavailable {
            let class = cell.class.as_deref().unwrap_or("any class");
            let name = format!("{} ({})", cell.api, cell.mode);
            match groups
                .iter_mut()
                .find(|(other, reason, _)| *other == class && *reason == cell.reason)
            {
                Some((_, _, names)) => names.push(name),
                None => groups.push((class, &cell.reason, vec![name])),
            }
        }
        let mut every_api: Vec<(&str, &str)> = study
            .rows
            .iter()
            .map(|row| (row.api.as_str(), row.mode.as_str()))
            .chain(
                study
                    .unavailable
                    .iter()
                    .map(|cell| (cell.api.as_str(), cell.mode.as_str())),
            )
            .collect();
        every_api.sort_unstable();
        every_api.dedup();
        for (class, reason, names) in groups {
            let which = if names.len() == every_api.len() && names.len() > 1 {
                "every API".to_owned()
            } else {
                names.join(", ")
            };
            writeln!(out, "  {which} in {class}: {reason}")?;
        }
    }
    if !study.findings.is_empty() {
        writeln!(out, "\nfindings:")?;
        for finding in &study.findings {
            writeln!(out, "  - {finding}")?;
        }
    }
    if !record.warnings.is_empty() {
        writeln!(out)?;
        for warning in &record.warnings {
            writeln!(out, "warning: {warning}")?;
        }
    }
    Ok(())
}

fn write_change_experiment(
    out: &mut impl Write,
    experiment: &ChangeExperiment,
    warnings: &[String],
) -> std::fmt::Result {
    writeln!(
        out,
        "change experiment: another process changes a setting, this {} thread measures its {} sleeps (µs; FIFO: a SCHED_FIFO 90 thread's wake-ups on another CPU)",
        experiment.policy,
        millis_label(experiment.sleep_ns)
    )?;
    writeln!(
        out,
        "{:<26} {:>9} {:>9} | {:>7} {:>9} {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9}",
        "setting",
        "in force",
        "slack",
        "count",
        "wake p50",
        "wake p99",
        "wake max",
        "sleep p50",
        "sleep p99",
        "FIFO p50",
        "FIFO p99"
    )?;
    for step in &experiment.steps {
        writeln!(
            out,
            "{:<26} {:>9} {:>9} | {:>7} {:>9} {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9}",
            step.setting,
            match step.cpu_dma_latency_in_force_us {
                Some(value) if value >= 2_000_000_000 => "no limit".to_owned(),
                Some(value) => format!("{value} µs"),
                None => "?".to_owned(),
            },
            format!("{}", Nanos(step.timer_slack_ns)),
            step.wakeup.count,
            micros(step.wakeup.p50_ns as f64),
            micros(step.wakeup.p99_ns as f64),
            micros(step.wakeup.max_ns as f64),
            micros(step.sleep.p50_ns as f64),
            micros(step.sleep.p99_ns as f64),
            step.rt_wakeup
                .as_ref()
                .map_or("-".to_owned(), |rt| micros(rt.p50_ns as f64)),
            step.rt_wakeup
                .as_ref()
                .map_or("-".to_owned(), |rt| micros(rt.p99_ns as f64)),
        )?;
    }
    let findings = change_findings(experiment);
    if !findings.is_empty() {
        writeln!(out, "\nfindings:")?;
        for finding in findings {
            writeln!(out, "  - {finding}")?;
        }
    }
    let restored = &experiment.restored;
    let dma = |value: Option<i64>| match value {
        Some(value) if value >= 2_000_000_000 => "no limit".to_owned(),
        Some(value) => format!("{value} µs"),
        None => "unreadable".to_owned(),
    };
    writeln!(
        out,
        "\nrestored: timer slack {} (was {}), cpu_dma_latency in force {} (was {}), changer process {}",
        Nanos(restored.timer_slack_ns_after),
        Nanos(restored.timer_slack_ns_before),
        dma(restored.cpu_dma_latency_after_us),
        dma(restored.cpu_dma_latency_before_us),
        if restored.changer_exited { "exited" } else { "STILL RUNNING" }
    )?;
    for warning in warnings {
        writeln!(out, "warning: {warning}")?;
    }
    Ok(())
}

fn write_audit(out: &mut impl Write, report: &AuditReport) -> std::fmt::Result {
    writeln!(
        out,
        "settings that change everyone's timing on {} (kernel {})",
        report.host.hostname, report.host.kernel
    )?;
    let mut topic = "";
    for item in &report.items {
        if item.topic != topic {
            topic = &item.topic;
            writeln!(out, "\n{topic}")?;
        }
        writeln!(
            out,
            "  [{:<7}] {}: {}",
            item.effect.as_str(),
            item.setting,
            item.value
        )?;
        writeln!(out, "            {} (set by: {})", item.why, item.set_by)?;
    }
    if !report.skipped.is_empty() {
        writeln!(out, "\nnot known:")?;
        for line in &report.skipped {
            writeln!(out, "  - {line}")?;
        }
    }
    Ok(())
}
