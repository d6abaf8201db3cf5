//! The timer study's part of the Run record (`rtlab timers`): what each Linux timer API delivered
//! per scheduling class, and the change experiment (paper 004's measure/change pair).
//!
//! A study is an ordinary Run record with no series and this object in its `timers` field, so the
//! history, `rtlab show` and every JSON consumer treat it like any other measurement.

use serde::{Deserialize, Serialize};

/// Every API the study measures, by the name of the function a program calls.
pub const TIMER_APIS: [&str; 12] = [
    "clock_nanosleep_abs",
    "clock_nanosleep_rel",
    "nanosleep",
    "usleep",
    "timerfd",
    "timer_create",
    "setitimer",
    "poll",
    "epoll_wait",
    "select",
    "pthread_cond_timedwait",
    "io_uring",
];

/// The classes every API is measured in.
pub const TIMER_CLASSES: [&str; 3] = ["normal", "normal-slack1ns", "rt-high"];

/// A whole study: one row per (api, mode, class, requested interval).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimerStudy {
    /// The CPU every measuring thread was pinned to.
    pub cpu: u32,
    #[serde(default)]
    pub rows: Vec<TimerRow>,
    /// Cells that could not be measured, each with the plain reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<UnavailableCell>,
    /// Plain-word findings derived from the rows.
    #[serde(default)]
    pub findings: Vec<String>,
    /// Present in a `--change-experiment` record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_experiment: Option<ChangeExperiment>,
}

/// What one API delivered in one class for one requested interval: the times between
/// consecutive returns ("callbacks"), as paper 000 measured its multimedia timer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimerRow {
    /// The function's name, one of [`TIMER_APIS`].
    pub api: String,
    /// How the loop asks: `absolute` (next deadline += period), `relative` (sleep/timeout of one
    /// period per iteration), `periodic` (the kernel re-arms: timerfd, timer_create, setitimer)
    /// or `rearmed` (timerfd set again as a one-shot each iteration).
    pub mode: String,
    /// One of [`TIMER_CLASSES`].
    pub class: String,
    pub policy: String,
    pub priority: i32,
    /// The measuring thread's timer slack while it measured (PR_GET_TIMERSLACK).
    pub timer_slack_ns: u64,
    pub requested_ns: u64,
    /// The timeout the call was really given: `requested_ns` rounded up to whole ms for
    /// poll/epoll_wait and to whole µs for usleep/select/setitimer (0 in older records: the
    /// request).
    #[serde(default)]
    pub asked_ns: u64,
    /// Intervals measured.
    pub count: u64,
    pub mean_ns: f64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// (mean − requested) / requested, parts per million: how fast a loop built on it drifts.
    pub drift_ppm: f64,
    /// Intervals shorter than a quarter of the requested one: the timer catching up.
    pub catchups: u64,
    /// Periods that produced no callback: overruns the API reported, or gaps (an interval of
    /// about k periods counts k − 1) for APIs that report none.
    pub skipped: u64,
    /// `reported` (the API's overrun count) or `gaps` (counted from the intervals).
    pub skipped_from: String,
    /// The intervals as an HdrHistogram (V2 compressed, base64), for plots and re-analysis.
    pub hdr: String,
}

