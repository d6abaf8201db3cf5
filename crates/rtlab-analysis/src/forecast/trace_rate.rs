//! The forecast from an application's own trace (`rtlab forecast --trace`): how often it would
//! glitch at its recorded buffering and at others, from the response times the trace measured.
//!
//! The input is plain numbers: the recording's length, the thread's detected period `t` and mean
//! compute per activation `c`, and the response of every activation that passed the period (a
//! late activation: from its start to the end of its work; a gap without activation: the gap).
//! At its own buffering (double-buffered: the work must end before the next period begins) each
//! of those is one glitch. For `n` buffers of `t'` the deadline is `(n − 1)·t'`, and the work
//! takes `c·t'/t` instead of `c`; a recorded response `r` would fail that configuration when
//! `r + c·(t'/t − 1) > (n − 1)·t'`, i.e. when `r` exceeds the threshold
//! `θ = (n − 1)·t' − c·(t'/t − 1)`. The stalls that made the recorded responses long are taken to
//! arrive at the same rate whatever the buffering, so the glitch rate is the count over `θ`
//! divided by the recording's length, with an exact Poisson interval on that count.
//!
//! Responses shorter than the period are not in a trace's list of late activations, so a
//! configuration whose threshold is below the period is not forecast (its row says so).

use super::outcome::{poisson_interval, CONFIDENCE};
use super::words::describe_seconds;
use serde::Serialize;

/// What a trace measured of one periodic thread.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceResponses {
    /// From the trace's first event to its last.
    pub duration_ns: u64,
    /// The thread's detected period `t`.
    pub period_ns: u64,
    /// Its mean CPU time per activation `c`.
    pub compute_ns: u64,
    /// The response of each activation longer than the period, one entry per glitch.
    pub late_responses_ns: Vec<u64>,
    /// False when the trace's list was cut short: counts over a threshold are then lower bounds.
    pub complete: bool,
}

/// One alternative buffering: `buffers` buffers of `period_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TraceBuffering {
    pub buffers: u32,
    pub period_ns: u64,
}

/// The forecast for one buffering.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceRateRow {
    pub buffers: u32,
    pub period_ns: u64,
    /// `(n − 1)·t'`.
    pub deadline_ns: u64,
    /// The recorded response a glitch needs at this buffering (see the module doc); null when
    /// the threshold is below the period (not forecast).
    pub threshold_ns: Option<u64>,
    /// Recorded responses over the threshold.
    pub glitches: Option<u64>,
    /// Set when the trace's list was cut short: the count is a lower bound.
    pub lower_bound: bool,
    pub per_minute: Option<f64>,
    /// The exact Poisson interval at [`CONFIDENCE`].
    pub per_minute_low: Option<f64>,
    pub per_minute_high: Option<f64>,
    /// Mean time between glitches (null: none seen, or not forecast).
    pub mean_time_between_s: Option<f64>,
    /// Its interval: `low` from the rate's upper end, `high` null when unbounded.
    pub mean_time_between_low_s: Option<f64>,
    pub mean_time_between_high_s: Option<f64>,
}

/// Why a trace cannot be forecast from.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TraceRateError {
    #[error("the trace has no detected period")]
    ZeroPeriod,
    #[error("the trace is empty (no time between its first and last event)")]
    Empty,
    #[error("{0} buffers leave no slack (need at least 2)")]
    TooFewBuffers(u32),
    #[error("a buffer period of 0 is not a configuration")]
    ZeroBuffer,
}

/// The recorded response a glitch needs at `buffering`; None when below the period (the trace
/// lists no response that short).
pub fn glitch_threshold_ns(responses: &TraceResponses, buffering: TraceBuffering) -> Option<u64> {
    let deadline = f64::from(buffering.buffers - 1) * buffering.period_ns as f64;
    let extra_compute = responses.compute_ns as f64
        * (buffering.period_ns as f64 / responses.period_ns as f64 - 1.0);
    let threshold = deadline - extra_compute;
    (threshold >= responses.period_ns as f64).then(|| threshold.round() as u64)
}

/// A glitch rate per minute with its interval.
#[derive(Clone, Copy)]
struct RatePerMinute {
    rate: f64,
    low: f64,
    high: f64,
}

