//! The verdict at the end of a run: for each application class, can this machine run it — yes,
//! no, or "measure longer" — and the single worst thing the run found.
//!
//! A run's tables answer "how late"; users come with "can this machine run my audio at 128
//! frames?". This module turns a Run record into that answer with the forecast of
//! [`crate::forecast`] (rt-high wake-ups pooled over CPUs, the tail projection beyond the data)
//! and names the worst delay in one phrase ("7.3 ms stalls from the hypervisor every ~16 s"), from
//! the explained episodes when there are any, else from the largest samples the series kept.
//! Only the decision is here; `rtlab_render::run_verdict` writes it for people.

use crate::classes::ApplicationClass;
use crate::forecast::{
    decide, describe_seconds, forecast, probe_evidence, select_series, verdict, Basis,
    BufferConfig, Counting, Decision, Forecast, LatencyEvidence, Model, TailModel, VerdictKind,
};
use crate::interference::{describe, periodic_in_run};
use crate::projection::ProjectedTail;
use rtlab_core::{CauseKind, Episode, Metric, RunRecord};
use serde::Serialize;

pub use crate::tail::PRACTICALLY_NEVER_S;

/// Samples within this time of each other on one CPU are one event (one stall delays several
/// wake-ups of several classes).
const SAME_EVENT_NS: u64 = 20_000_000;

/// One class's answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClassVerdict {
    pub name: String,
    pub description: String,
    /// Suitable or not only when the MTTF's whole interval says so; else undetermined.
    pub kind: VerdictKind,
    /// "one glitch every 9 days", "practically never", "none in 20 s".
    pub mttf_text: String,
    /// The acceptable rate in words: "one per day".
    pub acceptable_text: String,
    /// The forecast's full sentence (with intervals), for `--verbose` and the HTML report;
    /// `None` when the verdict was taken at [`Detail::Decision`].
    pub detail: Option<String>,
    /// The whole forecast; `None` where [`Detail::Decision`] decided without it.
    pub forecast: Option<Forecast>,
}

/// How much of each class's forecast a verdict computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    /// Only what the verdict line shows: a tail projection's interval is computed only when it
    /// straddles what the class needs (its ends are then shown), else one exact test decides.
    /// The same verdict lines as `Full` at a fraction of the cost (the after-run analysis,
    /// BENCHMARKS.md "CPU cost per sample").
    Decision,
    /// Every class's whole forecast and its sentence.
    Full,
}

/// The worst delay of the run, in one phrase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorstThing {
    /// "7.3 ms stalls from the hypervisor every ~16 s (CPU 1)".
    pub text: String,
    pub latency_ns: u64,
    pub cpu: u32,
    /// Events at least half as bad as the worst.
    pub events: u64,
    /// What caused it, when the run was explained.
    pub cause: Option<String>,
}

/// The verdict block.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunVerdict {
    /// `rt-high/wakeup` (pooled over CPUs): what the classes were judged on.
    pub series: String,
    pub classes: Vec<ClassVerdict>,
    pub worst: Option<WorstThing>,
    /// Periodic interferers in the judged series' stalls, in words ("qhog7 (SCHED_FIFO 95) runs
    /// 2.6 ms every 70.0 ms on both CPUs …"); the class lines above assume stalls random in
    /// time, and `rtlab forecast` ranges over how such bursts line up (issue 35).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub periodic: Vec<String>,
    /// Why there is no class verdict (no wake-up series, …).
    pub no_forecast: Option<String>,
}

/// A mean time between failures in words, "practically never" past [`PRACTICALLY_NEVER_S`].
pub fn mttf_in_words(seconds: f64, event: &str) -> String {
    if !seconds.is_finite() || seconds > PRACTICALLY_NEVER_S {
        "practically never".to_owned()
    } else {
        format!("one {event} every {}", describe_seconds(seconds))
    }
}

/// "one per 10 min", "one per day".
fn acceptable_in_words(class: &ApplicationClass) -> String {
    let seconds = class.acceptable.mean_interval_s();
    let unit = match seconds.round() as u64 {
        3_600 => "hour".to_owned(),
        86_400 => "day".to_owned(),
        604_800 => "week".to_owned(),
        _ => describe_seconds(seconds),
    };
    format!("one per {unit}")
}

