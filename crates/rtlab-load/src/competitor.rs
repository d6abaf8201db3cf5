//! Competitor threads: spinners at a chosen policy and priority, as in paper 003 (Table 3-2).
//!
//! Paper 003 starved an audio player with "a simple program that spins at a given priority"; its
//! experiments differ only in that priority. `--competitor POLICY:PRIO[@CPU]` is that program:
//! `other:0`, `other:-10` (nice), `fifo:10@1`, `rr:5`. An RT spinner can starve a CPU, so three
//! independent things stop it: (1) the spinner checks the stop flag and the run's deadline between
//! every 20 µs of spinning; (2) a watchdog thread, itself at the highest RT priority when allowed,
//! demotes every spinner still alive at the deadline to SCHED_OTHER; (3) dropping
//! [`RunningCompetitors`] stops and joins them (error and panic paths). The kernel's RT throttling
//! (sched_rt_runtime_us) is the last line of defence, so rtlab refuses RT competitors when it is
//! off unless the user insists with `--force`.

use rtlab_sys::load_syscalls::{current_thread_usage, ThreadUsage};
use rtlab_sys::sched::Policy;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One parsed `POLICY:PRIO[@CPU]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompetitorSpec {
    pub policy: Policy,
    /// Pin to this CPU; None lets the scheduler place it.
    pub cpu: Option<usize>,
}

#[derive(Debug, thiserror::Error)]
pub enum CompetitorError {
    #[error("bad competitor '{spec}': {reason}")]
    Spec { spec: String, reason: String },
    #[error(
        "RT throttling is off (/proc/sys/kernel/sched_rt_runtime_us = -1): an RT competitor could \
         starve its CPU for good; refusing '{spec}' unless forced"
    )]
    ThrottlingOff { spec: String },
    #[error("competitor '{spec}' could not start: {message}")]
    Start { spec: String, message: String },
}

impl fmt::Display for CompetitorSpec {
    /// The canonical text form, which parses back to the same spec.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.policy {
            Policy::Other { nice } => write!(formatter, "other:{nice}")?,
            Policy::Batch { nice } => write!(formatter, "batch:{nice}")?,
            Policy::Fifo { priority } => write!(formatter, "fifo:{priority}")?,
            Policy::RoundRobin { priority } => write!(formatter, "rr:{priority}")?,
            Policy::Idle => write!(formatter, "idle:0")?,
            Policy::Deadline { .. } => write!(formatter, "deadline")?,
        }
        if let Some(cpu) = self.cpu {
            write!(formatter, "@{cpu}")?;
        }
        Ok(())
    }
}

impl FromStr for CompetitorSpec {
    type Err = CompetitorError;

    fn from_str(text: &str) -> Result<CompetitorSpec, CompetitorError> {
        let spec = text.trim();
        let bad = |reason: String| CompetitorError::Spec {
            spec: spec.to_owned(),
            reason,
        };
        let (policy_and_priority, cpu) = match spec.split_once('@') {
            Some((head, cpu)) => {
                let cpu: usize = cpu
                    .trim()
                    .parse()
                    .map_err(|_| bad(format!("'{cpu}' after '@' is not a CPU number")))?;
                (head.trim(), Some(cpu))
            }
            None => (spec, None),
        };
        let (policy_name, value) = policy_and_priority.split_once(':').ok_or_else(|| {
            bad("expected POLICY:PRIO[@CPU], e.g. fifo:10@1, other:-10 or rr:5".to_owned())
        })?;
        let value: i32 = value
            .trim()
            .parse()
            .map_err(|_| bad(format!("priority '{}' is not a whole number", value.trim())))?;
        let policy = match policy_name.trim().to_ascii_lowercase().as_str() {
            "other" | "batch" => {
                if !(-20..=19).contains(&value) {
                    return Err(bad(format!("nice value {value} is outside -20..19")));
                }
                if policy_name.trim().eq_ignore_ascii_case("batch") {
                    Policy::Batch { nice: value }
                } else {
                    Policy::Other { nice: value }
                }
            }
            "fifo" | "rr" => {
                if !(1..=99).contains(&value) {
                    return Err(bad(format!("RT priority {value} is outside 1..99")));
                }
                if policy_name.trim().eq_ignore_ascii_case("fifo") {
                    Policy::Fifo {
                        priority: value as u32,
                    }
                } else {
                    Policy::RoundRobin {
                        priority: value as u32,
                    }
                }
            }
            other => {
                return Err(bad(format!(
                    "unknown policy '{other}' (expected other, batch, fifo or rr)"
                )))
            }
        };
        Ok(CompetitorSpec { policy, cpu })
    }
}

/// Applies the RT-throttling rule: returns the warnings to record, or refuses an RT competitor
/// when throttling is off (`rt_runtime_us` = -1) and `force` is false. `rt_runtime_us` is None
/// when the file could not be read (then nothing is refused, and a warning says so).
pub fn check_rt_throttling(
    rt_runtime_us: Option<i64>,
    specs: &[CompetitorSpec],
    force: bool,
) -> Result<Vec<String>, CompetitorError> {
    let mut warnings = Vec::new();
    let realtime: Vec<&CompetitorSpec> = specs
        .iter()
        .filter(|spec| spec.policy.is_realtime())
        .collect();
    match rt_runtime_us {
        Some(-1) => {
            if let Some(first) = realtime.first() {
                if !force {
                    return Err(CompetitorError::ThrottlingOff {
                        spec: first.to_string(),
                    });
                }
                warnings.push(format!(
                    "RT throttling is off (sched_rt_runtime_us = -1) and the run was forced: RT \
                     competitor {first} may starve its CPU until the run ends"
                ));
            } else {
                warnings.push(
                    "RT throttling is off (sched_rt_runtime_us = -1): a runaway RT thread could \
                     starve a CPU"
                        .to_owned(),
                );
            }
        }
        None if !realtime.is_empty() => warnings.push(
            "could not read /proc/sys/kernel/sched_rt_runtime_us: RT throttling state unknown"
                .to_owned(),
        ),
        _ => {}
    }
    Ok(warnings)
}

/// How a spinner ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The run asked it to stop.
    Requested,
    /// It noticed the deadline itself.
    Deadline,
    /// The watchdog demoted it to SCHED_OTHER at the deadline.
    Watchdog,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Requested => "requested",
            StopReason::Deadline => "deadline",
            StopReason::Watchdog => "watchdog",
        }
    }
}

/// What one competitor did.
#[derive(Clone, Debug)]
pub struct CompetitorReport {
    pub spec: CompetitorSpec,
    pub thread_id: u32,
    /// CLOCK_MONOTONIC ns when it started and stopped spinning.
    pub started_ns: u64,
    pub stopped_ns: u64,
    /// CPU time and context switches of the spinner, from /proc.
    pub usage: ThreadUsage,
    pub stop_reason: StopReason,
}

/// Demotes registered threads to SCHED_OTHER if they are still alive at a deadline.
///
/// Independent of the threads' own cooperation: it only needs their thread ids. It runs at
/// SCHED_FIFO 99 when permitted, so an RT spinner at a lower priority cannot keep it from running
/// on another CPU (and RT throttling lets it run on the spinner's own CPU).
pub struct Watchdog {
    cancel: Arc<AtomicBool>,
    handle: Option<JoinHandle<Vec<u32>>>,
}

impl fmt::Debug for Watchdog {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("Watchdog").finish_non_exhaustive()
    }
}

/// A thread the watchdog guards: its id and a flag it sets when it has exited.
#[derive(Clone, Debug)]
pub struct Guarded {
    pub thread_id: u32,
    pub exited: Arc<AtomicBool>,
}

const WATCHDOG_POLL_NS: u64 = 50_000_000;

impl Watchdog {
    /// Starts the watchdog; at `deadline_ns` (CLOCK_MONOTONIC) it demotes every guarded thread
    /// that has not exited. `join` returns the ids it demoted.
    pub fn start(deadline_ns: u64, guarded: Vec<Guarded>) -> std::io::Result<Watchdog> {
        let cancel = Arc::new(AtomicBool::new(false));
        let cancelled = Arc::clone(&cancel);
        let handle = std::thread::Builder::new()
            .name("rtlab-watchdog".to_owned())
            .spawn(move || {
                // Best effort: without permission it still runs, as SCHED_OTHER.
                let _ = rtlab_sys::sched::set_current_thread_policy(Policy::Fifo { priority: 99 });
                loop {
                    if cancelled.load(Ordering::Relaxed) {
                        return Vec::new();
                    }
                    let now = rtlab_sys::clock::monotonic_ns();
                    if now >= deadline_ns {
                        break;
                    }
                    rtlab_sys::clock::sleep_until_ns(deadline_ns.min(now + WATCHDOG_POLL_NS));
                }
                let mut demoted = Vec::new();
                for thread in &guarded {
                    if thread.exited.load(Ordering::Acquire) {
                        continue;
                    }
                    if rtlab_sys::sched::set_thread_policy(
                        thread.thread_id,
                        Policy::Other { nice: 0 },
                    )
                    .is_ok()
                    {
                        demoted.push(thread.thread_id);
                    }
                }
                demoted
            })?;
        Ok(Watchdog {
            cancel,
            handle: Some(handle),
        })
    }

    /// Cancels the watchdog if the deadline has not come, and returns the ids it demoted.
    pub fn finish(mut self) -> Vec<u32> {
        self.cancel.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|handle| handle.join().ok())
            .unwrap_or_default()
    }

    /// Waits for the deadline to pass and the watchdog to act (tests; a run uses [`Watchdog::finish`]).
    pub fn wait(mut self) -> Vec<u32> {
        self.handle
            .take()
            .and_then(|handle| handle.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

struct Spinner {
    spec: CompetitorSpec,
    handle: JoinHandle<(ThreadUsage, u64, u64, StopReason)>,
    thread_id: u32,
}

/// Running competitors; stop them with [`RunningCompetitors::stop`] (dropping also stops them).
pub struct RunningCompetitors {
    stop: Arc<AtomicBool>,
    spinners: Vec<Spinner>,
    watchdog: Option<Watchdog>,
    demoted: Arc<Mutex<Vec<u32>>>,
}

impl fmt::Debug for RunningCompetitors {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("RunningCompetitors")
            .field("spinners", &self.spinners.len())
            .finish()
    }
}

const SPIN_CHECK_NS: u64 = 20_000;

fn spin_until(stop: &AtomicBool, deadline_ns: u64, spins: &AtomicU64) -> StopReason {
    loop {
        let slice_end = rtlab_sys::clock::monotonic_ns() + SPIN_CHECK_NS;
        let mut value = 1u64;
        while rtlab_sys::clock::monotonic_ns() < slice_end {
            value = std::hint::black_box(
                value
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1),
            );
        }
        spins.fetch_add(1, Ordering::Relaxed);
        if stop.load(Ordering::Relaxed) {
            return StopReason::Requested;
        }
        if rtlab_sys::clock::monotonic_ns() >= deadline_ns {
            return StopReason::Deadline;
        }
    }
}

/// Starts one spinner per spec; they spin until stopped or until `deadline_ns` (CLOCK_MONOTONIC).
/// Fails (stopping the ones already started) if a spinner cannot get its CPU or policy.
pub fn start(
    specs: &[CompetitorSpec],
    deadline_ns: u64,
) -> Result<RunningCompetitors, CompetitorError> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut running = RunningCompetitors {
        stop: Arc::clone(&stop),
        spinners: Vec::new(),
        watchdog: None,
        demoted: Arc::new(Mutex::new(Vec::new())),
    };
    let mut guarded = Vec::new();
    for spec in specs {
        let spec = *spec;
        let spinner_stop = Arc::clone(&stop);
        let exited = Arc::new(AtomicBool::new(false));
        let exited_flag = Arc::clone(&exited);
        let (ready_sender, ready_receiver) = mpsc::channel::<Result<u32, String>>();
        let handle = std::thread::Builder::new()
            .name(format!("rtlab-competitor-{spec}"))
            .spawn(move || {
                let setup = (|| -> Result<(), String> {
                    if let Some(cpu) = spec.cpu {
                        rtlab_sys::cpu::pin_current_thread(cpu)
                            .map_err(|error| format!("cannot pin to CPU {cpu}: {error}"))?;
                    }
                    rtlab_sys::sched::set_current_thread_policy(spec.policy)
                        .map_err(|error| format!("cannot set {}: {error}", spec.policy.name()))
                })();
                let usage_before = current_thread_usage().unwrap_or_default();
                let started_ns = rtlab_sys::clock::monotonic_ns();
                if let Err(message) = setup {
                    let _ = ready_sender.send(Err(message));
                    exited_flag.store(true, Ordering::Release);
                    return (
                        ThreadUsage::default(),
                        started_ns,
                        started_ns,
                        StopReason::Requested,
                    );
                }
                let _ = ready_sender.send(Ok(rtlab_sys::cpu::current_tid()));
                let spins = AtomicU64::new(0);
                let mut reason = spin_until(&spinner_stop, deadline_ns, &spins);
                let stopped_ns = rtlab_sys::clock::monotonic_ns();
                if let Ok(Policy::Other { .. }) = rtlab_sys::sched::thread_policy(0) {
                    if spec.policy.is_realtime() {
                        reason = StopReason::Watchdog;
                    }
                }
                // Leave as an ordinary thread whatever happens next.
                let _ = rtlab_sys::sched::set_current_thread_policy(Policy::Other { nice: 0 });
                let usage = current_thread_usage()
                    .map(|after| after.since(&usage_before))
                    .unwrap_or_default();
                exited_flag.store(true, Ordering::Release);
                (usage, started_ns, stopped_ns, reason)
            })
            .map_err(|error| CompetitorError::Start {
                spec: spec.to_string(),
                message: error.to_string(),
            })?;
        match ready_receiver.recv_timeout(Duration::from_secs(5)) {
            Ok(Ok(thread_id)) => {
                if spec.policy.is_realtime() {
                    guarded.push(Guarded {
                        thread_id,
                        exited: Arc::clone(&exited),
                    });
                }
                running.spinners.push(Spinner {
                    spec,
                    handle,
                    thread_id,
                });
            }
            Ok(Err(message)) => {
                let _ = handle.join();
                return Err(CompetitorError::Start {
                    spec: spec.to_string(),
                    message,
                });
            }
            Err(_) => {
                stop.store(true, Ordering::Relaxed);
                let _ = handle.join();
                return Err(CompetitorError::Start {
                    spec: spec.to_string(),
                    message: "did not report ready within 5 s".to_owned(),
                });
            }
        }
    }
    if !guarded.is_empty() {
        running.watchdog = Some(Watchdog::start(deadline_ns, guarded).map_err(|error| {
            CompetitorError::Start {
                spec: "watchdog".to_owned(),
                message: error.to_string(),
            }
        })?);
    }
    Ok(running)
}

impl RunningCompetitors {
    /// Kernel thread ids of the spinners, in spec order.
    pub fn thread_ids(&self) -> Vec<u32> {
        self.spinners
            .iter()
            .map(|spinner| spinner.thread_id)
            .collect()
    }

    /// Stops every spinner and the watchdog; reports what each spinner did.
    pub fn stop(mut self) -> Vec<CompetitorReport> {
        self.stop.store(true, Ordering::Relaxed);
        let mut reports = Vec::new();
        for spinner in self.spinners.drain(..) {
            let (usage, started_ns, stopped_ns, stop_reason) = spinner.handle.join().unwrap_or((
                ThreadUsage::default(),
                0,
                0,
                StopReason::Requested,
            ));
            reports.push(CompetitorReport {
                spec: spinner.spec,
                thread_id: spinner.thread_id,
                started_ns,
                stopped_ns,
                usage,
                stop_reason,
            });
        }
        if let Some(watchdog) = self.watchdog.take() {
            self.demoted
                .lock()
                .map(|mut list| list.extend(watchdog.finish()))
                .ok();
        }
        let demoted = self
            .demoted
            .lock()
            .map(|list| list.clone())
            .unwrap_or_default();
        for report in &mut reports {
            if demoted.contains(&report.thread_id) {
                report.stop_reason = StopReason::Watchdog;
            }
        }
        reports
    }
}

impl Drop for RunningCompetitors {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for spinner in self.spinners.drain(..) {
            let _ = spinner.handle.join();
        }
        self.watchdog.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_issue_examples() {
        let cases = [
            ("other:0", Policy::Other { nice: 0 }, None),
            ("other:-10", Policy::Other { nice: -10 }, None),
            ("fifo:10@1", Policy::Fifo { priority: 10 }, Some(1)),
            ("RR:5", Policy::RoundRobin { priority: 5 }, None),
            ("batch:19@0", Policy::Batch { nice: 19 }, Some(0)),
        ];
        for (text, policy, cpu) in cases {
            let spec: CompetitorSpec = text.parse().unwrap();
            assert_eq!(spec, CompetitorSpec { policy, cpu }, "{text}");
            assert_eq!(spec.to_string().parse::<CompetitorSpec>().unwrap(), spec);
        }
    }

    #[test]
    fn rejects_bad_competitors() {
        let cases = [
            ("fifo", "expected POLICY:PRIO"),
            ("fifo:0", "outside 1..99"),
            ("fifo:100", "outside 1..99"),
            ("other:20", "outside -20..19"),
            ("deadline:5", "unknown policy 'deadline'"),
            ("fifo:x", "'x' is not a whole number"),
            ("fifo:5@y", "'y' after '@'"),
        ];
        for (text, expected) in cases {
            let error = text.parse::<CompetitorSpec>().unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
            assert!(error.contains(text.trim()), "{error}");
        }
    }

    #[test]
    fn throttling_off_refuses_rt_unless_forced() {
        let rt: Vec<CompetitorSpec> =
            vec!["other:0".parse().unwrap(), "fifo:10@1".parse().unwrap()];
        let other: Vec<CompetitorSpec> = vec!["other:-5".parse().unwrap()];
        let error = check_rt_throttling(Some(-1), &rt, false)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("fifo:10@1") && error.contains("unless forced"),
            "{error}"
        );
        let warnings = check_rt_throttling(Some(-1), &rt, true).unwrap();
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("forced"));
        assert_eq!(
            check_rt_throttling(Some(-1), &other, false).unwrap().len(),
            1
        );
        assert!(check_rt_throttling(Some(950_000), &rt, false)
            .unwrap()
            .is_empty());
        assert_eq!(check_rt_throttling(None, &rt, false).unwrap().len(), 1);
        assert!(check_rt_throttling(None, &other, false).unwrap().is_empty());
    }
}
