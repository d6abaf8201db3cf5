//! `rtlab import` end to end: real cyclictest/rtla/HdrHistogram/CSV fixtures become valid Run
//! records that `show` and `forecast` read; `rtlab run --histfile` output re-imports to the same
//! counts; malformed files are rejected with their line.

mod common;

use common::{
    assert_input_error, read_record, stderr_text, stdout_json, stdout_record, stdout_text, Sandbox,
};
use rtlab_core::{Metric, RunRecord};
use std::path::{Path, PathBuf};

fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../rtlab-import/test_data")
        .join(relative)
}

/// `rtlab import FILE --no-store --json - EXTRA…`, which must succeed; the record it printed.
fn import_json(sandbox: &Sandbox, file: &Path, extra: &[&str]) -> RunRecord {
    let mut args = vec![
        "import",
        file.to_str().unwrap(),
        "--no-store",
        "--json",
        "-",
    ];
    args.extend_from_slice(extra);
    let output = sandbox.run(args);
    assert!(
        output.status.success(),
        "{}: {}",
        file.display(),
        stderr_text(&output)
    );
    stdout_record(&output)
}

#[test]
fn every_format_imports_to_a_valid_record() {
    let sandbox = Sandbox::new();
    let cases: [(&str, &[&str], usize); 4] = [
        ("cyclictest/ok/histfile_h100_2threads_overflows.txt", &[], 2),
        ("rtla/ok/timerlat_hist_us_2cpus_overflows.txt", &[], 4),
        (
            "hdrlog/ok/python_hdrh_two_intervals.hlog",
            &["--value-unit", "ns"],
            1,
        ),
        ("csv/ok/python_sleep_latency_us.csv", &[], 1),
    ];
    for (file, extra, n_series) in cases {
        let record = import_json(&sandbox, &fixture(file), extra);
        assert_eq!(record.series.len(), n_series, "{file}");
        assert!(record
            .series
            .iter()
            .all(|series| series.metric == Metric::Wakeup));
        assert!(record
            .warnings
            .iter()
            .any(|warning| warning.contains("imported from")));
    }
    let record = import_json(
        &sandbox,
        &fixture("cyclictest/ok/histfile_h100_2threads_overflows.txt"),
        &["--class", "rt-high", "--period", "1ms"],
    );
    assert_eq!(record.series[0].class, "rt-high");
    assert_eq!(record.series[0].count, 2000);
    assert_eq!(record.duration_ns, 2_000_000_000);
}

#[test]
fn imported_runs_are_stored_and_forecast_like_measured_ones() {
    let sandbox = Sandbox::new();
    let file = fixture("cyclictest/ok/histfile_h100_2threads_overflows.txt");
    let output = sandbox.run_expecting(0, ["import", file.to_str().unwrap()]);
    let text = stdout_text(&output);
    let id = text
        .split("stored as run ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no id in {text}"))
        .to_owned();
    let shown = sandbox.run_expecting(0, ["show", &id]);
    assert!(stdout_text(&shown).contains("cyclictest"));
    // 2 × 6 ms, c 1.5 ms: slack 4.5 ms; the 69 overflows of thread 1 (recorded at 4.821 ms) are late.
    let forecast = sandbox.run_expecting(
        0,
        [
            "forecast",
            &id,
            "--buffers",
            "2",
            "--buffer-ms",
            "6",
            "--compute-ms",
            "1.5",
            "--json",
            "-",
        ],
    );
    let json = stdout_json(&forecast);
    assert_eq!(json["series"], "cyclictest/wakeup");
    assert_eq!(json["rows"][0]["basis"]["late"], 69);
    assert_eq!(json["rows"][0]["basis"]["samples"], 4000);
}

#[test]
fn malformed_files_are_rejected_with_their_line() {
    let sandbox = Sandbox::new();
    let import_without_storing =
        |file: &Path| sandbox.run(["import", file.to_str().unwrap(), "--no-store"]);
    assert_input_error(
        &import_without_storing(&fixture("cyclictest/err/total_mismatch.txt")),
        "total_mismatch.txt: line 4: thread 1",
    );
    assert_input_error(
        &import_without_storing(&fixture("hdrlog/ok/python_hdrh_two_intervals.hlog")),
        "--value-unit",
    );
    let garbage = sandbox.write("notes.txt", "dear diary\ntoday the latency was bad\n");
    assert_input_error(
        &import_without_storing(&garbage),
        "first line is 'dear diary'",
    );
}

#[test]
fn run_histfile_reimports_to_the_same_counts() {
    let sandbox = Sandbox::new();
    let json = sandbox.file("run.json");
    let histfile = sandbox.file("run.hist");
    let output = sandbox.run([
        "run",
        "--duration",
        "2s",
        "--warmup",
        "200ms",
        "--no-store",
        "--no-handoff",
        "--histogram",
        "200",
        "--json",
        json.to_str().unwrap(),
        "--histfile",
        histfile.to_str().unwrap(),
    ]);
    // Without real-time permission the run measures the normal class only and still succeeds.
    assert!(
        output.status.success(),
        "rtlab run failed: {}",
        stderr_text(&output)
    );
    let measured = read_record(&json);
    let imported = import_json(&sandbox, &histfile, &[]);
    let measured_counts: Vec<u64> = measured
        .series
        .iter()
        .filter(|series| series.metric == Metric::Wakeup)
        .map(|series| series.count)
        .collect();
    let imported_counts: Vec<u64> = imported.series.iter().map(|series| series.count).collect();
    assert!(!measured_counts.is_empty());
    assert_eq!(imported_counts, measured_counts);
    // Samples beyond the 200 µs histogram come back as overflows: as many above 200 µs.
    for (series, original) in imported.series.iter().zip(
        measured
            .series
            .iter()
            .filter(|series| series.metric == Metric::Wakeup),
    ) {
        let back = series.histogram().unwrap();
        let before = original.histogram().unwrap();
        assert_eq!(
            back.count_above(200_000),
            before.count_above(200_000),
            "{}",
            original.label()
        );
    }
}
