//! Hand-built SVG line plots for the HTML report: log or linear axes with labelled ticks, one
//! coloured line per series and a legend. Hand-built rather than plotters because the report must
//! be byte-for-byte deterministic (snapshots, diffs of reports) and need no fonts at build time;
//! the output is plain SVG 1.1 that any browser renders without JavaScript.

use rtlab_core::text::escape_markup;
use std::fmt::Write as _;

/// One axis: range, scale and label.
#[derive(Clone, Debug)]
pub struct Axis {
    pub label: String,
    pub min: f64,
    pub max: f64,
    pub log: bool,
}

/// One line of a plot.
#[derive(Clone, Debug)]
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Draw as steps (histograms) rather than straight segments.
    pub steps: bool,
}

/// Colours of successive lines: colour-blind-safe (Okabe–Ito), the last a grey for "other".
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#999999",
];

const WIDTH: f64 = 420.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 58.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 26.0;
const BOTTOM: f64 = 44.0;

/// The x axis's ticks: at each, a grid line from the plot's top down to `bottom` (the axis
/// spanning `plot_width` from `left`) and the tick's number below it.
fn write_x_ticks(svg: &mut String, axis: &Axis, left: f64, plot_width: f64, bottom: f64) {
    for tick in axis.ticks() {
        let px = left + axis.position(tick, plot_width);
        let _ = write!(
            svg,
            r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{bottom:.1}" stroke="#e4e4e4"/><text x="{px:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"##,
            bottom + 14.0,
            tick_text(tick)
        );
    }
}

/// A line across the plot (spanning `plot_width` from `left`) at `y` in `stroke`, and `label`
/// right-aligned `gap` left of the plot: the y axis's ticks and the lanes' names.
fn write_row_line(
    svg: &mut String,
    left: f64,
    plot_width: f64,
    y: f64,
    stroke: &str,
    gap: f64,
    label: &str,
) {
    let _ = write!(
        svg,
        r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{stroke}"/><text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">{}</text>"##,
        left + plot_width,
        left - gap,
        y + 4.0,
        escape_markup(label)
    );
}

/// The x axis's name, centred at `centre_x` on the baseline `y`.
fn write_x_axis_label(svg: &mut String, centre_x: f64, y: f64, label: &str) {
    let _ = write!(
        svg,
        r#"<text x="{centre_x:.1}" y="{y:.1}" class="axis" text-anchor="middle">{}</text>"#,
        escape_markup(label)
    );
}

/// A number for an axis tick: `0.01`, `5`, `200`, `10k`, `1M`.
fn tick_text(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1e6 {
        format!("{}M", trim(value / 1e6))
    } else if magnitude >= 1e4 {
        format!("{}k", trim(value / 1e3))
    } else {
        trim(value)
    }
}

fn trim(value: f64) -> String {
    let text = format!("{value:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_owned()
    } else {
        text.to_owned()
    }
}

impl Axis {
    fn position(&self, value: f64, length: f64) -> f64 {
        let (min, max, value) = if self.log {
            (
                self.min.log10(),
                self.max.log10(),
                value.max(self.min).log10(),
            )
        } else {
            (self.min, self.max, value)
        };
        if max <= min {
            return 0.0;
        }
        ((value - min) / (max - min)).clamp(0.0, 1.0) * length
    }

    /// Tick values: 1-2-5 per decade on a log axis (only decades when the range is wide), about
    /// six round numbers on a linear one.
    fn ticks(&self) -> Vec<f64> {
        let mut ticks = Vec::new();
        if self.log {
            let low = self.min.log10().floor() as i32;
            let high = self.max.log10().ceil() as i32;
            let steps: &[f64] = if high - low > 4 {
                &[1.0]
            } else {
                &[1.0, 2.0, 5.0]
            };
            for exponent in low..=high {
                for step in steps {
                    let value = step * 10f64.powi(exponent);
                    if value >= self.min * 0.999 && value <= self.max * 1.001 {
                        ticks.push(value);
                    }
                }
            }
        } else {
            let span = (self.max - self.min).max(1e-12);
            let raw = span / 6.0;
            let power = 10f64.powf(raw.log10().floor());
            let step = [1.0, 2.0, 5.0, 10.0]
                .iter()
                .map(|factor| factor * power)
                .find(|step| *step >= raw)
                .unwrap_or(power * 10.0);
            let mut value = (self.min / step).ceil() * step;
            while value <= self.max + step * 1e-9 {
                ticks.push(value);
                value += step;
            }
        }
        ticks
    }
}

