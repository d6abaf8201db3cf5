//! `rtla timerlat hist` output.
//!
//! A header `Index IRQ-000 Thr-000 [Usr-000] IRQ-001 …`, one row per bucket (the bucket's value in
//! the time unit the `# Time unit is …` comment names; µs unless `-n`), then `over:`, `count:`,
//! `min:`, `avg:` and `max:` rows. IRQ, thread and user-thread latencies become the series
//! `timerlat-irq`, `timerlat-thread` and `timerlat-user`, one per CPU. Newer rtla versions append
//! an `ALL:` block summarising all CPUs; it repeats what the columns hold and is skipped.

use crate::{line_error, shorten, Format, ImportError, Imported, ImportedSeries};
use rtlab_core::LatencyHistogram;

pub(crate) fn is_header(line: &str) -> bool {
    let mut fields = line.split_whitespace();
    fields.next() == Some("Index")
        && fields
            .next()
            .is_some_and(|field| column_of(field).is_some())
}

/// `IRQ-003` → ("timerlat-irq", 3).
fn column_of(field: &str) -> Option<(&'static str, u32)> {
    let (kind, cpu) = field.split_once('-')?;
    let class = match kind {
        "IRQ" => "timerlat-irq",
        "Thr" => "timerlat-thread",
        "Usr" => "timerlat-user",
        _ => return None,
    };
    Some((class, cpu.parse().ok()?))
}

/// Counts of one row; rtla prints `-` for the min/avg/max of an empty column (read as 0).
fn counts(line_number: usize, fields: &[&str], columns: usize) -> Result<Vec<u64>, ImportError> {
    if fields.len() != columns {
        return Err(line_error(
            line_number,
            format!("{} values for {columns} columns", fields.len()),
        ));
    }
    fields
        .iter()
        .map(|field| {
            if *field == "-" {
                return Ok(0);
            }
            field
                .parse::<u64>()
                .map_err(|_| line_error(line_number, format!("'{field}' is not a count")))
        })
        .collect()
}

pub(crate) fn parse(text: &str) -> Result<Imported, ImportError> {
    let mut nanos_per_unit = 1_000u64;
    let mut columns: Vec<(&'static str, u32)> = Vec::new();
    let mut histograms: Vec<LatencyHistogram> = Vec::new();
    let mut over: Option<Vec<u64>> = None;
    let mut count: Option<(usize, Vec<u64>)> = None;
    let mut max: Option<Vec<u64>> = None;
    for (line_number, line) in crate::numbered_lines(text) {
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim();
            if let Some(unit) = comment.strip_prefix("Time unit is ") {
                nanos_per_unit = if unit.starts_with("nanoseconds") {
                    1
                } else if unit.starts_with("microseconds") {
                    1_000
                } else {
                    return Err(line_error(
                        line_number,
                        format!("unknown time unit '{unit}'"),
                    ));
                };
            }
            continue;
        }
        // rtla prints its command line after a prompt in documentation copies; skip it.
        if line.contains("timerlat hist") && columns.is_empty() {
            continue;
        }
        if line.starts_with("ALL:") {
            break;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields[0] == "Index" {
            if !columns.is_empty() {
                return Err(line_error(line_number, "a second header line"));
            }
            for field in &fields[1..] {
                let column = column_of(field).ok_or_else(|| {
                    line_error(
                        line_number,
                        format!("unknown column '{field}' (expected IRQ-N, Thr-N or Usr-N)"),
                    )
                })?;
                columns.push(column);
            }
            histograms = columns.iter().map(|_| LatencyHistogram::new()).collect();
            continue;
        }
        if columns.is_empty() {
            return Err(line_error(
                line_number,
                format!("'{}' before the 'Index IRQ-000 …' header", shorten(line)),
            ));
        }
        match fields[0] {
            "over:" => over = Some(counts(line_number, &fields[1..], columns.len())?),
            "count:" => {
                count = Some((
                    line_number,
                    counts(line_number, &fields[1..], columns.len())?,
                ))
            }
            "max:" => max = Some(counts(line_number, &fields[1..], columns.len())?),
            "min:" | "avg:" => {
                // min/avg may be '-' for an empty column; not needed: the rows hold them.
            }
            value => {
                let bucket: u64 = value.parse().map_err(|_| {
                    line_error(
                        line_number,
                        format!("'{}' is not a histogram row", shorten(line)),
                    )
                })?;
                let row = counts(line_number, &fields[1..], columns.len())?;
                for (histogram, samples) in histograms.iter_mut().zip(row) {
                    histogram.record_n(bucket * nanos_per_unit, samples);
                }
            }
        }
    }
    if columns.is_empty() {
        return Err(ImportError::File(
            "no 'Index IRQ-000 …' header line".to_owned(),
        ));
    }
    let mut warnings = Vec::new();
    if let Some(over) = over {
        for (column, overflowing) in over.iter().enumerate() {
            if *overflowing == 0 {
                continue;
            }
            let (class, cpu) = columns[column];
            let Some(max) = &max else {
                return Err(ImportError::File(format!(
                    "{class} CPU {cpu}: {overflowing} samples over the histogram but no 'max:' row"
                )));
            };
            histograms[column].record_n(max[column] * nanos_per_unit, *overflowing);
            warnings.push(format!(
                "{class} CPU {cpu}: {overflowing} samples over the histogram were recorded at the maximum {} µs (an upper bound)",
                max[column] * nanos_per_unit / 1_000
            ));
        }
    }
    if let Some((line_number, count)) = count {
        for (column, expected) in count.iter().enumerate() {
            if histograms[column].count() != *expected {
                let (class, cpu) = columns[column];
                return Err(line_error(
                    line_number,
                    format!(
                        "{class} CPU {cpu}: count says {expected} samples but the rows and 'over:' hold {}",
                        histograms[column].count()
                    ),
                ));
            }
        }
    }
    let series = columns
        .into_iter()
        .zip(histograms)
        .map(|((class, cpu), histogram)| ImportedSeries {
            class: class.to_owned(),
            cpu,
            histogram,
        })
        .collect();
    Ok(Imported {
        format: Format::RtlaTimerlat,
        series,
        warnings,
    })
}
