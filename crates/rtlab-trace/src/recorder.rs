//! The tracefs recorder and the explainer thread that turns late samples into episodes.
//!
//! [`Recorder`] owns a private instance (`instances/rtlab-<pid>`, CLOCK_MONOTONIC time stamps so
//! they compare with the probe's), reads each measured CPU's `trace_pipe_raw` as binary pages and
//! keeps a bounded [`EventWindow`] per CPU. [`Explainer`] runs it on a thread of its own: it polls
//! the rings, drains the probe's late samples (the probe marks each in the trace with a
//! `trace_marker` write when it takes it), and once a CPU's
//! events cover a sample's window, attributes it. Everything it starts stops by itself at its
//! deadline, and dropping it (normal exit, error, or panic unwinding) joins the thread and removes
//! the instance.

use crate::attribution::{attribute_with_timeline, AttributionContext, LateWakeup};
use crate::event::{EventDecoder, EventError, EventKind, EventSet};
use crate::format::{parse_event_format, parse_header_event, parse_header_page, FormatError};
use crate::page::{LostEvents, PageDecoder, PageError};
use crate::stacks::{parse_record, render_stack, PerfRecord, StackRing};
use crate::symbols::KernelSymbols;
use crate::window::EventWindow;
use rtlab_core::{CauseKind, Episode};
use rtlab_sys::perf::CpuClockSampler;
use rtlab_sys::tracefs::{self, Instance, Marker, RawPipe, Tracefs};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum TraceError {
    #[error("tracefs: {0}")]
    Io(#[from] std::io::Error),
    #[error("{file}: {source}")]
    Format { file: String, source: FormatError },
    #[error("{0}")]
    Event(#[from] EventError),
    #[error("CPU {cpu}: {source}")]
    Page { cpu: usize, source: PageError },
    #[error("required trace event {0} is not available on this kernel")]
    MissingEvent(String),
    #[error("the explainer thread panicked")]
    ThreadPanicked,
}

/// What to record.
#[derive(Clone, Debug)]
pub struct RecorderConfig {
    /// The CPUs whose rings are read (the measured CPUs).
    pub cpus: Vec<usize>,
    /// Ring size per CPU, KiB.
    pub buffer_size_kb: usize,
    /// How long events are kept after they are read.
    pub retention: Duration,
    /// At most this many events are kept per CPU (the oldest go first).
    pub max_events_per_cpu: usize,
    /// Sample call stacks (perf cpu-clock) every this many ns of CPU time; None: no stacks.
    pub stack_period_ns: Option<u64>,
    /// Which events to record.
    pub events: EventSet,
}

impl Default for RecorderConfig {
    fn default() -> Self {
        RecorderConfig {
            cpus: Vec::new(),
            buffer_size_kb: 8192,
            retention: Duration::from_millis(1500),
            max_events_per_cpu: 200_000,
            stack_period_ns: None,
            events: EventSet::Standard,
        }
    }
}

/// Counters the recorder keeps; reported with the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RecorderStats {
    pub pages: u64,
    pub events: u64,
    /// Events the kernel overwrote or dropped before we read them (counted where it said how many).
    pub lost_events: u64,
    /// Pages on which the kernel flagged lost events.
    pub pages_after_loss: u64,
    pub undecodable_pages: u64,
    pub undecodable_events: u64,
    pub stack_samples: u64,
    pub lost_stack_samples: u64,
    pub undecodable_stack_samples: u64,
    /// The probe's late-sample markers seen in the rings.
    pub markers: u64,
}

/// What one [`Recorder::poll`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollOutcome {
    pub decoded: u64,
    /// True when every ring was read empty (the recorder is not behind the kernel).
    pub caught_up: bool,
    /// The most pages read from one CPU's ring.
    pub most_pages: usize,
}

/// How the probe's late-sample markers begin (defined with their text in `rtlab_core::label`).
pub use rtlab_core::LATE_MARKER_PREFIX;

/// A late sample whose CPU's events never arrive is attributed (as unaccounted) after this long.
const GIVE_UP_NS: u64 = 10_000_000_000;

/// How far before the intended time the recorder looks to know the CPU's state.
const LOOKBACK_NS: u64 = 20_000_000;