/// An SVG plot of `lines` with a title; `None` lines or points outside the axes are clipped.
pub fn line_plot(title: &str, x: &Axis, y: &Axis, lines: &[Line]) -> String {
    let plot_width = WIDTH - LEFT - RIGHT;
    let plot_height = HEIGHT - TOP - BOTTOM;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{}">"#,
        escape_markup(title)
    );
    let _ = write!(
        svg,
        r#"<text x="{}" y="16" class="title">{}</text>"#,
        LEFT,
        escape_markup(title)
    );
    let _ = write!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_width}" height="{plot_height}" fill="#fff" stroke="#888"/>"##
    );
    write_x_ticks(&mut svg, x, LEFT, plot_width, TOP + plot_height);
    for tick in y.ticks() {
        let py = TOP + plot_height - y.position(tick, plot_height);
        write_row_line(
            &mut svg,
            LEFT,
            plot_width,
            py,
            "#e4e4e4",
            4.0,
            &tick_text(tick),
        );
    }
    write_x_axis_label(&mut svg, LEFT + plot_width / 2.0, HEIGHT - 8.0, &x.label);
    let _ = write!(
        svg,
        r#"<text transform="translate(14 {:.1}) rotate(-90)" class="axis" text-anchor="middle">{}</text>"#,
        TOP + plot_height / 2.0,
        escape_markup(&y.label)
    );
    for (index, line) in lines.iter().enumerate() {
        let colour = PALETTE[index % PALETTE.len()];
        let mut path = String::new();
        let mut previous_y: Option<f64> = None;
        for &(value_x, value_y) in &line.points {
            if (x.log && value_x <= 0.0) || (y.log && value_y <= 0.0) {
                continue;
            }
            let px = LEFT + x.position(value_x, plot_width);
            let py = TOP + plot_height - y.position(value_y, plot_height);
            match previous_y {
                None => {
                    let _ = write!(path, "M{px:.1},{py:.1}");
                }
                Some(last_y) if line.steps => {
                    let _ = write!(path, "H{px:.1}V{py:.1}");
                    let _ = last_y;
                }
                Some(_) => {
                    let _ = write!(path, "L{px:.1},{py:.1}");
                }
            }
            previous_y = Some(py);
        }
        if !path.is_empty() {
            let _ = write!(
                svg,
                r#"<path d="{path}" fill="none" stroke="{colour}" stroke-width="1.6"/>"#
            );
        }
        let legend_y = TOP + 12.0 + 13.0 * index as f64;
        let legend_x = LEFT + plot_width - 8.0;
        let _ = write!(
            svg,
            r#"<text x="{legend_x:.1}" y="{legend_y:.1}" class="legend" text-anchor="end" fill="{colour}">{}</text>"#,
            escape_markup(&line.label)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// One mark on a timeline: a time, a lane, a size and a category.
#[derive(Clone, Debug)]
pub struct Mark {
    pub at_s: f64,
    pub lane: usize,
    pub value: f64,
    /// Index into the categories (colour and legend).
    pub category: usize,
    pub tooltip: String,
}

/// A timeline: one lane per CPU, one circle per episode sized by its latency (log), coloured by
/// its dominant cause.
pub fn timeline(
    title: &str,
    duration_s: f64,
    lanes: &[String],
    categories: &[String],
    marks: &[Mark],
) -> String {
    let lane_height = 34.0;
    let legend_height = 15.0 * categories.len() as f64 + 10.0;
    let height = TOP + BOTTOM + (lane_height * lanes.len().max(1) as f64).max(legend_height);
    let width = 860.0;
    let left = 70.0;
    let plot_width = width - left - 270.0;
    let axis = Axis {
        label: "time since the start of measurement, s".to_owned(),
        min: 0.0,
        max: duration_s.max(1.0),
        log: false,
    };
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 {width} {height:.0}" width="{width}" height="{height:.0}" role="img" aria-label="{}">"#,
        escape_markup(title)
    );
    let _ = write!(
        svg,
        r#"<text x="{left}" y="16" class="title">{}</text>"#,
        escape_markup(title)
    );
    let bottom = height - BOTTOM;
    write_x_ticks(&mut svg, &axis, left, plot_width, bottom);
    write_x_axis_label(&mut svg, left + plot_width / 2.0, height - 8.0, &axis.label);
    for (index, lane) in lanes.iter().enumerate() {
        let centre = TOP + lane_height * (index as f64 + 0.5);
        write_row_line(&mut svg, left, plot_width, centre, "#bbb", 6.0, lane);
    }
    let largest = marks.iter().map(|mark| mark.value).fold(1.0f64, f64::max);
    for mark in marks {
        let px = left + axis.position(mark.at_s, plot_width);
        let centre = TOP + lane_height * (mark.lane as f64 + 0.5);
        let radius =
            2.5 + 10.0 * (mark.value.max(1.0).ln() / largest.ln().max(1.0)).clamp(0.0, 1.0);
        let colour = PALETTE[mark.category % PALETTE.len()];
        let _ = write!(
            svg,
            r#"<circle cx="{px:.1}" cy="{centre:.1}" r="{radius:.1}" fill="{colour}" fill-opacity="0.6" stroke="{colour}"><title>{}</title></circle>"#,
            escape_markup(&mark.tooltip)
        );
    }
    for (index, category) in categories.iter().enumerate() {
        let colour = PALETTE[index % PALETTE.len()];
        let y = TOP + 10.0 + 15.0 * index as f64;
        let x = left + plot_width + 16.0;
        let _ = write!(
            svg,
            r#"<circle cx="{x:.1}" cy="{:.1}" r="5" fill="{colour}"/><text x="{:.1}" y="{y:.1}" class="legend">{}</text>"#,
            y - 4.0,
            x + 10.0,
            escape_markup(category)
        );
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_follow_1_2_5_and_positions_are_monotonic() {
        let axis = Axis {
            label: "µs".to_owned(),
            min: 10.0,
            max: 1_000.0,
            log: true,
        };
        assert_eq!(
            axis.ticks(),
            [10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1_000.0]
        );
        assert!(axis.position(20.0, 100.0) < axis.position(50.0, 100.0));
        assert_eq!(axis.position(10.0, 100.0), 0.0);
        assert_eq!(axis.position(1_000.0, 100.0), 100.0);
        let linear = Axis {
            label: "s".to_owned(),
            min: 0.0,
            max: 20.0,
            log: false,
        };
        assert_eq!(linear.ticks(), [0.0, 5.0, 10.0, 15.0, 20.0]);
        assert_eq!(tick_text(20_000.0), "20k");
        assert_eq!(tick_text(0.5), "0.5");
    }

    #[test]
    fn plots_are_deterministic_and_escape_text() {
        let axis = Axis {
            label: "a<b".to_owned(),
            min: 1.0,
            max: 100.0,
            log: true,
        };
        let lines = [Line {
            label: "cpu 0 & 1".to_owned(),
            points: vec![(1.0, 1.0), (10.0, 50.0), (0.0, 3.0)],
            steps: false,
        }];
        let first = line_plot("t", &axis, &axis, &lines);
        assert_eq!(first, line_plot("t", &axis, &axis, &lines));
        assert!(first.contains("a&lt;b") && first.contains("cpu 0 &amp; 1"));
        assert!(first.starts_with("<svg") && first.ends_with("</svg>"));
    }
}
