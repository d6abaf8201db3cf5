//! `rtlab forecast` end to end on records built by hand, so every figure is known in advance.

mod common;

use common::{
    assert_exit_code, assert_input_error, rt_high_wakeup_record, stdout_json, stdout_text, Sandbox,
};
use rtlab_core::{LatencyHistogram, RunRecord};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Output;

/// 10^6 rt-high wake-ups over two CPUs: 999 000 at 100 µs, 900 at 2 ms, 90 at 5 ms, 10 at 20 ms.
fn hand_made_record() -> RunRecord {
    let mut first = LatencyHistogram::new();
    first.record_n(100_000, 499_000);
    first.record_n(2_000_000, 900);
    first.record_n(20_000_000, 10);
    let mut second = LatencyHistogram::new();
    second.record_n(100_000, 500_000);
    second.record_n(5_000_000, 90);
    rt_high_wakeup_record(
        "forecast-test",
        500_000_000_000,
        &[(0, &first), (1, &second)],
    )
}

/// A sandbox holding one record file to forecast from.
struct Fixture {
    sandbox: Sandbox,
    record: PathBuf,
}

impl Fixture {
    fn new(record: &RunRecord) -> Fixture {
        let sandbox = Sandbox::new();
        let record = sandbox.write_record("record.json", record);
        Fixture { sandbox, record }
    }

    /// `rtlab forecast RECORD OPTIONS…`, run to completion; `options` as typed on a command
    /// line, split at white space (no quoting).
    fn forecast(&self, options: &str) -> Output {
        let mut args = vec!["forecast", self.record.to_str().unwrap()];
        args.extend(options.split_whitespace());
        self.sandbox.run(args)
    }

    /// The text report of `rtlab forecast RECORD OPTIONS…`, which must exit with `code`.
    #[track_caller]
    fn forecast_text(&self, code: i32, options: &str) -> String {
        let output = self.forecast(options);
        assert_exit_code(&output, code);
        stdout_text(&output)
    }

    /// The JSON report of `rtlab forecast RECORD OPTIONS…`, which must exit 0.
    #[track_caller]
    fn forecast_json(&self, options: &str) -> Value {
        let output = self.forecast(options);
        assert_exit_code(&output, 0);
        stdout_json(&output)
    }
}

#[test]
fn mttf_of_a_configuration_matches_hand_computation() {
    let fixture = Fixture::new(&hand_made_record());
    let json = fixture.forecast_json("--buffers 2 --buffer-ms 4 --compute-ms 1 --json -");
    assert_eq!(json["schema"], "rtlab.forecast/1");
    assert_eq!(json["series"], "rt-high/wakeup");
    assert_eq!(json["samples"], 1_000_000);
    let row = &json["rows"][0];
    // Slack 3 ms; 100 of 10^6 wake-ups are later: P = 1e-4, MTTF = 4 ms / 1e-4 = 40 s.
    assert_eq!(row["slack_ns"], 3_000_000);
    assert!((row["p_late"].as_f64().unwrap() - 1e-4).abs() < 1e-12);
    assert!((row["mttf_s"].as_f64().unwrap() - 40.0).abs() < 1e-9);
    let low = row["mttf_ci_s"][0].as_f64().unwrap();
    let high = row["mttf_ci_s"][1].as_f64().unwrap();
    assert!(low < 40.0 && 40.0 < high, "{low} {high}");
    assert_eq!(row["model"], "per-period");
}

#[test]
fn paper_002_model_divides_by_the_buffering() {
    let fixture = Fixture::new(&hand_made_record());
    let json =
        fixture.forecast_json("--buffers 3 --buffer-ms 4 --compute-ms 1 --model paper002 --json -");
    // Slack 7 ms: 10 late, P = 1e-5, MTTF = (n−1)·t / P = 8 ms / 1e-5 = 800 s.
    let mttf = json["rows"][0]["mttf_s"].as_f64().unwrap();
    assert!((mttf - 800.0).abs() < 1e-6, "{mttf}");
}

#[test]
fn slack_beyond_the_data_gets_no_number() {
    let fixture = Fixture::new(&hand_made_record());
    let text = fixture.forecast_text(0, "--buffers 2 --buffer-ms 40");
    assert!(text.contains("beyond what the data supports"), "{text}");
    assert!(
        text.contains("no underrun expected within the horizon the data supports"),
        "{text}"
    );
    let json = fixture.forecast_json("--buffers 2 --buffer-ms 40 --json -");
    let row = &json["rows"][0];
    assert!(row["p_late"].is_null() && row["mttf_s"].is_null(), "{row}");
    assert!(row["mttf_ci_s"][1].is_null());
    assert_eq!(row["basis"]["kind"], "beyond_data");
}

