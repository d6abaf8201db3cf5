//! Per-admission times over whole sequences (003, Figures 4-1..4-3): the time of the Nth
//! reservation, N = 1..10,000, with rebuilds included, reported as median and worst over repeated
//! runs of the same sequence. Criterion measures one operation in a steady state; this binary times
//! every admission of a growing plan, which is what the paper plots.
//!
//! It times rtlab-plan's planner but lives here, beside rtlab-sys: each admission's CPU time is the
//! thread's CLOCK_THREAD_CPUTIME_ID, which the pure planner's crate cannot read.
//!
//! Run: `cargo bench -p rtlab-sched --bench admission_sequence` (repetitions: RTLAB_BENCH_REPS,
//! default 11).

use rtlab_core::Nanos;
use rtlab_plan::{AdmissionPath, Owner, Planner};
use rtlab_sys::thread_clock::thread_cpu_time_ns;
use std::time::Instant;

/// Rialto/NT's clock period on the paper's machine was 976 µs (a 1024 Hz tick): 1 s is 1024 quanta.
const PAPER_QUANTUM: Nanos = Nanos(976_562);
const CHECKPOINTS: [usize; 11] = [
    1, 10, 100, 243, 485, 968, 1_000, 2_000, 5_000, 9_000, 10_000,
];

struct Sequence {
    name: &'static str,
    n_cpus: usize,
    periods: Vec<Nanos>,
    /// End the sequence at the first denial (a full CPU) instead of treating it as a setup error.
    until_full: bool,
}

/// 003's Figure 4-1 pattern: 1 ms at 4 s; 4 s, 2 s; 4 s, 2 s, 1 s; 4 s, 2 s, 1 s, 0.5 s; … With
/// `longest_round` 8, rounds grow down to 31.25 ms (4 s / 2^7) and then start again, so 10,000 requests
/// stay as fragmented as the first hundred.
fn fragmented(count: usize, longest_round: usize) -> Vec<Nanos> {
    let mut periods = Vec::with_capacity(count);
    let mut round = 1;
    while periods.len() < count {
        for step in 0..round {
            periods.push(Nanos(4_000_000_000 >> step));
        }
        round = round % longest_round + 1;
    }
    periods.truncate(count);
    periods
}

/// One run: per admission, wall-clock ns, the thread's CPU ns (which excludes time the VM or other
/// processes took the CPU away), and the path taken.
struct Run {
    wall: Vec<u64>,
    cpu: Vec<u64>,
    paths: Vec<AdmissionPath>,
}

/// Times every admission of `sequence`.
fn run_once(sequence: &Sequence) -> Run {
    let mut planner = Planner::new(sequence.n_cpus, PAPER_QUANTUM, 0.9).expect("valid planner");
    let mut times = Vec::with_capacity(sequence.periods.len());
    let mut cpu_times = Vec::with_capacity(sequence.periods.len());
    let mut paths = Vec::with_capacity(sequence.periods.len());
    for (index, period) in sequence.periods.iter().enumerate() {
        let owner = Owner::Thread(index as u32);
        let cpu_started = thread_cpu_time_ns();
        let started = Instant::now();
        let result = planner.reserve(owner, Nanos::from_millis(1), *period);
        let elapsed = started.elapsed();
        let cpu_elapsed = thread_cpu_time_ns().saturating_sub(cpu_started);
        let grant = match result {
            Ok(grant) => grant,
            Err(_) if sequence.until_full => break,
            Err(denied) => panic!("{}: request {} denied: {denied}", sequence.name, index + 1),
        };
        times.push(elapsed.as_nanos() as u64);
        cpu_times.push(cpu_elapsed);
        paths.push(grant.path);
    }
    Run {
        wall: times,
        cpu: cpu_times,
        paths,
    }
}

fn median(values: &mut [u64]) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}

fn micros(nanos: u64) -> String {
    format!("{:.2}", nanos as f64 / 1_000.0)
}

