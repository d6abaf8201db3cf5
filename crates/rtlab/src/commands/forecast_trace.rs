//! `rtlab forecast --trace FILE`: the forecast from an application's own trace (an `rtlab trace`
//! recording or a trace-cmd trace.dat). The trace analysis finds the application's periodic
//! real-time thread and its late activations; their response times become plain numbers for
//! `rtlab_analysis::forecast::trace_rates`, which says how often the application glitches at its
//! recorded buffering and at others.

use crate::output::PendingOutput;
use rtlab_analysis::forecast::{
    describe_trace_rate, trace_rates, TraceBuffering, TraceRateRow, TraceResponses,
};
use rtlab_analysis::interference::{
    describe, find_periodic, BurstRule, CulpritName, PeriodicInterferer, Sighting,
};
use rtlab_apptrace::analyze::report::{Culprit, PeriodicThread, ThreadRow, TraceReport};
use rtlab_apptrace::analyze::AnalysisConfig;
use rtlab_apptrace::analyze::LATE_ACTIVATIONS_LISTED;
use rtlab_apptrace::source::SourceError;
use serde::Serialize;
use std::path::Path;
use std::process::ExitCode;

/// The `schema` of `rtlab forecast --trace --json`.
pub const FORECAST_TRACE_SCHEMA: &str = "rtlab.forecast-trace/1";

/// The rule a row's count follows, in the JSON and the docs.
const RULE: &str = "each late activation (work ended after the next period began) or gap without activation in the trace is one glitch at the recorded buffering (2 buffers of the detected period); at n buffers of t' it is one when its response plus the extra compute c·(t'/t − 1) exceeds (n − 1)·t'";

/// What `--trace` was given.
pub struct TraceRequest<'a> {
    pub file: &'a Path,
    pub sample_rate: Option<u32>,
    pub tid: Option<i32>,
}

#[derive(Clone, Serialize)]
struct ThreadInfo {
    tid: i32,
    name: String,
    policy: String,
    priority: i32,
    period_ns: u64,
    activations: u64,
    compute_mean_ns: u64,
    late_activations: u64,
    missed_periods: u64,
}

#[derive(Serialize)]
struct Row {
    #[serde(flatten)]
    rate: TraceRateRow,
    /// The period in frames, with `--rate`.
    frames: Option<u64>,
    /// This row is the recorded buffering.
    recorded: bool,
    words: String,
}

