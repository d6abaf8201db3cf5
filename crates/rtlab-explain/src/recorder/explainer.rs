//! The explainer thread: a [`Recorder`] on a thread of its own that turns late samples into
//! episodes while a run measures.
//!
//! It polls the rings, drains the probe's late samples (the probe marks each in the trace with a
//! `trace_marker` write when it takes it), and once a CPU's events cover a sample's window,
//! attributes it. It runs SCHED_IDLE while the rings fill slowly and SCHED_BATCH while it catches
//! up, so it never delays the probe; it may lag, never drop a sample silently. Everything it
//! starts stops by itself at its deadline, and dropping it joins the thread (and so removes the
//! recorder's instance).

use super::reader_policy::{PolicyKeeper, ReaderPolicy};
use super::{Recorder, RecorderConfig, RecorderStats, TraceError};
use crate::attribution::LateWakeup;
use crate::event::EventSet;
use rtlab_core::Episode;
use rtlab_sys::tracefs::Marker;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A late sample whose CPU's events never arrive is attributed (as unaccounted) after this long.
const GIVE_UP_NS: u64 = 10_000_000_000;

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
    /// What only the BPF recorder counts (None: the tracefs recorder).
    pub bpf: Option<BpfSummary>,
    /// Late samples no episode could be made for (series, latency): with the BPF recorder, those
    /// the kernel did not find late (late only after the switch-in).
    pub unexplained: Vec<(String, u64)>,
    /// The BPF recorder's timerlat split of every timer-thread wake-up, per measuring thread.
    pub timerlat: Vec<TimerlatSplit>,
    /// The causes of the episodes not kept beyond the cap, summed by kind and name.
    pub summarised_causes: Vec<rtlab_core::Cause>,
    /// What the kept episodes take in memory, estimated (the BPF recorder caps it).
    pub episode_bytes: usize,
}

/// rtla timerlat's split of one timer thread's wake-ups, from the BPF recorder's sample records:
/// `irq` = timer expiry − intended time, `thread` = switch-in − timer expiry.
#[derive(Clone, Debug, Default)]
pub struct TimerlatSplit {
    /// The measuring thread's slot (the index in `BpfExplainerConfig::threads`).
    pub slot: usize,
    pub irq: rtlab_core::LatencyHistogram,
    pub thread: rtlab_core::LatencyHistogram,
    pub irq_max_per_second: Vec<u64>,
    pub thread_max_per_second: Vec<u64>,
}

impl TimerlatSplit {
    /// Records one sample at `second` of the measurement.
    pub fn record(&mut self, second: usize, irq_ns: u64, thread_ns: u64) {
        self.irq.record(irq_ns);
        self.thread.record(thread_ns);
        for (maxima, value) in [
            (&mut self.irq_max_per_second, irq_ns),
            (&mut self.thread_max_per_second, thread_ns),
        ] {
            if maxima.len() <= second {
                maxima.resize(second + 1, 0);
            }
            maxima[second] = maxima[second].max(value);
        }
    }
}

/// The BPF recorder's own counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BpfSummary {
    /// Kernel episodes no late probe sample claimed (below the probe's threshold).
    pub episodes_unclaimed: u64,
    /// Wake-ups of the measuring threads the kernel timed.
    pub samples: u64,
    /// `bpf_ktime_get_ns` calls the programs made.
    pub clock_reads: u64,
    /// Events stamped with the CPU's last known time instead (nothing measured was pending).
    pub untimed_events: u64,
    /// Episodes the kernel sent as a short tail rather than its whole window.
    pub tail_episodes: u64,
    /// Episodes the ring buffer had no room for.
    pub episodes_lost: u64,
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
pub(super) struct StealHistory {
    samples: VecDeque<StealSample>,
}

/// Every CPU's steal time so far, as read at one time.
#[derive(Debug)]
struct StealSample {
    taken_ns: u64,
    /// Per CPU, ns.
    steal_ns: BTreeMap<usize, u64>,
}

impl StealHistory {
    pub(super) fn sample(&mut self, now_ns: u64) {
        if let Ok(times) = rtlab_sys::proc_stat::cpu_times() {
            let steal = times
                .into_iter()
                .map(|(cpu, times)| (cpu, times.steal_ns))
                .collect();
            self.samples.push_back(StealSample {
                taken_ns: now_ns,
                steal_ns: steal,
            });
        }
        while self.samples.len() > 1
            && self
                .samples
                .front()
                .is_some_and(|sample| now_ns - sample.taken_ns > 5_000_000_000)
        {
            self.samples.pop_front();
        }
    }

    pub(super) fn latest_ns(&self) -> u64 {
        self.samples.back().map_or(0, |sample| sample.taken_ns)
    }

    /// Steal on `cpu` between the last sample before `start_ns` and the first after `end_ns`.
    pub(super) fn delta(&self, cpu: usize, start_ns: u64, end_ns: u64) -> Option<u64> {
        let before = self
            .samples
            .iter()
            .rev()
            .find(|sample| sample.taken_ns <= start_ns)?;
        let after = self
            .samples
            .iter()
            .find(|sample| sample.taken_ns >= end_ns)?;
        Some(
            after
                .steal_ns
                .get(&cpu)?
                .saturating_sub(*before.steal_ns.get(&cpu)?),
        )
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
    let mut policy = PolicyKeeper::start();
    recorder.load_symbols();
    let mut stopping_since: Option<u64> = None;
    let poll_interval_ns = config.poll_interval.as_nanos() as u64;
    loop {
        // Read a bounded batch, then hand samples over and attribute before reading on, so a
        // flood of events never starves the late samples.
        policy.beat();
        let outcome = recorder.poll(READ_PAGES_PER_CPU)?;
        let caught_up = outcome.caught_up;
        // Background only while the rings fill slowly: a SCHED_IDLE thread on a loaded machine
        // may not run for seconds, and a ring that fills fast would overflow meanwhile.
        let wanted = if caught_up && outcome.most_pages <= QUIET_PAGES_PER_POLL {
            ReaderPolicy::Background
        } else {
            ReaderPolicy::CatchingUp
        };
        policy.set(wanted);
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
            // The measurement is over, so the reader no longer perturbs it: a fair share to
            // finish. A SCHED_IDLE reader under CPU-bound load waited minutes to read the rest.
            policy.finishing();
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
    report.catch_ups = policy.catch_ups;
    Ok(report)
}
