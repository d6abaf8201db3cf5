//! What `reserve --auto` reads of a program before it decides, and what its `--follow` reads
//! window by window: the threads of a trace ([`observed_threads`]) or of the kernel's per-task
//! counters ([`observed_by_counters`]) as `rtlab_sched::auto_reserve::decide` reads them, the
//! misses of the chosen threads ([`misses`]) and one thread's counters over a window
//! ([`counters_window`]). The CLI and the daemon's `[[rtkit.reserve]]` observer (registered by
//! the binary) both observe through here; [`Observation`] is `reserve --auto`'s loop's
//! observation, once before reserving and once after, its last trace kept to count misses by.

use crate::analyze::report::TraceReport;
use crate::record::Target;
use rtlab_core::Nanos;
use rtlab_sched::auto_follow::FollowWindow;
use rtlab_sched::auto_reserve::ObservedThread;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The observation's threads as the decision reads them.
pub fn observed_threads(report: &TraceReport) -> Vec<ObservedThread> {
    report
        .threads
        .iter()
        .map(|row| ObservedThread {
            tid: row.tid as u32,
            name: row.name.clone(),
            pid: row.tgid.map(|pid| pid as u32),
            in_target: row.target,
            real_time: crate::watch::is_real_time(&row.policy),
            policy: row.policy.clone(),
            priority: row.priority,
            activations: row.activations,
            period: row.period_ns.map(Nanos),
            period_jitter: row.period_jitter_ns.map(Nanos),
            cpu_per_cycle_high: Nanos(row.cpu_per_cycle_ns.p99),
            usual_waker: row
                .wakers
                .first()
                .filter(|waker| waker.tid > 0 && waker.tid != row.tid)
                .map(|waker| waker.tid as u32),
        })
        .collect()
}

/// Why the counters could not observe a program.
#[derive(Debug, thiserror::Error)]
pub enum CountersError {
    /// The counters observe a running program: a command to start has none yet.
    #[error("the kernel's counters observe a running program (a pid or a name)")]
    NotRunning,
    #[error("listing /proc")]
    ListingProc(#[source] std::io::Error),
    #[error("{0}: no such program running")]
    NoSuchProgram(String),
    #[error("sampling the threads' counters (SCHED_FIFO: needs root or CAP_SYS_NICE)")]
    Sampling(#[source] std::io::Error),
}

impl CountersError {
    /// Whether the program named is at fault (no such program), not the system.
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            CountersError::NotRunning | CountersError::NoSuchProgram(_)
        )
    }
}

/// The target's threads (every thread of the process, or of every process named so).
fn target_threads(target: &Target) -> Result<Vec<(u32, u32)>, CountersError> {
    let pids = match target {
        Target::Pid(pid) => vec![*pid],
        Target::Comm(name) => rtlab_sys::proc_thread::process_ids()
            .map_err(CountersError::ListingProc)?
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim_end() == name)
            })
            .collect(),
        Target::Command(_) => return Err(CountersError::NotRunning),
    };
    let mut threads = Vec::new();
    for pid in pids {
        if let Ok(tids) = rtlab_sys::sched::process_thread_ids(pid) {
            threads.extend(tids.into_iter().map(|tid| (pid, tid)));
        }
    }
    if threads.is_empty() {
        return Err(CountersError::NoSuchProgram(target.describe()));
    }
    Ok(threads)
}

