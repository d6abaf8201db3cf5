//! Where a command's results go: the output flags (`--json`, `--no-store`), rendered text on
//! standard output, and a Run record's way to `--json` and the history. The files themselves are
//! `rtlab_store::output::PendingOutput`s: opened before any work (a bad path fails at once),
//! named only when complete, `-` for standard output.

use anyhow::Context;
use rtlab_core::OutputHeader;
pub(crate) use rtlab_store::output::PendingOutput;
use std::path::PathBuf;

/// The header of an output of `schema` made now by this command line.
pub(crate) fn header(schema: &str, host: Option<rtlab_core::Host>) -> OutputHeader {
    OutputHeader::now(schema, host)
}

/// Writes rendered text to standard output (a closed pipe is an `io::Error` that `exit.rs`
/// turns into a quiet exit, where `print!` would panic).
pub fn print(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// A progress bar `length` long (elapsed, bar, percent, message), or `None` unless stdout and
/// stderr are both terminals (`run` and `tune` draw it).
pub(crate) fn terminal_bar(length: u64) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal as _;
    if !std::io::stdout().is_terminal() || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(length);
    let template = "{spinner} [{elapsed_precise}] {wide_bar} {percent:>3}%  {msg}";
    bar.set_style(indicatif::ProgressStyle::with_template(template).expect("constant template"));
    Some(bar)
}

/// Where a Run record goes when a command ends: `--json` (opened before any work, so a bad
/// path fails at once) and, unless `--no-store`, the run history (opened before any work too).
pub(crate) struct RecordOutputs {
    json: Option<PendingOutput>,
    store: Option<rtlab_store::Store>,
}

impl RecordOutputs {
    pub(crate) fn open(args: &RecordArgs) -> anyhow::Result<RecordOutputs> {
        let json = args.prepare_json()?;
        let store = if args.no_store {
            None
        } else {
            let store = rtlab_store::Store::open_default()
                .context("opening the run history (use --no-store to skip it)")?;
            if let Some(caller) = store.sudo_caller() {
                eprintln!(
                    "rtlab: run through sudo: the run goes into {}'s history ({})",
                    caller.name,
                    store.path().display()
                );
            }
            Some(store)
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

impl RecordArgs {
    /// Opens `--json` before any work (for a command that writes its result there but does
    /// not store it).
    pub(crate) fn prepare_json(&self) -> anyhow::Result<Option<PendingOutput>> {
        Ok(self.json.as_deref().map(PendingOutput::json).transpose()?)
    }
}

impl JsonArgs {
    /// Opens `--json` before any work.
    pub(crate) fn prepare(&self) -> anyhow::Result<Option<PendingOutput>> {
        Ok(self.json.as_deref().map(PendingOutput::json).transpose()?)
    }
}

impl ReprintJsonArgs {
    /// Opens `--json` before any work.
    pub(crate) fn prepare(&self) -> anyhow::Result<Option<PendingOutput>> {
        Ok(self.json.as_deref().map(PendingOutput::json).transpose()?)
    }
}
