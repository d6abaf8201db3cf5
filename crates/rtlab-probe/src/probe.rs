//! The measuring engine: pinned periodic timer threads per (CPU, class), hand-off waiter threads
//! they wake, and the controller that starts them, watches them and collects their recorders.
//!
//! Timeline (CLOCK_MONOTONIC): `start` (threads set up) → `measure_start` (= start + warm-up;
//! samples before it are discarded) → `end` (= measure_start + duration). Every thread stops on
//! its own at `end`, or within one period (hand-off waiters: 50 ms) of a stop request: nothing
//! the probe starts can outlive the run.

use crate::class::Class;
use crate::recorder::{LiveCounters, Recorder};
use crate::schedule::PeriodicSchedule;
use rtlab_core::{Metric, Nanos, Peak, SamplePathHistogram};
use rtlab_sys::clock::{monotonic_ns, sleep_until_ns};
use rtlab_sys::sched::Policy;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

/// How long a hand-off waiter blocks before re-checking whether the run is over.
const WAITER_POLL_NS: u64 = 50_000_000;
/// Time given to threads to pin themselves and set their policy before the first deadline.
const SETUP_NS: u64 = 50_000_000;
/// Capacity of each thread's late-sample queue (drained by the tracer several times a second).
const LATE_QUEUE_CAPACITY: usize = 4096;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeConfig {
    pub cpus: Vec<usize>,
    pub classes: Vec<Class>,
    pub period: Nanos,
    pub duration: Nanos,
    pub warmup: Nanos,
    /// Run hand-off waiters (the `handoff` series).
    pub handoff: bool,
    /// How many of the largest samples each series keeps with their times.
    pub peaks_per_series: usize,
    /// Hold /dev/cpu_dma_latency at this value (µs) during the run.
    pub cpu_dma_latency_us: Option<i32>,
    /// Work this long after every wake-up of the highest class's timer threads (busy, reading
    /// the clock) and record the `response` series: deadline → end of that work, i.e. wake-up
    /// latency + compute + whatever interrupted the compute. What an application with `c` of
    /// work per period meets (issue 27); `None`: no work, no response series.
    pub compute: Option<Nanos>,
}

/// Why the probe did not start. Messages name no flag: [`ProbeError::setting`] says which
/// [`ProbeConfig`] field an error is about, for the caller to name its own way.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("CPU {0} is not online (online: {1})")]
    CpuOffline(usize, String),
    #[error("no CPU selected")]
    NoCpus,
    #[error("no class selected")]
    NoClasses,
    #[error("{0} is too short (the minimum is 10us)")]
    PeriodTooShort(Nanos),
    #[error("must be longer than 0")]
    ZeroDuration,
    #[error("{0} of work per wake-up does not fit the {1} period")]
    ComputeTooLong(Nanos, Nanos),
    #[error("nothing to measure: every selected class needs real-time permission (run as root or grant CAP_SYS_NICE), or add the normal class")]
    NothingPermitted,
    #[error("cannot hold {path}: {source}")]
    DmaLatency {
        path: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read online CPUs: {0}")]
    OnlineCpus(#[source] std::io::Error),
    #[error("measuring thread {thread}: {message}")]
    ThreadSetup { thread: String, message: String },
    #[error("cannot start measuring thread: {0}")]
    Spawn(#[source] std::io::Error),
}

impl ProbeError {
    /// The [`ProbeConfig`] field the error is about (`cpus`, `classes`, `period`, `duration`,
    /// `cpu_dma_latency_us`), when one is.
    pub fn setting(&self) -> Option<&'static str> {
        match self {
            ProbeError::CpuOffline(..) | ProbeError::NoCpus => Some("cpus"),
            ProbeError::NoClasses | ProbeError::NothingPermitted => Some("classes"),
            ProbeError::PeriodTooShort(_) => Some("period"),
            ProbeError::ZeroDuration => Some("duration"),
            ProbeError::ComputeTooLong(..) => Some("compute"),
            ProbeError::DmaLatency { .. } => Some("cpu_dma_latency_us"),
            ProbeError::OnlineCpus(_) | ProbeError::ThreadSetup { .. } | ProbeError::Spawn(_) => {
                None
            }
        }
    }
}

/// Which series a sample or a thread belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    pub metric: Metric,
    pub class: Class,
    pub cpu: usize,
}

impl SeriesKey {
    /// The series' name outside the probe (`class/metric@cpu`).
    pub fn label(&self) -> rtlab_core::SeriesLabel<'static> {
        rtlab_core::SeriesLabel {
            class: self.class.name(),
            metric: self.metric,
            cpu: self.cpu as u32,
        }
    }
}

/// A sample above its series' late threshold, for the tracer to explain. Times are
/// CLOCK_MONOTONIC absolute ns (the tracefs `mono` clock). For hand-off, `intended_ns` is the
/// signal time and `actual_ns` the time the woken thread ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LateSample {
    pub metric: Metric,
    pub class: Class,
    pub cpu: usize,
    pub intended_ns: u64,
    pub actual_ns: u64,
    pub latency_ns: u64,
}

