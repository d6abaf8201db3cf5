//! Terminal rendering of Run records: summary tables and warnings. Only the binary prints.
//!
//! Numbers are stored in ns and printed in µs with one decimal, the unit cyclictest users read.

use rtlab_core::{CompetitorEntry, Host, Metric, RunRecord, Series, TailUsage, WindowEstimate};
use std::fmt::Write;

/// ns → µs with one decimal, as printed in every table.
pub fn micros(nanos: u64) -> String {
    format!("{:.1}", nanos as f64 / 1_000.0)
}

/// `rtlab run`'s progress bar message while measuring: samples so far, the worst wake-up.
pub fn progress(samples: u64, max_wakeup_ns: u64) -> String {
    format!(
        "{samples} samples  worst wake-up {} us",
        micros(max_wakeup_ns)
    )
}

fn micros_f64(nanos: f64) -> String {
    format!("{:.1}", nanos / 1_000.0)
}

/// The `key` percentile of `series` in µs (`50`, `99.9`, …), or `-` where it has none.
pub(crate) fn percentile(series: &Series, key: &str) -> String {
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
        Metric::Response => "response time: from a workload thread's release to its completion",
        Metric::Irq => "irq latency: how late the timer thread's timer fired (rtla's IRQ latency)",
        Metric::Thread => "thread latency: from the timer firing to the timer thread running",
    }
}

/// The run's summary as text: [`write_summary`].
pub fn summary(record: &RunRecord) -> String {
    crate::to_text(|out| write_summary(out, record))
}

/// `measuring for 1m 1s (Ctrl-C stops early and keeps what was measured)…`: `rtlab run`'s line
/// on Windows when measuring starts, `total` warm-up plus measurement.
pub fn measuring_for(total: rtlab_core::Nanos) -> String {
    format!("measuring for {total} (Ctrl-C stops early and keeps what was measured)…")
}

/// Paper 000's interval table as text: [`write_interval_table`].
pub fn interval_table(record: &RunRecord) -> String {
    crate::to_text(|out| write_interval_table(out, record))
}

/// The run's summary: one table per metric (class × CPU rows), then the warnings.
pub fn write_summary(out: &mut impl Write, record: &RunRecord) -> std::fmt::Result {
    write_tables(out, record)?;
    write_load_summary(out, record)?;
    write_tail_summary(out, record)?;
    if !record.warnings.is_empty() {
        writeln!(out)?;
        for warning in &record.warnings {
            writeln!(out, "warning: {warning}")?;
        }
    }
    Ok(())
}

/// "  (interrupted)" after a run's first line when it was stopped early, else nothing.
pub(crate) fn interrupted_note(record: &RunRecord) -> &'static str {
    if record.interrupted {
        "  (interrupted)"
    } else {
        ""
    }
}

/// How [`host_line`] lays the host's facts out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HostLayout {
    /// `host NAME  kernel …  clocksource …`, the summary's line.
    Wide,
    /// `NAME, kernel … (preemption …), …`, the compact summary's (which wraps it).
    Compact,
}

/// The host facts every text summary shows (name, kernel, preemption, CPUs, virtualization,
/// clocksource) as one line in `layout`.
pub(crate) fn host_line(host: &Host, layout: HostLayout) -> String {
    let (name, kernel, preemption) = (&host.hostname, &host.kernel, &host.preemption);
    let (cpus, virtualization, clock) = (host.cpu_count, &host.virtualization, &host.clocksource);
    match layout {
        HostLayout::Wide => format!(
            "host {name}  kernel {kernel}  preemption {preemption}  {cpus} CPUs  virtualization {virtualization}  clocksource {clock}"
        ),
        HostLayout::Compact => format!(
            "{name}, kernel {kernel} (preemption {preemption}), {cpus} CPUs, virtualization {virtualization}, clocksource {clock}"
        ),
    }
}

/// The metrics in the order the text summaries give them a table each.
const METRIC_ORDER: [Metric; 6] = [
    Metric::Wakeup,
    Metric::Handoff,
    Metric::Interval,
    Metric::Response,
    Metric::Irq,
    Metric::Thread,
];

/// Each metric `record` has series of, with its series, in [`METRIC_ORDER`]: the text summaries'
/// one table per metric.
pub(crate) fn series_by_metric(record: &RunRecord) -> impl Iterator<Item = (Metric, Vec<&Series>)> {
    METRIC_ORDER
        .into_iter()
        .map(|metric| (metric, record.series_of(metric)))
        .filter(|(_, rows)| !rows.is_empty())
}

