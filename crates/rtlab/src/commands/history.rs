//! `rtlab history`: the stored runs, newest first.

use rtlab_core::Nanos;
use rtlab_render::micros;
use std::io::Write as _;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many runs to list
    #[arg(short = 'n', long, default_value_t = 20)]
    pub limit: usize,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let store = rtlab_store::Store::open_default()?;
    let runs = store.list(args.limit)?;
    let mut out = std::io::stdout().lock();
    if runs.is_empty() {
        writeln!(
            out,
            "no stored runs in {} (run `rtlab run` first)",
            store.path().display()
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:<10} {:<20} {:>9} {:>14}  {:<12} summary",
        "id", "started (UTC)", "duration", "worst wakeup", "host"
    )?;
    for listing in runs {
        let short_id: String = listing.id.chars().take(8).collect();
        let started: String = listing.started_at.chars().take(19).collect();
        writeln!(
            out,
            "{:<10} {:<20} {:>9} {:>11} us  {:<12} {}{}",
            short_id,
            started.replace('T', " "),
            Nanos(listing.duration_ns).to_string(),
            micros(listing.worst_wakeup_ns),
            listing.hostname,
            listing.summary,
            if listing.interrupted {
                " (interrupted)"
            } else {
                ""
            }
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