/// Told about every late sample by the measuring thread that took it, after the sample is recorded
/// and before the thread sleeps again (like cyclictest's `--tracemark`), so it delays no
/// measurement. Runs on the sample path: an implementation must not allocate, lock, log or block;
/// one non-blocking syscall (a `trace_marker` write) is the most it may do. Not called while a
/// series' threshold is 0 (calibrating: nothing is late yet).
pub trait LateSampleSink: Send + Sync {
    fn late_sample(&self, sample: &LateSample);
}

/// One finished series.
#[derive(Debug)]
pub struct SeriesResult {
    pub key: SeriesKey,
    pub policy: Policy,
    pub histogram: rtlab_core::LatencyHistogram,
    pub missed: u64,
    pub max_per_second: Vec<u64>,
    pub peaks: Vec<Peak>,
}

/// Everything the probe measured.
#[derive(Debug)]
pub struct ProbeResult {
    pub series: Vec<SeriesResult>,
    /// Measuring time actually covered (shorter than planned when stopped early), ns.
    pub measured_ns: u64,
    pub stopped_early: bool,
    pub warnings: Vec<String>,
    /// Absolute CLOCK_MONOTONIC time at which measurement started.
    pub measure_start_ns: u64,
    /// The wake-up period the timer threads ran with.
    pub period: Nanos,
}

/// One series' counters while it runs ([`RunningProbe::live_counters`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveSnapshot {
    /// Samples recorded so far.
    pub samples: u64,
    /// The largest so far, ns.
    pub max_ns: u64,
}

/// A snapshot for the progress display.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    pub measured_ns: u64,
    pub samples: u64,
    pub max_wakeup_ns: u64,
    pub warming_up: bool,
}

struct HandoffSlot {
    sequence: AtomicU32,
    signal_ns: AtomicU64,
    /// Periods the signalling timer thread skipped during measurement: hand-offs that never
    /// happened because the signaller itself never ran. Added to the waiter's `missed`.
    signals_never_sent: AtomicU64,
}

struct Shared {
    stop: Arc<AtomicBool>,
    measure_start_ns: u64,
    end_ns: u64,
    late_dropped: AtomicU64,
    /// Told about each late sample the moment it is taken, once `set_late_sink` set it.
    late_sink: std::sync::OnceLock<Arc<dyn LateSampleSink>>,
}

/// A late threshold on its own cache lines (see `LiveCounters`): read on every sample.
#[derive(Debug)]
#[repr(align(128))]
struct LateThreshold(AtomicU64);

/// A series' late threshold plus the queue its thread pushes late samples into.
struct LateChannel {
    threshold_ns: Arc<LateThreshold>,
    producer: rtrb::Producer<LateSample>,
}

/// What a measuring thread reports once it is pinned and at its policy.
struct ThreadReady {
    /// The series it feeds.
    keys: Vec<SeriesKey>,
    /// Its kernel thread id.
    tid: u32,
}

/// The channel each measuring thread reports its set-up on (or why it failed).
type SetupSender = mpsc::Sender<Result<ThreadReady, ProbeError>>;

struct ThreadOutput {
    recorders: Vec<(SeriesKey, Recorder)>,
}

pub struct Probe;

pub struct RunningProbe {
    shared: Arc<Shared>,
    start_ns: u64,
    period: Nanos,
    threads: Vec<JoinHandle<ThreadOutput>>,
    live: Vec<(SeriesKey, Arc<LiveCounters>)>,
    thread_ids: Vec<(SeriesKey, u32)>,
    thresholds: Vec<(SeriesKey, Arc<LateThreshold>)>,
    late_consumers: Mutex<Vec<rtrb::Consumer<LateSample>>>,
    policies: Vec<(SeriesKey, Policy)>,
    warnings: Vec<String>,
    _memory_lock: Option<rtlab_sys::memory::MemoryLock>,
    _dma_latency: Option<rtlab_sys::dma_latency::DmaLatencyGuard>,
}

impl std::fmt::Debug for RunningProbe {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RunningProbe")
            .field("start_ns", &self.start_ns)
            .field("threads", &self.threads.len())
            .finish()
    }
}

fn short_class(class: Class) -> &'static str {
    match class {
        Class::RtHigh => "rthi",
        Class::RtMid => "rtmid",
        Class::Normal => "norm",
    }
}

