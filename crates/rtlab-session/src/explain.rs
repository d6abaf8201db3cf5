//! The explain side of a run: records kernel events and explains every late wake-up.
//!
//! The glue between the probe (which knows *that* a sample was late) and rtlab-explain (which knows
//! what the CPU did meanwhile): it picks each series' threshold, hands the late samples over with
//! the measuring thread's id, marks each late sample in the trace the moment it is taken (the
//! probe's late-sample sink), and puts the episodes in the Run record. By default the threshold is
//! each series' p99.9: the first second after warm-up calibrates a provisional threshold, and at
//! the end only episodes above the series' final p99.9 are kept. The threshold walks down once:
//! from [`ExplainConfig`] (or the calibration here) into the probe, never back up.

use rtlab_core::{
    ExplainRecorder, ExplainSettings, ExplainTrace, Metric, Nanos, RunRecord, ThresholdKind,
};
use rtlab_explain::recorder::LateSource;
use rtlab_explain::{
    BpfExplainer, BpfExplainerConfig, EventSet, Explainer, ExplainerConfig, ExplainerReport,
    LateWakeup, RecorderConfig, TraceError,
};
use rtlab_probe::{LateSample, LateSampleSink, RunningProbe, SeriesKey};
use rtlab_sys::tracefs::Marker;
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What to explain and how.
#[derive(Clone, Debug, Default)]
pub struct ExplainConfig {
    /// Explain samples later than this; default: each series' p99.9 (calibrated, see the module).
    pub threshold: Option<Nanos>,
    /// Also sample kernel call stacks (perf cpu-clock) on the measured CPUs.
    pub stacks: bool,
    /// Which kernel events to record.
    pub events: EventSet,
    /// Which recorder records them.
    pub recorder: RecorderChoice,
}

/// Which recorder `--explain` uses: `auto` takes BPF when it loads and no call stacks are wanted,
/// else tracefs, saying why.
pub use rtlab_core::recorder::RecorderChoice;

/// The recorder that runs.
enum Backend {
    Tracefs(Explainer),
    /// The BPF explainer, with the series keys each of its slots (measuring threads) feeds.
    Bpf {
        explainer: BpfExplainer,
        slot_keys: Vec<Vec<SeriesKey>>,
        applied: Vec<u64>,
    },
}

/// The probe's late-sample sink while explaining: one `trace_marker` line per late sample, so
/// the tracer sees the sample in the CPU's own event stream. One `write(2)` from a stack buffer:
/// no allocation, no lock (see `Marker::write`).
struct TraceMarkerSink(Arc<Marker>);

impl LateSampleSink for TraceMarkerSink {
    fn late_sample(&self, sample: &LateSample) {
        let mut buffer = [0u8; 160];
        let key = SeriesKey {
            metric: sample.metric,
            class: sample.class,
            cpu: sample.cpu,
        };
        if let Some(length) = rtlab_core::write_late_marker(
            &mut buffer,
            key.label(),
            sample.intended_ns,
            sample.actual_ns,
            sample.latency_ns,
        ) {
            self.0.write(&buffer[..length]);
        }
    }
}

fn micros(nanos: u64) -> String {
    format!("{:.1}", nanos as f64 / 1_000.0)
}

/// Episodes kept per run; late wake-ups beyond are counted, not attributed (bounded memory for
/// hours-long runs: an episode with its timeline is a few KiB).
const MAX_EPISODES: usize = 10_000;
/// The BPF recorder keeps the latest 4000 episodes, within `rtlab_explain`'s 24 MiB byte cap
/// (`EPISODE_BYTES_CAP`), and summarises the rest, so kept episodes stay bounded over any run
/// length (BENCHMARKS.md "Long runs: memory").
const MAX_EPISODES_BPF: usize = 4_000;

/// Hands the probe's late samples to whichever recorder starts: the BPF one, or tracefs after it.
fn split_source(source: LateSource) -> (LateSource, LateSource) {
    let shared = Arc::new(Mutex::new(source));
    let second = Arc::clone(&shared);
    (
        Box::new(move |out: &mut Vec<LateWakeup>| {
            if let Ok(mut source) = shared.lock() {
                source(out);
            }
        }),
        Box::new(move |out: &mut Vec<LateWakeup>| {
            if let Ok(mut source) = second.lock() {
                source(out);
            }
        }),
    )
}

/// How long after warm-up the default threshold is calibrated.
const CALIBRATION_NS: u64 = 1_000_000_000;
/// Samples kept per series for calibration (1 s at 1 kHz is 1000).
const CALIBRATION_SAMPLES: usize = 20_000;
/// `--stacks` samples each measured CPU every 1 ms of CPU time (1 kHz, like `perf record -F 1000`).
const STACK_PERIOD_NS: u64 = 1_000_000;

