//! `rtlab import`: turns another tool's latency data (cyclictest `-h`/`--histfile`, `rtla timerlat
//! hist`, an HdrHistogram log, a one-column CSV) into a Run record, stored unless `--no-store`, so
//! `show`, `forecast` and `check` work on it.

use crate::output::RecordOutputs;
use rtlab_core::Nanos;
use rtlab_import::{Format, ImportOptions, RecordOrigin, ValueUnit};
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
    #[command(flatten)]
    pub record: crate::output::RecordArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let outputs = RecordOutputs::open(&args.record)?;
    let source = rtlab_import::read_source(&args.file)?;
    let options = ImportOptions {
        format: args.format,
        value_unit: args.value_unit,
        class: args.class.clone(),
        period: args.period,
    };
    let imported = rtlab_import::parse(&source.text, &options).map_err(|error| {
        let hint = error
            .setting()
            .map(|setting| format!(" ({})", crate::flags::flag_of(setting)))
            .unwrap_or_default();
        crate::exit::input(format!("{}: {error}{hint}", args.file))
    })?;
    let origin = RecordOrigin {
        source: args.file.clone(),
        started_at: humantime::format_rfc3339_seconds(source.measured_by).to_string(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        cmdline: std::env::args().collect(),
    };
    let record = rtlab_import::to_record(&imported, &source.text, &options, &origin)
        .map_err(|error| crate::exit::input(format!("{}: {error}", args.file)))?;
    if !outputs.json_to_stdout() {
        crate::output::print(&rtlab_render::summary::summary(&record))?;
    }
    let summary = rtlab_import::summary_line(&imported, &args.file, &record);
    outputs.finish(&record, &summary, false)?;
    Ok(ExitCode::SUCCESS)
}