impl Probe {
    /// Checks the configuration, sets the machine up (memory lock, cpu_dma_latency), starts every
    /// measuring thread and returns once they are all pinned and at their policy.
    pub fn start(config: &ProbeConfig, stop: Arc<AtomicBool>) -> Result<RunningProbe, ProbeError> {
        check_config(config)?;
        let mut warnings = Vec::new();
        let classes = permitted_classes(&config.classes, &mut warnings)?;
        let memory_lock = lock_memory(&mut warnings);
        let dma_latency = hold_dma_latency(config.cpu_dma_latency_us)?;

        let start_ns = monotonic_ns() + SETUP_NS;
        let measure_start_ns = start_ns + config.warmup.as_u64();
        let end_ns = measure_start_ns + config.duration.as_u64();
        let shared = Arc::new(Shared {
            stop,
            measure_start_ns,
            end_ns,
            late_dropped: AtomicU64::new(0),
            late_sink: std::sync::OnceLock::new(),
        });
        let mut running = RunningProbe {
            shared: Arc::clone(&shared),
            start_ns,
            period: config.period,
            threads: Vec::new(),
            live: Vec::new(),
            thread_ids: Vec::new(),
            thresholds: Vec::new(),
            late_consumers: Mutex::new(Vec::new()),
            policies: Vec::new(),
            warnings,
            _memory_lock: memory_lock,
            _dma_latency: dma_latency,
        };
        let (setup_sender, setup_receiver) = mpsc::channel::<Result<ThreadReady, ProbeError>>();
        let mut plan = ThreadPlan {
            config,
            classes: &classes,
            shared: &shared,
            start_ns,
            seconds: config.duration.as_u64().div_ceil(1_000_000_000) as usize,
            period_ns: config.period.as_u64(),
            n_timer_threads: (config.cpus.len() * classes.len()) as u64,
            setup_sender,
            n_threads: 0,
        };
        for (cpu_index, &cpu) in config.cpus.iter().enumerate() {
            plan.spawn_threads_of_cpu(&mut running, cpu_index, cpu)?;
        }
        let n_threads = plan.n_threads;
        // From here the threads hold the only senders, so the wait ends even if one never reports.
        drop(plan);
        running.wait_for_set_up(&setup_receiver, n_threads)?;
        Ok(running)
    }
}

/// Refuses a configuration that cannot run: no CPU, an offline CPU, no class, a period under
/// 10 µs, no duration, or more work per wake-up than the period holds.
fn check_config(config: &ProbeConfig) -> Result<(), ProbeError> {
    let online = rtlab_sys::cpu::online_cpus().map_err(ProbeError::OnlineCpus)?;
    if config.cpus.is_empty() {
        return Err(ProbeError::NoCpus);
    }
    if let Some(cpu) = config.cpus.iter().find(|cpu| !online.contains(cpu)) {
        let online_text = online
            .iter()
            .map(|cpu| cpu.to_string())
            .collect::<Vec<_>>()
            .join(",");
        return Err(ProbeError::CpuOffline(*cpu, online_text));
    }
    if config.classes.is_empty() {
        return Err(ProbeError::NoClasses);
    }
    if config.period < Nanos::from_micros(10) {
        return Err(ProbeError::PeriodTooShort(config.period));
    }
    if config.duration == Nanos::ZERO {
        return Err(ProbeError::ZeroDuration);
    }
    if let Some(compute) = config.compute {
        if compute >= config.period {
            return Err(ProbeError::ComputeTooLong(compute, config.period));
        }
    }
    Ok(())
}

/// The classes to measure, sorted and without repeats: the real-time ones are left out (with a
/// warning) when this process may not use real-time scheduling, an error if none is left.
fn permitted_classes(
    asked: &[Class],
    warnings: &mut Vec<String>,
) -> Result<Vec<Class>, ProbeError> {
    let mut classes: Vec<Class> = asked.to_vec();
    classes.sort();
    classes.dedup();
    if classes.iter().any(|class| class.is_realtime()) && !rtlab_sys::sched::realtime_permitted() {
        let skipped: Vec<&str> = classes
            .iter()
            .filter(|class| class.is_realtime())
            .map(|class| class.name())
            .collect();
        warnings.push(format!(
            "no permission for real-time scheduling (run as root or grant CAP_SYS_NICE): skipped {}",
            skipped.join(", ")
        ));
        classes.retain(|class| !class.is_realtime());
        if classes.is_empty() {
            return Err(ProbeError::NothingPermitted);
        }
    }
    Ok(classes)
}

/// Locks the process's memory as it is faulted in; a warning instead when that is not allowed.
fn lock_memory(warnings: &mut Vec<String>) -> Option<rtlab_sys::memory::MemoryLock> {
    // On fault, not all at once: populating the whole binary, every thread's stack and every
    // heap mapping cost more CPU than a 20 s run's measuring (BENCHMARKS.md "probe"). What
    // the sample path touches is written before the first deadline instead
    // (`Recorder::prefault`, `prefault_stack`, the late queues below), so it is resident
    // and locked all the same.
    match rtlab_sys::memory::MemoryLock::lock_on_fault() {
        Ok(lock) => Some(lock),
        Err(error) => {
            warnings.push(format!(
                "could not lock memory (mlockall: {error}): page faults may show up as latency"
            ));
            None
        }
    }
}

