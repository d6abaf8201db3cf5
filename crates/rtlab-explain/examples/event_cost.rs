//! What one recorded scheduler event costs, per recorder (BENCHMARKS.md "Kernel-side cost per
//! event"), two ways:
//!
//! 1. Wall clock: two threads pinned to one CPU ping-pong a byte over pipes (like `perf bench
//!    sched pipe`), so every round trip is two wake-ups and two context switches; the time per
//!    round trip with nothing recording, with the tracefs recorder's instance (standard events,
//!    nobody reading) and with the BPF recorder under each clock policy, interleaved. Each mode's
//!    cost is the median over repeats of its time minus the same repeat's plain time, with a 95 %
//!    distribution-free interval (order statistics of the paired differences), divided by the
//!    events per round trip.
//! 2. The kernel's own count (BPF only): the same loop with run-time statistics on
//!    (`BPF_ENABLE_STATS`, held by descriptor, so nothing is left changed), each program's
//!    run_time_ns / run_cnt. That excludes the tracepoint's dispatch and includes the statistics'
//!    own clock reads, so it is a close figure, not the wall clock's.
//!
//! usage: cargo run --release -p rtlab-explain --example event_cost -- [ROUNDS=200000] [REPEATS=15]
//! (needs root; run under `flock /work/measure.lock`)

use rtlab_bpf::{BpfConfig, BpfRecorder, ClockPolicy, RunTimeStats};
use rtlab_explain::{EventSet, Recorder, RecorderConfig};
use std::io::{Read, Write};
use std::time::Instant;

/// ns per round trip of the ping-pong on `cpu`.
fn ping_pong(cpu: usize, rounds: u64) -> f64 {
    let (mut to_b_read, mut to_b_write) = std::io::pipe().expect("pipe");
    let (mut to_a_read, mut to_a_write) = std::io::pipe().expect("pipe");
    let partner = std::thread::spawn(move || {
        rtlab_sys::cpu::pin_current_thread(cpu).expect("pin");
        let mut byte = [0u8; 1];
        for _ in 0..rounds {
            to_b_read.read_exact(&mut byte).expect("read");
            to_a_write.write_all(&byte).expect("write");
        }
    });
    rtlab_sys::cpu::pin_current_thread(cpu).expect("pin");
    let mut byte = [1u8; 1];
    let start = Instant::now();
    for _ in 0..rounds {
        to_b_write.write_all(&byte).expect("write");
        to_a_read.read_exact(&mut byte).expect("read");
    }
    let elapsed = start.elapsed();
    partner.join().expect("partner");
    elapsed.as_nanos() as f64 / rounds as f64
}

/// The median and a 95 % distribution-free interval for it: order statistics k and n + 1 − k,
/// k the largest with P(Binomial(n, ½) < k) ≤ 2.5 % (the sign test's interval).
fn median_with_interval(values: &[f64]) -> (f64, f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    // P(X <= j) for X ~ Binomial(n, 1/2), accumulated.
    let mut k = 0;
    let mut cumulative = 0.0;
    let mut term = 0.5f64.powi(n as i32);
    for j in 0..n {
        cumulative += term;
        if cumulative > 0.025 {
            break;
        }
        k = j + 1;
        term = term * (n - j) as f64 / (j + 1) as f64;
    }
    if k == 0 {
        return (median, sorted[0], sorted[n - 1]);
    }
    (median, sorted[k - 1], sorted[n - k])
}

const MODES: [&str; 5] = ["plain", "tracefs", "bpf", "bpf-reuse", "bpf-every"];

fn policy_of(mode: &str) -> ClockPolicy {
    match mode {
        "bpf-reuse" => ClockPolicy::ReuseTracepoint,
        "bpf-every" => ClockPolicy::EveryEvent,
        _ => ClockPolicy::WhilePending,
    }
}

fn start_bpf(cpu: usize, mode: &str) -> BpfRecorder {
    BpfRecorder::start(&BpfConfig {
        cpus: vec![cpu],
        full_events: false,
        clock: policy_of(mode),
        whole_window_episodes: false,
        attach_only: false,
    })
    .expect("BPF recorder (root)")
}

