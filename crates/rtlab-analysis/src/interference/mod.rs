//! Periodic interference: a task that takes the CPUs for a burst every period (a SCHED_FIFO
//! spinner, a periodic driver thread), found in what rtlab records and named (issue 35).
//!
//! A latency distribution cannot say what such a task does to an application: its bursts and
//! the application's cycle are both timer driven, so where they meet stays put for a run and
//! sets how many cycles fail. Finding the task — its period, its burst, its CPUs and how steady
//! it is — is the first step: `find.rs` fits the period from when stalls ended, `sightings.rs`
//! reads the stalls of a Run record (the explain episodes, named; the probe's late samples,
//! unnamed), and [`describe`] says it in one line: "qhog7 (SCHED_FIFO 95) runs 2.6 ms every
//! 70.0 ms on both CPUs". An application trace's late activations become sightings in the CLI
//! (`commands/forecast_trace.rs`), which has the trace analysis.

mod alignment;
mod find;
mod sightings;

pub use alignment::{
    alignment_rates, alignment_rates_with_rest, failures_of_burst, AlignmentRates,
};
pub use find::{
    find_periodic, BurstRule, CulpritName, Member, PeriodicInterferer, Sighting, MIN_BURSTS,
    STEADY_JITTER,
};
pub use sightings::{run_sightings, RunSightings, LATE_FLOOR_NS, MEDIAN_MULTIPLE};

use rtlab_core::RunRecord;

/// The periodic interferers of `class`'s wake-up series in `record`, the most bursts first:
/// from the explain episodes when they show one (then named), else from the probe's late
/// samples (unnamed).
pub fn periodic_in_run(record: &RunRecord, class: &str) -> Vec<PeriodicInterferer> {
    let sightings = run_sightings(record, class);
    let rule = BurstRule::ProbeSamples {
        period_ns: sightings.probe_period_ns,
    };
    let named = find_periodic(&sightings.named, rule);
    if !named.is_empty() {
        return named;
    }
    find_periodic(&sightings.samples, rule)
}

/// A duration in ms the way the report prints periods and bursts: "2.6 ms", "70.0 ms",
/// "0.04 ms".
fn millis(ns: u64) -> String {
    let value = ns as f64 / 1e6;
    if value < 0.1 {
        format!("{value:.2} ms")
    } else {
        format!("{value:.1} ms")
    }
}

/// "both CPUs", "all 4 CPUs", "CPU 1", "CPUs 0 and 2".
fn cpus_in_words(cpus: &[u32], measured: &[u32]) -> String {
    let all = !cpus.is_empty() && measured.iter().all(|cpu| cpus.contains(cpu));
    match (cpus, all) {
        ([], _) => "a CPU".to_owned(),
        ([_, _], true) if measured.len() == 2 => "both CPUs".to_owned(),
        (_, true) if cpus.len() > 2 => format!("all {} CPUs", cpus.len()),
        ([cpu], _) => format!("CPU {cpu}"),
        _ => {
            let names: Vec<String> = cpus.iter().map(u32::to_string).collect();
            let (last, rest) = names.split_last().expect("not empty");
            format!("CPUs {} and {last}", rest.join(", "))
        }
    }
}

/// Who it is: "qhog7 (SCHED_FIFO 95)", "qhog0, qhog1 (SCHED_FIFO 95)", or an unnamed task.
pub fn name_of(interferer: &PeriodicInterferer) -> String {
    let mut names: Vec<&str> = interferer
        .members
        .iter()
        .filter_map(|member| member.culprit.as_ref())
        .map(|culprit| culprit.name.as_str())
        .collect();
    names.dedup();
    if names.is_empty() {
        return "an unnamed task (`rtlab run --explain` names it)".to_owned();
    }
    let policy = interferer
        .members
        .iter()
        .find_map(|member| member.culprit.as_ref()?.policy.clone());
    match policy {
        Some(policy) => format!("{} ({policy})", names.join(", ")),
        None => names.join(", "),
    }
}

/// The interferer in one line, against the CPUs `measured`: "qhog7 (SCHED_FIFO 95) runs 2.6 ms
/// every 70.0 ms on both CPUs (steady to ±0.02 ms over 856 bursts)", or, when its period is
/// not steady, "… about every 70.0 ms …, but not steadily (±7.4 ms between bursts, 11 % of its
/// period)".
pub fn describe(interferer: &PeriodicInterferer, measured: &[u32]) -> String {
    let name = name_of(interferer);
    let several = interferer.members.len() > 1;
    let verb = if name.starts_with("an unnamed") {
        "holds the CPU for"
    } else if several {
        "run"
    } else {
        "runs"
    };
    let mut place = cpus_in_words(&interferer.cpus, measured);
    if several && interferer.cpus.len() > 1 {
        place.push_str(if interferer.at_once {
            ", at once"
        } else {
            ", one CPU at a time"
        });
    }
    let (burst, note) = if interferer.burst_max_ns > interferer.burst_ns {
        (
            format!(
                "{}–{}",
                millis(interferer.burst_ns).trim_end_matches(" ms"),
                millis(interferer.burst_max_ns)
            ),
            "; every burst met the probe's wake-ups at one point of the probe's period, so its length is known only to within that period",
        )
    } else {
        (millis(interferer.burst_ns), "")
    };
    let period = millis(interferer.period_ns);
    let jitter = millis(interferer.jitter_ns);
    if interferer.steady {
        format!(
            "{name} {verb} {burst} every {period} on {place} (steady to ±{jitter} over {} bursts{note})",
            interferer.bursts_seen
        )
    } else {
        let share = 100.0 * interferer.jitter_ns as f64 / interferer.period_ns.max(1) as f64;
        format!(
            "{name} {verb} {burst} about every {period} on {place}, but not steadily (±{jitter} between bursts, {share:.0} % of its period{note})"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interferer(steady: bool, named: bool, cpus: Vec<u32>) -> PeriodicInterferer {
        PeriodicInterferer {
            members: vec![Member {
                culprit: named.then(|| CulpritName {
                    name: "qhog7".to_owned(),
                    policy: Some("SCHED_FIFO 95".to_owned()),
                }),
                cpus: cpus.clone(),
                phase_ns: 0,
                bursts_seen: 428,
            }],
            period_ns: 70_000_000,
            burst_ns: 2_600_000,
            burst_max_ns: 2_600_000,
            cpus,
            at_once: true,
            bursts_seen: 428,
            jitter_ns: if steady { 20_000 } else { 7_400_000 },
            steady,
            burst_ends_ns: Vec::new(),
        }
    }

    #[test]
    fn the_issue_s_sentence() {
        assert_eq!(
            describe(&interferer(true, true, vec![0, 1]), &[0, 1]),
            "qhog7 (SCHED_FIFO 95) runs 2.6 ms every 70.0 ms on both CPUs (steady to ±0.02 ms over 428 bursts)"
        );
        assert_eq!(
            describe(&interferer(false, false, vec![1]), &[0, 1]),
            "an unnamed task (`rtlab run --explain` names it) holds the CPU for 2.6 ms about every 70.0 ms on CPU 1, but not steadily (±7.4 ms between bursts, 11 % of its period)"
        );
        assert_eq!(cpus_in_words(&[0, 1, 2, 3], &[0, 1, 2, 3]), "all 4 CPUs");
        assert_eq!(cpus_in_words(&[0, 2], &[0, 1, 2, 3]), "CPUs 0 and 2");
    }
}
