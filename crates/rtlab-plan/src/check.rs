//! An independent checker for plans: it knows nothing of how the planner builds them.
//!
//! It reads only the public outcome — the explicit [`Plan`] (slots per CPU and major cycle), the
//! [`Grant`]s and the admitted constraints — and verifies, by direct computation on the timeline,
//! what the planner promises: slots don't overlap and stay inside their cycle; no CPU is reserved
//! beyond the cap; every reservation receives at least its *requested* amount in every window of its
//! *requested* period, sliding over two major cycles; every admitted constraint's owner gets its
//! estimate between start and deadline from its own slots plus free time it holds, and no held time
//! collides with a slot or with another constraint. The property tests and `rtlab plan` run it.
//!
//! It also offers the brute-force helpers the property tests use to confirm that a denial was honest:
//! [`least_budget`] finds, by binary search over a simulated timeline, the smallest per-period budget
//! that satisfies a request at a given period, without the planner's closed form.

use crate::owner::Owner;
use crate::planner::{ConstraintInfo, CpuSchedule, Grant, Plan};
use rtlab_core::Nanos;
use std::collections::HashMap;

/// One broken promise, described for a human.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Violation(pub String);

/// A repeating pattern of busy intervals within `[0, cycle)`, with prefix sums for "how much busy
/// time lies before `t`" on the unbounded timeline.
#[derive(Clone, Debug)]
pub struct Periodic {
    cycle: u64,
    intervals: Vec<(u64, u64)>,
    prefix: Vec<u128>,
}

impl Periodic {
    /// `intervals` are `(start, end)` inside `[0, cycle)`, sorted and disjoint.
    pub fn new(cycle: u64, intervals: Vec<(u64, u64)>) -> Periodic {
        let mut prefix = Vec::with_capacity(intervals.len() + 1);
        let mut total = 0u128;
        prefix.push(0);
        for (start, end) in &intervals {
            total += u128::from(end - start);
            prefix.push(total);
        }
        Periodic {
            cycle,
            intervals,
            prefix,
        }
    }

    /// The slots of `schedule` as a pattern: all of them, or only `owner`'s when one is given.
    pub fn of_schedule(schedule: &CpuSchedule, owner: Option<&Owner>) -> Periodic {
        let intervals = schedule
            .slots
            .iter()
            .filter(|slot| owner.is_none_or(|owner| &slot.owner == owner))
            .map(|slot| (slot.start.0, slot.start.0 + slot.length.0))
            .collect();
        Periodic::new(schedule.cycle.0, intervals)
    }

    fn per_cycle(&self) -> u128 {
        self.prefix[self.intervals.len()]
    }

    /// Busy time in `[0, t)`.
    pub fn before(&self, t: u128) -> u128 {
        let cycle = u128::from(self.cycle);
        let whole = t / cycle;
        let inside = (t % cycle) as u64;
        let index = self
            .intervals
            .partition_point(|interval| interval.1 <= inside);
        let mut partial = self.prefix[index];
        if let Some(&(start, _)) = self.intervals.get(index) {
            partial += u128::from(inside.saturating_sub(start));
        }
        whole * self.per_cycle() + partial
    }

    /// Busy time in `[from, to)`.
    pub fn between(&self, from: u128, to: u128) -> u128 {
        self.before(to) - self.before(from)
    }

    /// The least busy time over every window `[T, T + window)` with `T` sliding over
    /// `[0, cycles · cycle)`. The minimum over T of a piecewise-linear function is reached where a
    /// window starts at the end of a busy interval or ends at the start of one, so those starts (and
    /// 0) are the ones evaluated.
    pub fn min_window(&self, window: u64, cycles: u64) -> u128 {
        let cycle = u128::from(self.cycle);
        let span = cycle * u128::from(cycles);
        let window = u128::from(window);
        let mut least = self.between(0, window);
        for repeat in 0..u128::from(cycles) {
            for &(start, end) in &self.intervals {
                let end_time = repeat * cycle + u128::from(end);
                if end_time < span {
                    least = least.min(self.between(end_time, end_time + window));
                }
                let start_time = repeat * cycle + u128::from(start);
                // Windows ending at this start: T = start − window, shifted into [0, span).
                let shifted = (start_time + span * (window / span + 1) - window) % span;
                least = least.min(self.between(shifted, shifted + window));
            }
        }
        least
    }
}

