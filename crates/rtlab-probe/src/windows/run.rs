//! `rtlab run` on Windows: one measuring thread per class, pinned to one CPU, waking every period
//! on a high-resolution waitable timer at absolute QueryPerformanceCounter deadlines.
//!
//! Classes (issue 17): `rt-high` is THREAD_PRIORITY_TIME_CRITICAL in REALTIME_PRIORITY_CLASS
//! where Windows grants it, else in the class it granted (HIGH without the privilege); `mmcss`
//! joins the Multimedia Class Scheduler's "Pro Audio" task, how audio applications run;
//! `normal` is left as created. A process has one priority class, so while rt-high runs the
//! other classes run in it too: their series say the base priority they really had.

use crate::recorder::{LiveCounters, Recorder};
use crate::schedule::PeriodicSchedule;
use rtlab_core::{LatencyHistogram, Metric, Nanos, Peak, SamplePathHistogram};
use rtlab_sys::windows::clock::monotonic_ns;
use rtlab_sys::windows::priority::{
    base_priority, pin_current_thread, priority_class_name, process_priority_class,
    set_thread_time_critical, thread_priority, MmcssTask, RealtimeProcess,
};
use rtlab_sys::windows::timers::WaitableTimer;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A measuring thread's class on Windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WindowsClass {
    RtHigh,
    Mmcss,
    Normal,
}

impl WindowsClass {
    pub const ALL: [WindowsClass; 3] = [
        WindowsClass::RtHigh,
        WindowsClass::Mmcss,
        WindowsClass::Normal,
    ];

    pub fn name(self) -> &'static str {
        match self {
            WindowsClass::RtHigh => "rt-high",
            WindowsClass::Mmcss => "mmcss",
            WindowsClass::Normal => "normal",
        }
    }
}

impl std::str::FromStr for WindowsClass {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        WindowsClass::ALL
            .into_iter()
            .find(|class| class.name() == text)
            .ok_or_else(|| format!("unknown class '{text}' (expected rt-high, mmcss or normal)"))
    }
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct WindowsProbeConfig {
    pub classes: Vec<WindowsClass>,
    /// The CPU every measuring thread is pinned to.
    pub cpu: usize,
    pub period: Nanos,
    pub duration: Nanos,
    pub warmup: Nanos,
    /// How many of the largest samples each series keeps with their times.
    pub peaks_per_series: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum WindowsProbeError {
    #[error("no class selected")]
    NoClasses,
    #[error("{0} is too short (the minimum is 100us)")]
    PeriodTooShort(Nanos),
    #[error("CPU {cpu} does not exist (this machine has {count})")]
    NoSuchCpu { cpu: usize, count: usize },
    #[error("starting a measuring thread: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("{class}: {source}")]
    ThreadSetup {
        class: &'static str,
        #[source]
        source: std::io::Error,
    },
}

impl WindowsProbeError {
    /// True when the settings were at fault, not the system.
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            WindowsProbeError::NoClasses
                | WindowsProbeError::PeriodTooShort(_)
                | WindowsProbeError::NoSuchCpu { .. }
        )
    }
}

/// One series' measurement.
#[derive(Debug)]
pub struct WindowsSeries {
    pub class: WindowsClass,
    pub metric: Metric,
    pub cpu: usize,
    /// `REALTIME/TIME_CRITICAL`, `MMCSS Pro Audio`, `NORMAL/NORMAL`, …
    pub policy: String,
    /// The Windows base priority (1..31) the thread ran at.
    pub priority: i32,
    pub histogram: LatencyHistogram,
    pub missed: u64,
    pub max_per_second: Vec<u64>,
    pub peaks: Vec<Peak>,
}

/// What the probe measured.
#[derive(Debug)]
pub struct WindowsProbeResult {
    pub series: Vec<WindowsSeries>,
    pub period: Nanos,
    /// Time from the end of warm-up to the last thread's end, ns.
    pub measured_ns: u64,
    pub warnings: Vec<String>,
    pub interrupted: bool,
}