fn class_verdict(
    class: &ApplicationClass,
    evidence: LatencyEvidence<'_>,
    duration_s: f64,
    detail: Detail,
) -> Option<ClassVerdict> {
    let config = BufferConfig::of_class(class);
    let needed = class.acceptable.mean_interval_s();
    // The response model where the probe's own series are there (issue 27), else per-period.
    let model = if evidence.probe.is_some() {
        Model::Response
    } else {
        Model::PerPeriod
    };
    let evidence = LatencyEvidence {
        chain: class.chain,
        counting: class.counting,
        ..evidence
    };
    let description = format!("{} ({})", class.description, class.assumption());
    let row = match detail {
        Detail::Full => forecast(evidence, config, model).ok()?,
        Detail::Decision => match decide(evidence, config, model, needed).ok()? {
            Decision::Forecast(row) => row,
            Decision::Decided { suitable, mttf_s } => {
                return Some(ClassVerdict {
                    name: class.name.clone(),
                    description,
                    kind: if suitable {
                        VerdictKind::Suitable
                    } else {
                        VerdictKind::NotSuitable
                    },
                    mttf_text: mttf_in_words(mttf_s, "glitch"),
                    acceptable_text: acceptable_in_words(class),
                    detail: None,
                    forecast: None,
                })
            }
        },
    };
    // Decided only when the whole interval of the MTTF is on one side of what the class needs;
    // a point estimate on the right side with an interval across the line is "measure longer".
    // Stalls during the compute not measured: the MTTF is only an upper bound, which can say
    // "not suitable" but never "suitable".
    let upper_bound_only = matches!(
        row.basis,
        Basis::Response {
            compute_measured: false,
            ..
        }
    );
    let kind = match (&row.basis, row.mttf_ci_s) {
        (Basis::NoSlack, _) => VerdictKind::NotSuitable,
        (_, [Some(lower), _]) if lower >= needed && !upper_bound_only => VerdictKind::Suitable,
        (_, [_, Some(upper)]) if upper < needed => VerdictKind::NotSuitable,
        _ => VerdictKind::Undetermined,
    };
    let event = "glitch";
    let range = match row.mttf_ci_s {
        [Some(lower), Some(upper)] if kind == VerdictKind::Undetermined => format!(
            " (could be {}–{})",
            describe_seconds(lower),
            describe_seconds(upper)
        ),
        _ => String::new(),
    };
    let mttf_text = match (&row.basis, row.mttf_s, kind) {
        (Basis::NoSlack, _, _) => "fails every period (no slack)".to_owned(),
        (_, Some(mttf), _) if upper_bound_only => format!(
            "at most {}{range} (stalls during the compute not measured: `rtlab run --compute`)",
            mttf_in_words(mttf, event)
        ),
        (_, Some(mttf), _) => format!("{}{range}", mttf_in_words(mttf, event)),
        (Basis::BeyondData { .. }, None, VerdictKind::Suitable) => match row.mttf_ci_s[0] {
            Some(lower) if lower > PRACTICALLY_NEVER_S => "practically never".to_owned(),
            Some(lower) => format!("less than one {event} every {}", describe_seconds(lower)),
            None => "none seen".to_owned(),
        },
        (_, None, _) => format!("none in {}", describe_seconds(duration_s)),
    };
    Some(ClassVerdict {
        name: class.name.clone(),
        description,
        kind,
        mttf_text,
        acceptable_text: acceptable_in_words(class),
        detail: (detail == Detail::Full).then(|| verdict(class, &row).text),
        forecast: Some(row),
    })
}

/// The cause of an episode in words, from its largest cause.
fn cause_in_words(episode: &Episode) -> Option<(String, String)> {
    let cause = episode.causes.iter().max_by_key(|cause| cause.ns)?;
    let key = format!("{}:{}", cause.kind.as_str(), cause.name);
    let words = match cause.kind {
        CauseKind::Unaccounted if episode.steal_ns.is_some_and(|steal| steal > 0) => {
            "the hypervisor".to_owned()
        }
        CauseKind::Unaccounted => format!("time nobody traced ({})", cause.name),
        CauseKind::Irq => format!("interrupt {}", cause.name),
        CauseKind::Softirq => format!("softirq {}", cause.name),
        CauseKind::Task => match cause.pid {
            Some(pid) => format!("task {} [{pid}]", cause.name),
            None => format!("task {}", cause.name),
        },
        CauseKind::Timer if cause.name.starts_with("timer ") => {
            format!("the {}", cause.name.replace("fired", "firing"))
        }
        CauseKind::Timer => format!("timer {}", cause.name),
        CauseKind::Switch => "context switches".to_owned(),
    };
    Some((key, words))
}