/// The run and host lines and one table per metric (class × CPU rows).
pub fn write_tables(out: &mut impl Write, record: &RunRecord) -> std::fmt::Result {
    writeln!(
        out,
        "run {}  started {}  measured {}{}",
        record.id,
        record.started_at,
        rtlab_core::Nanos(record.duration_ns),
        interrupted_note(record)
    )?;
    writeln!(out, "{}", host_line(&record.host, HostLayout::Wide))?;
    for (metric, rows) in series_by_metric(record) {
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
    Ok(())
}

/// Paper 000's Tables 2-3: times between wake-ups in 100 µs bins, one column per series.
pub fn write_interval_table(out: &mut impl Write, record: &RunRecord) -> std::fmt::Result {
    let mut columns = Vec::new();
    for series in record
        .series
        .iter()
        .filter(|series| series.metric == Metric::Interval)
    {
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

/// A tail cell's text, and why there is no estimate when there is not enough data.
struct TailCell {
    text: String,
    insufficient: Option<String>,
}

/// One tail cell: `38.2 [31.0-52.3] gpd`, or `insufficient*` (reasons listed under the table).
fn tail_cell(window: Option<&WindowEstimate>) -> TailCell {
    match window {
        None => TailCell {
            text: "-".to_owned(),
            insufficient: None,
        },
        Some(WindowEstimate::Insufficient { insufficient }) => TailCell {
            text: "insufficient*".to_owned(),
            insufficient: Some(insufficient.clone()),
        },
        Some(WindowEstimate::Value(value)) => TailCell {
            text: format!(
                "{} [{}-{}] {}",
                micros(value.estimate_ns),
                micros(value.ci_low_ns),
                micros(value.ci_high_ns),
                value.method
            ),
            insufficient: None,
        },
    }
}

/// What load ran (the record's `load`), in two or three lines.
pub fn write_load_summary(out: &mut impl Write, record: &RunRecord) -> std::fmt::Result {
    let Some(load) = &record.load else {
        return Ok(());
    };
    writeln!(out)?;
    let spec = load.spec.as_deref().unwrap_or("(no --load)");
    writeln!(
        out,
        "load {spec}  usage {}h/day × {}d/week ({})",
        load.usage.hours_per_day, load.usage.days_per_week, load.usage.source
    )?;
    if !load.stressors.is_empty() {
        let parts: Vec<String> = load
            .stressors
            .iter()
            .map(|stressor| {
                format!(
                    "{} {:.1} s CPU",
                    stressor.spec,
                    stressor.cpu_time_ns as f64 / 1e9
                )
            })
            .collect();
        writeln!(out, "  stressors: {}", parts.join(", "))?;
    }
    if let Some(command) = &load.command {
        writeln!(out, "  --load-cmd '{}': {}", command.cmd, command.ended)?;
    }
    for competitor in &load.competitors {
        if let CompetitorEntry::Ran(competitor) = competitor {
            writeln!(
                out,
                "  competitor {}: {:.1} s CPU, stopped ({})",
                competitor.spec,
                competitor.cpu_time_ns as f64 / 1e9,
                competitor.stop_reason
            )?;
        }
    }
    Ok(())
}

/// The tail projection of every series that has one: worst case per hour / day / week of use with
/// intervals, the reasons where there is no number, and the `rare` lines of each class's worst
/// wake-up series.
pub fn write_tail_summary(out: &mut impl Write, record: &RunRecord) -> std::fmt::Result {
    let rows: Vec<&Series> = record
        .series
        .iter()
        .filter(|series| series.tail.is_some())
        .collect();
    let Some(first) = rows.first().and_then(|series| series.tail.as_ref()) else {
        return Ok(());
    };
    let usage = first.usage.unwrap_or(TailUsage {
        hours_per_day: 24.0,
        days_per_week: 7.0,
    });
    let seconds = first.window_seconds.unwrap_or_default();
    let hours = |seconds: u64| seconds as f64 / 3600.0;
    writeln!(out)?;
    writeln!(
        out,
        "expected worst case per window of use, µs: median of the window's largest latency [95 % interval], method (usage {}h/day, {}d/week)",
        usage.hours_per_day, usage.days_per_week
    )?;
    writeln!(
        out,
        "{:<8} {:>3} {:<9} {:<34} {:<34} {:<34}",
        "class",
        "cpu",
        "metric",
        format!("per hour ({:.0} h)", hours(seconds.per_hour)),
        format!("per day ({:.1} h)", hours(seconds.per_day)),
        format!("per week ({:.1} h)", hours(seconds.per_week))
    )?;
    let mut reasons: Vec<(String, Vec<String>)> = Vec::new();
    for series in &rows {
        let tail = series.tail.as_ref().expect("filtered on tail");
        let mut cells = Vec::new();
        for window in ["per_hour", "per_day", "per_week"] {
            let TailCell {
                text: cell,
                insufficient: reason,
            } = tail_cell(tail.window(window));
            if let Some(reason) = reason {
                let place = format!("{} {window}", series.label());
                match reasons.iter_mut().find(|(known, _)| *known == reason) {
                    Some((_, places)) => places.push(place),
                    None => reasons.push((reason, vec![place])),
                }
            }
            cells.push(cell);
        }
        writeln!(
            out,
            "{:<8} {:>3} {:<9} {:<34} {:<34} {:<34}",
            series.class,
            series.cpu,
            series.metric.as_str(),
            cells[0],
            cells[1],
            cells[2]
        )?;
    }
    for (reason, places) in &reasons {
        let shown: Vec<&str> = places.iter().take(3).map(String::as_str).collect();
        let more = if places.len() > 3 {
            format!(" and {} more", places.len() - 3)
        } else {
            String::new()
        };
        writeln!(out, "* insufficient: {reason} ({}{more})", shown.join(", "))?;
    }
    let mut classes: Vec<&str> = Vec::new();
    for series in &rows {
        if !classes.contains(&series.class.as_str()) {
            classes.push(series.class.as_str());
        }
    }
    for class in classes {
        let worst = rows
            .iter()
            .filter(|series| series.class == class && series.metric == Metric::Wakeup)
            .max_by_key(|series| series.max_ns);
        let Some(worst) = worst else { continue };
        let lines = worst.tail.iter().flat_map(|tail| &tail.rare);
        for line in lines {
            writeln!(out, "{}: {line}", worst.label())?;
        }
    }
    Ok(())
}
