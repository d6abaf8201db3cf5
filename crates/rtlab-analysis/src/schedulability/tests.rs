//! The analysis checked against textbook examples (Buttazzo, Burns & Wellings, Liu & Layland),
//! OS latency folded in as jitter, EDF reservations, the pseudo worst case, and durations near
//! the end of u64 ns.

use super::*;
use crate::classes::parse_rate;

fn interferer(period: u64, compute: u64) -> Interferer {
    Interferer {
        period,
        compute,
        jitter: 0,
    }
}

fn server(runtime: u64, period: u64, deadline: u64) -> Server {
    Server {
        runtime,
        period,
        deadline,
    }
}

fn fifo(name: &str, compute: u64, period: u64, priority: i32) -> Task {
    Task {
        name: name.to_owned(),
        period: Nanos(period),
        compute: Nanos(compute),
        deadline: Nanos(period),
        scheduling: Scheduling::FixedPriority(priority),
        cpu: 0,
        line: 0,
    }
}

fn no_latency(_: &Task) -> PseudoWorstCase {
    PseudoWorstCase {
        latency: Nanos::ZERO,
        per_activation: 0.0,
        basis: PseudoBasis::None,
    }
}

fn responses(tasks: &[Task]) -> Vec<Option<u64>> {
    analyse(tasks, AnalysisOptions::default(), &no_latency)
        .into_iter()
        .map(|result| result.response_ns)
        .collect()
}

#[test]
fn buttazzo_rate_monotonic_example() {
    // Buttazzo, Hard Real-Time Computing Systems, RTA example: (C,T) = (1,4), (2,6), (3,10),
    // rate-monotonic priorities: R = 1, 3, 10. U = 0.883 exceeds the Liu & Layland bound
    // 0.780 for n=3, yet the set is schedulable.
    let tasks = [
        fifo("t1", 1, 4, 30),
        fifo("t2", 2, 6, 20),
        fifo("t3", 3, 10, 10),
    ];
    assert_eq!(responses(&tasks), vec![Some(1), Some(3), Some(10)]);
}

#[test]
fn burns_wellings_unschedulable_example() {
    // Burns & Wellings: (T,C) = (30,10) > (40,10) > (50,12): R = 10, 20, and the lowest
    // reaches 52 > 50: not schedulable (U = 0.823 > 0.780).
    let tasks = [
        fifo("a", 10, 30, 3),
        fifo("b", 10, 40, 2),
        fifo("c", 12, 50, 1),
    ];
    assert_eq!(responses(&tasks), vec![Some(10), Some(20), None]);
    let results = analyse(&tasks, AnalysisOptions::default(), &no_latency);
    assert!(!results[2].schedulable);
    // Raising its deadline to its period is all it can get; at D = 52 it would fit exactly.
    assert_eq!(
        response_time(12, 0, 52, &[interferer(30, 10), interferer(40, 10)]),
        Some(52)
    );
}

#[test]
fn liu_layland_harmonic_set_at_full_utilisation() {
    // Harmonic periods are schedulable under RM up to U = 1: (1,2), (2,4) → R = 1, 4.
    let tasks = [fifo("fast", 1, 2, 2), fifo("slow", 2, 4, 1)];
    assert_eq!(responses(&tasks), vec![Some(1), Some(4)]);
}

#[test]
fn jitter_from_os_latency_is_folded_in() {
    // (1,4),(2,6),(3,10) with 1 unit of OS latency on every task: the lowest task now misses.
    let tasks = [
        fifo("t1", 1, 4, 30),
        fifo("t2", 2, 6, 20),
        fifo("t3", 3, 10, 10),
    ];
    let one = |_: &Task| PseudoWorstCase {
        latency: Nanos(1),
        per_activation: 0.0,
        basis: PseudoBasis::Observed,
    };
    let results = analyse(&tasks, AnalysisOptions::default(), &one);
    assert_eq!(results[0].response_ns, Some(2));
    // t2: w = 2 + ⌈(w+1)/4⌉·1 → w = 3 (⌈4/4⌉ = 1): R = 1 + 3 = 4.
    assert_eq!(results[1].response_ns, Some(4));
    assert!(!results[2].schedulable);
}

#[test]
fn edf_schedules_what_rate_monotonic_cannot() {
    // Buttazzo: (C,T) = (2,5), (4,7): U = 0.971. RM misses (R2 = 8 > 7); EDF (U ≤ 1) meets.
    let rm = [fifo("t1", 2, 5, 2), fifo("t2", 4, 7, 1)];
    assert_eq!(responses(&rm), vec![Some(2), None]);
    let reserve = |name: &str, compute: u64, period: u64| Task {
        scheduling: Scheduling::Reservation {
            runtime: Nanos(compute),
            period: Nanos(period),
            deadline: Nanos(period),
        },
        ..fifo(name, compute, period, 1)
    };
    let edf = [reserve("t1", 2, 5), reserve("t2", 4, 7)];
    let full = AnalysisOptions {
        reservation_bound: 1.0,
    };
    let results = analyse(&edf, full, &no_latency);
    assert!(
        results.iter().all(|result| result.schedulable),
        "{results:?}"
    );
    assert_eq!(results[1].response_ns, Some(7));
    // Linux admits only 95 %: the same set is refused.
    let results = analyse(&edf, AnalysisOptions::default(), &no_latency);
    assert!(results.iter().all(|result| !result.schedulable));
}

