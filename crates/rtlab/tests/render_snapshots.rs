//! Snapshot tests of every terminal renderer (`crates/rtlab/src/render/`), through the binary on
//! fixed inputs: Run records written by an earlier rtlab (`rtlab-core/test_data/run/ok`), a task
//! set and a request file. A change to what users read shows up as a snapshot diff to review
//! (`cargo insta review`, or `INSTA_UPDATE=always` and `git diff`).

mod common;

use common::{stdout_text, Sandbox};
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../rtlab-core/test_data/run/ok")
        .join(name)
        .display()
        .to_string()
}

/// stdout of `rtlab ARGS` (exit code `code`), with the fixture directory's path made stable.
fn render(code: i32, args: &[&str]) -> String {
    let sandbox = Sandbox::new();
    let output = sandbox.command().args(args).output().expect("rtlab runs");
    assert_eq!(
        output.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout_text(&output).replace(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .display()
            .to_string(),
        "<crates>",
    )
}

#[test]
fn run_summary_with_tails_and_warnings() {
    insta::assert_snapshot!(render(0, &["show", &fixture("main-4487fa2-plain.json")]));
}

#[test]
fn run_summary_with_its_load() {
    insta::assert_snapshot!(render(0, &["show", &fixture("main-4487fa2-load.json")]));
}

/// Every line of `text` fits an 80-column terminal.
fn assert_fits_80_columns(text: &str) {
    for line in text.lines() {
        assert!(
            line.chars().count() <= 80,
            "{} columns: {line}",
            line.chars().count()
        );
    }
}

#[test]
fn explain_report() {
    let text = render(
        0,
        &[
            "explain",
            &fixture("main-4487fa2-explain.json"),
            "--worst",
            "3",
        ],
    );
    assert_fits_80_columns(&text);
    insta::assert_snapshot!(text);
}

#[test]
fn explain_report_with_a_fixed_threshold_and_a_stack() {
    let sandbox = Sandbox::new();
    let mut record = rtlab_core::RunRecord::new(
        "0123456789abcdef",
        "2026-01-01T00:00:00Z",
        3_000_000_000,
        vec![common::minimal_series()],
    );
    record.config.explain = Some(rtlab_core::ExplainSettings {
        threshold: rtlab_core::ThresholdKind::Fixed,
        explain_above_ns: Some(100_000),
        provisional_threshold_ns: Default::default(),
        recorded: true,
        recorder: None,
        lost_events: 0,
        episodes_not_kept: 0,
        summarised_causes: Vec::new(),
    });
    let cause = |kind, name: &str, ns| rtlab_core::Cause {
        kind,
        name: name.into(),
        pid: Some(7),
        ns,
        detail: None,
    };
    let episode = |at_ns, latency_ns, causes, stack| rtlab_core::Episode {
        series: "rt-high/wakeup@0".into(),
        cpu: 0,
        at_ns,
        latency_ns,
        causes,
        steal_ns: Some(0),
        stack,
        timeline: Vec::new(),
    };
    record.episodes = vec![
        episode(
            1_000_000_000,
            150_000,
            vec![
                cause(rtlab_core::CauseKind::Irq, "virtio0", 100_000),
                cause(rtlab_core::CauseKind::Unaccounted, "unaccounted", 50_000),
            ],
            None,
        ),
        episode(
            2_000_000_000,
            2_000_000,
            vec![cause(rtlab_core::CauseKind::Task, "spin95", 2_000_000)],
            Some(vec!["spin95 [7]".into(), "0x401000 (user)".into()]),
        ),
    ];
    let path = sandbox.write_record("explained.json", &record);
    let text = render(0, &["explain", path.to_str().unwrap()]);
    assert_fits_80_columns(&text);
    insta::assert_snapshot!(text);
}

#[test]
fn forecast_for_every_class() {
    insta::assert_snapshot!(render(
        0,
        &["forecast", &fixture("main-4487fa2-plain.json")]
    ));
}

#[test]
fn forecast_of_one_configuration_with_its_table() {
    insta::assert_snapshot!(render(
        0,
        &[
            "forecast",
            &fixture("main-4487fa2-plain.json"),
            "--buffer",
            "4ms",
            "--buffers",
            "3",
            "--compute",
            "1ms",
            "--target",
            "1/hour"
        ]
    ));
}

#[test]
fn check_table_with_a_run() {
    let sandbox = Sandbox::new();
    let set = sandbox.write(
        "set.toml",
        "[[task]]\nname = \"control\"\nperiod = \"1ms\"\ncompute = \"200us\"\npriority = 80\n\n\
         [[task]]\nname = \"logger\"\nperiod = \"10ms\"\ncompute = \"3ms\"\npriority = 10\n",
    );
    // The fixture's VM run has multi-millisecond hiccups: the logger misses (exit 1).
    insta::assert_snapshot!(render(
        1,
        &[
            "check",
            set.to_str().unwrap(),
            "--run",
            &fixture("main-4487fa2-plain.json")
        ]
    ));
}

#[test]
fn plan_text() {
    let sandbox = Sandbox::new();
    let requests = sandbox.write(
        "requests.txt",
        "# a mixer, a decoder and one too many\nmixer 1ms/16ms\ndecoder 3ms/10ms\nhog 9ms/10ms\n",
    );
    insta::assert_snapshot!(render(
        1,
        &["plan", "--cpus", "1", requests.to_str().unwrap()]
    ));
}
