//! The timer study's pictures, hand-built SVG (a few rectangles and labels do not need a plotting
//! crate): the distribution of times between returns per API and class with log-scaled counts
//! (paper 000's Tables 2-3 as a picture), and the change experiment's effect per setting.
//! Output is deterministic (fixed formatting, input order) so it can be snapshotted.

use rtlab_core::text::escape_markup;
use rtlab_core::timer_study::{ChangeExperiment, TimerRow, TIMER_CLASSES};
use rtlab_core::{LatencyHistogram, Nanos};
use std::fmt::Write as _;

const BINS: u64 = 60;
const SPAN_PERIODS: u64 = 3;
const PANEL_WIDTH: f64 = 250.0;
const PANEL_HEIGHT: f64 = 56.0;
const LABEL_WIDTH: f64 = 230.0;
const TOP: f64 = 70.0;
const GAP: f64 = 22.0;

/// The opening of a picture: the root element, a white background and the title.
fn start_svg(width: f64, height: f64, title: &str) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">{}</text>"#,
        escape_markup(title)
    );
    svg
}

/// The file of the change experiment's picture under `rtlab timers --svg DIR`.
pub const CHANGE_EXPERIMENT_FILE: &str = "change-experiment.svg";

/// The files of a study of `intervals` under `rtlab timers --svg DIR`: one per interval
/// (`timers-1ms.svg`), in the order [`study_pictures`] draws them.
pub fn study_file_names(intervals: &[Nanos]) -> Vec<String> {
    intervals
        .iter()
        .map(|interval| format!("timers-{}.svg", millis_label(interval.0)))
        .collect()
}

/// One picture per interval of `intervals` (see [`interval_distributions`]).
pub fn study_pictures(
    rows: &[TimerRow],
    intervals: &[Nanos],
) -> Result<Vec<String>, UnreadableRow> {
    intervals
        .iter()
        .map(|interval| interval_distributions(rows, interval.0))
        .collect()
}

/// `1ms`, `16.667ms`: a requested interval as the pictures and their files name it.
pub fn millis_label(ns: u64) -> String {
    let text = format!("{:.3}", ns as f64 / 1e6);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}ms")
}

/// Counts per bin of width requested/20 over [0, 3 periods), the last bin holding everything
/// beyond.
fn binned(row: &TimerRow) -> Result<Vec<u64>, UnreadableRow> {
    let mut bins = vec![0u64; BINS as usize + 1];
    if row.count == 0 {
        return Ok(bins);
    }
    let histogram = LatencyHistogram::from_base64(&row.hdr).map_err(|error| UnreadableRow {
        row: row.label(),
        message: error.to_string(),
    })?;
    let width = (row.requested_ns * SPAN_PERIODS / BINS).max(1);
    for (value, count) in histogram.buckets() {
        let bin = (value / width).min(BINS) as usize;
        bins[bin] += count;
    }
    Ok(bins)
}

/// A row of the study whose histogram cannot be decoded.
#[derive(Debug, thiserror::Error)]
#[error("row {row}: field 'hdr': {message}")]
pub struct UnreadableRow {
    pub row: String,
    pub message: String,
}

