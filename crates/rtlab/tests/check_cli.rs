//! `rtlab check` end to end: textbook task sets with known answers, the OS latency of a run
//! folded in, and malformed files.

mod common;

use common::{assert_input_error, stdout_json, stdout_text, Sandbox};
use rtlab_core::LatencyHistogram;
use serde_json::Value;
use std::path::PathBuf;

fn fifo_set(sandbox: &Sandbox, name: &str, tasks: &[(&str, &str, &str, u32)]) -> PathBuf {
    let mut text = String::new();
    for (task, compute, period, priority) in tasks {
        text.push_str(&format!(
            "[[task]]\nname = \"{task}\"\nperiod = \"{period}\"\ncompute = \"{compute}\"\npriority = {priority}\n\n"
        ));
    }
    sandbox.write(name, text)
}

/// Buttazzo's three-task example: R = 1, 3 and 10 ms with nothing else on the CPU.
fn buttazzo_set(sandbox: &Sandbox) -> PathBuf {
    fifo_set(
        sandbox,
        "set.toml",
        &[
            ("t1", "1ms", "4ms", 30),
            ("t2", "2ms", "6ms", 20),
            ("t3", "3ms", "10ms", 10),
        ],
    )
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
    let sandbox = Sandbox::new();
    let set = buttazzo_set(&sandbox);
    let output = sandbox.run_expecting(0, ["check", set.to_str().unwrap(), "--json", "-"]);
    let json = stdout_json(&output);
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
    let sandbox = Sandbox::new();
    let set = fifo_set(
        &sandbox,
        "set.toml",
        &[
            ("a", "10ms", "30ms", 3),
            ("b", "10ms", "40ms", 2),
            ("c", "12ms", "50ms", 1),
        ],
    );
    let output = sandbox.run_expecting(1, ["check", set.to_str().unwrap()]);
    let text = stdout_text(&output);
    assert!(text.contains("NOT schedulable"), "{text}");
    assert_eq!(
        text.matches(" schedulable").count() - text.matches("NOT schedulable").count(),
        2,
        "{text}"
    );
}

#[test]
fn measured_latency_is_folded_in_as_the_pseudo_worst_case() {
    let sandbox = Sandbox::new();
    let mut histogram = LatencyHistogram::new();
    histogram.record_n(1_000_000, 100_000);
    let run = sandbox.write_record(
        "run.json",
        &common::rt_high_wakeup_record("check-test", 100_000_000_000, &[(0, &histogram)]),
    );
    let set = buttazzo_set(&sandbox);
    // 1 ms of OS latency on every task: t3 no longer fits (w reaches 10 ms, R = 11 ms > 10 ms).
    let output = sandbox.run_expecting(
        1,
        [
            "check",
            set.to_str().unwrap(),
            "--run",
            run.to_str().unwrap(),
            "--miss-rate",
            "1/hour",
            "--json",
            "-",
        ],
    );
    let json = stdout_json(&output);
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
    let sandbox = Sandbox::new();
    let set = sandbox.write(
        "set.toml",
        "[[task]]\nname = \"a\"\nperiod = \"5ms\"\ncompute = \"2ms\"\nreservation = { runtime = \"2ms\", period = \"5ms\" }\n\n[[task]]\nname = \"b\"\nperiod = \"7ms\"\ncompute = \"4ms\"\nreservation = { runtime = \"4ms\", period = \"7ms\" }\n",
    );
    // U = 0.971: EDF can, Linux's 95 % admission cannot.
    sandbox.run_expecting(1, ["check", set.to_str().unwrap()]);
    sandbox.run_expecting(
        0,
        ["check", set.to_str().unwrap(), "--reservation-limit", "100"],
    );
}

#[test]
fn invalid_files_name_the_line_and_field() {
    let sandbox = Sandbox::new();
    let set = sandbox.write(
        "bad.toml",
        "[[task]]\nname = \"a\"\nperiod = \"5\"\ncompute = \"1ms\"\npriority = 9\n",
    );
    assert_input_error(
        &sandbox.run(["check", set.to_str().unwrap()]),
        "bad.toml: line 3: task 'a': field 'period'",
    );
    sandbox.write(
        "bad.toml",
        "[[task]]\nname = \"a\"\nperiod = \"5ms\"\ncompute = \"1ms\"\npriority = \"high\"\n",
    );
    assert_input_error(&sandbox.run(["check", set.to_str().unwrap()]), "line 5");
}
