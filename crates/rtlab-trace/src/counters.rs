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
    /// Cycles of its period between the first switch seen and the last (see [`estimate`]): more
    /// than the switches when it fell behind and ran cycles back to back without sleeping.
    pub cycles: u64,
    /// Time per cycle over the observation (`None` with fewer than two activations).
    pub period: Option<Nanos>,
    /// The mean deviation of the period over spans of [`JITTER_SPAN`] cycles from `period`.
    pub period_jitter: Option<Nanos>,
    /// CPU per cycle over the intervals that held a switch, weighted by their cycles: an
    /// activation that ran several cycles back to back counts as those cycles.
    pub cpu_per_cycle_p50: Nanos,
    pub cpu_per_cycle_p99: Nanos,
    pub cpu_per_cycle_max: Nanos,
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

/// One interval between two samples that found the thread asleep, with a switch in it.
#[derive(Clone, Copy, Debug)]
struct Interval {
    /// The sample that ends it.
    at_ns: u64,
    /// Its length.
    span_ns: u64,
    switches: u64,
    run_ns: u64,
}

/// Of a period, what an interval may fall short of `n` periods and still count `n` cycles (it
/// rounds): the samples place each end only within a millisecond (0.37 of JACK's 2.67 ms either
/// way), and the trace's exact rule (`analyze::cycles`: `floor(L / P)`) counted half the cycles
/// JACK's client ran back to back under a FIFO competitor through them (a period of 3.0 ms for
/// 2.67). The cost: an activation of twice the usual work on time, ending late in its interval,
/// may be taken for two cycles; the trace does not make that mistake.
const CYCLE_SLACK: f64 = 0.5;

/// Rounds of [`cycle_counts`]: the period starts at most half too long (a third of the cycles
/// run back to back) and settles in two or three.
const CYCLE_FIT_ROUNDS: usize = 4;

/// The cycles each interval held, and the period they imply. A thread woken every period that
/// falls behind (a stall, a competitor) finds its next cycle already due when it finishes and
/// runs it without sleeping: one switch for two cycles. `Δtime / Δswitches` then overstates the
/// period (CI's JACK client, held off by the hypervisor: 2.97 ms for JACK's 2.67 ms) and the CPU
/// of that activation is two cycles' (p99 twice the work). Starting from that period, each
/// interval (between the samples after two switches) holds the larger of its switches and its
/// length in periods, rounded ([`CYCLE_SLACK`]); the period is the time from the first
/// interval's end to the last's over the cycles counted, again, until it settles. More than half as many
/// cycles again as switches, and the thread is not taken for one woken every period (the
/// switches count). These are cycles of the clock, run or skipped: [`cycles_run`] says which
/// ran. What it cannot tell apart: a thread that sleeps a fixed time after its work (not to an
/// absolute time) and was held off past its period; its next activation comes late and the
/// cycles between count as its own. Nor a sampler late by half a period or more: the interval it
/// ends is long by its lateness and may count a cycle the thread did not run (a 5 ms sleeper
/// sampled by a SCHED_OTHER thread on a busy machine: 59 cycles for 57 switches, 4.93 ms); a
/// sampler at SCHED_FIFO above the program, as `reserve --auto` runs it, is rarely that late.
fn cycle_counts(intervals: &[Interval], first_period: u64) -> (Vec<u64>, u64) {
    let mut period = first_period.max(1);
    let mut counts: Vec<u64> = intervals.iter().map(|interval| interval.switches).collect();
    for _ in 0..CYCLE_FIT_ROUNDS {
        for (count, interval) in counts.iter_mut().zip(intervals) {
            *count = interval.switches.max(cycles_by_time(interval, period));
        }
        // Over the intervals after the first (its start is before the first switch seen): the
        // time from the first interval's end to the last's, per cycle counted. End to end, so a
        // thread whose cycles were all seen keeps the period Δtime / Δswitches exactly (a least-
        // squares slope over the sampled ends fell under a 5 ms sleeper's 5 ms on a busy CI).
        let cycles: u64 = counts.iter().skip(1).sum();
        let (Some(first), Some(last)) = (intervals.first(), intervals.last()) else {
            break;
        };
        if cycles == 0 {
            break;
        }
        let next = ((last.at_ns - first.at_ns) / cycles).max(1);
        if next == period {
            break;
        }
        period = next;
    }
    // A thread that ran a third of its cycles back to back or more is not woken every period
    // (a sporadic one fits any short period): its switches are its activations.
    let switches: u64 = intervals.iter().map(|interval| interval.switches).sum();
    let cycles: u64 = counts.iter().sum();
    if cycles * 2 > switches * 3 {
        let counts = intervals.iter().map(|interval| interval.switches).collect();
        return (counts, first_period.max(1));
    }
    (counts, period)
}

fn cycles_by_time(interval: &Interval, period: u64) -> u64 {
    (interval.span_ns as f64 / period.max(1) as f64 + CYCLE_SLACK).floor() as u64
}

