//! trace.dat fixtures captured on this machine (`test_data/capture.sh`, slimmed by
//! `test_data/tracedat/slim-v6.py`) and malformed ones (`make-err.py`): every `ok/` file is read
//! whole and shows the test program's priority inversion; every `err/` file fails with the error in
//! its `.expected` file, which names the byte offset and the section.

mod support;

use rtlab_testkit::fixture_files;

use rtlab_trace::analyze::AnalysisConfig;
use rtlab_trace::tracedat::TraceDat;
use std::path::Path;

fn fixtures(kind: &str) -> Vec<std::path::PathBuf> {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("test_data/tracedat")
        .join(kind);
    fixture_files::files_with_extension(&directory, "dat")
}

#[test]
fn every_ok_fixture_reads_whole_and_shows_the_inversion() {
    let mut formats = Vec::new();
    for path in fixtures("ok") {
        let header = support::test_header("rtlab.trace/1");
        let (report, _) =
            rtlab_trace::source::analyze_path(&path, AnalysisConfig::default(), header)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        assert!(
            report.n_events > 1000,
            "{}: {} events",
            path.display(),
            report.n_events
        );
        assert_eq!(report.lost_events, 0);
        let inversion = report
            .inversions
            .first()
            .unwrap_or_else(|| panic!("{}: no inversion", path.display()));
        assert_eq!(
            (
                inversion.high.name.as_str(),
                inversion.low.name.as_str(),
                inversion.middle[0].name.as_str()
            ),
            ("inv-high", "inv-low", "inv-mid"),
            "{}",
            path.display()
        );
        formats.push(report.source.format);
    }
    assert!(formats.contains(&"trace.dat v6".to_owned()), "{formats:?}");
    assert!(
        formats.contains(&"trace.dat v7 zstd".to_owned()),
        "{formats:?}"
    );
}

#[test]
fn every_err_fixture_names_offset_and_section() {
    for path in fixtures("err") {
        let expected = std::fs::read_to_string(path.with_extension("expected"))
            .unwrap_or_else(|_| panic!("{}: no .expected file", path.display()));
        let file = std::fs::File::open(&path).unwrap();
        let error = match TraceDat::open(file) {
            Err(error) => error,
            Ok(mut dat) => dat
                .for_each_event(|_| {})
                .expect_err(&format!("{} was read without an error", path.display())),
        };
        assert_eq!(error.to_string(), expected.trim_end(), "{}", path.display());
        assert!(error.to_string().starts_with("offset "));
    }
}

#[test]
fn the_reader_survives_every_truncation_of_a_fixture_header() {
    let bytes = std::fs::read(&fixtures("ok")[0]).unwrap();
    for length in (0..4096.min(bytes.len())).step_by(7) {
        if let Ok(mut dat) = TraceDat::open(bytes[..length].to_vec()) {
            let _ = dat.for_each_event(|_| {});
        }
    }
}