/// One SVG of every row requested at `requested_ns`: a row of panels per API (and mode), a
/// column per class.
pub fn interval_distributions(
    rows: &[TimerRow],
    requested_ns: u64,
) -> Result<String, UnreadableRow> {
    let rows: Vec<&TimerRow> = rows
        .iter()
        .filter(|row| row.requested_ns == requested_ns)
        .collect();
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for row in &rows {
        if !keys.contains(&(row.api.as_str(), row.mode.as_str())) {
            keys.push((row.api.as_str(), row.mode.as_str()));
        }
    }
    let classes: Vec<&str> = TIMER_CLASSES
        .iter()
        .copied()
        .filter(|class| rows.iter().any(|row| row.class == *class))
        .collect();
    let mut binned_rows = Vec::with_capacity(rows.len());
    for row in &rows {
        binned_rows.push((*row, binned(row)?));
    }
    let most = binned_rows
        .iter()
        .flat_map(|(_, bins)| bins.iter().copied())
        .max()
        .unwrap_or(1)
        .max(1);
    let log_most = ((most + 1) as f64).log10();
    let width = LABEL_WIDTH + classes.len() as f64 * (PANEL_WIDTH + GAP) + 20.0;
    let height = TOP + keys.len() as f64 * (PANEL_HEIGHT + GAP) + 40.0;
    let mut svg = start_svg(
        width,
        height,
        &format!(
            "Times between returns, {} requested",
            millis_label(requested_ns)
        ),
    );
    let _ = writeln!(
        svg,
        r##"<text x="10" y="38" fill="#444">bins of 1/20 period from 0 to 3 periods (last bin: beyond); bar height = log10(1 + count), tallest = {most}; red line = the request</text>"##
    );
    for (column, class) in classes.iter().enumerate() {
        let x = LABEL_WIDTH + column as f64 * (PANEL_WIDTH + GAP);
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-weight="bold">{class}</text>"#,
            x + PANEL_WIDTH / 2.0,
            TOP - 8.0
        );
    }
    let bar_width = PANEL_WIDTH / (BINS + 1) as f64;
    for (line, (api, mode)) in keys.iter().enumerate() {
        let y = TOP + line as f64 * (PANEL_HEIGHT + GAP);
        let _ = writeln!(
            svg,
            r##"<text x="10" y="{:.1}">{}</text><text x="10" y="{:.1}" fill="#666">{}</text>"##,
            y + PANEL_HEIGHT / 2.0,
            escape_markup(api),
            y + PANEL_HEIGHT / 2.0 + 14.0,
            escape_markup(mode)
        );
        for (column, class) in classes.iter().enumerate() {
            let x = LABEL_WIDTH + column as f64 * (PANEL_WIDTH + GAP);
            let _ = writeln!(
                svg,
                r##"<rect x="{x:.1}" y="{y:.1}" width="{PANEL_WIDTH:.1}" height="{PANEL_HEIGHT:.1}" fill="#f6f6f6" stroke="#ccc"/>"##
            );
            let found = binned_rows
                .iter()
                .find(|(row, _)| row.api == *api && row.mode == *mode && row.class == *class);
            let Some((row, bins)) = found.filter(|(row, _)| row.count > 0) else {
                let _ = writeln!(
                    svg,
                    r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#999">not measured</text>"##,
                    x + PANEL_WIDTH / 2.0,
                    y + PANEL_HEIGHT / 2.0 + 4.0
                );
                continue;
            };
            for (index, &count) in bins.iter().enumerate() {
                if count == 0 {
                    continue;
                }
                let bar_height = ((count + 1) as f64).log10() / log_most * (PANEL_HEIGHT - 4.0);
                let fill = if index as u64 == BINS {
                    "#d08000"
                } else {
                    "#3465a4"
                };
                let _ = writeln!(
                    svg,
                    r#"<rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="{fill}"><title>{count}</title></rect>"#,
                    x + index as f64 * bar_width,
                    y + PANEL_HEIGHT - bar_height,
                    bar_width.max(1.0) - 0.3,
                    bar_height
                );
            }
            let request_x =
                x + PANEL_WIDTH * (BINS as f64 / SPAN_PERIODS as f64) / (BINS + 1) as f64;
            let _ = writeln!(
                svg,
                r##"<line x1="{request_x:.2}" y1="{y:.1}" x2="{request_x:.2}" y2="{:.1}" stroke="#c00" stroke-dasharray="3,2"/>"##,
                y + PANEL_HEIGHT
            );
            let _ = writeln!(
                svg,
                r##"<text x="{:.1}" y="{:.1}" fill="#333" font-size="10">n={} p50 {} p99 {} max {}</text>"##,
                x + 2.0,
                y + PANEL_HEIGHT + 12.0,
                row.count,
                millis_label(row.p50_ns),
                millis_label(row.p99_ns),
                millis_label(row.max_ns)
            );
        }
    }
    let axis_y = TOP + keys.len() as f64 * (PANEL_HEIGHT + GAP) + 8.0;
    for (column, _) in classes.iter().enumerate() {
        let x = LABEL_WIDTH + column as f64 * (PANEL_WIDTH + GAP);
        for tick in 0..=SPAN_PERIODS {
            let tick_x = x + PANEL_WIDTH * (tick * BINS / SPAN_PERIODS) as f64 / (BINS + 1) as f64;
            let label = if tick == SPAN_PERIODS {
                format!("{tick}×+")
            } else {
                format!("{tick}×")
            };
            let _ = writeln!(
                svg,
                r##"<text x="{tick_x:.1}" y="{axis_y:.1}" text-anchor="middle" fill="#444">{label}</text>"##
            );
        }
    }
    svg.push_str("</svg>\n");
    Ok(svg)
}

