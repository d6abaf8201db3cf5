//! `rtlab tune --json`'s report: its schema, and the file read back for `--apply-from` (the
//! schema checked before the rest is read, so another rtlab file is named as such).

use rtlab_core::tune_report::TuneReport;
use std::path::Path;

/// The schema of `rtlab tune --json`.
pub const SCHEMA: &str = "rtlab.tune/1";

/// Why a file is not a report to apply.
#[derive(Debug, thiserror::Error)]
pub enum ReportFileError {
    #[error("{0}")]
    Read(std::io::Error),
    #[error(
        "not an rtlab tune report (schema {}, expected {})",
        .found.as_deref().unwrap_or("missing"),
        SCHEMA
    )]
    NotAReport { found: Option<String> },
    #[error("{0}")]
    Parse(serde_json::Error),
}

/// The report `rtlab tune --json` wrote to `path`.
pub fn read_report(path: &Path) -> Result<TuneReport, ReportFileError> {
    let text = std::fs::read_to_string(path).map_err(ReportFileError::Read)?;
    let schema = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|document| document["schema"].as_str().map(str::to_owned));
    if schema.as_deref() != Some(SCHEMA) {
        return Err(ReportFileError::NotAReport { found: schema });
    }
    serde_json::from_str(&text).map_err(ReportFileError::Parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_schema_is_named_and_a_missing_file_is_a_read_error() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("run.json");
        std::fs::write(&path, r#"{"schema": "rtlab.run/1"}"#).unwrap();
        let error = read_report(&path).unwrap_err();
        assert_eq!(
            error.to_string(),
            "not an rtlab tune report (schema rtlab.run/1, expected rtlab.tune/1)"
        );
        std::fs::write(&path, "[]").unwrap();
        assert!(read_report(&path)
            .unwrap_err()
            .to_string()
            .contains("schema missing"));
        let missing = read_report(&directory.path().join("none.json")).unwrap_err();
        assert!(matches!(missing, ReportFileError::Read(_)));
    }
}