/// Observes the target's real-time threads through the kernel's per-task counters, sampled every
/// millisecond by a SCHED_FIFO thread one priority above the highest of them (so its samples
/// keep time while they run), and describes every thread as the decision reads it: no waker
/// (the counters do not say who woke a thread).
pub fn observed_by_counters(
    target: &Target,
    duration: Duration,
    stop: &AtomicBool,
) -> Result<Vec<ObservedThread>, CountersError> {
    let mut threads = Vec::new();
    for (pid, tid) in target_threads(target)? {
        let Ok(policy) = rtlab_sys::sched::thread_policy(tid) else {
            continue;
        };
        let name = rtlab_sys::proc_thread::thread_comm(tid).unwrap_or_default();
        threads.push((pid, tid, name, policy));
    }
    let real_time: Vec<u32> = threads
        .iter()
        .filter(|(.., policy)| policy.is_realtime())
        .map(|(_, tid, ..)| *tid)
        .collect();
    let highest = threads
        .iter()
        .filter_map(|(.., policy)| match policy {
            rtlab_sys::sched::Policy::Fifo { priority }
            | rtlab_sys::sched::Policy::RoundRobin { priority } => Some(*priority),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let estimates = crate::counters::observe(
        &real_time,
        duration,
        crate::counters::SAMPLE_INTERVAL,
        Some((highest + 1).clamp(1, 98)),
        stop,
    )
    .map_err(CountersError::Sampling)?;
    Ok(threads
        .into_iter()
        .map(|(pid, tid, name, policy)| {
            let estimate = estimates.iter().find(|estimate| estimate.tid == tid);
            ObservedThread {
                tid,
                name,
                pid: Some(pid),
                in_target: true,
                real_time: policy.is_realtime(),
                policy: policy.name().trim_start_matches("SCHED_").to_owned(),
                priority: policy.priority_or_nice(),
                activations: estimate.map_or(0, |estimate| estimate.activations),
                period: estimate.and_then(|estimate| estimate.period),
                period_jitter: estimate.and_then(|estimate| estimate.period_jitter),
                cpu_per_cycle_high: estimate
                    .map_or(Nanos(0), |estimate| estimate.cpu_per_cycle_p99),
                usual_waker: None,
            }
        })
        .collect())
}

/// Deadline misses of the chosen threads: late activations and periods without one (all of the
/// program's when the list was cut short).
pub fn misses(report: &TraceReport, tids: &[u32]) -> u64 {
    if report.late_activations_total > report.late_activations.len() as u64 {
        return report.late_activations_total;
    }
    report
        .late_activations
        .iter()
        .filter(|late| tids.contains(&(late.thread.tid as u32)))
        .map(|late| late.deadlines_missed.max(1))
        .sum()
}

/// `reserve --auto`'s observation of a program, as often as its loop asks: a trace
/// (`watch::observe`), whose last report counts the chosen threads' misses, or the kernel's
/// per-task counters (`counters`), which count none.
pub struct Observation<'a> {
    pub target: &'a Target,
    pub duration: Duration,
    /// The program's own cycle starts, to judge misses by (a trace only).
    pub cycle_marker: Option<&'a crate::cycle_marker::CycleMarker>,
    pub counters: bool,
    /// The last trace (none with the counters).
    pub last: Option<TraceReport>,
}

/// Why an [`Observation`] has no answer.
#[derive(Debug, thiserror::Error)]
pub enum ObservationError {
    #[error(transparent)]
    Trace(#[from] crate::watch::ObserveError),
    #[error(transparent)]
    Counters(#[from] CountersError),
}

impl Observation<'_> {
    /// Observes the program for the observation's length (or until `stop`): its threads.
    pub fn observe(&mut self, stop: &AtomicBool) -> Result<Vec<ObservedThread>, ObservationError> {
        if self.counters {
            return Ok(observed_by_counters(self.target, self.duration, stop)?);
        }
        let report = crate::watch::observe(self.target, self.duration, self.cycle_marker, stop)?;
        let threads = observed_threads(&report);
        self.last = Some(report);
        Ok(threads)
    }

    /// The misses of threads `tids` in the last trace; `None` with the counters.
    pub fn misses(&self, tids: &[u32]) -> Option<u64> {
        self.last.as_ref().map(|report| misses(report, tids))
    }
}

/// One window of thread `tid`'s counters, sampled every millisecond from a SCHED_FIFO
/// `sampler_priority` thread: what a follower decides by. `None` once the thread has ended (or
/// `stop` was set mid-window). The CLI's `--follow` and the daemon's auto-sized RealtimeKit1
/// grants observe through this.
pub fn counters_window(
    tid: u32,
    window: Duration,
    sampler_priority: u32,
    stop: &AtomicBool,
) -> Option<FollowWindow> {
    let estimates = crate::counters::observe(
        &[tid],
        window,
        crate::counters::SAMPLE_INTERVAL,
        Some(sampler_priority),
        stop,
    )
    .ok()?;
    let estimate = estimates.into_iter().next()?;
    // A thread that exited mid-window: what was sampled says nothing of a need to come.
    if estimate.samples < 2 || !std::path::Path::new(&format!("/proc/{tid}")).exists() {
        return None;
    }
    Some(FollowWindow {
        activations: estimate.activations,
        period: estimate.period,
        cpu_per_cycle_high: estimate.cpu_per_cycle_p99,
    })
}