fn label(key: &SeriesKey) -> String {
    key.label().to_string()
}

enum Threshold {
    /// --explain-above: fixed for every series (set once at start).
    Fixed,
    /// Default: calibrating until `until_ns`, then per-series provisional thresholds.
    Calibrating {
        until_ns: u64,
        started: bool,
        samples: BTreeMap<SeriesKey, Vec<LateSample>>,
    },
    Provisional,
    /// The BPF recorder's rolling p99.9, copied into the probe every poll.
    Rolling,
}

/// The explain side of one run.
pub(crate) struct ExplainSession {
    explainer: Option<Backend>,
    sender: mpsc::Sender<LateWakeup>,
    thread_ids: BTreeMap<SeriesKey, u32>,
    threshold: Threshold,
    drained: Vec<LateSample>,
    measure_start_ns: u64,
    provisional: BTreeMap<String, u64>,
    fixed_threshold_ns: Option<u64>,
    /// Episodes recorded above the provisional threshold but not above the final p99.9.
    dropped_below_final: usize,
    warnings: Vec<String>,
}

/// Starts recording. A recorder that cannot start (not root, no tracefs) is a warning, not an
/// error: the run goes on and says what it skipped.
pub(crate) fn start(args: &ExplainConfig, probe: &RunningProbe, cpus: &[usize]) -> ExplainSession {
    let (sender, receiver) = mpsc::channel::<LateWakeup>();
    let receiver = Mutex::new(receiver);
    let source = Box::new(move |out: &mut Vec<LateWakeup>| {
        if let Ok(receiver) = receiver.lock() {
            out.extend(receiver.try_iter());
        }
    });
    let measure_start_ns = probe.measure_start_ns();
    let config = ExplainerConfig {
        recorder: RecorderConfig {
            cpus: cpus.to_vec(),
            // The calibration second's samples are attributed after it ends.
            retention: Duration::from_millis(CALIBRATION_NS / 1_000_000 + 1_500),
            stack_period_ns: args.stacks.then_some(STACK_PERIOD_NS),
            events: args.events,
            ..RecorderConfig::default()
        },
        // Reading the rings in bursts four times a second disturbs the measuring threads less than
        // every 50 ms did (rt-high median shift +7.0 % → +4.9 %, BENCHMARKS.md); 8 MiB per CPU
        // holds seconds of events even under load.
        poll_interval: Duration::from_millis(250),
        origin_ns: measure_start_ns,
        max_episodes: MAX_EPISODES,
        settle: Duration::from_millis(200),
        deadline_ns: probe.end_ns() + 30_000_000_000,
    };
    let mut warnings = Vec::new();
    let thread_ids: BTreeMap<SeriesKey, u32> = probe.thread_ids().into_iter().collect();
    let start_tracefs = |source: LateSource, warnings: &mut Vec<String>| match Explainer::start(
        config, source,
    ) {
        Ok(explainer) => {
            if let Some(marker) = explainer.marker() {
                probe.set_late_sink(Arc::new(TraceMarkerSink(marker)));
            }
            Some(Backend::Tracefs(explainer))
        }
        Err(error) => {
            warnings.push(format!(
                "explain: could not record kernel events ({error}); late wake-ups are measured but not explained (run as root with tracefs)"
            ));
            None
        }
    };
    let explainer = match args.recorder {
        RecorderChoice::Tracefs => start_tracefs(source, &mut warnings),
        RecorderChoice::Auto if args.stacks => {
            warnings.push(
                "explain: recording with tracefs: call stacks are sampled only beside the tracefs recorder".into(),
            );
            start_tracefs(source, &mut warnings)
        }
        RecorderChoice::Auto | RecorderChoice::Bpf => {
            // One slot per measuring thread; a timer thread feeds its wakeup and interval series.
            let mut slot_keys: Vec<Vec<SeriesKey>> = Vec::new();
            let mut threads: Vec<u32> = Vec::new();
            for (key, tid) in &thread_ids {
                if key.metric == Metric::Interval {
                    continue;
                }
                match threads.iter().position(|known| known == tid) {
                    Some(slot) => slot_keys[slot].push(*key),
                    None => {
                        threads.push(*tid);
                        slot_keys.push(vec![*key]);
                    }
                }
            }
            let bpf_config = BpfExplainerConfig {
                cpus: cpus.to_vec(),
                events: args.events,
                threads,
                fixed_threshold_ns: args.threshold.map(Nanos::as_u64),
                origin_ns: measure_start_ns,
                max_episodes: MAX_EPISODES_BPF,
                deadline_ns: probe.end_ns() + 30_000_000_000,
            };
            let (bpf_source, tracefs_source) = split_source(source);
            match BpfExplainer::start(bpf_config, bpf_source) {
                Ok(explainer) => {
                    let applied = vec![u64::MAX; slot_keys.len()];
                    Some(Backend::Bpf {
                        explainer,
                        slot_keys,
                        applied,
                    })
                }
                Err(error) if args.recorder == RecorderChoice::Auto => {
                    warnings.push(format!(
                        "explain: the BPF recorder did not load ({error}); recording with tracefs"
                    ));
                    start_tracefs(tracefs_source, &mut warnings)
                }
                Err(error) => {
                    warnings.push(format!(
                        "explain: the BPF recorder did not load ({error}); late wake-ups are measured but not explained"
                    ));
                    None
                }
            }
        }
    };
    let bpf = matches!(explainer, Some(Backend::Bpf { .. }));
    let threshold = match args.threshold {
        Some(threshold) => {
            probe.set_late_threshold(None, threshold.as_u64());
            Threshold::Fixed
        }
        // The BPF recorder calibrates from its kernel histograms, rolling (rtlab_explain::recorder
        // ::bpf); `poll` hands its thresholds to the probe.
        None if bpf => Threshold::Rolling,
        None => Threshold::Calibrating {
            until_ns: measure_start_ns + CALIBRATION_NS,
            started: false,
            samples: BTreeMap::new(),
        },
    };
    ExplainSession {
        explainer,
        sender,
        thread_ids,
        threshold,
        drained: Vec::with_capacity(4096),
        measure_start_ns,
        provisional: BTreeMap::new(),
        fixed_threshold_ns: args.threshold.map(Nanos::as_u64),
        dropped_below_final: 0,
        warnings,
    }
}

