//! The two names a series goes by outside the record, defined once: its label (`class/metric@cpu`,
//! used in tables, `--series` selectors, episode records and warnings) and the text of the
//! late-sample marker the probe writes into the kernel trace (`rtlab late LABEL intended=… …`).

use crate::metric::Metric;
use std::fmt;

/// `class/metric@cpu`, e.g. `rt-high/wakeup@3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesLabel<'a> {
    pub class: &'a str,
    pub metric: Metric,
    pub cpu: u32,
}

impl fmt::Display for SeriesLabel<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}/{}@{}", self.class, self.metric, self.cpu)
    }
}

/// How every late-sample marker begins (the tracer counts the markers it sees by this prefix).
pub const LATE_MARKER_PREFIX: &str = "rtlab late ";

/// Writes one late-sample marker line (`rtlab late LABEL intended=NS actual=NS latency=NS\n`, times
/// CLOCK_MONOTONIC ns) into `buffer` and returns its length, or None when it does not fit. Does not
/// allocate: it runs on the probe's sample path.
pub fn write_late_marker(
    buffer: &mut [u8],
    label: SeriesLabel<'_>,
    intended_ns: u64,
    actual_ns: u64,
    latency_ns: u64,
) -> Option<usize> {
    use std::io::Write as _;
    let capacity = buffer.len();
    let mut cursor = &mut buffer[..];
    writeln!(
        cursor,
        "{LATE_MARKER_PREFIX}{label} intended={intended_ns} actual={actual_ns} latency={latency_ns}"
    )
    .ok()?;
    Some(capacity - cursor.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_and_marker_text() {
        let label = SeriesLabel {
            class: "rt-high",
            metric: Metric::Wakeup,
            cpu: 3,
        };
        assert_eq!(label.to_string(), "rt-high/wakeup@3");
        let mut buffer = [0u8; 160];
        let length = write_late_marker(&mut buffer, label, 10, 25, 15).unwrap();
        assert_eq!(
            std::str::from_utf8(&buffer[..length]).unwrap(),
            "rtlab late rt-high/wakeup@3 intended=10 actual=25 latency=15\n"
        );
        assert_eq!(write_late_marker(&mut [0u8; 8], label, 1, 2, 1), None);
    }
}
