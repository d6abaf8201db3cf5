//! A small simulator of the kernel's SCHED_DEADLINE (constant-bandwidth server under global EDF)
//! that enforces budgets only at scheduler ticks, as a kernel without HRTICK_DL does.
//!
//! It exists to test [`super::deadline_map`] against something that is not the mapping's own
//! argument: always-runnable (CPU-bound) deadline tasks on `n_cpus` CPUs whose ticks have their
//! own phases; each task's budget is charged while it runs, checked at its CPU's ticks and when it
//! is preempted, throttled until its deadline when exhausted, and replenished there with the
//! kernel's rule (`while runtime <= 0 { deadline += P; runtime += Q }`, then a fresh period if the
//! deadline is still in the past). Lower-priority load (FIFO, CFS) never runs before a deadline
//! task, so it appears only as the CPUs being busy; competing *deadline* load is simply more tasks.
//! Time advances in fixed steps; all parameters are rounded to the step.

use rtlab_core::Nanos;

use super::DeadlineParams;

/// The simulated machine.
#[derive(Clone, Debug)]
pub struct SimMachine {
    pub n_cpus: usize,
    /// Tick period (1/HZ).
    pub tick: Nanos,
    /// Phase of each CPU's ticks: ticks at `phase + k·tick`.
    pub tick_phases: Vec<Nanos>,
    /// Simulation step; every time is rounded down to it.
    pub step: Nanos,
}

/// A CPU-bound deadline task, set to `params` at `release`.
#[derive(Clone, Copy, Debug)]
pub struct SimTask {
    pub params: DeadlineParams,
    pub release: Nanos,
}

#[derive(Clone, Debug)]
struct TaskState {
    runtime: i64,
    deadline: u64,
    throttled: bool,
    started: bool,
    cpu: Option<usize>,
}

