//! Criterion benchmarks of the planner's steady-state operations: admitting the Nth identical
//! reservation (timed reserve, untimed release, so every sample sees the same N − 1 others), building
//! 003's fragmented sequence, and checking a time constraint with 1,000 reservations present.
//!
//! Run: `cargo bench -p rtlab-plan --bench planner`.

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use rtlab_core::Nanos;
use rtlab_plan::{Owner, Planner};
use std::hint::black_box;
use std::time::{Duration, Instant};

const PAPER_QUANTUM: Nanos = Nanos(976_562);

fn planner_with_identical(count: u32) -> Planner {
    let n_cpus = (count as usize).div_ceil(899).max(1);
    let mut planner = Planner::new(n_cpus, PAPER_QUANTUM, 0.9).expect("valid planner");
    for index in 0..count {
        planner
            .reserve(
                Owner::Thread(index),
                Nanos::from_millis(1),
                Nanos::from_secs(1),
            )
            .expect("room for identical reservations");
    }
    planner
}

fn nth_identical_reservation(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("nth_identical_reservation_1ms_per_1s");
    for n in [1u32, 100, 1_000, 10_000] {
        // N − 1 present, on as many CPUs as N needs; the Nth is timed and then released.
        let n_cpus = (n as usize).div_ceil(899).max(1);
        let mut planner = Planner::new(n_cpus, PAPER_QUANTUM, 0.9).expect("valid planner");
        for index in 0..n - 1 {
            planner
                .reserve(
                    Owner::Thread(index),
                    Nanos::from_millis(1),
                    Nanos::from_secs(1),
                )
                .expect("room");
        }
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |bencher, &n| {
            bencher.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    let started = Instant::now();
                    let grant = planner
                        .reserve(Owner::Thread(n), Nanos::from_millis(1), Nanos::from_secs(1))
                        .expect("room for the Nth");
                    total += started.elapsed();
                    planner.release(grant.id).expect("just granted");
                }
                total
            });
        });
    }
    group.finish();
}

fn fragmented_sequence(criterion: &mut Criterion) {
    let mut periods = Vec::new();
    let mut round = 1;
    while periods.len() < 1_000 {
        for step in 0..round {
            periods.push(Nanos(4_000_000_000 >> step));
        }
        round = round % 8 + 1;
    }
    periods.truncate(1_000);
    criterion.bench_function("fragmented_sequence_1000_reservations_4_cpus", |bencher| {
        bencher.iter_batched(
            || Planner::new(4, PAPER_QUANTUM, 0.9).expect("valid planner"),
            |mut planner| {
                for (index, period) in periods.iter().enumerate() {
                    let _ = black_box(planner.reserve(
                        Owner::Thread(index as u32),
                        Nanos::from_millis(1),
                        *period,
                    ));
                }
                planner
            },
            BatchSize::PerIteration,
        );
    });
}

/// Each CPU's cycle is about 1 s with about 500 ms reserved up front, so a 600 ms window always
/// contains free time wherever it starts.
const WINDOW_NS: u64 = 600_000_000;

fn constraint_check(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("constraint_check_with_1000_reservations");
    let mut planner = planner_with_identical(1_000);
    // One owner with a reservation of its own, one without.
    let with_reservation = Owner::Thread(0);
    let without_reservation = Owner::Thread(1_000_000);
    for (name, owner) in [
        ("own_reservation", with_reservation),
        ("free_time_only", without_reservation),
    ] {
        group.bench_function(name, |bencher| {
            let mut start = 0u64;
            bencher.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    // Slide the window so successive checks see different parts of the cycle.
                    start = (start + 7_777_777) % 10_000_000_000;
                    let started = Instant::now();
                    let outcome = planner.begin_constraint(
                        owner.clone(),
                        Nanos(start),
                        Nanos::from_millis(5),
                        Nanos(start + WINDOW_NS),
                    );
                    total += started.elapsed();
                    let id = outcome.expect("a 600 ms window always holds free time");
                    planner
                        .end_constraint(id, Nanos(start + WINDOW_NS))
                        .expect("known");
                }
                total
            });
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = nth_identical_reservation, fragmented_sequence, constraint_check
}
criterion_main!(benches);
