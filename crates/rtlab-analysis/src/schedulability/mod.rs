//! Schedulability: is a set of periodic tasks going to meet its deadlines on *this* machine?
//!
//! Paper 002 §5.2: on a general-purpose OS there is no true worst case, so pick the latency that
//! is exceeded no more often than the permitted miss rate (one dropped buffer per hour, per day…),
//! the "pseudo worst case", and feed it to a standard analysis. Here it enters as release jitter:
//! a task that wakes `J` late still has to finish `C` of work, plus whatever higher-priority work
//! arrives, before its deadline.
//!
//! Fixed-priority tasks (`SCHED_FIFO`, higher number runs first) get exact response-time analysis
//! with release jitter (Joseph & Pandya; Audsley, Burns, Tindell). Reservations (`SCHED_DEADLINE`,
//! a constant-bandwidth server of `runtime` every `period`) are scheduled EDF among themselves above
//! every fixed priority, as Linux does: the reservations of a CPU must pass the processor-demand
//! test (Baruah), and a task served by a reservation finishes by the server deadline of the
//! reservation period in which its work is done. Pure functions: no syscalls.
//!
//! The task-set file format (`rtlab check --tasks`) is parsed in `task_set.rs`, apart from the
//! analysis: it reads untrusted input, so it has its own fixtures and fuzz target.

mod task_set;

pub use task_set::{parse_task_set, TaskSetError};

use crate::classes::Rate;
use crate::forecast::TailModel;
use rtlab_core::{LatencyHistogram, Nanos};
use serde::Serialize;

/// How a task is scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheduling {
    /// `SCHED_FIFO` at this priority (1-99, higher runs first).
    FixedPriority(i32),
    /// A CPU reservation (`SCHED_DEADLINE` / CBS): `runtime` every `period`, due by `deadline`.
    Reservation {
        runtime: Nanos,
        period: Nanos,
        deadline: Nanos,
    },
}

/// One periodic task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Task {
    pub name: String,
    pub period: Nanos,
    /// Worst-case compute time per activation.
    pub compute: Nanos,
    /// Relative deadline (≤ period).
    pub deadline: Nanos,
    pub scheduling: Scheduling,
    pub cpu: u32,
    /// Line of the task in its file (0 when built in code).
    #[serde(skip)]
    pub line: usize,
}

/// The OS latency a task must budget for at the permitted miss rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PseudoWorstCase {
    pub latency: Nanos,
    /// Permitted probability that one activation starts later than `latency`.
    pub per_activation: f64,
    /// Where the figure came from.
    pub basis: PseudoBasis,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PseudoBasis {
    /// No run given: latency taken as zero (classic analysis).
    None,
    /// A quantile of the measured distribution.
    Observed,
    /// From the tail projection, beyond the observed data.
    TailProjection,
    /// The miss rate is finer than the run resolves: the observed maximum, which may understate.
    ObservedMaximum,
}

/// 002's pseudo worst case for a task of `period` at `miss_rate`: the latency exceeded by at most a
/// fraction `miss_rate · period` of activations.
pub fn pseudo_worst_case(
    histogram: &LatencyHistogram,
    tail: Option<&dyn TailModel>,
    period: Nanos,
    miss_rate: Rate,
) -> PseudoWorstCase {
    let per_activation = (miss_rate.per_second() * period.as_secs_f64()).min(1.0);
    let samples = histogram.count();
    if samples == 0 {
        return PseudoWorstCase {
            latency: Nanos::ZERO,
            per_activation,
            basis: PseudoBasis::None,
        };
    }
    if per_activation * samples as f64 >= 1.0 {
        return PseudoWorstCase {
            latency: Nanos(histogram.value_at_quantile(1.0 - per_activation)),
            per_activation,
            basis: PseudoBasis::Observed,
        };
    }
    if let Some(tail) = tail {
        if let Some(latency) = invert_tail(tail, histogram.max(), per_activation) {
            return PseudoWorstCase {
                latency,
                per_activation,
                basis: PseudoBasis::TailProjection,
            };
        }
    }
    PseudoWorstCase {
        latency: Nanos(histogram.max()),
        per_activation,
        basis: PseudoBasis::ObservedMaximum,
    }
}

/// The least latency above `from_ns` whose projected exceedance is at most `probability` (bisection
/// to 1 µs; the exceedance falls with the latency).
fn invert_tail(tail: &dyn TailModel, from_ns: u64, probability: f64) -> Option<Nanos> {
    let limit = rtlab_core::histogram::HIGHEST_TRACKABLE_NS;
    let exceeds = |latency: u64| tail.exceedance(latency).map(|value| value.probability);
    if exceeds(limit)? > probability {
        return None;
    }
    let (mut low, mut high) = (from_ns, limit);
    while high - low > 1_000 {
        let middle = low + (high - low) / 2;
        match exceeds(middle) {
            Some(value) if value <= probability => high = middle,
            _ => low = middle,
        }
    }
    Some(Nanos(high))
}

