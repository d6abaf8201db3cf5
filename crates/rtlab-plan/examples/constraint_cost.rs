//! What one request costs the planner on a CPU that holds Time Constraints: a table fragmented
//! into 250 µs slots (six reservations), Time Constraints begun on it until the CPU holds no more,
//! then a small reservation on the same CPU, which finds free time again for every constraint.
//! Prints each step's time and the pieces of free time held. Timings, not a test:
//!
//! ```text
//! cargo run -p rtlab-plan --example constraint_cost            # the debug build the benchmarks run
//! cargo run -p rtlab-plan --example constraint_cost --release
//! ```

use rtlab_core::Nanos;
use rtlab_plan::{Owner, Planner, MAX_CONSTRAINT_PIECES};
use std::time::Instant;

fn main() {
    let mut planner = Planner::new(2, Nanos(250_000), 0.9).expect("a planner");
    for i in 0..6u64 {
        planner
            .reserve(
                Owner::Thread(100 + i as u32),
                Nanos(60_000 + 7_000 * i),
                Nanos(250_000 * (1 + i % 3)),
            )
            .expect("fits");
    }
    println!("cap: {MAX_CONSTRAINT_PIECES} pieces of free time a CPU");
    // Estimates and windows as rtlab-hostile's users send them: up to 20 % of a CPU each.
    let asks = [
        (150_000_000u64, 800_000_000u64),
        (178_000_000, 900_000_000),
        (100_000_000, 600_000_000),
        (500_000_000, 2_600_000_000),
        (400_000_000, 2_000_000_000),
        (300_000_000, 1_600_000_000),
    ];
    for (k, (estimate, window)) in asks.into_iter().enumerate() {
        let began = Instant::now();
        let result = planner.begin_constraint(
            Owner::Thread(7 + k as u32),
            Nanos(1_000_000),
            Nanos(estimate),
            Nanos(1_000_000 + window),
        );
        let took = began.elapsed();
        let pieces: Vec<usize> = planner
            .constraints()
            .iter()
            .map(|constraint| constraint.held.len())
            .collect();
        println!(
            "begin {} of {}: {} in {took:?}; pieces held: {pieces:?}",
            Nanos(estimate),
            Nanos(window),
            match &result {
                Ok(_) => "admitted".to_owned(),
                Err(refusal) => format!("refused ({refusal})"),
            }
        );
    }
    for i in 0..3u32 {
        let began = Instant::now();
        let result = planner.reserve(Owner::Thread(300 + i), Nanos(10_000), Nanos(1_000_000));
        println!(
            "reserve 10 µs of every 1 ms: {} in {:?}",
            match &result {
                Ok(grant) => format!("on CPU {}", grant.cpu),
                Err(refusal) => format!("refused ({refusal})"),
            },
            began.elapsed()
        );
    }
}