/// A running recording. Field order matters: files inside the instance close before it is removed,
/// and the instance goes before a tracefs mount we made.
pub struct Recorder {
    samplers: Vec<CpuClockSampler>,
    stack_rings: BTreeMap<usize, StackRing>,
    retention_ns: u64,
    readers: Vec<RawPipe>,
    marker: Option<Arc<Marker>>,
    instance: Instance,
    tracefs: Tracefs,
    decoder: EventDecoder,
    page_decoder: PageDecoder,
    page: Vec<u8>,
    windows: BTreeMap<usize, EventWindow>,
    stats: RecorderStats,
    symbols: KernelSymbols,
    removed_stale: Vec<String>,
    enabled_events: Vec<String>,
    comm_recording_off: bool,
    warnings: Vec<String>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // Close the marker for the probe's threads too: the kernel keeps an instance with an open
        // file. The fields (readers, then the instance) are dropped after this.
        if let Some(marker) = &self.marker {
            marker.revoke();
        }
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Recorder")
            .field("instance", &self.instance.path())
            .field("cpus", &self.windows.keys().collect::<Vec<_>>())
            .field("stats", &self.stats)
            .finish()
    }
}

fn cpu_mask(cpus: &[usize]) -> String {
    let highest = cpus.iter().copied().max().unwrap_or(0);
    let mut words = vec![0u32; highest / 32 + 1];
    for cpu in cpus {
        words[cpu / 32] |= 1 << (cpu % 32);
    }
    words
        .iter()
        .rev()
        .map(|word| format!("{word:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

static INSTANCE_COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Recorder {
    /// Removes stale instances, creates ours, enables the events and starts tracing.
    pub fn start(config: &RecorderConfig) -> Result<Recorder, TraceError> {
        let tracefs = Tracefs::open()?;
        let removed_stale = tracefs.remove_stale_instances()?;
        let sequence = INSTANCE_COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = if sequence == 0 {
            format!("{}{}", tracefs::INSTANCE_PREFIX, std::process::id())
        } else {
            format!(
                "{}{}-{sequence}",
                tracefs::INSTANCE_PREFIX,
                std::process::id()
            )
        };
        let repaired_options = tracefs.repair_options();
        let (instance, comm_recording_off) =
            tracefs.create_instance_without_comm_recording(&name)?;
        let page_decoder = PageDecoder {
            page: parse_header_page(&tracefs.read("events/header_page")?).map_err(|source| {
                TraceError::Format {
                    file: "events/header_page".into(),
                    source,
                }
            })?,
            event: parse_header_event(&tracefs.read("events/header_event")?).map_err(|source| {
                TraceError::Format {
                    file: "events/header_event".into(),
                    source,
                }
            })?,
        };
        instance.write("tracing_on", "0")?;
        instance.write("trace_clock", "mono")?;
        if config.cpus.is_empty() {
            instance.write("buffer_size_kb", &config.buffer_size_kb.to_string())?;
        } else {
            // Only the measured CPUs get a large ring; the others are masked off and stay minimal.
            instance.write("buffer_size_kb", "16")?;
            for cpu in &config.cpus {
                instance.write(
                    &format!("per_cpu/cpu{cpu}/buffer_size_kb"),
                    &config.buffer_size_kb.to_string(),
                )?;
            }
            instance.write("tracing_cpumask", &cpu_mask(&config.cpus))?;
        }
        let mut decoder = EventDecoder::default();
        let mut enabled_events = Vec::new();
        let wanted = config.events.events();
        for (system, event, required) in &wanted {
            let directory = format!("events/{system}/{event}");
            if !instance.exists(&directory) {
                if *required {
                    return Err(TraceError::MissingEvent(format!("{system}:{event}")));
                }
                continue;
            }
            let format_file = format!("{directory}/format");
            let format =
                parse_event_format(system, &instance.read(&format_file)?).map_err(|source| {
                    TraceError::Format {
                        file: format_file.clone(),
                        source,
                    }
                })?;
            decoder.add(&format)?;
            instance.write(&format!("{directory}/enable"), "1")?;
            enabled_events.push(format!("{system}:{event}"));
        }
        let print_format = "events/ftrace/print/format";
        if instance.exists(print_format) {
            let format =
                parse_event_format("ftrace", &instance.read(print_format)?).map_err(|source| {
                    TraceError::Format {
                        file: print_format.into(),
                        source,
                    }
                })?;
            decoder.add(&format)?;
        }
        let cpus = if config.cpus.is_empty() {
            rtlab_sys::cpu::online_cpus()?
        } else {
            config.cpus.clone()
        };
        let readers = cpus
            .iter()
            .map(|cpu| instance.open_cpu_raw(*cpu))
            .collect::<Result<Vec<_>, _>>()?;
        let marker = instance.open_marker().ok().map(Arc::new);
        let retention_ns = config.retention.as_nanos() as u64;
        let windows = cpus
            .iter()
            .map(|cpu| {
                (
                    *cpu,
                    EventWindow::new(config.max_events_per_cpu, retention_ns),
                )
            })
            .collect();
        let page_size = tracefs::ring_page_size(&tracefs)
            .max(page_decoder.page.data_offset + page_decoder.page.data_size);
        let mut warnings = Vec::new();
        if !repaired_options.is_empty() {
            warnings.push(format!(
                "--explain: put back global tracefs options an rtlab that was killed had changed: {}",
                repaired_options.join(", ")
            ));
        }
        let mut samplers = Vec::new();
        let mut stack_rings = BTreeMap::new();
        if let Some(period_ns) = config.stack_period_ns {
            let opened: Result<Vec<_>, _> = cpus
                .iter()
                .map(|cpu| CpuClockSampler::open(*cpu, period_ns, 256, 64))
                .collect();
            match opened.and_then(|opened| {
                opened.iter().try_for_each(CpuClockSampler::enable)?;
                Ok(opened)
            }) {
                Ok(opened) => {
                    samplers = opened;
                    let capacity = (retention_ns / period_ns.max(1)) as usize + 64;
                    stack_rings = cpus
                        .iter()
                        .map(|cpu| (*cpu, StackRing::new(capacity)))
                        .collect();
                }
                Err(error) => warnings.push(format!(
                    "--stacks: perf_event_open failed ({error}); episodes have no stacks"
                )),
            }
        }
        instance.write("tracing_on", "1")?;
        Ok(Recorder {
            samplers,
            stack_rings,
            retention_ns,
            warnings,
            readers,
            marker,
            instance,
            tracefs,
            decoder,
            page_decoder,
            page: vec![0; page_size],
            windows,
            stats: RecorderStats::default(),
            symbols: KernelSymbols::default(),
            removed_stale,
            enabled_events,
            comm_recording_off,
        })
    }

    /// True when the instance does not copy task names on every switch (see
    /// `Tracefs::create_instance_without_comm_recording`).
    pub fn comm_recording_off(&self) -> bool {
        self.comm_recording_off
    }

    /// Instances of dead rtlab processes this start removed.
    pub fn removed_stale_instances(&self) -> &[String] {
        &self.removed_stale
    }

    pub fn enabled_events(&self) -> &[String] {
        &self.enabled_events
    }

    pub fn instance_path(&self) -> &std::path::Path {
        self.instance.path()
    }

    pub fn tracefs_mounted_by_us(&self) -> bool {
        self.tracefs.mounted_by_us()
    }

    /// What the recorder could not do (e.g. stacks refused), for the run's warnings.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub fn stats(&self) -> RecorderStats {
        self.stats
    }

    pub fn symbols(&self) -> &KernelSymbols {
        &self.symbols
    }

    /// Loads /proc/kallsyms for naming timer callbacks, work functions and stack frames. Separate
    /// from `start` because parsing takes a while and need not delay the measurement.
    pub fn load_symbols(&mut self) {
        if let Ok(text) = tracefs::read_kallsyms() {
            self.symbols = KernelSymbols::parse(&text);
        }
    }

    pub fn window(&self, cpu: usize) -> Option<&EventWindow> {
        self.windows.get(&cpu)
    }

    /// The instance's `trace_marker`, for the probe's threads to mark each late sample the moment
    /// they take it. Revoked (closed for every holder) when the recorder is dropped, before the
    /// instance is removed.
    pub fn marker(&self) -> Option<Arc<Marker>> {
        self.marker.clone()
    }

    /// Reads what the rings hold now, at most `max_pages_per_cpu` pages per CPU. Returns the number
    /// of events decoded.
    pub fn poll(&mut self, max_pages_per_cpu: usize) -> Result<PollOutcome, TraceError> {
        let mut decoded = 0;
        let mut caught_up = true;
        let mut most_pages = 0;
        for sampler in &mut self.samplers {
            let ring = self
                .stack_rings
                .get_mut(&sampler.cpu())
                .expect("a ring per sampler");
            let stats = &mut self.stats;
            sampler.drain(|record| match parse_record(record) {
                Ok(PerfRecord::Sample(sample)) => {
                    stats.stack_samples += 1;
                    ring.push(sample);
                }
                Ok(PerfRecord::Lost(count)) => stats.lost_stack_samples += count,
                Ok(PerfRecord::Other) => {}
                Err(_) => stats.undecodable_stack_samples += 1,
            });
        }
        for reader in &mut self.readers {
            let cpu = reader.cpu();
            let window = self.windows.get_mut(&cpu).expect("a window per reader");
            let mut emptied = false;
            let mut pages = 0;
            for _ in 0..max_pages_per_cpu {
                let Some(length) = reader.read_page(&mut self.page)? else {
                    emptied = true;
                    break;
                };
                self.stats.pages += 1;
                pages += 1;
                let page = &self.page[..length];
                let before = window.newest_ns().unwrap_or(0);
                let decoder = &self.decoder;
                let stats = &mut self.stats;
                let mut first_timestamp = None;
                let result = self.page_decoder.decode(page, |record| {
                    first_timestamp.get_or_insert(record.timestamp_ns);
                    match decoder.decode(cpu as u32, record.timestamp_ns, record.payload) {
                        Ok(Some(event)) => {
                            if matches!(&event.kind, EventKind::Marker { text } if text.starts_with(LATE_MARKER_PREFIX))
                            {
                                stats.markers += 1;
                            }
                            window.push(event);
                            stats.events += 1;
                            decoded += 1;
                        }
                        Ok(None) => {}
                        Err(_) => stats.undecodable_events += 1,
                    }
                });
                match result {
                    Ok(summary) => {
                        if let Some(lost) = summary.lost_events {
                            self.stats.pages_after_loss += 1;
                            if let LostEvents::Counted(count) = lost {
                                self.stats.lost_events += count;
                            }
                            window.mark_gap(
                                before,
                                first_timestamp.unwrap_or(summary.last_timestamp_ns),
                            );
                        }
                    }
                    Err(_) => self.stats.undecodable_pages += 1,
                }
            }
            caught_up &= emptied;
            most_pages = most_pages.max(pages);
        }
        Ok(PollOutcome {
            decoded,
            caught_up,
            most_pages,
        })
    }

    /// Drops events older than the retention time, keeping what pending windows need.
    pub fn trim(&mut self, now_ns: u64, keep_from_ns: Option<u64>) {
        for window in self.windows.values_mut() {
            window.trim(
                now_ns,
                keep_from_ns.map(|keep| keep.saturating_sub(LOOKBACK_NS)),
            );
        }
        let mut cutoff = now_ns.saturating_sub(self.retention_ns);
        if let Some(keep) = keep_from_ns {
            cutoff = cutoff.min(keep.saturating_sub(LOOKBACK_NS));
        }
        for ring in self.stack_rings.values_mut() {
            ring.trim(cutoff);
        }
    }

    /// True once the CPU's events reach past `time_ns`.
    pub fn covers(&self, cpu: usize, time_ns: u64) -> bool {
        self.windows
            .get(&cpu)
            .and_then(EventWindow::newest_ns)
            .is_some_and(|newest| newest >= time_ns)
    }

    /// Attributes one late sample from the events recorded so far. `origin_ns` is the start of
    /// measurement (episode times are relative to it).
    pub fn explain(&self, late: &LateWakeup, origin_ns: u64) -> Episode {
        let cpu = late.cpu as usize;
        let start = late.intended_ns.saturating_sub(LOOKBACK_NS);
        let end = late.actual_ns;
        let (events, events_lost) = match self.windows.get(&cpu) {
            Some(window) => (
                window.range(start, end),
                window.lost_between(late.intended_ns, end),
            ),
            None => (Vec::new(), true),
        };
        let tid = late.tid as i32;
        let mut wake_hint_ns = None;
        for (other_cpu, window) in &self.windows {
            if *other_cpu == cpu {
                continue;
            }
            window.for_each_in(late.intended_ns, end, |event| {
                if wake_hint_ns.is_none()
                    && matches!(event.kind, EventKind::Waking { pid, .. } if pid == tid)
                {
                    wake_hint_ns = Some(event.timestamp_ns);
                }
            });
        }
        let context = AttributionContext {
            wake_hint_ns,
            events_lost,
            symbols: Some(&self.symbols).filter(|symbols| !symbols.is_empty()),
        };
        let (mut causes, timeline) = attribute_with_timeline(late, &events, context);
        for cause in causes
            .iter_mut()
            .filter(|cause| cause.kind == CauseKind::Task)
        {
            if let Some(pid) = cause.pid {
                if let Ok(policy) = rtlab_sys::sched::thread_policy(pid) {
                    let policy_text = if policy.is_realtime() {
                        format!("{} {}", policy.name(), policy.priority_or_nice())
                    } else {
                        format!("{} nice {}", policy.name(), policy.priority_or_nice())
                    };
                    // The trace only knew the kernel priority; the policy replaces that part.
                    let rest = cause
                        .detail
                        .as_deref()
                        .and_then(|detail| {
                            detail.split_once(", ").map(|(_, rest)| format!(", {rest}"))
                        })
                        .unwrap_or_default();
                    cause.detail = Some(format!("{policy_text}{rest}"));
                }
            }
        }
        let stack = self.stack_rings.get(&cpu).and_then(|ring| {
            let sample = ring.during(late.intended_ns, late.actual_ns, late.tid)?;
            let comm = events.iter().rev().find_map(|event| match &event.kind {
                EventKind::Switch {
                    next_pid,
                    next_comm,
                    ..
                } if *next_pid as u32 == sample.tid => Some(next_comm.to_string()),
                EventKind::Switch {
                    prev_pid,
                    prev_comm,
                    ..
                } if *prev_pid as u32 == sample.tid => Some(prev_comm.to_string()),
                _ => None,
            });
            Some(render_stack(sample, comm.as_deref(), &self.symbols))
        });
        Episode {
            series: late.series.clone(),
            cpu: late.cpu,
            at_ns: late.intended_ns.saturating_sub(origin_ns),
            latency_ns: late.latency_ns,
            causes,
            steal_ns: None,
            stack,
            timeline,
        }
    }
}

/// Where late samples come from: the probe's queue, drained into the vector.
pub type LateSource = Box<dyn FnMut(&mut Vec<LateWakeup>) + Send>;

/// Settings of the explainer thread.
#[derive(Clone, Debug)]
pub struct ExplainerConfig {
    pub recorder: RecorderConfig,
    /// How often the rings and the late queue are read.
    pub poll_interval: Duration,
    /// Start of measurement, CLOCK_MONOTONIC ns (episode `at_ns` is relative to it).
    pub origin_ns: u64,
    /// At most this many episodes are kept (the rest are counted).
    pub max_episodes: usize,
    /// How long after a sample's actual time to wait for its CPU's events before attributing.
    pub settle: Duration,
    /// The thread stops by itself at this CLOCK_MONOTONIC time even if nobody asks.
    pub deadline_ns: u64,
}

/// What the explainer produced.
#[derive(Clone, Debug, Default)]
pub struct ExplainerReport {
    pub episodes: Vec<Episode>,
    pub late_samples: u64,
    /// Late samples not turned into episodes because `max_episodes` was reached.
    pub episodes_not_kept: u64,
    /// Times the reader fell behind the rings and took a fair share of CPU to catch up.
    pub catch_ups: u64,
    pub stats: RecorderStats,
    pub removed_stale_instances: Vec<String>,
    pub enabled_events: Vec<String>,
    pub event_set: EventSet,
    /// The instance was created without task-name recording (cheaper switches).
    pub comm_recording_off: bool,
    pub warnings: Vec<String>,
}

/// A recorder on its own thread, explaining late samples as they arrive.
pub struct Explainer {
    marker: Option<Arc<Marker>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<ExplainerReport, TraceError>>>,
}

impl std::fmt::Debug for Explainer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Explainer").finish_non_exhaustive()
    }
}

