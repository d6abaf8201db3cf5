//! `rtlab trace`'s report as JSON (schema `rtlab.trace/1`, docs/trace.md): [`TraceReportJson`]
//! is the report with each late activation's `explanation` in words, every other field as the
//! report holds it and in its order. Whatever writes a `TraceReport` or a `LateActivation` as
//! JSON (`trace analyze --json`, `trace watch --json`) writes it through this view.

use rtlab_core::apptrace_report::Culprit;
use rtlab_core::apptrace_report::{
    CycleMarkers, DeadlineSource, Hang, Inversion, LateActivation, LateKind, PathStep, PiBoost,
    SourceInfo, Starvation, ThreadRef, ThreadRow, TraceReport,
};
use rtlab_core::header::OutputHeader;
use serde::Serialize;

/// A [`TraceReport`] as `--json` writes it. Built by destructuring the report whole, so a field
/// added to it does not compile until it is added here too.
#[derive(Debug, Serialize)]
pub struct TraceReportJson<'a> {
    #[serde(flatten)]
    header: &'a OutputHeader,
    source: &'a SourceInfo,
    first_ns: u64,
    last_ns: u64,
    duration_ns: u64,
    n_events: u64,
    lost_events: u64,
    hang_threshold_ns: u64,
    starve_threshold_ns: u64,
    threads: &'a [ThreadRow],
    inversions: &'a [Inversion],
    pi_boosts: &'a [PiBoost],
    hangs: &'a [Hang],
    starvation: &'a [Starvation],
    late_activations: Vec<LateActivationJson<'a>>,
    late_activations_total: u64,
    missed_periods_total: u64,
    deadline_source: DeadlineSource,
    #[serde(skip_serializing_if = "Option::is_none")]
    cycle_markers: &'a Option<CycleMarkers>,
    warnings: &'a [String],
}

impl<'a> TraceReportJson<'a> {
    pub fn of(report: &'a TraceReport) -> TraceReportJson<'a> {
        let TraceReport {
            header,
            source,
            first_ns,
            last_ns,
            duration_ns,
            n_events,
            lost_events,
            hang_threshold_ns,
            starve_threshold_ns,
            threads,
            inversions,
            pi_boosts,
            hangs,
            starvation,
            late_activations,
            late_activations_total,
            missed_periods_total,
            deadline_source,
            cycle_markers,
            warnings,
        } = report;
        TraceReportJson {
            header,
            source,
            first_ns: *first_ns,
            last_ns: *last_ns,
            duration_ns: *duration_ns,
            n_events: *n_events,
            lost_events: *lost_events,
            hang_threshold_ns: *hang_threshold_ns,
            starve_threshold_ns: *starve_threshold_ns,
            threads,
            inversions,
            pi_boosts,
            hangs,
            starvation,
            late_activations: late_activations
                .iter()
                .map(LateActivationJson::of)
                .collect(),
            late_activations_total: *late_activations_total,
            missed_periods_total: *missed_periods_total,
            deadline_source: *deadline_source,
            cycle_markers,
            warnings,
        }
    }
}

/// A [`LateActivation`] as JSON (`trace watch --json` writes one a line): `explanation` in
/// words (`apptrace_words::explanation`).
#[derive(Debug, Serialize)]
pub struct LateActivationJson<'a> {
    kind: LateKind,
    thread: &'a ThreadRef,
    at_ns: u64,
    period_ns: u64,
    response_ns: u64,
    periods: u64,
    deadlines_missed: u64,
    culprit: &'a Option<Culprit>,
    explanation: String,
    critical_path: &'a [PathStep],
}

impl<'a> LateActivationJson<'a> {
    pub fn of(late: &'a LateActivation) -> LateActivationJson<'a> {
        let LateActivation {
            kind,
            thread,
            at_ns,
            period_ns,
            response_ns,
            periods,
            deadlines_missed,
            culprit,
            explanation,
            critical_path,
        } = late;
        LateActivationJson {
            kind: *kind,
            thread,
            at_ns: *at_ns,
            period_ns: *period_ns,
            response_ns: *response_ns,
            periods: *periods,
            deadlines_missed: *deadlines_missed,
            culprit,
            explanation: crate::apptrace_words::explanation(explanation),
            critical_path,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::apptrace_report::Explanation;
    use serde_json::Value;

    fn keys(value: &Value) -> Vec<String> {
        value
            .as_object()
            .expect("an object")
            .keys()
            .cloned()
            .collect()
    }

    fn report() -> TraceReport {
        let late = LateActivation {
            kind: LateKind::Late,
            thread: ThreadRef {
                tid: 7,
                name: "client".into(),
                priority: 70,
            },
            at_ns: 1_000,
            period_ns: 2_666_667,
            response_ns: 6_000_000,
            periods: 1,
            deadlines_missed: 1,
            culprit: None,
            explanation: Explanation::OwnWork {
                own_ns: 6_000_000,
                response_ns: 6_000_000,
            },
            critical_path: Vec::new(),
        };
        TraceReport {
            header: OutputHeader::now(rtlab_core::apptrace_report::SCHEMA, None),
            source: SourceInfo {
                path: "t.rtrace".into(),
                format: "rtlab-trace v1".into(),
                clock: None,
            },
            first_ns: 0,
            last_ns: 1,
            duration_ns: 1,
            n_events: 1,
            lost_events: 0,
            hang_threshold_ns: 1,
            starve_threshold_ns: 1,
            threads: Vec::new(),
            inversions: Vec::new(),
            pi_boosts: Vec::new(),
            hangs: Vec::new(),
            starvation: Vec::new(),
            late_activations: vec![late],
            late_activations_total: 1,
            missed_periods_total: 0,
            deadline_source: DeadlineSource::Inferred,
            cycle_markers: Some(CycleMarkers {
                n_markers: 1,
                thread: ThreadRef {
                    tid: 7,
                    name: "client".into(),
                    priority: 70,
                },
                period_ns: None,
                overruns: 0,
            }),
            warnings: Vec::new(),
        }
    }

    /// The view writes the report's keys, and only `explanation` differs (words for the
    /// structure): a field added to the report and not to the view fails here (and does not
    /// compile, the view destructuring the report whole). The texts compared whole also hold the
    /// keys' order.
    #[test]
    fn the_view_is_the_report_with_the_explanation_in_words() {
        let report = report();
        let plain = serde_json::to_value(&report).unwrap();
        let view = serde_json::to_value(TraceReportJson::of(&report)).unwrap();
        assert_eq!(keys(&view), keys(&plain));
        assert_eq!(
            keys(&view["late_activations"][0]),
            keys(&plain["late_activations"][0])
        );
        let words = "its own work: 6 ms of CPU in a 6 ms response (nothing else in the trace)";
        assert_eq!(view["late_activations"][0]["explanation"], words);
        let structure = serde_json::to_string(&report.late_activations[0].explanation).unwrap();
        let plain_text = serde_json::to_string(&report).unwrap();
        assert!(plain_text.contains(&structure), "{plain_text}");
        assert_eq!(
            serde_json::to_string(&TraceReportJson::of(&report)).unwrap(),
            plain_text.replace(&structure, &serde_json::to_string(words).unwrap())
        );
    }
}
