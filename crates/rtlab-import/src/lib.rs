//! rtlab-import: other tools' latency data as Run records.
//!
//! Most latency data on Linux machines was measured with cyclictest, rtla timerlat or a program
//! that logs HdrHistograms. Turning those files into the one Run record every analysis reads means
//! `rtlab show`, `forecast` and `check` work on them unchanged, and results from before rtlab can
//! be compared with rtlab's own. The format is detected from the text; anything that cannot be read
//! is rejected with its line number, never guessed at (in particular a unit that a file does not
//! state must be given by the caller).

mod csv;
mod cyclictest;
mod hdr_log;
mod rtla;
mod source;

pub use source::{read_source, ReadError, Source};

/// True when `cause` is one of this crate's errors and the named file is at fault.
pub fn is_input_error(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause
        .downcast_ref::<ReadError>()
        .is_some_and(ReadError::is_input)
}

use rtlab_core::{LatencyHistogram, Metric, Nanos, RecordHeader, RunRecord};
use std::fmt;

/// The formats rtlab reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// cyclictest `-h N`/`-H N` stdout, or its `--histfile` file.
    Cyclictest,
    /// `rtla timerlat hist` stdout.
    RtlaTimerlat,
    /// An HdrHistogram interval log (`HistogramLogWriter`).
    HdrLog,
    /// One latency per line, optionally under a one-word header naming the unit.
    Csv,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Cyclictest => "cyclictest",
            Format::RtlaTimerlat => "rtla-timerlat",
            Format::HdrLog => "hdr-log",
            Format::Csv => "csv",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(text: &str) -> Result<Format, String> {
        match text {
            "cyclictest" => Ok(Format::Cyclictest),
            "rtla-timerlat" | "rtla" => Ok(Format::RtlaTimerlat),
            "hdr-log" | "hdr" => Ok(Format::HdrLog),
            "csv" => Ok(Format::Csv),
            other => Err(format!(
                "unknown format '{other}' (expected cyclictest, rtla-timerlat, hdr-log or csv)"
            )),
        }
    }
}

/// The unit of bare numbers in a file that does not state it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueUnit {
    Nanoseconds,
    Microseconds,
    Milliseconds,
}

impl ValueUnit {
    pub fn nanos_per_unit(self) -> f64 {
        match self {
            ValueUnit::Nanoseconds => 1.0,
            ValueUnit::Microseconds => 1e3,
            ValueUnit::Milliseconds => 1e6,
        }
    }
}

impl std::str::FromStr for ValueUnit {
    type Err = String;
    fn from_str(text: &str) -> Result<ValueUnit, String> {
        match text {
            "ns" => Ok(ValueUnit::Nanoseconds),
            "us" | "µs" => Ok(ValueUnit::Microseconds),
            "ms" => Ok(ValueUnit::Milliseconds),
            other => Err(format!("unknown unit '{other}' (expected ns, us or ms)")),
        }
    }
}

/// What the caller knows that the file may not say.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Force a format instead of detecting it.
    pub format: Option<Format>,
    /// Unit of the numbers in an HdrHistogram log or a CSV without a unit header.
    pub value_unit: Option<ValueUnit>,
    /// Class tag of every imported series (default: the format's name).
    pub class: Option<String>,
    /// Period of the measuring thread(s), when known (cyclictest `-i`).
    pub period: Option<Nanos>,
}

/// One imported distribution.
#[derive(Clone, Debug)]
pub struct ImportedSeries {
    pub class: String,
    pub cpu: u32,
    pub histogram: LatencyHistogram,
}

/// What a file held.
#[derive(Clone, Debug)]
pub struct Imported {
    pub format: Format,
    pub series: Vec<ImportedSeries>,
    /// What the user should know about the data's quality (overflows, unknown values).
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ImportError {
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
    #[error("{0}")]
    File(String),
    #[error("not a format rtlab can import (cyclictest -h/--histfile, rtla timerlat hist, HdrHistogram log, one-column CSV): {0}")]
    Unrecognised(String),
    /// The file does not say its values' unit and the options do not either.
    #[error("{}{message}", line.map(|line| format!("line {line}: ")).unwrap_or_default())]
    NoUnit {
        line: Option<usize>,
        message: String,
    },
}

impl ImportError {
    /// The [`ImportOptions`] field that would fix the error (`value_unit`), when one would.
    pub fn setting(&self) -> Option<&'static str> {
        match self {
            ImportError::NoUnit { .. } => Some("value_unit"),
            _ => None,
        }
    }
}

