//! How `rtlab run` ends: `--quiet` / `--verbose` / `--for CLASS`, the summary people read and the
//! verdict block (rendered by `rtlab_render::run_verdict`). Kept apart from `run.rs`, which only
//! calls [`print_end`].

use rtlab_analysis::classes::builtin_classes;
use rtlab_core::RunRecord;
use rtlab_render::run_verdict::{run_end, EndOptions, IdleInfo};

#[derive(Debug, Clone, clap::Args)]
pub struct ShowArgs {
    /// Print only the verdict block (no tables)
    #[arg(long, short = 'q', conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print every table in full (all percentiles, every tail window and warning, forecast details)
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Give the verdict for this application class only (see `rtlab forecast`); exit 1 if unsuitable
    #[arg(long = "for", value_name = "CLASS", value_parser = parse_class)]
    pub for_class: Option<String>,
}

fn parse_class(text: &str) -> Result<String, String> {
    if builtin_classes().iter().any(|class| class.name == text) {
        Ok(text.to_owned())
    } else {
        Err(rtlab_render::forecast::unknown_class(text))
    }
}

/// The idle states of the first measured CPU, from sysfs.
fn idle_info(record: &RunRecord) -> Option<IdleInfo> {
    let cpu = record
        .series
        .first()
        .map_or(0, |series| series.cpu as usize);
    rtlab_sys::cpuidle::idle_states(cpu).map(|(driver, states)| IdleInfo { driver, states })
}

/// The summary (unless `--quiet`), then `extra` (interval table, explain report), then the
/// verdict. Returns true when `--for CLASS` found the machine unsuitable.
pub fn print_end(record: &RunRecord, args: &ShowArgs, extra: &str) -> std::io::Result<bool> {
    let options = EndOptions {
        quiet: args.quiet,
        verbose: args.verbose,
        for_class: args.for_class.as_deref(),
    };
    let (text, unsuitable) = run_end(record, &options, extra, idle_info(record).as_ref());
    crate::output::print(&text)?;
    Ok(unsuitable)
}
