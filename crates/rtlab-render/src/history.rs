//! The run history as text (`rtlab history`): one line per stored run, newest first.

use crate::micros;
use rtlab_core::run_listing::RunListing;
use rtlab_core::Nanos;
use std::fmt::Write;

/// The table of `runs`, or where the history is and how to fill it when it holds none.
pub fn table(runs: &[RunListing], store_path: &std::path::Path) -> String {
    crate::to_text(|out| write_table(out, runs, store_path))
}

fn write_table(
    out: &mut impl Write,
    runs: &[RunListing],
    store_path: &std::path::Path,
) -> std::fmt::Result {
    if runs.is_empty() {
        return writeln!(
            out,
            "no stored runs in {} (run `rtlab run` first)",
            store_path.display()
        );
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_table_matches_its_snapshot() {
        let listing = |id: &str, interrupted| RunListing {
            id: id.into(),
            started_at: "2026-11-23T10:00:00Z".into(),
            duration_ns: 60_000_000_000,
            hostname: "box".into(),
            kernel: "6.18.0".into(),
            n_series: 6,
            worst_wakeup_ns: 123_456,
            interrupted,
            summary: "rt-high wakeup p99 12.3 us".into(),
        };
        let runs = [
            listing("0123456789abcdef", false),
            listing("fedcba9876543210", true),
        ];
        let path = std::path::Path::new("/root/.local/share/rtlab/history.db");
        insta::assert_snapshot!(table(&runs, path));
        assert!(table(&[], path).starts_with("no stored runs in /root/"));
    }
}