/// The non-blank lines of `text`, trimmed, with their line numbers (from 1, for the errors).
pub(crate) fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty())
}

pub(crate) fn line_error(line: usize, message: impl Into<String>) -> ImportError {
    ImportError::Line {
        line,
        message: message.into(),
    }
}

/// Guesses the format from the text; `None` when nothing fits.
pub fn detect(text: &str) -> Option<Format> {
    let lines = || text.lines().map(str::trim).filter(|line| !line.is_empty());
    if lines().any(|line| line.starts_with("# RTLA timerlat") || rtla::is_header(line)) {
        return Some(Format::RtlaTimerlat);
    }
    if lines().any(|line| {
        line.starts_with("#[StartTime:")
            || line.starts_with("#[BaseTime:")
            || line.starts_with("\"StartTimestamp\"")
            || line.contains(",HISTF")
    }) {
        return Some(Format::HdrLog);
    }
    if lines().any(|line| line == "# Histogram" || line.starts_with("# Total:"))
        || lines().next().is_some_and(cyclictest::is_data_row)
    {
        return Some(Format::Cyclictest);
    }
    let mut data = lines().filter(|line| !line.starts_with('#'));
    let first = data.next()?;
    let first_is_number = csv::parse_number(first).is_some();
    let first_is_header = !first.contains(',') && !first_is_number;
    if (first_is_number || first_is_header)
        && data
            .next()
            .is_some_and(|line| csv::parse_number(line).is_some())
    {
        return Some(Format::Csv);
    }
    None
}

/// Parses a file's text into distributions.
pub fn parse(text: &str, options: &ImportOptions) -> Result<Imported, ImportError> {
    let format = match options.format {
        Some(format) => format,
        None => detect(text).ok_or_else(|| {
            ImportError::Unrecognised(
                text.lines()
                    .find(|line| !line.trim().is_empty())
                    .map(|line| format!("first line is '{}'", shorten(line)))
                    .unwrap_or_else(|| "the file is empty".to_owned()),
            )
        })?,
    };
    let mut imported = match format {
        Format::Cyclictest => cyclictest::parse(text)?,
        Format::RtlaTimerlat => rtla::parse(text)?,
        Format::HdrLog => hdr_log::parse(text, options.value_unit)?,
        Format::Csv => csv::parse(text, options.value_unit)?,
    };
    if let Some(class) = &options.class {
        for series in &mut imported.series {
            series.class.clone_from(class);
        }
    }
    if imported
        .series
        .iter()
        .all(|series| series.histogram.count() == 0)
    {
        return Err(ImportError::File(format!(
            "the {format} file holds no samples"
        )));
    }
    Ok(imported)
}

pub(crate) fn shorten(line: &str) -> String {
    let trimmed = line.trim();
    if trimmed.chars().count() > 60 {
        format!("{}…", trimmed.chars().take(60).collect::<String>())
    } else {
        trimmed.to_owned()
    }
}

/// One line for the run history: what was imported from where, how much, and the worst value.
pub fn summary_line(imported: &Imported, source: &str, record: &RunRecord) -> String {
    let samples: u64 = record.series.iter().map(|series| series.count).sum();
    let worst = record
        .series
        .iter()
        .map(|series| series.max_ns)
        .max()
        .unwrap_or(0);
    format!(
        "imported {} ({source}): {} series, {samples} samples, worst {:.1} us",
        imported.format,
        record.series.len(),
        worst as f64 / 1_000.0
    )
}

/// The fields of a record that describe where it came from.
#[derive(Clone, Debug)]
pub struct RecordOrigin {
    /// The file name as given (recorded in `config` and the warnings).
    pub source: String,
    /// RFC 3339 UTC: when the data was measured, or at least when it was imported.
    pub started_at: String,
    pub tool_version: String,
    pub cmdline: Vec<String>,
}

/// A stable id for imported data: the same file imports to the same id (FNV-1a over the text).
pub fn import_id(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("import-{hash:016x}")
}

