//! cyclictest histograms: the `-h N` / `-H N` stdout and the `--histfile` file (same layout).
//!
//! One row per µs bucket (`%06d` then one count per thread, tab-separated; `-H` adds a summary
//! column), then `# Total:`, `# Min Latencies:`, `# Avg Latencies:`, `# Max Latencies:` and
//! `# Histogram Overflows:` lines with one value per thread. Samples beyond the last bucket are
//! only counted: rtlab records them at the thread's maximum (an upper bound) and says so.

use crate::{line_error, shorten, Format, ImportError, Imported, ImportedSeries};
use rtlab_core::LatencyHistogram;

/// A bucket row: six or more digits, then counts.
pub(crate) fn is_data_row(line: &str) -> bool {
    let mut fields = line.split_whitespace();
    fields
        .next()
        .is_some_and(|first| first.len() >= 6 && first.bytes().all(|byte| byte.is_ascii_digit()))
        && fields.next().is_some()
}

fn numbers(line_number: usize, text: &str, what: &str) -> Result<Vec<u64>, ImportError> {
    text.split_whitespace()
        .map(|field| {
            field.parse::<u64>().map_err(|_| {
                line_error(line_number, format!("'{field}' in '{what}' is not a count"))
            })
        })
        .collect()
}

/// Footer line values with the line they came from.
struct Footer {
    line: usize,
    values: Vec<u64>,
}

pub(crate) fn parse(text: &str) -> Result<Imported, ImportError> {
    let mut rows: Vec<(usize, u64, Vec<u64>)> = Vec::new();
    let mut total: Option<Footer> = None;
    let mut min: Option<Footer> = None;
    let mut max: Option<Footer> = None;
    let mut overflows: Option<Footer> = None;
    for (line_number, line) in crate::numbered_lines(text) {
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim();
            let footer = |label: &str| -> Result<Option<Footer>, ImportError> {
                match comment.strip_prefix(label) {
                    Some(rest) => Ok(Some(Footer {
                        line: line_number,
                        values: numbers(line_number, rest, label)?,
                    })),
                    None => Ok(None),
                }
            };
            if let Some(found) = footer("Total:")? {
                total = Some(found);
            } else if let Some(found) = footer("Min Latencies:")? {
                min = Some(found);
            } else if let Some(found) = footer("Max Latencies:")? {
                max = Some(found);
            } else if let Some(found) = footer("Histogram Overflows:")? {
                overflows = Some(found);
            }
            // Other comments (the cycle numbers of overflows, cpu_dma_latency) carry no values.
            continue;
        }
        if is_data_row(line) {
            let mut fields = line.split_whitespace();
            let bucket_text = fields.next().unwrap_or_default();
            let bucket: u64 = bucket_text.parse().map_err(|_| {
                line_error(
                    line_number,
                    format!("bucket '{bucket_text}' is not a number"),
                )
            })?;
            let counts = numbers(
                line_number,
                &fields.collect::<Vec<_>>().join(" "),
                "histogram row",
            )?;
            if let Some((_, previous, first_counts)) = rows.last() {
                if bucket <= *previous {
                    return Err(line_error(
                        line_number,
                        format!("bucket {bucket} follows bucket {previous}: rows must ascend"),
                    ));
                }
                if counts.len() != first_counts.len() {
                    return Err(line_error(
                        line_number,
                        format!(
                            "{} counts in this row, {} in the rows above",
                            counts.len(),
                            first_counts.len()
                        ),
                    ));
                }
            }
            rows.push((line_number, bucket, counts));
            continue;
        }
        // cyclictest's own status lines (without -q) are not data.
        if line.starts_with("T:") || line.starts_with("policy:") {
            continue;
        }
        return Err(line_error(
            line_number,
            format!(
                "'{}' is neither a histogram row nor a cyclictest comment",
                shorten(line)
            ),
        ));
    }
    let Some((_, _, first_counts)) = rows.first() else {
        return Err(ImportError::File(
            "no histogram rows (cyclictest writes them with -h N or --histfile)".to_owned(),
        ));
    };
    let columns = first_counts.len();
    // -H adds a summary column: Min/Max then have one value per thread, the rows one more.
    let threads = match &min {
        Some(footer) if footer.values.len() + 1 == columns => footer.values.len(),
        Some(footer) if footer.values.len() != columns => {
            return Err(line_error(
                footer.line,
                format!(
                    "{} threads here, {} count columns in the histogram",
                    footer.values.len(),
                    columns
                ),
            ))
        }
        _ => columns,
    };
    let mut histograms: Vec<LatencyHistogram> =
        (0..threads).map(|_| LatencyHistogram::new()).collect();
    for (_, bucket, counts) in &rows {
        for (thread, count) in counts.iter().take(threads).enumerate() {
            histograms[thread].record_n(bucket * 1_000, *count);
        }
    }
    let check_len = |footer: &Footer, label: &str| -> Result<(), ImportError> {
        if footer.values.len() < threads {
            return Err(line_error(
                footer.line,
                format!(
                    "'{label}' has {} values for {threads} threads",
                    footer.values.len()
                ),
            ));
        }
        Ok(())
    };
    if let Some(footer) = &total {
        check_len(footer, "Total")?;
        for (thread, histogram) in histograms.iter().enumerate() {
            if footer.values[thread] != histogram.count() {
                return Err(line_error(
                    footer.line,
                    format!(
                        "thread {thread}: Total says {} samples but its rows hold {}",
                        footer.values[thread],
                        histogram.count()
                    ),
                ));
            }
        }
    }
    let last_bucket = rows.last().map_or(0, |(_, bucket, _)| *bucket);
    let mut warnings = Vec::new();
    if let Some(footer) = &overflows {
        check_len(footer, "Histogram Overflows")?;
        let maxima = match &max {
            Some(max_footer) => {
                check_len(max_footer, "Max Latencies")?;
                Some(max_footer)
            }
            None => None,
        };
        for (thread, histogram) in histograms.iter_mut().enumerate() {
            let count = footer.values[thread];
            if count == 0 {
                continue;
            }
            let Some(maxima) = maxima else {
                return Err(line_error(
                    footer.line,
                    "overflows without a '# Max Latencies:' line: their values are unknown",
                ));
            };
            let max_us = maxima.values[thread].max(last_bucket + 1);
            histogram.record_n(max_us * 1_000, count);
            warnings.push(format!(
                "thread {thread}: {count} samples beyond the histogram's {} µs were recorded at the thread's maximum {max_us} µs (an upper bound: cyclictest keeps only their count)",
                last_bucket + 1
            ));
        }
    }
    let series = histograms
        .into_iter()
        .enumerate()
        .map(|(thread, histogram)| ImportedSeries {
            class: "cyclictest".to_owned(),
            cpu: thread as u32,
            histogram,
        })
        .collect();
    warnings.push(
        "cyclictest buckets are 1 µs wide: latencies are truncated to whole µs; thread numbers stand for CPUs".to_owned(),
    );
    Ok(Imported {
        format: Format::Cyclictest,
        series,
        warnings,
    })
}