/// Holds /dev/cpu_dma_latency at `microseconds` for as long as the guard lives, when asked to.
fn hold_dma_latency(
    microseconds: Option<i32>,
) -> Result<Option<rtlab_sys::dma_latency::DmaLatencyGuard>, ProbeError> {
    let Some(microseconds) = microseconds else {
        return Ok(None);
    };
    rtlab_sys::dma_latency::DmaLatencyGuard::hold(microseconds)
        .map(Some)
        .map_err(|source| ProbeError::DmaLatency {
            path: rtlab_sys::dma_latency::PATH,
            source,
        })
}

/// What the measuring threads of one run are built from, and the channel each of them reports
/// its set-up on.
struct ThreadPlan<'a> {
    config: &'a ProbeConfig,
    /// The classes measured: sorted, without repeats, permitted.
    classes: &'a [Class],
    shared: &'a Arc<Shared>,
    /// CLOCK_MONOTONIC time of the run's first deadline.
    start_ns: u64,
    /// Whole seconds of measuring: the length of each recorder's per-second table.
    seconds: usize,
    period_ns: u64,
    /// Timer threads in all: their first deadlines are spread evenly over one period.
    n_timer_threads: u64,
    setup_sender: SetupSender,
    /// Threads started so far; each reports its set-up once.
    n_threads: usize,
}

impl ThreadPlan<'_> {
    /// Starts one CPU's threads: its hand-off waiters (if asked for), then a timer thread per
    /// class, the highest class's waking the waiters.
    fn spawn_threads_of_cpu(
        &mut self,
        running: &mut RunningProbe,
        cpu_index: usize,
        cpu: usize,
    ) -> Result<(), ProbeError> {
        // Hand-off waiters of this CPU, woken by its highest-class timer thread.
        let mut slots = if self.config.handoff {
            self.spawn_handoff_waiters(running, cpu)?
        } else {
            Vec::new()
        };
        for class_index in 0..self.classes.len() {
            let handoff_slots = if class_index == 0 {
                std::mem::take(&mut slots)
            } else {
                Vec::new()
            };
            self.spawn_timer_thread(running, cpu_index, class_index, cpu, handoff_slots)?;
        }
        Ok(())
    }

    /// Starts a hand-off waiter per class on `cpu`; returns the slots its timer thread signals.
    fn spawn_handoff_waiters(
        &mut self,
        running: &mut RunningProbe,
        cpu: usize,
    ) -> Result<Vec<Arc<HandoffSlot>>, ProbeError> {
        let mut slots: Vec<Arc<HandoffSlot>> = Vec::new();
        for &class in self.classes {
            let slot = Arc::new(HandoffSlot {
                sequence: AtomicU32::new(0),
                signal_ns: AtomicU64::new(0),
                signals_never_sent: AtomicU64::new(0),
            });
            slots.push(Arc::clone(&slot));
            let key = SeriesKey {
                metric: Metric::Handoff,
                class,
                cpu,
            };
            let recorder = self.new_recorder(running, key, class.policy());
            let late = running.new_late_channel(key);
            let thread = WaiterThread {
                key,
                slot,
                recorder,
                late,
                shared: Arc::clone(self.shared),
            };
            let name = format!("rtlab-h-{}-{cpu}", short_class(class));
            self.spawn(running, name, move |sender| thread.run(sender))?;
        }
        Ok(slots)
    }

    /// Starts the timer thread of class number `class_index` on `cpu`, its first deadline offset
    /// into the period by its place among all timer threads.
    fn spawn_timer_thread(
        &mut self,
        running: &mut RunningProbe,
        cpu_index: usize,
        class_index: usize,
        cpu: usize,
        handoff_slots: Vec<Arc<HandoffSlot>>,
    ) -> Result<(), ProbeError> {
        let class = self.classes[class_index];
        let slot_index = (cpu_index * self.classes.len() + class_index) as u64;
        let offset_ns = slot_index * self.period_ns / self.n_timer_threads;
        let wakeup_key = SeriesKey {
            metric: Metric::Wakeup,
            class,
            cpu,
        };
        let interval_key = SeriesKey {
            metric: Metric::Interval,
            class,
            cpu,
        };
        let wakeup = self.new_recorder(running, wakeup_key, class.policy());
        let interval = self.new_recorder(running, interval_key, class.policy());
        let late = running.new_late_channel(wakeup_key);
        let compute = match self.config.compute {
            Some(compute) if class_index == 0 && compute.as_u64() > 0 => {
                let response_key = SeriesKey {
                    metric: Metric::Response,
                    class,
                    cpu,
                };
                let response = self.new_recorder(running, response_key, class.policy());
                Some(ComputeWork {
                    compute_ns: compute.as_u64(),
                    response,
                })
            }
            _ => None,
        };
        let thread = TimerThread {
            class,
            cpu,
            first_deadline_ns: self.start_ns + offset_ns,
            period_ns: self.period_ns,
            wakeup,
            interval,
            late,
            handoff_slots,
            compute,
            shared: Arc::clone(self.shared),
        };
        let name = format!("rtlab-t-{}-{cpu}", short_class(class));
        self.spawn(running, name, move |sender| thread.run(sender))
    }

    /// A recorder for `key`, its live counters and policy registered with `running`.
    fn new_recorder(&self, running: &mut RunningProbe, key: SeriesKey, policy: Policy) -> Recorder {
        let live = Arc::new(LiveCounters::default());
        running.live.push((key, Arc::clone(&live)));
        running.policies.push((key, policy));
        let histogram = match key.metric {
            Metric::Interval => SamplePathHistogram::around(self.period_ns),
            _ => SamplePathHistogram::for_latencies(),
        };
        Recorder::new(self.seconds, self.config.peaks_per_series, histogram, live)
    }

    /// Starts a measuring thread named `name` running `body`, which reports its set-up on the
    /// sender it is given.
    fn spawn(
        &mut self,
        running: &mut RunningProbe,
        name: String,
        body: impl FnOnce(SetupSender) -> ThreadOutput + Send + 'static,
    ) -> Result<(), ProbeError> {
        let sender = self.setup_sender.clone();
        let handle = std::thread::Builder::new()
            .name(name)
            .spawn(move || body(sender))
            .map_err(ProbeError::Spawn)?;
        running.threads.push(handle);
        self.n_threads += 1;
        Ok(())
    }
}

