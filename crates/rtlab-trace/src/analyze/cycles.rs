//! CPU per cycle of a periodic thread, where CPU per activation counts a thread that fell behind
//! wrongly.
//!
//! A thread woken every period through a counting semaphore or a futex word (JACK's and
//! PipeWire's clients, rt-app's absolute timer) that finishes a cycle after the next one came due
//! (it was held off by the hypervisor or a competitor, or its waker was and then ran two cycles
//! at once) runs that cycle without sleeping: one activation, two cycles' work. The wake-up of a
//! thread still running leaves no event, so the trace shows one activation of twice the CPU, and
//! a reservation sized by its p99 asks two cycles' work every cycle (CI's JACK client under host
//! steal: 1.9 ms of every 2.7 ms for 0.8 ms of work, and two such no longer fitted on a CPU).
//!
//! Every cycle that comes due while the thread sleeps wakes it, and one that comes due while it
//! runs is run before it sleeps again, so an activation runs the cycles due between the end of the
//! one before and its own end. With a period `P` and `L` between the two ends, that is
//! `floor(L / P)` or one more: an activation that ran one cycle ends before the next is due and
//! the one before ended after the previous was due, so `L < 2P` (one); `n` cycles give
//! `L > (n - 1) P`, and about `n P` as a rule. So an activation counts `floor(L / P)` cycles (at
//! least one), erring towards fewer cycles (more CPU each), never splitting a long activation
//! that ran one cycle; nor more than its CPU holds of the usual activation's (the median), so a
//! thread that slept through cycles (its waker skipped some) is not taken to have run them. Its
//! CPU, less the time the hypervisor held the virtual CPU while it ran
//! (when the recording has the thread's CPU time), is shared among them. What it cannot tell
//! apart: a thread that sleeps a fixed time after its work (not to an absolute time) and was held
//! off past its period.

use super::Activation;

/// Most cycles one activation counts for (a thread stopped for seconds says little of any).
const MOST_CYCLES: u64 = 64;

/// The cycles of `period` that `activation` ran, given when the one before it ended and the
/// usual CPU of one activation: no more than its time between the two ends holds, nor than its
/// CPU holds of the usual one ([`cycles_of_work`]).
pub(crate) fn cycles_in(
    activation: &Activation,
    previous_end: Option<u64>,
    period: u64,
    usual_cpu: u64,
) -> u64 {
    let (Some(previous_end), true) = (previous_end, period > 0) else {
        return 1;
    };
    let by_time = activation.end.saturating_sub(previous_end) / period;
    by_time
        .min(cycles_of_work(cpu_less_hypervisor(activation), usual_cpu))
        .clamp(1, MOST_CYCLES)
}

/// How many of the usual activation's CPU `cpu` holds, rounded (at least one): a thread that
/// slept through cycles (a sporadic one, or one whose waker skipped some) and then ran one
/// cycle's work did not run them. Without a usual CPU, no bound.
pub(crate) fn cycles_of_work(cpu: u64, usual_cpu: u64) -> u64 {
    if usual_cpu == 0 {
        return u64::MAX;
    }
    ((cpu as f64 / usual_cpu as f64).round() as u64).max(1)
}

fn cpu_less_hypervisor(activation: &Activation) -> u64 {
    activation.cpu_ns.saturating_sub(activation.vanished_ns)
}

/// The median CPU of `activations` (less the hypervisor's): the usual activation's.
pub(crate) fn usual_cpu(activations: &[Activation]) -> u64 {
    let mut cpu: Vec<u64> = activations.iter().map(cpu_less_hypervisor).collect();
    super::period::percentile(&mut cpu, 50.0)
}

/// The CPU of each of `activation`'s `cycles`: its CPU time less the hypervisor's, shared.
pub(crate) fn cpu_of_each(activation: &Activation, cycles: u64) -> u64 {
    cpu_less_hypervisor(activation) / cycles.max(1)
}

