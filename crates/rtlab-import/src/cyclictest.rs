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

/// One histogram row: a 1 µs bucket and its count in each column.
struct BucketRow {
    bucket_us: u64,
    counts: Vec<u64>,
}

/// The footer lines that carry values, each when the file has it.
#[derive(Default)]
struct Footers {
    total: Option<Footer>,
    min: Option<Footer>,
    max: Option<Footer>,
    overflows: Option<Footer>,
}

pub(crate) fn parse(text: &str) -> Result<Imported, ImportError> {
    let (rows, footers) = read_rows_and_footers(text)?;
    let Some(first) = rows.first() else {
        return Err(ImportError::File(
            "no histogram rows (cyclictest writes them with -h N or --histfile)".to_owned(),
        ));
    };
    let threads = thread_count(first.counts.len(), footers.min.as_ref())?;
    let mut histograms: Vec<LatencyHistogram> =
        (0..threads).map(|_| LatencyHistogram::new()).collect();
    for row in &rows {
        for (thread, count) in row.counts.iter().take(threads).enumerate() {
            histograms[thread].record_n(row.bucket_us * 1_000, *count);
        }
    }
    if let Some(footer) = &footers.total {
        check_total(footer, &histograms)?;
    }
    let last_bucket = rows.last().map_or(0, |row| row.bucket_us);
    let mut warnings = Vec::new();
    if let Some(footer) = &footers.overflows {
        record_overflows(
            footer,
            footers.max.as_ref(),
            last_bucket,
            &mut histograms,
            &mut warnings,
        )?;
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

/// Reads every line: bucket rows (which must ascend and have as many counts as the first) and
/// the footers with values; anything else but cyclictest's comments and status lines is an error.
fn read_rows_and_footers(text: &str) -> Result<(Vec<BucketRow>, Footers), ImportError> {
    let mut rows: Vec<BucketRow> = Vec::new();
    let mut footers = Footers::default();
    for (line_number, line) in crate::numbered_lines(text) {
        if let Some(comment) = line.strip_prefix('#') {
            read_footer(line_number, comment.trim(), &mut footers)?;
            // Other comments (the cycle numbers of overflows, cpu_dma_latency) carry no values.
            continue;
        }
        if is_data_row(line) {
            let row = bucket_row(line_number, line, rows.last())?;
            rows.push(row);
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
    Ok((rows, footers))
}

/// Keeps a comment's values when it is one of the footers that carry them.
fn read_footer(
    line_number: usize,
    comment: &str,
    footers: &mut Footers,
) -> Result<(), ImportError> {
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
        footers.total = Some(found);
    } else if let Some(found) = footer("Min Latencies:")? {
        footers.min = Some(found);
    } else if let Some(found) = footer("Max Latencies:")? {
        footers.max = Some(found);
    } else if let Some(found) = footer("Histogram Overflows:")? {
        footers.overflows = Some(found);
    }
    Ok(())
}

/// Parses one bucket row, checking it against the row before it.
fn bucket_row(
    line_number: usize,
    line: &str,
    previous: Option<&BucketRow>,
) -> Result<BucketRow, ImportError> {
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
    if let Some(previous_row) = previous {
        let previous = previous_row.bucket_us;
        if bucket <= previous {
            return Err(line_error(
                line_number,
                format!("bucket {bucket} follows bucket {previous}: rows must ascend"),
            ));
        }
        if counts.len() != previous_row.counts.len() {
            return Err(line_error(
                line_number,
                format!(
                    "{} counts in this row, {} in the rows above",
                    counts.len(),
                    previous_row.counts.len()
                ),
            ));
        }
    }
    Ok(BucketRow {
        bucket_us: bucket,
        counts,
    })
}

/// The number of threads: the count columns, less the summary column `-H` adds when the
/// `# Min Latencies:` line has one value fewer.
fn thread_count(columns: usize, min: Option<&Footer>) -> Result<usize, ImportError> {
    // -H adds a summary column: Min/Max then have one value per thread, the rows one more.
    match min {
        Some(footer) if footer.values.len() + 1 == columns => Ok(footer.values.len()),
        Some(footer) if footer.values.len() != columns => Err(line_error(
            footer.line,
            format!(
                "{} threads here, {} count columns in the histogram",
                footer.values.len(),
                columns
            ),
        )),
        _ => Ok(columns),
    }
}

/// Fails unless the footer has a value for every thread.
fn check_len(footer: &Footer, label: &str, threads: usize) -> Result<(), ImportError> {
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
}

/// Fails unless each thread's `# Total:` matches the samples its rows hold.
fn check_total(footer: &Footer, histograms: &[LatencyHistogram]) -> Result<(), ImportError> {
    check_len(footer, "Total", histograms.len())?;
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
    Ok(())
}

/// Records each thread's overflows at its maximum (an upper bound), with a warning saying so.
fn record_overflows(
    footer: &Footer,
    max: Option<&Footer>,
    last_bucket: u64,
    histograms: &mut [LatencyHistogram],
    warnings: &mut Vec<String>,
) -> Result<(), ImportError> {
    let threads = histograms.len();
    check_len(footer, "Histogram Overflows", threads)?;
    let maxima = match max {
        Some(max_footer) => {
            check_len(max_footer, "Max Latencies", threads)?;
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
    Ok(())
}
