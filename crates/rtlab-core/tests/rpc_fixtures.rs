//! `rtlab.rpc/1` decoder fixtures: every `test_data/rpc/ok/*.jsonl` decodes and re-encodes to a
//! line that decodes to the same request; every `err/*.jsonl` fails with the text in its `.err`.

use rtlab_testkit::fixture_files;

use rtlab_core::rpc::{decode_request, encode_request};
use std::path::PathBuf;

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let directory = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("test_data/rpc")
        .join(kind);
    fixture_files::files_with_extension(&directory, "jsonl")
}

#[test]
fn ok_fixtures_decode_and_round_trip() {
    for path in fixtures("ok") {
        let bytes = std::fs::read(&path).unwrap();
        let request =
            decode_request(&bytes).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let again = decode_request(encode_request(&request).as_bytes()).unwrap();
        assert_eq!(again, request, "{}", path.display());
    }
}

#[test]
fn err_fixtures_fail_with_their_message() {
    for path in fixtures("err") {
        let bytes = std::fs::read(&path).unwrap();
        let expected = std::fs::read_to_string(path.with_extension("err")).unwrap();
        let error = decode_request(&bytes)
            .err()
            .unwrap_or_else(|| panic!("{} decoded", path.display()));
        assert!(
            error.message.contains(expected.trim()),
            "{}: got '{}', expected it to contain '{}'",
            path.display(),
            error.message,
            expected.trim()
        );
    }
}
