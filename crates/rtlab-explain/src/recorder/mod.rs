//! The tracefs recorder: a private tracefs instance, its per-CPU rings read as binary pages, and
//! the bounded window of events kept per CPU to explain late samples from.
//!
//! [`Recorder`] owns a private instance (`instances/rtlab-<pid>`, CLOCK_MONOTONIC time stamps so
//! they compare with the probe's), reads each measured CPU's `trace_pipe_raw` as binary pages and
//! keeps a bounded [`EventWindow`] per CPU; [`Recorder::explain`] attributes one late sample from
//! them. Dropping it (normal exit, error, or panic unwinding) closes its files and removes the
//! instance. The thread that drives it while a run measures — polling the rings, draining the
//! probe's late samples and deciding when a sample's events are in — is the [`Explainer`], in
//! `explainer.rs`: the recorder is the data, the explainer the schedule.

mod bpf;
mod explainer;
mod reader_policy;

pub use bpf::{trace_events_of_episode, BpfExplainer, BpfExplainerConfig};

pub use explainer::{
    BpfSummary, Explainer, ExplainerConfig, ExplainerReport, LateSource, TimerlatSplit,
};

use crate::attribution::{attribute_with_timeline, AttributionContext, LateWakeup};
use crate::event::{EventDecoder, EventKind, EventSet, TraceEvent};
use crate::instance::{InstanceBuilder, TraceInstance};
use crate::page::LostEvents;
use crate::stacks::{parse_record, render_stack, PerfRecord, StackRing};
use crate::symbols::KernelSymbols;
use crate::window::EventWindow;
use rtlab_core::{CauseKind, Episode};
use rtlab_sys::perf::CpuClockSampler;
use rtlab_sys::tracefs::{self, Marker};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

pub use crate::error::TraceError;

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

/// How far before the intended time the recorder looks to know the CPU's state.
const LOOKBACK_NS: u64 = 20_000_000;

/// A running recording. Field order matters: the marker closes before the instance (its readers
/// first) is removed.
pub struct Recorder {
    samplers: Vec<CpuClockSampler>,
    stack_rings: BTreeMap<usize, StackRing>,
    retention_ns: u64,
    marker: Option<Arc<Marker>>,
    trace: TraceInstance,
    decoder: EventDecoder,
    windows: BTreeMap<usize, EventWindow>,
    stats: RecorderStats,
    symbols: KernelSymbols,
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
            .field("instance", &self.trace.path())
            .field("cpus", &self.windows.keys().collect::<Vec<_>>())
            .field("stats", &self.stats)
            .finish()
    }
}

static INSTANCE_COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Recorder {
    /// Removes stale instances, creates ours, enables the events and starts tracing.
    pub fn start(config: &RecorderConfig) -> Result<Recorder, TraceError> {
        let sequence = INSTANCE_COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut builder = InstanceBuilder::new(config.buffer_size_kb)
            .without_comm_recording()
            .only_cpus(&config.cpus);
        if sequence != 0 {
            builder = builder.name_suffix(sequence.to_string());
        }
        for (system, event, required) in &config.events.events() {
            builder = builder.event(system, event, *required);
        }
        // Markers are recorded without enabling anything; their format decodes them.
        let trace = builder.format_only("ftrace", "print").build()?;
        let mut decoder = EventDecoder::default();
        for format in trace.formats() {
            decoder.add(format)?;
        }
        let cpus = trace.cpus();
        let marker = trace.instance().open_marker().ok().map(Arc::new);
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
        let mut warnings = Vec::new();
        if !trace.repaired_options().is_empty() {
            warnings.push(format!(
                "--explain: put back global tracefs options an rtlab that was killed had changed: {}",
                trace.repaired_options().join(", ")
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
        trace.start_tracing()?;
        Ok(Recorder {
            samplers,
            stack_rings,
            retention_ns,
            warnings,
            marker,
            trace,
            decoder,
            windows,
            stats: RecorderStats::default(),
            symbols: KernelSymbols::default(),
        })
    }

    /// True when the instance does not copy task names on every switch (see
    /// `Tracefs::create_instance_without_comm_recording`).
    pub fn comm_recording_off(&self) -> bool {
        self.trace.comm_recording_off()
    }

    /// Instances of dead rtlab processes this start removed.
    pub fn removed_stale_instances(&self) -> &[String] {
        self.trace.removed_stale_instances()
    }

    pub fn enabled_events(&self) -> &[String] {
        self.trace.enabled_events()
    }

    pub fn instance_path(&self) -> &std::path::Path {
        self.trace.path()
    }

    pub fn tracefs_mounted_by_us(&self) -> bool {
        self.trace.tracefs_mounted_by_us()
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
        let trace = &mut self.trace;
        for reader in &mut trace.readers {
            let cpu = reader.cpu();
            let window = self.windows.get_mut(&cpu).expect("a window per reader");
            let mut emptied = false;
            let mut pages = 0;
            for _ in 0..max_pages_per_cpu {
                let Some(length) = reader.read_page(&mut trace.page)? else {
                    emptied = true;
                    break;
                };
                self.stats.pages += 1;
                pages += 1;
                let page = &trace.page[..length];
                let before = window.newest_ns().unwrap_or(0);
                let decoder = &self.decoder;
                let stats = &mut self.stats;
                let mut first_timestamp = None;
                let result = trace.page_decoder.decode(page, |record| {
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
        attributed_episode(late, &events, context, origin_ns, stack)
    }
}

/// Attributes a late sample from its CPU's `events` into the Run record's episode (both
/// recorders): the causes, each task's named by its policy now, and the timeline, at a time
/// relative to `origin_ns` (the start of measurement).
pub(crate) fn attributed_episode(
    late: &LateWakeup,
    events: &[TraceEvent],
    context: AttributionContext,
    origin_ns: u64,
    stack: Option<Vec<String>>,
) -> Episode {
    let (mut causes, timeline) = attribute_with_timeline(late, events, context);
    name_task_policies(&mut causes);
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

/// Replaces the kernel priority the trace showed for each task cause with the task's policy now
/// (`SCHED_FIFO 80`, `SCHED_OTHER nice 0`), when the task still exists.
fn name_task_policies(causes: &mut [rtlab_core::Cause]) {
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
                    .and_then(|detail| detail.split_once(", ").map(|(_, rest)| format!(", {rest}")))
                    .unwrap_or_default();
                cause.detail = Some(format!("{policy_text}{rest}"));
            }
        }
    }
}
