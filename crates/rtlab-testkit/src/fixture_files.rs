//! The workspace's one lister of data-driven test fixtures (`test_data/<format>/{ok,err}/`, each
//! file with what it must give beside it).

use std::path::{Path, PathBuf};

/// The files in `folder` whose extension `keep` accepts, sorted by name; fails the test when the
/// folder cannot be read or holds none (a fixture test that checks nothing must not pass).
pub fn fixture_files(folder: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(folder)
        .unwrap_or_else(|error| panic!("{}: {error}", folder.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| {
            path.extension()
                .and_then(|extension| extension.to_str())
                .is_some_and(&keep)
        })
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no fixtures in {}", folder.display());
    paths
}

/// The files in `folder` named `*.EXTENSION`, sorted by name (see [`fixture_files`]).
pub fn files_with_extension(folder: &Path, extension: &str) -> Vec<PathBuf> {
    fixture_files(folder, |found| found == extension)
}

/// The text of the `.expect` file beside `path`; fails the test when it is missing.
pub fn expectation(path: &Path) -> String {
    std::fs::read_to_string(path.with_extension("expect"))
        .unwrap_or_else(|error| panic!("{}: missing .expect: {error}", path.display()))
}
