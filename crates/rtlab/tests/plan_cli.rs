//! `rtlab plan` end to end: text and JSON output, the JSON shape, denials and exit codes, line-numbered
//! errors, `-` for standard output, and a file of thousands of requests.

use assert_cmd::Command;
use predicates::prelude::*;
use std::io::Write as _;

fn rtlab() -> Command {
    Command::cargo_bin("rtlab").expect("rtlab binary")
}

/// The keys of the JSON object `value` (what it is, for the panic message) in sorted order.
fn sorted_keys<'a>(value: &'a serde_json::Value, what: &str) -> Vec<&'a str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap_or_else(|| panic!("{what} is not an object: {value}"))
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

fn request_file(text: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(text.as_bytes()).expect("write requests");
    file
}

#[test]
fn text_output_lists_grants_and_timeline() {
    let file = request_file("# audio\ndecoder 1ms/16ms\nmixer 500us/10ms\n");
    rtlab()
        .args(["plan", "--cpus", "1"])
        .arg(file.path())
        .assert()
        .success()
        .stdout(predicate::str::contains("2 requests on 1 CPUs"))
        .stdout(predicate::str::contains("decoder"))
        .stdout(predicate::str::contains("1ms/16ms"))
        .stdout(predicate::str::contains("cpu 0: cycle 16ms"));
}

#[test]
fn json_to_stdout_has_the_documented_shape() {
    let file = request_file("decoder 1ms/16ms\nmixer 500us/10ms\nhog 900ms/1s\n");
    let output = rtlab()
        .args([
            "plan",
            "--cpus",
            "2",
            "--quantum",
            "1ms",
            "--cap",
            "0.9",
            "--json",
            "-",
        ])
        .arg(file.path())
        .output()
        .expect("runs");
    // One request does not fit: exit 1, the JSON still complete on stdout.
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("stdout is only JSON");
    let top: Vec<&str> = json
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        top,
        vec![
            "cap",
            "cmdline",
            "cpus",
            "denied",
            "grants",
            "n_cpus",
            "quantum_ns",
            "requests",
            "schema",
            "started_at",
            "tool_version"
        ]
    );
    assert_eq!(json["schema"], "rtlab.plan/1");
    let grants = json["grants"].as_array().expect("grants");
    assert_eq!(grants.len(), 2);
    let decoder = &grants[0];
    assert_eq!(
        sorted_keys(decoder, "grant"),
        vec!["cpu", "granted", "incremental", "owner", "requested"]
    );
    assert_eq!(decoder["owner"], "decoder");
    assert_eq!(decoder["requested"]["amount_ns"], 1_000_000);
    assert_eq!(decoder["requested"]["period_ns"], 16_000_000);
    assert_eq!(decoder["granted"]["period_ns"], 16_000_000);
    assert_eq!(decoder["incremental"], true);
    let denied = json["denied"].as_array().expect("denied");
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["owner"], "hog");
    assert!(denied[0]["reason"]
        .as_str()
        .expect("reason")
        .contains("line 3"));
    let cpus = json["cpus"].as_array().expect("cpus");
    assert_eq!(cpus.len(), 2);
    for cpu in cpus {
        assert_eq!(
            sorted_keys(cpu, "cpu"),
            vec!["cpu", "cycle_ns", "reserved_ppm", "slots"]
        );
        for slot in cpu["slots"].as_array().expect("slots") {
            assert_eq!(
                sorted_keys(slot, "slot"),
                vec!["length_ns", "owner", "start_ns"]
            );
        }
    }
    let busy: u64 = cpus
        .iter()
        .flat_map(|cpu| cpu["slots"].as_array().expect("slots").iter())
        .map(|slot| slot["length_ns"].as_u64().expect("length"))
        .sum();
    assert!(busy > 0);
}

#[test]
fn json_to_a_file_keeps_text_on_stdout() {
    let file = request_file("a 1ms/4ms\n");
    let directory = tempfile::tempdir().expect("temp dir");
    let out = directory.path().join("plan.json");
    rtlab()
        .args(["plan", "--cpus", "1", "--json"])
        .arg(&out)
        .arg(file.path())
        .assert()
        .success()
        .stdout(predicate::str::contains("Granted"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out).expect("written")).expect("valid JSON");
    assert_eq!(json["grants"][0]["owner"], "a");
    assert_eq!(json["cpus"][0]["slots"][0]["length_ns"], 1_000_000);
}

#[test]
fn malformed_line_is_an_input_error_naming_file_and_line() {
    let file = request_file("ok 1ms/16ms\n\nbroken 1ms\n");
    rtlab()
        .args(["plan", "--cpus", "1"])
        .arg(file.path())
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("line 3: rate '1ms' has no '/'"))
        .stderr(predicate::str::contains(
            file.path().to_string_lossy().as_ref(),
        ));
}

#[test]
fn bad_flags_and_missing_files_are_input_errors() {
    let file = request_file("a 1ms/4ms\n");
    for (flag, value) in [
        ("--cap", "1.5"),
        ("--quantum", "0ms"),
        ("--quantum", "10"),
        ("--cpus", "0"),
    ] {
        rtlab()
            .args(["plan", flag, value])
            .arg(file.path())
            .assert()
            .code(2)
            .stderr(predicate::str::contains(flag));
    }
    rtlab()
        .args(["plan", "/nonexistent/requests.txt"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("/nonexistent/requests.txt"));
    rtlab()
        .args(["plan", "--json", "/nonexistent/dir/out.json"])
        .arg(file.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--json: cannot write /nonexistent/dir/out.json",
        ));
}

#[test]
fn reads_requests_from_stdin() {
    rtlab()
        .args(["plan", "--cpus", "1", "-"])
        .write_stdin("x 2ms/8ms\n")
        .assert()
        .success()
        .stdout(predicate::str::contains("x"));
}

#[test]
fn plans_thousands_of_requests() {
    let mut text = String::from("# generated: identical and mixed requests\n");
    for index in 0..3_000 {
        let period_ms = [16, 20, 33, 100, 1000][index % 5];
        text.push_str(&format!("t{index} 100us/{period_ms}ms\n"));
    }
    let file = request_file(&text);
    let output = rtlab()
        .args(["plan", "--cpus", "16", "--json", "-"])
        .arg(file.path())
        .output()
        .expect("runs");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let granted = json["grants"].as_array().expect("grants").len();
    let denied = json["denied"].as_array().expect("denied").len();
    assert_eq!(granted + denied, 3_000);
    assert!(granted > 2_000, "only {granted} granted");
    assert_eq!(output.status.code(), Some(if denied == 0 { 0 } else { 1 }));
}