/// The value at quantile `fraction` of `values` (nearest rank); `values` is sorted in place.
fn quantile(values: &mut [u64], fraction: f64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let rank = ((fraction * values.len() as f64).ceil() as usize).clamp(1, values.len());
    Some(values[rank - 1])
}

impl ExplainSession {
    /// Called from the run's control loop: moves late samples from the probe to the recorder and
    /// sets the thresholds once calibration is over.
    pub(crate) fn poll(&mut self, probe: &RunningProbe) {
        if self.explainer.is_none() {
            return;
        }
        if let Some(Backend::Bpf {
            explainer,
            slot_keys,
            applied,
        }) = &mut self.explainer
        {
            if matches!(self.threshold, Threshold::Rolling) {
                for (slot, threshold) in explainer.thresholds().into_iter().enumerate() {
                    if applied[slot] != threshold {
                        applied[slot] = threshold;
                        for key in &slot_keys[slot] {
                            probe.set_late_threshold(Some(*key), threshold);
                            if threshold != u64::MAX {
                                self.provisional.insert(label(key), threshold);
                            }
                        }
                    }
                }
            }
        }
        let now = rtlab_sys::clock::monotonic_ns();
        if let Threshold::Calibrating {
            started, until_ns, ..
        } = &mut self.threshold
        {
            if !*started && now + 200_000_000 >= self.measure_start_ns {
                // Everything after warm-up is a candidate during calibration, which lasts a full
                // second from whenever it really began.
                probe.set_late_threshold(None, 0);
                *started = true;
                *until_ns = (*until_ns).max(now + CALIBRATION_NS);
            }
        }
        self.drained.clear();
        probe.drain_late(&mut self.drained);
        let drained = std::mem::take(&mut self.drained);
        match &mut self.threshold {
            Threshold::Calibrating {
                until_ns, samples, ..
            } => {
                for sample in &drained {
                    let key = SeriesKey {
                        metric: sample.metric,
                        class: sample.class,
                        cpu: sample.cpu,
                    };
                    let kept = samples.entry(key).or_default();
                    if kept.len() < CALIBRATION_SAMPLES {
                        kept.push(*sample);
                    }
                }
                if now >= *until_ns {
                    let samples = std::mem::take(samples);
                    let mut forward = Vec::new();
                    for (key, series_samples) in samples {
                        let mut latencies: Vec<u64> = series_samples
                            .iter()
                            .map(|sample| sample.latency_ns)
                            .collect();
                        let Some(p999) = quantile(&mut latencies, 0.999) else {
                            continue;
                        };
                        probe.set_late_threshold(Some(key), p999);
                        self.provisional.insert(label(&key), p999);
                        forward.extend(
                            series_samples
                                .into_iter()
                                .filter(|sample| sample.latency_ns > p999),
                        );
                    }
                    // Series that produced no sample while calibrating keep receiving everything;
                    // stop that.
                    for key in self.thread_ids.keys() {
                        if key.metric != Metric::Interval
                            && !self.provisional.contains_key(&label(key))
                        {
                            probe.set_late_threshold(Some(*key), u64::MAX);
                        }
                    }
                    self.threshold = Threshold::Provisional;
                    for sample in forward {
                        self.forward(sample);
                    }
                }
            }
            Threshold::Fixed | Threshold::Provisional | Threshold::Rolling => {
                for sample in &drained {
                    self.forward(*sample);
                }
            }
        }
        self.drained = drained;
    }