fn ppm(cap: f64) -> u128 {
    (cap * 1e6).round() as u128
}

fn check_cpu(schedule: &CpuSchedule, cap: f64, violations: &mut Vec<Violation>) {
    let cpu = schedule.cpu;
    let cycle = schedule.cycle.0;
    if cycle == 0 {
        violations.push(Violation(format!("cpu {cpu}: major cycle is zero")));
        return;
    }
    let mut previous_end = 0u64;
    let mut busy = 0u128;
    for (index, slot) in schedule.slots.iter().enumerate() {
        let (start, length) = (slot.start.0, slot.length.0);
        if length == 0 {
            violations.push(Violation(format!("cpu {cpu}: slot {index} is empty")));
        }
        if start < previous_end {
            violations.push(Violation(format!(
                "cpu {cpu}: slot {index} at {start} overlaps the previous slot ending at {previous_end}"
            )));
        }
        let end = start.saturating_add(length);
        if end > cycle {
            violations.push(Violation(format!(
                "cpu {cpu}: slot {index} ends at {end}, after the cycle of {cycle}"
            )));
        }
        previous_end = previous_end.max(end);
        busy += u128::from(length);
    }
    if busy * 1_000_000 > ppm(cap) * u128::from(cycle) {
        violations.push(Violation(format!(
            "cpu {cpu}: {busy} of every {cycle} ns reserved, above the cap {cap}"
        )));
    }
}

fn check_grant(
    grant: &Grant,
    schedule: &CpuSchedule,
    quantum: Nanos,
    violations: &mut Vec<Violation>,
) {
    let owner = &grant.owner;
    let (requested, granted) = (grant.requested, grant.granted);
    if granted.period > requested.period {
        violations.push(Violation(format!(
            "{owner}: granted period {} is longer than the requested {}",
            granted.period, requested.period
        )));
    }
    let ratio = granted.period.0 / quantum.0.max(1);
    if granted.period.0 % quantum.0.max(1) != 0 || !ratio.is_power_of_two() {
        violations.push(Violation(format!(
            "{owner}: granted period {} is not a power-of-two multiple of the quantum {quantum}",
            granted.period
        )));
    }
    if u128::from(granted.amount.0) * u128::from(requested.period.0)
        < u128::from(requested.amount.0) * u128::from(granted.period.0)
    {
        violations.push(Violation(format!(
            "{owner}: granted fraction {granted} is below the requested {requested}"
        )));
    }
    let pattern = Periodic::of_schedule(schedule, Some(owner));
    let least = pattern.min_window(requested.period.0, 2);
    if least < u128::from(requested.amount.0) {
        violations.push(Violation(format!(
            "{owner}: only {least} ns in some window of {} on cpu {} (requested {})",
            requested.period, grant.cpu, requested.amount
        )));
    }
}

