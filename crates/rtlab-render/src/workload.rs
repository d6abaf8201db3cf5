//! A workload run as text (`rtlab workload`, `rtlab show` of its record): per thread its
//! scheduling, activations, deadline misses, starvations and response times; per device its
//! underruns and when the first ones came; the record's warnings.

use rtlab_core::{Nanos, RunRecord};
use std::fmt::Write;

/// The workload's counts and per-thread response times (`rtlab workload`, `rtlab show`).
pub fn outcome(record: &RunRecord) -> String {
    crate::to_text(|out| write_outcome(out, record))
}

fn write_outcome(out: &mut impl Write, record: &RunRecord) -> std::fmt::Result {
    let Some(outcome) = &record.workload else {
        return Ok(());
    };
    writeln!(
        out,
        "workload {} ({}, {})  run {}  {}",
        outcome.name,
        outcome.format,
        outcome.source,
        record.id,
        Nanos(record.duration_ns)
    )?;
    writeln!(
        out,
        "{:<14} {:<44} {:>6} {:>7} {:>8} {:>9} {:>9} {:>9}",
        "thread", "scheduling", "runs", "misses", "starved", "resp p50", "resp p99", "resp max"
    )?;
    for thread in &outcome.threads {
        let response = record.series.iter().find(|series| {
            series.class == thread.name && series.metric == rtlab_core::Metric::Response
        });
        let at = |key: &str| {
            response
                .and_then(|series| series.percentiles.get(key).copied())
                .map_or("-".to_owned(), |value| format!("{:.2}", value as f64 / 1e6))
        };
        writeln!(
            out,
            "{:<14} {:<44} {:>6} {:>7} {:>8} {:>9} {:>9} {:>9}",
            thread.name,
            thread.scheduling,
            thread.activations,
            thread.deadline_misses,
            thread.starvations,
            at("50"),
            at("99"),
            response.map_or("-".to_owned(), |series| format!(
                "{:.2}",
                series.max_ns as f64 / 1e6
            ))
        )?;
    }
    writeln!(out, "(response times in ms, release → completion)")?;
    for device in &outcome.devices {
        let first: Vec<String> = device
            .underrun_events
            .iter()
            .take(8)
            .map(|event| format!("{:.2}s", event.at_ns as f64 / 1e9))
            .collect();
        writeln!(
            out,
            "device {}: {} underruns in {} periods of {}{}",
            device.name,
            device.underruns,
            device.periods,
            Nanos(device.buffer_period_ns),
            if first.is_empty() {
                String::new()
            } else {
                format!(" (first at {})", first.join(", "))
            }
        )?;
    }
    write!(out, "{}", explained(&outcome.explained, 12))?;
    for warning in &record.warnings {
        writeln!(out, "warning: {warning}")?;
    }
    Ok(())
}

/// `running NAME (N threads) for DURATION…`: `rtlab workload`'s line on stderr as it starts.
pub fn start_line(name: &str, threads: usize, duration: Nanos) -> String {
    format!("running {name} ({threads} threads) for {duration}…")
}

/// `rtlab study media-player`'s explained glitches: `experiment N:` and its blocks (at most six,
/// as [`explained`] writes them) for each experiment that had any.
pub fn study_glitches(experiments: &[(u32, Vec<rtlab_core::ExplainedEvent>)]) -> String {
    let mut text = String::new();
    for (experiment, glitches) in experiments {
        if !glitches.is_empty() {
            text.push_str(&format!("experiment {experiment}:\n"));
            text.push_str(&explained(glitches, 6));
        }
    }
    text
}

/// The explained events as text, one block each: the cause in words, then the largest parts of
/// each thread's account (at most `limit` events; the rest are counted).
pub fn explained(explained: &[rtlab_core::ExplainedEvent], limit: usize) -> String {
    let mut out = String::new();
    let ms = |ns: u64| format!("{:.1}", ns as f64 / 1e6);
    for event in explained.iter().take(limit) {
        let _ = writeln!(
            out,
            "{} {} at {:.3}s: {}",
            event.kind.replace('_', " "),
            event.source,
            event.at_ns as f64 / 1e9,
            event.cause
        );
        for account in &event.accounts {
            let parts: Vec<String> = account
                .parts
                .iter()
                .take(4)
                .map(|part| format!("{} {} {} ms", part.kind.as_str(), part.name, ms(part.ns)))
                .collect();
            let _ = writeln!(out, "    {:<12} {}", account.thread, parts.join(", "));
        }
        if let Some(steal) = event.steal_ns.filter(|steal| *steal > 0) {
            let _ = writeln!(
                out,
                "    steal {} ms around the window (/proc/stat)",
                ms(steal)
            );
        }
    }
    if explained.len() > limit {
        let _ = writeln!(
            out,
            "… and {} more (all in --json)",
            explained.len() - limit
        );
    }
    let mut by_kind: std::collections::BTreeMap<rtlab_core::LatenessKind, usize> =
        std::collections::BTreeMap::new();
    for event in explained {
        *by_kind.entry(event.cause_kind).or_default() += 1;
    }
    if !by_kind.is_empty() {
        let counts: Vec<String> = by_kind
            .iter()
            .map(|(kind, count)| format!("{count} {}", kind.as_str()))
            .collect();
        let _ = writeln!(out, "causes: {}", counts.join(", "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::{
        DeviceOutcome, ExplainedEvent, LatenessKind, LatenessPart, ThreadAccount, ThreadOutcome,
        WorkloadEvent, WorkloadOutcome,
    };

    #[test]
    fn a_workload_outcome_matches_its_snapshot() {
        let mut record = RunRecord::new(
            "0123456789abcdef",
            "2026-11-23T10:00:00Z",
            5_000_000_000,
            Vec::new(),
        );
        record.workload = Some(WorkloadOutcome {
            name: "media-player".into(),
            format: "rtlab".into(),
            source: "examples/media-player.toml".into(),
            threads: vec![ThreadOutcome {
                name: "decoder".into(),
                scheduling: "SCHED_FIFO 10".into(),
                activations: 500,
                deadline_misses: 2,
                starvations: 0,
                ..ThreadOutcome::default()
            }],
            devices: vec![DeviceOutcome {
                name: "speaker".into(),
                underruns: 2,
                periods: 500,
                buffer_period_ns: 10_000_000,
                underrun_events: vec![WorkloadEvent {
                    at_ns: 1_250_000_000,
                    late_ns: None,
                }],
                ..DeviceOutcome::default()
            }],
            explained: vec![ExplainedEvent {
                kind: "underrun".into(),
                source: "speaker".into(),
                at_ns: 1_250_000_000,
                window_start_ns: 1_220_000_000,
                window_ns: 30_000_000,
                accounts: vec![ThreadAccount {
                    thread: "decoder".into(),
                    tid: 4242,
                    parts: vec![
                        LatenessPart {
                            kind: LatenessKind::Task,
                            name: "competitor[4250] SCHED_FIFO 50".into(),
                            pid: Some(4250),
                            ns: 24_000_000,
                            detail: None,
                        },
                        LatenessPart {
                            kind: LatenessKind::Ran,
                            name: "decoder".into(),
                            pid: Some(4242),
                            ns: 6_000_000,
                            detail: None,
                        },
                    ],
                }],
                device_late_ns: None,
                steal_ns: Some(1_500_000),
                cause: "competitor[4250] SCHED_FIFO 50 ran 24.0 ms of decoder's 30 ms".into(),
                cause_kind: LatenessKind::Task,
            }],
        });
        record.warnings = vec!["not root: no SCHED_FIFO".into()];
        insta::assert_snapshot!(outcome(&record));
    }
}
