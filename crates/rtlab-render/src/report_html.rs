//! `rtlab report --html`: one self-contained HTML file (inline CSS, inline SVG, no script, no
//! network) for one or several runs. Per run: metadata, the verdict, per class a latency
//! histogram, the tail of the CDF and the per-second maxima (one line per CPU), the tail
//! projection with its intervals, the explained episodes as a timeline with their causes and the
//! top offenders, the load and the warnings. The output depends only on the records, so it is
//! deterministic.

use crate::run_verdict::cyclictest_note;
use crate::svg_plots::{line_plot, timeline, Axis, Line, Mark};
use rtlab_analysis::classes::builtin_classes;
use rtlab_analysis::forecast::VerdictKind;
use rtlab_analysis::run_verdict::{run_verdict, Detail};
use rtlab_core::text::escape_markup;
use rtlab_core::{LatencyHistogram, Metric, RunRecord, Series};
use std::fmt::Write as _;

const STYLE: &str = r#"
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; color: #222; margin: 24px auto; max-width: 1320px; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 28px 0 8px; border-bottom: 2px solid #0072B2; padding-bottom: 3px; }
h3 { font-size: 16px; margin: 18px 0 6px; } p.lead { color: #555; margin: 0 0 12px; }
table { border-collapse: collapse; margin: 6px 0 12px; } th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f6f9; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.plots { display: flex; flex-wrap: wrap; gap: 8px; } .plot, .timeline { background: #fff; border: 1px solid #ddd; }
svg text { font-family: "DejaVu Sans", system-ui, sans-serif; } svg .title { font-size: 13px; font-weight: 600; fill: #222; }
svg .tick { font-size: 10px; fill: #555; } svg .axis { font-size: 11px; fill: #333; } svg .legend { font-size: 11px; font-weight: 600; }
.ok { color: #007a4d; font-weight: 600; } .bad { color: #c0392b; font-weight: 600; } .unknown { color: #a66b00; font-weight: 600; }
.worst { font-size: 15px; background: #fff6e5; border-left: 4px solid #E69F00; padding: 6px 10px; margin: 8px 0; }
.note { color: #444; background: #f3f6f9; padding: 6px 10px; margin: 8px 0; }
ul.warnings li { margin: 2px 0; } code { background: #f3f3f3; padding: 0 3px; }
"#;

fn micros(nanos: u64) -> String {
    crate::summary::micros(nanos)
}

/// The report of `records` with `sections` (`rtlab report --trace`'s) after the runs, inside
/// the page's body.
pub fn render_with(records: &[RunRecord], sections: &str) -> String {
    let mut html = render(records);
    if !sections.is_empty() {
        let at = html.rfind("</body>").unwrap_or(html.len());
        html.insert_str(at, sections);
    }
    html
}

/// The whole document for `records`.
pub fn render(records: &[RunRecord]) -> String {
    let mut html = String::new();
    let title = match records {
        [one] => format!(
            "rtlab report: run {} on {}",
            short_id(&one.id),
            one.host.hostname
        ),
        many => format!("rtlab report: {} runs", many.len()),
    };
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape_markup(&title),
        escape_markup(&title)
    );
    let _ = writeln!(
        html,
        "<p class=\"lead\">Wake-up latency: how late a periodic timer thread ran after its deadline. Plots use log scales; one line per CPU. Made by rtlab {} from the stored Run records; no script, no network.</p>",
        env!("CARGO_PKG_VERSION")
    );
    for record in records {
        write_run(&mut html, record);
    }
    html.push_str("</body>\n</html>\n");
    html
}

fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
}

fn write_run(html: &mut String, record: &RunRecord) {
    let host = &record.host;
    let _ = writeln!(
        html,
        "<h2>Run {} — {} — {}</h2>",
        escape_markup(&short_id(&record.id)),
        escape_markup(&record.started_at),
        rtlab_core::Nanos(record.duration_ns)
    );
    let _ = writeln!(html, "<table>");
    let rows = [
        ("run id", record.id.clone()),
        ("started", record.started_at.clone()),
        (
            "measured",
            format!(
                "{}{}",
                rtlab_core::Nanos(record.duration_ns),
                if record.interrupted {
                    " (interrupted)"
                } else {
                    ""
                }
            ),
        ),
        ("host", host.hostname.clone()),
        (
            "kernel",
            format!("{} (preemption {})", host.kernel, host.preemption),
        ),
        ("CPU", format!("{} × {}", host.cpu_count, host.cpu_model)),
        ("virtualization", host.virtualization.clone()),
        ("clocksource", host.clocksource.clone()),
        (
            "/dev/cpu_dma_latency",
            host.cpu_dma_latency_us
                .map_or("not held (the machine as configured)".to_owned(), |us| {
                    format!("held at {us} µs")
                }),
        ),
        ("command", record.cmdline.join(" ")),
        ("rtlab", record.tool_version.clone()),
    ];
    for (name, value) in rows {
        let _ = writeln!(
            html,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape_markup(name),
            escape_markup(&value)
        );
    }
    let _ = writeln!(html, "</table>");
    write_verdict(html, record);
    for metric in [Metric::Wakeup, Metric::Handoff, Metric::Interval] {
        write_metric(html, record, metric);
    }
    write_tail(html, record);
    write_episodes(html, record);
    write_load_and_warnings(html, record);
}

fn write_verdict(html: &mut String, record: &RunRecord) {
    let verdict = run_verdict(record, &builtin_classes(), Detail::Full);
    let _ = writeln!(html, "<h3>Verdict per application class</h3>");
    if let Some(worst) = &verdict.worst {
        let _ = writeln!(
            html,
            "<p class=\"worst\">Worst thing found: {}</p>",
            escape_markup(&worst.text)
        );
    }
    match &verdict.no_forecast {
        Some(reason) => {
            let _ = writeln!(html, "<p>No forecast: {}</p>", escape_markup(reason));
        }
        None => {
            let _ = writeln!(
                html,
                "<p>From <code>{}</code>, pooled over CPUs. ✔ suitable, ✘ not suitable, ? measure longer (the interval of the mean time between glitches straddles what the class needs).</p>\n<table><tr><th></th><th>class</th><th>what it is</th><th>glitches</th><th>acceptable</th></tr>",
                escape_markup(&verdict.series)
            );
            for class in &verdict.classes {
                let (mark, css) = match class.kind {
                    VerdictKind::Suitable => ("✔", "ok"),
                    VerdictKind::NotSuitable => ("✘", "bad"),
                    VerdictKind::Undetermined => ("?", "unknown"),
                };
                let _ = writeln!(
                    html,
                    "<tr><td class=\"{css}\">{mark}</td><td>{}</td><td>{}</td><td title=\"{}\">{}</td><td>{}</td></tr>",
                    escape_markup(&class.name),
                    escape_markup(&class.description),
                    escape_markup(class.detail.as_deref().unwrap_or_default()),
                    escape_markup(&class.mttf_text),
                    escape_markup(&class.acceptable_text)
                );
            }
            let _ = writeln!(html, "</table>");
        }
    }
    let _ = writeln!(
        html,
        "<p class=\"note\">{}</p>",
        escape_markup(&cyclictest_note(record, None))
    );
}

/// Buckets merged into 16 bins per decade, as (bin centre µs, count).
fn log_bins(histogram: &LatencyHistogram) -> Vec<(f64, f64)> {
    let per_decade = 16.0;
    let mut bins: std::collections::BTreeMap<i64, u64> = std::collections::BTreeMap::new();
    for (value, count) in histogram.buckets() {
        let micros = (value as f64 / 1e3).max(0.1);
        let bin = (micros.log10() * per_decade).floor() as i64;
        *bins.entry(bin).or_default() += count;
    }
    bins.into_iter()
        .map(|(bin, count)| (10f64.powf((bin as f64 + 0.5) / per_decade), count as f64))
        .collect()
}

/// (µs, fraction of samples above it) at every bucket edge.
fn exceedance(histogram: &LatencyHistogram) -> Vec<(f64, f64)> {
    let total = histogram.count() as f64;
    let mut below = 0u64;
    let mut points = Vec::new();
    for (value, count) in histogram.buckets() {
        below += count;
        let above = (total - below as f64) / total;
        points.push((value as f64 / 1e3, above.max(0.5 / total)));
    }
    points
}

fn metric_title(metric: Metric) -> &'static str {
    match metric {
        Metric::Wakeup => "Wake-up latency",
        Metric::Handoff => "Hand-off latency",
        Metric::Interval => "Interval between wake-ups",
        Metric::Response => "Response time",
        Metric::Irq => "IRQ latency (timer expiry − intended)",
        Metric::Thread => "Thread latency (switch-in − timer expiry)",
    }
}

fn write_metric(html: &mut String, record: &RunRecord, metric: Metric) {
    let series = record.series_of(metric);
    if series.is_empty() {
        return;
    }
    let _ = writeln!(
        html,
        "<h3>{}</h3>\n<p>{}</p>",
        metric_title(metric),
        escape_markup(crate::summary::metric_explanation(metric))
    );
    write_series_table(html, &series);
    let mut classes: Vec<&str> = Vec::new();
    for item in &series {
        if !classes.contains(&item.class.as_str()) {
            classes.push(&item.class);
        }
    }
    for class in classes {
        let members: Vec<(&Series, LatencyHistogram)> = series
            .iter()
            .filter(|item| item.class == class)
            .filter_map(|item| item.histogram().ok().map(|histogram| (*item, histogram)))
            .collect();
        if members.is_empty() {
            continue;
        }
        let low = members
            .iter()
            .map(|(item, _)| item.min_ns)
            .min()
            .unwrap_or(1) as f64
            / 1e3;
        let high = members
            .iter()
            .map(|(item, _)| item.max_ns)
            .max()
            .unwrap_or(1) as f64
            / 1e3;
        let x = Axis {
            label: "latency, µs (log)".to_owned(),
            min: nice_floor(low.max(0.1)),
            max: nice_ceil(high.max(low * 1.1).max(1.0)),
            log: true,
        };
        let max_count = members
            .iter()
            .flat_map(|(_, histogram)| log_bins(histogram))
            .map(|(_, count)| count)
            .fold(1.0, f64::max);
        let histogram_lines: Vec<Line> = members
            .iter()
            .map(|(item, histogram)| Line {
                label: format!("CPU {}", item.cpu),
                points: log_bins(histogram),
                steps: false,
            })
            .collect();
        let count_axis = Axis {
            label: "wake-ups per bin (log)".to_owned(),
            min: 0.8,
            max: nice_ceil(max_count),
            log: true,
        };
        let smallest = members
            .iter()
            .map(|(_, histogram)| 0.5 / histogram.count().max(1) as f64)
            .fold(1.0, f64::min);
        let exceedance_lines: Vec<Line> = members
            .iter()
            .map(|(item, histogram)| Line {
                label: format!("CPU {}", item.cpu),
                points: exceedance(histogram),
                steps: true,
            })
            .collect();
        let fraction_axis = Axis {
            label: "fraction later than x (log)".to_owned(),
            min: nice_floor(smallest),
            max: 1.0,
            log: true,
        };
        let seconds = members
            .iter()
            .map(|(item, _)| item.max_per_second.len())
            .max()
            .unwrap_or(0);
        let per_second_lines: Vec<Line> = members
            .iter()
            .map(|(item, _)| Line {
                label: format!("CPU {}", item.cpu),
                points: item
                    .max_per_second
                    .iter()
                    .enumerate()
                    .map(|(second, value)| (second as f64 + 0.5, *value as f64 / 1e3))
                    .collect(),
                steps: false,
            })
            .collect();
        let time_axis = Axis {
            label: "second of measurement".to_owned(),
            min: 0.0,
            max: (seconds as f64).max(1.0),
            log: false,
        };
        let label = format!("{class}, {}", metric.as_str());
        let _ = writeln!(html, "<div class=\"plots\">");
        html.push_str(&line_plot(
            &format!("{label}: histogram"),
            &x,
            &count_axis,
            &histogram_lines,
        ));
        html.push_str(&line_plot(
            &format!("{label}: tail of the CDF"),
            &x,
            &fraction_axis,
            &exceedance_lines,
        ));
        if seconds > 0 {
            let per_second_axis = Axis {
                label: "largest in the second, µs (log)".to_owned(),
                ..x.clone()
            };
            html.push_str(&line_plot(
                &format!("{label}: worst per second"),
                &time_axis,
                &per_second_axis,
                &per_second_lines,
            ));
        }
        let _ = writeln!(html, "\n</div>");
    }
}

/// The power of ten at or below `value` (1-2-5 steps).
fn nice_floor(value: f64) -> f64 {
    let power = 10f64.powf(value.log10().floor());
    [5.0, 2.0, 1.0]
        .iter()
        .map(|step| step * power)
        .find(|candidate| *candidate <= value)
        .unwrap_or(power)
}

/// The 1-2-5 step at or above `value`.
fn nice_ceil(value: f64) -> f64 {
    let power = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|step| step * power)
        .find(|candidate| *candidate >= value)
        .unwrap_or(power * 10.0)
}

fn write_series_table(html: &mut String, series: &[&Series]) {
    let _ = writeln!(
        html,
        "<table><tr><th>class</th><th>CPU</th><th>policy</th><th>count</th><th>missed</th><th>min µs</th><th>p50</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th></tr>"
    );
    for item in series {
        let percentile = |key: &str| {
            item.percentiles
                .get(key)
                .map_or("-".to_owned(), |value| micros(*value))
        };
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td class=\"num\">{}</td><td>{} {}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape_markup(&item.class),
            item.cpu,
            escape_markup(&item.policy),
            item.priority,
            item.count,
            item.missed,
            micros(item.min_ns),
            percentile("50"),
            percentile("99"),
            percentile("99.9"),
            percentile("99.99"),
            micros(item.max_ns)
        );
    }
    let _ = writeln!(html, "</table>");
}

fn tail_cell(window: &serde_json::Value) -> String {
    if let Some(reason) = window.get("insufficient").and_then(|value| value.as_str()) {
        return format!(
            "<span class=\"unknown\">no number</span>: {}",
            escape_markup(reason)
        );
    }
    let field = |name: &str| {
        window
            .get(name)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    format!(
        "{} µs [{}–{}] ({})",
        micros(field("estimate_ns")),
        micros(field("ci_low_ns")),
        micros(field("ci_high_ns")),
        escape_markup(
            window
                .get("method")
                .and_then(|value| value.as_str())
                .unwrap_or("?")
        )
    )
}

fn write_tail(html: &mut String, record: &RunRecord) {
    let rows = crate::run_verdict::tail_series(record);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        html,
        "<h3>Tail projection: the worst wake-up latency to expect per window of use</h3>\n<p>Median of the window's largest latency with its 95 % interval, from a peaks-over-threshold fit (gpd) or the per-second maxima (empirical); no number where the data cannot support one.</p>\n<table><tr><th>series</th><th>per hour</th><th>per day</th><th>per week</th></tr>"
    );
    for series in rows {
        let tail = serde_json::to_value(series.tail.as_ref().expect("filtered on tail"))
            .unwrap_or_default();
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape_markup(&series.label()),
            tail_cell(&tail["per_hour"]),
            tail_cell(&tail["per_day"]),
            tail_cell(&tail["per_week"])
        );
    }
    let _ = writeln!(html, "</table>");
}

fn write_episodes(html: &mut String, record: &RunRecord) {
    let _ = writeln!(html, "<h3>Explained late wake-ups</h3>");
    if record.episodes.is_empty() {
        let _ = writeln!(
            html,
            "<p>None recorded: the run was not explained (<code>rtlab run --explain</code> records what ran instead of each late wake-up).</p>"
        );
        return;
    }
    let mut lanes: Vec<u32> = record.episodes.iter().map(|episode| episode.cpu).collect();
    lanes.sort_unstable();
    lanes.dedup();
    let dominant_of = |episode: &rtlab_core::Episode| {
        episode
            .causes
            .iter()
            .max_by_key(|cause| cause.ns)
            .map_or("unknown".to_owned(), |cause| {
                format!("{} {}", cause.kind.as_str(), cause.name)
            })
    };
    // The seven causes that dominate most episodes get a colour each; the rest are "other".
    let mut counts: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for episode in &record.episodes {
        *counts.entry(dominant_of(episode)).or_default() += 1;
    }
    let mut ranked: Vec<(String, usize)> = counts.into_iter().collect();
    ranked.sort_by(|left, right| right.1.cmp(&left.1).then(left.0.cmp(&right.0)));
    let mut categories: Vec<String> = ranked
        .iter()
        .take(7)
        .map(|(name, count)| format!("{name} ({count})"))
        .collect();
    if ranked.len() > 7 {
        let rest: usize = ranked[7..].iter().map(|(_, count)| count).sum();
        categories.push(format!("{} other causes ({rest})", ranked.len() - 7));
    }
    let mut marks = Vec::new();
    for episode in &record.episodes {
        let dominant = dominant_of(episode);
        let category = ranked
            .iter()
            .take(7)
            .position(|(name, _)| *name == dominant)
            .unwrap_or(7);
        marks.push(Mark {
            at_s: episode.at_ns as f64 / 1e9,
            lane: lanes
                .iter()
                .position(|cpu| *cpu == episode.cpu)
                .unwrap_or(0),
            value: episode.latency_ns as f64 / 1e3,
            category,
            tooltip: format!(
                "{} at {:.3} s: {} µs, mostly {dominant}",
                episode.series,
                episode.at_ns as f64 / 1e9,
                micros(episode.latency_ns)
            ),
        });
    }
    let lane_names: Vec<String> = lanes.iter().map(|cpu| format!("CPU {cpu}")).collect();
    html.push_str(&timeline(
        "episodes: circle size = latency, colour = the largest cause",
        record.duration_ns as f64 / 1e9,
        &lane_names,
        &categories,
        &marks,
    ));
    let mut worst: Vec<&rtlab_core::Episode> = record.episodes.iter().collect();
    worst.sort_by(|left, right| {
        right
            .latency_ns
            .cmp(&left.latency_ns)
            .then(left.at_ns.cmp(&right.at_ns))
    });
    let _ = writeln!(
        html,
        "<p>{} episodes; the worst {}:</p>\n<table><tr><th>series</th><th>at, s</th><th>latency µs</th><th>causes (µs)</th></tr>",
        record.episodes.len(),
        worst.len().min(15)
    );
    for episode in worst.iter().take(15) {
        let causes: Vec<String> = episode
            .causes
            .iter()
            .take(5)
            .map(|cause| {
                format!(
                    "{} {} {}",
                    cause.kind.as_str(),
                    escape_markup(&cause.name),
                    micros(cause.ns)
                )
            })
            .collect();
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td class=\"num\">{:.3}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            escape_markup(&episode.series),
            episode.at_ns as f64 / 1e9,
            micros(episode.latency_ns),
            causes.join("; ")
        );
    }
    let _ = writeln!(html, "</table>");
    let offenders = rtlab_analysis::offenders::top_offenders(&record.episodes);
    let _ = writeln!(
        html,
        "<p>Top offenders over all episodes:</p>\n<table><tr><th>kind</th><th>name</th><th>episodes</th><th>largest cause in</th><th>total µs</th><th>max µs</th></tr>"
    );
    for offender in offenders.iter().take(10) {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            offender.kind.as_str(),
            escape_markup(&offender.name),
            offender.episodes,
            offender.dominant_in,
            micros(offender.total_ns),
            micros(offender.max_ns)
        );
    }
    let _ = writeln!(html, "</table>");
}