fn report(sequence: &Sequence, repetitions: usize) {
    let runs: Vec<Run> = (0..repetitions).map(|_| run_once(sequence)).collect();
    let count = runs.iter().map(|run| run.wall.len()).min().unwrap_or(0);
    let paths = &runs[0].paths;
    let rebuilds: Vec<usize> = paths
        .iter()
        .enumerate()
        .filter(|(_, path)| **path == AdmissionPath::Rebuild)
        .map(|(index, _)| index + 1)
        .collect();
    println!(
        "\n## {} ({count} requests of 1 ms, {} CPUs, quantum {PAPER_QUANTUM}, cap 0.9, {repetitions} runs)",
        sequence.name, sequence.n_cpus
    );
    println!("rebuilds: {} of {count}", rebuilds.len());
    println!("| N | path | median µs | worst µs | worst CPU-time µs |");
    println!("| ---: | --- | ---: | ---: | ---: |");
    // Short sequences (the uniprocessor Figure 4-1 run) get every N, like the paper's plot.
    let shown: Vec<usize> = if count <= 100 {
        (1..=count).collect()
    } else {
        CHECKPOINTS
            .iter()
            .copied()
            .filter(|&n| n <= count)
            .collect()
    };
    for n in shown {
        let mut at_n: Vec<u64> = runs.iter().map(|run| run.wall[n - 1]).collect();
        let worst = *at_n.iter().max().expect("runs");
        let worst_cpu = runs.iter().map(|run| run.cpu[n - 1]).max().expect("runs");
        let path = match paths[n - 1] {
            AdmissionPath::Incremental => "incremental",
            AdmissionPath::Rebuild => "rebuild",
        };
        println!(
            "| {n} | {path} | {} | {} | {} |",
            micros(median(&mut at_n)),
            micros(worst),
            micros(worst_cpu)
        );
    }
    println!("\nper range of N: `all` pools every admission of every run (so it includes the VM");
    println!("preempting the benchmark); `per-N median` first takes each N's median over the runs, which");
    println!("removes that noise but keeps what is slow every time, such as rebuilds:");
    println!("| N range | all: median µs | all: worst µs (at N) | all: worst CPU-time µs (at N) | per-N median: worst µs (at N) | rebuilds | rebuilds: median / worst of per-N medians µs |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let per_n_median: Vec<u64> = (0..count)
        .map(|index| {
            let mut values: Vec<u64> = runs.iter().map(|run| run.wall[index]).collect();
            median(&mut values)
        })
        .collect();
    let mut low = 1;
    while low <= count {
        let high = (low * 10 - 1).min(count);
        let mut all: Vec<u64> = Vec::new();
        let mut worst = (0u64, 0usize);
        let mut worst_cpu = (0u64, 0usize);
        for run in &runs {
            for n in low..=high {
                let time = run.wall[n - 1];
                all.push(time);
                if time > worst.0 {
                    worst = (time, n);
                }
                if run.cpu[n - 1] > worst_cpu.0 {
                    worst_cpu = (run.cpu[n - 1], n);
                }
            }
        }
        let (slowest_n, slowest_median) = (low..=high)
            .map(|n| (n, per_n_median[n - 1]))
            .max_by_key(|&(_, time)| time)
            .expect("non-empty range");
        let mut rebuild_medians: Vec<u64> = rebuilds
            .iter()
            .filter(|&&n| (low..=high).contains(&n))
            .map(|&n| per_n_median[n - 1])
            .collect();
        let rebuild_text = if rebuild_medians.is_empty() {
            "-".to_owned()
        } else {
            let worst_rebuild = *rebuild_medians.iter().max().expect("non-empty");
            format!(
                "{} / {}",
                micros(median(&mut rebuild_medians)),
                micros(worst_rebuild)
            )
        };
        println!(
            "| {low}..{high} | {} | {} ({}) | {} ({}) | {} ({slowest_n}) | {} | {rebuild_text} |",
            micros(median(&mut all)),
            micros(worst.0),
            worst.1,
            micros(worst_cpu.0),
            worst_cpu.1,
            micros(slowest_median),
            rebuild_medians.len(),
        );
        low *= 10;
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it, and
    // then a short smoke run (one repetition, 300 requests) checks that it works.
    let benchmarking = std::env::args().any(|argument| argument == "--bench");
    if std::env::args().any(|argument| argument == "--list") {
        return;
    }
    let repetitions = if benchmarking {
        std::env::var("RTLAB_BENCH_REPS")
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or(11usize)
            .max(1)
    } else {
        1
    };
    let count = if benchmarking { 10_000 } else { 300 };
    let identical = Sequence {
        name: "identical 1 ms / 1 s (Figure 4-2)",
        // 899 fit under the 0.9 cap per CPU: 12 CPUs hold 10,000.
        n_cpus: 12,
        periods: vec![Nanos::from_secs(1); count],
        until_full: false,
    };
    let fragmented_sequence = Sequence {
        name: "fragmented 4 s, 4 s, 2 s, 4 s, 2 s, 1 s, … (Figure 4-1)",
        n_cpus: 40,
        periods: fragmented(count, 8),
        until_full: false,
    };
    let fragmented_uniprocessor = Sequence {
        name: "fragmented on one CPU until it is full (Figure 4-1, uniprocessor)",
        n_cpus: 1,
        periods: fragmented(1_000, usize::MAX - 1),
        until_full: true,
    };
    println!(
        "# rtlab-sched admission times (machine: shared 2-core VM; other builds ran alongside)"
    );
    report(&identical, repetitions);
    report(&fragmented_sequence, repetitions);
    report(&fragmented_uniprocessor, repetitions);
}
