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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixtures_are_listed_by_extension_in_name_order_with_their_expectation() {
        let folder = tempfile::tempdir().unwrap();
        for name in ["b.json", "a.json", "a.expect", "c.toml"] {
            std::fs::write(folder.path().join(name), name).unwrap();
        }
        let found = files_with_extension(folder.path(), "json");
        assert_eq!(
            found,
            vec![folder.path().join("a.json"), folder.path().join("b.json")]
        );
        assert_eq!(expectation(&found[0]), "a.expect");
    }

    #[test]
    #[should_panic(expected = "no fixtures in")]
    fn a_folder_without_fixtures_fails_the_test() {
        let folder = tempfile::tempdir().unwrap();
        std::fs::write(folder.path().join("notes.txt"), "").unwrap();
        files_with_extension(folder.path(), "json");
    }
}
