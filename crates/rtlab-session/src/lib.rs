//! rtlab-session: one run as a library call.
//!
//! Everything between "these settings" and "this Run record": the load plan is checked before
//! anything starts, the probe starts, the load starts when warm-up is over, the explain session
//! calibrates its thresholds and routes late samples to the tracer, and at the end the loads stop,
//! steal time is accounted, the record is built with its warnings and each series gets its tail
//! projection. `rtlab run`, `rtlab tune`'s rounds and the monitor (rtlab-monitor) all start a run
//! the same way:
//!
//! ```no_run
//! # use rtlab_session::{RunConfig, Session, NoObserver};
//! # fn example(config: RunConfig) -> Result<(), rtlab_session::SessionError> {
//! let record = Session::new(config)?.run(&mut NoObserver)?;
//! println!("{} series", record.series.len());
//! # Ok(()) }
//! ```
//!
//! Nothing here prints; progress goes to an [`Observer`].

mod error_kind;
mod run_warnings;
mod study_record;
mod summary;
pub mod tails;
#[cfg(windows)]
pub mod windows;

// Linux only: runs, explain, loads and timer studies (Windows: `windows`).
cfg_if::cfg_if! {
    if #[cfg(target_os = "linux")] {
        pub mod buffer;
        pub mod explain;
        pub mod load;
        mod record;
        pub mod supply;
        pub mod timers;
    }
}

pub use error_kind::is_input_error;
#[cfg(target_os = "linux")]
pub use explain::{ExplainConfig, RecorderChoice};
#[cfg(target_os = "linux")]
pub use load::{LoadError, LoadField, LoadPlan, LoadRequest, RunningLoad};
pub use summary::summary_line;
pub use tails::{attach_tails, usage_of_record};

#[cfg(target_os = "linux")]
use rtlab_core::{HistogramError, RecordError, RunRecord};
#[cfg(target_os = "linux")]
use rtlab_explain::TraceError;
#[cfg(target_os = "linux")]
use rtlab_probe::{Probe, ProbeConfig, ProbeError};
#[cfg(target_os = "linux")]
use std::sync::atomic::AtomicBool;
#[cfg(target_os = "linux")]
use std::sync::Arc;
use std::time::Duration;

/// Everything a run needs.
#[cfg(target_os = "linux")]
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The measuring threads. An empty `cpus` means every online CPU.
    pub probe: ProbeConfig,
    /// Load and competitors during measurement.
    pub load: LoadRequest,
    /// Explain late wake-ups (None: don't record kernel events).
    pub explain: Option<ExplainConfig>,
    /// The command line that asked for the run (kept in the record to repeat it).
    pub cmdline: Vec<String>,
}

/// Where a run reports while it goes on. Every method has a default that does nothing.
pub trait Observer {
    /// How often the session wakes to check the probe, the load and the late samples. A short
    /// interval draws a smooth progress bar; a long one stays out of the measurement's way.
    fn poll_interval(&self) -> Duration {
        Duration::from_millis(250)
    }

    /// Called at every poll while the probe runs.
    fn progress(&mut self, _progress: &SessionProgress) {}

    /// Called once when measuring is over, before the record is built.
    fn measured(&mut self) {}
}

/// An observer that watches nothing.
#[derive(Debug, Default)]
pub struct NoObserver;

impl Observer for NoObserver {}

/// A snapshot of a running session.
#[derive(Clone, Copy, Debug, Default)]
pub struct SessionProgress {
    /// Warm-up plus measurement, ns.
    pub total_ns: u64,
    /// Time since the probe started, ns (at most `total_ns`).
    pub elapsed_ns: u64,
    pub warming_up: bool,
    /// Wake-up samples so far, over every series.
    pub samples: u64,
    /// The largest wake-up latency so far.
    pub max_wakeup_ns: u64,
}

