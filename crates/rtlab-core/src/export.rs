//! Writers for the formats the field already reads: cyclictest's `--histfile`, and the interval
//! histogram of paper 000 (Tables 2-3). Pure functions of series, so they are snapshot-tested.

use crate::histogram::LatencyHistogram;
use crate::record::Series;
use std::fmt::Write as _;

/// One column of a cyclictest histogram: a label (kept as a trailing comment) and its histogram.
#[derive(Debug)]
pub struct HistColumn<'a> {
    pub label: String,
    pub histogram: &'a LatencyHistogram,
    /// Sample numbers (cycle numbers) of values at or beyond the histogram's end, if known.
    pub overflow_cycles: Vec<u64>,
}

/// Counts per whole microsecond from 0 to `buckets - 1`, plus the overflow count.
fn per_microsecond(histogram: &LatencyHistogram, buckets: usize) -> (Vec<u64>, u64) {
    let mut counts = vec![0u64; buckets];
    let mut overflow = 0u64;
    for step in histogram.inner().iter_linear(1_000) {
        let count = step.count_since_last_iteration();
        if count == 0 {
            continue;
        }
        // The step covers [value - 1000, value): its microsecond is (value - 1) / 1000.
        let microsecond = (step.value_iterated_to().saturating_sub(1) / 1_000) as usize;
        match counts.get_mut(microsecond) {
            Some(slot) => *slot += count,
            None => overflow += count,
        }
    }
    (counts, overflow)
}

/// Appends `value` as `format!("{value:06}")` would, without the formatting machinery: a
/// histfile is tens of thousands of these, and `write!` was a millisecond of every run's end
/// (BENCHMARKS.md, probe cost; test `zero_padding_equals_format`).
fn push_zero_padded(text: &mut String, value: u64) {
    const WIDTH: usize = 6;
    let mut digits = [b'0'; 20];
    let mut rest = value;
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let start = start.min(digits.len() - WIDTH);
    for digit in &digits[start..] {
        text.push(char::from(*digit));
    }
}

/// cyclictest's `--histfile` of a record's wake-up series, one column per series (`class@cpu`),
/// with `buckets` 1 µs buckets; the overflow cycles come from the series' peaks.
pub fn record_histfile(
    record: &crate::RunRecord,
    buckets: usize,
) -> Result<String, crate::HistogramError> {
    let wakeups: Vec<_> = record
        .series
        .iter()
        .filter(|series| series.metric == crate::Metric::Wakeup)
        .collect();
    let histograms = wakeups
        .iter()
        .map(|series| series.histogram())
        .collect::<Result<Vec<_>, _>>()?;
    let limit_ns = buckets as u64 * 1_000;
    let columns: Vec<HistColumn<'_>> = wakeups
        .iter()
        .zip(&histograms)
        .map(|(series, histogram)| {
            let mut overflow_cycles: Vec<u64> = series
                .peaks
                .iter()
                .filter(|peak| peak.value_ns >= limit_ns)
                .map(|peak| peak.at_ns / series.period_ns.max(1))
                .collect();
            overflow_cycles.sort_unstable();
            HistColumn {
                label: format!("{}@{}", series.class, series.cpu),
                histogram,
                overflow_cycles,
            }
        })
        .collect();
    Ok(cyclictest_histogram(&columns, buckets))
}