/// Per-CPU steal samples, to report the steal delta around each episode.
#[derive(Debug, Default)]
struct StealHistory {
    samples: VecDeque<(u64, BTreeMap<usize, u64>)>,
}

impl StealHistory {
    fn sample(&mut self, now_ns: u64) {
        if let Ok(times) = rtlab_sys::proc_stat::cpu_times() {
            let steal = times
                .into_iter()
                .map(|(cpu, times)| (cpu, times.steal_ns))
                .collect();
            self.samples.push_back((now_ns, steal));
        }
        while self.samples.len() > 1
            && self
                .samples
                .front()
                .is_some_and(|(time, _)| now_ns - time > 5_000_000_000)
        {
            self.samples.pop_front();
        }
    }

    fn latest_ns(&self) -> u64 {
        self.samples.back().map_or(0, |(time, _)| *time)
    }

    /// Steal on `cpu` between the last sample before `start_ns` and the first after `end_ns`.
    fn delta(&self, cpu: usize, start_ns: u64, end_ns: u64) -> Option<u64> {
        let before = self
            .samples
            .iter()
            .rev()
            .find(|(time, _)| *time <= start_ns)?;
        let after = self.samples.iter().find(|(time, _)| *time >= end_ns)?;
        Some(after.1.get(&cpu)?.saturating_sub(*before.1.get(&cpu)?))
    }
}

