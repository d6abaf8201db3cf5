//! `rtlab import`: turns another tool's latency data (cyclictest `-h`/`--histfile`, `rtla timerlat
//! hist`, an HdrHistogram log, a one-column CSV) into a Run record, stored unless `--no-store`, so
//! `show`, `forecast` and `check` work on it.

use crate::output::PendingOutput;
use anyhow::Context as _;
use rtlab_core::Nanos;
use rtlab_import::{Format, ImportOptions, RecordOrigin, ValueUnit};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to import (`-` for stdin): cyclictest -h/--histfile output, rtla timerlat hist
    /// output, an HdrHistogram interval log, or one latency per line
    pub file: String,
    /// Read the file as this format instead of detecting it
    #[arg(long, value_name = "FORMAT", value_parser = crate::flags::import_format)]
    pub format: Option<Format>,
    /// Unit of the numbers in an HdrHistogram log or a CSV whose header names none (ns, us, ms)
    #[arg(long, value_name = "UNIT", value_parser = crate::flags::value_unit)]
    pub value_unit: Option<ValueUnit>,
    /// Class tag of the imported series (default: the format's name, e.g. cyclictest)
    #[arg(long, value_name = "NAME")]
    pub class: Option<String>,
    /// Period of the measuring threads (cyclictest's -i), e.g. 1ms; gives the run a duration
    #[arg(long, value_name = "DURATION", value_parser = crate::flags::duration)]
    pub period: Option<Nanos>,
    /// Do not store the record in the run history
    #[arg(long)]
    pub no_store: bool,
    /// Write the Run record as JSON to FILE (`-` for stdout, replacing the summary)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json.as_deref().map(PendingOutput::json).transpose()?;
    let (text, started_at) = if args.file == "-" {
        let text = std::io::read_to_string(std::io::stdin()).context("reading stdin")?;
        (text, std::time::SystemTime::now())
    } else {
        let path = Path::new(&args.file);
        let bytes = std::fs::read(path)
            .map_err(|error| crate::exit::input(format!("{}: {error}", args.file)))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| crate::exit::input(format!("{}: not a text file", args.file)))?;
        // When the data was measured is unknown; the file's time is the best bound there is.
        let modified = std::fs::metadata(path)
            .and_then(|metadata| metadata.modified())
            .unwrap_or_else(|_| std::time::SystemTime::now());
        (text, modified)
    };
    let options = ImportOptions {
        format: args.format,
        value_unit: args.value_unit,
        class: args.class.clone(),
        period: args.period,
    };
    let imported = rtlab_import::parse(&text, &options).map_err(|error| {
        let hint = error
            .setting()
            .map(|setting| format!(" ({})", crate::flags::flag_of(setting)))
            .unwrap_or_default();
        crate::exit::input(format!("{}: {error}{hint}", args.file))
    })?;
    let origin = RecordOrigin {
        source: args.file.clone(),
        started_at: humantime::format_rfc3339_seconds(started_at).to_string(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        cmdline: std::env::args().collect(),
    };
    let record = rtlab_import::to_record(&imported, &text, &options, &origin)
        .map_err(|error| crate::exit::input(format!("{}: {error}", args.file)))?;
    let to_stdout = json.as_ref().is_some_and(PendingOutput::is_stdout);
    let mut out = std::io::stdout().lock();
    if !to_stdout {
        out.write_all(rtlab_render::summary::summary(&record).as_bytes())?;
    }
    if !args.no_store {
        let store = rtlab_store::Store::open_default()?;
        let summary = rtlab_import::summary_line(&imported, &args.file, &record);
        store.insert(&record, &summary)?;
        if !to_stdout {
            writeln!(
                out,
                "\nstored as run {} (rtlab show {})",
                record.id, record.id
            )?;
        }
    }
    drop(out);
    if let Some(json) = json {
        json.commit(&(record.to_json_pretty() + "\n"))?;
    }
    Ok(ExitCode::SUCCESS)
}
