//! Shared by the apptrace tests: the test program `trace_demo` (a binary of this crate),
//! lookups in an analysis, and the output header an analysis is given.

#![allow(dead_code)]

use rtlab_core::header::OutputHeader;
use rtlab_trace::analyze::report::{ThreadRow, TraceReport};
use std::path::PathBuf;

/// The test program `tests/programs/trace_demo.rs`. A binary of this crate, so cargo builds it with the
/// tests, with their features, and says where (`CARGO_BIN_EXE_trace_demo`). As an example it was
/// built here by `cargo build --example`, whose features differ from the workspace's test build:
/// that rebuilt most of the tree inside the first test that ran it (44 s of a CI run's tests).
pub fn demo_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_trace_demo"))
}

pub fn thread<'a>(report: &'a TraceReport, name: &str) -> &'a ThreadRow {
    report
        .threads
        .iter()
        .filter(|row| row.name == name)
        .max_by_key(|row| row.activations)
        .unwrap_or_else(|| panic!("no thread {name} in the analysis"))
}

/// Checks what the test program's structure must give, from any recording of it.
pub fn check_known_structure(report: &TraceReport, deadlock_is_cycle: bool) {
    for (name, period_ms) in [
        ("pipe-src", 10.0),
        ("pipe-mid", 10.0),
        ("pipe-sink", 10.0),
        ("ui", 45.0),
        ("inv-low", 250.0),
        ("inv-mid", 250.0),
        ("inv-high", 250.0),
        ("starved", 20.0),
    ] {
        let row = thread(report, name);
        let period =
            row.period_ns
                .unwrap_or_else(|| panic!("{name}: no period found ({row:?})")) as f64
                / 1e6;
        assert!(
            (period - period_ms).abs() <= period_ms * 0.05,
            "{name}: period {period} ms, expected {period_ms} ms ± 5 %"
        );
    }
    assert_eq!(thread(report, "pipe-mid").wakers[0].name, "pipe-src");
    assert_eq!(thread(report, "pipe-sink").wakers[0].name, "pipe-mid");
    assert!(thread(report, "pipe-src")
        .wakes
        .iter()
        .any(|woken| woken.name == "pipe-mid"));
    assert_eq!(thread(report, "pipe-src").priority, 20);
    assert_eq!(thread(report, "inv-high").priority, 30);
    let inversions: Vec<_> = report
        .inversions
        .iter()
        .filter(|inversion| {
            inversion.high.name == "inv-high"
                && inversion.low.name == "inv-low"
                && inversion
                    .middle
                    .first()
                    .is_some_and(|middle| middle.name == "inv-mid")
        })
        .collect();
    assert!(
        inversions.len() >= 3,
        "inversions: {:#?}",
        report.inversions
    );
    for inversion in &inversions {
        assert!(inversion.middle[0].ns > 10_000_000, "{inversion:?}");
        assert_eq!(
            (
                inversion.high.priority,
                inversion.low.priority,
                inversion.middle[0].priority
            ),
            (30, 10, 20)
        );
    }
    let pair = report
        .hangs
        .iter()
        .find(|hang| {
            let names: Vec<&str> = hang
                .threads
                .iter()
                .map(|thread| thread.name.as_str())
                .collect();
            names.contains(&"dead-a") && names.contains(&"dead-b")
        })
        .unwrap_or_else(|| panic!("no hang with dead-a and dead-b: {:#?}", report.hangs));
    if deadlock_is_cycle {
        assert!(pair.cycle, "{pair:?}");
        assert_eq!(pair.threads.len(), 2, "{pair:?}");
        let a = pair
            .threads
            .iter()
            .find(|thread| thread.name == "dead-a")
            .unwrap();
        let b = pair
            .threads
            .iter()
            .find(|thread| thread.name == "dead-b")
            .unwrap();
        assert_eq!((a.owner, b.owner), (Some(b.tid), Some(a.tid)));
    }
    let starved = report
        .starvation
        .iter()
        .find(|starved| starved.thread.name == "starved")
        .unwrap_or_else(|| {
            panic!(
                "starved not found ({} events lost): {:#?}\n{:#?}",
                report.lost_events,
                thread(report, "starved"),
                report.starvation
            )
        });
    // The hog ran most of that time (other RT work on a shared machine may have run too).
    let hog = starved
        .ran
        .iter()
        .find(|ran| ran.name == "hog")
        .unwrap_or_else(|| panic!("{starved:?}, {} events lost", report.lost_events));
    assert!(hog.ns >= 200_000_000, "{starved:?}");
}

/// The output header of a test's analysis, with `schema`.
pub fn test_header(schema: &str) -> OutputHeader {
    OutputHeader {
        schema: schema.into(),
        tool_version: "test".into(),
        cmdline: vec![],
        started_at: "2026-01-01T00:00:00Z".into(),
        host: None,
    }
}