fn write_load_and_warnings(html: &mut String, record: &RunRecord) {
    let _ = writeln!(html, "<h3>Load</h3>");
    match &record.load {
        None => {
            let _ = writeln!(
                html,
                "<p>No load: the machine as it was (idle unless something else ran).</p>"
            );
        }
        Some(load) => {
            let mut text = String::new();
            crate::summary::write_load_summary(&mut text, record).expect("writing to memory");
            let _ = writeln!(html, "<pre>{}</pre>", escape_markup(text.trim()));
            let _ = load;
        }
    }
    let _ = writeln!(html, "<h3>Warnings</h3>");
    if record.warnings.is_empty() {
        let _ = writeln!(html, "<p>None.</p>");
        return;
    }
    let mut text = String::new();
    crate::run_verdict::write_collapsed_warnings(&mut text, &record.warnings)
        .expect("writing to memory");
    let _ = writeln!(html, "<ul class=\"warnings\">");
    let text = text.replace('\u{a0}', " ");
    // One item per collapsed warning (continuation lines joined back).
    let mut items: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(first) = line.strip_prefix("warning: ") {
            items.push(first.to_owned());
        } else if let Some(last) = items.last_mut() {
            last.push(' ');
            last.push_str(line.trim());
        }
    }
    for item in items {
        let _ = writeln!(html, "<li>{}</li>", escape_markup(&item));
    }
    let _ = writeln!(html, "</ul>");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> RunRecord {
        let path = format!(
            "{}/test_data/records/vm-5s.json",
            env!("CARGO_MANIFEST_DIR")
        );
        RunRecord::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn the_report_is_self_contained_and_deterministic() {
        let record = fixture();
        let html = render(std::slice::from_ref(&record));
        assert_eq!(html, render(std::slice::from_ref(&record)));
        assert!(html.starts_with("<!DOCTYPE html>"));
        for outside in ["<script", "http://", "https://", "<link", "src="] {
            let found = html
                .match_indices(outside)
                .filter(|(index, _)| !html[..*index].ends_with("xmlns=\""))
                .count();
            assert_eq!(found, 0, "the report refers outside itself: {outside}");
        }
        // 3 metrics × 3 classes × 3 plots.
        assert_eq!(html.matches("<svg").count(), 27);
        assert!(html.contains("Worst thing found"));
        assert!(html.contains("pro-audio-48k-128x2"));
    }
}
