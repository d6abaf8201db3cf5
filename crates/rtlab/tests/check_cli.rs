//! `rtlab check` end to end: textbook task sets with known answers, the OS latency of a run
//! folded in, and malformed files.

use rtlab_core::{LatencyHistogram, Metric, RunRecord};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn rtlab(home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rtlab"));
    command.env("RTLAB_HOME", home);
    command
}

fn fifo_set(directory: &Path, name: &str, tasks: &[(&str, &str, &str, u32)]) -> PathBuf {
    let mut text = String::new();
    for (task, compute, period, priority) in tasks {
        text.push_str(&format!(
            "[[task]]\nname = \"{task}\"\nperiod = \"{period}\"\ncompute = \"{compute}\"\npriority = {priority}\n\n"
        ));
    }
    let path = directory.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn responses(json: &Value) -> Vec<Value> {
    json["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|task| task["response_ns"].clone())
        .collect()
}

#[test]
fn buttazzo_set_is_schedulable_with_known_response_times() {
    let directory = tempfile::tempdir().unwrap();
    let set = fifo_set(
        directory.path(),
        "set.toml",
        &[
            ("t1", "1ms", "4ms", 30),
            ("t2", "2ms", "6ms", 20),
            ("t3", "3ms", "10ms", 10),
        ],
    );
    let output = rtlab(directory.path())
        .args(["check", set.to_str().unwrap(), "--json", "-"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["schema"], "rtlab.check/1");
    assert_eq!(json["schedulable"], true);
    assert_eq!(
        responses(&json),
        vec![
            Value::from(1_000_000),
            Value::from(3_000_000),
            Value::from(10_000_000)
        ]
    );
}

#[test]
fn burns_wellings_set_fails_with_exit_one() {
    let directory = tempfile::tempdir().unwrap();
    let set = fifo_set(
        directory.path(),
        "set.toml",
        &[
            ("a", "10ms", "30ms", 3),
            ("b", "10ms", "40ms", 2),
            ("c", "12ms", "50ms", 1),
        ],
    );
    let output = rtlab(directory.path())
        .args(["check", set.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("NOT schedulable"), "{text}");
    assert_eq!(
        text.matches(" schedulable").count() - text.matches("NOT schedulable").count(),
        2,
        "{text}"
    );
}

#[test]
fn measured_latency_is_folded_in_as_the_pseudo_worst_case() {
    let directory = tempfile::tempdir().unwrap();
    let mut histogram = LatencyHistogram::new();
    histogram.record_n(1_000_000, 100_000);
    let series = RunRecord::series_from_histogram(
        Metric::Wakeup,
        "rt-high",
        0,
        "SCHED_FIFO",
        90,
        1_000_000,
        &histogram,
        0,
        0,
        vec![],
        vec![],
    )
    .unwrap();
    let record = RunRecord::new(
        "check-test",
        "2026-01-01T00:00:00Z",
        100_000_000_000,
        vec![series],
    );
    let run = directory.path().join("run.json");
    std::fs::write(&run, record.to_json_pretty()).unwrap();
    let set = fifo_set(
        directory.path(),
        "set.toml",
        &[
            ("t1", "1ms", "4ms", 30),
            ("t2", "2ms", "6ms", 20),
            ("t3", "3ms", "10ms", 10),
        ],
    );
    let output = rtlab(directory.path())
        .args([
            "check",
            set.to_str().unwrap(),
            "--run",
            run.to_str().unwrap(),
            "--miss-rate",
            "1/hour",
            "--json",
            "-",
        ])
        .output()
        .unwrap();
    // 1 ms of OS latency on every task: t3 no longer fits (w reaches 10 ms, R = 11 ms > 10 ms).
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let tasks = json["tasks"].as_array().unwrap();
    assert_eq!(tasks[2]["schedulable"], false);
    assert_eq!(tasks[0]["schedulable"], true);
    // 1/hour at 4 ms is finer than 10^5 samples resolve: the observed maximum stands in, flagged.
    assert_eq!(tasks[0]["os_latency"]["basis"], "observed_maximum");
    assert!(tasks[0]["note"]
        .as_str()
        .unwrap()
        .contains("finer than the run resolves"));
    assert_eq!(json["run_id"], "check-test");
}

#[test]
fn reservations_use_the_edf_demand_test() {
    let directory = tempfile::tempdir().unwrap();
    let set = directory.path().join("set.toml");
    std::fs::write(
        &set,
        "[[task]]\nname = \"a\"\nperiod = \"5ms\"\ncompute = \"2ms\"\nreservation = { runtime = \"2ms\", period = \"5ms\" }\n\n[[task]]\nname = \"b\"\nperiod = \"7ms\"\ncompute = \"4ms\"\nreservation = { runtime = \"4ms\", period = \"7ms\" }\n",
    )
    .unwrap();
    // U = 0.971: EDF can, Linux's 95 % admission cannot.
    let output = rtlab(directory.path())
        .args(["check", set.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let output = rtlab(directory.path())
        .args(["check", set.to_str().unwrap(), "--reservation-limit", "100"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn invalid_files_name_the_line_and_field() {
    let directory = tempfile::tempdir().unwrap();
    let set = directory.path().join("bad.toml");
    std::fs::write(
        &set,
        "[[task]]\nname = \"a\"\nperiod = \"5\"\ncompute = \"1ms\"\npriority = 9\n",
    )
    .unwrap();
    let output = rtlab(directory.path())
        .args(["check", set.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bad.toml: line 3: task 'a': field 'period'"),
        "{stderr}"
    );
    std::fs::write(
        &set,
        "[[task]]\nname = \"a\"\nperiod = \"5ms\"\ncompute = \"1ms\"\npriority = \"high\"\n",
    )
    .unwrap();
    let output = rtlab(directory.path())
        .args(["check", set.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("line 5"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
