//! Data-driven tests of the two workload formats: every file under `test_data/<format>/ok`
//! parses to what its `.expect` says (`NAME threads=N rings=N locks=N`), every file under
//! `test_data/<format>/err` is refused with a message containing its `.expect` (line or path and
//! field included). Formats: `workload` (rtlab TOML) and `rt-app` (rt-app JSON).

use rtlab_testkit::fixture_files;

use std::path::{Path, PathBuf};

fn fixtures(format: &str, kind: &str, extension: &str) -> Vec<(PathBuf, String, String)> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("test_data")
        .join(format)
        .join(kind);
    fixture_files::files_with_extension(&folder, extension)
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let expect = fixture_files::expectation(&path);
            (path, text, expect.trim().to_owned())
        })
        .collect()
}

fn parse(format: &str, text: &str) -> Result<rtlab_workload::Workload, String> {
    match format {
        "workload" => rtlab_workload::toml_file::parse_workload_toml(text, "unnamed")
            .map_err(|e| e.to_string()),
        _ => rtlab_workload::rt_app::parse_rt_app(text, "periodic").map_err(|e| e.to_string()),
    }
}

fn check(format: &str, extension: &str) {
    for (path, text, expect) in fixtures(format, "ok", extension) {
        let workload =
            parse(format, &text).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let described = format!(
            "{} threads={} rings={} locks={}",
            workload.name,
            workload.threads.len(),
            workload.rings.len(),
            workload.locks.len()
        );
        assert_eq!(described, expect, "{}", path.display());
    }
    for (path, text, expect) in fixtures(format, "err", extension) {
        let error = parse(format, &text)
            .err()
            .unwrap_or_else(|| panic!("{}: accepted", path.display()));
        assert!(
            error.contains(&expect),
            "{}: got '{error}', expected '{expect}'",
            path.display()
        );
    }
}

#[test]
fn workload_toml_fixtures() {
    check("workload", "toml");
}

#[test]
fn rt_app_fixtures() {
    check("rt-app", "json");
}
