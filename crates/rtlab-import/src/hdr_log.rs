//! HdrHistogram interval logs, as written by `HistogramLogWriter` (Java, C, Rust, Go, Python).
//!
//! `#[StartTime: …]`/`#[BaseTime: …]` comments, an optional `"StartTimestamp","Interval_Length",
//! "Interval_Max","Interval_Compressed_Histogram"` legend, then one interval per line:
//! `[Tag=NAME,]start,length,max,BASE64` where BASE64 is a V2 compressed histogram. All intervals
//! of one tag are summed into one series (class = the tag, or `hdr`). A log does not say what unit
//! its values are in, so the caller must.

use crate::{line_error, shorten, Format, ImportError, Imported, ImportedSeries, ValueUnit};
use rtlab_core::{HistogramError, LatencyHistogram};

pub(crate) fn parse(text: &str, unit: Option<ValueUnit>) -> Result<Imported, ImportError> {
    let unit = unit.ok_or_else(|| ImportError::NoUnit {
        line: None,
        message: "an HdrHistogram log does not say its unit: give its value unit (ns, us or ms)"
            .to_owned(),
    })?;
    let scale = unit.nanos_per_unit();
    let mut series: Vec<ImportedSeries> = Vec::new();
    for (line_number, line) in crate::numbered_lines(text) {
        if line.starts_with('#') || line.starts_with("\"StartTimestamp\"") {
            continue;
        }
        let (tag, rest) = match line.strip_prefix("Tag=") {
            Some(tagged) => {
                let (tag, rest) = tagged.split_once(',').ok_or_else(|| {
                    line_error(line_number, "a tag without the interval after it")
                })?;
                (tag.to_owned(), rest)
            }
            None => ("hdr".to_owned(), line),
        };
        let fields: Vec<&str> = rest.split(',').collect();
        if fields.len() != 4 {
            return Err(line_error(
                line_number,
                format!(
                    "'{}' is not an interval (start,length,max,histogram)",
                    shorten(line)
                ),
            ));
        }
        for (field, name) in fields[..3].iter().zip(["start", "length", "max"]) {
            field.trim().parse::<f64>().map_err(|_| {
                line_error(
                    line_number,
                    format!("interval {name} '{field}' is not a number"),
                )
            })?;
        }
        // rtlab-core's decoder checks the payload's declared sizes before allocating.
        let decoded =
            LatencyHistogram::from_base64(fields[3].trim()).map_err(|error| match error {
                HistogramError::Base64(error) => {
                    line_error(line_number, format!("histogram is not base64: {error}"))
                }
                other => line_error(
                    line_number,
                    format!("not an HdrHistogram V2 histogram: {other}"),
                ),
            })?;
        let position = match series.iter().position(|item| item.class == tag) {
            Some(position) => position,
            None => {
                series.push(ImportedSeries {
                    class: tag.clone(),
                    cpu: series.len() as u32,
                    histogram: LatencyHistogram::new(),
                });
                series.len() - 1
            }
        };
        let histogram = &mut series[position].histogram;
        for (value, count) in decoded.buckets() {
            histogram.record_n((value as f64 * scale).round() as u64, count);
        }
    }
    if series.is_empty() {
        return Err(ImportError::File(
            "no intervals in the HdrHistogram log".to_owned(),
        ));
    }
    Ok(Imported {
        format: Format::HdrLog,
        series,
        warnings: vec![
            "HdrHistogram values are bucket edges (3 significant digits in most logs)".to_owned(),
        ],
    })
}