/// cyclictest's `--histfile` / `-h` output: one row per microsecond `%06d`, tab-separated
/// per-thread counts `%06lu`, then the `# Total`, `# Min/Avg/Max Latencies`, `# Histogram
/// Overflows` lines and overflow cycle numbers. Totals exclude overflows, as cyclictest's do.
pub fn cyclictest_histogram(columns: &[HistColumn<'_>], buckets: usize) -> String {
    let tables: Vec<(Vec<u64>, u64)> = columns
        .iter()
        .map(|column| per_microsecond(column.histogram, buckets))
        .collect();
    // One allocation for the rows (at least 8 bytes per count), written in place: a default
    // `--histogram 10000` file is tens of thousands of counts.
    let mut text = String::with_capacity(16 + buckets * (8 + 8 * columns.len()));
    text.push_str("# Histogram\n");
    for bucket in 0..buckets {
        push_zero_padded(&mut text, bucket as u64);
        text.push(' ');
        for (index, (counts, _)) in tables.iter().enumerate() {
            if index > 0 {
                text.push('\t');
            }
            push_zero_padded(&mut text, counts[bucket]);
        }
        text.push('\n');
    }
    let line = |name: &str, values: Vec<String>| format!("# {name}:{}\n", values.concat());
    text.push_str(&line(
        "Total",
        tables
            .iter()
            .map(|(counts, _)| format!(" {:09}", counts.iter().sum::<u64>()))
            .collect(),
    ));
    text.push_str(&line(
        "Min Latencies",
        columns
            .iter()
            .map(|column| format!(" {:05}", column.histogram.min() / 1_000))
            .collect(),
    ));
    text.push_str(&line(
        "Avg Latencies",
        columns
            .iter()
            .map(|column| format!(" {:05}", (column.histogram.mean() / 1_000.0) as u64))
            .collect(),
    ));
    text.push_str(&line(
        "Max Latencies",
        columns
            .iter()
            .map(|column| format!(" {:05}", column.histogram.max() / 1_000))
            .collect(),
    ));
    text.push_str(&line(
        "Histogram Overflows",
        tables
            .iter()
            .map(|(_, overflow)| format!(" {overflow:05}"))
            .collect(),
    ));
    text.push_str("# Histogram Overflow at cycle number:\n");
    for (index, column) in columns.iter().enumerate() {
        let _ = write!(text, "# Thread {index}:");
        for cycle in column.overflow_cycles.iter().take(20) {
            let _ = write!(text, " {cycle:05}");
        }
        if column.overflow_cycles.len() > 20 {
            let _ = write!(text, " # {:05} others", column.overflow_cycles.len() - 20);
        }
        text.push('\n');
    }
    let labels: Vec<&str> = columns.iter().map(|column| column.label.as_str()).collect();
    let _ = writeln!(text, "# rtlab columns: {}", labels.join(" "));
    text
}

/// Paper 000's table: counts of times between wake-ups in 100 µs bins, one column per series;
/// only non-empty rows. Returns (header, rows of (bin label, counts)).
pub fn interval_table(series: &[(&Series, LatencyHistogram)]) -> Vec<(String, Vec<u64>)> {
    use std::collections::BTreeMap;
    let mut bins: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (column, (_, histogram)) in series.iter().enumerate() {
        for (value_ns, count) in histogram.buckets() {
            let bin = value_ns / 100_000;
            bins.entry(bin).or_insert_with(|| vec![0; series.len()])[column] += count;
        }
    }
    bins.into_iter()
        .map(|(bin, counts)| (format!("{}-{} us", bin * 100, bin * 100 + 100), counts))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The hand-written padding writes exactly what `{:06}` does, short and long numbers.
        #[test]
        fn zero_padding_equals_format(value in proptest::prelude::any::<u64>(), small in 0u64..2_000_000) {
            for value in [value, small] {
                let mut text = String::from("x");
                push_zero_padded(&mut text, value);
                proptest::prop_assert_eq!(text, format!("x{value:06}"));
            }
        }
    }

    #[test]
    fn zero_padding_at_the_edges() {
        for value in [0, 9, 10, 99_999, 999_999, 1_000_000, u64::MAX] {
            let mut text = String::new();
            push_zero_padded(&mut text, value);
            assert_eq!(text, format!("{value:06}"));
        }
    }

    #[test]
    fn histfile_matches_cyclictest_layout() {
        let mut first = LatencyHistogram::new();
        for value in [1_200u64, 1_900, 2_500, 2_999, 7_000] {
            first.record(value);
        }
        let mut second = LatencyHistogram::new();
        second.record(0);
        second.record(3_400);
        let text = cyclictest_histogram(
            &[
                HistColumn {
                    label: "rt-high@0".into(),
                    histogram: &first,
                    overflow_cycles: vec![4],
                },
                HistColumn {
                    label: "rt-high@1".into(),
                    histogram: &second,
                    overflow_cycles: vec![],
                },
            ],
            4,
        );
        let expected = "# Histogram\n\
000000 000000\t000001\n\
000001 000002\t000000\n\
000002 000002\t000000\n\
000003 000000\t000001\n\
# Total: 000000004 000000002\n\
# Min Latencies: 00001 00000\n\
# Avg Latencies: 00003 00001\n\
# Max Latencies: 00007 00003\n\
# Histogram Overflows: 00001 00000\n\
# Histogram Overflow at cycle number:\n\
# Thread 0: 00004\n\
# Thread 1:\n\
# rtlab columns: rt-high@0 rt-high@1\n";
        assert_eq!(text, expected);
    }
}