impl Explainer {
    /// Starts recording now (errors are returned here, before measuring) and the thread.
    pub fn start(config: ExplainerConfig, mut source: LateSource) -> Result<Explainer, TraceError> {
        let recorder = Recorder::start(&config.recorder)?;
        let marker = recorder.marker();
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("rtlab-explain".into())
            .spawn(move || run_explainer(recorder, config, &mut *source, &thread_stop))?;
        Ok(Explainer {
            marker,
            stop,
            handle: Some(handle),
        })
    }

    /// The recording's `trace_marker`, for the probe to mark late samples when it takes them
    /// (`rtlab_session` hands it to `RunningProbe::set_late_sink`). Writes after the recording ended do nothing.
    pub fn marker(&self) -> Option<Arc<Marker>> {
        self.marker.clone()
    }

    /// Stops the thread after a last read and returns the episodes.
    pub fn finish(mut self) -> Result<ExplainerReport, TraceError> {
        self.stop.store(true, Ordering::SeqCst);
        match self.handle.take() {
            Some(handle) => handle.join().map_err(|_| TraceError::ThreadPanicked)?,
            None => Ok(ExplainerReport::default()),
        }
    }
}

impl Drop for Explainer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// Pages read from each CPU's ring before the late samples are looked at again.
const READ_PAGES_PER_CPU: usize = 256;