fn main() {
    let mut arguments = std::env::args().skip(1);
    let rounds: u64 = arguments
        .next()
        .map_or(200_000, |text| text.parse().expect("ROUNDS"));
    let repeats: usize = arguments
        .next()
        .map_or(15, |text| text.parse().expect("REPEATS"));
    let cpu = *rtlab_sys::cpu::online_cpus()
        .expect("cpus")
        .last()
        .expect("a CPU");
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    let mut bpf_events_per_round = Vec::new();
    let mut tracefs_events_per_round = Vec::new();
    // Interleaved, so drifting background load hits every mode alike.
    for _ in 0..repeats {
        for (index, mode) in MODES.iter().enumerate() {
            let time = match *mode {
                "plain" => ping_pong(cpu, rounds),
                "tracefs" => {
                    let mut recorder = Recorder::start(&RecorderConfig {
                        cpus: vec![cpu],
                        events: EventSet::Standard,
                        ..RecorderConfig::default()
                    })
                    .expect("tracefs recorder (root, tracefs)");
                    let time = ping_pong(cpu, rounds);
                    // What the instance recorded (read after the loop; what the ring overwrote is
                    // counted as lost), to show it really traced the loop.
                    while recorder.poll(4096).is_ok_and(|outcome| !outcome.caught_up) {}
                    let stats = recorder.stats();
                    tracefs_events_per_round
                        .push((stats.events + stats.lost_events) as f64 / rounds as f64);
                    time
                }
                _ => {
                    let recorder = start_bpf(cpu, mode);
                    let before = recorder.counters().expect("counters");
                    let time = ping_pong(cpu, rounds);
                    let after = recorder.counters().expect("counters");
                    if *mode == "bpf" {
                        bpf_events_per_round
                            .push((after.events - before.events) as f64 / rounds as f64);
                    }
                    time
                }
            };
            times[index].push(time);
        }
    }
    let (tracefs_events, _, _) = median_with_interval(&tracefs_events_per_round);
    let (bpf_events, _, _) = median_with_interval(&bpf_events_per_round);
    println!(
        "CPU {cpu}, {rounds} round trips x {repeats} (interleaved); events per round trip: \
         tracefs {tracefs_events:.2} (decoded + lost), BPF {bpf_events:.2} (its counters)"
    );
    println!("wall clock: ns per round trip (median), added vs plain of the same repeat (median, 95 % interval), per event");
    for (index, mode) in MODES.iter().enumerate() {
        let (time, _, _) = median_with_interval(&times[index]);
        if index == 0 {
            println!("{mode:<10} {time:8.0}");
            continue;
        }
        let differences: Vec<f64> = times[index]
            .iter()
            .zip(&times[0])
            .map(|(with, without)| with - without)
            .collect();
        let (added, low, high) = median_with_interval(&differences);
        let events = if *mode == "tracefs" {
            tracefs_events
        } else {
            bpf_events
        };
        println!(
            "{mode:<10} {time:8.0}  {added:+7.0} ns ({low:+.0} … {high:+.0})  = {:+5.0} ns per event ({:+.0} … {:+.0})",
            added / events,
            low / events,
            high / events
        );
    }
    // The kernel's count, per program, under each clock policy.
    println!("kernel run-time statistics (BPF_ENABLE_STATS), {rounds} round trips each:");
    for mode in ["bpf", "bpf-reuse", "bpf-every"] {
        let recorder = start_bpf(cpu, mode);
        let stats = RunTimeStats::enable().expect("BPF_ENABLE_STATS (root)");
        let before = recorder.program_costs().expect("program info");
        let counters_before = recorder.counters().expect("counters");
        ping_pong(cpu, rounds);
        let after = recorder.program_costs().expect("program info");
        let counters_after = recorder.counters().expect("counters");
        drop(stats);
        let mut total_ns = 0u64;
        let mut total_runs = 0u64;
        let mut line = String::new();
        for (earlier, later) in before.iter().zip(&after) {
            let runs = later.run_count - earlier.run_count;
            let ns = later.run_time_ns - earlier.run_time_ns;
            total_ns += ns;
            total_runs += runs;
            if runs >= rounds / 10 {
                line.push_str(&format!(
                    "  {} {:.0} ns x {:.2}/round trip",
                    later.tracepoint,
                    ns as f64 / runs as f64,
                    runs as f64 / rounds as f64
                ));
            }
        }
        let clock_reads = counters_after.clock_reads - counters_before.clock_reads;
        let untimed = counters_after.untimed_events - counters_before.untimed_events;
        println!(
            "{mode:<10} {:.0} ns per program run, {:.0} ns per round trip; clock reads {:.2}, untimed {:.2} per round trip;{line}",
            total_ns as f64 / total_runs.max(1) as f64,
            total_ns as f64 / rounds as f64,
            clock_reads as f64 / rounds as f64,
            untimed as f64 / rounds as f64,
        );
    }
}
