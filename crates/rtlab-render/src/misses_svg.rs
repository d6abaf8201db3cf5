//! A timeline of an application's deadline misses coloured by culprit, for `rtlab report --trace`:
//! one bar per late activation or missed period at its time, its height the response in periods,
//! its colour the culprit the analysis names (the legend ranks them by the time they took).
//! Only the recorded program's periodic threads count (rtlab-core's [`watched_threads`]). Deterministic
//! (sorted input, fixed palette), so it can be snapshotted.

use rtlab_core::apptrace_report::TraceReport;
use rtlab_core::text::escape_markup;
use std::fmt::Write as _;

const WIDTH: f64 = 900.0;
const PLOT_HEIGHT: f64 = 120.0;
const LEFT: f64 = 50.0;
const TOP: f64 = 10.0;
/// Colours of the culprits, by rank; the rest share the last.
const PALETTE: [&str; 8] = [
    "#d62728", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];
/// Responses are drawn up to this many periods.
const MOST_PERIODS_DRAWN: f64 = 5.0;

pub use rtlab_core::apptrace_report::{watched_misses, watched_threads};

pub use crate::apptrace_words::culprit_label;

/// Culprits ranked by the time they took: (label, misses, ns).
pub fn ranked_culprits(report: &TraceReport) -> Vec<(String, u64, u64)> {
    let mut ranked: Vec<(String, u64, u64)> = Vec::new();
    for late in watched_misses(report) {
        let label = culprit_label(late);
        let ns = late.culprit.as_ref().map_or(late.response_ns, |c| c.ns());
        match ranked.iter_mut().find(|(known, _, _)| *known == label) {
            Some(entry) => {
                entry.1 += late.deadlines_missed.max(1);
                entry.2 += ns;
            }
            None => ranked.push((label, late.deadlines_missed.max(1), ns)),
        }
    }
    ranked.sort_by(|left, right| right.2.cmp(&left.2).then(left.0.cmp(&right.0)));
    ranked
}

/// The SVG (inline, no script) of `report`'s misses over its duration.
pub fn render(report: &TraceReport) -> String {
    let ranked = ranked_culprits(report);
    let colour_of = |label: &str| {
        let rank = ranked
            .iter()
            .position(|(known, _, _)| known == label)
            .unwrap_or(PALETTE.len() - 1);
        PALETTE[rank.min(PALETTE.len() - 1)]
    };
    let legend_rows = ranked.len().min(PALETTE.len());
    let height = TOP + PLOT_HEIGHT + 30.0 + 18.0 * legend_rows as f64;
    let duration = report.duration_ns.max(1) as f64;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{PLOT_HEIGHT}" fill="#fafafa" stroke="#ccc"/>"##,
        WIDTH - LEFT - 10.0
    );
    for periods in [1.0, 2.0, 4.0] {
        let y = TOP + PLOT_HEIGHT * (1.0 - periods / MOST_PERIODS_DRAWN);
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#e0e0e0"/><text x="{}" y="{:.1}" text-anchor="end" fill="#666">{periods}×P</text>"##,
            WIDTH - 10.0,
            LEFT - 4.0,
            y + 4.0
        );
    }
    for late in watched_misses(report) {
        let x = LEFT
            + (WIDTH - LEFT - 10.0)
                * (late.at_ns.saturating_sub(report.first_ns) as f64 / duration);
        let periods =
            (late.response_ns as f64 / late.period_ns.max(1) as f64).min(MOST_PERIODS_DRAWN);
        let bar = PLOT_HEIGHT * periods / MOST_PERIODS_DRAWN;
        let label = culprit_label(late);
        let _ = write!(
            svg,
            r#"<rect x="{x:.1}" y="{:.1}" width="2" height="{bar:.1}" fill="{}"><title>{}</title></rect>"#,
            TOP + PLOT_HEIGHT - bar,
            colour_of(&label),
            escape_markup(&format!(
                "{:.3} s {} ({}): {}",
                late.at_ns.saturating_sub(report.first_ns) as f64 / 1e9,
                late.thread.name,
                late.thread.tid,
                crate::apptrace_words::explanation(&late.explanation)
            ))
        );
    }
    let _ = write!(
        svg,
        r##"<text x="{LEFT}" y="{:.1}" fill="#333">0 s</text><text x="{}" y="{:.1}" text-anchor="end" fill="#333">{:.1} s</text>"##,
        TOP + PLOT_HEIGHT + 14.0,
        WIDTH - 10.0,
        TOP + PLOT_HEIGHT + 14.0,
        duration / 1e9
    );
    for (row, (label, count, ns)) in ranked.iter().take(PALETTE.len()).enumerate() {
        let y = TOP + PLOT_HEIGHT + 34.0 + 18.0 * row as f64;
        let _ = write!(
            svg,
            r#"<rect x="{LEFT}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{}" y="{y:.1}">{} — {count} misses, {:.1} ms</text>"#,
            y - 10.0,
            colour_of(label),
            LEFT + 18.0,
            escape_markup(label),
            *ns as f64 / 1e6
        );
    }
    svg.push_str("</svg>");
    svg
}

/// `rtlab report --trace`'s section for the trace at `path`: its misses in one sentence and
/// their timeline.
pub fn trace_section(path: &str, report: &TraceReport) -> String {
    let misses: u64 = watched_misses(report)
        .iter()
        .map(|late| late.deadlines_missed.max(1))
        .sum();
    let ranked = ranked_culprits(report);
    let summary = match ranked.first() {
        Some((label, count, ns)) => format!(
            "{misses} deadline misses in {:.1} s; {count} of them to {label} ({:.1} ms in all)",
            report.duration_ns as f64 / 1e9,
            *ns as f64 / 1e6
        ),
        None => format!(
            "no deadline misses in {:.1} s",
            report.duration_ns as f64 / 1e9
        ),
    };
    format!(
        "<section><h2>Application trace: {}</h2><p>{}</p>{}</section>\n",
        escape_markup(path),
        escape_markup(&summary),
        render(report)
    )
}
