//! Run records from files: those written by earlier rtlab versions (`test_data/run/ok`, written by
//! `rtlab run` of main at 4487fa2, before the record was typed and packed) still load, keep every
//! field through a write and a read, and come back packed; the malformed ones in
//! `test_data/run/err` are refused with an error naming the JSON path in their `.expect` file.

use rtlab_testkit::fixture_files;

use rtlab_core::{CompetitorEntry, RunRecord, ThresholdKind};
use std::path::{Path, PathBuf};

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("test_data/run")
        .join(kind);
    fixture_files::files_with_extension(&directory, "json")
}

fn load(path: &Path) -> Result<RunRecord, rtlab_core::RecordError> {
    RunRecord::from_json(&std::fs::read_to_string(path).unwrap())
}

#[test]
fn records_written_by_main_before_typing_still_load_and_round_trip() {
    for path in fixtures("ok") {
        let record = load(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let written = record.to_json_pretty();
        let back = RunRecord::from_json(&written).expect("a written record reads back");
        assert_eq!(back, record, "{}", path.display());
        // The old form wrote every peak as an object; the new one packs them.
        let old_size = std::fs::metadata(&path).unwrap().len() as usize;
        assert!(
            written.len() < old_size,
            "{}: {} ≥ {old_size}",
            path.display(),
            written.len()
        );
        assert!(written.contains("rtlab-packed/1"), "{}", path.display());
        for series in &record.series {
            assert!(series.period_ns > 0);
            assert!(
                series.tail.is_some(),
                "{}: {}",
                path.display(),
                series.label()
            );
        }
    }
}

#[test]
fn typed_parts_of_the_old_records_are_read() {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/run/ok");
    let explained = load(&directory.join("main-4487fa2-explain.json")).unwrap();
    let explain = explained.config.explain.as_ref().expect("config.explain");
    assert_eq!(explain.threshold, ThresholdKind::P999);
    assert!(explain.recorded);
    assert_eq!(explain.provisional_threshold_ns.len(), 6);
    let trace = explained
        .config
        .explain_trace
        .as_ref()
        .expect("explain_trace");
    assert_eq!(trace.event_set, "standard");
    assert!(trace.markers > 0);
    assert!(!explained.episodes.is_empty());

    let loaded = load(&directory.join("main-4487fa2-load.json")).unwrap();
    assert_eq!(loaded.config.period_ns, Some(1_000_000));
    let load = loaded.load.as_ref().expect("load");
    assert!(load.started);
    assert_eq!(load.profile.as_ref().unwrap().name, "office");
    assert_eq!(load.usage.hours_per_day, 8.0);
    assert_eq!(load.stressors.len(), 5);
    assert_eq!(load.command.as_ref().unwrap().cmd, "sleep 30");
    assert!(matches!(load.competitors[0], CompetitorEntry::Ran(_)));
    assert!(load
        .softirqs_during_load
        .as_ref()
        .unwrap()
        .contains_key("TIMER"));
}

#[test]
fn malformed_records_are_refused_naming_the_path() {
    for path in fixtures("err") {
        let expected = std::fs::read_to_string(path.with_extension("expect")).unwrap();
        let error = load(&path)
            .expect_err(&path.display().to_string())
            .to_string();
        assert!(
            error.contains(expected.trim()),
            "{}: {error}\nexpected: {}",
            path.display(),
            expected.trim()
        );
    }
}
