//! `rtlab monitor` scraped by a real Prometheus server (Debian `prometheus`; CI installs it): the
//! histogram arrives in Prometheus with its labels, and SIGTERM ends the monitor cleanly.
//!
//! The normal class needs no privilege, so the test runs with or without root.

mod common;

use common::monitor::{free_port, http_get, monitor_command};
use common::{poll, wait_for, KillOnDrop, Sandbox};
use std::process::{Command, Stdio};
use std::time::Duration;

fn query(port: u16, promql: &str) -> Option<serde_json::Value> {
    let encoded: String = promql
        .bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' => {
                (byte as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect();
    let body = http_get(port, &format!("/api/v1/query?query={encoded}"))?;
    serde_json::from_str(&body).ok()
}

#[test]
fn prometheus_scrapes_the_latency_histogram() {
    Command::new("prometheus")
        .arg("--version")
        .output()
        .expect("Prometheus is needed for this test (apt-get install prometheus)");
    let sandbox = Sandbox::new();
    let monitor_port = free_port();
    let prometheus_port = free_port();
    let monitor = KillOnDrop(
        monitor_command(&sandbox, monitor_port)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rtlab monitor"),
    );
    let config = sandbox.write(
        "prometheus.yml",
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: rtlab\n    static_configs:\n      - targets: ['127.0.0.1:{monitor_port}']\n"
        ),
    );
    let _prometheus = KillOnDrop(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                sandbox.file("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );
    let mut last_answer = None;
    let series = poll(Duration::from_secs(90), || {
        let answer = query(
            prometheus_port,
            r#"rtlab_wakeup_latency_seconds_bucket{job="rtlab",le="+Inf"}"#,
        );
        let results = answer
            .as_ref()
            .and_then(|answer| answer["data"]["result"].as_array())
            .cloned()
            .unwrap_or_default();
        last_answer = answer;
        (!results.is_empty()).then_some(results)
    })
    .unwrap_or_else(|| panic!("Prometheus never had the histogram; last answer: {last_answer:?}"));
    let cpus = rtlab_sys::cpu::online_cpus().unwrap();
    assert_eq!(series.len(), cpus.len(), "{series:?}");
    for item in &series {
        assert_eq!(item["metric"]["class"], "normal", "{item}");
        assert_eq!(item["metric"]["metric"], "wakeup", "{item}");
        let count: f64 = item["value"][1].as_str().unwrap().parse().unwrap();
        assert!(count > 0.0, "{item}");
    }
    // The quantile Grafana's dashboard plots is computable from what Prometheus stored.
    let answer = query(
        prometheus_port,
        "histogram_quantile(0.99, sum by (le, cpu) (rtlab_wakeup_latency_seconds_bucket))",
    )
    .expect("a query answer");
    assert_eq!(answer["status"], "success", "{answer}");

    // SIGTERM: the monitor stops its window and exits 0.
    let mut monitor = monitor;
    let status = Command::new("kill")
        .args(["-TERM", &monitor.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = wait_for(
        Duration::from_secs(10),
        "the monitor to exit on SIGTERM",
        || monitor.0.try_wait().unwrap(),
    );
    assert_eq!(exit.code(), Some(0));
}