/// The cycles whose work each interval ran: its cycles of the clock ([`cycle_counts`]), but no
/// more than the usual activation's CPU (the median over intervals of one switch) goes into its
/// CPU (`analyze::cycles::cycles_of_work`): a thread whose waker skipped cycles (JACK after an
/// xrun) slept through them and did not run them.
fn cycles_run(intervals: &[Interval], period: u64) -> Vec<u64> {
    let mut single: Vec<u64> = intervals
        .iter()
        .filter(|interval| interval.switches == 1)
        .map(|interval| interval.run_ns)
        .collect();
    single.sort_unstable();
    let usual = percentile(&single, 0.5);
    intervals
        .iter()
        .map(|interval| {
            let by_work = crate::analyze::cycles::cycles_of_work(interval.run_ns, usual);
            interval
                .switches
                .max(cycles_by_time(interval, period).min(by_work))
        })
        .collect()
}

/// Estimates a thread's period and CPU per cycle from its counters sampled in time order.
pub fn estimate(tid: u32, samples: &[TaskCounters]) -> CounterEstimate {
    let mut intervals: Vec<Interval> = Vec::new();
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
        // The length from the last sample with a switch (asleep samples without one between
        // add no run time: the thread did not run).
        let since = intervals
            .last()
            .map_or(last.at_ns, |previous| previous.at_ns);
        intervals.push(Interval {
            at_ns: sample.at_ns,
            span_ns: sample.at_ns.saturating_sub(since),
            switches,
            run_ns: sample.run_ns.saturating_sub(last.run_ns),
        });
    }
    let (activations, waited) = match (samples.first(), samples.last()) {
        (Some(first), Some(last)) => (
            last.voluntary_switches
                .saturating_sub(first.voluntary_switches),
            last.wait_ns.saturating_sub(first.wait_ns),
        ),
        _ => (0, 0),
    };
    // Δtime / Δswitches between the first interval's end and the last's: the period if the
    // thread never ran two cycles back to back; the cycle fit corrects it when it did.
    let switches_after_first: u64 = intervals.iter().skip(1).map(|i| i.switches).sum();
    let (counts, period) = match (intervals.first(), intervals.last()) {
        (Some(first), Some(last)) if switches_after_first > 0 => {
            let first_period = (last.at_ns - first.at_ns) / switches_after_first;
            let (counts, period) = cycle_counts(&intervals, first_period);
            (counts, Some(period))
        }
        _ => (intervals.iter().map(|i| i.switches).collect(), None),
    };
    let run = match period {
        Some(period) => cycles_run(&intervals, period),
        None => counts.clone(),
    };
    let mut per_cycle: Vec<u64> = Vec::new();
    for (interval, &cycles) in intervals.iter().zip(&run) {
        let each = interval.run_ns / cycles.max(1);
        // Weighted by the cycles it stands for (at most 64 copies: a stalled sampler's
        // interval says little of any one of them).
        per_cycle.extend(std::iter::repeat_n(each, cycles.clamp(1, 64) as usize));
    }
    per_cycle.sort_unstable();
    let period_jitter = period.and_then(|period| {
        let mut deviations = Vec::new();
        let (mut start_at, mut cycles) = (intervals.first()?.at_ns, 0u64);
        for (interval, count) in intervals.iter().zip(&counts).skip(1) {
            cycles += count;
            if cycles >= JITTER_SPAN {
                let span_period = (interval.at_ns - start_at) / cycles;
                deviations.push(span_period.abs_diff(period));
                (start_at, cycles) = (interval.at_ns, 0);
            }
        }
        (!deviations.is_empty()).then(|| deviations.iter().sum::<u64>() / deviations.len() as u64)
    });
    let switches_in_intervals: u64 = intervals.iter().map(|i| i.switches).sum();
    CounterEstimate {
        tid,
        samples: samples.len() as u64,
        activations,
        cycles: counts.iter().skip(1).sum(),
        period: period.map(Nanos),
        period_jitter: period_jitter.map(Nanos),
        cpu_per_cycle_p50: Nanos(percentile(&per_cycle, 0.50)),
        cpu_per_cycle_p99: Nanos(percentile(&per_cycle, 0.99)),
        cpu_per_cycle_max: Nanos(per_cycle.last().copied().unwrap_or(0)),
        switches_per_interval: if intervals.is_empty() {
            0.0
        } else {
            switches_in_intervals as f64 / intervals.len() as f64
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
        assert_eq!(estimate.cpu_per_cycle_p99, Nanos(800_000));
        assert_eq!(estimate.cpu_per_cycle_p50, Nanos(800_000));
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
        assert_eq!(estimate.cpu_per_cycle_p50, Nanos(500_000));
        assert_eq!(estimate.cpu_per_cycle_p99, Nanos(2_000_000));
        assert_eq!(estimate.cpu_per_cycle_max, Nanos(2_000_000));
    }

    #[test]
    fn a_sampler_slower_than_the_period_averages_and_says_so() {
        // Sampled every 10 ms, a 2.667 ms thread shows about 3.75 activations per interval.
        let samples = simulated(2_666_667, 10_000_000, 1_500, |_| 800_000);
        let estimate = estimate(7, &samples);
        assert!(estimate.switches_per_interval > 3.0, "{estimate:?}");
        let p99 = estimate.cpu_per_cycle_p99.0;
        assert!(p99.abs_diff(800_000) < 300_000, "{p99}");
    }

    /// Samples every `step` ns of a thread woken every `period` ns (a counting semaphore: a
    /// wake-up while it runs is served at once, without sleeping) that runs `work` ns a cycle,
    /// held off the CPU for `stall` ns at each `stall_every`-th cycle's start.
    fn simulated_behind(
        period: u64,
        step: u64,
        n_periods: u64,
        work: u64,
        stall: u64,
        stall_every: u64,
    ) -> Vec<TaskCounters> {
        // Each cycle's (start, end) of work; a switch after a cycle when the next is not due.
        let mut spans = Vec::new();
        let mut free_at = 0;
        for cycle in 0..n_periods {
            let due = cycle * period;
            let mut start = due.max(free_at);
            if cycle % stall_every == 0 {
                start = start.max(due + stall);
            }
            spans.push((start, start + work));
            free_at = start + work;
        }
        let mut samples = Vec::new();
        let mut t = 0;
        while t <= period * n_periods {
            let mut sample = TaskCounters {
                at_ns: t,
                ..TaskCounters::default()
            };
            for (cycle, &(start, end)) in spans.iter().enumerate() {
                let next_due = (cycle as u64 + 1) * period;
                if t >= end {
                    sample.run_ns += work;
                    // It sleeps after this cycle only when the next is not yet due.
                    if next_due > end {
                        sample.voluntary_switches += 1;
                    }
                } else if t >= start {
                    sample.run_ns += t - start;
                    sample.running = true;
                } else if t >= cycle as u64 * period {
                    sample.running = true;
                }
            }
            samples.push(sample);
            t += step;
        }
        samples
    }

    #[test]
    fn cycles_run_back_to_back_count_as_cycles_not_as_one_long_activation() {
        // JACK's client at 128 frames, 800 µs a cycle, held off 3 ms every 6th cycle (CI's
        // hypervisor, or a FIFO competitor): it catches up by running two cycles without sleeping.
        let samples = simulated_behind(2_666_667, 1_000_000, 1_500, 800_000, 3_000_000, 6);
        let estimate = estimate(7, &samples);
        assert!(
            estimate.activations < 1_400,
            "the simulation merges cycles: {estimate:?}"
        );
        let period = estimate.period.unwrap().0;
        assert!(period.abs_diff(2_666_667) < 30_000, "{estimate:?}");
        assert!(estimate.cycles.abs_diff(1_499) < 15, "{estimate:?}");
        assert_eq!(estimate.cpu_per_cycle_p99, Nanos(800_000), "{estimate:?}");
    }

    #[test]
    fn a_sporadic_thread_s_long_sleeps_do_not_share_its_cpu() {
        // Activations 1 to 9 ms apart, in a fixed irregular order.
        let gaps = [1u64, 7, 3, 9, 2, 5, 8, 4, 6];
        let mut samples = Vec::new();
        let (mut at, mut switches) = (0, 0);
        for index in 0..400 {
            samples.push(TaskCounters {
                at_ns: at,
                run_ns: switches * 100_000,
                voluntary_switches: switches,
                ..TaskCounters::default()
            });
            at += gaps[index % gaps.len()] * 1_000_000;
            switches += 1;
        }
        let estimate = estimate(7, &samples);
        // Whatever period fits it, each activation ran one activation's work.
        assert_eq!(estimate.cpu_per_cycle_p50, Nanos(100_000), "{estimate:?}");
        assert_eq!(estimate.cpu_per_cycle_p99, Nanos(100_000), "{estimate:?}");
    }

    #[test]
    fn no_samples_or_no_switches_give_no_period() {
        assert_eq!(estimate(7, &[]).period, None);
        let idle = vec![TaskCounters::default(); 10];
        let estimate = estimate(7, &idle);
        assert_eq!(estimate.period, None);
        assert_eq!(estimate.activations, 0);
        assert_eq!(estimate.cpu_per_cycle_p99, Nanos(0));
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
        // Asleep 5 ms at a time (plus timer slack and wake-up): a period of 5 ms or a little
        // more, less what a late sampler costs. This sampler is SCHED_OTHER (the test runs
        // unprivileged): late by half a period, it ends an interval that holds one switch 1.5
        // periods after the last, which the cycle fit counts as two cycles (see `CYCLE_SLACK`).
        // Two CI rehearsals of a busy machine read 4.93 ms this way (59 cycles for 57 switches).
        let period = estimate.period.unwrap();
        assert!(period >= Nanos(4_750_000), "{estimate:?}");
        assert!(estimate.samples >= 100, "{estimate:?}");
    }
}
