//! Terminal rendering of Run records: summary tables and warnings. Only the binary prints.
//!
//! Numbers are stored in ns and printed in µs with one decimal, the unit cyclictest users read.

use rtlab_core::{Metric, RunRecord, Series};
use std::io::Write;

/// ns → µs with one decimal, as printed in every table.
pub fn micros(nanos: u64) -> String {
    format!("{:.1}", nanos as f64 / 1_000.0)
}

fn micros_f64(nanos: f64) -> String {
    format!("{:.1}", nanos / 1_000.0)
}

fn percentile(series: &Series, key: &str) -> String {
    series
        .percentiles
        .get(key)
        .map(|value| micros(*value))
        .unwrap_or_else(|| "-".to_owned())
}

/// What each metric means, in plain words, printed above its table.
pub fn metric_explanation(metric: Metric) -> &'static str {
    match metric {
        Metric::Wakeup => {
            "wake-up latency: how late a periodic timer thread ran after its deadline"
        }
        Metric::Interval => "interval: time between consecutive wake-ups (ideal = the period)",
        Metric::Handoff => {
            "hand-off latency: from one thread signalling another to the woken thread running"
        }
    }
}

/// The run's summary: one table per metric (class × CPU rows), then the warnings.
pub fn write_summary(out: &mut impl Write, record: &RunRecord) -> std::io::Result<()> {
    let host = &record.host;
    writeln!(
        out,
        "run {}  started {}  measured {}{}",
        record.id,
        record.started_at,
        rtlab_core::Nanos(record.duration_ns),
        if record.interrupted {
            "  (interrupted)"
        } else {
            ""
        }
    )?;
    writeln!(
        out,
        "host {}  kernel {}  preemption {}  {} CPUs  virtualization {}  clocksource {}",
        host.hostname,
        host.kernel,
        host.preemption,
        host.cpu_count,
        host.virtualization,
        host.clocksource
    )?;
    for metric in [Metric::Wakeup, Metric::Handoff, Metric::Interval] {
        let rows: Vec<&Series> = record
            .series
            .iter()
            .filter(|series| series.metric == metric)
            .collect();
        if rows.is_empty() {
            continue;
        }
        writeln!(out)?;
        writeln!(out, "{} (µs)", metric_explanation(metric))?;
        writeln!(
            out,
            "{:<8} {:>3} {:>10} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8}",
            "class",
            "cpu",
            "count",
            "missed",
            "min",
            "p50",
            "p99",
            "p99.9",
            "p99.99",
            "max",
            "stddev"
        )?;
        for series in rows {
            writeln!(
                out,
                "{:<8} {:>3} {:>10} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8}",
                series.class,
                series.cpu,
                series.count,
                series.missed,
                micros(series.min_ns),
                percentile(series, "50"),
                percentile(series, "99"),
                percentile(series, "99.9"),
                percentile(series, "99.99"),
                micros(series.max_ns),
                micros_f64(series.stddev_ns),
            )?;
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

/// Paper 000's Tables 2-3: times between wake-ups in 100 µs bins, one column per series.
pub fn write_interval_table(out: &mut impl Write, record: &RunRecord) -> std::io::Result<()> {
    let mut columns = Vec::new();
    for series in record.series.iter().filter(|series| series.metric == Metric::Interval) {
        match series.histogram() {
            Ok(histogram) => columns.push((series, histogram)),
            Err(error) => writeln!(out, "warning: {}: {error}", series.label())?,
        }
    }
    if columns.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "times between wake-ups, 100 µs bins (period {}; paper 000, Tables 2-3)",
        rtlab_core::Nanos(columns[0].0.period_ns)
    )?;
    write!(out, "{:<16}", "interval")?;
    for (series, _) in &columns {
        write!(out, " {:>12}", format!("{}@{}", series.class, series.cpu))?;
    }
    writeln!(out)?;
    for (bin, counts) in rtlab_core::export::interval_table(&columns) {
        write!(out, "{bin:<16}")?;
        for count in counts {
            if count == 0 {
                write!(out, " {:>12}", "")?;
            } else {
                write!(out, " {count:>12}")?;
            }
        }
        writeln!(out)?;
    }
    Ok(())
}
