//! Output files that are named only when complete.
//!
//! Every output a command writes (`--json FILE`, `--histfile FILE`, `--svg DIR`, …) is opened
//! before any work, so a bad path fails at once and not after a long measurement, as an unnamed
//! file ([`rtlab_sys::output_file::PendingFile`]) that [`PendingOutput::commit`] names, whole:
//! a killed or failed run leaves nothing half-written. `-` means standard output. JSON outputs
//! carry the common [`OutputHeader`] first.

use rtlab_core::{Host, OutputHeader};
use rtlab_sys::output_file::PendingFile;
use serde::Serialize;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Why an output could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The target cannot be created: the user's path is at fault.
    #[error("{option}: cannot write {}: {cause}", target.display())]
    Open {
        option: String,
        target: PathBuf,
        cause: std::io::Error,
    },
    /// The directory of a set of outputs cannot be created.
    #[error("{option}: cannot create {}: {cause}", directory.display())]
    Directory {
        option: String,
        directory: PathBuf,
        cause: std::io::Error,
    },
    #[error("serialising the output")]
    Serialise(#[source] serde_json::Error),
    #[error("writing {}", target.display())]
    Write {
        target: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing to standard output")]
    Stdout(#[source] std::io::Error),
}

impl OutputError {
    /// True when the user's path is at fault (exit 2), not the system.
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            OutputError::Open { .. } | OutputError::Directory { .. }
        )
    }
}

/// A JSON output: the common header, then the command's own fields.
#[derive(Serialize)]
struct Document<'a, T: Serialize> {
    #[serde(flatten)]
    header: OutputHeader,
    #[serde(flatten)]
    body: &'a T,
}

/// An output opened before the work: standard output, or a file that gets its name when
/// committed.
#[derive(Debug)]
pub enum PendingOutput {
    Stdout,
    File(PendingFile),
}

impl PendingOutput {
    /// Opens `target` (`-`: standard output) for the option `option` (named in the error).
    pub fn prepare(target: &Path, option: &str) -> Result<PendingOutput, OutputError> {
        if target == Path::new("-") {
            return Ok(PendingOutput::Stdout);
        }
        PendingFile::create(target)
            .map(PendingOutput::File)
            .map_err(|cause| OutputError::Open {
                option: option.to_owned(),
                target: target.to_owned(),
                cause,
            })
    }

    /// The output of `--json`.
    pub fn json(target: &Path) -> Result<PendingOutput, OutputError> {
        PendingOutput::prepare(target, "--json")
    }

    /// The files `names` in `directory` (created if missing), for the option `option`.
    pub fn prepare_in(
        directory: &Path,
        names: &[String],
        option: &str,
    ) -> Result<Vec<(PathBuf, PendingOutput)>, OutputError> {
        std::fs::create_dir_all(directory).map_err(|cause| OutputError::Directory {
            option: option.to_owned(),
            directory: directory.to_owned(),
            cause,
        })?;
        names
            .iter()
            .map(|name| {
                let path = directory.join(name);
                PendingOutput::prepare(&path, option).map(|file| (path, file))
            })
            .collect()
    }

    pub fn is_stdout(&self) -> bool {
        matches!(self, PendingOutput::Stdout)
    }

    /// Writes `body` under the common header (see [`OutputHeader::now`]) as pretty JSON.
    pub fn commit_json<T: Serialize>(
        self,
        schema: &str,
        host: Option<Host>,
        body: &T,
    ) -> Result<(), OutputError> {
        let document = Document {
            header: OutputHeader::now(schema, host),
            body,
        };
        let text = serde_json::to_string_pretty(&document).map_err(OutputError::Serialise)?;
        self.commit(&(text + "\n"))
    }

    /// Writes `contents` whole and names the file (or writes them to standard output).
    pub fn commit(self, contents: &str) -> Result<(), OutputError> {
        match self {
            PendingOutput::Stdout => {
                let mut stdout = std::io::stdout().lock();
                stdout
                    .write_all(contents.as_bytes())
                    .and_then(|()| stdout.flush())
                    .map_err(OutputError::Stdout)
            }
            PendingOutput::File(file) => {
                let target = file.target().to_owned();
                file.commit(contents.as_bytes())
                    .map_err(|source| OutputError::Write { target, source })
            }
        }
    }
}

/// A JSON-lines output written as it goes (`trace watch --json`): standard output for `-`, else
/// a file created at once (each line written whole), so a bad path fails before the work. The
/// first error writing is kept for the caller to take; a closed pipe ends the lines quietly.
pub struct JsonLines {
    writer: Box<dyn std::io::Write>,
    to_stdout: bool,
    error: Option<std::io::Error>,
}

impl JsonLines {
    pub fn open(target: &Path) -> std::io::Result<JsonLines> {
        let to_stdout = target == Path::new("-");
        let writer: Box<dyn std::io::Write> = if to_stdout {
            Box::new(std::io::stdout())
        } else {
            Box::new(std::io::LineWriter::new(std::fs::File::create(target)?))
        };
        Ok(JsonLines {
            writer,
            to_stdout,
            error: None,
        })
    }

    pub fn is_stdout(&self) -> bool {
        self.to_stdout
    }

    /// Writes `line` and a newline; an error is kept (the first) for [`JsonLines::take_error`].
    pub fn line(&mut self, line: &str) {
        if let Err(error) = writeln!(self.writer, "{line}") {
            self.error.get_or_insert(error);
        }
    }

    /// The first error writing a line, unless it was a closed pipe.
    pub fn take_error(&mut self) -> Option<std::io::Error> {
        let error = self.error.take()?;
        (error.kind() != std::io::ErrorKind::BrokenPipe).then_some(error)
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.writer.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_appears_whole_with_the_common_header() {
        let directory = tempfile::tempdir().unwrap();
        let target = directory.path().join("out.json");
        let output = PendingOutput::json(&target).unwrap();
        assert!(!output.is_stdout());
        assert!(!target.exists(), "named only when complete");
        output
            .commit_json("rtlab.test/1", None, &serde_json::json!({"answer": 42}))
            .unwrap();
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&target).unwrap()).unwrap();
        assert_eq!(written["schema"], "rtlab.test/1");
        assert_eq!(written["tool_version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(written["answer"], 42);
        assert!(written.get("host").is_none());
        assert!(PendingOutput::json(Path::new("-")).unwrap().is_stdout());
    }

    #[test]
    fn a_bad_path_is_the_users_error_and_names_the_option() {
        let error =
            PendingOutput::prepare(Path::new("/nonexistent/dir/x.svg"), "--svg").unwrap_err();
        assert!(error.is_input());
        assert!(
            error
                .to_string()
                .starts_with("--svg: cannot write /nonexistent/dir/x.svg"),
            "{error}"
        );
        let directory = tempfile::tempdir().unwrap();
        let names = ["a.svg".to_owned(), "b.svg".to_owned()];
        let nested = directory.path().join("plots");
        let outputs = PendingOutput::prepare_in(&nested, &names, "--svg").unwrap();
        assert_eq!(outputs.len(), 2);
        assert!(nested.is_dir());
        let file = directory.path().join("file");
        std::fs::write(&file, "").unwrap();
        let error = PendingOutput::prepare_in(&file.join("sub"), &names, "--svg").unwrap_err();
        assert!(error.is_input());
        assert!(
            error.to_string().starts_with("--svg: cannot create"),
            "{error}"
        );
    }
}
