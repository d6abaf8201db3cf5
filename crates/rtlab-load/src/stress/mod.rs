//! Built-in stress loads: a latency figure without its load means nothing.
//!
//! Seven stressors (cpu, memory, io, net, fork, timers, cache), each a set of SCHED_OTHER worker
//! threads running short steps of work under a duty cycle, so that `cpu:50%` really keeps every CPU
//! busy half of every 20 ms slice. No dependency on stress-ng: the load is part of rtlab and goes
//! into the Run record with what it measurably consumed (CPU time, page faults, context switches,
//! bytes written), read from /proc by each worker thread about itself.
//!
//! Safety: every worker checks a shared stop flag and the run's deadline between steps (each step
//! is ≤ a few ms), so a load never outlives its run; [`RunningStress`] stops and joins its workers
//! when dropped, which covers error and panic paths; temporary files are removed by their owners.

mod cache;
mod cpu;
mod fork;
mod io;
mod memory;
mod net;
mod spec;
mod timers;

pub use spec::{
    parse_stress_list, SpecError, StressSpec, StressorKind, Workers, ALL_KINDS, MAX_WORKERS,
};

use rtlab_sys::load_syscalls::{current_thread_usage, ThreadUsage};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Length of one duty-cycle slice: a worker at P % is busy for P % of each slice and sleeps the rest.
pub const DUTY_SLICE: Duration = Duration::from_millis(20);

/// What one step of a stressor did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StepOutcome {
    pub operations: u64,
    pub bytes: u64,
}

/// What a stressor's helper threads used, and anything the user should know about the load.
#[derive(Debug, Default)]
pub(crate) struct FinishOutcome {
    pub helper_usage: ThreadUsage,
    pub notes: Vec<String>,
}

/// One worker's unit of work. `step` must return within a few milliseconds so that stopping and
/// the duty cycle stay prompt.
pub(crate) trait Stressor: Send {
    fn step(&mut self) -> std::io::Result<StepOutcome>;
    /// Stops helper threads and removes temporary files; called once, on the worker thread.
    fn finish(&mut self) -> FinishOutcome {
        FinishOutcome::default()
    }
}

/// Where and until when stressors run.
#[derive(Clone, Debug)]
pub struct StressOptions {
    /// Workers stop on their own at this instant even if nobody asks them to.
    pub deadline: Instant,
    /// Parent of the io stressor's temporary directories.
    pub temp_dir: PathBuf,
    pub online_cpus: usize,
}

