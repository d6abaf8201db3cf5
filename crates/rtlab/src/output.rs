//! Output files that are named only when complete.
//!
//! Every `--json FILE`, `--histfile FILE` and `--perfetto FILE` is opened before any work (so a bad
//! path fails at once, not after a long measurement) as an unnamed file, and linked under its name,
//! whole, by `commit`: a killed or failed run leaves nothing half-written. `-` means stdout.

use anyhow::Context;
use rtlab_core::{Host, OutputHeader};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A JSON output: the common header (`schema`, `tool_version`, `cmdline`, `started_at`, `host`
/// where a machine is involved), then the command's own fields.
#[derive(Serialize)]
struct Document<'a, T: Serialize> {
    #[serde(flatten)]
    header: OutputHeader,
    #[serde(flatten)]
    body: &'a T,
}

/// The header of an output of `schema` made now by this command line.
pub(crate) fn header(schema: &str, host: Option<Host>) -> OutputHeader {
    OutputHeader {
        schema: schema.to_owned(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        cmdline: std::env::args().collect(),
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        host,
    }
}

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

    /// Writes `body` under the common header as pretty JSON.
    pub(crate) fn commit_json<T: Serialize>(
        self,
        schema: &str,
        host: Option<Host>,
        body: &T,
    ) -> anyhow::Result<()> {
        let document = Document {
            header: header(schema, host),
            body,
        };
        let text = serde_json::to_string_pretty(&document).context("serialising the output")?;
        self.commit(&(text + "\n"))
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

/// Writes rendered text to standard output (a closed pipe is an `io::Error` that `exit.rs`
/// turns into a quiet exit, where `print!` would panic).
pub fn print(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Where a Run record goes when a command ends: `--json` (opened before any work, so a bad
/// path fails at once) and, unless `--no-store`, the run history (opened before any work too).
pub(crate) struct RecordOutputs {
    json: Option<PendingOutput>,
    store: Option<rtlab_store::Store>,
}

impl RecordOutputs {
    pub(crate) fn open(args: &RecordArgs) -> anyhow::Result<RecordOutputs> {
        let json = args.json.as_deref().map(PendingOutput::json).transpose()?;
        let store = if args.no_store {
            None
        } else {
            Some(
                rtlab_store::Store::open_default()
                    .context("opening the run history (use --no-store to skip it)")?,
            )
        };
        Ok(RecordOutputs { json, store })
    }

    /// True when the record goes to stdout as JSON: nothing else may be printed there.
    pub(crate) fn json_to_stdout(&self) -> bool {
        self.json.as_ref().is_some_and(PendingOutput::is_stdout)
    }

    /// Stores the record under `summary` (saying so, unless JSON goes to stdout or `quiet`),
    /// then writes `--json`.
    pub(crate) fn finish(
        self,
        record: &rtlab_core::RunRecord,
        summary: &str,
        quiet: bool,
    ) -> anyhow::Result<()> {
        let to_stdout = self.json_to_stdout();
        if let Some(store) = &self.store {
            store.insert(record, summary)?;
            if !to_stdout && !quiet {
                let short_id: String = record.id.chars().take(8).collect();
                print(&format!(
                    "\nstored as run {short_id} (rtlab show {short_id})\n"
                ))?;
            }
        }
        if let Some(output) = self.json {
            output.commit(&(record.to_json_pretty() + "\n"))?;
        }
        Ok(())
    }
}

/// `--json FILE|-` and `--no-store`: where a command's Run record goes.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct RecordArgs {
    /// Write the Run record as JSON to FILE (`-`: to standard output, in place of the text)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Do not store the record in the run history
    #[arg(long)]
    pub no_store: bool,
}

/// `--json FILE|-` of a command whose result is not a Run record.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct JsonArgs {
    /// Write the result as JSON to FILE (`-`: to standard output, in place of the text)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// `--json [FILE|-]` of a command that re-prints something stored: no FILE means stdout.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ReprintJsonArgs {
    /// Write the result as JSON to FILE (`-`, or no FILE: to standard output, in place of the
    /// text)
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,
}

impl JsonArgs {
    /// Opens `--json` before any work.
    pub(crate) fn prepare(&self) -> anyhow::Result<Option<PendingOutput>> {
        self.json.as_deref().map(PendingOutput::json).transpose()
    }
}

impl ReprintJsonArgs {
    /// Opens `--json` before any work.
    pub(crate) fn prepare(&self) -> anyhow::Result<Option<PendingOutput>> {
        self.json.as_deref().map(PendingOutput::json).transpose()
    }
}
