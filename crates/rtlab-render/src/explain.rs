//! The explain report (`rtlab explain`, `rtlab run --explain`): the worst episodes with their
//! causes, then the top offenders over all of them.

use crate::summary::micros;
use crate::text::{truncate, wrapped, WIDTH};
use rtlab_analysis::offenders::{top_offenders, Offender};
use rtlab_core::{Episode, ExplainSettings, RunRecord};
use std::fmt::Write;

pub fn short_id(record: &RunRecord) -> String {
    record.id.chars().take(8).collect()
}

fn threshold_text(record: &RunRecord) -> String {
    match record
        .config
        .explain
        .as_ref()
        .and_then(|explain| explain.explain_above_ns)
    {
        Some(threshold_ns) => format!("above {} µs", micros(threshold_ns)),
        None => "above each series' p99.9".to_owned(),
    }
}

/// Causes printed per episode before the rest is summed up in one line.
const CAUSES_PER_EPISODE: usize = 6;

/// The explain report as text (the `worst` longest episodes in detail): [`write_report`].
pub fn report(record: &RunRecord, worst: usize) -> String {
    crate::to_text(|out| write_report(out, record, worst))
}

/// The explain report: the worst `worst` episodes, then the top offenders of all of them, in 80
/// columns (a cause's text wraps under itself).
pub fn write_report(out: &mut impl Write, record: &RunRecord, worst: usize) -> std::fmt::Result {
    let episodes = &record.episodes;
    writeln!(out)?;
    if episodes.is_empty() {
        writeln!(
            out,
            "Explain: no late wake-ups {} were recorded.",
            threshold_text(record)
        )?;
        return Ok(());
    }
    let mut by_latency: Vec<&Episode> = episodes.iter().collect();
    by_latency.sort_by(|left, right| {
        right
            .latency_ns
            .cmp(&left.latency_ns)
            .then(left.at_ns.cmp(&right.at_ns))
    });
    let shown = by_latency.len().min(worst);
    let title = format!(
        "Late wake-ups explained: {} episodes {}; the worst {shown}:",
        episodes.len(),
        threshold_text(record)
    );
    writeln!(out, "{}", wrapped("", &title, 2))?;
    for (rank, episode) in by_latency.iter().take(shown).enumerate() {
        write_episode(out, rank + 1, episode)?;
    }
    writeln!(out)?;
    write_offenders(out, &top_offenders(episodes), episodes.len())
}

/// Where a cause's text starts on its line (after the µs and % columns).
const CAUSE_COLUMN: usize = 22;

/// One cause in words: `kind name: detail` (the name once when it is the kind).
fn cause_text(cause: &rtlab_core::Cause) -> String {
    let kind = cause.kind.as_str();
    let who = match cause.pid {
        _ if cause.name == kind => kind.to_owned(),
        Some(pid) => format!("{kind} {} [{pid}]", cause.name),
        None => format!("{kind} {}", cause.name),
    };
    let detail = cause.detail.as_deref();
    match detail {
        Some(detail) if !detail.is_empty() => format!("{who}: {detail}"),
        _ => who,
    }
}

fn write_episode(out: &mut impl Write, rank: usize, episode: &Episode) -> std::fmt::Result {
    let steal = match episode.steal_ns {
        Some(steal) => format!(", steal {} µs", micros(steal)),
        None => String::new(),
    };
    let header = format!(
        "  #{rank}  {}  at {:.6} s  latency {} µs{steal}",
        episode.series,
        episode.at_ns as f64 / 1e9,
        micros(episode.latency_ns)
    );
    writeln!(out, "\n{}", wrapped("", &header, 6))?;
    writeln!(out, "    {:>9} {:>6}  cause", "µs", "%")?;
    for cause in episode.causes.iter().take(CAUSES_PER_EPISODE) {
        let percent = cause.ns as f64 * 100.0 / episode.latency_ns.max(1) as f64;
        let columns = format!("    {:>9} {:>5.1}%  ", micros(cause.ns), percent);
        let text = cause_text(cause);
        writeln!(out, "{}", wrapped(&columns, &text, CAUSE_COLUMN))?;
    }
    if episode.causes.len() > CAUSES_PER_EPISODE {
        let rest: u64 = episode.causes[CAUSES_PER_EPISODE..]
            .iter()
            .map(|cause| cause.ns)
            .sum();
        writeln!(
            out,
            "    {:>9}         {} more causes",
            micros(rest),
            episode.causes.len() - CAUSES_PER_EPISODE
        )?;
    }
    if let Some(stack) = &episode.stack {
        writeln!(out, "    stack sampled inside the episode:")?;
        for frame in stack.iter().take(16) {
            writeln!(out, "      {}", truncate(frame, WIDTH - 6))?;
        }
    }
    Ok(())
}

/// Rows printed in the offenders table.
const OFFENDER_ROWS: usize = 15;

fn write_offenders(
    out: &mut impl Write,
    offenders: &[Offender],
    n_episodes: usize,
) -> std::fmt::Result {
    writeln!(out, "Top offenders over all {n_episodes} episodes:")?;
    writeln!(
        out,
        "  {:<11} {:<24} {:>8} {:>7} {:>10} {:>9}",
        "kind", "name", "episodes", "largest", "total µs", "max µs"
    )?;
    for offender in offenders.iter().take(OFFENDER_ROWS) {
        writeln!(
            out,
            "  {:<11} {:<24} {:>8} {:>7} {:>10} {:>9}",
            offender.kind.as_str(),
            truncate(&offender.name, 24),
            offender.episodes,
            offender.dominant_in,
            micros(offender.total_ns),
            micros(offender.max_ns)
        )?;
    }
    if offenders.len() > OFFENDER_ROWS {
        writeln!(out, "  … {} more", offenders.len() - OFFENDER_ROWS)?;
    }
    writeln!(
        out,
        "{}",
        wrapped(
            "  ",
            "(largest: episodes in which it was the biggest cause; unaccounted = time the trace cannot name: idle exit, hypervisor, firmware)",
            3
        )
    )
}

/// `rtlab explain --json` under the common header.
#[derive(serde::Serialize)]
pub struct ExplainJson<'a> {
    run_id: &'a str,
    run_started_at: &'a str,
    threshold: Option<&'a ExplainSettings>,
    episodes: &'a [Episode],
    top_offenders: Vec<Offender>,
}

impl<'a> ExplainJson<'a> {
    /// `record`'s episodes and top offenders.
    pub fn of(record: &'a RunRecord) -> ExplainJson<'a> {
        ExplainJson {
            run_id: &record.id,
            run_started_at: &record.started_at,
            threshold: record.config.explain.as_ref(),
            episodes: &record.episodes,
            top_offenders: top_offenders(&record.episodes),
        }
    }
}