#[test]
fn a_class_verdict_fails_the_exit_code_when_unsuitable() {
    let fixture = Fixture::new(&hand_made_record());
    // Modem 3 × 6 ms, c 1.5 ms: slack 10.5 ms, 10 late: MTTF 6 ms / 1e-5 = 600 s < 1 hour.
    let text = fixture.forecast_text(1, "--class modem");
    assert!(
        text.contains(
            "NOT suitable for soft modem datapump, 3 × 6 ms buffers (c = 1.5 ms, catching up after a stall): one glitch every 10 min"
        ),
        "{text}"
    );
    // Real-time video, 2 × 33 ms: the slack is beyond the data, but the lower bound on the MTTF
    // (33 ms · 10^6 / ln 10 = 4 h) already beats one per 10 minutes: suitable, exit 0.
    let text = fixture.forecast_text(0, "--class rt-video");
    assert!(
        text.contains("\nrt-video               suitable for real-time video"),
        "{text}"
    );
    assert!(text.contains("the MTTF is above 4 h"), "{text}");
}

#[test]
fn without_a_class_every_builtin_class_gets_a_verdict() {
    let fixture = Fixture::new(&hand_made_record());
    let json = fixture.forecast_json("--json -");
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), rtlab_analysis::classes::builtin_classes().len());
    assert!(rows.iter().all(|row| row["verdict"]["text"].is_string()));
    for key in ["tool_version", "cmdline", "started_at", "host"] {
        assert!(!json[key].is_null(), "missing {key}");
    }
}

#[test]
fn target_finds_the_least_buffering() {
    let fixture = Fixture::new(&hand_made_record());
    let json = fixture.forecast_json("--buffer-ms 4 --compute-ms 1 --target 1/5min --json -");
    // n=2 → 40 s, n=3 → 400 s ≥ 300 s.
    let found = &json["least_buffering"]["found"];
    assert_eq!(found["buffers"], 3, "{found}");
}

#[test]
fn user_classes_file_adds_classes_and_errors_name_the_line() {
    let fixture = Fixture::new(&hand_made_record());
    let classes = fixture.sandbox.write(
        "classes.toml",
        "[[class]]\nname = \"synth\"\nbuffers = 3\nbuffer = \"4ms\"\ncompute = \"1ms\"\nacceptable = \"1/5min\"\n",
    );
    let with_classes_file = [
        "forecast",
        fixture.record.to_str().unwrap(),
        "--classes-file",
        classes.to_str().unwrap(),
    ];
    let output = fixture
        .sandbox
        .run([&with_classes_file[..], &["--class", "synth"]].concat());
    assert_exit_code(&output, 0);
    assert!(stdout_text(&output).contains("suitable for synth"));
    fixture.sandbox.write(
        "classes.toml",
        "[[class]]\nname = \"synth\"\nbuffers = 3\nbuffer = \"4\"\nacceptable = \"1/day\"\n",
    );
    assert_input_error(
        &fixture.sandbox.run(with_classes_file),
        "line 1: class 'synth': field 'buffer'",
    );
}

#[test]
fn unknown_series_and_class_are_input_errors() {
    let fixture = Fixture::new(&hand_made_record());
    assert_input_error(
        &fixture.forecast("--series normal/wakeup"),
        "no series normal/wakeup (it has: rt-high/wakeup)",
    );
    assert_exit_code(&fixture.forecast("--class theremin"), 2);
}

#[test]
fn beyond_the_data_a_fitted_tail_gives_a_number_with_its_interval() {
    // 200 000 wake-ups laid on the quantiles of 50 µs + an exponential of mean 20 µs: the largest
    // is 50 + 20·ln(400 000) ≈ 308 µs. A 2 × 450 µs buffer's slack lies beyond it.
    let samples = 200_000u64;
    let mut histogram = LatencyHistogram::new();
    for index in 0..samples {
        let tail_quantile = (index as f64 + 0.5) / samples as f64;
        histogram.record(50_000 + (-20_000.0 * tail_quantile.ln()) as u64);
    }
    let fixture = Fixture::new(&rt_high_wakeup_record(
        "tail-test",
        samples * 1_000_000,
        &[(0, &histogram)],
    ));
    let json = fixture.forecast_json("--buffers 2 --buffer-ms 0.45 --json -");
    assert!(
        json["tail_projection"]
            .as_str()
            .unwrap()
            .contains("GPD fit"),
        "{json}"
    );
    let row = &json["rows"][0];
    assert_eq!(row["basis"]["kind"], "tail_projection", "{row}");
    // True P(X > 450 µs) = e^-20 = 2.1e-9: MTTF = 0.45 ms / 2.1e-9 ≈ 2.2e5 s, inside the interval.
    let truth = 0.45e-3 / (-20.0f64).exp();
    let low = row["mttf_ci_s"][0].as_f64().unwrap();
    let high = row["mttf_ci_s"][1].as_f64().unwrap_or(f64::INFINITY);
    assert!(low < truth && truth < high, "{low} < {truth} < {high}");
}