#[test]
fn demand_test_catches_constrained_deadlines() {
    // U = 0.6 but both need 3 units by time 3 and 4: dbf(3)=2, dbf(4)=2+2=4 ≤ 4 ok;
    // deadlines (2,2): dbf(2) = 4 > 2 fails.
    assert!(edf_demand_test(&[server(2, 10, 3), server(2, 10, 4)], 1.0).is_ok());
    assert!(edf_demand_test(&[server(2, 10, 2), server(2, 10, 2)], 1.0).is_err());
}

#[test]
fn reservations_interfere_with_fixed_priorities() {
    let mut tasks = vec![fifo("fifo", 2, 10, 99)];
    tasks.push(Task {
        scheduling: Scheduling::Reservation {
            runtime: Nanos(3),
            period: Nanos(10),
            deadline: Nanos(10),
        },
        ..fifo("dl", 3, 10, 1)
    });
    let results = analyse(&tasks, AnalysisOptions::default(), &no_latency);
    // FIFO at 99 still waits for SCHED_DEADLINE: w = 2 + ⌈(w + 7)/10⌉·3 → w=5 → ⌈12/10⌉=2 → 8
    // → ⌈15/10⌉ = 2 → 8.
    assert_eq!(results[0].response_ns, Some(8));
    assert_eq!(results[1].response_ns, Some(10));
}

#[test]
fn huge_durations_are_analysed_without_overflow() {
    // 10^12 server periods of 1000 s are beyond u64 ns: not schedulable, not an overflow.
    let reservation = Task {
        scheduling: Scheduling::Reservation {
            runtime: Nanos(1),
            period: Nanos::from_secs(1_000),
            deadline: Nanos::from_secs(1_000),
        },
        ..fifo("slow", 1_000_000_000_000, 1_000_000_000_000, 1)
    };
    let results = analyse(&[reservation], AnalysisOptions::default(), &no_latency);
    assert!(!results[0].schedulable);
    assert!(results[0].slack_ns.is_some_and(|slack| slack < 0));
    // A deadline past i64::MAX ns (292 years) keeps its slack positive.
    let far = [fifo("far", 1, 10_000_000_000_000_000_000, 1)];
    let results = analyse(&far, AnalysisOptions::default(), &no_latency);
    assert!(results[0].schedulable);
    assert!(results[0].slack_ns.is_some_and(|slack| slack > 0));
    // EDF at a 100 % bound: coprime periods of ~17 min have a hyperperiod beyond u64 ns.
    let servers = [
        server(500_000_000_001, 1_000_000_000_001, 999_999_999_999),
        server(500_000_000_001, 1_000_000_000_003, 1_000_000_000_003),
    ];
    assert!(edf_demand_test(&servers, 1.0).is_err());
}

#[test]
fn pseudo_worst_case_follows_the_miss_rate() {
    let mut histogram = LatencyHistogram::new();
    histogram.record_n(10_000, 3_599_000);
    histogram.record_n(500_000, 990);
    histogram.record_n(2_000_000, 10);
    // 3.6e6 activations of a 1 ms task = 1 hour. 1/hour → 1 in 3.6e6 per activation: 10 are
    // above 500 µs, so the quantile is 2 ms.
    let per_day = parse_rate("1/day").unwrap();
    let case = pseudo_worst_case(&histogram, None, Nanos::from_millis(1), per_day);
    assert_eq!(case.basis, PseudoBasis::ObservedMaximum);
    let per_minute = parse_rate("100/min").unwrap();
    // 100/min at 1 ms = 1/600 per activation; 1000/3.6e6 = 1/3600 exceed 10 µs → 10 µs.
    let case = pseudo_worst_case(&histogram, None, Nanos::from_millis(1), per_minute);
    assert_eq!(case.basis, PseudoBasis::Observed);
    assert!((10_000..=10_010).contains(&case.latency.0), "{:?}", case);
    // 1 in 36 000 → 100 allowed above: 500 µs.
    let case = pseudo_worst_case(
        &histogram,
        None,
        Nanos::from_millis(1),
        parse_rate("100/h").unwrap(),
    );
    assert!((500_000..=500_500).contains(&case.latency.0), "{:?}", case);
}
