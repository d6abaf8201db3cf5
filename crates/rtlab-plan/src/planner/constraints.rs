//! Time Constraints: "`estimate` of work between `start` and `deadline`", guaranteed at once from
//! the owner's own reserved time plus free time of its CPU, which the constraint then holds.
//!
//! Free time is found through a per-CPU index of the free intervals of one major cycle, built
//! lazily and dropped whenever that CPU's plan changes; after a reservation changes the plan,
//! every constraint on that CPU is allocated again (oldest first).

use super::Planner;
use super::MAX_CONSTRAINT_PIECES;
use super::{ConstraintId, ConstraintInfo, ConstraintRecord, Infeasible, PlannerError, TimeTaken};
use crate::owner::Owner;
use rtlab_core::Nanos;

/// Free intervals of one major cycle, for constraint feasibility.
#[derive(Clone, Debug)]
pub(super) struct FreeIndex {
    cycle: u64,
    intervals: Vec<(u64, u64)>,
    free_per_cycle: u64,
}

impl Planner {
    /// Reserved time of `owner` on `cpu` in `[from, to)`.
    fn own_time(&self, owner: &Owner, cpu: usize, from: u64, to: u64) -> u64 {
        let Some(record) = self
            .owners
            .get(owner)
            .and_then(|grant| self.grants.get(grant))
        else {
            return 0;
        };
        if record.grant.cpu != cpu || to <= from {
            return 0;
        }
        let Some(tree) = &self.cpus[cpu].tree else {
            return 0;
        };
        let period = record.rounding.period;
        let pattern: Vec<(u64, u64)> = record
            .pieces
            .iter()
            .map(|piece| tree.piece_in_period(*piece))
            .collect();
        let served_before = |time: u64| -> u128 {
            let whole = u128::from(time / period) * u128::from(record.rounding.amount);
            let inside = time % period;
            let partial: u64 = pattern
                .iter()
                .map(|&(offset, length)| inside.saturating_sub(offset).min(length))
                .sum();
            whole + u128::from(partial)
        };
        u64::try_from(served_before(to) - served_before(from)).unwrap_or(u64::MAX)
    }

    fn ensure_free_index(&mut self, cpu: usize) {
        if self.cpus[cpu].free_index.is_some() {
            return;
        }
        let index = match &self.cpus[cpu].tree {
            None => FreeIndex {
                cycle: self.quantum,
                intervals: vec![(0, self.quantum)],
                free_per_cycle: self.quantum,
            },
            Some(tree) => {
                let cycle = tree.cycle();
                let mut intervals = Vec::new();
                let mut cursor = 0u64;
                for (start, length, _) in tree.slots() {
                    if start > cursor {
                        intervals.push((cursor, start));
                    }
                    cursor = start + length;
                }
                if cursor < cycle {
                    intervals.push((cursor, cycle));
                }
                let free_per_cycle = intervals.iter().map(|(start, end)| end - start).sum();
                FreeIndex {
                    cycle,
                    intervals,
                    free_per_cycle,
                }
            }
        };
        self.cpus[cpu].free_index = Some(index);
    }

