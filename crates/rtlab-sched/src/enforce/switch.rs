//! Switching the dispatcher from one plan to the next without breaking a reservation.
//!
//! Each plan gives every reservation its amount in every sliding window *because its layout repeats*;
//! a window that straddles the switch sees the old layout's tail and the new layout's head, which
//! may be further apart (old slot early in its period, new slot late in the next). The switch is
//! made at a common boundary of both major cycles, and before it is installed every reservation
//! that lives in both plans is checked exactly across it; a re-plan that would break one is refused.

use rtlab_core::Nanos;

use rtlab_plan::{CpuSchedule, Grant, Owner};

/// The intervals `owner` holds in `schedule`, repeated over `[from, to)` of the plan's timeline.
pub fn owner_intervals(
    schedule: &CpuSchedule,
    owner: &Owner,
    from: u64,
    to: u64,
) -> Vec<(u64, u64)> {
    let cycle = schedule.cycle.0.max(1);
    let mut intervals = Vec::new();
    let mut base = from - from % cycle;
    while base < to {
        for slot in schedule.slots.iter().filter(|slot| &slot.owner == owner) {
            let start = (base + slot.start.0).max(from);
            let end = (base + slot.start.0 + slot.length.0).min(to);
            if start < end {
                match intervals.last_mut() {
                    Some((_, last_end)) if *last_end == start => *last_end = end,
                    _ => intervals.push((start, end)),
                }
            }
        }
        base += cycle;
    }
    intervals
}

/// The least supply any window of length `window` inside `[from, to)` receives from sorted
/// disjoint `intervals` (exact: the minimum is at a window that starts where an interval ends or
/// ends where one starts, or at the range's edges).
pub fn least_window_supply(intervals: &[(u64, u64)], from: u64, to: u64, window: u64) -> u64 {
    if to < from + window {
        return u64::MAX;
    }
    let supply_before = |t: u64| -> u64 {
        intervals
            .iter()
            .map(|&(start, end)| end.min(t).saturating_sub(start))
            .sum()
    };
    let mut starts = vec![from, to - window];
    for &(start, end) in intervals {
        starts.push(end);
        if start >= window {
            starts.push(start - window);
        }
    }
    starts
        .into_iter()
        .filter(|&start| start >= from && start + window <= to)
        .map(|start| supply_before(start + window) - supply_before(start))
        .min()
        .unwrap_or(u64::MAX)
}

/// The first time at or after `earliest` that is a multiple of both cycles (both are powers of two
/// times the quantum, so the longer one).
pub fn switch_time(earliest: u64, old_cycle: Nanos, new_cycle: Nanos) -> u64 {
    let cycle = old_cycle.0.max(new_cycle.0).max(1);
    earliest.div_ceil(cycle) * cycle
}

/// Checks every grant on `old`'s CPU that `new` also serves: switching at `at` (plan time, a
/// common boundary) must leave at least its requested amount in every window of its requested
/// period. Returns the first grant that would not get it, with the least supply.
pub fn check_switch(
    old: &CpuSchedule,
    new: &CpuSchedule,
    at: u64,
    grants: &[Grant],
) -> Result<(), (Grant, Nanos)> {
    for grant in grants.iter().filter(|grant| grant.cpu == old.cpu) {
        let window = grant.requested.period.0;
        let in_old = old.slots.iter().any(|slot| slot.owner == grant.owner);
        let in_new = new.slots.iter().any(|slot| slot.owner == grant.owner);
        if !in_old || !in_new {
            continue;
        }
        let from = at.saturating_sub(2 * window);
        let mut intervals = owner_intervals(old, &grant.owner, from, at);
        for interval in owner_intervals(new, &grant.owner, at, at + 2 * window) {
            match intervals.last_mut() {
                Some((_, last_end)) if *last_end == interval.0 => *last_end = interval.1,
                _ => intervals.push(interval),
            }
        }
        let least = least_window_supply(&intervals, from, at + 2 * window, window);
        if least < grant.requested.amount.0 {
            return Err((grant.clone(), Nanos(least)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_plan::{AdmissionPath, GrantId, Rate, Slot};

    fn schedule(cycle: u64, slots: &[(u64, u64, &str)]) -> CpuSchedule {
        CpuSchedule {
            cpu: 0,
            cycle: Nanos(cycle),
            slots: slots
                .iter()
                .map(|&(start, length, owner)| Slot {
                    start: Nanos(start),
                    length: Nanos(length),
                    owner: Owner::Activity(owner.into()),
                })
                .collect(),
        }
    }

    fn grant(owner: &str, amount: u64, period: u64) -> Grant {
        let rate = Rate {
            amount: Nanos(amount),
            period: Nanos(period),
        };
        Grant {
            id: GrantId(1),
            owner: Owner::Activity(owner.into()),
            cpu: 0,
            requested: rate,
            granted: rate,
            path: AdmissionPath::Rebuild,
        }
    }

    #[test]
    fn least_window_is_exact() {
        // 2 of every 10 at offset 0: every window of 10 holds 2.
        let intervals: Vec<(u64, u64)> = (0..5).map(|k| (k * 10, k * 10 + 2)).collect();
        assert_eq!(least_window_supply(&intervals, 0, 50, 10), 2);
        // Remove one: a window of 10 inside the gap gets nothing.
        let gap = [(0, 2), (20, 22)];
        assert_eq!(least_window_supply(&gap, 0, 30, 10), 0);
    }

    #[test]
    fn moving_a_slot_later_breaks_the_window_across_the_switch() {
        let old = schedule(10, &[(0, 2, "a")]);
        let late = schedule(10, &[(8, 2, "a")]);
        let one_later = schedule(10, &[(1, 2, "a")]);
        let grants = [grant("a", 2, 10)];
        // Old slot at [0,2), new at [8,10) of the next cycle: the window [2, 12) … [8, 18) gets 0.
        let (_, least) = check_switch(&old, &late, 100, &grants).unwrap_err();
        assert_eq!(least, Nanos(0));
        // Even one unit later breaks a grant that has no slack: [92, 102) holds only [101, 102).
        let (_, least) = check_switch(&old, &one_later, 100, &grants).unwrap_err();
        assert_eq!(least, Nanos(1));
        // With slack (2 granted, 1 asked) it holds; moving earlier always holds.
        assert!(check_switch(&old, &one_later, 100, &[grant("a", 1, 10)]).is_ok());
        assert!(check_switch(&late, &old, 100, &grants).is_ok());
    }

    #[test]
    fn switch_is_at_a_common_boundary() {
        assert_eq!(switch_time(17, Nanos(8), Nanos(16)), 32);
        assert_eq!(switch_time(32, Nanos(8), Nanos(4)), 32);
    }

    #[test]
    fn owner_intervals_repeat_and_clip() {
        let plan = schedule(10, &[(0, 2, "a"), (2, 3, "b"), (8, 2, "a")]);
        assert_eq!(
            owner_intervals(&plan, &Owner::Activity("a".into()), 5, 25),
            vec![(8, 12), (18, 22)]
        );
    }
}