impl StressOptions {
    /// Deadline `max_duration` from now, temp files under `std::env::temp_dir()`, CPUs from sysfs.
    pub fn new(max_duration: Duration) -> StressOptions {
        let online_cpus = rtlab_sys::cpu::online_cpus()
            .map(|cpus| cpus.len())
            .unwrap_or_else(|_| {
                std::thread::available_parallelism().map_or(1, |count| count.get())
            });
        StressOptions {
            deadline: Instant::now() + max_duration,
            temp_dir: std::env::temp_dir(),
            online_cpus,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StressError {
    #[error("stressor '{spec}' could not start: {message}")]
    Start { spec: String, message: String },
    #[error("could not start a worker thread for '{spec}': {source}")]
    Thread {
        spec: String,
        source: std::io::Error,
    },
}

/// What one stressor did, measured by its threads from /proc.
#[derive(Clone, Debug)]
pub struct StressorReport {
    pub spec: StressSpec,
    pub workers: u32,
    pub started_at: Instant,
    pub stopped_at: Instant,
    /// Stressor-specific units: spin rounds, page-fault rounds, writes, messages, processes, sleeps.
    pub operations: u64,
    /// Bytes moved: copied (memory, cache), written (io), sent (net).
    pub bytes: u64,
    /// CPU time, faults and context switches of all the stressor's threads.
    pub usage: ThreadUsage,
    /// Errors that stopped a worker early (the load was then lighter than asked).
    pub errors: Vec<String>,
    pub notes: Vec<String>,
}

struct WorkerOutcome {
    operations: u64,
    bytes: u64,
    usage: ThreadUsage,
    error: Option<String>,
    notes: Vec<String>,
    stopped_at: Instant,
}

/// Stressors that are running; stop them with [`RunningStress::stop`] (dropping also stops them).
pub struct RunningStress {
    stop: Arc<AtomicBool>,
    started_at: Instant,
    specs: Vec<(StressSpec, u32)>,
    workers: Vec<(usize, JoinHandle<WorkerOutcome>)>,
}

impl std::fmt::Debug for RunningStress {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RunningStress")
            .field("specs", &self.specs)
            .field("workers", &self.workers.len())
            .finish()
    }
}

fn build_stressor(
    spec: &StressSpec,
    worker_index: u32,
    options: &StressOptions,
) -> std::io::Result<Box<dyn Stressor>> {
    Ok(match spec.kind {
        StressorKind::Cpu => Box::new(cpu::CpuStressor::new(worker_index)),
        StressorKind::Memory => Box::new(memory::MemoryStressor::new()?),
        StressorKind::Io => Box::new(io::IoStressor::new(&options.temp_dir, worker_index)?),
        StressorKind::Net => Box::new(net::NetStressor::new(options.deadline)?),
        StressorKind::Fork => Box::new(fork::ForkStressor::new()?),
        StressorKind::Timers => Box::new(timers::TimerStressor::new(worker_index)?),
        StressorKind::Cache => Box::new(cache::CacheStressor::new(worker_index)?),
    })
}

/// What a stressor did under its duty cycle.
struct DutyCycleWork {
    operations: u64,
    bytes: u64,
    /// The error that ended it early, if one did.
    error: Option<String>,
}

/// Runs `stressor` under the duty cycle until `stop` is set or `deadline` passes.
fn run_duty_cycle(
    stressor: &mut dyn Stressor,
    duty_percent: u8,
    stop: &AtomicBool,
    deadline: Instant,
) -> DutyCycleWork {
    let busy = DUTY_SLICE * u32::from(duty_percent) / 100;
    let (mut operations, mut bytes) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let slice_start = Instant::now();
        loop {
            match stressor.step() {
                Ok(outcome) => {
                    operations += outcome.operations;
                    bytes += outcome.bytes;
                }
                Err(error) => {
                    return DutyCycleWork {
                        operations,
                        bytes,
                        error: Some(error.to_string()),
                    }
                }
            }
            if stop.load(Ordering::Relaxed) || slice_start.elapsed() >= busy {
                break;
            }
        }
        if duty_percent < 100 {
            let wake = (slice_start + DUTY_SLICE).min(deadline);
            // At most one slice (20 ms): a stop request is honoured within a slice.
            let now = Instant::now();
            if wake > now {
                std::thread::sleep(wake - now);
            }
        }
    }
    DutyCycleWork {
        operations,
        bytes,
        error: None,
    }
}

/// Starts every stressor of `specs`; returns once all workers are set up (or the first error,
/// after stopping the ones already started).
pub fn start(specs: &[StressSpec], options: &StressOptions) -> Result<RunningStress, StressError> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut running = RunningStress {
        stop: Arc::clone(&stop),
        started_at: Instant::now(),
        specs: Vec::new(),
        workers: Vec::new(),
    };
    let (ready_sender, ready_receiver) = mpsc::channel::<Result<(), String>>();
    let mut expected_ready = 0usize;
    for (spec_index, spec) in specs.iter().enumerate() {
        let count = spec.worker_count(options.online_cpus);
        running.specs.push((*spec, count));
        for worker_index in 0..count {
            let spec = *spec;
            let options = options.clone();
            let stop = Arc::clone(&stop);
            let ready = ready_sender.clone();
            let handle = std::thread::Builder::new()
                .name(format!("rtlab-load-{}-{worker_index}", spec.kind))
                .spawn(move || {
                    // Threads inherit the creator's policy: a load must never run at RT priority.
                    let mut notes = Vec::new();
                    if let Err(error) = rtlab_sys::sched::set_current_thread_policy(
                        rtlab_sys::sched::Policy::Other { nice: 0 },
                    ) {
                        notes.push(format!("could not set SCHED_OTHER: {error}"));
                    }
                    let usage_before = current_thread_usage().unwrap_or_default();
                    let mut stressor = match build_stressor(&spec, worker_index, &options) {
                        Ok(stressor) => {
                            let _ = ready.send(Ok(()));
                            stressor
                        }
                        Err(error) => {
                            let _ = ready.send(Err(error.to_string()));
                            return WorkerOutcome {
                                operations: 0,
                                bytes: 0,
                                usage: ThreadUsage::default(),
                                error: Some(error.to_string()),
                                notes,
                                stopped_at: Instant::now(),
                            };
                        }
                    };
                    drop(ready);
                    let DutyCycleWork {
                        operations,
                        bytes,
                        error,
                    } = run_duty_cycle(
                        stressor.as_mut(),
                        spec.duty_percent,
                        &stop,
                        options.deadline,
                    );
                    let stopped_at = Instant::now();
                    let finish = stressor.finish();
                    drop(stressor);
                    let mut usage = current_thread_usage()
                        .map(|after| after.since(&usage_before))
                        .unwrap_or_default();
                    usage.add(&finish.helper_usage);
                    notes.extend(finish.notes);
                    WorkerOutcome {
                        operations,
                        bytes,
                        usage,
                        error,
                        notes,
                        stopped_at,
                    }
                })
                .map_err(|source| StressError::Thread {
                    spec: spec.to_string(),
                    source,
                })?;
            running.workers.push((spec_index, handle));
            expected_ready += 1;
        }
    }
    drop(ready_sender);
    for _ in 0..expected_ready {
        match ready_receiver.recv() {
            Ok(Ok(())) => {}
            Ok(Err(message)) => {
                let spec = failed_spec(&mut running);
                return Err(StressError::Start { spec, message });
            }
            Err(_) => break,
        }
    }
    running.started_at = Instant::now();
    Ok(running)
}

