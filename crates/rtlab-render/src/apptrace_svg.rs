//! The `--svg` timeline: one row per thread (running, runnable, blocked on a futex, in I/O,
//! sleeping), with priority inversions and hangs marked and a time axis in ms or s.
//!
//! Spans are binned into pixel columns first (each column takes the state that held it longest,
//! running winning over waiting when it took a tenth of the column), so a long trace draws at
//! most one rectangle per column and row however many events it has. Hand-built and
//! deterministic (same input, same bytes).

use rtlab_core::apptrace_report::TraceReport;
use rtlab_core::apptrace_timeline::{Span, SpanState};
use rtlab_core::text::escape_markup;
use std::collections::HashMap;
use std::fmt::Write as _;

const WIDTH: f64 = 1600.0;
const LABEL_WIDTH: f64 = 230.0;
const PLOT_WIDTH: f64 = WIDTH - LABEL_WIDTH - 20.0;
const ROW_HEIGHT: f64 = 18.0;
const ROW_GAP: f64 = 6.0;
const TOP: f64 = 78.0;
/// Most rows drawn.
pub const MAX_ROWS: usize = 32;

const STATES: [(SpanState, &str); 5] = [
    (SpanState::Running, "#2e7d32"),
    (SpanState::Runnable, "#f57c00"),
    (SpanState::BlockedFutex, "#e57373"),
    (SpanState::BlockedIo, "#64b5f6"),
    (SpanState::BlockedSleep, "#e0e0e0"),
];

fn color(state: SpanState) -> &'static str {
    STATES
        .iter()
        .find(|(known, _)| *known == state)
        .map(|(_, color)| *color)
        .unwrap_or("#000")
}

/// A tick step of 1, 2 or 5 × 10^k ns giving about 10 ticks.
fn tick_step(duration: u64) -> u64 {
    let raw = (duration / 10).max(1);
    let mut step = 1u64;
    while step * 10 <= raw {
        step *= 10;
    }
    for factor in [1, 2, 5, 10] {
        if step * factor >= raw {
            return step * factor;
        }
    }
    step * 10
}

fn time_label(ns: u64, step: u64) -> String {
    if step >= 1_000_000_000 {
        format!("{} s", ns / 1_000_000_000)
    } else if step >= 100_000_000 {
        format!("{:.1} s", ns as f64 / 1e9)
    } else if step >= 1_000_000 {
        format!("{} ms", ns / 1_000_000)
    } else {
        format!("{:.1} ms", ns as f64 / 1e6)
    }
}

/// One thread's row: its tid and its label (`name tid · policy priority period`).
struct Row {
    tid: i32,
    label: String,
}

/// The threads to draw: the recorded application's (or those in findings and the busiest).
fn rows(report: &TraceReport) -> Vec<Row> {
    let any_target = report.threads.iter().any(|row| row.target);
    let mut chosen: Vec<&rtlab_core::apptrace_report::ThreadRow> = if any_target {
        report.threads.iter().filter(|row| row.target).collect()
    } else {
        let mut named: Vec<i32> = Vec::new();
        for inversion in &report.inversions {
            named.push(inversion.high.tid);
            named.push(inversion.low.tid);
            named.extend(inversion.middle.iter().map(|middle| middle.tid));
        }
        for hang in &report.hangs {
            named.extend(hang.threads.iter().map(|thread| thread.tid));
        }
        let mut chosen: Vec<_> = report
            .threads
            .iter()
            .filter(|row| named.contains(&row.tid))
            .collect();
        let mut busiest: Vec<_> = report.threads.iter().collect();
        busiest.sort_by(|a, b| b.cpu_ns.cmp(&a.cpu_ns).then(a.tid.cmp(&b.tid)));
        for row in busiest {
            if chosen.len() >= MAX_ROWS {
                break;
            }
            if !chosen.iter().any(|known| known.tid == row.tid) {
                chosen.push(row);
            }
        }
        chosen
    };
    chosen.sort_by(|a, b| a.kernel_prio.cmp(&b.kernel_prio).then(a.tid.cmp(&b.tid)));
    chosen.truncate(MAX_ROWS);
    chosen
        .into_iter()
        .map(|row| {
            let policy = row.policy.replace("SCHED_", "");
            let policy = policy.split('|').next().unwrap_or("").to_owned();
            let period = row
                .period_ns
                .map(|period| format!(" {:.1} ms", period as f64 / 1e6))
                .unwrap_or_default();
            Row {
                tid: row.tid,
                label: format!(
                    "{} {} · {} {}{}",
                    row.name, row.tid, policy, row.priority, period
                ),
            }
        })
        .collect()
}

/// The plot's geometry: the rows drawn, where each thread's row is, and the time scale.
struct Plot {
    rows: Vec<Row>,
    /// Row index by tid.
    index: HashMap<i32, usize>,
    first_ns: u64,
    duration_ns: u64,
    columns: usize,
    column_ns: f64,
}