/// A poll that read at most this many pages from every ring leaves the reader in the background
/// (at 250 ms polls, about 25 000 events/s on one CPU; a quiet 2-CPU VM traces ~17 000).
const QUIET_PAGES_PER_POLL: usize = 64;

/// The explainer thread's scheduling policy (see `run_explainer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReaderPolicy {
    /// SCHED_IDLE: yields to every other thread at once.
    Background,
    /// SCHED_BATCH nice 0: a fair share, no wake-up preemption of others.
    CatchingUp,
}

impl ReaderPolicy {
    fn apply(self) {
        let policy = match self {
            ReaderPolicy::Background => rtlab_sys::sched::Policy::Idle,
            ReaderPolicy::CatchingUp => rtlab_sys::sched::Policy::Batch { nice: 0 },
        };
        let _ = rtlab_sys::sched::set_current_thread_policy(policy);
    }
}

fn run_explainer(
    mut recorder: Recorder,
    config: ExplainerConfig,
    source: &mut (dyn FnMut(&mut Vec<LateWakeup>) + Send),
    stop: &AtomicBool,
) -> Result<ExplainerReport, TraceError> {
    let mut report = ExplainerReport {
        removed_stale_instances: recorder.removed_stale_instances().to_vec(),
        enabled_events: recorder.enabled_events().to_vec(),
        event_set: config.recorder.events,
        comm_recording_off: recorder.comm_recording_off(),
        warnings: recorder.warnings().to_vec(),
        ..ExplainerReport::default()
    };
    let mut pending: VecDeque<LateWakeup> = VecDeque::new();
    let mut drained = Vec::with_capacity(1024);
    let mut steal = StealHistory::default();
    let settle_ns = config.settle.as_nanos() as u64;
    // SCHED_IDLE while it keeps up: a normal-class measuring thread then preempts it at once (as
    // SCHED_BATCH it waited up to a scheduler slice, ~0.7 ms, and the explainer became the top
    // cause of the normal class's episodes). When the rings hold more than one read takes, it
    // needs a fair share to keep up under load: SCHED_BATCH until it has caught up again.
    let mut policy = ReaderPolicy::Background;
    policy.apply();
    recorder.load_symbols();
    let mut stopping_since: Option<u64> = None;
    let poll_interval_ns = config.poll_interval.as_nanos() as u64;
    loop {
        // Read a bounded batch, then hand samples over and attribute before reading on, so a
        // flood of events never starves the late samples.
        let outcome = recorder.poll(READ_PAGES_PER_CPU)?;
        let caught_up = outcome.caught_up;
        // Background only while the rings fill slowly: a SCHED_IDLE thread on a loaded machine
        // may not run for seconds, and a ring that fills fast would overflow meanwhile.
        let wanted = if caught_up && outcome.most_pages <= QUIET_PAGES_PER_POLL {
            ReaderPolicy::Background
        } else {
            ReaderPolicy::CatchingUp
        };
        if wanted != policy {
            policy = wanted;
            policy.apply();
            report.catch_ups += u64::from(policy == ReaderPolicy::CatchingUp);
        }
        let now = rtlab_sys::clock::monotonic_ns();
        if now >= steal.latest_ns().saturating_add(poll_interval_ns) {
            steal.sample(now);
        }
        drained.clear();
        source(&mut drained);
        for late in drained.drain(..) {
            report.late_samples += 1;
            if report.episodes.len() + pending.len() < config.max_episodes {
                pending.push_back(late);
            } else {
                report.episodes_not_kept += 1;
            }
        }
        let finishing = stop.load(Ordering::SeqCst) || now >= config.deadline_ns;
        if finishing && stopping_since.is_none() {
            stopping_since = Some(now);
        }
        // Attribute the samples whose CPU's events are in (or that waited long enough).
        let mut still_pending = VecDeque::with_capacity(pending.len());
        for late in pending.drain(..) {
            // Attribute once the CPU's events reach past the sample; or, when the CPU has gone
            // quiet, once everything the kernel holds has been read and the sample has settled.
            // Under heavy load the reader may lag: it never gives up on a sample just because the
            // wall clock moved on, only after GIVE_UP_NS.
            let ready = recorder.covers(late.cpu as usize, late.actual_ns)
                || (caught_up && now >= late.actual_ns.saturating_add(settle_ns))
                || (caught_up
                    && stopping_since.is_some_and(|since| now >= since.saturating_add(settle_ns)))
                || now >= late.actual_ns.saturating_add(GIVE_UP_NS);
            if ready {
                if steal.latest_ns() < late.actual_ns {
                    steal.sample(rtlab_sys::clock::monotonic_ns());
                }
                let mut episode = recorder.explain(&late, config.origin_ns);
                episode.steal_ns = steal.delta(late.cpu as usize, late.intended_ns, late.actual_ns);
                report.episodes.push(episode);
            } else {
                still_pending.push_back(late);
            }
        }
        pending = still_pending;
        recorder.trim(now, pending.iter().map(|late| late.intended_ns).min());
        if stopping_since.is_some() && pending.is_empty() {
            break;
        }
        if caught_up {
            std::thread::sleep(config.poll_interval);
        }
    }
    report.stats = recorder.stats();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_masks_are_hex_words() {
        assert_eq!(cpu_mask(&[0]), "00000001");
        assert_eq!(cpu_mask(&[1, 3]), "0000000a");
        assert_eq!(cpu_mask(&[0, 33]), "00000002,00000001");
    }
}
