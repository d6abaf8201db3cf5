//! Fuzzes the task-set file parser of `rtlab check`, then analyses whatever parses: no input may
//! panic, every accepted task must keep the parser's promises (compute ≤ deadline ≤ period, a
//! SCHED_FIFO priority in 1-99 or a reservation with runtime ≤ deadline ≤ period), and the
//! analysis must give one result per task. Run, seeded with the fixtures:
//! `cargo +nightly fuzz run task_set fuzz/corpus/task_set crates/rtlab-analysis/test_data/tasks/ok crates/rtlab-analysis/test_data/tasks/err`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rtlab_analysis::schedulability::{
    analyse, parse_task_set, AnalysisOptions, PseudoBasis, PseudoWorstCase, Scheduling, Task,
};
use rtlab_core::Nanos;

fn no_latency(_: &Task) -> PseudoWorstCase {
    PseudoWorstCase {
        latency: Nanos::ZERO,
        per_activation: 0.0,
        basis: PseudoBasis::None,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(tasks) = parse_task_set(text) else {
        return;
    };
    assert!(!tasks.is_empty());
    for task in &tasks {
        assert!(
            task.compute.0 > 0 && task.compute <= task.deadline && task.deadline <= task.period
        );
        match task.scheduling {
            Scheduling::FixedPriority(priority) => assert!((1..=99).contains(&priority)),
            Scheduling::Reservation {
                runtime,
                period,
                deadline,
            } => assert!(runtime.0 > 0 && runtime <= deadline && deadline <= period),
        }
    }
    let tasks = &tasks[..tasks.len().min(64)];
    for bound in [0.95, 1.0] {
        let options = AnalysisOptions {
            reservation_bound: bound,
        };
        assert_eq!(analyse(tasks, options, &no_latency).len(), tasks.len());
    }
});