fn check_constraints(
    plan: &Plan,
    grants: &[Grant],
    constraints: &[ConstraintInfo],
    violations: &mut Vec<Violation>,
) {
    let mut held_by_cpu: HashMap<usize, Vec<(u64, u64, u64)>> = HashMap::new();
    for constraint in constraints {
        let id = constraint.id.0;
        let Some(schedule) = plan
            .cpus
            .iter()
            .find(|schedule| schedule.cpu == constraint.cpu)
        else {
            violations.push(Violation(format!(
                "constraint {id}: cpu {} is not in the plan",
                constraint.cpu
            )));
            continue;
        };
        let all_slots = Periodic::of_schedule(schedule, None);
        let (start, deadline) = (constraint.start.0, constraint.deadline.0);
        let mut held_total = 0u128;
        for &(held_start, held_end) in &constraint.held {
            let (held_start, held_end) = (held_start.0, held_end.0);
            if held_start >= held_end || held_start < start || held_end > deadline {
                violations.push(Violation(format!(
                    "constraint {id}: held [{held_start}, {held_end}) is empty or outside [{start}, {deadline})"
                )));
                continue;
            }
            if all_slots.between(u128::from(held_start), u128::from(held_end)) > 0 {
                violations.push(Violation(format!(
                    "constraint {id}: held [{held_start}, {held_end}) overlaps a reserved slot"
                )));
            }
            held_total += u128::from(held_end - held_start);
            held_by_cpu
                .entry(constraint.cpu)
                .or_default()
                .push((held_start, held_end, id));
        }
        let own = grants
            .iter()
            .find(|grant| grant.owner == constraint.owner && grant.cpu == constraint.cpu)
            .map_or(0, |_| {
                Periodic::of_schedule(schedule, Some(&constraint.owner))
                    .between(u128::from(start), u128::from(deadline))
            });
        if own + held_total < u128::from(constraint.estimate.0) {
            violations.push(Violation(format!(
                "constraint {id}: {own} ns reserved plus {held_total} ns held is below the estimate {}",
                constraint.estimate
            )));
        }
    }
    for (cpu, mut held) in held_by_cpu {
        held.sort_unstable();
        for pair in held.windows(2) {
            if pair[1].0 < pair[0].1 {
                violations.push(Violation(format!(
                    "cpu {cpu}: constraints {} and {} hold overlapping time",
                    pair[0].2, pair[1].2
                )));
            }
        }
    }
}

/// Checks every promise of a plan; an empty result means the plan keeps them all.
pub fn check(
    plan: &Plan,
    grants: &[Grant],
    constraints: &[ConstraintInfo],
    quantum: Nanos,
    cap: f64,
) -> Vec<Violation> {
    let mut violations = Vec::new();
    for schedule in &plan.cpus {
        check_cpu(schedule, cap, &mut violations);
        let owners_here: std::collections::HashSet<&Owner> =
            schedule.slots.iter().map(|slot| &slot.owner).collect();
        for owner in owners_here {
            if !grants
                .iter()
                .any(|grant| &grant.owner == owner && grant.cpu == schedule.cpu)
            {
                violations.push(Violation(format!(
                    "cpu {}: slots for {owner}, who has no reservation there",
                    schedule.cpu
                )));
            }
        }
    }
    let mut seen_owners = std::collections::HashSet::new();
    for grant in grants {
        if !seen_owners.insert(&grant.owner) {
            violations.push(Violation(format!(
                "{}: more than one reservation",
                grant.owner
            )));
        }
        match plan.cpus.iter().find(|schedule| schedule.cpu == grant.cpu) {
            Some(schedule) => check_grant(grant, schedule, quantum, &mut violations),
            None => violations.push(Violation(format!(
                "{}: cpu {} is not in the plan",
                grant.owner, grant.cpu
            ))),
        }
    }
    check_constraints(plan, grants, constraints, &mut violations);
    violations
}

/// The smallest budget per `granted_period` that, laid out as one slot per period (the worst layout),
/// gives `amount` in every window of `requested_period` — found by simulation and binary search.
/// `None` when even the whole period would not do.
pub fn least_budget(amount: u64, requested_period: u64, granted_period: u64) -> Option<u64> {
    if granted_period == 0 {
        return None;
    }
    let satisfies = |budget: u64| {
        Periodic::new(granted_period, vec![(0, budget)]).min_window(requested_period, 1)
            >= u128::from(amount)
    };
    if !satisfies(granted_period) {
        return None;
    }
    let (mut low, mut high) = (0u64, granted_period);
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if satisfies(middle) {
            high = middle;
        } else {
            low = middle;
        }
    }
    Some(high)
}

