//! The buffer experiment: does the forecast's mean time to underrun match real underruns?
//!
//! A producer thread of the class under test is woken by an absolute periodic timer every `t`,
//! does `c` of CPU work and completes one buffer per period. A virtual device, a high-priority
//! thread, drains one buffer every `t`: with `n` buffers it takes buffer `k` at `(k + n − 1)·t`,
//! and that buffer has underrun when the producer completed it later. Underruns are counted for
//! several `n` at once from the same producer (each `n` is just a later deadline for the same
//! buffers), while the producer's wake-up latencies go into a histogram, exactly what `rtlab run`
//! would have recorded for that thread. Comparing the counted underruns with `rtlab forecast` on
//! that histogram tests the forecast's model end to end, including what the model leaves out
//! (preemption during the work, the device's own timing).
//!
//! The device judges by the producer's completion timestamps, not by when it happens to run, so
//! its own lateness does not excuse a late buffer. Both threads stop on their own after
//! `duration`, or at once when `stop` is set; the device only sleeps and compares, so its real-time
//! priority costs the machine microseconds per period.

use rtlab_core::{LatencyHistogram, Nanos};
use rtlab_sys::sched::Policy;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Completion records kept; the device must not lag the producer by more periods than this.
const RING: usize = 1 << 16;

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct ExperimentConfig {
    /// Buffer period `t`: one wake-up and one buffer per period.
    pub buffer_period: Nanos,
    /// CPU time of work per buffer `c`.
    pub compute: Nanos,
    /// Buffer counts `n` to count underruns for (each ≥ 2).
    pub buffer_counts: Vec<u32>,
    /// How long the producer runs.
    pub duration: Nanos,
    /// Scheduling policy of the producer (the class under test).
    pub producer_policy: Policy,
    pub producer_cpu: Option<usize>,
    /// The device runs SCHED_FIFO at this priority (when permitted).
    pub device_priority: u32,
    pub device_cpu: Option<usize>,
}

pub use rtlab_core::buffer_experiment::ExperimentResult;

#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    #[error("buffer period must be longer than 0")]
    ZeroPeriod,
    #[error("compute time {compute} does not fit in the buffer period {period}")]
    ComputeTooLong { compute: Nanos, period: Nanos },
    #[error("buffer count {0} leaves no slack (need at least 2)")]
    TooFewBuffers(u32),
    #[error("setting the producer's policy to {policy}: {source}")]
    Policy {
        policy: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("pinning a thread to CPU {cpu}: {source}")]
    Pin {
        cpu: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("an experiment thread panicked")]
    Panicked,
    #[error("starting a thread: {0}")]
    Spawn(#[source] std::io::Error),
}

/// Why a producer class was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProducerClassError {
    #[error("'{0}' is not a FIFO priority below the device's (1-98)")]
    Priority(String),
    #[error("'{0}' is not a producer class (normal or fifo:PRIO)")]
    Unknown(String),
}

/// The producer's class as people name it: `normal` (SCHED_OTHER) or `fifo:PRIO`, below the
/// device's SCHED_FIFO 99.
pub fn parse_producer_class(text: &str) -> Result<Policy, ProducerClassError> {
    match text.split_once(':') {
        None if text == "normal" => Ok(Policy::Other { nice: 0 }),
        Some(("fifo", priority)) => priority
            .parse::<u32>()
            .ok()
            .filter(|priority| (1..=98).contains(priority))
            .map(|priority| Policy::Fifo { priority })
            .ok_or_else(|| ProducerClassError::Priority(priority.to_owned())),
        _ => Err(ProducerClassError::Unknown(text.to_owned())),
    }
}

struct Slot {
    sequence: AtomicU64,
    completed_ns: AtomicU64,
}