struct ThreadResult {
    class: WindowsClass,
    policy: String,
    priority: i32,
    wakeup: Recorder,
    interval: Recorder,
    warnings: Vec<String>,
}

/// The running probe: threads and the live counters the progress display reads.
pub struct RunningWindowsProbe {
    config: WindowsProbeConfig,
    threads: Vec<JoinHandle<Result<ThreadResult, WindowsProbeError>>>,
    live: Vec<Arc<LiveCounters>>,
    stop: Arc<AtomicBool>,
    realtime: Option<RealtimeProcess>,
    warnings: Vec<String>,
    measure_start_ns: u64,
    end_ns: u64,
}

impl std::fmt::Debug for RunningWindowsProbe {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RunningWindowsProbe")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The probe's own name for the thread's scheduling: process class and what the thread did.
fn policy_of(class: WindowsClass, process_class: u32, mmcss: Option<&MmcssTask>) -> String {
    match (class, mmcss) {
        (WindowsClass::Mmcss, Some(task)) => format!("MMCSS Pro Audio (task {})", task.task_index),
        _ => {
            let relative = match thread_priority() {
                15 => "TIME_CRITICAL".to_owned(),
                0 => "NORMAL".to_owned(),
                other => format!("{other:+}"),
            };
            format!("{}/{relative}", priority_class_name(process_class))
        }
    }
}

impl RunningWindowsProbe {
    /// Checks the settings, raises the process for rt-high and starts one thread per class.
    pub fn start(
        config: WindowsProbeConfig,
        stop: Arc<AtomicBool>,
    ) -> Result<RunningWindowsProbe, WindowsProbeError> {
        if config.classes.is_empty() {
            return Err(WindowsProbeError::NoClasses);
        }
        if config.period.as_u64() < 100_000 {
            return Err(WindowsProbeError::PeriodTooShort(config.period));
        }
        let count = std::thread::available_parallelism()
            .map(|count| count.get())
            .unwrap_or(1);
        if config.cpu >= count {
            return Err(WindowsProbeError::NoSuchCpu {
                cpu: config.cpu,
                count,
            });
        }
        let mut warnings = Vec::new();
        let realtime = if config.classes.contains(&WindowsClass::RtHigh) {
            match RealtimeProcess::raise() {
                Ok(raised) => {
                    if !raised.is_realtime() {
                        warnings.push(format!(
                            "REALTIME_PRIORITY_CLASS was not granted (it needs the \"Increase scheduling priority\" privilege: run as administrator); rt-high ran TIME_CRITICAL in {}_PRIORITY_CLASS (base priority 15)",
                            priority_class_name(raised.granted)
                        ));
                    }
                    Some(raised)
                }
                Err(error) => {
                    warnings.push(format!(
                        "the process's priority class could not be raised ({error}): rt-high ran TIME_CRITICAL in the class it had"
                    ));
                    None
                }
            }
        } else {
            None
        };
        if realtime.is_some() && config.classes.len() > 1 {
            let others: Vec<&str> = config
                .classes
                .iter()
                .filter(|class| **class != WindowsClass::RtHigh)
                .map(|class| class.name())
                .collect();
            warnings.push(format!(
                "a Windows process has one priority class: {} ran in the class raised for rt-high (their series give the base priority they had); measure them alone (--classes {}) for an ordinary process's latency",
                others.join(" and "),
                others.join(",")
            ));
        }
        let seconds = config.duration.as_u64().div_ceil(1_000_000_000) as usize + 1;
        let threads_count = config.classes.len();
        // Every thread's deadlines count from the same instant, far enough ahead for the threads
        // to set themselves up; they are phase-staggered by class so the threads do not wake
        // together and measure each other.
        let start_ns = monotonic_ns() + 50_000_000;
        let measure_start_ns = start_ns + config.warmup.as_u64();
        let end_ns = measure_start_ns + config.duration.as_u64();
        let mut threads = Vec::with_capacity(threads_count);
        let mut live = Vec::with_capacity(threads_count);
        for (index, &class) in config.classes.iter().enumerate() {
            let counters = Arc::new(LiveCounters::default());
            live.push(Arc::clone(&counters));
            let wakeup = Recorder::new(
                seconds,
                config.peaks_per_series,
                SamplePathHistogram::for_latencies(),
                Arc::clone(&counters),
            );
            let interval = Recorder::new(
                seconds,
                config.peaks_per_series,
                SamplePathHistogram::around(config.period.as_u64()),
                Arc::new(LiveCounters::default()),
            );
            let phase_ns = config.period.as_u64() * index as u64 / threads_count as u64;
            let thread_config = ThreadConfig {
                class,
                cpu: config.cpu,
                period_ns: config.period.as_u64(),
                first_deadline_ns: start_ns + phase_ns,
                measure_start_ns,
                end_ns,
            };
            let thread_stop = Arc::clone(&stop);
            let spawned = std::thread::Builder::new()
                .name(format!("rtlab-{}", class.name()))
                .spawn(move || measure(thread_config, wakeup, interval, &thread_stop));
            match spawned {
                Ok(handle) => threads.push(handle),
                Err(error) => {
                    stop.store(true, Ordering::SeqCst);
                    for handle in threads {
                        let _ = handle.join();
                    }
                    return Err(WindowsProbeError::Spawn(error));
                }
            }
        }
        Ok(RunningWindowsProbe {
            config,
            threads,
            live,
            stop,
            realtime,
            warnings,
            measure_start_ns,
            end_ns,
        })
    }