impl RunningProbe {
    /// A late threshold (off) and late-sample queue for `key`, its consumer kept here.
    fn new_late_channel(&mut self, key: SeriesKey) -> LateChannel {
        let threshold_ns = Arc::new(LateThreshold(AtomicU64::new(u64::MAX)));
        self.thresholds.push((key, Arc::clone(&threshold_ns)));
        let (mut producer, mut consumer) = rtrb::RingBuffer::new(LATE_QUEUE_CAPACITY);
        // Every slot written and read once, so a late sample's push never faults a page in.
        let blank = LateSample {
            metric: Metric::Wakeup,
            class: Class::Normal,
            cpu: 0,
            intended_ns: 0,
            actual_ns: 0,
            latency_ns: 0,
        };
        while producer.push(blank).is_ok() {}
        while consumer.pop().is_ok() {}
        self.late_consumers
            .lock()
            .expect("not poisoned")
            .push(consumer);
        LateChannel {
            threshold_ns,
            producer,
        }
    }

    /// Waits until each of the `n_threads` started has reported its set-up, noting their thread
    /// ids. If one failed, stops and joins them all and returns its error.
    fn wait_for_set_up(
        &mut self,
        setup_receiver: &mpsc::Receiver<Result<ThreadReady, ProbeError>>,
        n_threads: usize,
    ) -> Result<(), ProbeError> {
        let mut failure = None;
        for _ in 0..n_threads {
            match setup_receiver.recv() {
                Ok(Ok(ThreadReady { keys, tid })) => {
                    for key in keys {
                        self.thread_ids.push((key, tid));
                    }
                }
                Ok(Err(error)) => {
                    failure.get_or_insert(error);
                }
                Err(_) => break,
            }
        }
        if let Some(error) = failure {
            self.request_stop();
            let _ = self.join_all();
            return Err(error);
        }
        self.thread_ids.sort();
        Ok(())
    }
}

/// Pins, sets the policy and the timer slack of the calling (measuring) thread.
fn set_up_thread(cpu: usize, policy: Policy, name: &str) -> Result<u32, ProbeError> {
    let fail = |what: &str, error: std::io::Error| ProbeError::ThreadSetup {
        thread: name.to_owned(),
        message: format!("{what}: {error}"),
    };
    rtlab_sys::cpu::pin_current_thread(cpu).map_err(|error| fail("pinning", error))?;
    rtlab_sys::sched::set_current_thread_policy(policy).map_err(|error| {
        fail(
            &format!("setting {} {}", policy.name(), policy.priority_or_nice()),
            error,
        )
    })?;
    // 1 ns slack: measure the scheduler, not the default 50 µs coalescing of SCHED_OTHER timers.
    // Per thread, so nothing is left changed when the thread ends.
    rtlab_sys::clock::set_timer_slack_ns(1).map_err(|error| fail("timer slack", error))?;
    prefault_stack();
    Ok(rtlab_sys::cpu::current_tid())
}

/// Stack a measuring thread's sample path may use, written once before measuring (far more than
/// the loop's few frames need; the thread's stack is 2 MiB).
const PREFAULTED_STACK_BYTES: usize = 64 * 1024;

/// Writes the next [`PREFAULTED_STACK_BYTES`] of this thread's stack, so that under
/// `mlockall(MCL_ONFAULT)` those pages are resident and locked before the first sample.
#[inline(never)]
fn prefault_stack() {
    let mut area = [0u8; PREFAULTED_STACK_BYTES];
    std::hint::black_box(&mut area);
}

#[inline]
fn publish_late(late: &mut LateChannel, shared: &Shared, sample: LateSample) {
    let threshold_ns = late.threshold_ns.0.load(Ordering::Relaxed);
    if sample.latency_ns <= threshold_ns {
        return;
    }
    if late.producer.push(sample).is_err() {
        shared.late_dropped.fetch_add(1, Ordering::Relaxed);
    }
    // A threshold of 0 calibrates (every sample is handed over): nothing is late yet.
    if threshold_ns > 0 {
        if let Some(sink) = shared.late_sink.get() {
            sink.late_sample(&sample);
        }
    }
}

