//! How `rtlab run` ends: `--quiet` / `--verbose` / `--for CLASS`, the summary people read and the
//! verdict block (rendered by `render_verdict`). Kept apart from `run.rs`, which only calls
//! [`write_end`].

use crate::render_verdict::{write_compact_summary, write_verdict, IdleInfo};
use crate::verdict::run_verdict;
use rtlab_analysis::classes::builtin_classes;
use rtlab_analysis::forecast::VerdictKind;
use rtlab_core::RunRecord;
use std::io::Write;

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
    let classes = builtin_classes();
    if classes.iter().any(|class| class.name == text) {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "no class '{text}' (known: {})",
            classes
                .iter()
                .map(|class| class.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
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
pub fn write_end(
    out: &mut impl Write,
    record: &RunRecord,
    args: &ShowArgs,
    extra: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<bool> {
    if !args.quiet {
        if args.verbose {
            crate::render::write_summary(out, record)?;
        } else {
            write_compact_summary(out, record)?;
        }
        extra(out)?;
    }
    let mut classes = builtin_classes();
    if let Some(name) = &args.for_class {
        classes.retain(|class| &class.name == name);
    }
    let verdict = run_verdict(record, &classes);
    write_verdict(
        out,
        record,
        &verdict,
        idle_info(record).as_ref(),
        args.verbose,
    )?;
    Ok(args.for_class.is_some()
        && verdict
            .classes
            .iter()
            .any(|class| class.kind == VerdictKind::NotSuitable))
}