impl TimerStudy {
    /// Checks what renderers rely on: ordered statistics and histograms that decode and agree
    /// with `count`. The error is `(JSON path, message)`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        for (index, row) in self.rows.iter().enumerate() {
            let path = format!("timers.rows[{index}]");
            if row.count > 0
                && !(row.min_ns <= row.p50_ns
                    && row.p50_ns <= row.p99_ns
                    && row.p99_ns <= row.max_ns)
            {
                return Err((
                    path,
                    format!(
                        "{}: statistics out of order: min {} p50 {} p99 {} max {}",
                        row.label(),
                        row.min_ns,
                        row.p50_ns,
                        row.p99_ns,
                        row.max_ns
                    ),
                ));
            }
            let histogram = crate::LatencyHistogram::from_base64(&row.hdr)
                .map_err(|error| (format!("{path}.hdr"), format!("{}: {error}", row.label())))?;
            if histogram.count() != row.count {
                return Err((
                    format!("{path}.hdr"),
                    format!(
                        "{}: holds {} intervals but 'count' says {}",
                        row.label(),
                        histogram.count(),
                        row.count
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl TimerRow {
    /// `api/mode class` — the label tables and plots use.
    pub fn label(&self) -> String {
        format!("{}/{} {}", self.api, self.mode, self.class)
    }
}

/// A cell the study could not measure, and why (no io_uring, not root, …).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnavailableCell {
    pub api: String,
    pub mode: String,
    /// `None` when no class could measure it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    pub reason: String,
}

/// Summary statistics of one measured distribution, with its histogram.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DelayStats {
    pub count: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// HdrHistogram V2 compressed, base64.
    pub hdr: String,
}

/// Paper 004's pair on Linux: another process changes a setting, this one measures itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChangeExperiment {
    /// How long each setting was held, ns.
    pub hold_ns: u64,
    /// The requested sleep of the measuring thread, ns.
    pub sleep_ns: u64,
    /// The measuring thread's policy (`SCHED_OTHER`: timer slack applies to it).
    pub policy: String,
    pub steps: Vec<ChangeStep>,
    pub restored: Restoration,
}

/// One setting held by the changer process, and what the measuring thread saw meanwhile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChangeStep {
    /// Plain description (`cpu_dma_latency not held`, `cpu_dma_latency 0 µs`, `timer slack 1 ns`).
    pub setting: String,
    /// The value the changer held on /dev/cpu_dma_latency, µs; None when it held nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_dma_latency_us: Option<i32>,
    /// The value in force (the minimum of every holder's) read while the step ran, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_dma_latency_in_force_us: Option<i64>,
    /// The measuring thread's timer slack as it read it itself during the step.
    pub timer_slack_ns: u64,
    /// Actual − intended wake time of an absolute 1-period sleep.
    pub wakeup: DelayStats,
    /// How long a relative sleep of one period really took.
    pub sleep: DelayStats,
    /// Wake-up latency of a SCHED_FIFO 90 thread on another CPU meanwhile (no slack applies
    /// to it, so what cpu_dma_latency does shows alone); absent without a second CPU or RT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt_wakeup: Option<DelayStats>,
}

/// What was put back at the end, read back after restoring.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Restoration {
    pub timer_slack_ns_before: u64,
    pub timer_slack_ns_after: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_dma_latency_before_us: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_dma_latency_after_us: Option<i64>,
    /// True once the changer process has exited (its /dev/cpu_dma_latency request with it).
    pub changer_exited: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_study_round_trips_through_json() {
        let study = TimerStudy {
            cpu: 1,
            rows: vec![TimerRow {
                api: "epoll_wait".into(),
                mode: "relative".into(),
                class: "rt-high".into(),
                policy: "SCHED_FIFO".into(),
                priority: 90,
                timer_slack_ns: 0,
                requested_ns: 1_000_000,
                asked_ns: 1_000_000,
                count: 10,
                mean_ns: 1_050_000.0,
                min_ns: 1_010_000,
                p50_ns: 1_040_000,
                p99_ns: 1_100_000,
                max_ns: 1_100_000,
                drift_ppm: 50_000.0,
                catchups: 0,
                skipped: 0,
                skipped_from: "gaps".into(),
                hdr: String::new(),
            }],
            unavailable: vec![],
            findings: vec!["x".into()],
            change_experiment: None,
        };
        let text = serde_json::to_string(&study).unwrap();
        assert!(text.contains("\"requested_ns\":1000000"));
        assert_eq!(serde_json::from_str::<TimerStudy>(&text).unwrap(), study);
        // Its histogram is missing: a record holding it is refused, naming the field.
        let (path, message) = study.validate().unwrap_err();
        assert_eq!(path, "timers.rows[0].hdr");
        assert!(
            message.starts_with("epoll_wait/relative rt-high"),
            "{message}"
        );
        let mut record = crate::RunRecord::new("x", "2026-01-01T00:00:00Z", 1, vec![]);
        record.timers = Some(study);
        let error = crate::RunRecord::from_json(&record.to_json_pretty()).unwrap_err();
        assert!(error.to_string().contains("timers.rows[0].hdr"), "{error}");
    }
}