struct TimerThread {
    class: Class,
    cpu: usize,
    first_deadline_ns: u64,
    period_ns: u64,
    wakeup: Recorder,
    interval: Recorder,
    late: LateChannel,
    handoff_slots: Vec<Arc<HandoffSlot>>,
    /// The work after each wake-up and its series, when this thread computes.
    compute: Option<ComputeWork>,
    shared: Arc<Shared>,
}

/// The work a computing timer thread does after each wake-up, and the series that times it.
struct ComputeWork {
    /// Busy work per wake-up, ns.
    compute_ns: u64,
    /// The response series: deadline → end of the work.
    response: Recorder,
}

/// Busy work until `compute_ns` of wall time has passed since `from_ns`; returns when it ended.
/// Reads only the clock: what an audio callback's DSP loop looks like to the scheduler.
#[inline]
fn work_until(from_ns: u64, compute_ns: u64) -> u64 {
    let mut sink = 0u64;
    loop {
        let now_ns = monotonic_ns();
        if now_ns.saturating_sub(from_ns) >= compute_ns {
            std::hint::black_box(sink);
            return now_ns;
        }
        for step in 0..64u64 {
            sink = sink.wrapping_add(step.wrapping_mul(2_654_435_761));
        }
    }
}

impl TimerThread {
    fn run(mut self, setup: SetupSender) -> ThreadOutput {
        let wakeup_key = SeriesKey {
            metric: Metric::Wakeup,
            class: self.class,
            cpu: self.cpu,
        };
        let interval_key = SeriesKey {
            metric: Metric::Interval,
            ..wakeup_key
        };
        let name = std::thread::current()
            .name()
            .unwrap_or("rtlab-timer")
            .to_owned();
        match set_up_thread(self.cpu, self.class.policy(), &name) {
            Ok(tid) => {
                self.wakeup.prefault();
                self.interval.prefault();
                let mut keys = vec![wakeup_key, interval_key];
                if let Some(work) = self.compute.as_mut() {
                    work.response.prefault();
                    keys.push(SeriesKey {
                        metric: Metric::Response,
                        ..wakeup_key
                    });
                }
                let _ = setup.send(Ok(ThreadReady { keys, tid }));
            }
            Err(error) => {
                let _ = setup.send(Err(error));
                return self.output(wakeup_key, interval_key);
            }
        }
        drop(setup);
        let shared = Arc::clone(&self.shared);
        let mut schedule = PeriodicSchedule::new(self.first_deadline_ns, self.period_ns);
        let mut previous_wake_ns: Option<u64> = None;
        // xorshift64 state for the computing thread's random phase (never 0).
        let mut phase_state: u64 = 0x9E37_79B9_7F4A_7C15 ^ ((self.cpu as u64 + 1) << 32);
        // ---- the sample path: no allocation, lock, log or syscall beyond clock, futex, sleep ----
        // (and, with a late-sample sink, one call of it after a late sample is recorded)
        loop {
            let period_start_ns = schedule.next_deadline_ns();
            if period_start_ns >= shared.end_ns || shared.stop.load(Ordering::Relaxed) {
                break;
            }
            // A computing thread wakes at a random point of each period (before its work would
            // overrun the period): a competitor whose period is a multiple of the probe's would
            // otherwise meet it at one phase all run long, and its stalls would be measured
            // at that phase only (issue 27: a 50 ms FIFO burst seen 1.9 ms late 600 times of 600).
            let deadline_ns = match &self.compute {
                Some(work) => {
                    phase_state ^= phase_state << 13;
                    phase_state ^= phase_state >> 7;
                    phase_state ^= phase_state << 17;
                    let spread_ns = self.period_ns.saturating_sub(work.compute_ns).max(1);
                    period_start_ns + phase_state % spread_ns
                }
                None => period_start_ns,
            };
            sleep_until_ns(deadline_ns);
            let now_ns = monotonic_ns();
            for slot in &self.handoff_slots {
                slot.signal_ns.store(monotonic_ns(), Ordering::Relaxed);
                slot.sequence.fetch_add(1, Ordering::Release);
                rtlab_sys::futex::wake(&slot.sequence, 1);
            }
            let latency_ns = now_ns.saturating_sub(deadline_ns);
            // The work comes before the schedule advances: periods it overran are skipped (the
            // response series' `missed`), as an application's would be.
            let finished_ns = self
                .compute
                .as_ref()
                .map(|work| work_until(now_ns, work.compute_ns));
            let skipped = schedule.advance(finished_ns.unwrap_or(now_ns));
            if period_start_ns >= shared.measure_start_ns {
                let at_ns = deadline_ns - shared.measure_start_ns;
                if let (Some(work), Some(finished_ns)) = (self.compute.as_mut(), finished_ns) {
                    work.response.record(finished_ns - deadline_ns, at_ns);
                    work.response.missed += skipped;
                }
                self.wakeup.record(latency_ns, at_ns);
                self.wakeup.missed += skipped;
                if skipped > 0 {
                    for slot in &self.handoff_slots {
                        slot.signals_never_sent
                            .fetch_add(skipped, Ordering::Relaxed);
                    }
                }
                if let Some(previous) =
                    previous_wake_ns.filter(|previous| *previous >= shared.measure_start_ns)
                {
                    self.interval.record(now_ns - previous, at_ns);
                    self.interval.missed += skipped;
                }
                publish_late(
                    &mut self.late,
                    &shared,
                    LateSample {
                        metric: Metric::Wakeup,
                        class: self.class,
                        cpu: self.cpu,
                        intended_ns: deadline_ns,
                        actual_ns: now_ns,
                        latency_ns,
                    },
                );
            }
            previous_wake_ns = Some(now_ns);
        }
        // ---- end of the sample path ----
        self.output(wakeup_key, interval_key)
    }