    fn forward(&mut self, sample: LateSample) {
        let key = SeriesKey {
            metric: sample.metric,
            class: sample.class,
            cpu: sample.cpu,
        };
        let Some(tid) = self.thread_ids.get(&key) else {
            return;
        };
        let _ = self.sender.send(LateWakeup {
            series: label(&key),
            metric: sample.metric,
            cpu: sample.cpu as u32,
            tid: *tid,
            intended_ns: sample.intended_ns,
            actual_ns: sample.actual_ns,
            latency_ns: sample.latency_ns,
        });
    }

    /// Stops recording and puts the episodes (and what limited them) into the record.
    pub(crate) fn finish(mut self, record: &mut RunRecord) -> Result<(), TraceError> {
        let mut warnings = std::mem::take(&mut self.warnings);
        let Some(explainer) = self.explainer.take() else {
            record.warnings.extend(warnings);
            record_config(
                record,
                self.fixed_threshold_ns,
                &self.provisional,
                None,
                &ExplainerReport::default(),
            );
            return Ok(());
        };
        let rolling = matches!(self.threshold, Threshold::Rolling);
        // A run shorter than the calibration second: its samples are still buffered here; hand
        // over those above the series' final p99.9.
        if let Threshold::Calibrating { samples, .. } =
            std::mem::replace(&mut self.threshold, Threshold::Provisional)
        {
            let final_p999 = final_thresholds(record);
            for (key, series_samples) in samples {
                let threshold = final_p999.get(&label(&key)).copied().unwrap_or(u64::MAX);
                for sample in series_samples
                    .into_iter()
                    .filter(|sample| sample.latency_ns > threshold)
                {
                    self.forward(sample);
                }
            }
        }
        // Senders must see the channel closed only after the last sample was queued.
        drop(self.sender);
        let (mut report, recorder) = match explainer {
            Backend::Tracefs(explainer) => (explainer.finish()?, ExplainRecorder::Tracefs),
            Backend::Bpf {
                explainer,
                slot_keys,
                ..
            } => {
                let mut report = explainer.finish()?;
                add_timerlat_series(record, &slot_keys, std::mem::take(&mut report.timerlat));
                (report, ExplainRecorder::Bpf)
            }
        };
        let mut episodes = std::mem::take(&mut report.episodes);
        // Late samples the BPF recorder had no kernel episode for, counted where they matter:
        // above the fixed threshold, or above their series' final p99.9.
        let final_p999 = final_thresholds(record);
        let unexplained = report
            .unexplained
            .iter()
            .filter(|(series, latency)| {
                self.fixed_threshold_ns.is_some()
                    || final_p999
                        .get(series)
                        .is_none_or(|threshold| latency > threshold)
            })
            .count();
        if unexplained > 0 {
            warnings.push(format!(
                "explain: {unexplained} late wake-ups had no kernel episode (the kernel's switch-in time was under its threshold then: the delay came after the switch-in, or the rolling threshold was higher); not explained"
            ));
        }
        if self.fixed_threshold_ns.is_none() {
            // Keep what is above each series' final p99.9 (the provisional threshold came from
            // the first second only).
            let before = episodes.len();
            episodes.retain(|episode| {
                final_p999
                    .get(&episode.series)
                    .is_none_or(|threshold| episode.latency_ns > *threshold)
            });
            let below_final = before - episodes.len();
            if below_final > 0 {
                self.dropped_below_final = below_final;
            }
            for (series, provisional) in self.provisional.iter().filter(|_| !rolling) {
                if let Some(final_threshold) = final_p999.get(series) {
                    if provisional > final_threshold {
                        warnings.push(format!(
                            "explain: {series}: samples between its p99.9 ({} µs) and the first second's p99.9 ({} µs) were not explained; give a fixed threshold to explain them",
                            micros(*final_threshold),
                            micros(*provisional)
                        ));
                    }
                }
            }
        }
        warnings.extend(report.warnings.iter().cloned());
        episodes.sort_by_key(|episode| episode.at_ns);
        if report.episodes_not_kept > 0 && recorder == ExplainRecorder::Bpf {
            warnings.push(format!(
                "explain: {} late wake-ups beyond the cap of {MAX_EPISODES_BPF} episodes were summarised, not kept (the least late; their causes are summed in config.explain.summarised_causes)",
                report.episodes_not_kept
            ));
        } else if report.episodes_not_kept > 0 {
            warnings.push(format!(
                "explain: {} late wake-ups beyond the first {MAX_EPISODES} were counted, not explained",
                report.episodes_not_kept
            ));
        }
        if report.stats.pages_after_loss > 0 {
            warnings.push(format!(
                "explain: the kernel's trace buffer overflowed {} times ({} events lost); episodes there may show more unaccounted time",
                report.stats.pages_after_loss, report.stats.lost_events
            ));
        }
        if !report.removed_stale_instances.is_empty() {
            warnings.push(format!(
                "explain: removed trace instances left by earlier rtlab processes that died: {}",
                report.removed_stale_instances.join(", ")
            ));
        }
        record.episodes = episodes;
        record.warnings.extend(warnings);
        record_config(
            record,
            self.fixed_threshold_ns,
            &self.provisional,
            Some(recorder),
            &report,
        );
        record.config.explain_trace = Some(ExplainTrace {
            event_set: report.event_set.name().to_owned(),
            comm_recording_off: report.comm_recording_off,
            events: report.enabled_events,
            markers: report.stats.markers,
            pages: report.stats.pages,
            decoded_events: report.stats.events,
            lost_events: report.stats.lost_events,
            undecodable_pages: report.stats.undecodable_pages,
            late_samples: report.late_samples,
            reader_catch_ups: report.catch_ups,
            episodes_below_final_threshold: self.dropped_below_final as u64,
            stack_samples: report.stats.stack_samples,
        });
        Ok(())
    }
}