/// Runs the experiment; blocks for `duration` (less if `stop` is set).
pub fn run(
    config: &ExperimentConfig,
    stop: &Arc<AtomicBool>,
) -> Result<ExperimentResult, ExperimentError> {
    let period = config.buffer_period.0;
    if period == 0 {
        return Err(ExperimentError::ZeroPeriod);
    }
    if config.compute.0 >= period {
        return Err(ExperimentError::ComputeTooLong {
            compute: config.compute,
            period: config.buffer_period,
        });
    }
    if let Some(&bad) = config.buffer_counts.iter().find(|&&count| count < 2) {
        return Err(ExperimentError::TooFewBuffers(bad));
    }
    let periods = (config.duration.0 / period).max(1);
    let ring: Arc<Vec<Slot>> = Arc::new(
        (0..RING)
            .map(|_| Slot {
                sequence: AtomicU64::new(0),
                completed_ns: AtomicU64::new(0),
            })
            .collect(),
    );
    // Both threads start from the same grid, far enough ahead for both to be set up.
    let start_ns = rtlab_sys::clock::monotonic_ns() + 50_000_000;
    let max_buffers = config.buffer_counts.iter().copied().max().unwrap_or(2);

    let producer = {
        let ring = Arc::clone(&ring);
        let stop = Arc::clone(stop);
        let config = config.clone();
        std::thread::Builder::new()
            .name("rtlab-bufexp-producer".to_owned())
            .spawn(move || produce(&config, &ring, &stop, start_ns, periods))
            .map_err(ExperimentError::Spawn)?
    };
    let device = {
        let ring = Arc::clone(&ring);
        let stop = Arc::clone(stop);
        let config = config.clone();
        std::thread::Builder::new()
            .name("rtlab-bufexp-device".to_owned())
            .spawn(move || drain(&config, &ring, &stop, start_ns, periods, max_buffers))
            .map_err(ExperimentError::Spawn)?
    };
    let produced = producer.join().map_err(|_| ExperimentError::Panicked);
    let drained = device.join().map_err(|_| ExperimentError::Panicked);
    let produced = produced??;
    let drained = drained??;
    Ok(ExperimentResult {
        wakeup: produced.wakeup,
        max_per_second: produced.max_per_second,
        periods: produced.periods,
        underruns: drained.underruns,
        unchecked: drained.unchecked,
        producer_policy: produced.policy,
        device_realtime: drained.realtime,
        interrupted: stop.load(Ordering::Relaxed),
    })
}

/// What the producer thread hands back.
struct Produced {
    /// Its wake-up latencies.
    wakeup: LatencyHistogram,
    /// The largest wake-up latency of each second.
    max_per_second: Vec<u64>,
    /// The periods it produced.
    periods: u64,
    /// The policy it ran at.
    policy: Policy,
}

fn produce(
    config: &ExperimentConfig,
    ring: &[Slot],
    stop: &AtomicBool,
    start_ns: u64,
    periods: u64,
) -> Result<Produced, ExperimentError> {
    if let Some(cpu) = config.producer_cpu {
        rtlab_sys::cpu::pin_current_thread(cpu)
            .map_err(|source| ExperimentError::Pin { cpu, source })?;
    }
    rtlab_sys::sched::set_current_thread_policy(config.producer_policy).map_err(|source| {
        ExperimentError::Policy {
            policy: config.producer_policy.name(),
            source,
        }
    })?;
    let period = config.buffer_period.0;
    let mut histogram = LatencyHistogram::new();
    let seconds = (periods * period / 1_000_000_000 + 2) as usize;
    let mut max_per_second = vec![0u64; seconds];
    let mut produced = 0;
    for sequence in 1..=periods {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let intended = start_ns + sequence * period;
        rtlab_sys::clock::sleep_until_ns(intended);
        let woke = rtlab_sys::clock::monotonic_ns();
        let latency = woke.saturating_sub(intended);
        histogram.record(latency);
        let second = ((intended - start_ns) / 1_000_000_000) as usize;
        if let Some(slot) = max_per_second.get_mut(second) {
            *slot = (*slot).max(latency);
        }
        rtlab_sys::thread_clock::spin_cpu_time_ns(config.compute.0);
        let completed = rtlab_sys::clock::monotonic_ns();
        let slot = &ring[(sequence as usize) % RING];
        slot.completed_ns.store(completed, Ordering::Relaxed);
        slot.sequence.store(sequence, Ordering::Release);
        produced = sequence;
    }
    // Leave the policy as we found it: this thread ends now anyway, but say so explicitly.
    let _ = rtlab_sys::sched::set_current_thread_policy(Policy::Other { nice: 0 });
    let used_seconds =
        ((produced * period).div_ceil(1_000_000_000) as usize).min(max_per_second.len());
    max_per_second.truncate(used_seconds);
    Ok(Produced {
        wakeup: histogram,
        max_per_second,
        periods: produced,
        policy: config.producer_policy,
    })
}

/// What the device thread hands back.
struct Drained {
    /// Per buffer count `n`: `(n, buffers checked, underruns)`, as [`ExperimentResult`] keeps
    /// them.
    underruns: Vec<(u32, u64, u64)>,
    /// Checks it could not make because it fell more than the ring behind.
    unchecked: u64,
    /// It ran at its SCHED_FIFO priority.
    realtime: bool,
}