/// 30 s of a 1 ms rt-high probe on CPUs 0 and 1 with 20 µs wake-ups and a burst of 2.6 ms
/// every 70 ms (or 60–80 ms when `unsteady`) on both CPUs at once: one late sample per CPU and
/// burst, 1.6–2.6 ms late.
fn record_with_a_periodic_interferer(unsteady: bool) -> RunRecord {
    let mut ends = Vec::new();
    let mut end = 5_000_000u64;
    let mut index = 0u64;
    while end < 29_900_000_000 {
        ends.push(end);
        end += if unsteady {
            60_000_000 + (index * 7_919_000) % 20_000_000
        } else {
            70_000_000
        };
        index += 1;
    }
    let series = (0..2)
        .map(|cpu| {
            let mut histogram = LatencyHistogram::new();
            let mut peaks = Vec::new();
            for (index, end) in ends.iter().enumerate() {
                let latency =
                    1_600_000 + (index as u64 * 389_000 + u64::from(cpu) * 500_000) % 1_000_000;
                histogram.record(latency);
                peaks.push(rtlab_core::Peak {
                    at_ns: end - latency,
                    value_ns: latency,
                });
            }
            histogram.record_n(20_000, 30_000 - 3 * ends.len() as u64);
            rtlab_core::rt_high_wakeup_series(
                cpu,
                &histogram,
                2 * ends.len() as u64,
                Vec::new(),
                peaks,
            )
            .unwrap()
        })
        .collect();
    let mut record = RunRecord::new("periodic", "2026-12-06T00:00:00Z", 30_000_000_000, series);
    record.config.period_ns = Some(1_000_000);
    record
}

#[test]
fn a_periodic_interferer_is_named_and_each_row_ranges_over_alignments() {
    let fixture = Fixture::new(&record_with_a_periodic_interferer(false));
    let options = "--buffers 2 --buffer 2667us --compute 1200us --chain 2";
    let json = fixture.forecast_json(&format!("{options} --json -"));
    let text = json["periodic"][0]["text"].as_str().unwrap();
    assert!(text.contains("2.6 ms every 70.0 ms on both CPUs"), "{text}");
    let alignment = &json["rows"][0]["alignment"];
    let least = alignment["least_mttf_s"].as_f64().unwrap();
    let median = alignment["median_mttf_s"].as_f64().unwrap();
    let most = alignment["most_mttf_s"].as_f64().unwrap();
    assert!(least <= median && median <= most, "{alignment}");
    assert_eq!(json["rows"][0]["mttf_s"].as_f64(), Some(median));
    let words = fixture.forecast_text(0, options);
    assert!(words.contains("periodic: an unnamed task"), "{words}");
    // 70 ms against 2.667 ms drifts a little each burst: over the run every alignment is met.
    assert!(
        words.contains("whatever the alignment of the unnamed task's bursts"),
        "{words}"
    );
}

#[test]
fn where_an_assumption_fails_the_row_says_which_instead_of_a_number() {
    let steady = Fixture::new(&record_with_a_periodic_interferer(false));
    let options = "--buffers 2 --buffer 2667us --compute 1200us --chain 2";
    let json = steady.forecast_json(&format!("{options} --app-clock stops-with-cpus --json -"));
    assert_eq!(json["rows"][0]["refused"]["assumption"], "clock-runs-on");
    assert!(json["rows"][0]["mttf_s"].is_null(), "{json}");
    let words = steady.forecast_text(0, &format!("{options} --app-clock stops-with-cpus"));
    assert!(words.contains("no number"), "{words}");
    assert!(words.contains("stops with them"), "{words}");
    let unsteady = Fixture::new(&record_with_a_periodic_interferer(true));
    let json = unsteady.forecast_json(&format!("{options} --json -"));
    assert_eq!(json["rows"][0]["refused"]["assumption"], "steady-period");
    assert!(json["rows"][0]["mttf_s"].is_null(), "{json}");
}

#[test]
fn counts_catch_up_counts_every_period_a_stall_made_late_and_says_so() {
    let fixture = Fixture::new(&record_with_a_periodic_interferer(false));
    let options = "--buffers 2 --buffer 1ms --compute 100us";
    let restart = fixture.forecast_json(&format!("{options} --json -"));
    let catch_up = fixture.forecast_json(&format!("{options} --counts catch-up --json -"));
    assert_eq!(restart["rows"][0]["basis"]["counting"], "restart");
    assert_eq!(catch_up["rows"][0]["basis"]["counting"], "catch-up");
    let median = |json: &Value| {
        json["rows"][0]["alignment"]["median_mttf_s"]
            .as_f64()
            .unwrap()
    };
    // A 2.6 ms burst past a 0.9 ms slack: one underrun restarting, about two catching up.
    assert!(
        median(&catch_up) < 0.75 * median(&restart),
        "{} vs {}",
        median(&catch_up),
        median(&restart)
    );
    let words = fixture.forecast_text(0, &format!("{options} --counts catch-up"));
    assert!(
        words.contains("one underrun per period a stall made late"),
        "{words}"
    );
}
