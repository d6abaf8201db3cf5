//! The kernel-side cost of rtlab's BPF programs while another process records with them
//! (BENCHMARKS.md "Kernel-side cost per event"): turns the kernel's run-time statistics on
//! (`BPF_ENABLE_STATS`, held by descriptor: the kernel turns them off again when this process
//! exits, however it exits, and `kernel.bpf_stats_enabled` is never written), waits until rtlab's
//! programs are loaded, takes each one's run_time_ns and run_cnt, waits SECONDS, takes them again
//! and prints the difference per program, one line each: `name runs ns_total ns_per_run`.
//!
//! usage: target/release/examples/bpf_program_cost SECONDS   (needs root; run while
//! `rtlab run --explain --explain-recorder bpf` runs, see bench/explain-kernel-cost.sh)

use rtlab_bpf::{loaded_program_costs, RunTimeStats};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// (runs, ns) of every loaded program whose name is ours, by name (two rtlab processes at once
/// would be summed; the benchmark runs one).
fn snapshot() -> BTreeMap<String, (u64, u64)> {
    let mut programs = BTreeMap::new();
    for (name, runs, ns) in loaded_program_costs().expect("listing BPF programs (root)") {
        let entry = programs.entry(name).or_insert((0, 0));
        entry.0 += runs;
        entry.1 += ns;
    }
    programs
}

fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .map_or(5.0, |text| text.parse().expect("SECONDS"));
    let _stats = RunTimeStats::enable().expect("BPF_ENABLE_STATS (root)");
    let give_up = Instant::now() + Duration::from_secs(30);
    let mut before = snapshot();
    while before.is_empty() {
        assert!(
            Instant::now() < give_up,
            "no rtlab BPF program loaded within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
        before = snapshot();
    }
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let after = snapshot();
    for (name, (runs, ns)) in &after {
        let (runs_before, ns_before) = before.get(name).copied().unwrap_or((0, 0));
        let runs = runs - runs_before;
        let ns = ns - ns_before;
        println!("{name} {runs} {ns} {:.1}", ns as f64 / runs.max(1) as f64);
    }
}