/// CPU per cycle of `activations` (in start order; `previous_end` ends the one before the first,
/// if known), one value per cycle. Without a period, one per activation.
pub(crate) fn per_cycle(
    activations: &[Activation],
    mut previous_end: Option<u64>,
    period: Option<u64>,
) -> Vec<u64> {
    let mut values = Vec::with_capacity(activations.len());
    let usual = usual_cpu(activations);
    for activation in activations {
        let cycles = period.map_or(1, |period| {
            cycles_in(activation, previous_end, period, usual)
        });
        let each = cpu_of_each(activation, cycles);
        values.extend(std::iter::repeat_n(each, cycles as usize));
        previous_end = Some(activation.end);
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 2_666_667;
    const MS: u64 = 1_000_000;

    fn activation(start: u64, end: u64, cpu_ns: u64) -> Activation {
        Activation {
            start,
            end,
            cpu_ns,
            ..Activation::default()
        }
    }

    #[test]
    fn held_past_its_next_cycle_it_counts_the_cycles_it_ran() {
        // The one before ended 0.8 ms after its cycle; this one, woken on time at P, was held
        // off 3 ms, then ran its 0.8 ms and the next cycle's, already due.
        let merged = activation(P, P + 4_600_000, 1_600_000);
        assert_eq!(cycles_in(&merged, Some(800_000), P, 800_000), 2);
        assert_eq!(cpu_of_each(&merged, 2), 800_000);
    }

    #[test]
    fn woken_late_by_a_waker_that_then_runs_the_next_cycle_too() {
        // Its waker was held off 3 ms and ran two cycles back to back: woken 3 ms late, it
        // runs 1.6 ms without sleeping, well under a period of wall time.
        let merged = activation(P + 3 * MS, P + 4_600_000, 1_600_000);
        assert_eq!(cycles_in(&merged, Some(800_000), P, 800_000), 2);
    }

    #[test]
    fn late_but_done_before_the_next_cycle_it_is_one() {
        // Held off 1.5 ms, done 2.3 ms after its cycle's start, before the next.
        let late = activation(P, P + 2_300_000, 800_000);
        assert_eq!(cycles_in(&late, Some(800_000), P, 800_000), 1);
        // Done just before the next cycle came due: still one.
        let latest = activation(P, 2 * P - 1, 2 * MS);
        assert_eq!(cycles_in(&latest, Some(800_000), P, 800_000), 1);
    }

    #[test]
    fn a_long_activation_on_time_is_one_cycle_of_all_its_cpu() {
        // A cycle of twice the usual work, on time: a need, not a merge.
        let heavy = activation(P, P + 1_600_000, 1_600_000);
        assert_eq!(cycles_in(&heavy, Some(800_000), P, 800_000), 1);
        assert_eq!(cpu_of_each(&heavy, 1), 1_600_000);
    }

    #[test]
    fn the_first_activation_and_a_thread_without_a_period_count_one() {
        let first = activation(0, 9 * MS, 9 * MS);
        assert_eq!(cycles_in(&first, None, P, 800_000), 1);
        assert_eq!(cycles_in(&first, Some(0), 0, 800_000), 1);
    }

    #[test]
    fn a_thread_that_slept_through_cycles_did_not_run_them() {
        // Its waker skipped a cycle: woken two periods on, it ran one cycle's work.
        let after_a_skip = activation(3 * P, 3 * P + 800_000, 800_000);
        assert_eq!(cycles_in(&after_a_skip, Some(800_000), P, 800_000), 1);
        assert_eq!(cycles_of_work(1_600_000, 800_000), 2);
        assert_eq!(cycles_of_work(1_000_000, 800_000), 1);
        assert_eq!(cycles_of_work(1_000_000, 0), u64::MAX);
    }

    #[test]
    fn the_hypervisors_time_is_not_the_threads() {
        let mut stolen = activation(P, P + 4_600_000, 4_600_000);
        stolen.vanished_ns = 3_000_000;
        assert_eq!(cpu_of_each(&stolen, 2), 800_000);
    }

    #[test]
    fn per_cycle_shares_merged_activations_and_keeps_the_others() {
        let activations = [
            activation(0, 800_000, 800_000),
            activation(P, P + 4_600_000, 1_600_000),
            activation(3 * P, 3 * P + 800_000, 800_000),
        ];
        assert_eq!(per_cycle(&activations, None, Some(P)), vec![800_000; 4]);
        assert_eq!(
            per_cycle(&activations, None, None),
            vec![800_000, 1_600_000, 800_000]
        );
    }
}