/// The forecast for each buffering.
pub fn trace_rates(
    responses: &TraceResponses,
    bufferings: &[TraceBuffering],
) -> Result<Vec<TraceRateRow>, TraceRateError> {
    if responses.period_ns == 0 {
        return Err(TraceRateError::ZeroPeriod);
    }
    if responses.duration_ns == 0 {
        return Err(TraceRateError::Empty);
    }
    let minutes = responses.duration_ns as f64 / 60e9;
    bufferings
        .iter()
        .map(|&buffering| {
            if buffering.buffers < 2 {
                return Err(TraceRateError::TooFewBuffers(buffering.buffers));
            }
            if buffering.period_ns == 0 {
                return Err(TraceRateError::ZeroBuffer);
            }
            let deadline_ns = u64::from(buffering.buffers - 1) * buffering.period_ns;
            let threshold_ns = glitch_threshold_ns(responses, buffering);
            let glitches = threshold_ns.map(|threshold| {
                responses
                    .late_responses_ns
                    .iter()
                    .filter(|&&response| response > threshold)
                    .count() as u64
            });
            let rates = glitches.map(|count| {
                let (low, high) = poisson_interval(count);
                RatePerMinute {
                    rate: count as f64 / minutes,
                    low: low / minutes,
                    high: high / minutes,
                }
            });
            let per_second = |per_minute: f64| per_minute / 60.0;
            Ok(TraceRateRow {
                buffers: buffering.buffers,
                period_ns: buffering.period_ns,
                deadline_ns,
                threshold_ns,
                glitches,
                lower_bound: !responses.complete,
                per_minute: rates.map(|rates| rates.rate),
                per_minute_low: rates.map(|rates| rates.low),
                per_minute_high: rates.map(|rates| rates.high),
                mean_time_between_s: rates
                    .filter(|rates| rates.rate > 0.0)
                    .map(|rates| 1.0 / per_second(rates.rate)),
                mean_time_between_low_s: rates.map(|rates| 1.0 / per_second(rates.high)),
                mean_time_between_high_s: rates
                    .filter(|rates| rates.low > 0.0)
                    .map(|rates| 1.0 / per_second(rates.low)),
            })
        })
        .collect()
}