    /// Finds free time on `cpu` in `[start, deadline)` for `need`, earliest first, skipping time other
    /// constraints hold. Returns the intervals and how much they add up to (less than `need` when
    /// there is not enough).
    fn collect_free(
        &self,
        cpu: usize,
        start: u64,
        deadline: u64,
        need: u64,
    ) -> Result<(Vec<(u64, u64)>, u64), Infeasible> {
        let state = &self.cpus[cpu];
        let mut taken = Vec::new();
        let mut collected = 0u64;
        let Some(free) = &state.free_index else {
            return Ok((taken, collected));
        };
        if free.free_per_cycle == 0 {
            return Ok((taken, collected));
        }
        // Quick refusal: the whole window's free time, ignoring other constraints, is an upper bound.
        let cycles_spanned = u128::from((deadline - start) / free.cycle + 2);
        if cycles_spanned * u128::from(free.free_per_cycle) < u128::from(need) {
            return Ok((taken, collected));
        }
        let mut time = start;
        while time < deadline && collected < need {
            let cycle_start = time - time % free.cycle;
            let inside = time % free.cycle;
            let index = free
                .intervals
                .partition_point(|interval| interval.1 <= inside);
            let Some(&(free_start, free_end)) = free.intervals.get(index) else {
                time = cycle_start.saturating_add(free.cycle);
                continue;
            };
            let piece_start = cycle_start + free_start.max(inside);
            let piece_end = cycle_start.saturating_add(free_end).min(deadline);
            time = cycle_start.saturating_add(free_end);
            if piece_start >= piece_end {
                continue;
            }
            let mut cursor = piece_start;
            let before = state
                .held
                .range(..piece_start)
                .next_back()
                .filter(|(_, (end, _))| *end > piece_start)
                .map(|(&held_start, &value)| (held_start, value));
            let within = state
                .held
                .range(piece_start..piece_end)
                .map(|(&held_start, &value)| (held_start, value));
            for (held_start, (held_end, _)) in before.into_iter().chain(within) {
                if held_start > cursor && collected < need {
                    let take_end = held_start.min(piece_end).min(cursor + (need - collected));
                    taken.push((cursor, take_end));
                    collected += take_end - cursor;
                }
                cursor = cursor.max(held_end);
                if cursor >= piece_end {
                    break;
                }
            }
            if cursor < piece_end && collected < need {
                let take_end = piece_end.min(cursor + (need - collected));
                taken.push((cursor, take_end));
                collected += take_end - cursor;
            }
            if taken.len() + state.held.len() > MAX_CONSTRAINT_PIECES {
                return Err(Infeasible::TooFragmented);
            }
        }
        Ok((taken, collected))
    }

    /// Decides whether `owner` can be given `estimate` on `cpu` in `[start, deadline)` and, if so,
    /// which free time it holds.
    fn allocate(
        &mut self,
        cpu: usize,
        owner: &Owner,
        start: u64,
        estimate: u64,
        deadline: u64,
    ) -> Result<Vec<(u64, u64)>, Infeasible> {
        let own = self.own_time(owner, cpu, start, deadline);
        let need = estimate.saturating_sub(own);
        if need == 0 {
            return Ok(Vec::new());
        }
        self.ensure_free_index(cpu);
        let (taken, collected) = self.collect_free(cpu, start, deadline, need)?;
        if collected < need {
            return Err(Infeasible::NotEnoughTime {
                cpu,
                available: Nanos(own.saturating_add(collected)),
                estimate: Nanos(estimate),
            });
        }
        Ok(taken)
    }

    fn hold(&mut self, cpu: usize, id: ConstraintId, held: &[(u64, u64)]) {
        for &(start, end) in held {
            self.cpus[cpu].held.insert(start, (end, id));
        }
    }

    fn unhold(&mut self, cpu: usize, held: &[(u64, u64)]) {
        for (start, _) in held {
            self.cpus[cpu].held.remove(start);
        }
    }

    /// Asks for `estimate` of CPU time for `owner` between `start` and `deadline`. Either the time is
    /// guaranteed now, from the owner's reservation plus free time that the constraint then holds, or
    /// the caller is told at once that it is not.
    pub fn begin_constraint(
        &mut self,
        owner: Owner,
        start: Nanos,
        estimate: Nanos,
        deadline: Nanos,
    ) -> Result<ConstraintId, Infeasible> {
        if estimate.0 == 0 || deadline <= start || estimate.0 > deadline.0 - start.0 {
            return Err(Infeasible::InvalidWindow {
                start,
                estimate,
                deadline,
            });
        }
        if self.active_by_owner.contains_key(&owner) {
            return Err(Infeasible::AlreadyActive(owner));
        }
        let cpu = match self
            .owners
            .get(&owner)
            .and_then(|grant| self.grants.get(grant))
        {
            Some(record) => record.grant.cpu,
            None => self.by_load.first().map_or(0, |&(_, cpu)| cpu),
        };
        let held = self.allocate(cpu, &owner, start.0, estimate.0, deadline.0)?;
        let id = ConstraintId(self.next_constraint);
        self.next_constraint += 1;
        self.hold(cpu, id, &held);
        self.cpus[cpu].constraints.insert(id);
        self.active_by_owner.insert(owner.clone(), id);
        self.constraints.insert(
            id,
            ConstraintRecord {
                owner,
                cpu,
                start: start.0,
                estimate: estimate.0,
                deadline: deadline.0,
                held,
            },
        );
        Ok(id)
    }