impl Plot {
    fn new(report: &TraceReport) -> Plot {
        let rows = rows(report);
        let index = rows
            .iter()
            .enumerate()
            .map(|(position, row)| (row.tid, position))
            .collect();
        let duration_ns = report.duration_ns.max(1);
        let columns = PLOT_WIDTH as usize;
        Plot {
            rows,
            index,
            first_ns: report.first_ns,
            duration_ns,
            columns,
            column_ns: (duration_ns as f64 / columns as f64).max(1.0),
        }
    }

    fn x_of(&self, ns: u64) -> f64 {
        LABEL_WIDTH + ns.saturating_sub(self.first_ns) as f64 / self.duration_ns as f64 * PLOT_WIDTH
    }

    fn y_of(row: usize) -> f64 {
        TOP + row as f64 * (ROW_HEIGHT + ROW_GAP)
    }

    fn bottom(&self) -> f64 {
        TOP + self.rows.len() as f64 * (ROW_HEIGHT + ROW_GAP)
    }

    /// Per row and column, the time in each state (indexed as [`STATES`]).
    fn bins(&self, spans: &[Span]) -> Vec<[u64; 5]> {
        let (columns, column_ns) = (self.columns, self.column_ns);
        let mut bins = vec![[0u64; 5]; self.rows.len() * columns];
        for span in spans {
            let Some(&row) = self.index.get(&span.tid) else {
                continue;
            };
            let state = STATES
                .iter()
                .position(|(state, _)| *state == span.state)
                .unwrap_or(0);
            let start = span.start_ns.saturating_sub(self.first_ns) as f64;
            let end = span.end_ns.saturating_sub(self.first_ns) as f64;
            let mut column = (start / column_ns) as usize;
            while column < columns {
                let column_start = column as f64 * column_ns;
                let column_end = column_start + column_ns;
                if column_start >= end {
                    break;
                }
                let overlap = end.min(column_end) - start.max(column_start);
                if overlap > 0.0 {
                    bins[row * columns + column][state] += overlap as u64;
                }
                column += 1;
            }
        }
        bins
    }
}

/// A run of columns of one state, drawn as one rectangle.
#[derive(Clone, Copy)]
struct Bar {
    start_column: usize,
    /// Index into [`STATES`].
    state: usize,
}

/// Renders the timeline of `report` from its `spans`.
pub fn render(report: &TraceReport, spans: &[Span]) -> String {
    let plot = Plot::new(report);
    let bins = plot.bins(spans);
    let height = TOP + plot.rows.len() as f64 * (ROW_HEIGHT + ROW_GAP) + 44.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r##"<rect width="100%" height="100%" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="10" y="20" font-size="15" font-weight="bold">{} — {} threads, {:.3} s, {} inversions, {} hangs</text>"#,
        escape_markup(&report.source.path),
        plot.rows.len(),
        plot.duration_ns as f64 / 1e9,
        report.inversions.len(),
        report.hangs.len()
    );
    write_legend(&mut svg);
    write_axis(&mut svg, &plot);
    for (row, thread) in plot.rows.iter().enumerate() {
        write_row(&mut svg, &plot, row, &thread.label, &bins);
    }
    write_hangs(&mut svg, &plot, report);
    write_inversions(&mut svg, &plot, report);
    let _ = writeln!(svg, "</svg>");
    svg
}

/// The legend: each state's colour, then the inversion and hang marks.
fn write_legend(svg: &mut String) {
    let mut x = 10.0;
    for (state, fill) in STATES {
        let _ = writeln!(
            svg,
            r##"<rect x="{x}" y="32" width="14" height="12" fill="{fill}" stroke="#555" stroke-width="0.5"/><text x="{}" y="43">{}</text>"##,
            x + 18.0,
            crate::apptrace_words::span_state(state)
        );
        x += 30.0 + crate::apptrace_words::span_state(state).len() as f64 * 7.0;
    }
    let _ = writeln!(
        svg,
        r##"<rect x="{x}" y="32" width="14" height="12" fill="none" stroke="#b71c1c" stroke-width="2"/><text x="{}" y="43">priority inversion</text>"##,
        x + 18.0
    );
    x += 150.0;
    let _ = writeln!(
        svg,
        r##"<rect x="{x}" y="32" width="14" height="12" fill="#6a1b9a" fill-opacity="0.35"/><text x="{}" y="43">hang / deadlock</text>"##,
        x + 18.0
    );
}

/// The time axis with grid lines.
fn write_axis(svg: &mut String, plot: &Plot) {
    let plot_bottom = plot.bottom();
    let duration = plot.duration_ns;
    let step = tick_step(duration);
    let mut tick = 0u64;
    while tick <= duration {
        let x = LABEL_WIDTH + tick as f64 / duration as f64 * PLOT_WIDTH;
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{plot_bottom}" stroke="#cccccc" stroke-width="0.5"/>"##,
            TOP - 6.0
        );
        let _ = writeln!(
            svg,
            r##"<text x="{x:.1}" y="{}" text-anchor="middle" fill="#333">{}</text>"##,
            plot_bottom + 16.0,
            time_label(tick, step)
        );
        tick += step;
    }
    let _ = writeln!(
        svg,
        r##"<text x="{}" y="{}" text-anchor="middle" fill="#333">time since the first event</text>"##,
        LABEL_WIDTH + PLOT_WIDTH / 2.0,
        plot_bottom + 34.0
    );
}

