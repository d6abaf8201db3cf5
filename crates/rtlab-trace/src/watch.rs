//! Watching a program live: `rtlab trace watch`'s observation loop, also `reserve --auto`'s
//! observation ([`observe`]), `rtlab tune --app`'s count per round and the daemon's
//! `[[rtkit.reserve]]` observer. A recording (`record::record`) analysed window by window
//! (`live`), each window's late activations counted into a `rtlab_core::watch_summary`
//! ([`count_window`], with the culprit each is blamed on), and the stop rules: the duration, the
//! caller's stop flag, the program's end ([`EndWatcher`]).

use crate::analyze::report::{Culprit, LateActivation, LateKind, SourceInfo, TraceReport};
use crate::analyze::{AnalysisConfig, CycleRule};
use crate::cycle_marker::{CycleMarker, PIPEWIRE_PRESET};
use crate::file::FileHeader;
use crate::live::{LiveSink, WindowedAnalyzer};
use crate::record::{RecordConfig, RecordError, RecordSummary, RecorderChoice, Target};
use rtlab_core::header::OutputHeader;
use rtlab_core::watch_summary::{Blame, CountedMiss, WatchSummary, WatchedMiss};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The culprit the analysis names for the whole miss (`culprit`: the one that took the most
/// time over its critical path), counted under `label` (the caller's words for it:
/// `rtlab_render::apptrace_words::culprit_label`).
pub fn blame_of(late: &LateActivation, label: String) -> Blame {
    match &late.culprit {
        Some(culprit) => Blame {
            label,
            reservable: matches!(
                culprit,
                Culprit::Thread { .. } | Culprit::Throttled { .. } | Culprit::Migration { .. }
            ),
            ns: culprit.ns(),
        },
        None => Blame {
            label,
            reservable: false,
            ns: late.response_ns,
        },
    }
}

/// Counts one window's misses as `trace watch` does (the watched threads' late activations, in
/// time order, each counted under its culprit's `label`, the words rtlab-render gives it:
/// `rtlab_render::apptrace_words::culprit_label`; `seen` sees each with its blame and the
/// thread's need).
pub fn count_window(
    summary: &mut WatchSummary,
    report: &TraceReport,
    label: impl Fn(&LateActivation) -> String,
    mut seen: impl FnMut(&LateActivation, &Blame, u64),
) {
    if report.n_events > 0 {
        summary.see(report.first_ns, report.last_ns);
    }
    let watched = rtlab_core::apptrace_report::watched_threads(report);
    let mut lates: Vec<&LateActivation> = report
        .late_activations
        .iter()
        .filter(|late| watched.contains(&late.thread.tid))
        .collect();
    lates.sort_by_key(|late| late.at_ns);
    for late in lates {
        let blame = blame_of(late, label(late));
        let row = report.threads.iter().find(|row| row.tid == late.thread.tid);
        let need = row.map_or(0, |row| row.cpu_per_cycle_ns.p99);
        let miss = CountedMiss {
            tid: late.thread.tid,
            thread_name: &late.thread.name,
            periods: late.deadlines_missed.max(1),
            period_ns: late.period_ns,
            need_ns: need,
        };
        summary.add(miss, &blame);
        seen(late, &blame, need);
    }
}

/// A miss as rtlab-render prints it, `start_ns` the first event watched.
pub fn watched_miss(late: &LateActivation, need_ns: u64, start_ns: u64) -> WatchedMiss<'_> {
    WatchedMiss {
        seconds: late.at_ns.saturating_sub(start_ns) as f64 / 1e9,
        thread_name: &late.thread.name,
        tid: late.thread.tid,
        periods_without_activation: match late.kind {
            LateKind::Late => None,
            LateKind::Missed => Some(late.periods),
        },
        response_ns: late.response_ns,
        period_ns: late.period_ns,
        need_ns,
        explanation: &late.explanation,
    }
}