fn latency_words(nanos: u64) -> String {
    crate::tail::format_latency(nanos as f64)
}

fn how_often(events: u64, duration_s: f64) -> String {
    if events <= 1 || duration_s <= 0.0 {
        format!("once in {}", describe_seconds(duration_s))
    } else {
        format!("every ~{}", describe_seconds(duration_s / events as f64))
    }
}

/// Counts events at least `floor_ns` late on `cpu`, merging samples within [`SAME_EVENT_NS`].
fn events_on(mut times: Vec<u64>) -> u64 {
    times.sort_unstable();
    let mut events = 0;
    let mut last: Option<u64> = None;
    for at in times {
        if last.is_none_or(|previous| at.saturating_sub(previous) > SAME_EVENT_NS) {
            events += 1;
        }
        last = Some(at);
    }
    events
}

/// The single worst thing a run found in the wake-ups of `class` (every class when `None`).
pub fn worst_thing(record: &RunRecord, class: Option<&str>) -> Option<WorstThing> {
    let duration_s = record.duration_ns as f64 / 1e9;
    let of_class = |label: &str| class.is_none_or(|class| label.starts_with(&format!("{class}/")));
    if let Some(worst) = record
        .episodes
        .iter()
        .filter(|episode| of_class(&episode.series))
        .max_by_key(|episode| episode.latency_ns)
    {
        if let Some((key, words)) = cause_in_words(worst) {
            let floor = worst.latency_ns / 2;
            let times: Vec<u64> = record
                .episodes
                .iter()
                .filter(|episode| {
                    episode.cpu == worst.cpu
                        && episode.latency_ns >= floor
                        && of_class(&episode.series)
                })
                .filter(|episode| cause_in_words(episode).is_some_and(|(other, _)| other == key))
                .map(|episode| episode.at_ns)
                .collect();
            let events = events_on(times).max(1);
            return Some(WorstThing {
                text: format!(
                    "{} stalls from {words} {} (CPU {})",
                    latency_words(worst.latency_ns),
                    how_often(events, duration_s),
                    worst.cpu
                ),
                latency_ns: worst.latency_ns,
                cpu: worst.cpu,
                events,
                cause: Some(words),
            });
        }
    }
    let wakeups = record.series.iter().filter(|series| {
        series.metric == Metric::Wakeup && series.count > 0 && of_class(&series.label())
    });
    let worst = wakeups.clone().max_by_key(|series| series.max_ns)?;
    let floor = worst.max_ns / 2;
    let times: Vec<u64> = wakeups
        .filter(|series| series.cpu == worst.cpu)
        .flat_map(|series| series.peaks.iter())
        .filter(|peak| peak.value_ns >= floor)
        .map(|peak| peak.at_ns)
        .collect();
    let events = events_on(times).max(1);
    let guess = if record.host.virtualization != "none"
        && !record.host.virtualization.is_empty()
        && record.host.virtualization != "unknown"
        && worst.max_ns >= 1_000_000
        && record.load.is_none()
        && worst.policy != "SCHED_OTHER"
    {
        format!(
            "; likely the hypervisor ({} guest); `--explain` names the cause",
            record.host.virtualization
        )
    } else {
        "; `--explain` names the cause".to_owned()
    };
    Some(WorstThing {
        text: format!(
            "{} late {} wake-ups on CPU {} {}{guess}",
            latency_words(worst.max_ns),
            worst.class,
            worst.cpu,
            how_often(events, duration_s)
        ),
        latency_ns: worst.max_ns,
        cpu: worst.cpu,
        events,
        cause: None,
    })
}