    fn output(self, wakeup_key: SeriesKey, interval_key: SeriesKey) -> ThreadOutput {
        let mut recorders = vec![(wakeup_key, self.wakeup), (interval_key, self.interval)];
        if let Some(ComputeWork { response, .. }) = self.compute {
            let response_key = SeriesKey {
                metric: Metric::Response,
                ..wakeup_key
            };
            recorders.push((response_key, response));
        }
        ThreadOutput { recorders }
    }
}

struct WaiterThread {
    key: SeriesKey,
    slot: Arc<HandoffSlot>,
    recorder: Recorder,
    late: LateChannel,
    shared: Arc<Shared>,
}

impl WaiterThread {
    fn run(mut self, setup: SetupSender) -> ThreadOutput {
        let name = std::thread::current()
            .name()
            .unwrap_or("rtlab-handoff")
            .to_owned();
        match set_up_thread(self.key.cpu, self.key.class.policy(), &name) {
            Ok(tid) => {
                self.recorder.prefault();
                let _ = setup.send(Ok(ThreadReady {
                    keys: vec![self.key],
                    tid,
                }));
            }
            Err(error) => {
                let _ = setup.send(Err(error));
                return ThreadOutput {
                    recorders: vec![(self.key, self.recorder)],
                };
            }
        }
        drop(setup);
        let shared = Arc::clone(&self.shared);
        let mut seen = self.slot.sequence.load(Ordering::Acquire);
        // ---- the sample path ----
        loop {
            if shared.stop.load(Ordering::Relaxed) || monotonic_ns() >= shared.end_ns {
                break;
            }
            rtlab_sys::futex::wait(&self.slot.sequence, seen, WAITER_POLL_NS);
            let now_ns = monotonic_ns();
            let sequence = self.slot.sequence.load(Ordering::Acquire);
            if sequence == seen {
                continue; // timeout or spurious wake-up
            }
            // Seqlock-style read: the signal time belongs to `sequence` only if it did not move.
            let signal_ns = self.slot.signal_ns.load(Ordering::Relaxed);
            let confirmed = self.slot.sequence.load(Ordering::Acquire);
            let coalesced = confirmed.wrapping_sub(seen).saturating_sub(1);
            seen = confirmed;
            if confirmed != sequence || signal_ns < shared.measure_start_ns {
                continue;
            }
            let latency_ns = now_ns.saturating_sub(signal_ns);
            self.recorder
                .record(latency_ns, signal_ns - shared.measure_start_ns);
            // Signals that arrived while this thread had not run yet: hand-offs that never happened.
            self.recorder.missed += u64::from(coalesced);
            publish_late(
                &mut self.late,
                &shared,
                LateSample {
                    metric: Metric::Handoff,
                    class: self.key.class,
                    cpu: self.key.cpu,
                    intended_ns: signal_ns,
                    actual_ns: now_ns,
                    latency_ns,
                },
            );
        }
        // ---- end of the sample path ----
        self.recorder.missed += self.slot.signals_never_sent.load(Ordering::Relaxed);
        ThreadOutput {
            recorders: vec![(self.key, self.recorder)],
        }
    }
}

impl RunningProbe {
    /// CLOCK_MONOTONIC time at which warm-up ends and samples start counting.
    pub fn measure_start_ns(&self) -> u64 {
        self.shared.measure_start_ns
    }

    /// CLOCK_MONOTONIC time at which every thread stops on its own.
    pub fn end_ns(&self) -> u64 {
        self.shared.end_ns
    }

    /// Warnings gathered while starting (skipped classes, memory not locked, …).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The measuring threads' kernel thread ids, with the series each one feeds.
    pub fn thread_ids(&self) -> Vec<(SeriesKey, u32)> {
        self.thread_ids.clone()
    }

    /// The series this run will produce.
    pub fn series_keys(&self) -> Vec<SeriesKey> {
        let mut keys: Vec<SeriesKey> = self.live.iter().map(|(key, _)| *key).collect();
        keys.sort();
        keys
    }

