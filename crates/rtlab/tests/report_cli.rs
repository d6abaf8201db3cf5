//! `rtlab report --html`: the file is written, self-contained, and renders in a real browser.
//!
//! The rendering test needs Chromium (Debian `chromium`; CI installs it) and fails, naming the
//! package, where it is missing.

mod common;

use common::Sandbox;
use std::path::Path;
use std::process::Command;

fn fixture() -> String {
    format!(
        "{}/../rtlab-render/test_data/records/vm-5s.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn the_report_of_two_runs_is_one_self_contained_file() {
    let sandbox = Sandbox::new();
    let html = sandbox.file("report.html");
    sandbox.run_expecting(
        0,
        [
            "report",
            &fixture(),
            &fixture(),
            "--html",
            html.to_str().unwrap(),
        ],
    );
    let text = std::fs::read_to_string(&html).unwrap();
    assert_eq!(text.matches("<h2>Run ").count(), 2);
    assert!(!text.contains("<script"));
    assert!(!text.contains("<link"));

    let output = sandbox.run_expecting(
        2,
        ["report", "no-such-run", "--html", html.to_str().unwrap()],
    );
    assert!(common::stderr_text(&output).contains("no-such-run"));
}

#[test]
fn the_report_renders_in_headless_chromium() {
    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .output()
                .is_ok_and(|output| output.status.success())
        })
        .expect("Chromium is needed to render the report (apt-get install chromium)");
    let sandbox = Sandbox::new();
    let html = sandbox.file("report.html");
    sandbox.run_expecting(0, ["report", &fixture(), "--html", html.to_str().unwrap()]);
    let png = sandbox.file("report.png");
    let output = Command::new(chromium)
        .env("HOME", sandbox.path())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1360,2400",
        ])
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("start chromium");
    assert!(
        output.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let bytes = std::fs::read(&png).unwrap_or_else(|error| panic!("{}: {error}", png.display()));
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // A blank page compresses to a few kilobytes; tables and plots take far more.
    assert!(
        bytes.len() > 100_000,
        "the screenshot is nearly empty ({} bytes)",
        bytes.len()
    );
    if let Ok(directory) = std::env::var("RTLAB_KEEP_SCREENSHOT") {
        std::fs::copy(&png, Path::new(&directory).join("report.png")).unwrap();
    }
}
