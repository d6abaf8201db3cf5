//! Data-driven parser tests: every file under `test_data/<format>/ok` parses to the series its
//! `.expect` lists, every file under `test_data/<format>/err` is rejected with the message its
//! `.expect` starts with (line number included).

use rtlab_testkit::fixture_files;

use rtlab_import::{detect, parse, to_record, Format, ImportOptions, RecordOrigin, ValueUnit};
use std::path::{Path, PathBuf};

fn test_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data")
}

fn format_of_directory(name: &str) -> Format {
    match name {
        "cyclictest" => Format::Cyclictest,
        "rtla" => Format::RtlaTimerlat,
        "hdrlog" => Format::HdrLog,
        "csv" => Format::Csv,
        other => panic!("unknown fixture directory {other}"),
    }
}

/// HdrHistogram logs do not carry a unit: the fixtures are in ns.
fn options_for(format: Format) -> ImportOptions {
    ImportOptions {
        value_unit: (format == Format::HdrLog).then_some(ValueUnit::Nanoseconds),
        ..ImportOptions::default()
    }
}

fn fixtures(kind: &str) -> Vec<(Format, PathBuf, String)> {
    let mut found = Vec::new();
    for directory in ["cyclictest", "rtla", "hdrlog", "csv"] {
        let folder = test_data().join(directory).join(kind);
        for path in fixture_files::fixture_files(&folder, |extension| extension != "expect") {
            let expect = fixture_files::expectation(&path);
            found.push((format_of_directory(directory), path, expect));
        }
    }
    found
}

#[test]
fn ok_fixtures_parse_to_their_expected_series() {
    for (format, path, expect) in fixtures("ok") {
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            detect(&text),
            Some(format),
            "{}: detected format",
            path.display()
        );
        let imported = parse(&text, &options_for(format))
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let expected: Vec<(String, u32, u64, u64)> = expect
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                (
                    fields[0].to_owned(),
                    fields[1].parse().unwrap(),
                    fields[2].parse().unwrap(),
                    fields[3].parse().unwrap(),
                )
            })
            .collect();
        assert_eq!(imported.series.len(), expected.len(), "{}", path.display());
        for (series, (class, cpu, count, max_ns)) in imported.series.iter().zip(&expected) {
            assert_eq!(
                (&series.class, series.cpu),
                (class, *cpu),
                "{}",
                path.display()
            );
            assert_eq!(
                series.histogram.count(),
                *count,
                "{} {class}@{cpu}",
                path.display()
            );
            let max = series.histogram.max();
            let relative = max.abs_diff(*max_ns) as f64 / *max_ns as f64;
            assert!(
                relative <= 1e-3,
                "{} {class}@{cpu}: max {max} vs {max_ns}",
                path.display()
            );
        }
        // Every import becomes a Run record that validates.
        let origin = RecordOrigin {
            source: path.display().to_string(),
            started_at: "2026-01-01T00:00:00Z".to_owned(),
            tool_version: "test".to_owned(),
            cmdline: vec![],
        };
        let record = to_record(&imported, &text, &options_for(format), &origin).unwrap();
        record.validate().unwrap();
        let reparsed = rtlab_core::RunRecord::from_json(&record.to_json_pretty()).unwrap();
        assert_eq!(reparsed.series.len(), expected.len());
    }
}

#[test]
fn err_fixtures_are_rejected_with_their_line() {
    for (format, path, expect) in fixtures("err") {
        let text = std::fs::read_to_string(&path).unwrap();
        let options = ImportOptions {
            format: Some(format),
            ..options_for(format)
        };
        let error = match parse(&text, &options) {
            Ok(_) => panic!("{}: parsed, expected an error", path.display()),
            Err(error) => error.to_string(),
        };
        let expected = expect.trim();
        assert!(
            error.starts_with(expected),
            "{}: got '{error}', expected it to start with '{expected}'",
            path.display()
        );
    }
}

#[test]
fn overflows_are_counted_at_the_maximum_and_warned_about() {
    let path = test_data().join("cyclictest/ok/histfile_h100_2threads_overflows.txt");
    let text = std::fs::read_to_string(path).unwrap();
    let imported = parse(&text, &ImportOptions::default()).unwrap();
    // 69 samples per thread beyond 100 µs, recorded at the thread maxima 3222 and 4821 µs.
    assert_eq!(imported.series[0].histogram.count_above(100_000), 69);
    assert_eq!(imported.series[1].histogram.count_above(4_820_000), 69);
    assert!(imported
        .warnings
        .iter()
        .any(|warning| warning.contains("69 samples beyond")));
}

#[test]
fn summary_column_of_capital_h_is_dropped() {
    let path = test_data().join("cyclictest/ok/stdout_H30_summary_column.txt");
    let text = std::fs::read_to_string(path).unwrap();
    let imported = parse(&text, &ImportOptions::default()).unwrap();
    assert_eq!(imported.series.len(), 2);
}

#[test]
fn a_log_without_a_unit_is_refused() {
    let path = test_data().join("hdrlog/ok/python_hdrh_two_intervals.hlog");
    let text = std::fs::read_to_string(path).unwrap();
    let error = parse(&text, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(error.contains("value unit (ns, us or ms)"), "{error}");
}

#[test]
fn rust_hdrhistogram_interval_log_round_trips() {
    use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
    use hdrhistogram::serialization::V2DeflateSerializer;
    use hdrhistogram::Histogram;
    let mut first = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    let mut second = first.clone();
    for value in 1..=1000u64 {
        first.record(value * 10).unwrap();
    }
    second.record_n(50_000, 7).unwrap();
    let mut bytes = Vec::new();
    {
        let mut serializer = V2DeflateSerializer::new();
        let mut writer = IntervalLogWriterBuilder::new()
            .with_max_value_divisor(1_000.0)
            .begin_log_with(&mut bytes, &mut serializer)
            .unwrap();
        writer
            .write_histogram(
                &first,
                std::time::Duration::from_secs(0),
                std::time::Duration::from_secs(1),
                None,
            )
            .unwrap();
        let tag = hdrhistogram::serialization::interval_log::Tag::new("probe").unwrap();
        writer
            .write_histogram(
                &second,
                std::time::Duration::from_secs(1),
                std::time::Duration::from_secs(1),
                Some(tag),
            )
            .unwrap();
    }
    let text = String::from_utf8(bytes).unwrap();
    assert_eq!(detect(&text), Some(Format::HdrLog));
    let options = ImportOptions {
        value_unit: Some(ValueUnit::Microseconds),
        ..ImportOptions::default()
    };
    let imported = parse(&text, &options).unwrap();
    assert_eq!(imported.series.len(), 2);
    assert_eq!(imported.series[0].class, "hdr");
    assert_eq!(imported.series[0].histogram.count(), 1000);
    assert_eq!(imported.series[1].class, "probe");
    assert_eq!(imported.series[1].histogram.count(), 7);
    // 50 000 µs → 50 ms in ns, within HdrHistogram's precision.
    let max = imported.series[1].histogram.max();
    assert!((49_950_000..=50_050_000).contains(&max), "{max}");
}
