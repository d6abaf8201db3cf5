//! The Done-when of `rtlab trace`: a program with a known structure (`tests/programs/trace_demo.rs`:
//! a periodic pipeline, a priority inversion with three priorities, a two-thread deadlock, a
//! starved thread), recorded live through both recorders (BPF and tracefs) and through trace-cmd,
//! analysed.
//!
//! Root-only (SCHED_FIFO, tracefs, BPF): marked `ignore = "needs root and tracefs"` (or `BPF`); CI runs them as
//! root with `--include-ignored`; run that way without root they fail.

mod support;

use rtlab_trace::analyze::AnalysisConfig;
use rtlab_trace::file::{FileHeader, TraceFile};
use rtlab_trace::record::{record, RecordConfig, RecorderChoice, Target};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Records the test program live through `recorder` and checks the Done-when answers.
fn live_recording_recovers_the_known_structure(recorder: RecorderChoice) {
    // The test program pins RT threads to CPUs 0 and 1: two at once would disturb each other.
    let _one_at_a_time = rtlab_testkit::require_root_and_tracefs_taking_turns();
    let demo = support::demo_binary();
    let config = RecordConfig {
        target: Target::Command(vec![
            demo.display().to_string(),
            "--seconds".into(),
            "2".into(),
        ]),
        // The deadlocked pair is still blocked when the recording ends (and the program killed).
        duration: Some(Duration::from_millis(3000)),
        recorder,
        ..RecordConfig::default()
    };
    let file_header = FileHeader {
        header: support::test_header(rtlab_trace::file::SCHEMA),
        target: config.target.describe(),
        clock: "mono".into(),
        events: vec![],
        recorder: None,
    };
    let stop = AtomicBool::new(false);
    let (bytes, summary) = record(&config, Vec::new(), file_header, &stop, |_| {}).unwrap();
    assert_eq!(summary.recorder, recorder.name(), "{summary:?}");
    assert!(!summary.interrupted);
    assert!(summary.owners_found >= 2, "{summary:?}");
    assert!(summary
        .enabled_events
        .contains(&"syscalls:sys_enter_futex".to_owned()));
    let name = format!("rtlab-{}-apptrace", std::process::id());
    assert!(!std::path::Path::new("/sys/kernel/tracing/instances")
        .join(name)
        .exists());
    let file = TraceFile::open(&bytes[..]).unwrap();
    assert_eq!(file.header.recorder.as_deref(), Some(recorder.name()));
    // Analysed as `rtlab trace analyze` does.
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("demo.rtrace");
    std::fs::write(&path, &bytes).unwrap();
    let (report, _) = rtlab_trace::source::analyze_path(
        &path,
        AnalysisConfig::default(),
        support::test_header("rtlab.trace/1"),
    )
    .unwrap();
    assert_eq!(report.lost_events, 0);
    assert!(
        !report
            .warnings
            .iter()
            .any(|warning| warning.contains("cut short")),
        "{:?}",
        report.warnings
    );
    support::check_known_structure(&report, true);
    assert_eq!(support::thread(&report, "pipe-src").policy, "SCHED_FIFO");
    assert!(support::thread(&report, "pipe-src").target);
}

#[test]
#[ignore = "needs root and tracefs"]
fn a_live_tracefs_recording_recovers_periods_wakers_the_inversion_and_the_deadlock_cycle() {
    live_recording_recovers_the_known_structure(RecorderChoice::Tracefs);
}

#[test]
#[ignore = "needs root and BPF"]
fn a_live_bpf_recording_recovers_periods_wakers_the_inversion_and_the_deadlock_cycle() {
    live_recording_recovers_the_known_structure(RecorderChoice::Bpf);
}

#[test]
#[ignore = "needs root and tracefs"]
fn a_trace_cmd_trace_dat_of_the_same_program_gives_the_same_analysis() {
    // The test program pins RT threads to CPUs 0 and 1: two at once would disturb each other.
    let _one_at_a_time = rtlab_testkit::require_root_and_tracefs_taking_turns();
    assert!(
        std::process::Command::new("trace-cmd")
            .arg("--version")
            .output()
            .is_ok(),
        "this test needs trace-cmd (apt-get install trace-cmd)"
    );
    let demo = support::demo_binary();
    let directory = tempfile::tempdir().unwrap();
    let dat = directory.path().join("demo.dat");
    let status =
        std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/test_data/capture.sh"))
            .arg(&dat)
            .arg(&demo)
            .args(["--seconds", "2"])
            // One extract at the end, so the ring must hold the whole run: under
            // `stress-ng --cpu 2 --io 1` this VM's CPU 1 alone makes ~650k events in 3 s, which
            // overran the default 4 MiB and left the demo's threads without their early events.
            .env("BUFFER_KB", "65536")
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
    assert!(status.success());
    let (report, _) = rtlab_trace::source::analyze_path(
        &dat,
        AnalysisConfig::default(),
        support::test_header("rtlab.trace/1"),
    )
    .unwrap();
    assert!(
        report.source.format.starts_with("trace.dat v7"),
        "{:?}",
        report.source
    );
    assert_eq!(
        report.lost_events, 0,
        "the capture's ring overran: the trace misses events"
    );
    // Without the process's memory the owners are unknown: the pair is found hung together.
    support::check_known_structure(&report, false);
}