    /// (samples so far, the largest wake-up latency so far in ns) per class, in config order.
    pub fn progress(&self) -> Vec<(WindowsClass, u64, u64)> {
        self.config
            .classes
            .iter()
            .zip(&self.live)
            .map(|(class, live)| {
                (
                    *class,
                    live.samples.load(Ordering::Relaxed),
                    live.max_ns.load(Ordering::Relaxed),
                )
            })
            .collect()
    }

    /// Elapsed and total time (warm-up included), ns.
    pub fn elapsed(&self) -> (u64, u64) {
        let total = self.end_ns - (self.measure_start_ns - self.config.warmup.as_u64());
        let started = self.end_ns - total;
        (monotonic_ns().saturating_sub(started).min(total), total)
    }

    pub fn is_finished(&self) -> bool {
        self.threads.iter().all(JoinHandle::is_finished)
    }

    /// Waits for every thread (each ends on its own by the end time) and gathers the series.
    pub fn finish(mut self) -> Result<WindowsProbeResult, WindowsProbeError> {
        let mut series = Vec::new();
        let mut warnings = std::mem::take(&mut self.warnings);
        let mut first_error = None;
        for handle in std::mem::take(&mut self.threads) {
            match handle.join() {
                Ok(Ok(result)) => {
                    warnings.extend(result.warnings);
                    let measured_ns = monotonic_ns()
                        .min(self.end_ns)
                        .saturating_sub(self.measure_start_ns);
                    for (metric, recorder) in [
                        (Metric::Wakeup, result.wakeup),
                        (Metric::Interval, result.interval),
                    ] {
                        series.push(WindowsSeries {
                            class: result.class,
                            metric,
                            cpu: self.config.cpu,
                            policy: result.policy.clone(),
                            priority: result.priority,
                            max_per_second: recorder.max_per_second(measured_ns),
                            peaks: recorder.peaks(),
                            missed: recorder.missed,
                            histogram: recorder.histogram.into_histogram(),
                        });
                    }
                }
                Ok(Err(error)) => {
                    first_error.get_or_insert(error);
                }
                Err(_) => {
                    first_error.get_or_insert(WindowsProbeError::Spawn(std::io::Error::other(
                        "a measuring thread panicked",
                    )));
                }
            }
        }
        drop(self.realtime.take());
        if let Some(error) = first_error {
            return Err(error);
        }
        let interrupted = self.stop.load(Ordering::SeqCst);
        let now = monotonic_ns();
        Ok(WindowsProbeResult {
            series,
            period: self.config.period,
            measured_ns: now.min(self.end_ns).saturating_sub(self.measure_start_ns),
            warnings,
            interrupted,
        })
    }
}

impl Drop for RunningWindowsProbe {
    fn drop(&mut self) {
        // Dropped without `finish` (an error in the caller): stop and wait, so no measuring
        // thread outlives the probe.
        self.stop.store(true, Ordering::SeqCst);
        for handle in std::mem::take(&mut self.threads) {
            let _ = handle.join();
        }
    }
}

struct ThreadConfig {
    class: WindowsClass,
    cpu: usize,
    period_ns: u64,
    first_deadline_ns: u64,
    measure_start_ns: u64,
    end_ns: u64,
}

/// The measuring thread: sets its class, then waits for each deadline and records how late it
/// woke (and the time since the previous wake-up).
fn measure(
    config: ThreadConfig,
    mut wakeup: Recorder,
    mut interval: Recorder,
    stop: &AtomicBool,
) -> Result<ThreadResult, WindowsProbeError> {
    let class_name = config.class.name();
    let setup = |source| WindowsProbeError::ThreadSetup {
        class: class_name,
        source,
    };
    let prepared = (|| {
        pin_current_thread(config.cpu)?;
        let mut mmcss = None;
        match config.class {
            WindowsClass::RtHigh => set_thread_time_critical()?,
            WindowsClass::Mmcss => mmcss = Some(MmcssTask::join("Pro Audio")?),
            WindowsClass::Normal => {}
        }
        let mut warnings = Vec::new();
        let timer = match WaitableTimer::new(true) {
            Ok(timer) => timer,
            Err(error) => {
                warnings.push(format!(
                    "{class_name}: no high-resolution waitable timer ({error}; Windows 10 1803 or later has one): measured with an ordinary waitable timer, which expires only at clock interrupts"
                ));
                WaitableTimer::new(false)?
            }
        };
        Ok::<_, std::io::Error>((mmcss, timer, warnings))
    })();
    let (mmcss, timer, mut warnings) = prepared.map_err(setup)?;
    let process_class = process_priority_class().unwrap_or(0);
    let policy = policy_of(config.class, process_class, mmcss.as_ref());
    let priority = base_priority(process_class, thread_priority());

    let mut schedule = PeriodicSchedule::new(config.first_deadline_ns, config.period_ns);
    let mut previous_wake_ns: Option<u64> = None;
    // ---- the sample path: clock read, record, wait.
    loop {
        let deadline = schedule.next_deadline_ns();
        if deadline >= config.end_ns || stop.load(Ordering::Relaxed) {
            break;
        }
        let now = monotonic_ns();
        if deadline > now {
            if let Err(error) = timer.wait_ns(deadline - now) {
                warnings.push(format!(
                    "{class_name}: the timer failed, measuring ended early: {error}"
                ));
                break;
            }
        }
        let woke = monotonic_ns();
        if deadline >= config.measure_start_ns {
            let at = deadline - config.measure_start_ns;
            wakeup.record(woke.saturating_sub(deadline), at);
            if let Some(previous) = previous_wake_ns {
                interval.record(woke - previous, at);
            }
        }
        if deadline >= config.measure_start_ns {
            previous_wake_ns = Some(woke);
        }
        let skipped = schedule.advance(woke);
        if deadline >= config.measure_start_ns {
            wakeup.missed += skipped;
        }
    }
    // ---- end of the sample path.
    drop(mmcss);
    Ok(ThreadResult {
        class: config.class,
        policy,
        priority,
        wakeup,
        interval,
        warnings,
    })
}
