//! The BPF recorder's explainer: episodes the kernel decided were late, matched with the probe's
//! late samples and attributed by the same passes as the tracefs recorder's.
//!
//! The kernel side (`rtlab-bpf`) hands over, per late wake-up, the measured CPU's events since its
//! last context switch before the wake-up began (or its whole 1024-event window when that is
//! longer) and the CPU's state when the wake-up began (the task running since when, the interrupt
//! contexts open). [`trace_events_of_episode`] turns that into the [`TraceEvent`]s the tracefs
//! recorder decodes, so `attribute_with_timeline` gives causes and timelines that mean the same
//! from either recorder. The probe's own late sample (its clock read, not the kernel's switch-in
//! time) stays the episode's latency: a kernel episode is used for the probe sample of the same
//! thread whose switch-in lies in the sample's window. The kernel's thresholds are set below the
//! probe's (`kernel_threshold`), since the probe reads its clock after the switch-in, so a sample
//! late to the probe is rarely missing from the kernel's episodes; kernel episodes no probe sample claims are
//! dropped after a while (counted).
//!
//! Thresholds: fixed, or rolling — every second each thread's p99.9 over the last 10 s from the
//! kernel's per-CPU histograms (only once 1000 wake-ups are in), so an hours-long run follows the
//! machine instead of its first second. The current values are shared with the session, which
//! sets the probe's late thresholds to them.

use super::explainer::StealHistory;
use super::reader_policy::{PolicyKeeper, ReaderPolicy};
use super::{
    attributed_episode, ExplainerReport, LateSource, RecorderStats, TimerlatSplit, TraceError,
};
use crate::attribution::{AttributionContext, LateWakeup};
use crate::event::{Comm, EventKind, EventSet, TraceEvent};
use crate::symbols::KernelSymbols;
use rtlab_bpf::records::bucket_lower_bound_ns;
use rtlab_bpf::{
    BpfConfig, BpfError, BpfRecorder, ClockPolicy, EpisodeRecord, RawKind, Record,
    HISTOGRAM_BUCKETS, VECTOR_NAMES,
};
use rtlab_core::Episode;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Settings of the BPF explainer.
#[derive(Clone, Debug)]
pub struct BpfExplainerConfig {
    pub cpus: Vec<usize>,
    pub events: EventSet,
    /// The measuring threads, one per slot (the index is the slot).
    pub threads: Vec<u32>,
    /// A fixed late threshold; None: rolling p99.9 (see the module).
    pub fixed_threshold_ns: Option<u64>,
    /// Start of measurement, CLOCK_MONOTONIC ns (episode `at_ns` is relative to it).
    pub origin_ns: u64,
    /// At most this many episodes are kept (the rest are counted).
    pub max_episodes: usize,
    /// The thread stops by itself at this CLOCK_MONOTONIC time even if nobody asks.
    pub deadline_ns: u64,
}

/// A probe sample or kernel episode unmatched for this long is given up.
const MATCH_WAIT_NS: u64 = 2_000_000_000;
/// Kernel episodes waiting for their probe sample, at most.
const MAX_WAITING_EPISODES: usize = 256;
/// Episodes read from the ring between two reads of the probe's late samples. The programs go on
/// writing while the reader drains, and a reader starved mid-drain (SCHED_IDLE on a busy CPU)
/// read hundreds of episodes whose probe samples it had not read yet, overflowing the waiting
/// queue, whose oldest episodes were then dropped while their samples were on the way: up to 350
/// samples a run of the busy-IRQ test found no episode.
const DRAIN_EPISODES: usize = 64;
/// Rolling threshold: the window, how often it moves, and the wake-ups it needs first.
const ROLLING_WINDOW_NS: u64 = 10_000_000_000;
const ROLLING_STEP_NS: u64 = 1_000_000_000;
const ROLLING_MIN_SAMPLES: u64 = 1_000;
/// A read that found more episodes than this gives the reader a fair share of CPU.
const BUSY_EPISODES_PER_READ: usize = 32;
/// How often the ring buffer is read when no late episode wakes the reader.
const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// The BPF recorder on a thread of its own, explaining late samples as they arrive.
pub struct BpfExplainer {
    stop: Arc<AtomicBool>,
    thresholds: Arc<Vec<AtomicU64>>,
    attached: Vec<String>,
    handle: Option<JoinHandle<Result<ExplainerReport, TraceError>>>,
}

impl std::fmt::Debug for BpfExplainer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("BpfExplainer")
            .field("attached", &self.attached)
            .finish_non_exhaustive()
    }
}

impl From<BpfError> for TraceError {
    fn from(error: BpfError) -> TraceError {
        TraceError::Bpf(error.to_string())
    }
}