    /// Ends a constraint at `now` and gives back the free time it still held.
    pub fn end_constraint(
        &mut self,
        id: ConstraintId,
        now: Nanos,
    ) -> Result<TimeTaken, PlannerError> {
        let record = self
            .constraints
            .remove(&id)
            .ok_or(PlannerError::UnknownConstraint(id.0))?;
        self.unhold(record.cpu, &record.held);
        self.cpus[record.cpu].constraints.remove(&id);
        self.active_by_owner.remove(&record.owner);
        let until = now.0.min(record.deadline).max(record.start);
        let held_before: u64 = record
            .held
            .iter()
            .map(|&(start, end)| end.min(until).saturating_sub(start))
            .sum();
        let scheduled = self
            .own_time(&record.owner, record.cpu, record.start, until)
            .saturating_add(held_before);
        Ok(TimeTaken {
            elapsed: Nanos(now.0.saturating_sub(record.start)),
            scheduled: Nanos(scheduled),
            met_deadline: now.0 <= record.deadline,
        })
    }

    /// Ends constraint `id` at `now` and, in the same step, asks for the owner's next one; the time
    /// the first one gives back is available to the second.
    pub fn end_and_begin(
        &mut self,
        id: ConstraintId,
        now: Nanos,
        start: Nanos,
        estimate: Nanos,
        deadline: Nanos,
    ) -> Result<(TimeTaken, Result<ConstraintId, Infeasible>), PlannerError> {
        let owner = self
            .constraints
            .get(&id)
            .map(|record| record.owner.clone())
            .ok_or(PlannerError::UnknownConstraint(id.0))?;
        let taken = self.end_constraint(id, now)?;
        Ok((
            taken,
            self.begin_constraint(owner, start, estimate, deadline),
        ))
    }

    /// Every admitted constraint with the free time it holds, by id.
    pub fn constraints(&self) -> Vec<ConstraintInfo> {
        self.constraints
            .iter()
            .map(|(id, record)| ConstraintInfo {
                id: *id,
                owner: record.owner.clone(),
                cpu: record.cpu,
                start: Nanos(record.start),
                estimate: Nanos(record.estimate),
                deadline: Nanos(record.deadline),
                held: record
                    .held
                    .iter()
                    .map(|&(start, end)| (Nanos(start), Nanos(end)))
                    .collect(),
            })
            .collect()
    }

    /// After `cpu`'s plan changed, finds free time again for every constraint on it, oldest first.
    /// Returns the first constraint that no longer fits (the caller then restores the snapshot).
    pub(super) fn reallocate_constraints(&mut self, cpu: usize) -> Result<(), ConstraintId> {
        self.cpus[cpu].held.clear();
        self.cpus[cpu].free_index = None;
        let ids: Vec<ConstraintId> = self.cpus[cpu].constraints.iter().copied().collect();
        for id in ids {
            let Some(record) = self.constraints.get(&id) else {
                continue;
            };
            let (owner, start, estimate, deadline) = (
                record.owner.clone(),
                record.start,
                record.estimate,
                record.deadline,
            );
            let held = self
                .allocate(cpu, &owner, start, estimate, deadline)
                .map_err(|_| id)?;
            self.hold(cpu, id, &held);
            if let Some(record) = self.constraints.get_mut(&id) {
                record.held = held;
            }
        }
        Ok(())
    }
}