/// Runs `tasks` until `horizon`; returns for each task the intervals it ran, in time order.
pub fn simulate(
    machine: &SimMachine,
    tasks: &[SimTask],
    horizon: Nanos,
) -> Vec<Vec<(Nanos, Nanos)>> {
    let step = machine.step.0.max(1);
    let round = |value: u64| value / step * step;
    let tick = round(machine.tick.0).max(step);
    let budget: Vec<(i64, u64)> = tasks
        .iter()
        .map(|task| {
            (
                round(task.params.runtime.0) as i64,
                round(task.params.period.0).max(step),
            )
        })
        .collect();
    let relative_deadline: Vec<u64> = tasks
        .iter()
        .map(|task| round(task.params.deadline.0).max(step))
        .collect();
    let mut states: Vec<TaskState> = tasks
        .iter()
        .map(|_| TaskState {
            runtime: 0,
            deadline: 0,
            throttled: false,
            started: false,
            cpu: None,
        })
        .collect();
    let mut runs: Vec<Vec<(Nanos, Nanos)>> = vec![Vec::new(); tasks.len()];
    let mut cpu_task: Vec<Option<usize>> = vec![None; machine.n_cpus];
    let mut time = 0u64;
    while time < horizon.0 {
        // Releases and replenishments.
        for (index, state) in states.iter_mut().enumerate() {
            let (runtime, period) = budget[index];
            if !state.started {
                if round(tasks[index].release.0) <= time {
                    state.started = true;
                    state.runtime = runtime;
                    state.deadline = time + relative_deadline[index];
                }
                continue;
            }
            if state.throttled && state.deadline <= time {
                while state.runtime <= 0 {
                    state.deadline += period;
                    state.runtime += runtime;
                }
                if state.deadline <= time {
                    state.deadline = time + relative_deadline[index];
                    state.runtime = runtime;
                }
                state.throttled = false;
            }
        }
        // Ticks: the task current on a ticking CPU is checked.
        for (cpu, slot) in cpu_task.iter_mut().enumerate() {
            let phase = round(machine.tick_phases.get(cpu).map_or(0, |phase| phase.0)) % tick;
            if time % tick != phase {
                continue;
            }
            if let Some(index) = *slot {
                if states[index].runtime <= 0 {
                    states[index].throttled = true;
                    states[index].cpu = None;
                    *slot = None;
                }
            }
        }
        // Global EDF: the n_cpus earliest deadlines among runnable tasks run.
        let mut runnable: Vec<usize> = (0..tasks.len())
            .filter(|&index| states[index].started && !states[index].throttled)
            .collect();
        runnable.sort_by_key(|&index| (states[index].deadline, index));
        runnable.truncate(machine.n_cpus);
        for slot in cpu_task.iter_mut() {
            if let Some(index) = *slot {
                if !runnable.contains(&index) {
                    // Preempted: the switch charges and checks the budget.
                    *slot = None;
                    states[index].cpu = None;
                    if states[index].runtime <= 0 {
                        states[index].throttled = true;
                    }
                }
            }
        }
        for &index in &runnable {
            if states[index].throttled || states[index].cpu.is_some() {
                continue;
            }
            if let Some(cpu) = cpu_task.iter().position(Option::is_none) {
                cpu_task[cpu] = Some(index);
                states[index].cpu = Some(cpu);
            }
        }
        // Run one step.
        for &index in cpu_task.iter().flatten() {
            states[index].runtime -= step as i64;
            let intervals = &mut runs[index];
            match intervals.last_mut() {
                Some(last) if last.1 .0 == time => last.1 = Nanos(time + step),
                _ => intervals.push((Nanos(time), Nanos(time + step))),
            }
        }
        time += step;
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enforce::deadline_map::{deadline_params, Granularity};
    use proptest::prelude::*;
    use rtlab_analysis::supply::sliding_window_supply;

    const MS: u64 = 1_000_000;

    fn worst_window(
        runs: &[(Nanos, Nanos)],
        from: u64,
        to: u64,
        amount: u64,
        period: u64,
    ) -> (u64, f64) {
        let report = sliding_window_supply(
            runs,
            Nanos(from),
            Nanos(to),
            Nanos(amount),
            Nanos(period),
            Nanos(50_000),
        )
        .unwrap();
        (report.min_ns, report.share_meeting)
    }

    fn machine(n_cpus: usize, tick: u64, phases: Vec<u64>) -> SimMachine {
        SimMachine {
            n_cpus,
            tick: Nanos(tick),
            tick_phases: phases.into_iter().map(Nanos).collect(),
            step: Nanos(50_000),
        }
    }

    #[test]
    fn a_budget_below_the_tick_leaves_whole_windows_empty() {
        // What was measured on the VM: runtime 2 ms / period 6 ms at a 4 ms tick left some 10 ms
        // windows without any CPU.
        let params = DeadlineParams {
            runtime: Nanos(2 * MS),
            deadline: Nanos(6 * MS),
            period: Nanos(6 * MS),
        };
        let mut worst = u64::MAX;
        for phase in (0..4 * MS).step_by(250_000) {
            let runs = simulate(
                &machine(1, 4 * MS, vec![phase]),
                &[SimTask {
                    params,
                    release: Nanos(0),
                }],
                Nanos(600 * MS),
            );
            worst = worst.min(worst_window(&runs[0], 20 * MS, 600 * MS, 2 * MS, 10 * MS).0);
        }
        assert_eq!(worst, 0);
    }

    #[test]
    fn two_tasks_on_one_cpu_break_the_mapping_which_is_why_admission_counts_cpus() {
        let granularity = Granularity {
            tick: Nanos(4 * MS),
            hrtick_dl: Some(false),
        };
        let params = deadline_params(Nanos(MS), Nanos(20 * MS), granularity).unwrap();
        let mut worst = u64::MAX;
        for phase in (0..4 * MS).step_by(500_000) {
            for offset in (0..20 * MS).step_by(2 * MS as usize) {
                let runs = simulate(
                    &machine(1, 4 * MS, vec![phase]),
                    &[
                        SimTask {
                            params,
                            release: Nanos(0),
                        },
                        SimTask {
                            params,
                            release: Nanos(offset),
                        },
                    ],
                    Nanos(400 * MS),
                );
                worst = worst.min(worst_window(&runs[0], 40 * MS, 400 * MS, MS, 20 * MS).0);
            }
        }
        assert!(worst < MS, "worst window {worst}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Every mapped grant gets its amount in every sliding window of its period, on one or two
        /// CPUs, with one deadline task per CPU, at any tick phase and release offset, while the
        /// CPUs are otherwise fully loaded.
        #[test]
        fn mapped_grants_hold_in_every_window(
            n_cpus in 1usize..=2,
            tick_ms in prop_oneof![Just(1u64), Just(4), Just(10)],
            requests in proptest::collection::vec((1u64..=40, 1u64..=10), 2),
            phases in proptest::collection::vec(0u64..200, 2),
            releases in proptest::collection::vec(0u64..200, 2),
        ) {
            let tick = tick_ms * MS;
            let granularity = Granularity { tick: Nanos(tick), hrtick_dl: Some(false) };
            let mut tasks = Vec::new();
            let mut wanted = Vec::new();
            for (index, &(period_units, amount_units)) in requests.iter().take(n_cpus).enumerate() {
                // Periods 1..=40 ms in 1 ms units, amounts up to half the period in 0.05 ms units.
                let period = period_units * MS;
                let amount = (amount_units * period / 20).max(50_000) / 50_000 * 50_000;
                let Ok(params) = deadline_params(Nanos(amount), Nanos(period), granularity) else {
                    continue;
                };
                tasks.push(SimTask { params, release: Nanos(releases[index] * 50_000) });
                wanted.push((amount, period, releases[index] * 50_000));
            }
            prop_assume!(!tasks.is_empty());
            let phases: Vec<u64> = phases.iter().map(|phase| phase * 50_000 % tick).collect();
            let horizon = 30 * wanted.iter().map(|w| w.1).max().unwrap() + 10 * MS;
            let runs = simulate(&machine(n_cpus, tick, phases), &tasks, Nanos(horizon));
            for (index, &(amount, period, release)) in wanted.iter().enumerate() {
                let (min, _) = worst_window(&runs[index], release, horizon, amount, period);
                prop_assert!(min >= amount, "task {index}: {min} < {amount} of every {period}");
            }
        }
    }
}