impl BpfExplainer {
    /// Loads and attaches the programs now (errors are returned here, before measuring), then
    /// starts the thread.
    pub fn start(
        config: BpfExplainerConfig,
        source: LateSource,
    ) -> Result<BpfExplainer, TraceError> {
        let mut recorder = BpfRecorder::start(&BpfConfig {
            cpus: config.cpus.clone(),
            full_events: config.events == EventSet::Full,
            // Only the benchmark sets it, to measure what each clock saving is worth.
            clock: std::env::var("RTLAB_BPF_CLOCK")
                .ok()
                .and_then(|text| ClockPolicy::parse(&text))
                .unwrap_or_default(),
            whole_window_episodes: std::env::var_os("RTLAB_BPF_WHOLE_WINDOW").is_some(),
            attach_only: std::env::var_os("RTLAB_BPF_ATTACH_ONLY").is_some(),
        })?;
        let thresholds: Arc<Vec<AtomicU64>> = Arc::new(
            config
                .threads
                .iter()
                .map(|_| AtomicU64::new(u64::MAX))
                .collect(),
        );
        for (slot, tid) in config.threads.iter().enumerate() {
            recorder.watch_thread(*tid, slot as u32)?;
            if let Some(fixed) = config.fixed_threshold_ns {
                recorder.set_threshold(slot as u32, kernel_threshold(fixed))?;
                thresholds[slot].store(fixed, Ordering::Relaxed);
            }
        }
        let attached = recorder
            .attached()
            .iter()
            .map(|name| (*name).to_owned())
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let thread_thresholds = Arc::clone(&thresholds);
        let handle = std::thread::Builder::new()
            .name("rtlab-explain".into())
            .spawn(move || {
                run_bpf_explainer(recorder, config, source, &thread_stop, &thread_thresholds)
            })?;
        Ok(BpfExplainer {
            stop,
            thresholds,
            attached,
            handle: Some(handle),
        })
    }

    /// The tracepoints attached.
    pub fn attached(&self) -> &[String] {
        &self.attached
    }