/// The BPF recorder's timerlat split as two more series (`irq`, `thread`) beside each timer
/// thread's `wakeup` series, with its class, CPU, policy and period.
fn add_timerlat_series(
    record: &mut RunRecord,
    slot_keys: &[Vec<SeriesKey>],
    splits: Vec<rtlab_explain::TimerlatSplit>,
) {
    for split in splits {
        let Some(key) = slot_keys
            .get(split.slot)
            .and_then(|keys| keys.iter().find(|key| key.metric == Metric::Wakeup))
        else {
            continue;
        };
        let Some(wakeup) = record
            .series
            .iter()
            .find(|series| series.label() == label(key))
            .cloned()
        else {
            continue;
        };
        for (metric, histogram, maxima) in [
            (Metric::Irq, &split.irq, split.irq_max_per_second),
            (Metric::Thread, &split.thread, split.thread_max_per_second),
        ] {
            if let Ok(series) = RunRecord::series_from_histogram(
                metric,
                &wakeup.class,
                wakeup.cpu,
                &wakeup.policy,
                wakeup.priority,
                wakeup.period_ns,
                histogram,
                0,
                0,
                maxima,
                Vec::new(),
            ) {
                record.series.push(series);
            }
        }
    }
}

/// Each series' p99.9 over the whole measurement, by label.
fn final_thresholds(record: &RunRecord) -> BTreeMap<String, u64> {
    record
        .series
        .iter()
        .filter_map(|series| Some((series.label(), *series.percentiles.get("99.9")?)))
        .collect()
}

fn record_config(
    record: &mut RunRecord,
    fixed_ns: Option<u64>,
    provisional: &BTreeMap<String, u64>,
    recorder: Option<ExplainRecorder>,
    report: &ExplainerReport,
) {
    record.config.explain = Some(ExplainSettings {
        threshold: match fixed_ns {
            Some(_) => ThresholdKind::Fixed,
            None => ThresholdKind::P999,
        },
        explain_above_ns: fixed_ns,
        provisional_threshold_ns: provisional.clone(),
        recorded: recorder.is_some(),
        recorder,
        lost_events: report.stats.lost_events,
        episodes_not_kept: report.episodes_not_kept,
        summarised_causes: report.summarised_causes.clone(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_is_nearest_rank() {
        let mut values: Vec<u64> = (1..=1000).collect();
        assert_eq!(quantile(&mut values, 0.999), Some(999));
        assert_eq!(quantile(&mut [5], 0.999), Some(5));
        assert_eq!(quantile(&mut [], 0.5), None);
    }
}