/// How `reserve --auto` would name the watched program (`--comm jackd`, `--pid 42`); `None`
/// for a command rtlab started.
pub fn reserve_flag(target: &Target) -> Option<String> {
    match target {
        Target::Comm(name) => Some(format!("--comm {name}")),
        Target::Pid(pid) => Some(format!("--pid {pid}")),
        Target::Command(_) => None,
    }
}

/// The cycle marker and the work-done marker to record, if any.
#[derive(Clone, Copy, Debug, Default)]
pub struct Markers<'a> {
    pub cycle: Option<&'a CycleMarker>,
    pub work_done: Option<&'a CycleMarker>,
}

/// The counting rule a cycle marker's threads are judged by: PipeWire's for its preset.
pub fn cycle_rule(marker: Option<&CycleMarker>) -> CycleRule {
    match marker {
        Some(marker) if marker.spec == PIPEWIRE_PRESET => CycleRule::Pipewire,
        _ => CycleRule::Jack,
    }
}

/// What to watch and how.
#[derive(Clone, Debug)]
pub struct WatchConfig<'a> {
    pub target: &'a Target,
    /// Until the program ends or the stop flag when `None`.
    pub duration: Option<Duration>,
    /// Each window's length (`live::DEFAULT_WINDOW_NS`; `u64::MAX` for one window, the whole).
    pub window_ns: u64,
    pub recorder: RecorderChoice,
    pub markers: Markers<'a>,
}

/// Records the target and hands every window's analysis to `window` until the duration, the
/// target's end or `stop`.
pub fn watch_windows(
    config: &WatchConfig<'_>,
    stop: &AtomicBool,
    mut window: impl FnMut(TraceReport),
) -> Result<RecordSummary, RecordError> {
    let target = config.target;
    let record_config = RecordConfig {
        target: target.clone(),
        duration: config.duration,
        cycle_marker: config.markers.cycle.cloned(),
        work_done_marker: config.markers.work_done.cloned(),
        recorder: config.recorder,
        ..RecordConfig::default()
    };
    let header = OutputHeader::now(crate::analyze::report::SCHEMA, None);
    let file_header = FileHeader::for_recording(header.clone(), target.describe());
    let source = SourceInfo {
        path: target.describe(),
        format: "live".into(),
        clock: Some("mono".into()),
    };
    let analysis = AnalysisConfig {
        cycle_rule: cycle_rule(config.markers.cycle),
        ..AnalysisConfig::default()
    };
    let mut live = WindowedAnalyzer::new(analysis, config.window_ns, header, source);
    let summary = {
        let sink = LiveSink::new(|event| {
            if let Some(report) = live.push(event) {
                window(report);
            }
        });
        let recorded = crate::record::record(&record_config, sink, file_header, stop, |_| {});
        recorded.map(|(_, summary)| summary)
    }?;
    if let Some(report) = live.finish() {
        window(report);
    }
    Ok(summary)
}

/// Why an observation has no answer.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("the observation of {0} recorded nothing")]
    Nothing(String),
}

/// Records `target` for `duration` and analyses it whole: `reserve --auto`'s observation.
pub fn observe(
    target: &Target,
    duration: Duration,
    cycle_marker: Option<&CycleMarker>,
    stop: &AtomicBool,
) -> Result<TraceReport, ObserveError> {
    let mut whole = None;
    let config = WatchConfig {
        target,
        duration: Some(duration),
        window_ns: u64::MAX,
        recorder: RecorderChoice::Auto,
        markers: Markers {
            cycle: cycle_marker,
            work_done: None,
        },
    };
    watch_windows(&config, stop, |report| whole = Some(report))?;
    whole.ok_or_else(|| ObserveError::Nothing(target.describe()))
}

/// Whether a policy as the trace names it (`SCHED_FIFO`, `RR`, …) is a real-time one.
pub fn is_real_time(policy: &str) -> bool {
    ["FIFO", "RR", "DEADLINE"]
        .iter()
        .any(|name| policy.contains(name))
}