/// The row in words: "at 256 frames (5.3 ms) × 2 you would see one xrun every 40 s (90 % CI
/// 25–70 s)". `frames` is the period in frames when the sample rate is known (an audio
/// application: its glitches are xruns).
pub fn describe_trace_rate(row: &TraceRateRow, frames: Option<u64>, recorded_s: f64) -> String {
    let period = describe_seconds(row.period_ns as f64 / 1e9);
    let at = match frames {
        Some(frames) => format!("at {frames} frames ({period}) × {}", row.buffers),
        None => format!("at {} buffers of {period}", row.buffers),
    };
    let event = if frames.is_some() { "xrun" } else { "glitch" };
    let confidence = (CONFIDENCE * 100.0).round();
    let Some(glitches) = row.glitches else {
        return format!(
            "{at}: not forecast — the work would have to end within the recorded period, and the trace lists only responses longer than it"
        );
    };
    let low = row
        .mean_time_between_low_s
        .map_or_else(String::new, describe_seconds);
    let at_least = if row.lower_bound { "at least " } else { "" };
    match (row.mean_time_between_s, row.mean_time_between_high_s) {
        (Some(mean), high) => format!(
            "{at} you would see {at_least}one {event} every {} ({confidence:.0} % CI {low} – {}; {glitches} in {})",
            describe_seconds(mean),
            high.map_or_else(|| "forever".to_owned(), describe_seconds),
            describe_seconds(recorded_s),
        ),
        (None, _) => format!(
            "{at} you would see no {event} in {} recorded: at most one every {low} ({confidence:.0} % upper bound)",
            describe_seconds(recorded_s),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn responses(late: &[u64]) -> TraceResponses {
        TraceResponses {
            duration_ns: 60_000 * MS,
            period_ns: 4 * MS,
            compute_ns: MS,
            late_responses_ns: late.iter().map(|ms| ms * MS).collect(),
            complete: true,
        }
    }

    fn row(responses: &TraceResponses, buffers: u32, period_ms: u64) -> TraceRateRow {
        trace_rates(
            responses,
            &[TraceBuffering {
                buffers,
                period_ns: period_ms * MS,
            }],
        )
        .unwrap()
        .remove(0)
    }

    #[test]
    fn every_late_response_is_a_glitch_at_the_recorded_buffering() {
        let recorded = responses(&[5, 6, 9, 13, 30]);
        let at_two = row(&recorded, 2, 4);
        assert_eq!(at_two.threshold_ns, Some(4 * MS));
        assert_eq!(at_two.glitches, Some(5));
        // 5 in a minute: 5 per minute, one every 12 s.
        assert!((at_two.per_minute.unwrap() - 5.0).abs() < 1e-9);
        assert!((at_two.mean_time_between_s.unwrap() - 12.0).abs() < 1e-9);
        let (low, high) = poisson_interval(5);
        assert!((at_two.per_minute_low.unwrap() - low).abs() < 1e-9);
        assert!((at_two.per_minute_high.unwrap() - high).abs() < 1e-9);
        assert!((at_two.mean_time_between_high_s.unwrap() - 60.0 / low).abs() < 1e-9);
    }

    #[test]
    fn more_buffers_fail_only_for_the_longer_responses() {
        let recorded = responses(&[5, 6, 9, 13, 30]);
        // 3 × 4 ms: deadline 8 ms, same compute.
        assert_eq!(row(&recorded, 3, 4).glitches, Some(3));
        // 4 × 4 ms: 12 ms.
        assert_eq!(row(&recorded, 4, 4).glitches, Some(2));
        // 2 × 8 ms: deadline 8 ms, but the work takes 1 ms more: threshold 7 ms.
        let longer = row(&recorded, 2, 8);
        assert_eq!(longer.threshold_ns, Some(7 * MS));
        assert_eq!(longer.glitches, Some(3));
        // 2 × 40 ms: threshold 40 − 9 = 31 ms: nothing recorded was that long.
        let none = row(&recorded, 2, 40);
        assert_eq!(none.glitches, Some(0));
        assert_eq!(none.mean_time_between_s, None);
        assert_eq!(none.mean_time_between_high_s, None);
        // None in a minute: at most one every 60 s / 3.0 (the 90 % upper end for 0 events).
        assert!(
            (none.mean_time_between_low_s.unwrap() - 60.0 / poisson_interval(0).1).abs() < 1e-9
        );
    }

    #[test]
    fn a_threshold_below_the_period_is_not_forecast() {
        let recorded = responses(&[5, 6]);
        // 2 × 2 ms: threshold 2 + 0.5 = 2.5 ms < 4 ms.
        let shorter = row(&recorded, 2, 2);
        assert_eq!(shorter.threshold_ns, None);
        assert_eq!(shorter.glitches, None);
        assert_eq!(shorter.per_minute, None);
        assert!(describe_trace_rate(&shorter, None, 60.0).contains("not forecast"));
        let words = describe_trace_rate(&row(&recorded, 3, 2), None, 60.0);
        assert!(
            words.starts_with("at 3 buffers of 2 ms you would see one glitch every 30 s"),
            "{words}"
        );
        // 3 × 2 ms: threshold 4 + 0.5 = 4.5 ms: forecast.
        assert_eq!(row(&recorded, 3, 2).glitches, Some(2));
    }

    #[test]
    fn a_cut_list_gives_lower_bounds_in_words() {
        let mut recorded = responses(&[5, 6, 9]);
        recorded.complete = false;
        let cut = row(&recorded, 2, 4);
        assert!(cut.lower_bound);
        let words = describe_trace_rate(&cut, Some(192), 60.0);
        assert!(
            words.starts_with(
                "at 192 frames (4 ms) × 2 you would see at least one xrun every 20 s (90 % CI"
            ),
            "{words}"
        );
    }

    #[test]
    fn bad_configurations_are_errors() {
        let recorded = responses(&[5]);
        let one = [TraceBuffering {
            buffers: 1,
            period_ns: MS,
        }];
        assert_eq!(
            trace_rates(&recorded, &one),
            Err(TraceRateError::TooFewBuffers(1))
        );
        let mut empty = responses(&[]);
        empty.duration_ns = 0;
        assert_eq!(trace_rates(&empty, &[]), Err(TraceRateError::Empty));
        let mut no_period = responses(&[]);
        no_period.period_ns = 0;
        assert_eq!(
            trace_rates(&no_period, &[]),
            Err(TraceRateError::ZeroPeriod)
        );
    }
}