/// Every power-of-two multiple of `quantum` not longer than `period`.
pub fn power_of_two_periods(quantum: u64, period: u64) -> Vec<u64> {
    let mut periods = Vec::new();
    let mut candidate = quantum;
    while candidate > 0 && candidate <= period {
        periods.push(candidate);
        candidate = match candidate.checked_mul(2) {
            Some(next) => next,
            None => break,
        };
    }
    periods
}

/// Whether `cpu` could take one more slot pattern of `budget` every `period` under `cap`, given
/// the slots it already has (a harmonic set of power-of-two periods fits whenever its utilisation
/// does).
pub fn room_for(schedule: &CpuSchedule, budget: u64, period: u64, cap: f64) -> bool {
    let busy: u128 = schedule
        .slots
        .iter()
        .map(|slot| u128::from(slot.length.0))
        .sum();
    let cycle = u128::from(schedule.cycle.0);
    let period = u128::from(period);
    (busy * period + u128::from(budget) * cycle) * 1_000_000 <= ppm(cap) * cycle * period
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::Slot;

    #[test]
    fn min_window_finds_the_window_after_the_slot() {
        // One slot of 2 every 8, window 12: worst window starts at 2 and covers [2, 14): 2 ns.
        let pattern = Periodic::new(8, vec![(0, 2)]);
        assert_eq!(pattern.min_window(12, 2), 2);
        assert_eq!(pattern.min_window(8, 2), 2);
    }

    #[test]
    fn least_budget_agrees_with_hand_computation() {
        assert_eq!(least_budget(3, 12, 8), Some(3));
        assert_eq!(least_budget(7, 12, 8), Some(6));
        assert_eq!(least_budget(12, 12, 8), Some(8));
        assert_eq!(least_budget(1, 4, 8), Some(5));
    }

    fn grant_for(owner: &Owner, requested: (u64, u64), granted: (u64, u64)) -> Grant {
        Grant {
            id: crate::GrantId(1),
            owner: owner.clone(),
            cpu: 0,
            requested: crate::Rate {
                amount: Nanos(requested.0),
                period: Nanos(requested.1),
            },
            granted: crate::Rate {
                amount: Nanos(granted.0),
                period: Nanos(granted.1),
            },
            path: crate::AdmissionPath::Incremental,
        }
    }

    fn texts(violations: &[Violation]) -> Vec<String> {
        violations.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn flags_overlaps_and_the_cap() {
        let owner = Owner::Activity("a".into());
        let schedule = CpuSchedule {
            cpu: 0,
            cycle: Nanos(10),
            slots: vec![
                Slot {
                    start: Nanos(0),
                    length: Nanos(5),
                    owner: owner.clone(),
                },
                Slot {
                    start: Nanos(4),
                    length: Nanos(5),
                    owner: owner.clone(),
                },
            ],
        };
        let plan = Plan {
            cpus: vec![schedule],
        };
        let text = texts(&check(
            &plan,
            &[grant_for(&owner, (5, 10), (10, 10))],
            &[],
            Nanos(10),
            0.9,
        ));
        assert!(
            text.iter().any(|line| line.contains("overlaps")),
            "{text:?}"
        );
        assert!(
            text.iter().any(|line| line.contains("above the cap")),
            "{text:?}"
        );
    }

    #[test]
    fn flags_the_aligned_window_pitfall() {
        // 3 of every 12 rounded to 2 of every 8 keeps the fraction but leaves [2, 14) with only 2.
        let owner = Owner::Activity("a".into());
        let schedule = CpuSchedule {
            cpu: 0,
            cycle: Nanos(8),
            slots: vec![Slot {
                start: Nanos(0),
                length: Nanos(2),
                owner: owner.clone(),
            }],
        };
        let plan = Plan {
            cpus: vec![schedule],
        };
        let text = texts(&check(
            &plan,
            &[grant_for(&owner, (3, 12), (2, 8))],
            &[],
            Nanos(1),
            0.9,
        ));
        assert_eq!(text.len(), 1, "{text:?}");
        assert!(text[0].contains("only 2 ns in some window"), "{text:?}");
    }
}