/// The change experiment: per setting, the measuring thread's wake-up latency (p50, p99) and how
/// much longer than requested its sleeps ran (p50), on one linear µs axis.
pub fn change_experiment(experiment: &ChangeExperiment) -> String {
    let series: [(&str, &str); 4] = [
        ("wake-up latency p50", "#3465a4"),
        ("wake-up latency p99", "#729fcf"),
        ("sleep longer than asked, p50", "#d08000"),
        ("SCHED_FIFO wake-up p50", "#4e9a06"),
    ];
    let values = |step: &rtlab_core::timer_study::ChangeStep| -> [f64; 4] {
        [
            step.wakeup.p50_ns as f64,
            step.wakeup.p99_ns as f64,
            (step.sleep.p50_ns as f64 - experiment.sleep_ns as f64).max(0.0),
            step.rt_wakeup.as_ref().map_or(0.0, |rt| rt.p50_ns as f64),
        ]
    };
    let most = experiment
        .steps
        .iter()
        .flat_map(&values)
        .fold(1.0f64, f64::max);
    let label_width = 220.0;
    let plot_width = 520.0;
    let group_height = 4.0 * 14.0 + 16.0;
    let top = 80.0;
    let width = label_width + plot_width + 120.0;
    let height = top + experiment.steps.len() as f64 * group_height + 40.0;
    let mut svg = start_svg(
        width,
        height,
        &format!(
            "Another process changes a setting; this one measures its {} sleeps ({})",
            millis_label(experiment.sleep_ns),
            experiment.policy
        ),
    );
    for (index, (name, color)) in series.iter().enumerate() {
        let x = 10.0 + index as f64 * 200.0;
        let _ = writeln!(
            svg,
            r#"<rect x="{x:.1}" y="34" width="12" height="10" fill="{color}"/><text x="{:.1}" y="43">{name}</text>"#,
            x + 16.0
        );
    }
    for (line, step) in experiment.steps.iter().enumerate() {
        let y = top + line as f64 * group_height;
        let _ = writeln!(
            svg,
            r#"<text x="10" y="{:.1}">{}</text>"#,
            y + 24.0,
            escape_markup(&step.setting)
        );
        for (index, value) in values(step).iter().enumerate() {
            let bar_y = y + index as f64 * 14.0;
            let bar_width = value / most * plot_width;
            let _ = writeln!(
                svg,
                r##"<rect x="{label_width:.1}" y="{bar_y:.1}" width="{bar_width:.2}" height="12" fill="{}"/><text x="{:.1}" y="{:.1}" fill="#333">{:.1} µs</text>"##,
                series[index].1,
                label_width + bar_width + 4.0,
                bar_y + 10.0,
                value / 1e3
            );
        }
    }
    let axis_y = top + experiment.steps.len() as f64 * group_height + 10.0;
    for tick in 0..=4 {
        let x = label_width + plot_width * tick as f64 / 4.0;
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{axis_y:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#444">{:.0} µs</text>"##,
            top - 6.0,
            axis_y + 14.0,
            most * tick as f64 / 4.0 / 1e3
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A measured cell of `api` in `mode` asking for 1 ms, as a SCHED_OTHER thread with the
    /// default 50 µs timer slack would measure it: the row the renderers' tests draw.
    pub(crate) fn sched_other_row(
        api: &str,
        mode: &str,
        class: &str,
        intervals: &[u64],
    ) -> rtlab_core::timer_study::TimerRow {
        rtlab_analysis::timers::timer_row(&rtlab_analysis::timers::CellInput {
            api,
            mode,
            class,
            policy: "SCHED_OTHER",
            priority: 0,
            timer_slack_ns: 50_000,
            requested_ns: 1_000_000,
            asked_ns: 1_000_000,
            intervals,
            reported_overruns: None,
        })
    }

    fn row(class: &str, intervals: &[u64]) -> TimerRow {
        sched_other_row("epoll_wait", "relative", class, intervals)
    }

    #[test]
    fn the_distribution_picture_is_deterministic_and_logs_counts() {
        let rows = vec![
            row("normal", &[1_050_000; 999]),
            row("rt-high", &[1_000_000, 1_000_000, 9_000_000]),
        ];
        let first = interval_distributions(&rows, 1_000_000).unwrap();
        assert_eq!(first, interval_distributions(&rows, 1_000_000).unwrap());
        assert!(first.starts_with("<svg") && first.ends_with("</svg>\n"));
        assert!(first.contains("<title>999</title>"));
        // The 9 ms interval lands in the overflow bin (drawn in its own colour).
        assert!(first.contains("#d08000\"><title>1</title>"));
        // Class normal-slack1ns was not measured at all: no column for it.
        assert!(!first.contains(">normal-slack1ns<"));
        // Log scale: one sample's bar is log10(2)/log10(1000) of the tallest.
        assert!(
            first.contains("height=\"52.00\""),
            "the tallest bar is the panel's height"
        );
    }

    #[test]
    fn the_change_experiment_picture_matches_its_snapshot() {
        use rtlab_core::timer_study::{ChangeStep, DelayStats};
        let stats = |p50, p99| DelayStats {
            count: 100,
            p50_ns: p50,
            p99_ns: p99,
            ..DelayStats::default()
        };
        let experiment = ChangeExperiment {
            sleep_ns: 1_000_000,
            policy: "SCHED_OTHER".into(),
            steps: vec![
                ChangeStep {
                    setting: "nothing changed".into(),
                    wakeup: stats(60_000, 90_000),
                    sleep: stats(1_060_000, 1_090_000),
                    ..ChangeStep::default()
                },
                ChangeStep {
                    setting: "timer slack 1ms".into(),
                    wakeup: stats(1_010_000, 1_050_000),
                    sleep: stats(2_010_000, 2_050_000),
                    ..ChangeStep::default()
                },
            ],
            ..ChangeExperiment::default()
        };
        insta::assert_snapshot!(change_experiment(&experiment));
    }

    #[test]
    fn the_distribution_picture_matches_its_snapshot() {
        let rows = vec![row(
            "rt-high",
            &[1_000_000, 1_020_000, 990_000, 100_000, 3_500_000],
        )];
        insta::assert_snapshot!(interval_distributions(&rows, 1_000_000).unwrap());
    }

    #[test]
    fn a_broken_histogram_names_its_row() {
        let mut broken = row("normal", &[1_000_000]);
        broken.hdr = "not base64".into();
        let error = interval_distributions(&[broken], 1_000_000).unwrap_err();
        assert!(
            error.to_string().contains("epoll_wait/relative normal"),
            "{error}"
        );
    }
}