/// Stops everything and names the first stressor whose worker failed to start.
fn failed_spec(running: &mut RunningStress) -> String {
    running.stop.store(true, Ordering::Relaxed);
    let mut failed = String::from("?");
    for (spec_index, handle) in running.workers.drain(..) {
        if let Ok(outcome) = handle.join() {
            if outcome.error.is_some() && failed == "?" {
                failed = running.specs[spec_index].0.to_string();
            }
        }
    }
    failed
}

impl RunningStress {
    /// Asks every worker to stop after its current step, without waiting.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn started_at(&self) -> Instant {
        self.started_at
    }

    /// Stops every worker, waits for them, and reports what each stressor did.
    pub fn stop(mut self) -> Vec<StressorReport> {
        self.request_stop();
        let mut reports: Vec<StressorReport> = self
            .specs
            .iter()
            .map(|(spec, workers)| StressorReport {
                spec: *spec,
                workers: *workers,
                started_at: self.started_at,
                stopped_at: self.started_at,
                operations: 0,
                bytes: 0,
                usage: ThreadUsage::default(),
                errors: Vec::new(),
                notes: Vec::new(),
            })
            .collect();
        for (spec_index, handle) in self.workers.drain(..) {
            let report = &mut reports[spec_index];
            match handle.join() {
                Ok(outcome) => {
                    report.operations += outcome.operations;
                    report.bytes += outcome.bytes;
                    report.usage.add(&outcome.usage);
                    report.stopped_at = report.stopped_at.max(outcome.stopped_at);
                    if let Some(error) = outcome.error {
                        report.errors.push(error);
                    }
                    for note in outcome.notes {
                        if !report.notes.contains(&note) {
                            report.notes.push(note);
                        }
                    }
                }
                Err(_) => report.errors.push("a worker thread panicked".to_owned()),
            }
        }
        reports
    }
}

impl Drop for RunningStress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for (_, handle) in self.workers.drain(..) {
            let _ = handle.join();
        }
    }
}