#[cfg(target_os = "linux")]
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("explaining: {0}")]
    Explain(#[from] TraceError),
    #[error("reading the online CPUs: {0}")]
    OnlineCpus(#[source] std::io::Error),
    #[error("encoding a histogram: {0}")]
    Histogram(#[from] HistogramError),
    #[error("the run produced an invalid record: {0}")]
    Record(#[from] RecordError),
}

#[cfg(target_os = "linux")]
impl SessionError {
    /// True when the configuration was at fault (the caller's input), not the system.
    pub fn is_input(&self) -> bool {
        match self {
            SessionError::Probe(error) => probe_error_is_input(error),
            SessionError::Load(error) => error.is_input(),
            _ => false,
        }
    }
}

/// True for the probe errors a configuration causes (a CPU that is not online, a too short
/// period, …), false for those the system causes (a thread that cannot be set up).
#[cfg(target_os = "linux")]
pub fn probe_error_is_input(error: &ProbeError) -> bool {
    !matches!(
        error,
        ProbeError::ThreadSetup { .. } | ProbeError::Spawn(_) | ProbeError::OnlineCpus(_)
    )
}

/// One run, checked and ready to start.
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub struct Session {
    config: RunConfig,
    load_plan: LoadPlan,
    stop: Arc<AtomicBool>,
}

#[cfg(target_os = "linux")]
impl Session {
    /// Checks what can be checked before measuring (the load plan, the CPUs); starts nothing.
    pub fn new(mut config: RunConfig) -> Result<Session, SessionError> {
        if config.probe.cpus.is_empty() {
            config.probe.cpus = rtlab_sys::cpu::online_cpus().map_err(SessionError::OnlineCpus)?;
        }
        let load_plan = load::validate(&config.load)?;
        Ok(Session {
            config,
            load_plan,
            stop: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The flag that ends the run early (e.g. set by a SIGINT handler); the record is then
    /// marked `interrupted` and holds what was measured.
    pub fn with_stop_flag(mut self, stop: Arc<AtomicBool>) -> Session {
        self.stop = stop;
        self
    }

    /// The checked load plan.
    pub fn load_plan(&self) -> &LoadPlan {
        &self.load_plan
    }

    /// The run's configuration after defaults (the CPUs resolved).
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// Runs: starts the probe, the load after warm-up and the explain session, waits for the
    /// end (or the stop flag), and returns the validated Run record.
    pub fn run(self, observer: &mut dyn Observer) -> Result<RunRecord, SessionError> {
        let Session {
            config,
            load_plan,
            stop,
        } = self;
        let cpus = config.probe.cpus.clone();
        let started_at =
            humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let steal_before = rtlab_sys::proc_stat::cpu_times().ok();
        let own_before = (
            rtlab_sys::clock::monotonic_ns(),
            rtlab_sys::thread_clock::process_and_children_cpu_time_ns(),
        );
        let probe = Probe::start(&config.probe, Arc::clone(&stop))?;
        let mut explain_session = config
            .explain
            .as_ref()
            .map(|explain| explain::start(explain, &probe, &cpus));
        let mut running_load: Option<RunningLoad> = None;
        let total_ns = config.probe.warmup.as_u64() + config.probe.duration.as_u64();
        let poll = observer.poll_interval();
        loop {
            std::thread::sleep(poll);
            if probe.stop_requested() || probe.is_finished() {
                break;
            }
            // The load starts once warm-up is over.
            if running_load.is_none()
                && load_plan.is_requested()
                && rtlab_sys::clock::monotonic_ns() >= probe.measure_start_ns()
            {
                running_load = Some(load_plan.start(probe.measure_start_ns(), probe.end_ns())?);
            }
            if let Some(load) = running_load.as_mut() {
                load.poll();
            }
            if let Some(session) = explain_session.as_mut() {
                session.poll(&probe);
            }
            let progress = probe.progress();
            let remaining_ns = probe
                .end_ns()
                .saturating_sub(rtlab_sys::clock::monotonic_ns());
            observer.progress(&SessionProgress {
                total_ns,
                elapsed_ns: total_ns.saturating_sub(remaining_ns),
                warming_up: progress.warming_up,
                samples: progress.samples,
                max_wakeup_ns: progress.max_wakeup_ns,
            });
        }
        observer.measured();
        if let Some(session) = explain_session.as_mut() {
            session.poll(&probe);
        }
        let interrupted = probe.stop_requested();
        let result = probe.finish();
        let (load_value, load_warnings) = match running_load {
            Some(load) => {
                let (value, warnings) = load.stop(&load_plan);
                (Some(value), warnings)
            }
            None if load_plan.is_requested() => (Some(load_plan.describe_unstarted()), Vec::new()),
            None => (None, Vec::new()),
        };
        let steal_after = rtlab_sys::proc_stat::cpu_times().ok();
        let own_after = (
            rtlab_sys::clock::monotonic_ns(),
            rtlab_sys::thread_clock::process_and_children_cpu_time_ns(),
        );
        let mut record = record::build(
            &config,
            &cpus,
            result,
            started_at,
            config.cmdline.clone(),
            interrupted,
        )?;
        record.load = load_value;
        record.warnings.extend(load_plan.warnings().iter().cloned());
        record.warnings.extend(load_warnings);
        if let (Some(before), Some(after)) = (steal_before, steal_after) {
            record
                .warnings
                .extend(record::steal_warnings(&cpus, &before, &after));
            record.conditions = Some(record::conditions(
                &before,
                &after,
                own_after.0.saturating_sub(own_before.0),
                own_after.1.saturating_sub(own_before.1),
            ));
        }
        if let Some(session) = explain_session {
            session.finish(&mut record)?;
        }
        attach_tails(&mut record, &load_plan.usage(), true);
        Ok(record)
    }
}