/// Whether process `pid` is gone or a zombie (exited, not yet reaped by its parent).
pub fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
    })
}

/// Whether a process named `name` (`/proc/PID/comm`) runs.
pub fn comm_running(name: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        entry
            .file_name()
            .to_str()
            .is_some_and(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
            && std::fs::read_to_string(entry.path().join("comm"))
                .is_ok_and(|comm| comm.trim_end() == name)
    })
}

/// Waits until a process named `name` runs; false when `stop` was set first.
pub fn wait_for_comm(name: &str, stop: &AtomicBool) -> bool {
    while !comm_running(name) {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    true
}

/// A thread that sets the recording's stop flag on the caller's stop, with a `Comm` target when
/// the last process of that name ends (a recording by name would otherwise wait for the next
/// one), with a `Pid` target when the process has exited, reaped or not.
pub struct EndWatcher {
    record_stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EndWatcher {
    /// Starts watching `target`'s end and `stop`.
    pub fn start(target: &Target, stop: Arc<AtomicBool>) -> EndWatcher {
        let record_stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let thread = {
            let (record_stop, done) = (Arc::clone(&record_stop), Arc::clone(&done));
            let target = target.clone();
            std::thread::spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    let ended = match &target {
                        Target::Comm(name) => !comm_running(name),
                        Target::Pid(pid) => exited(*pid),
                        Target::Command(_) => false,
                    };
                    if stop.load(Ordering::SeqCst) || ended {
                        record_stop.store(true, Ordering::SeqCst);
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        };
        EndWatcher {
            record_stop,
            done,
            thread: Some(thread),
        }
    }

    /// The flag the recording stops on.
    pub fn record_stop(&self) -> &AtomicBool {
        &self.record_stop
    }

    /// Ends the watching thread.
    pub fn finish(mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::report::{Explanation, ThreadRef};

    fn late(culprit: Option<Culprit>) -> LateActivation {
        LateActivation {
            kind: LateKind::Late,
            thread: ThreadRef {
                tid: 7,
                name: "xrun_client".into(),
                priority: 65,
            },
            at_ns: 1_000,
            period_ns: 2_666_667,
            response_ns: 6_000_000,
            periods: 1,
            deadlines_missed: 1,
            culprit,
            explanation: Explanation::OwnWork {
                own_ns: 6_000_000,
                response_ns: 6_000_000,
            },
            critical_path: Vec::new(),
        }
    }

    fn hog(ns: u64) -> Culprit {
        Culprit::Thread {
            tid: 9,
            name: "qhog7".into(),
            policy: "SCHED_FIFO".into(),
            priority: 95,
            ns,
        }
    }

    fn blame(late: &LateActivation) -> Blame {
        blame_of(late, rtlab_render::apptrace_words::culprit_label(late))
    }

    #[test]
    fn the_blame_is_the_culprit_in_words() {
        let blamed = blame(&late(Some(hog(5_900_000))));
        assert_eq!(blamed.label, "qhog7 (SCHED_FIFO 95)");
        assert!(blamed.reservable);
        assert_eq!(blamed.ns, 5_900_000);
        let own = blame(&late(None));
        assert_eq!(own.label, "(its own work)");
        assert!(!own.reservable);
        assert_eq!(own.ns, 6_000_000);
        assert!(!blame(&late(Some(Culprit::Hypervisor { ns: 1 }))).reservable);
    }

    #[test]
    fn a_missed_period_is_shown_as_periods_without_an_activation() {
        let mut missed = late(None);
        missed.kind = LateKind::Missed;
        missed.periods = 3;
        let shown = watched_miss(&missed, 838_000, 0);
        assert_eq!(shown.periods_without_activation, Some(3));
        assert_eq!(
            watched_miss(&late(None), 1, 0).periods_without_activation,
            None
        );
    }
}
