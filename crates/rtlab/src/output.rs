//! Output files that are named only when complete.
//!
//! Every `--json FILE`, `--histfile FILE` and `--perfetto FILE` is opened before any work (so a bad
//! path fails at once, not after a long measurement) as an unnamed file, and linked under its name,
//! whole, by `commit`: a killed or failed run leaves nothing half-written. `-` means stdout.

use anyhow::Context;
use std::io::Write;
use std::path::Path;

pub(crate) enum PendingOutput {
    Stdout,
    File(rtlab_sys::output_file::PendingFile),
}

impl PendingOutput {
    /// Opens the output of `flag` (named in the error, which is an input error: exit 2).
    pub(crate) fn prepare(target: &Path, flag: &str) -> anyhow::Result<PendingOutput> {
        if target == Path::new("-") {
            return Ok(PendingOutput::Stdout);
        }
        rtlab_sys::output_file::PendingFile::create(target)
            .map(PendingOutput::File)
            .map_err(|error| {
                crate::exit::input(format!(
                    "{flag}: cannot write {}: {error}",
                    target.display()
                ))
            })
    }

    /// The output of `--json`.
    pub(crate) fn json(target: &Path) -> anyhow::Result<PendingOutput> {
        PendingOutput::prepare(target, "--json")
    }

    pub(crate) fn is_stdout(&self) -> bool {
        matches!(self, PendingOutput::Stdout)
    }

    pub(crate) fn commit(self, contents: &str) -> anyhow::Result<()> {
        match self {
            PendingOutput::Stdout => {
                let mut stdout = std::io::stdout().lock();
                stdout.write_all(contents.as_bytes())?;
                stdout.flush()?;
            }
            PendingOutput::File(file) => {
                let target = file.target().to_owned();
                file.commit(contents.as_bytes())
                    .with_context(|| format!("writing {}", target.display()))?;
            }
        }
        Ok(())
    }
}
