//! `rtlab forecast --trace FILE`'s computation: from an application's trace (its analysis), the
//! periodic real-time thread to forecast for and its late activations; their response times
//! become plain numbers for `rtlab_analysis::forecast::trace_rates`, which says how often the
//! application glitches at its recorded buffering and at others; the periodic interferers among
//! the culprits (`rtlab_analysis::interference`). The answer is rtlab-analysis's
//! `trace_forecast::TraceForecast`, its words rtlab-render's.

use crate::analyze::report::{Culprit, NoPeriodicThread, PeriodicThread, ThreadRow, TraceReport};
use crate::analyze::LATE_ACTIVATIONS_LISTED;
use rtlab_analysis::forecast::{describe_trace_rate, trace_rates, TraceBuffering, TraceResponses};
use rtlab_analysis::interference::{describe, find_periodic, BurstRule, CulpritName, Sighting};
use rtlab_analysis::trace_forecast::{
    ForecastRow, ForecastThread, PeriodicFound, TraceForecast, RULE,
};

/// Why there is no forecast: the trace's fault (the words name what is missing).
#[derive(Debug, thiserror::Error)]
pub enum ForecastError {
    /// Not the thread `tid` names.
    #[error("{0}")]
    Thread(String),
    /// The recorded program has no periodic real-time thread (`reason`, None when the analysis
    /// gives none); `others` names those of other processes, for `--tid`.
    #[error(
        "{}{}",
        no_periodic_thread(reason.as_ref()),
        if others.is_empty() {
            String::new()
        } else {
            format!(
                " (periodic real-time threads of other processes, for --tid: {})",
                others.join(", ")
            )
        }
    )]
    NoPeriodicThread {
        reason: Option<NoPeriodicThread>,
        others: Vec<String>,
    },
    /// The responses do not make a forecast.
    #[error("{0}")]
    Rates(String),
}

/// The forecast for thread `tid` (else the recorded program's most urgent periodic real-time
/// thread) of `report`, its periods in frames at `sample_rate` when given.
pub fn forecast(
    report: &TraceReport,
    tid: Option<i32>,
    sample_rate: Option<u32>,
) -> Result<TraceForecast, ForecastError> {
    let thread = choose_thread(report, tid)?;
    let thread = &thread;
    let (responses, listed) = responses_of(report, thread);
    let period = thread.period_ns;
    let bufferings: Vec<TraceBuffering> = [period / 2, period, period * 2, period * 4]
        .into_iter()
        .flat_map(|period_ns| [2, 3].map(|buffers| TraceBuffering { buffers, period_ns }))
        .collect();
    let rates = trace_rates(&responses, &bufferings)
        .map_err(|error| ForecastError::Rates(error.to_string()))?;
    let recorded_frames =
        sample_rate.map(|rate| snap_frames(period as f64 * f64::from(rate) / 1e9));
    // The other periods are the recorded one's multiples, in frames as well.
    let frames_of = |period_ns: u64| {
        recorded_frames
            .map(|frames| (frames as f64 * period_ns as f64 / period as f64).round() as u64)
    };
    let recorded_s = responses.duration_ns as f64 / 1e9;
    let rows: Vec<ForecastRow> = rates
        .into_iter()
        .map(|rate| ForecastRow {
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
    Ok(TraceForecast {
        source: report.source.path.clone(),
        first_ns: report.first_ns,
        last_ns: report.last_ns,
        duration_ns: responses.duration_ns,
        sample_rate,
        thread: thread.clone(),
        glitches_listed: listed,
        rule: RULE,
        rows,
        periodic: periodic_culprits(report, thread.tid),
        warnings,
    })
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

/// Why the recorded program has no periodic real-time thread, in the error's words.
fn no_periodic_thread(reason: Option<&NoPeriodicThread>) -> String {
    let found = "no periodic real-time thread found";
    match reason {
        None => found.to_owned(),
        Some(NoPeriodicThread::NoThreadOfTheProgram) => {
            format!("{found}: the trace has no thread of the recorded program")
        }
        Some(&NoPeriodicThread::NonePeriodicAndRealTime {
            recorded,
            real_time,
            periodic_normal,
        }) => format!(
            "{found}: {recorded} thread{} recorded, {real_time} of them real-time{}{}",
            if recorded == 1 { "" } else { "s" },
            if real_time > 0 {
                ", none activated at a regular period"
            } else {
                " (SCHED_FIFO, SCHED_RR or SCHED_DEADLINE)"
            },
            if periodic_normal > 0 {
                format!("; {periodic_normal} periodic thread(s) run at normal priority")
            } else {
                String::new()
            }
        ),
    }
}

/// The thread to forecast for: `--tid`'s (a periodic real-time thread of the recorded program, or
/// of any process in a whole-system trace.dat), else the recorded program's most urgent one.
fn choose_thread(report: &TraceReport, tid: Option<i32>) -> Result<ForecastThread, ForecastError> {
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
                return Ok(of_periodic(thread));
            }
            report
                .threads
                .iter()
                .find(|row| row.tid == tid && row.kernel_prio < 100 && row.period_ns.is_some())
                .map(of_row)
                .ok_or_else(|| {
                    ForecastError::Thread(format!(
                        "thread {tid} is not a periodic real-time thread of the trace (those are: {})",
                        others().join(", ")
                    ))
                })
        }
        None => match periodic.threads.first() {
            Some(thread) => Ok(of_periodic(thread)),
            None => Err(ForecastError::NoPeriodicThread {
                reason: periodic.none_because,
                others: others(),
            }),
        },
    }
}

/// The thread of a periodic thread of the analysis.
fn of_periodic(thread: &PeriodicThread) -> ForecastThread {
    ForecastThread {
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

/// The thread of a row of the analysis.
fn of_row(row: &ThreadRow) -> ForecastThread {
    ForecastThread {
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
fn responses_of(report: &TraceReport, thread: &ForecastThread) -> (TraceResponses, u64) {
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
