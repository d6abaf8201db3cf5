//! Data-driven tests of the request-file parser: every file under `test_data/plan/ok/` parses and
//! plans into a schedule the independent checker accepts; every file under `test_data/plan/err/`
//! fails with exactly the message in the `.err` file beside it.

use rtlab_core::Nanos;
use rtlab_plan::{check, parse_requests, Planner};
use std::path::{Path, PathBuf};

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("test_data/plan")
        .join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&directory)
        .unwrap_or_else(|error| panic!("reading {}: {error}", directory.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", directory.display());
    files
}

#[test]
fn ok_fixtures_parse_and_plan_correctly() {
    for path in fixtures("ok") {
        let text = std::fs::read_to_string(&path).expect("readable fixture");
        let requests =
            parse_requests(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        assert!(!requests.is_empty(), "{}: no requests", path.display());
        let mut planner = Planner::new(2, Nanos::from_millis(1), 0.9).expect("valid planner");
        for request in &requests {
            let _ = planner.reserve(request.owner.clone(), request.amount, request.period);
        }
        let violations = check::check(
            &planner.plan(),
            &planner.grants(),
            &[],
            planner.quantum(),
            planner.cap(),
        );
        assert!(violations.is_empty(), "{}: {violations:?}", path.display());
    }
}

#[test]
fn over_capacity_fixture_is_partly_denied() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/plan/ok/over_capacity.txt");
    let requests = parse_requests(&std::fs::read_to_string(path).expect("fixture")).expect("valid");
    let mut planner = Planner::new(1, Nanos::from_millis(1), 0.9).expect("valid planner");
    let outcomes: Vec<bool> = requests
        .iter()
        .map(|request| {
            planner
                .reserve(request.owner.clone(), request.amount, request.period)
                .is_ok()
        })
        .collect();
    assert_eq!(outcomes, vec![true, false]);
}

#[test]
fn err_fixtures_fail_with_their_line_and_message() {
    for path in fixtures("err") {
        let text = std::fs::read_to_string(&path).expect("readable fixture");
        let expected = std::fs::read_to_string(path.with_extension("err"))
            .unwrap_or_else(|error| panic!("{}: missing .err file: {error}", path.display()));
        let error = parse_requests(&text).expect_err(&format!("{} should fail", path.display()));
        assert_eq!(error.to_string(), expected.trim_end(), "{}", path.display());
    }
}