/// The verdict for one task.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskResult {
    pub name: String,
    pub cpu: u32,
    pub method: &'static str,
    /// Worst-case response time from release (including the OS latency); `None` when it exceeds
    /// the deadline before the analysis converges.
    pub response_ns: Option<u64>,
    /// Deadline − response (negative when late); `None` with `response_ns`.
    pub slack_ns: Option<i64>,
    pub schedulable: bool,
    pub os_latency: PseudoWorstCase,
    /// Why it is not schedulable, or what limits the verdict.
    pub note: Option<String>,
}

/// Options of the analysis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnalysisOptions {
    /// Largest total reservation utilisation a CPU admits (Linux: 950000/1000000 µs by default).
    pub reservation_bound: f64,
}

impl Default for AnalysisOptions {
    fn default() -> Self {
        AnalysisOptions {
            reservation_bound: 0.95,
        }
    }
}

/// Something that takes the CPU from a task periodically, ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interferer {
    pub period: u64,
    pub compute: u64,
    /// Release jitter: how late in its period it may start.
    pub jitter: u64,
}

/// A constant-bandwidth server: `runtime` every `period`, by a relative `deadline`, ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Server {
    pub runtime: u64,
    pub period: u64,
    pub deadline: u64,
}

/// Analyses every task. `latency_of` gives each task's OS latency (its pseudo worst case).
pub fn analyse(
    tasks: &[Task],
    options: AnalysisOptions,
    latency_of: &dyn Fn(&Task) -> PseudoWorstCase,
) -> Vec<TaskResult> {
    let mut results = Vec::with_capacity(tasks.len());
    let latencies: Vec<PseudoWorstCase> = tasks.iter().map(latency_of).collect();
    for (index, task) in tasks.iter().enumerate() {
        let os_latency = latencies[index];
        let jitter = os_latency.latency.0;
        let same_cpu = || {
            tasks
                .iter()
                .enumerate()
                .filter(move |(other, candidate)| *other != index && candidate.cpu == task.cpu)
        };
        let result = match task.scheduling {
            Scheduling::Reservation {
                runtime,
                period,
                deadline,
            } => {
                let reservations: Vec<Server> = tasks
                    .iter()
                    .filter(|candidate| candidate.cpu == task.cpu)
                    .filter_map(|candidate| match candidate.scheduling {
                        Scheduling::Reservation {
                            runtime,
                            period,
                            deadline,
                        } => Some(Server {
                            runtime: runtime.0,
                            period: period.0,
                            deadline: deadline.0,
                        }),
                        Scheduling::FixedPriority(_) => None,
                    })
                    .collect();
                match edf_demand_test(&reservations, options.reservation_bound) {
                    Err(reason) => TaskResult {
                        name: task.name.clone(),
                        cpu: task.cpu,
                        method: "EDF/CBS demand",
                        response_ns: None,
                        slack_ns: None,
                        schedulable: false,
                        os_latency,
                        note: Some(reason),
                    },
                    Ok(()) => {
                        // The work C needs ⌈C/Q⌉ server periods; it is done by the server deadline
                        // of the last one.
                        let periods_needed = task.compute.0.div_ceil(runtime.0);
                        let response = jitter
                            .saturating_add((periods_needed - 1).saturating_mul(period.0))
                            .saturating_add(deadline.0);
                        let slack = slack_ns(task.deadline.0, response);
                        let mut note = None;
                        if period > task.period {
                            note = Some(format!(
                                "reservation period {period} is longer than the task period {}",
                                task.period
                            ));
                        }
                        TaskResult {
                            name: task.name.clone(),
                            cpu: task.cpu,
                            method: "EDF/CBS demand",
                            response_ns: Some(response),
                            slack_ns: Some(slack),
                            schedulable: slack >= 0 && note.is_none(),
                            os_latency,
                            note,
                        }
                    }
                }
            }
            Scheduling::FixedPriority(priority) => {
                let interferers: Vec<Interferer> = same_cpu()
                    .filter_map(|(other, candidate)| match candidate.scheduling {
                        Scheduling::FixedPriority(other_priority) if other_priority >= priority => {
                            Some(Interferer {
                                period: candidate.period.0,
                                compute: candidate.compute.0,
                                jitter: latencies[other].latency.0,
                            })
                        }
                        Scheduling::FixedPriority(_) => None,
                        // SCHED_DEADLINE runs above every SCHED_FIFO priority; a CBS may deliver
                        // its budget late in one period and early in the next: jitter P − Q.
                        Scheduling::Reservation {
                            runtime, period, ..
                        } => Some(Interferer {
                            period: period.0,
                            compute: runtime.0,
                            jitter: period.0 - runtime.0,
                        }),
                    })
                    .collect();
                let response = response_time(task.compute.0, jitter, task.deadline.0, &interferers);
                let slack = response.map(|value| slack_ns(task.deadline.0, value));
                let note = match response {
                    Some(_) => None,
                    None if jitter >= task.deadline.0 => Some(format!(
                        "the OS latency alone ({}) exceeds the deadline {}",
                        Nanos(jitter),
                        task.deadline
                    )),
                    None if jitter > 0 => Some(format!(
                        "response time exceeds the deadline {}: OS latency {} plus higher-priority work on CPU {}",
                        task.deadline,
                        Nanos(jitter),
                        task.cpu
                    )),
                    None => Some(format!(
                        "response time exceeds the deadline {}: higher-priority work on CPU {}",
                        task.deadline, task.cpu
                    )),
                };
                TaskResult {
                    name: task.name.clone(),
                    cpu: task.cpu,
                    method: "fixed-priority response time",
                    response_ns: response,
                    slack_ns: slack,
                    schedulable: response.is_some(),
                    os_latency,
                    note,
                }
            }
        };
        let mut result = result;
        if result.schedulable && os_latency.basis == PseudoBasis::ObservedMaximum {
            result.note = Some(format!(
                "the miss rate is finer than the run resolves: the observed maximum {} stands in for the pseudo worst case, which may understate it",
                os_latency.latency
            ));
        }
        results.push(result);
    }
    results
}