    /// The current late threshold of each slot (`u64::MAX`: not calibrated yet), for the probe.
    pub fn thresholds(&self) -> Vec<u64> {
        self.thresholds
            .iter()
            .map(|threshold| threshold.load(Ordering::Relaxed))
            .collect()
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

impl Drop for BpfExplainer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// The kernel's threshold for a probe threshold: lower by a quarter and at least by 5 µs (the
/// probe's clock read comes after the switch-in, and a hand-off's intended time before the
/// waking), but at most by half (see the module).
fn kernel_threshold(probe_threshold_ns: u64) -> u64 {
    if probe_threshold_ns == u64::MAX {
        return u64::MAX;
    }
    let margin = (probe_threshold_ns / 4).max(5_000);
    probe_threshold_ns
        .saturating_sub(margin)
        .max(probe_threshold_ns / 2)
}

/// The events of an episode's window, as the tracefs recorder would have decoded them, in time
/// order; the CPU's state when the wake-up began is put in front where the window no longer
/// reaches back to it (a task switched in, the interrupt contexts entered).
pub fn trace_events_of_episode(episode: &EpisodeRecord) -> Vec<TraceEvent> {
    let cpu = episode.wakeup.cpu;
    let mut events = Vec::with_capacity(episode.events.len() + 8);
    let first_ns = episode
        .events
        .first()
        .map_or(u64::MAX, |event| event.timestamp_ns);
    let interrupted = &episode.interrupted;
    if interrupted.since_ns != 0 && interrupted.since_ns < first_ns {
        let comm = Comm::from_bytes(&interrupted.comm);
        events.push(TraceEvent {
            timestamp_ns: interrupted.since_ns,
            cpu,
            pid: -1,
            kind: EventKind::Switch {
                prev_comm: Comm::default(),
                prev_pid: -1,
                prev_prio: -1,
                prev_state: 0,
                next_comm: comm,
                next_pid: interrupted.pid,
                next_prio: interrupted.prio,
            },
        });
    }
    for context in episode
        .open_contexts
        .iter()
        .filter(|context| context.entered_ns < first_ns)
    {
        let kind = match context.kind {
            5 => EventKind::IrqEntry {
                irq: context.key as i32,
                name: format!("irq {}", context.key).into(),
            },
            7 => EventKind::SoftirqEntry {
                vector: context.key as u32,
            },
            9 => EventKind::HrtimerExpireEntry {
                timer: context.key,
                now_ns: context.entered_ns as i64,
                function: 0,
            },
            13 => match VECTOR_NAMES.get(context.key as usize) {
                Some(name) => EventKind::VectorEntry { name },
                None => continue,
            },
            _ => continue,
        };
        events.push(TraceEvent {
            timestamp_ns: context.entered_ns,
            cpu,
            pid: -1,
            kind,
        });
    }
    for raw in &episode.events {
        let kind = match &raw.kind {
            RawKind::Switch {
                prev_pid,
                prev_prio,
                prev_state,
                prev_comm,
                next_pid,
                next_prio,
                next_comm,
            } => EventKind::Switch {
                prev_comm: Comm::from_bytes(prev_comm),
                prev_pid: *prev_pid,
                prev_prio: *prev_prio,
                prev_state: i64::from(*prev_state),
                next_comm: Comm::from_bytes(next_comm),
                next_pid: *next_pid,
                next_prio: *next_prio,
            },
            RawKind::Waking {
                pid,
                prio,
                target_cpu,
                comm,
            } => EventKind::Waking {
                comm: Comm::from_bytes(comm),
                pid: *pid,
                prio: *prio,
                target_cpu: *target_cpu,
            },
            RawKind::Wakeup {
                pid,
                prio,
                target_cpu,
                comm,
            } => EventKind::Wakeup {
                comm: Comm::from_bytes(comm),
                pid: *pid,
                prio: *prio,
                target_cpu: *target_cpu,
            },
            RawKind::Migrate {
                pid,
                prio,
                orig_cpu,
                dest_cpu,
            } => EventKind::Migrate {
                pid: *pid,
                prio: *prio,
                orig_cpu: *orig_cpu,
                dest_cpu: *dest_cpu,
            },
            RawKind::IrqEntry { irq, name } => EventKind::IrqEntry {
                irq: *irq,
                name: Comm::from_bytes(name).as_str().into(),
            },
            RawKind::IrqExit { irq } => EventKind::IrqExit { irq: *irq },
            RawKind::SoftirqEntry { vector } => EventKind::SoftirqEntry { vector: *vector },
            RawKind::SoftirqExit { vector } => EventKind::SoftirqExit { vector: *vector },
            RawKind::HrtimerEntry {
                timer,
                function,
                now_ns,
            } => EventKind::HrtimerExpireEntry {
                timer: *timer,
                now_ns: *now_ns,
                function: *function,
            },
            RawKind::HrtimerExit { timer } => EventKind::HrtimerExpireExit { timer: *timer },
            RawKind::WorkStart { function } => EventKind::WorkStart {
                function: *function,
            },
            RawKind::WorkEnd { function } => EventKind::WorkEnd {
                function: *function,
            },
            RawKind::VectorEntry { name } => EventKind::VectorEntry { name },
            RawKind::VectorExit { name } => EventKind::VectorExit { name },
        };
        events.push(TraceEvent {
            timestamp_ns: raw.timestamp_ns,
            cpu,
            pid: raw.pid,
            kind,
        });
    }
    events
}

/// True when `episode` is the kernel's record of the probe's late sample `late`: the same
/// thread, switched in inside the sample's window.
fn claims(late: &LateWakeup, episode: &EpisodeRecord) -> bool {
    episode.wakeup.tid == late.tid
        && episode.wakeup.switched_ns >= late.intended_ns
        && episode.wakeup.switched_ns <= late.actual_ns
}

/// Attributes one late sample from its kernel episode.
fn explain(
    late: &LateWakeup,
    episode: &EpisodeRecord,
    origin_ns: u64,
    symbols: &KernelSymbols,
) -> Episode {
    let events = trace_events_of_episode(episode);
    // The window lost what came before its first event: say so when that is inside the sample.
    let events_lost = episode.window_wrapped
        && episode
            .events
            .first()
            .is_some_and(|first| first.timestamp_ns > late.intended_ns);
    let context = AttributionContext {
        wake_hint_ns: None,
        events_lost,
        symbols: Some(symbols).filter(|symbols| !symbols.is_empty()),
    };
    attributed_episode(late, &events, context, origin_ns, None)
}

/// Memory the kept episodes may take together (estimated by [`episode_bytes`]), whatever their
/// number: with the count cap this bounds an hours-long run's episodes by bytes, not by how long
/// the longest windows happen to be.
pub const EPISODE_BYTES_CAP: usize = 24 << 20;

/// What a kept episode holds on the heap and inline, estimated from its lengths.
fn episode_bytes(episode: &Episode) -> usize {
    use std::mem::size_of;
    let causes: usize = episode
        .causes
        .iter()
        .map(|cause| {
            size_of::<rtlab_core::Cause>()
                + cause.name.capacity()
                + cause.detail.as_ref().map_or(0, String::capacity)
        })
        .sum();
    let timeline: usize = episode
        .timeline
        .iter()
        .map(|segment| size_of::<rtlab_core::Segment>() + segment.name.capacity())
        .sum();
    let stack: usize = episode.stack.as_ref().map_or(0, |frames| {
        frames
            .iter()
            .map(|frame| size_of::<String>() + frame.capacity())
            .sum()
    });
    size_of::<Episode>() + episode.series.capacity() + causes + timeline + stack
}

/// Keeps at most `cap` episodes of at most [`EPISODE_BYTES_CAP`] together, the latest-by-latency:
/// beyond either cap the least late ones (the new one or kept ones) are summarised instead (their
/// causes summed into `report.summarised_causes`), so memory stays bounded over hours while the
/// worst stay whole.
fn keep_episode(report: &mut ExplainerReport, episode: Episode, cap: usize) {
    keep_episode_within(report, episode, cap, EPISODE_BYTES_CAP);
}

fn keep_episode_within(
    report: &mut ExplainerReport,
    episode: Episode,
    cap: usize,
    byte_cap: usize,
) {
    let bytes = episode_bytes(&episode);
    while report.episodes.len() >= cap || report.episode_bytes + bytes > byte_cap {
        let least_late = report
            .episodes
            .iter()
            .enumerate()
            .min_by_key(|(_, kept)| kept.latency_ns)
            .map(|(index, kept)| (index, kept.latency_ns));
        match least_late {
            Some((index, latency)) if latency < episode.latency_ns => {
                let dropped = report.episodes.swap_remove(index);
                report.episode_bytes -= episode_bytes(&dropped);
                summarise(report, dropped);
            }
            _ => {
                summarise(report, episode);
                return;
            }
        }
    }
    report.episode_bytes += bytes;
    report.episodes.push(episode);
}

/// Counts an episode that is not kept and adds its causes to the summed ones.
fn summarise(report: &mut ExplainerReport, dropped: Episode) {
    report.episodes_not_kept += 1;
    for cause in dropped.causes {
        match report
            .summarised_causes
            .iter_mut()
            .find(|summed| summed.kind == cause.kind && summed.name == cause.name)
        {
            Some(summed) => summed.ns += cause.ns,
            None => report.summarised_causes.push(rtlab_core::Cause {
                pid: None,
                detail: None,
                ..cause
            }),
        }
    }
}

/// The p99.9 of a histogram's counts, as its bucket's lower bound; None below the sample minimum.
fn rolling_p999(counts: &[u64]) -> Option<u64> {
    let total: u64 = counts.iter().sum();
    if total < ROLLING_MIN_SAMPLES {
        return None;
    }
    let rank = total - total / 1000;
    let mut seen = 0;
    for (bucket, count) in counts.iter().enumerate() {
        seen += count;
        if seen >= rank {
            return Some(bucket_lower_bound_ns(bucket));
        }
    }
    None
}

/// One slot's kernel histogram counts as read at one time.
struct HistogramSnapshot {
    taken_ns: u64,
    counts: Vec<u64>,
}

/// Per slot, the histogram snapshots of the last rolling window.
struct Rolling {
    snapshots: Vec<VecDeque<HistogramSnapshot>>,
    next_ns: u64,
}

impl Rolling {
    fn new(slots: usize) -> Rolling {
        Rolling {
            snapshots: (0..slots).map(|_| VecDeque::new()).collect(),
            next_ns: 0,
        }
    }

    /// Every step: snapshots each slot's histogram and sets its threshold from the window.
    fn step(
        &mut self,
        now_ns: u64,
        recorder: &mut BpfRecorder,
        thresholds: &[AtomicU64],
    ) -> Result<(), TraceError> {
        if now_ns < self.next_ns {
            return Ok(());
        }
        self.next_ns = now_ns + ROLLING_STEP_NS;
        for (slot, snapshots) in self.snapshots.iter_mut().enumerate() {
            let histogram = recorder.histogram(slot as u32)?;
            snapshots.push_back(HistogramSnapshot {
                taken_ns: now_ns,
                counts: histogram,
            });
            while snapshots
                .front()
                .is_some_and(|snapshot| now_ns - snapshot.taken_ns > ROLLING_WINDOW_NS)
            {
                snapshots.pop_front();
            }
            let (
                Some(HistogramSnapshot { counts: oldest, .. }),
                Some(HistogramSnapshot { counts: newest, .. }),
            ) = (snapshots.front(), snapshots.back())
            else {
                continue;
            };
            // Before a second snapshot, the window is everything since the start.
            let counts: Vec<u64> = if snapshots.len() == 1 {
                newest.clone()
            } else {
                (0..HISTOGRAM_BUCKETS)
                    .map(|bucket| newest[bucket].saturating_sub(oldest[bucket]))
                    .collect()
            };
            if let Some(threshold) = rolling_p999(&counts) {
                recorder.set_threshold(slot as u32, kernel_threshold(threshold))?;
                thresholds[slot].store(threshold, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

/// A kernel episode no probe sample has claimed yet, with the time it was read.
struct WaitingEpisode {
    arrived_ns: u64,
    episode: Box<EpisodeRecord>,
}

/// A probe sample and the kernel episode it claimed.
struct MatchedEpisode {
    late: LateWakeup,
    episode: Box<EpisodeRecord>,
}

/// What one read of the ring buffer found.
struct RingRead {
    /// Episodes read (matched or left waiting).
    episodes_read: usize,
    /// Those a waiting probe sample claimed at once.
    matched: Vec<MatchedEpisode>,
}

/// The explainer thread's state between two reads: the probe samples and kernel episodes still
/// waiting for each other, and the report so far.
struct BpfMatcher {
    /// Start of measurement, CLOCK_MONOTONIC ns.
    origin_ns: u64,
    max_episodes: usize,
    symbols: KernelSymbols,
    report: ExplainerReport,
    timerlat: Vec<TimerlatSplit>,
    kernel_episodes: VecDeque<WaitingEpisode>,
    probe_samples: VecDeque<LateWakeup>,
    steal: StealHistory,
    /// Kernel episodes given up: no probe sample claimed them in time.
    unmatched_kernel: u64,
    undecodable: u64,
}

impl BpfMatcher {
    fn new(recorder: &BpfRecorder, config: &BpfExplainerConfig) -> BpfMatcher {
        let mut symbols = KernelSymbols::default();
        if let Ok(text) = rtlab_sys::tracefs::read_kallsyms() {
            symbols = KernelSymbols::parse(&text);
        }
        let report = ExplainerReport {
            enabled_events: recorder
                .attached()
                .iter()
                .map(|name| format!("bpf:{name}"))
                .collect(),
            event_set: config.events,
            ..ExplainerReport::default()
        };
        let timerlat = (0..config.threads.len())
            .map(|slot| TimerlatSplit {
                slot,
                ..TimerlatSplit::default()
            })
            .collect();
        BpfMatcher {
            origin_ns: config.origin_ns,
            max_episodes: config.max_episodes,
            symbols,
            report,
            timerlat,
            kernel_episodes: VecDeque::new(),
            probe_samples: VecDeque::new(),
            steal: StealHistory::default(),
            unmatched_kernel: 0,
            undecodable: 0,
        }
    }

    /// Takes the probe's late samples that came since the last call; beyond `max_episodes`
    /// waiting, they are counted as not kept.
    fn take_probe_samples(&mut self, source: &mut LateSource, drained: &mut Vec<LateWakeup>) {
        drained.clear();
        source(drained);
        for late in drained.drain(..) {
            self.report.late_samples += 1;
            // Waiting samples are bounded; kept episodes are bounded in `keep_episode`.
            if self.probe_samples.len() < self.max_episodes {
                self.probe_samples.push_back(late);
            } else {
                self.report.episodes_not_kept += 1;
            }
        }
    }

    /// Reads the ring: each timer sample into its thread's timerlat split, each episode matched
    /// with the waiting probe sample that claims it or left waiting. Unless `stopping`, stops
    /// after [`DRAIN_EPISODES`] episodes so the probe's samples are read in between.
    fn read_ring(&mut self, recorder: &mut BpfRecorder, now: u64, stopping: bool) -> RingRead {
        let origin_ns = self.origin_ns;
        let timerlat = &mut self.timerlat;
        let probe_samples = &mut self.probe_samples;
        let kernel_episodes = &mut self.kernel_episodes;
        let unmatched_kernel = &mut self.unmatched_kernel;
        let mut episodes_read = 0;
        let mut matched: Vec<MatchedEpisode> = Vec::new();
        let (_, bad) = recorder.drain_while(|record| {
            if let Record::Sample(sample) = &record {
                // Timer threads' wake-ups during the measurement (not the warm-up).
                if let (Some(irq), Some(thread), Some(split)) = (
                    sample.irq_latency_ns(),
                    sample.thread_latency_ns(),
                    timerlat.get_mut(sample.slot as usize),
                ) {
                    if sample.intended_ns >= origin_ns {
                        let second = ((sample.intended_ns - origin_ns) / 1_000_000_000) as usize;
                        split.record(second, irq, thread);
                    }
                }
            }
            if let Record::Episode(episode) = record {
                episodes_read += 1;
                if let Some(index) = probe_samples.iter().position(|late| claims(late, &episode)) {
                    let late = probe_samples.remove(index).expect("found");
                    matched.push(MatchedEpisode { late, episode });
                } else {
                    if kernel_episodes.len() >= MAX_WAITING_EPISODES {
                        kernel_episodes.pop_front();
                        *unmatched_kernel += 1;
                    }
                    kernel_episodes.push_back(WaitingEpisode {
                        arrived_ns: now,
                        episode,
                    });
                }
            }
            // The last round reads everything; the others stop to read the probe's samples.
            stopping || episodes_read < DRAIN_EPISODES
        });
        self.undecodable += bad;
        RingRead {
            episodes_read,
            matched,
        }
    }

    /// Reads the steal time again when the last reading is a poll interval old.
    fn sample_steal_if_due(&mut self, now: u64) {
        if now
            >= self
                .steal
                .latest_ns()
                .saturating_add(POLL_INTERVAL.as_nanos() as u64)
        {
            self.steal.sample(now);
        }
    }

    /// Explains each probe sample matched during the read and keeps the episode.
    fn explain_matched(&mut self, matched: Vec<MatchedEpisode>) {
        for MatchedEpisode { late, episode } in matched {
            let mut explained = explain(&late, &episode, self.origin_ns, &self.symbols);
            explained.steal_ns =
                self.steal
                    .delta(late.cpu as usize, late.intended_ns, late.actual_ns);
            keep_episode(&mut self.report, explained, self.max_episodes);
        }
    }

    /// Matches each waiting probe sample with a waiting kernel episode; a sample none claims is
    /// given up as unexplained once `finishing`, or once it waited [`MATCH_WAIT_NS`] with the
    /// ring read to its end.
    fn match_waiting(&mut self, now: u64, finishing: bool, more_waiting: bool) {
        let mut still_waiting = VecDeque::with_capacity(self.probe_samples.len());
        let probe_samples = std::mem::take(&mut self.probe_samples);
        for late in probe_samples {
            let found = self
                .kernel_episodes
                .iter()
                .position(|waiting| claims(&late, &waiting.episode));
            match found {
                Some(index) => {
                    let waiting = self.kernel_episodes.remove(index).expect("found");
                    let mut explained =
                        explain(&late, &waiting.episode, self.origin_ns, &self.symbols);
                    if self.steal.latest_ns() < late.actual_ns {
                        self.steal.sample(rtlab_sys::clock::monotonic_ns());
                    }
                    explained.steal_ns =
                        self.steal
                            .delta(late.cpu as usize, late.intended_ns, late.actual_ns);
                    keep_episode(&mut self.report, explained, self.max_episodes);
                }
                // Not given up while the ring still holds unread episodes.
                None if finishing
                    || (!more_waiting && now >= late.actual_ns.saturating_add(MATCH_WAIT_NS)) =>
                {
                    if self.report.unexplained.len() < self.max_episodes {
                        self.report
                            .unexplained
                            .push((late.series.clone(), late.latency_ns));
                    }
                }
                None => still_waiting.push_back(late),
            }
        }
        self.probe_samples = still_waiting;
    }

    /// Gives up the kernel episodes no probe sample claimed within [`MATCH_WAIT_NS`] (all of
    /// them once `finishing`).
    fn expire_kernel_episodes(&mut self, now: u64, finishing: bool) {
        while self
            .kernel_episodes
            .front()
            .is_some_and(|waiting| finishing || now >= waiting.arrived_ns + MATCH_WAIT_NS)
        {
            self.kernel_episodes.pop_front();
            self.unmatched_kernel += 1;
        }
    }

    /// The report, with the recorder's counters, the timerlat splits that saw wake-ups and a
    /// warning if the ring buffer lost episodes.
    fn finish(self, recorder: &BpfRecorder, catch_ups: u64) -> Result<ExplainerReport, TraceError> {
        let mut report = self.report;
        report.catch_ups = catch_ups;
        let counters = recorder.counters()?;
        report.stats = RecorderStats {
            events: counters.events,
            lost_events: counters.episodes_lost + counters.samples_lost,
            undecodable_events: self.undecodable,
            ..RecorderStats::default()
        };
        if counters.episodes_lost > 0 {
            report.warnings.push(format!(
                "explain: the BPF ring buffer was full for {} late wake-ups; they were not explained",
                counters.episodes_lost
            ));
        }
        report.timerlat = self
            .timerlat
            .into_iter()
            .filter(|split| split.irq.count() > 0)
            .collect();
        report.bpf = Some(super::BpfSummary {
            episodes_unclaimed: self.unmatched_kernel,
            samples: counters.samples,
            clock_reads: counters.clock_reads,
            untimed_events: counters.untimed_events,
            tail_episodes: counters.tail_episodes,
            episodes_lost: counters.episodes_lost,
        });
        Ok(report)
    }
}

/// The explainer thread: reads the ring buffer (woken by it, or every [`POLL_INTERVAL`]) and the
/// probe's late samples, matches them, moves the rolling thresholds, and after a stop (or the
/// deadline) reads and matches once more to the end.
fn run_bpf_explainer(
    mut recorder: BpfRecorder,
    config: BpfExplainerConfig,
    mut source: LateSource,
    stop: &AtomicBool,
    thresholds: &[AtomicU64],
) -> Result<ExplainerReport, TraceError> {
    let mut policy = PolicyKeeper::start();
    let mut matcher = BpfMatcher::new(&recorder, &config);
    let mut rolling = Rolling::new(config.threads.len());
    let mut drained = Vec::with_capacity(1024);
    let mut stopping = false;
    // The last drain stopped at DRAIN_EPISODES with more in the ring: read on without polling.
    let mut more_waiting = false;
    let mut episodes_since_poll = 0;
    loop {
        if !more_waiting {
            let _ = rtlab_sys::ipc::poll_readable(&[recorder.ring_fd()], Some(POLL_INTERVAL));
        }
        policy.beat();
        let now = rtlab_sys::clock::monotonic_ns();
        // The probe's late samples first, so each kernel episode read below can be matched at
        // once instead of waiting in a bounded queue.
        matcher.take_probe_samples(&mut source, &mut drained);
        let read = matcher.read_ring(&mut recorder, now, stopping);
        more_waiting = !stopping && read.episodes_read >= DRAIN_EPISODES;
        episodes_since_poll += read.episodes_read;
        // SCHED_IDLE while episodes come slowly; a fair share while they come fast, so the ring
        // (about 500 episodes) does not overflow under load.
        let wanted = if episodes_since_poll > BUSY_EPISODES_PER_READ {
            ReaderPolicy::CatchingUp
        } else {
            ReaderPolicy::Background
        };
        if !more_waiting {
            episodes_since_poll = 0;
        }
        // Back to the background only once the ring is read.
        if wanted == ReaderPolicy::CatchingUp || !more_waiting {
            policy.set(wanted);
        }
        if config.fixed_threshold_ns.is_none() {
            rolling.step(now, &mut recorder, thresholds)?;
        }
        matcher.sample_steal_if_due(now);
        matcher.explain_matched(read.matched);
        let finishing = stopping;
        matcher.match_waiting(now, finishing, more_waiting);
        matcher.expire_kernel_episodes(now, finishing);
        if finishing {
            break;
        }
        // One more round after the stop: the last samples and episodes are read and matched.
        stopping = stop.load(Ordering::SeqCst) || now >= config.deadline_ns;
        // The last round reads whatever is left at a fair share (see the tracefs explainer).
        if stopping {
            policy.finishing();
        }
    }
    matcher.finish(&recorder, policy.catch_ups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_bpf::{ContextEntry, RawEvent, SampleRecord, TaskSnapshot};

    fn comm(text: &str) -> [u8; 16] {
        let mut bytes = [0u8; 16];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        bytes
    }

    #[test]
    fn the_state_before_the_window_is_put_in_front() {
        let episode = EpisodeRecord {
            wakeup: SampleRecord {
                cpu: 1,
                tid: 500,
                slot: 0,
                intended_ns: 10_000,
                expired_ns: 40_000,
                switched_ns: 45_000,
            },
            blocked_ns: 50_000,
            interrupted: TaskSnapshot {
                since_ns: 1_000,
                pid: 77,
                prio: 49,
                comm: comm("spinner"),
            },
            open_contexts: vec![ContextEntry {
                entered_ns: 2_000,
                key: 3,
                kind: 7,
            }],
            window_wrapped: true,
            events: vec![RawEvent {
                timestamp_ns: 45_000,
                pid: 77,
                time_lower_bound: false,
                kind: RawKind::Switch {
                    prev_pid: 77,
                    prev_prio: 49,
                    prev_state: 0,
                    prev_comm: comm("spinner"),
                    next_pid: 500,
                    next_prio: 0,
                    next_comm: comm("rtlab-timer"),
                },
            }],
        };
        let events = trace_events_of_episode(&episode);
        assert_eq!(events.len(), 3);
        assert!(matches!(
            &events[0].kind,
            EventKind::Switch { next_pid: 77, next_comm, .. } if next_comm.as_str() == "spinner"
        ));
        assert_eq!(events[1].kind, EventKind::SoftirqEntry { vector: 3 });
        assert!(events
            .windows(2)
            .all(|pair| pair[0].timestamp_ns <= pair[1].timestamp_ns));
    }

    #[test]
    fn rolling_p999_needs_enough_samples_and_takes_the_bucket_floor() {
        let mut counts = vec![0u64; HISTOGRAM_BUCKETS];
        counts[40] = 500;
        assert_eq!(rolling_p999(&counts), None);
        counts[40] = 9_990;
        counts[100] = 10;
        // 10,000 samples: p99.9 is rank 9,990, the last of bucket 40.
        assert_eq!(rolling_p999(&counts), Some(bucket_lower_bound_ns(40)));
        counts[100] = 11;
        assert_eq!(rolling_p999(&counts), Some(bucket_lower_bound_ns(100)));
    }

    #[test]
    fn the_timerlat_split_keeps_both_histograms_and_each_seconds_maximum() {
        let mut split = TimerlatSplit::default();
        split.record(0, 3_000, 5_000);
        split.record(0, 4_000, 2_000);
        split.record(2, 1_000, 9_000);
        assert_eq!(split.irq.count(), 3);
        assert_eq!(split.thread.count(), 3);
        assert_eq!(split.irq_max_per_second, vec![4_000, 0, 1_000]);
        assert_eq!(split.thread_max_per_second, vec![5_000, 0, 9_000]);
    }

    #[test]
    fn beyond_the_cap_the_least_late_episodes_are_summarised() {
        let episode = |latency_ns, name: &str| Episode {
            series: "rt-high/wakeup@0".into(),
            cpu: 0,
            at_ns: latency_ns,
            latency_ns,
            causes: vec![rtlab_core::Cause {
                kind: rtlab_core::CauseKind::Task,
                name: name.into(),
                pid: Some(1),
                ns: latency_ns,
                detail: None,
            }],
            steal_ns: None,
            stack: None,
            timeline: Vec::new(),
        };
        let mut report = ExplainerReport::default();
        for (latency, name) in [(50, "a"), (10, "b"), (70, "c"), (5, "b"), (60, "a")] {
            keep_episode(&mut report, episode(latency, name), 3);
        }
        let mut kept: Vec<u64> = report.episodes.iter().map(|e| e.latency_ns).collect();
        kept.sort_unstable();
        assert_eq!(kept, vec![50, 60, 70]);
        assert_eq!(report.episodes_not_kept, 2);
        assert_eq!(report.summarised_causes.len(), 1);
        assert_eq!(report.summarised_causes[0].name, "b");
        assert_eq!(report.summarised_causes[0].ns, 15);
    }

    #[test]
    fn beyond_the_byte_cap_the_least_late_episodes_are_summarised() {
        let episode = |latency_ns, segments: usize| Episode {
            series: "rt-high/wakeup@0".into(),
            cpu: 0,
            at_ns: latency_ns,
            latency_ns,
            causes: Vec::new(),
            steal_ns: None,
            stack: None,
            timeline: (0..segments)
                .map(|start| rtlab_core::Segment {
                    start_ns: start as u64,
                    ns: 1,
                    kind: rtlab_core::CauseKind::Irq,
                    name: "timer".into(),
                    pid: None,
                })
                .collect(),
        };
        let one = episode_bytes(&episode(1, 100));
        let byte_cap = 3 * one;
        let mut report = ExplainerReport::default();
        for latency in [40, 10, 30, 20, 50] {
            keep_episode_within(&mut report, episode(latency, 100), 1_000, byte_cap);
            assert!(report.episode_bytes <= byte_cap);
        }
        let mut kept: Vec<u64> = report.episodes.iter().map(|e| e.latency_ns).collect();
        kept.sort_unstable();
        assert_eq!(kept, vec![30, 40, 50]);
        assert_eq!(report.episodes_not_kept, 2);
        // A larger, later episode pushes out two small ones; a larger, earlier one is summarised.
        keep_episode_within(&mut report, episode(60, 200), 1_000, byte_cap);
        let mut kept: Vec<u64> = report.episodes.iter().map(|e| e.latency_ns).collect();
        kept.sort_unstable();
        assert_eq!(kept, vec![50, 60]);
        keep_episode_within(&mut report, episode(5, 300), 1_000, byte_cap);
        assert_eq!(report.episodes.len(), 2);
        assert_eq!(report.episodes_not_kept, 5);
        assert_eq!(
            report.episode_bytes,
            report.episodes.iter().map(episode_bytes).sum::<usize>()
        );
    }

    #[test]
    fn the_kernel_threshold_is_a_quarter_lower() {
        assert_eq!(kernel_threshold(100_000), 75_000);
        assert_eq!(kernel_threshold(12_000), 7_000);
        assert_eq!(kernel_threshold(6_000), 3_000);
        assert_eq!(kernel_threshold(u64::MAX), u64::MAX);
    }
}