fn drain(
    config: &ExperimentConfig,
    ring: &[Slot],
    stop: &AtomicBool,
    start_ns: u64,
    periods: u64,
    max_buffers: u32,
) -> Result<Drained, ExperimentError> {
    if let Some(cpu) = config.device_cpu {
        rtlab_sys::cpu::pin_current_thread(cpu)
            .map_err(|source| ExperimentError::Pin { cpu, source })?;
    }
    let realtime = rtlab_sys::sched::set_current_thread_policy(Policy::Fifo {
        priority: config.device_priority,
    })
    .is_ok();
    let period = config.buffer_period.0;
    let mut counts: Vec<(u32, u64, u64)> =
        config.buffer_counts.iter().map(|&n| (n, 0, 0)).collect();
    let mut unchecked = 0;
    // Deadline j: with n buffers, buffer j − (n − 1) is taken at j·t.
    for deadline_index in 1..=(periods + u64::from(max_buffers)) {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let deadline = start_ns + deadline_index * period;
        rtlab_sys::clock::sleep_until_ns(deadline);
        for (buffers, checked, underruns) in &mut counts {
            let Some(needed) = deadline_index.checked_sub(u64::from(*buffers) - 1) else {
                continue;
            };
            if needed == 0 || needed > periods {
                continue;
            }
            let slot = &ring[(needed as usize) % RING];
            let sequence = slot.sequence.load(Ordering::Acquire);
            if sequence > needed {
                unchecked += 1;
                continue;
            }
            *checked += 1;
            if sequence < needed {
                // Not complete now, and now is past the deadline: late.
                *underruns += 1;
                continue;
            }
            let completed = slot.completed_ns.load(Ordering::Relaxed);
            if slot.sequence.load(Ordering::Acquire) != needed {
                // Overwritten while reading: the device fell a whole ring behind.
                *checked -= 1;
                unchecked += 1;
                continue;
            }
            if completed > deadline {
                *underruns += 1;
            }
        }
    }
    if realtime {
        let _ = rtlab_sys::sched::set_current_thread_policy(Policy::Other { nice: 0 });
    }
    Ok(Drained {
        underruns: counts,
        unchecked,
        realtime,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_classes_are_normal_or_fifo_below_the_device() {
        assert_eq!(
            parse_producer_class("normal"),
            Ok(Policy::Other { nice: 0 })
        );
        assert_eq!(
            parse_producer_class("fifo:50"),
            Ok(Policy::Fifo { priority: 50 })
        );
        assert_eq!(
            parse_producer_class("fifo:99"),
            Err(ProducerClassError::Priority("99".to_owned()))
        );
        assert!(parse_producer_class("rr:5").is_err());
    }

    fn config(period_ms: u64, compute_us: u64, buffers: Vec<u32>) -> ExperimentConfig {
        ExperimentConfig {
            buffer_period: Nanos::from_millis(period_ms),
            compute: Nanos::from_micros(compute_us),
            buffer_counts: buffers,
            duration: Nanos::from_millis(300),
            producer_policy: Policy::Other { nice: 0 },
            producer_cpu: None,
            device_priority: 10,
            device_cpu: None,
        }
    }

    #[test]
    fn rejects_impossible_configurations() {
        let stop = Arc::new(AtomicBool::new(false));
        assert!(matches!(
            run(&config(1, 1_000, vec![2]), &stop),
            Err(ExperimentError::ComputeTooLong { .. })
        ));
        assert!(matches!(
            run(&config(1, 0, vec![1]), &stop),
            Err(ExperimentError::TooFewBuffers(1))
        ));
        assert!(matches!(
            run(&config(0, 0, vec![2]), &stop),
            Err(ExperimentError::ZeroPeriod)
        ));
    }

    #[test]
    fn every_period_is_produced_and_every_buffer_checked_once_per_count() {
        let stop = Arc::new(AtomicBool::new(false));
        let result = run(&config(2, 100, vec![2, 4]), &stop).unwrap();
        // 300 ms of 2 ms periods: 150 buffers, one wake-up each, each checked once per n.
        assert_eq!(result.periods, 150);
        assert_eq!(result.wakeup.count(), 150);
        assert_eq!(result.unchecked, 0);
        for (buffers, checked, underruns) in &result.underruns {
            assert_eq!(*checked, 150, "n = {buffers}");
            assert!(underruns <= checked);
        }
        // More buffers never underrun more often than fewer, for the same produced buffers.
        assert!(result.underruns[1].2 <= result.underruns[0].2);
        assert!(!result.interrupted);
    }

    #[test]
    fn a_compute_time_longer_than_the_slack_underruns_every_buffer() {
        // n = 2, t = 2 ms: slack 2 ms − c. With c = 1.9 ms of CPU plus any wake-up latency, a
        // buffer meets its deadline only if the wake-up is under 100 µs late and the work is not
        // preempted; n = 8 leaves 14 ms and essentially never underruns on an idle machine.
        let stop = Arc::new(AtomicBool::new(false));
        let result = run(&config(2, 1_900, vec![2, 8]), &stop).unwrap();
        let late_wakeups = result.wakeup.count_above(100_000);
        // Every wake-up later than the slack of n = 2 is an underrun.
        assert!(
            result.underruns[0].2 >= late_wakeups,
            "{:?} vs {late_wakeups}",
            result.underruns
        );
        assert!(result.underruns[1].2 <= result.underruns[0].2);
    }

    #[test]
    fn stop_ends_the_experiment_early() {
        let stop = Arc::new(AtomicBool::new(true));
        let result = run(&config(1, 0, vec![2]), &stop).unwrap();
        assert!(result.interrupted);
        assert_eq!(result.periods, 0);
    }
}