/// Builds a Run record (it validates) from imported distributions.
pub fn to_record(
    imported: &Imported,
    text: &str,
    options: &ImportOptions,
    origin: &RecordOrigin,
) -> Result<RunRecord, ImportError> {
    let period_ns = options.period.map_or(0, |period| period.0);
    let mut series = Vec::with_capacity(imported.series.len());
    for item in &imported.series {
        let built = RunRecord::series_from_histogram(
            Metric::Wakeup,
            &item.class,
            item.cpu,
            "unknown",
            0,
            period_ns,
            &item.histogram,
            0,
            0,
            Vec::new(),
            Vec::new(),
        )
        .map_err(|error| ImportError::File(error.to_string()))?;
        series.push(built);
    }
    let largest_count = series.iter().map(|item| item.count).max().unwrap_or(0);
    let mut warnings = vec![format!(
        "imported from a {} file ({}): host, kernel, scheduling policy and load are unknown",
        imported.format, origin.source
    )];
    warnings.extend(imported.warnings.iter().cloned());
    if period_ns == 0 {
        warnings.push("measuring period unknown (not given): duration not known".to_owned());
    }
    let mut record = RunRecord::with_header(
        RecordHeader {
            id: import_id(text),
            started_at: origin.started_at.clone(),
            duration_ns: largest_count.saturating_mul(period_ns),
            cmdline: origin.cmdline.clone(),
            host: rtlab_core::Host {
                hostname: "unknown".to_owned(),
                kernel: "unknown".to_owned(),
                preemption: "unknown".to_owned(),
                cpu_model: "unknown".to_owned(),
                cpu_count: 0,
                virtualization: "unknown".to_owned(),
                clocksource: "unknown".to_owned(),
                cpu_dma_latency_us: None,
                windows: None,
            },
        },
        rtlab_core::RecordConfig {
            import: Some(rtlab_core::ImportSource {
                format: imported.format.as_str().to_owned(),
                source: origin.source.clone(),
                period_ns,
            }),
            ..rtlab_core::RecordConfig::default()
        },
        series,
    );
    record.tool_version = origin.tool_version.clone();
    record.warnings = warnings;
    record
        .validate()
        .map_err(|error| ImportError::File(error.to_string()))?;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_each_format_from_its_first_lines() {
        assert_eq!(
            detect("# Histogram\n000000 000001\n"),
            Some(Format::Cyclictest)
        );
        assert_eq!(detect("000000 000001\t000002\n"), Some(Format::Cyclictest));
        assert_eq!(
            detect("# RTLA timerlat histogram\nIndex   IRQ-000   Thr-000\n"),
            Some(Format::RtlaTimerlat)
        );
        assert_eq!(
            detect("#[StartTime: 1.0 (seconds since epoch)]\n0.1,1.0,2.0,HISTFAAAA\n"),
            Some(Format::HdrLog)
        );
        assert_eq!(detect("latency_us\n12\n13.5\n"), Some(Format::Csv));
        assert_eq!(detect("12\n13\n"), Some(Format::Csv));
        assert_eq!(detect("hello world\nthis is text\n"), None);
        assert_eq!(detect(""), None);
    }

    proptest::proptest! {
        /// Bad input never panics, whatever the format forced or detected.
        #[test]
        fn arbitrary_text_never_panics(text in "(?s).{0,400}", forced in 0usize..5) {
            let format = [None, Some(Format::Cyclictest), Some(Format::RtlaTimerlat), Some(Format::HdrLog), Some(Format::Csv)][forced];
            let options = ImportOptions { format, value_unit: Some(ValueUnit::Microseconds), ..ImportOptions::default() };
            let _ = parse(&text, &options);
        }

        /// Line-shaped noise in each format's vocabulary never panics either.
        #[test]
        fn format_shaped_noise_never_panics(
            lines in proptest::collection::vec("(# Total:|# Max Latencies:|# Histogram Overflows:|Index IRQ-000 Thr-001|over:|count:|max:|[0-9]{6}|-|HISTF|Tag=x,)?[ 0-9\t,.-]{0,30}", 0..12),
        ) {
            let text = lines.join("\n");
            for format in [Format::Cyclictest, Format::RtlaTimerlat, Format::HdrLog, Format::Csv] {
                let options = ImportOptions { format: Some(format), value_unit: Some(ValueUnit::Nanoseconds), ..ImportOptions::default() };
                let _ = parse(&text, &options);
            }
        }
    }

    #[test]
    fn import_ids_are_stable_and_content_addressed() {
        assert_eq!(import_id("a"), import_id("a"));
        assert_ne!(import_id("a"), import_id("b"));
        assert!(import_id("").starts_with("import-"));
    }
}
