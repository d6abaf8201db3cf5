//! One-column CSV: one latency per line, optionally under a header naming the unit
//! (`latency_us`, `wakeup_ns`, `latency (ms)`, or just `us`). Without a unit in the header the
//! caller must give one; a bare number is never guessed at.

use crate::{line_error, shorten, Format, ImportError, Imported, ImportedSeries, ValueUnit};
use rtlab_core::LatencyHistogram;

pub(crate) fn parse_number(line: &str) -> Option<f64> {
    let value: f64 = line.trim().trim_end_matches(',').trim().parse().ok()?;
    value.is_finite().then_some(value)
}

/// The unit a header names, if any.
fn unit_of_header(header: &str) -> Option<ValueUnit> {
    let lowered = header.trim().trim_matches('"').to_lowercase();
    let stripped = lowered.trim_end_matches(')').trim_end_matches(']');
    for (suffix, unit) in [
        ("ns", ValueUnit::Nanoseconds),
        ("us", ValueUnit::Microseconds),
        ("µs", ValueUnit::Microseconds),
        ("ms", ValueUnit::Milliseconds),
    ] {
        if let Some(before) = stripped.strip_suffix(suffix) {
            if before.is_empty() || before.ends_with(['_', '(', '[', ' ', '-']) {
                return Some(unit);
            }
        }
    }
    None
}

pub(crate) fn parse(text: &str, unit: Option<ValueUnit>) -> Result<Imported, ImportError> {
    let mut histogram = LatencyHistogram::new();
    let mut header_unit: Option<ValueUnit> = None;
    let mut seen_data = false;
    let mut scale: Option<f64> = None;
    for (line_number, line) in crate::numbered_lines(text) {
        if line.starts_with('#') {
            continue;
        }
        if line.trim_end_matches(',').contains(',') {
            return Err(line_error(
                line_number,
                format!("'{}' has more than one column", shorten(line)),
            ));
        }
        let Some(value) = parse_number(line) else {
            if seen_data || header_unit.is_some() {
                return Err(line_error(
                    line_number,
                    format!("'{}' is not a latency", shorten(line)),
                ));
            }
            header_unit = Some(unit_of_header(line).or(unit).ok_or_else(|| {
                ImportError::NoUnit {
                    line: Some(line_number),
                    message: format!(
                        "header '{}' does not name a unit (use e.g. latency_us) and no value unit was given",
                        shorten(line)
                    ),
                }
            })?);
            continue;
        };
        let factor = match scale {
            Some(factor) => factor,
            None => {
                let chosen = header_unit.or(unit).ok_or_else(|| {
                    ImportError::NoUnit {
                        line: Some(line_number),
                        message: "the CSV has no header naming its unit: add one (latency_us) or give the value unit".to_owned(),
                    }
                })?;
                scale = Some(chosen.nanos_per_unit());
                chosen.nanos_per_unit()
            }
        };
        if value < 0.0 {
            return Err(line_error(
                line_number,
                format!("latency {value} is negative"),
            ));
        }
        histogram.record((value * factor).round() as u64);
        seen_data = true;
    }
    Ok(Imported {
        format: Format::Csv,
        series: vec![ImportedSeries {
            class: "csv".to_owned(),
            cpu: 0,
            histogram,
        }],
        warnings: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_name_units() {
        assert_eq!(unit_of_header("latency_us"), Some(ValueUnit::Microseconds));
        assert_eq!(unit_of_header("wakeup (ns)"), Some(ValueUnit::Nanoseconds));
        assert_eq!(unit_of_header("ms"), Some(ValueUnit::Milliseconds));
        assert_eq!(
            unit_of_header("\"Latency [us]\""),
            Some(ValueUnit::Microseconds)
        );
        assert_eq!(unit_of_header("latency"), None);
        assert_eq!(unit_of_header("items"), None);
    }
}
