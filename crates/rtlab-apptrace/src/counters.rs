//! Observation without a trace: a thread's period and CPU per activation from the counters the
//! kernel keeps per task (`rtlab_sys::task_counters`: run time, voluntary switches), sampled
//! often, where recording the scheduler's events (tracefs or BPF) is not allowed — the hardened
//! `rtlabd.service`, a user without CAP_BPF (issue 37, item 1).
//!
//! A periodic real-time thread ends each activation by sleeping: one voluntary switch. Sampled
//! every millisecond (faster than its period), the interval between two samples that found it
//! asleep holds whole activations only, most often one, so `Δrun time / Δvoluntary switches`
//! over such an interval is the CPU of that activation (of a few, averaged, when the sampler fell
//! behind); samples that find it running are skipped (they would split an activation, counting
//! part of the next one in the previous: a first version without this read JACK's client at 2x
//! its p99). The period is `Δtime / Δvoluntary switches` over the observation; a high percentile
//! comes from the distribution over intervals. What it cannot see: who woke the thread (no waker chain), the
//! deadline misses (no wake-up times), and an activation that blocks midway (two switches: two
//! halves). BENCHMARKS.md, "observation without a trace", compares it with the trace on JACK.

use rtlab_core::Nanos;
use rtlab_sys::task_counters::{TaskCounterFiles, TaskCounters};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The default time between samples.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(1);
/// Activations per span over which the period's spread (`period_jitter`) is measured: a sample
/// every millisecond cannot time one activation of a 2.7 ms period, but it can time sixteen.
pub const JITTER_SPAN: u64 = 16;

/// What the counters say of one thread.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CounterEstimate {
    pub tid: u32,
    pub samples: u64,
    /// Voluntary switches between the first sample and the last: its activations.
    pub activations: u64,
    /// Time per activation over the observation (`None` with fewer than two activations).
    pub period: Option<Nanos>,
    /// The mean deviation of the period over spans of [`JITTER_SPAN`] activations from `period`.
    pub period_jitter: Option<Nanos>,
    /// CPU per activation over the intervals that held a switch, weighted by their switches.
    pub cpu_per_activation_p50: Nanos,
    pub cpu_per_activation_p99: Nanos,
    pub cpu_per_activation_max: Nanos,
    /// The mean switches per interval that held any: 1.0 when every activation was seen alone;
    /// above it, intervals averaged several (the sampler was late, or the thread blocks midway).
    pub switches_per_interval: f64,
    /// Time spent runnable but waiting for a CPU, over the observation.
    pub waited: Nanos,
}

