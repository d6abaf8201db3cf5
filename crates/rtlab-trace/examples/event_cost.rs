//! What one recorded scheduler event costs the kernel, per recorder (BENCHMARKS.md "Kernel-side
//! cost per event"): two threads pinned to one CPU ping-pong a byte over pipes (like `perf bench
//! sched pipe`), so every round trip is two wake-ups and two context switches; the time per round
//! trip is measured with nothing recording, with the tracefs recorder's instance (standard
//! events, nobody reading), with the BPF recorder, and with the BPF recorder reading the clock on
//! every event. The events per round trip are counted by the BPF programs themselves.
//!
//! usage: cargo run --release -p rtlab-trace --example event_cost -- [ROUNDS=200000] [REPEATS=5]
//! (needs root; run under `flock /work/measure.lock`)

use rtlab_trace::{EventSet, Recorder, RecorderConfig};
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

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn main() {
    let mut arguments = std::env::args().skip(1);
    let rounds: u64 = arguments
        .next()
        .map_or(200_000, |text| text.parse().expect("ROUNDS"));
    let repeats: usize = arguments
        .next()
        .map_or(5, |text| text.parse().expect("REPEATS"));
    let cpu = *rtlab_sys::cpu::online_cpus()
        .expect("cpus")
        .last()
        .expect("a CPU");
    let modes = ["plain", "tracefs", "bpf", "bpf-clock-every-event"];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut events_per_round = Vec::new();
    let mut clock_reads_per_round = Vec::new();
    let mut tracefs_events_per_round = Vec::new();
    // Interleaved, so drifting background load hits every mode alike.
    for _ in 0..repeats {
        for (index, mode) in modes.iter().enumerate() {
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
                    let recorder = rtlab_bpf::BpfRecorder::start(&rtlab_bpf::BpfConfig {
                        cpus: vec![cpu],
                        full_events: false,
                        clock_every_event: *mode == "bpf-clock-every-event",
                    })
                    .expect("BPF recorder (root)");
                    let before = recorder.counters().expect("counters");
                    let time = ping_pong(cpu, rounds);
                    let after = recorder.counters().expect("counters");
                    if *mode == "bpf" {
                        events_per_round
                            .push((after.events - before.events) as f64 / rounds as f64);
                        clock_reads_per_round
                            .push((after.clock_reads - before.clock_reads) as f64 / rounds as f64);
                    }
                    time
                }
            };
            times[index].push(time);
        }
    }
    let events = median(&mut events_per_round);
    let clock_reads = median(&mut clock_reads_per_round);
    let plain = median(&mut times[0].clone());
    println!(
        "tracefs recorded {:.2} events per round trip (decoded + lost)",
        median(&mut tracefs_events_per_round)
    );
    println!(
        "CPU {cpu}, {rounds} round trips × {repeats} (interleaved); {events:.2} events and {clock_reads:.2} clock reads per round trip (BPF counters)"
    );
    for (index, mode) in modes.iter().enumerate() {
        let time = median(&mut times[index]);
        let per_event = (time - plain) / events;
        println!(
            "{mode:<22} {time:8.0} ns per round trip (median)  {:+7.0} ns  = {per_event:+6.0} ns per event",
            time - plain
        );
    }
}