/// The verdict of every class in `classes` on the run's rt-high wake-ups (or its only class),
/// computed to `detail`.
pub fn run_verdict(record: &RunRecord, classes: &[ApplicationClass], detail: Detail) -> RunVerdict {
    let selection = match select_series(record, None) {
        Ok(selection) => selection,
        Err(error) => {
            let worst = worst_thing(record, None);
            return RunVerdict {
                series: String::new(),
                classes: Vec::new(),
                worst,
                periodic: Vec::new(),
                no_forecast: Some(error.to_string()),
            };
        }
    };
    let class = selection.label.split('/').next().unwrap_or_default();
    let worst = worst_thing(record, Some(class));
    let tail = ProjectedTail::fit(&selection.histogram).ok();
    let probe = probe_evidence(record, class);
    let evidence = LatencyEvidence {
        histogram: &selection.histogram,
        tail: tail.as_ref().map(|tail| tail as &dyn TailModel),
        probe: probe.as_ref(),
        chain: 1,
        counting: Counting::Restart,
    };
    let duration_s = record.duration_ns as f64 / 1e9;
    let judged: Vec<ClassVerdict> = classes
        .iter()
        .filter_map(|class| class_verdict(class, evidence, duration_s, detail))
        .collect();
    let no_forecast = if judged.is_empty() {
        Some(format!("{}: no samples to forecast from", selection.label))
    } else {
        None
    };
    let periodic = periodic_in_run(record, class)
        .iter()
        .map(|interferer| describe(interferer, &selection.cpus))
        .collect();
    RunVerdict {
        series: selection.label,
        classes: judged,
        worst,
        periodic,
        no_forecast,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classes::builtin_classes;
    use rtlab_core::{Cause, LatencyHistogram, Peak};

    fn record_with(values: &[(u64, u64)], peaks: Vec<Peak>, duration_s: u64) -> RunRecord {
        let mut histogram = LatencyHistogram::new();
        for (value, count) in values {
            histogram.record_n(*value, *count);
        }
        let series =
            rtlab_core::rt_high_wakeup_series(1, &histogram, 0, Vec::new(), peaks).unwrap();
        let mut record = RunRecord::new(
            "r",
            "2026-01-01T00:00:00Z",
            duration_s * 1_000_000_000,
            vec![series],
        );
        record.host.virtualization = "kvm".to_owned();
        record
    }

    #[test]
    fn practically_never_past_a_century() {
        assert_eq!(mttf_in_words(9.2e54, "glitch"), "practically never");
        assert_eq!(mttf_in_words(f64::INFINITY, "glitch"), "practically never");
        assert_eq!(
            mttf_in_words(3_600.0 * 5.0, "glitch"),
            "one glitch every 5 h"
        );
    }

    /// The verdict lines a run ends with are the same whether every interval was computed or
    /// only the ones the lines show; only the details are left out.
    #[test]
    fn a_decision_verdict_says_what_the_full_one_says() {
        // 100 000 wake-ups: 20 µs, and the quantiles of a GPD tail over it (ξ, σ), so that the
        // classes beyond the data fall on both sides of their needs and across them.
        let tail = |xi: f64, sigma_ns: f64| -> Vec<(u64, u64)> {
            let n = 100_000;
            (0..n)
                .map(|i| {
                    let survival = 1.0 - (i as f64 + 0.5) / n as f64;
                    let excess = sigma_ns * (survival.powf(-xi) - 1.0) / xi;
                    (20_000 + excess as u64, 1)
                })
                .collect()
        };
        let mut decided = std::collections::BTreeSet::new();
        for (xi, sigma_ns) in [(0.2, 5_000.0), (0.3, 20_000.0), (0.4, 100_000.0)] {
            let record = record_with(&tail(xi, sigma_ns), Vec::new(), 100);
            let full = run_verdict(&record, &builtin_classes(), Detail::Full);
            let decision = run_verdict(&record, &builtin_classes(), Detail::Decision);
            let lines = |verdict: &RunVerdict| {
                verdict
                    .classes
                    .iter()
                    .map(|class| (class.name.clone(), class.kind, class.mttf_text.clone()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(lines(&decision), lines(&full));
            assert!(full.classes.iter().all(|class| class.detail.is_some()));
            assert!(decision.classes.iter().all(|class| class.detail.is_none()));
            decided.extend(
                decision
                    .classes
                    .iter()
                    .filter(|class| class.forecast.is_none())
                    .map(|class| format!("{:?}", class.kind)),
            );
        }
        // Both answers were reached by the exact test alone somewhere.
        assert_eq!(decided.len(), 2, "{decided:?}");
    }

    #[test]
    fn classes_get_yes_no_or_measure_longer() {
        // 10 minutes at 1 kHz, 20 µs typical, thirty 3 ms stalls.
        let record = record_with(&[(20_000, 600_000), (3_000_000, 30)], Vec::new(), 600);
        let verdict = run_verdict(&record, &builtin_classes(), Detail::Full);
        assert_eq!(verdict.series, "rt-high/wakeup");
        let kind = |name: &str| {
            verdict
                .classes
                .iter()
                .find(|class| class.name == name)
                .unwrap()
                .kind
        };
        // 250 µs fieldbus cycles miss 30 times in 10 minutes: not suitable.
        assert_eq!(kind("fieldbus-250us"), VerdictKind::NotSuitable);
        // 33 ms video buffering never ran dry and the data covers 10 minutes: no number, either
        // suitable by the bound or undetermined, never "not suitable".
        assert_ne!(kind("rt-video"), VerdictKind::NotSuitable);
        let fieldbus = verdict
            .classes
            .iter()
            .find(|class| class.name == "fieldbus-250us")
            .unwrap();
        assert!(
            fieldbus.mttf_text.starts_with("one glitch every"),
            "{}",
            fieldbus.mttf_text
        );
        assert_eq!(fieldbus.acceptable_text, "one per day");
    }

    #[test]
    fn worst_thing_counts_events_not_samples_and_guesses_the_hypervisor_in_a_guest() {
        let peaks = vec![
            Peak {
                at_ns: 1_000_000_000,
                value_ns: 7_300_000,
            },
            Peak {
                at_ns: 1_001_000_000,
                value_ns: 6_300_000,
            },
            Peak {
                at_ns: 17_000_000_000,
                value_ns: 7_000_000,
            },
            Peak {
                at_ns: 33_000_000_000,
                value_ns: 6_900_000,
            },
            Peak {
                at_ns: 40_000_000_000,
                value_ns: 100_000,
            },
        ];
        let record = record_with(
            &[
                (20_000, 47_995),
                (7_300_000, 1),
                (6_300_000, 1),
                (7_000_000, 1),
                (6_900_000, 1),
                (100_000, 1),
            ],
            peaks,
            48,
        );
        let worst = worst_thing(&record, None).unwrap();
        assert_eq!(worst.events, 3);
        assert_eq!(
            worst.text,
            "7.30 ms late rt-high wake-ups on CPU 1 every ~16 s; likely the hypervisor (kvm guest); `--explain` names the cause"
        );
    }

    #[test]
    fn worst_thing_names_the_explained_cause() {
        let mut record = record_with(&[(20_000, 1_000), (7_300_000, 2)], Vec::new(), 32);
        let episode = |at_ns: u64, steal: u64| Episode {
            series: "rt-high/wakeup@1".to_owned(),
            cpu: 1,
            at_ns,
            latency_ns: 7_300_000,
            causes: vec![Cause {
                kind: CauseKind::Unaccounted,
                name: "vanished".to_owned(),
                pid: None,
                ns: 7_000_000,
                detail: None,
            }],
            steal_ns: Some(steal),
            stack: None,
            timeline: Vec::new(),
        };
        record.episodes = vec![
            episode(1_000_000_000, 7_000_000),
            episode(17_000_000_000, 6_000_000),
        ];
        let worst = worst_thing(&record, None).unwrap();
        assert_eq!(
            worst.text,
            "7.30 ms stalls from the hypervisor every ~16 s (CPU 1)"
        );
        assert_eq!(worst.cause.as_deref(), Some("the hypervisor"));
    }

    #[test]
    fn a_record_without_wakeups_has_no_forecast_but_says_why() {
        let record = RunRecord::new("r", "2026-01-01T00:00:00Z", 1, Vec::new());
        let verdict = run_verdict(&record, &builtin_classes(), Detail::Full);
        assert!(verdict.classes.is_empty());
        assert!(verdict.no_forecast.is_some());
        assert!(verdict.worst.is_none());
    }

    #[test]
    fn a_periodic_interferer_is_named_in_the_verdict() {
        // 30 s at 1 ms: a 2.6 ms burst every 70 ms, one late sample each (1.6–2.6 ms).
        let peaks: Vec<Peak> = (0..428u64)
            .map(|index| {
                let latency = 1_600_000 + (index * 389_000) % 1_000_000;
                Peak {
                    at_ns: 5_000_000 + index * 70_000_000 - latency,
                    value_ns: latency,
                }
            })
            .collect();
        let values: Vec<(u64, u64)> = peaks
            .iter()
            .map(|peak| (peak.value_ns, 1))
            .chain([(20_000, 29_000)])
            .collect();
        let record = record_with(&values, peaks, 30);
        let verdict = run_verdict(&record, &builtin_classes(), Detail::Decision);
        assert_eq!(verdict.periodic.len(), 1, "{:?}", verdict.periodic);
        assert!(
            verdict.periodic[0].contains("holds the CPU for 2.6 ms every 70.0 ms on CPU 1"),
            "{}",
            verdict.periodic[0]
        );
        // Random stalls alone name nothing.
        let record = record_with(&[(20_000, 29_000), (2_000_000, 40)], Vec::new(), 30);
        assert!(run_verdict(&record, &builtin_classes(), Detail::Decision)
            .periodic
            .is_empty());
    }
}