/// The value at `fraction` of `sorted` (nearest rank), 0 when empty.
fn percentile(sorted: &[u64], fraction: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((sorted.len() as f64 * fraction).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Estimates a thread's period and CPU per activation from its counters sampled in time order.
pub fn estimate(tid: u32, samples: &[TaskCounters]) -> CounterEstimate {
    let mut per_activation: Vec<u64> = Vec::new();
    let mut intervals = 0u64;
    let mut switches_in_intervals = 0u64;
    // (time, switches) at each sample where the switch count moved.
    let mut changes: Vec<(u64, u64)> = Vec::new();
    // Only intervals between two samples that found the thread asleep count: then every
    // activation in between began and ended inside it, and its run time is theirs alone. A
    // sample taken while it runs would split an activation between two intervals.
    let mut anchor: Option<&TaskCounters> = None;
    for sample in samples.iter().filter(|sample| !sample.running) {
        let Some(last) = anchor else {
            anchor = Some(sample);
            continue;
        };
        anchor = Some(sample);
        let switches = sample
            .voluntary_switches
            .saturating_sub(last.voluntary_switches);
        if switches == 0 {
            continue;
        }
        let run = sample.run_ns.saturating_sub(last.run_ns);
        let each = run / switches;
        // Weighted by the activations it stands for (at most 64 copies: a stalled sampler's
        // interval says little of any one of them).
        per_activation.extend(std::iter::repeat_n(each, switches.min(64) as usize));
        intervals += 1;
        switches_in_intervals += switches;
        changes.push((sample.at_ns, sample.voluntary_switches));
    }
    per_activation.sort_unstable();
    let (activations, waited) = match (samples.first(), samples.last()) {
        (Some(first), Some(last)) => (
            last.voluntary_switches
                .saturating_sub(first.voluntary_switches),
            last.wait_ns.saturating_sub(first.wait_ns),
        ),
        _ => (0, 0),
    };
    let period = match (changes.first(), changes.last()) {
        (Some(&(t0, s0)), Some(&(t1, s1))) if s1 > s0 => Some((t1 - t0) / (s1 - s0)),
        _ => None,
    };
    let period_jitter = period.and_then(|period| {
        let mut deviations = Vec::new();
        let mut start = changes.first().copied()?;
        for &(at, switches) in &changes[1..] {
            if switches - start.1 >= JITTER_SPAN {
                let span_period = (at - start.0) / (switches - start.1);
                deviations.push(span_period.abs_diff(period));
                start = (at, switches);
            }
        }
        (!deviations.is_empty()).then(|| deviations.iter().sum::<u64>() / deviations.len() as u64)
    });
    CounterEstimate {
        tid,
        samples: samples.len() as u64,
        activations,
        period: period.map(Nanos),
        period_jitter: period_jitter.map(Nanos),
        cpu_per_activation_p50: Nanos(percentile(&per_activation, 0.50)),
        cpu_per_activation_p99: Nanos(percentile(&per_activation, 0.99)),
        cpu_per_activation_max: Nanos(per_activation.last().copied().unwrap_or(0)),
        switches_per_interval: if intervals == 0 {
            0.0
        } else {
            switches_in_intervals as f64 / intervals as f64
        },
        waited: Nanos(waited),
    }
}

/// Samples the counters of `tids` every `interval` for `duration` (or until `stop`) from a
/// thread of its own at SCHED_FIFO `priority` when given (so the samples keep time while the
/// observed real-time threads run; a sample is two small reads per thread), and estimates each
/// thread. A thread that exits keeps the samples taken before; one that cannot be opened is left
/// out. The sampler ends by itself when the duration is up.
pub fn observe(
    tids: &[u32],
    duration: Duration,
    interval: Duration,
    priority: Option<u32>,
    stop: &AtomicBool,
) -> std::io::Result<Vec<CounterEstimate>> {
    let mut files: Vec<TaskCounterFiles> = tids
        .iter()
        .filter_map(|&tid| TaskCounterFiles::open(tid).ok())
        .collect();
    let duration_ns = duration.as_nanos() as u64;
    let interval_ns = (interval.as_nanos() as u64).max(50_000);
    let tids: Vec<u32> = files.iter().map(TaskCounterFiles::tid).collect();
    let samples = std::thread::scope(|scope| {
        scope
            .spawn(move || {
                if let Some(priority) = priority {
                    rtlab_sys::sched::set_current_thread_policy(rtlab_sys::sched::Policy::Fifo {
                        priority,
                    })?;
                }
                let mut samples: Vec<Vec<TaskCounters>> = vec![Vec::new(); files.len()];
                let mut alive = vec![true; files.len()];
                let start = rtlab_sys::clock::monotonic_ns();
                let mut next = start;
                while next <= start + duration_ns && !stop.load(Ordering::Relaxed) {
                    for (index, file) in files.iter_mut().enumerate() {
                        if !alive[index] {
                            continue;
                        }
                        match file.read() {
                            Ok(counters) => samples[index].push(counters),
                            Err(_) => alive[index] = false,
                        }
                    }
                    // A sampler held off the CPU goes on from now rather than catching up in a
                    // burst.
                    next = (next + interval_ns).max(rtlab_sys::clock::monotonic_ns());
                    rtlab_sys::clock::sleep_until_ns(next);
                }
                Ok::<_, std::io::Error>(samples)
            })
            .join()
            .map_err(|_| std::io::Error::other("the counter sampler panicked"))?
    })?;
    Ok(tids
        .iter()
        .zip(&samples)
        .map(|(&tid, samples)| estimate(tid, samples))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples every `step` ns of a thread that wakes every `period` ns and runs `work(i)` ns in
    /// its i-th activation, starting at time 0.
    fn simulated(
        period: u64,
        step: u64,
        n_periods: u64,
        work: impl Fn(u64) -> u64,
    ) -> Vec<TaskCounters> {
        let mut samples = Vec::new();
        let end = period * n_periods;
        let mut t = 0;
        while t <= end {
            let mut run = 0;
            let mut switches = 0;
            let mut running = false;
            for activation in 0..n_periods {
                let begin = activation * period;
                let length = work(activation);
                if t >= begin + length {
                    run += length;
                    switches += 1;
                } else if t >= begin {
                    run += t - begin;
                    running = true;
                }
            }
            samples.push(TaskCounters {
                at_ns: t,
                run_ns: run,
                voluntary_switches: switches,
                running,
                ..TaskCounters::default()
            });
            t += step;
        }
        samples
    }

    #[test]
    fn a_steady_thread_sampled_faster_than_its_period_is_measured_exactly() {
        // JACK at 128 frames: 2.667 ms, 800 µs of work, sampled every millisecond.
        let samples = simulated(2_666_667, 1_000_000, 1_500, |_| 800_000);
        let estimate = estimate(7, &samples);
        assert_eq!(estimate.cpu_per_activation_p99, Nanos(800_000));
        assert_eq!(estimate.cpu_per_activation_p50, Nanos(800_000));
        let period = estimate.period.unwrap().0;
        assert!(period.abs_diff(2_666_667) < 2_000, "{period}");
        assert!(estimate.period_jitter.unwrap().0 < 100_000, "{estimate:?}");
        assert!(estimate.activations >= 1_499, "{estimate:?}");
        assert!(
            (estimate.switches_per_interval - 1.0).abs() < 0.01,
            "{estimate:?}"
        );
    }

    #[test]
    fn the_high_percentile_sees_one_activation_in_fifty_that_runs_long() {
        // Every 50th activation takes 2 ms instead of 500 µs: 2 % of them, so p99 is the long one
        // and p50 the usual one.
        let samples = simulated(5_000_000, 1_000_000, 1_000, |i| {
            if i % 50 == 0 {
                2_000_000
            } else {
                500_000
            }
        });
        let estimate = estimate(7, &samples);
        assert_eq!(estimate.cpu_per_activation_p50, Nanos(500_000));
        assert_eq!(estimate.cpu_per_activation_p99, Nanos(2_000_000));
        assert_eq!(estimate.cpu_per_activation_max, Nanos(2_000_000));
    }

    #[test]
    fn a_sampler_slower_than_the_period_averages_and_says_so() {
        // Sampled every 10 ms, a 2.667 ms thread shows about 3.75 activations per interval.
        let samples = simulated(2_666_667, 10_000_000, 1_500, |_| 800_000);
        let estimate = estimate(7, &samples);
        assert!(estimate.switches_per_interval > 3.0, "{estimate:?}");
        let p99 = estimate.cpu_per_activation_p99.0;
        assert!(p99.abs_diff(800_000) < 300_000, "{p99}");
    }

    #[test]
    fn no_samples_or_no_switches_give_no_period() {
        assert_eq!(estimate(7, &[]).period, None);
        let idle = vec![TaskCounters::default(); 10];
        let estimate = estimate(7, &idle);
        assert_eq!(estimate.period, None);
        assert_eq!(estimate.activations, 0);
        assert_eq!(estimate.cpu_per_activation_p99, Nanos(0));
    }

    #[test]
    fn a_sleeping_thread_of_this_process_is_observed_with_its_period() {
        let stop = AtomicBool::new(false);
        let (tid_sender, tid_receiver) = std::sync::mpsc::channel();
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let done_in_thread = done.clone();
        let worker = std::thread::spawn(move || {
            tid_sender.send(rtlab_sys::cpu::current_tid()).unwrap();
            while !done_in_thread.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let tid = tid_receiver.recv().unwrap();
        let estimates = observe(
            &[tid],
            Duration::from_millis(300),
            SAMPLE_INTERVAL,
            None,
            &stop,
        )
        .unwrap();
        done.store(true, Ordering::Relaxed);
        worker.join().unwrap();
        assert_eq!(estimates.len(), 1);
        let estimate = &estimates[0];
        assert!(estimate.activations >= 20, "{estimate:?}");
        // Asleep 5 ms at a time (plus timer slack and wake-up): a period of 5 ms or a little more.
        let period = estimate.period.unwrap();
        assert!(period >= Nanos(5_000_000), "{estimate:?}");
        assert!(estimate.samples >= 100, "{estimate:?}");
    }
}