    /// Sets the late threshold of one series (`Some(key)`) or of all wake-up and hand-off series.
    /// Samples above it are queued for `drain_late`. `u64::MAX` turns it off (the default).
    pub fn set_late_threshold(&self, key: Option<SeriesKey>, threshold_ns: u64) {
        for (series, threshold) in &self.thresholds {
            if key.is_none_or(|wanted| wanted == *series) {
                threshold.0.store(threshold_ns, Ordering::Relaxed);
            }
        }
    }

    /// From now on each thread hands every sample above its late threshold to `sink` the moment
    /// it takes it (not while the threshold is 0, i.e. calibrating). A second call changes nothing.
    pub fn set_late_sink(&self, sink: Arc<dyn LateSampleSink>) {
        let _ = self.shared.late_sink.set(sink);
    }

    /// Moves queued late samples into `out`.
    pub fn drain_late(&self, out: &mut Vec<LateSample>) {
        let mut consumers = self.late_consumers.lock().expect("not poisoned");
        for consumer in consumers.iter_mut() {
            while let Ok(sample) = consumer.pop() {
                out.push(sample);
            }
        }
    }

    /// Late samples that could not be queued because the tracer fell behind.
    pub fn late_dropped(&self) -> u64 {
        self.shared.late_dropped.load(Ordering::Relaxed)
    }

    /// The live histogram of one series so far is not readable without locking; instead the
    /// controller can read each series' sample count and running maximum.
    pub fn live_counters(&self, key: SeriesKey) -> Option<LiveSnapshot> {
        self.live
            .iter()
            .find(|(series, _)| *series == key)
            .map(|(_, live)| LiveSnapshot {
                samples: live.samples.load(Ordering::Relaxed),
                max_ns: live.max_ns.load(Ordering::Relaxed),
            })
    }

    pub fn progress(&self) -> Progress {
        let now_ns = monotonic_ns();
        let mut progress = Progress {
            warming_up: now_ns < self.shared.measure_start_ns,
            measured_ns: now_ns
                .min(self.shared.end_ns)
                .saturating_sub(self.shared.measure_start_ns),
            ..Progress::default()
        };
        for (key, live) in &self.live {
            if key.metric == Metric::Wakeup {
                progress.samples += live.samples.load(Ordering::Relaxed);
                progress.max_wakeup_ns = progress
                    .max_wakeup_ns
                    .max(live.max_ns.load(Ordering::Relaxed));
            }
        }
        progress
    }

    /// Asks every thread to stop at its next wake-up.
    pub fn request_stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }

    pub fn stop_requested(&self) -> bool {
        self.shared.stop.load(Ordering::Relaxed)
    }

    /// True once every measuring thread has ended.
    pub fn is_finished(&self) -> bool {
        self.threads.iter().all(|handle| handle.is_finished())
    }

    fn join_all(&mut self) -> Vec<(SeriesKey, Recorder)> {
        let mut recorders = Vec::new();
        for handle in self.threads.drain(..) {
            match handle.join() {
                Ok(output) => recorders.extend(output.recorders),
                Err(_) => self
                    .warnings
                    .push("a measuring thread panicked; its series are missing".to_owned()),
            }
        }
        recorders
    }

    /// Waits for every thread to end and collects the series.
    pub fn finish(mut self) -> ProbeResult {
        let mut recorders = self.join_all();
        let finished_ns = monotonic_ns().min(self.shared.end_ns);
        let stopped_early = self.stop_requested() && finished_ns < self.shared.end_ns;
        let measured_ns = finished_ns.saturating_sub(self.shared.measure_start_ns);
        recorders.sort_by_key(|(key, _)| *key);
        let mut warnings = std::mem::take(&mut self.warnings);
        let dropped = self.late_dropped();
        if dropped > 0 {
            warnings.push(format!(
                "{dropped} late samples could not be handed to the tracer (its queue was full); they are still in the histograms"
            ));
        }
        let series = recorders
            .into_iter()
            .map(|(key, recorder)| {
                if recorder.beyond_table > 0 {
                    warnings.push(format!(
                        "{}: {} samples fell beyond the per-second table",
                        key.label(),
                        recorder.beyond_table
                    ));
                }
                let policy = self
                    .policies
                    .iter()
                    .find(|(series, _)| *series == key)
                    .map(|(_, policy)| *policy)
                    .unwrap_or(key.class.policy());
                SeriesResult {
                    key,
                    policy,
                    missed: recorder.missed,
                    max_per_second: recorder.max_per_second(measured_ns),
                    peaks: recorder.peaks(),
                    histogram: recorder.histogram.into_histogram(),
                }
            })
            .collect();
        ProbeResult {
            series,
            measured_ns,
            stopped_early,
            warnings,
            measure_start_ns: self.shared.measure_start_ns,
            period: self.period,
        }
    }
}

impl Drop for RunningProbe {
    /// A probe dropped without `finish` (an error path) still stops and joins its threads.
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.request_stop();
            let _ = self.join_all();
        }
    }
}