/// One thread's row: its label, its background and a rectangle per run of columns in one state.
fn write_row(svg: &mut String, plot: &Plot, row: usize, label: &str, bins: &[[u64; 5]]) {
    let y = Plot::y_of(row);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
        LABEL_WIDTH - 8.0,
        y + ROW_HEIGHT - 4.0,
        escape_markup(label)
    );
    let _ = writeln!(
        svg,
        r##"<rect x="{LABEL_WIDTH}" y="{y:.1}" width="{PLOT_WIDTH}" height="{ROW_HEIGHT}" fill="#fafafa" stroke="#dddddd" stroke-width="0.5"/>"##
    );
    let flush = |svg: &mut String, run: Option<Bar>, end: usize| {
        if let Some(Bar {
            start_column: start,
            state,
        }) = run
        {
            let fill = color(STATES[state].0);
            let bar_height = if state == 0 {
                ROW_HEIGHT
            } else {
                ROW_HEIGHT * 0.6
            };
            let _ = writeln!(
                svg,
                r#"<rect x="{:.1}" y="{:.1}" width="{}" height="{bar_height:.1}" fill="{fill}"/>"#,
                LABEL_WIDTH + start as f64,
                y + (ROW_HEIGHT - bar_height) / 2.0,
                end - start
            );
        }
    };
    let columns = plot.columns;
    let mut run: Option<Bar> = None;
    for column in 0..columns {
        let state = column_state(bins[row * columns + column], plot.column_ns);
        match (run, state) {
            (Some(current), Some(state)) if current.state == state => {}
            _ => {
                flush(svg, run, column);
                run = state.map(|state| Bar {
                    start_column: column,
                    state,
                });
            }
        }
    }
    flush(svg, run, columns);
}

/// The state a column shows (an index into [`STATES`]), from the time it spent in each.
fn column_state(bin: [u64; 5], column_ns: f64) -> Option<usize> {
    let total: u64 = bin.iter().sum();
    // Short runs must stay visible: running wins when it took as long as waiting for a
    // CPU, and waiting wins over being blocked when it took a tenth of the column.
    if total == 0 {
        None
    } else if bin[0] > 0 && bin[0] >= bin[1] {
        Some(0)
    } else if bin[1] * 10 >= column_ns as u64 {
        Some(1)
    } else {
        (0..5).max_by_key(|state| (bin[*state], 5 - state))
    }
}

/// Hangs: a band over each hung thread's row from its start to its end (or the trace's end).
fn write_hangs(svg: &mut String, plot: &Plot, report: &TraceReport) {
    for hang in &report.hangs {
        let end = hang.ended_ns.unwrap_or(report.last_ns);
        for thread in &hang.threads {
            if let Some(&row) = plot.index.get(&thread.tid) {
                let x = plot.x_of(hang.since_ns.min(end));
                let _ = writeln!(
                    svg,
                    r##"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{ROW_HEIGHT}" fill="#6a1b9a" fill-opacity="0.35"><title>{}</title></rect>"##,
                    Plot::y_of(row),
                    (plot.x_of(end) - x).max(2.0),
                    if hang.cycle {
                        "deadlock (wait-for cycle)"
                    } else {
                        "hung on a futex"
                    }
                );
                let _ = writeln!(
                    svg,
                    r##"<text x="{:.1}" y="{:.1}" fill="#4a148c" font-weight="bold">{}</text>"##,
                    x + 4.0,
                    Plot::y_of(row) + ROW_HEIGHT - 4.0,
                    if hang.cycle { "DEADLOCK" } else { "HANG" }
                );
            }
        }
    }
}

/// Inversions: a red frame on the high thread's row while it was blocked, joined to the low one.
fn write_inversions(svg: &mut String, plot: &Plot, report: &TraceReport) {
    for inversion in &report.inversions {
        let x = plot.x_of(inversion.at_ns);
        let width = (plot.x_of(inversion.at_ns + inversion.duration_ns) - x).max(3.0);
        for (tid, dash) in [
            (inversion.high.tid, ""),
            (inversion.low.tid, r#" stroke-dasharray="3,2""#),
        ] {
            if let Some(&row) = plot.index.get(&tid) {
                let _ = writeln!(
                    svg,
                    r##"<rect x="{x:.1}" y="{:.1}" width="{width:.1}" height="{}" fill="none" stroke="#b71c1c" stroke-width="2"{dash}><title>priority inversion: {} blocked {:.1} ms behind {}</title></rect>"##,
                    Plot::y_of(row) - 1.0,
                    ROW_HEIGHT + 2.0,
                    escape_markup(&inversion.high.name),
                    inversion.duration_ns as f64 / 1e6,
                    escape_markup(&inversion.low.name)
                );
            }
        }
    }
}