#[derive(Serialize)]
struct Output {
    source: String,
    /// The trace's first and last event (the recording's clock: CLOCK_MONOTONIC for `rtlab
    /// trace record`).
    first_ns: u64,
    last_ns: u64,
    duration_ns: u64,
    sample_rate: Option<u32>,
    thread: ThreadInfo,
    /// Late activations and gaps of the thread listed in the trace analysis.
    glitches_listed: u64,
    rule: &'static str,
    rows: Vec<Row>,
    /// Periodic interferers among the culprits of the thread's late activations (issue 35).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    periodic: Vec<PeriodicFound>,
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct PeriodicFound {
    #[serde(flatten)]
    interferer: PeriodicInterferer,
    text: String,
}

pub fn run(request: TraceRequest, json: Option<PendingOutput>) -> anyhow::Result<ExitCode> {
    let header = crate::output::header(rtlab_apptrace::analyze::report::SCHEMA, None);
    let (report, _) =
        rtlab_apptrace::source::analyze_path(request.file, AnalysisConfig::default(), header)
            // Unreadable or malformed: the user's input either way (the message names the file).
            .map_err(|error: SourceError| crate::exit::input(error))?;
    let name = request.file.display();
    let thread = choose_thread(&report, request.tid)
        .map_err(|reason| crate::exit::input(format!("{name}: {reason}")))?;
    let thread = &thread;
    let (responses, listed) = responses_of(&report, thread);
    let period = thread.period_ns;
    let bufferings: Vec<TraceBuffering> = [period / 2, period, period * 2, period * 4]
        .into_iter()
        .flat_map(|period_ns| [2, 3].map(|buffers| TraceBuffering { buffers, period_ns }))
        .collect();
    let rates = trace_rates(&responses, &bufferings)
        .map_err(|error| crate::exit::input(format!("{name}: {error}")))?;
    let recorded_frames = request
        .sample_rate
        .map(|rate| snap_frames(period as f64 * f64::from(rate) / 1e9));
    // The other periods are the recorded one's multiples, in frames as well.
    let frames_of = |period_ns: u64| {
        recorded_frames
            .map(|frames| (frames as f64 * period_ns as f64 / period as f64).round() as u64)
    };
    let recorded_s = responses.duration_ns as f64 / 1e9;
    let rows: Vec<Row> = rates
        .into_iter()
        .map(|rate| Row {
            frames: frames_of(rate.period_ns),
            recorded: rate.period_ns == period && rate.buffers == 2,
            words: describe_trace_rate(&rate, frames_of(rate.period_ns), recorded_s),
            rate,
        })
        .collect();
    let mut warnings = report.warnings.clone();
    if responses.duration_ns < report.duration_ns {
        warnings.push(format!(
            "the analysis lists the first {} late activations (of every thread): the forecast covers the first {:.1} s of the {:.1} s recorded, where every one is listed",
            report.late_activations.len(),
            responses.duration_ns as f64 / 1e9,
            report.duration_ns as f64 / 1e9,
        ));
    } else if !responses.complete {
        warnings.push(
            "the analysis's list of late activations was cut: the counts are lower bounds"
                .to_owned(),
        );
    }
    if report.lost_events > 0 {
        warnings.push(format!(
            "the recording lost {} events: late activations may be missing",
            report.lost_events
        ));
    }
    let output = Output {
        source: report.source.path.clone(),
        first_ns: report.first_ns,
        last_ns: report.last_ns,
        duration_ns: responses.duration_ns,
        sample_rate: request.sample_rate,
        thread: thread.clone(),
        glitches_listed: listed,
        rule: RULE,
        rows,
        periodic: periodic_culprits(&report, thread.tid),
        warnings,
    };
    let to_stdout = json.as_ref().is_some_and(PendingOutput::is_stdout);
    if !to_stdout {
        crate::output::print(&render(&output))?;
    }
    if let Some(json) = json {
        json.commit_json(FORECAST_TRACE_SCHEMA, None, &output)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The periodic interferers among the thread-culprits of `tid`'s late activations: each is a
/// sighting that ended where the culprit's segment of the critical path ended (the path's
/// segments follow each other from the activation), as long as the culprit held the thread
/// there. Only the bursts that made a job late are seen, which the period fit allows for.
fn periodic_culprits(report: &TraceReport, tid: i32) -> Vec<PeriodicFound> {
    let mut sightings = Vec::new();
    for late in report
        .late_activations
        .iter()
        .filter(|late| late.thread.tid == tid)
    {
        let Some(Culprit::Thread {
            tid: culprit_tid,
            name,
            policy,
            priority,
            ns,
        }) = &late.culprit
        else {
            continue;
        };
        let mut elapsed = 0u64;
        let mut found = None;
        for step in &late.critical_path {
            elapsed += step.ns;
            let by_culprit = step.culprits.iter().any(
                |culprit| matches!(culprit, Culprit::Thread { tid, .. } if tid == culprit_tid),
            );
            if by_culprit {
                found = Some(step.cpu);
                break;
            }
        }
        let Some(cpu) = found else {
            continue;
        };
        sightings.push(Sighting {
            end_ns: late.at_ns + elapsed,
            length_ns: *ns,
            cpu,
            culprit: Some(CulpritName {
                name: name.clone(),
                policy: Some(format!("{policy} {priority}")),
            }),
        });
    }
    find_periodic(&sightings, BurstRule::Overlaps)
        .into_iter()
        .map(|interferer| PeriodicFound {
            text: describe(&interferer, &interferer.cpus),
            interferer,
        })
        .collect()
}

/// The thread to forecast for: `--tid`'s (a periodic real-time thread of the recorded program, or
/// of any process in a whole-system trace.dat), else the recorded program's most urgent one.
fn choose_thread(report: &TraceReport, tid: Option<i32>) -> Result<ThreadInfo, String> {
    let periodic = report.periodic_threads();
    // Any thread of the trace with a period and a real-time priority (a trace.dat records the
    // whole system; its recorded program may be another).
    let others = || {
        report
            .threads
            .iter()
            .filter(|row| row.kernel_prio < 100 && row.period_ns.is_some())
            .map(|row| format!("{} {}", row.tid, row.name))
            .collect::<Vec<_>>()
    };
    match tid {
        Some(tid) => {
            if let Some(thread) = periodic.threads.iter().find(|thread| thread.tid == tid) {
                return Ok(ThreadInfo::of_periodic(thread));
            }
            report
                .threads
                .iter()
                .find(|row| row.tid == tid && row.kernel_prio < 100 && row.period_ns.is_some())
                .map(ThreadInfo::of_row)
                .ok_or_else(|| {
                    format!(
                        "thread {tid} is not a periodic real-time thread of the trace (those are: {})",
                        others().join(", ")
                    )
                })
        }
        None => match periodic.threads.first() {
            Some(thread) => Ok(ThreadInfo::of_periodic(thread)),
            None => {
                let reason = periodic
                    .none_because
                    .unwrap_or_else(|| "no periodic real-time thread found".to_owned());
                let others = others();
                Err(if others.is_empty() {
                    reason
                } else {
                    format!(
                        "{reason} (periodic real-time threads of other processes, for --tid: {})",
                        others.join(", ")
                    )
                })
            }
        },
    }
}

impl ThreadInfo {
    fn of_periodic(thread: &PeriodicThread) -> ThreadInfo {
        ThreadInfo {
            tid: thread.tid,
            name: thread.name.clone(),
            policy: thread.policy.clone(),
            priority: thread.priority,
            period_ns: thread.period_ns,
            activations: thread.activations,
            compute_mean_ns: thread.cpu_per_activation_ns.mean,
            late_activations: thread.late,
            missed_periods: thread.missed_periods,
        }
    }

    fn of_row(row: &ThreadRow) -> ThreadInfo {
        ThreadInfo {
            tid: row.tid,
            name: row.name.clone(),
            policy: row.policy.clone(),
            priority: row.priority,
            period_ns: row.period_ns.unwrap_or(0),
            activations: row.activations,
            compute_mean_ns: row.cpu_per_activation_ns.mean,
            late_activations: row.late_activations,
            missed_periods: row.missed_periods,
        }
    }
}

/// The recorded period in frames: a detected period is a little longer than the application's
/// (its skipped cycles stretch the median interval), so within 3 % of a power of two — what
/// audio servers use — it is that power of two.
fn snap_frames(frames: f64) -> u64 {
    let power = 2f64.powf(frames.max(1.0).log2().round());
    if (frames - power).abs() <= power * 0.03 {
        power as u64
    } else {
        frames.round() as u64
    }
}

/// The thread's late responses from the analysis: one per listed late activation or gap.
///
/// The analysis lists at most [`LATE_ACTIVATIONS_LISTED`] entries, the earliest of every thread.
/// When it cut the list, every late activation up to the last listed one is listed: the
/// forecast then covers the recording up to there, complete, rather than the whole of it with a
/// lower bound. (A thread's total also counts a job's second xrun, which JACK reports
/// microseconds after the first: the same glitch, so it is not compared with the list.)
fn responses_of(report: &TraceReport, thread: &ThreadInfo) -> (TraceResponses, u64) {
    let cut = report.late_activations.len() >= LATE_ACTIVATIONS_LISTED;
    let listed_until = report
        .late_activations
        .iter()
        .map(|late| late.at_ns)
        .max()
        .filter(|_| cut);
    let late_responses_ns: Vec<u64> = report
        .late_activations
        .iter()
        .filter(|late| late.thread.tid == thread.tid)
        .map(|late| late.response_ns)
        .collect();
    let listed = late_responses_ns.len() as u64;
    let duration_ns = match listed_until {
        Some(until) if until > report.first_ns => until - report.first_ns,
        _ => report.duration_ns,
    };
    (
        TraceResponses {
            duration_ns,
            period_ns: thread.period_ns,
            compute_ns: thread.compute_mean_ns,
            late_responses_ns,
            complete: listed_until.is_none_or(|until| until > report.first_ns),
        },
        listed,
    )
}

fn render(output: &Output) -> String {
    use std::fmt::Write as _;
    let thread = &output.thread;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{}: thread {} {} ({} {}) runs every {:.3} ms, {:.3} ms of work per activation on average",
        output.source,
        thread.tid,
        thread.name,
        thread.policy,
        thread.priority,
        thread.period_ns as f64 / 1e6,
        thread.compute_mean_ns as f64 / 1e6,
    );
    let _ = writeln!(
        text,
        "recorded {:.1} s: {} activations, {} late activations or gaps listed\n",
        output.duration_ns as f64 / 1e9,
        thread.activations,
        output.glitches_listed,
    );
    for found in &output.periodic {
        let _ = writeln!(text, "periodic: {}", found.text);
    }
    if !output.periodic.is_empty() {
        text.push('\n');
    }
    let _ = writeln!(
        text,
        "{:>8} {:>10} {:>7} {:>9} {:>8} {:>14} {:>24}",
        "frames", "period", "buffers", "deadline", "glitches", "per minute", "one every (90 % CI)"
    );
    for row in &output.rows {
        let rate = &row.rate;
        let frames = row
            .frames
            .map_or("-".to_owned(), |frames| frames.to_string());
        let glitches = rate.glitches.map_or("-".to_owned(), |count| {
            format!("{count}{}", if rate.lower_bound { "+" } else { "" })
        });
        let per_minute = rate
            .per_minute
            .map_or("-".to_owned(), |value| format!("{value:.2}"));
        let every = match (rate.glitches, rate.mean_time_between_s) {
            (None, _) => "not forecast".to_owned(),
            (Some(_), Some(mean)) => format!(
                "{} ({}–{})",
                rtlab_analysis::forecast::describe_seconds(mean),
                rate.mean_time_between_low_s
                    .map_or("?".to_owned(), rtlab_analysis::forecast::describe_seconds),
                rate.mean_time_between_high_s.map_or(
                    "forever".to_owned(),
                    rtlab_analysis::forecast::describe_seconds
                ),
            ),
            (Some(_), None) => format!(
                "≥ {}",
                rate.mean_time_between_low_s
                    .map_or("?".to_owned(), rtlab_analysis::forecast::describe_seconds)
            ),
        };
        let _ = writeln!(
            text,
            "{frames:>8} {:>10} {:>7} {:>9} {glitches:>8} {per_minute:>14} {every:>24}{}",
            format!("{:.3} ms", rate.period_ns as f64 / 1e6),
            rate.buffers,
            format!("{:.2} ms", rate.deadline_ns as f64 / 1e6),
            if row.recorded { "  ← recorded" } else { "" },
        );
    }
    text.push('\n');
    for row in &output.rows {
        let _ = writeln!(text, "{}", row.words);
    }
    let _ = writeln!(text, "\nrule: {}", output.rule);
    for warning in &output.warnings {
        let _ = writeln!(text, "warning: {warning}");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::snap_frames;

    #[test]
    fn a_detected_period_near_a_power_of_two_is_that_many_frames() {
        assert_eq!(snap_frames(64.5), 64);
        assert_eq!(snap_frames(129.0), 128);
        assert_eq!(snap_frames(126.0), 128);
        assert_eq!(snap_frames(1024.0), 1024);
        assert_eq!(snap_frames(96.0), 96);
        assert_eq!(snap_frames(480.4), 480);
    }
}
