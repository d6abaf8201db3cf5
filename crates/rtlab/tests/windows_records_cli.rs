//! Records written by `rtlab.exe` (cross-built for x86_64-pc-windows-gnu, run under Wine by
//! `.ci/windows-smoke`) read in the Linux build: they validate, show, forecast, compare and
//! report like any Linux record. The fixtures in `test_data/windows` were produced by `wine rtlab.exe run --duration 3s --period 2ms --json -` and
//! `wine rtlab.exe timers -D 3s --intervals 2ms --json -`.

mod common;

use common::{assert_exit_code, read_record, stdout_text, Sandbox};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("test_data/windows")
        .join(name)
}

#[test]
fn a_windows_run_record_loads_with_its_windows_host_facts() {
    let record = read_record(&fixture("wine-run.json"));
    record.validate().expect("valid");
    let windows = record.host.windows.as_ref().expect("a Windows host part");
    assert!(windows.wine.is_some(), "made under Wine");
    assert!(windows.timer_resolution_ns.is_some());
    let classes: Vec<&str> = record.config.classes.iter().map(String::as_str).collect();
    assert_eq!(classes, ["rt-high", "mmcss", "normal"]);
    assert!(record
        .warnings
        .iter()
        .any(|warning| warning.contains("under Wine")));
}

#[test]
fn show_forecast_and_compare_read_a_windows_run() {
    let sandbox = Sandbox::new();
    let record = fixture("wine-run.json");
    let record = record.to_str().unwrap();
    let shown = sandbox.run(["show", record]);
    assert_exit_code(&shown, 0);
    let text = stdout_text(&shown);
    assert!(text.contains("under Wine"), "{text}");
    assert!(text.contains("mmcss"), "{text}");

    let forecast = sandbox.run(["forecast", record]);
    assert_exit_code(&forecast, 0);
    let text = stdout_text(&forecast);
    assert!(text.contains("series rt-high/wakeup"), "{text}");
    assert!(text.contains("pro-audio"), "{text}");

    let compared = sandbox.run(["compare", record, record]);
    assert_exit_code(&compared, 0);
    assert!(stdout_text(&compared).contains("verdict"));
}

#[test]
fn report_takes_a_windows_run() {
    let sandbox = Sandbox::new();
    let record = fixture("wine-run.json");
    let html = sandbox.file("report.html");
    let report = sandbox.run([
        "report",
        "--html",
        html.to_str().unwrap(),
        record.to_str().unwrap(),
    ]);
    assert_exit_code(&report, 0);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("mmcss"));
}

#[test]
fn a_windows_timer_study_shows_in_the_linux_build() {
    let sandbox = Sandbox::new();
    let study = fixture("wine-timers.json");
    let record = read_record(&study);
    let timers = record.timers.as_ref().expect("a timer study");
    for api in [
        "Sleep",
        "WaitForSingleObject",
        "SetWaitableTimer",
        "timeSetEvent",
    ] {
        assert!(
            timers
                .rows
                .iter()
                .any(|row| row.api == api && row.count > 0),
            "{api} measured"
        );
    }
    let shown = sandbox.run(["show", study.to_str().unwrap()]);
    assert_exit_code(&shown, 0);
    assert!(stdout_text(&shown).contains("timeSetEvent"));
}