/// Exact worst-case response time with release jitter: `R = J + w`, `w = C + Σ ⌈(w + Jj)/Tj⌉·Cj`.
/// `None` when `R` exceeds `deadline`.
pub fn response_time(
    compute: u64,
    jitter: u64,
    deadline: u64,
    interferers: &[Interferer],
) -> Option<u64> {
    let mut busy = compute;
    loop {
        let mut next = compute;
        for interferer in interferers {
            let Interferer {
                period,
                compute: cost,
                jitter: their_jitter,
            } = *interferer;
            next = next.saturating_add(
                busy.saturating_add(their_jitter)
                    .div_ceil(period)
                    .saturating_mul(cost),
            );
        }
        if jitter.saturating_add(next) > deadline {
            return None;
        }
        if next == busy {
            return Some(jitter + busy);
        }
        busy = next;
    }
}

/// Processor-demand test for EDF over constant-bandwidth servers:
/// `U ≤ bound` and `dbf(L) ≤ L` at every absolute deadline up to Baruah's bound `L*`.
pub fn edf_demand_test(servers: &[Server], bound: f64) -> Result<(), String> {
    let utilisation: f64 = servers
        .iter()
        .map(|server| server.runtime as f64 / server.period as f64)
        .sum();
    if utilisation > bound + 1e-12 {
        return Err(format!(
            "reservations on this CPU need {:.1} % of it; at most {:.1} % can be reserved",
            utilisation * 100.0,
            bound * 100.0
        ));
    }
    if servers
        .iter()
        .all(|server| server.deadline == server.period)
    {
        return Ok(());
    }
    let max_deadline = servers
        .iter()
        .map(|server| server.deadline)
        .max()
        .unwrap_or(0);
    let horizon = if utilisation < 1.0 - 1e-12 {
        let numerator: f64 = servers
            .iter()
            .map(|server| {
                (server.period - server.deadline) as f64
                    * (server.runtime as f64 / server.period as f64)
            })
            .sum();
        (max_deadline as f64).max(numerator / (1.0 - utilisation)) as u64
    } else {
        servers
            .iter()
            // A hyperperiod beyond u64 ns leaves more points than the test takes: it gives up below.
            .fold(1u64, |lcm, server| {
                (lcm / gcd(lcm, server.period)).saturating_mul(server.period)
            })
    };
    let mut points: Vec<u64> = Vec::new();
    for server in servers {
        let mut point = server.deadline;
        while point <= horizon {
            points.push(point);
            if points.len() > 2_000_000 {
                return Err("the demand test needs too many points to decide".to_owned());
            }
            match point.checked_add(server.period) {
                Some(next) => point = next,
                None => break,
            }
        }
    }
    points.sort_unstable();
    points.dedup();
    for length in points {
        let demand: u64 = servers
            .iter()
            .map(|server| {
                if length < server.deadline {
                    0
                } else {
                    ((length - server.deadline) / server.period + 1).saturating_mul(server.runtime)
                }
            })
            .fold(0u64, u64::saturating_add);
        if demand > length {
            return Err(format!(
                "reservations demand {} within {} (processor-demand test fails)",
                Nanos(demand),
                Nanos(length)
            ));
        }
    }
    Ok(())
}

/// `deadline − response` in ns, clamped to what an `i64` holds (durations run to 584 years).
fn slack_ns(deadline: u64, response: u64) -> i64 {
    let slack = i128::from(deadline) - i128::from(response);
    i64::try_from(slack).unwrap_or(if slack < 0 { i64::MIN } else { i64::MAX })
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests;
