//! Reading what is imported: a file (its modification time is the best bound there is on when
//! the data was measured) or standard input (`-`, read now).

use std::path::Path;
use std::time::SystemTime;

/// The text to import and when it was (at the latest) measured.
#[derive(Debug)]
pub struct Source {
    pub text: String,
    pub measured_by: SystemTime,
}

/// Why the source could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The named file could not be read (the caller's input).
    #[error("{name}: {source}")]
    File {
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: not a text file")]
    NotText(String),
    /// Standard input failed (a system error).
    #[error("reading stdin: {0}")]
    Stdin(#[source] std::io::Error),
}

impl ReadError {
    /// True when the named file was at fault, not the system.
    pub fn is_input(&self) -> bool {
        !matches!(self, ReadError::Stdin(_))
    }
}

/// Reads `name`: a file path, or `-` for standard input.
pub fn read_source(name: &str) -> Result<Source, ReadError> {
    if name == "-" {
        let text = std::io::read_to_string(std::io::stdin()).map_err(ReadError::Stdin)?;
        return Ok(Source {
            text,
            measured_by: SystemTime::now(),
        });
    }
    let path = Path::new(name);
    let bytes = std::fs::read(path).map_err(|source| ReadError::File {
        name: name.to_owned(),
        source,
    })?;
    let text = String::from_utf8(bytes).map_err(|_| ReadError::NotText(name.to_owned()))?;
    let measured_by = std::fs::metadata(path)
        .and_then(|metadata| metadata.modified())
        .unwrap_or_else(|_| SystemTime::now());
    Ok(Source { text, measured_by })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_binary_file_is_the_callers_input() {
        let missing = read_source("/nonexistent/cyclictest.txt").unwrap_err();
        assert!(missing.is_input());
        assert!(missing
            .to_string()
            .starts_with("/nonexistent/cyclictest.txt: "));
        let directory = tempfile::tempdir().unwrap();
        let binary = directory.path().join("binary");
        std::fs::write(&binary, [0xff, 0xfe, 0x00]).unwrap();
        let error = read_source(binary.to_str().unwrap()).unwrap_err();
        assert!(error.is_input() && error.to_string().ends_with("not a text file"));
        let text = directory.path().join("text");
        std::fs::write(&text, "1\n2\n").unwrap();
        assert_eq!(read_source(text.to_str().unwrap()).unwrap().text, "1\n2\n");
    }
}
