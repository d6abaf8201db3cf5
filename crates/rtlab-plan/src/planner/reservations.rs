//! Reservations: admission ("X of every Y" granted or denied at once), placement in a CPU's plan
//! (incrementally, or by rebuilding that CPU's plan), and release.
//!
//! An admission on a CPU that holds Time Constraints takes a snapshot first and restores it when
//! the new plan would take time a constraint holds, so a denied request leaves no trace.

use super::{
    AdmissionPath, ConstraintId, Denied, Grant, GrantId, PlannerError, Rate, ResizeError, MAX_SPAN,
};
use super::{CpuState, GrantRecord, Planner};
use crate::owner::Owner;
use crate::rounding::{self, Rounding};
use crate::tree::{CpuTree, PieceRef};
use rtlab_core::Nanos;

impl Planner {
    /// Asks for `amount` of CPU time in every window of length `period` for `owner`.
    pub fn reserve(&mut self, owner: Owner, amount: Nanos, period: Nanos) -> Result<Grant, Denied> {
        let id = GrantId(self.next_grant);
        let grant = self.reserve_as(id, owner, amount, period)?;
        self.next_grant += 1;
        Ok(grant)
    }

    /// Changes a held reservation to `amount` of every `period`, keeping its id and owner: the
    /// new rate is admitted as a new request would be, beside every other grant (the old rate's
    /// time counts as free). A refusal leaves the plan exactly as it was, the old rate held.
    pub fn resize(
        &mut self,
        grant: GrantId,
        amount: Nanos,
        period: Nanos,
    ) -> Result<Grant, ResizeError> {
        let owner = self
            .grants
            .get(&grant)
            .ok_or(PlannerError::UnknownGrant(grant.0))?
            .grant
            .owner
            .clone();
        let before = self.clone();
        self.release(grant)?;
        match self.reserve_as(grant, owner, amount, period) {
            Ok(resized) => Ok(resized),
            Err(denied) => {
                *self = before;
                Err(ResizeError::Denied(denied))
            }
        }
    }

    /// Admits and places a reservation under the id given.
    fn reserve_as(
        &mut self,
        id: GrantId,
        owner: Owner,
        amount: Nanos,
        period: Nanos,
    ) -> Result<Grant, Denied> {
        if amount.0 == 0 {
            return Err(Denied::ZeroAmount);
        }
        if amount > period {
            return Err(Denied::AmountExceedsPeriod { amount, period });
        }
        if period.0 < self.quantum {
            return Err(Denied::PeriodBelowQuantum {
                period,
                quantum: Nanos(self.quantum),
            });
        }
        if self.owners.contains_key(&owner) {
            return Err(Denied::AlreadyReserved(owner));
        }
        let &(cpu_load, cpu) = self
            .by_load
            .first()
            .expect("Planner::new refuses zero CPUs");
        let all_candidates = rounding::candidates(self.quantum, amount.0, period.0);
        let candidates: Vec<Rounding> = match &self.cpus[cpu].tree {
            None => all_candidates,
            Some(tree) => {
                let lowest = (tree.base_level + tree.depth).saturating_sub(MAX_SPAN);
                let highest = tree.base_level + MAX_SPAN;
                all_candidates
                    .into_iter()
                    .filter(|candidate| (lowest..=highest).contains(&candidate.level))
                    .collect()
            }
        };
        if candidates.is_empty() {
            return Err(Denied::PeriodSpan {
                cpu,
                span: 1u64 << MAX_SPAN,
            });
        }
        let fits = |rounding: &Rounding| cpu_load + rounding.load() <= self.capacity;
        let chosen = rounding::preferred(&candidates)
            .filter(|preferred| fits(preferred))
            .or_else(|| candidates.iter().copied().find(|candidate| fits(candidate)));
        let Some(chosen) = chosen else {
            let smallest = candidates
                .iter()
                .map(Rounding::load)
                .min()
                .unwrap_or(u128::MAX);
            return Err(Denied::NoCapacity {
                cpu,
                needed_ppm: self.to_ppm(smallest),
                free_ppm: self.to_ppm(self.capacity.saturating_sub(cpu_load)),
            });
        };
        let snapshot = (!self.cpus[cpu].constraints.is_empty()).then(|| self.snapshot_cpu(cpu));
        let Some(placement) = self.place(cpu, id, chosen) else {
            // Unreachable under the cap (a rebuild fits any set of utilisation ≤ 1); refuse rather
            // than corrupt the plan.
            return Err(Denied::NoCapacity {
                cpu,
                needed_ppm: self.to_ppm(chosen.load()),
                free_ppm: self.to_ppm(self.capacity.saturating_sub(cpu_load)),
            });
        };
        for (grant, pieces) in placement.relocated {
            if let Some(record) = self.grants.get_mut(&GrantId(grant)) {
                record.pieces = pieces;
            }
        }
        let grant = Grant {
            id,
            owner: owner.clone(),
            cpu,
            requested: Rate { amount, period },
            granted: Rate {
                amount: Nanos(chosen.amount),
                period: Nanos(chosen.period),
            },
            path: placement.path,
        };
        self.grants.insert(
            id,
            GrantRecord {
                grant: grant.clone(),
                rounding: chosen,
                pieces: placement.pieces,
            },
        );
        self.owners.insert(owner.clone(), id);
        self.cpus[cpu].grants.insert(id);
        self.cpus[cpu].free_index = None;
        self.set_load(cpu, cpu_load + chosen.load());
        if let Some(snapshot) = snapshot {
            if let Err(constraint) = self.reallocate_constraints(cpu) {
                self.grants.remove(&id);
                self.owners.remove(&owner);
                self.restore_cpu(cpu, snapshot);
                return Err(Denied::WouldBreakConstraint(constraint.0, cpu));
            }
        }
        Ok(grant)
    }

    /// Puts a chosen rounding into `cpu`'s plan: incrementally when a node of its period has room,
    /// by rebuilding the CPU's plan otherwise.
    fn place(&mut self, cpu: usize, id: GrantId, chosen: Rounding) -> Option<Placement> {
        let quantum = self.quantum;
        let state = &mut self.cpus[cpu];
        match &mut state.tree {
            None => {
                let mut tree = CpuTree::new(quantum, chosen.level, 0);
                let piece = tree.place_single(0, chosen.amount, id.0)?;
                state.tree = Some(tree);
                return Some(Placement::incremental(vec![piece]));
            }
            Some(tree) if chosen.level >= tree.base_level => {
                let depth = chosen.level - tree.base_level;
                tree.ensure_depth(depth);
                if let Some(piece) = tree.place_single(depth, chosen.amount, id.0) {
                    return Some(Placement::incremental(vec![piece]));
                }
                if let Some(pieces) = tree.place_split(depth, chosen.amount, id.0) {
                    return Some(Placement::incremental(pieces));
                }
            }
            Some(_) => {}
        }
        let mut entries: Vec<(u64, u32, u64)> = self.cpus[cpu]
            .grants
            .iter()
            .filter_map(|grant| self.grants.get(grant))
            .map(|record| {
                (
                    record.grant.id.0,
                    record.rounding.level,
                    record.rounding.amount,
                )
            })
            .collect();
        entries.push((id.0, chosen.level, chosen.amount));
        let base_level = entries.iter().map(|entry| entry.1).min()?;
        let top_level = entries.iter().map(|entry| entry.1).max()?;
        for entry in &mut entries {
            entry.1 -= base_level;
        }
        let (tree, placed) =
            CpuTree::rebuild(quantum, base_level, top_level - base_level, &mut entries)?;
        self.cpus[cpu].tree = Some(tree);
        let mut placement = Placement {
            path: AdmissionPath::Rebuild,
            pieces: Vec::new(),
            relocated: Vec::new(),
        };
        for (grant, pieces) in placed {
            if grant == id.0 {
                placement.pieces = pieces;
            } else {
                placement.relocated.push((grant, pieces));
            }
        }
        Some(placement)
    }

    fn set_load(&mut self, cpu: usize, load: u128) {
        let old = self.cpus[cpu].load;
        self.by_load.remove(&(old, cpu));
        self.by_load.insert((load, cpu));
        self.cpus[cpu].load = load;
    }

    fn snapshot_cpu(&self, cpu: usize) -> CpuSnapshot {
        let state = &self.cpus[cpu];
        CpuSnapshot {
            state: state.clone(),
            pieces: state
                .grants
                .iter()
                .filter_map(|grant| {
                    self.grants
                        .get(grant)
                        .map(|record| (*grant, record.pieces.clone()))
                })
                .collect(),
            held: state
                .constraints
                .iter()
                .filter_map(|id| {
                    self.constraints
                        .get(id)
                        .map(|record| (*id, record.held.clone()))
                })
                .collect(),
        }
    }

    fn restore_cpu(&mut self, cpu: usize, snapshot: CpuSnapshot) {
        let load = snapshot.state.load;
        let current_load = self.cpus[cpu].load;
        self.by_load.remove(&(current_load, cpu));
        self.by_load.insert((load, cpu));
        self.cpus[cpu] = snapshot.state;
        for (grant, pieces) in snapshot.pieces {
            if let Some(record) = self.grants.get_mut(&grant) {
                record.pieces = pieces;
            }
        }
        for (id, held) in snapshot.held {
            if let Some(record) = self.constraints.get_mut(&id) {
                record.held = held;
            }
        }
    }

    /// Gives up a reservation. Never rebuilds: the freed time becomes free time of the plan.
    pub fn release(&mut self, grant: GrantId) -> Result<(), PlannerError> {
        let record = self
            .grants
            .get(&grant)
            .ok_or(PlannerError::UnknownGrant(grant.0))?;
        let owner = record.grant.owner.clone();
        if self.active_by_owner.contains_key(&owner) {
            return Err(PlannerError::ConstraintActive(owner));
        }
        let record = self
            .grants
            .remove(&grant)
            .ok_or(PlannerError::UnknownGrant(grant.0))?;
        self.owners.remove(&owner);
        let cpu = record.grant.cpu;
        let state = &mut self.cpus[cpu];
        state.grants.remove(&grant);
        state.free_index = None;
        // With constraints holding free time on this CPU, slots must not move: leave gaps.
        let shrink = state.constraints.is_empty();
        if state.grants.is_empty() {
            state.tree = None;
        } else if let Some(tree) = &mut state.tree {
            for piece in &record.pieces {
                tree.remove(*piece, shrink);
            }
        }
        let load = state.load.saturating_sub(record.rounding.load());
        self.set_load(cpu, load);
        Ok(())
    }

    /// The grant with this id, if it is still held.
    pub fn grant(&self, grant: GrantId) -> Option<&Grant> {
        self.grants.get(&grant).map(|record| &record.grant)
    }

    /// Every held grant, by id.
    pub fn grants(&self) -> Vec<Grant> {
        let mut grants: Vec<Grant> = self
            .grants
            .values()
            .map(|record| record.grant.clone())
            .collect();
        grants.sort_by_key(|grant| grant.id);
        grants
    }
}

/// Where a new reservation went, and the new pieces of the others after a rebuild.
struct Placement {
    path: AdmissionPath,
    pieces: Vec<PieceRef>,
    relocated: Vec<(u64, Vec<PieceRef>)>,
}

impl Placement {
    fn incremental(pieces: Vec<PieceRef>) -> Placement {
        Placement {
            path: AdmissionPath::Incremental,
            pieces,
            relocated: Vec::new(),
        }
    }
}

/// What is needed to undo a reservation on one CPU.
struct CpuSnapshot {
    state: CpuState,
    pieces: Vec<(GrantId, Vec<PieceRef>)>,
    held: Vec<(ConstraintId, Vec<(u64, u64)>)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planner() -> Planner {
        Planner::new(1, Nanos::from_millis(1), crate::DEFAULT_CAP).unwrap()
    }

    #[test]
    fn a_resized_grant_keeps_its_id_and_owner_and_takes_the_new_rate() {
        let mut planner = planner();
        let grant = planner
            .reserve(
                Owner::Thread(7),
                Nanos::from_millis(2),
                Nanos::from_millis(16),
            )
            .unwrap();
        let grown = planner
            .resize(grant.id, Nanos::from_millis(6), Nanos::from_millis(16))
            .unwrap();
        assert_eq!(grown.id, grant.id);
        assert_eq!(grown.owner, Owner::Thread(7));
        assert_eq!(grown.requested.amount, Nanos::from_millis(6));
        assert!(grown.granted.amount >= Nanos::from_millis(6), "{grown:?}");
        let remapped = planner
            .resize(grant.id, Nanos::from_millis(3), Nanos::from_millis(32))
            .unwrap();
        assert_eq!(remapped.requested.period, Nanos::from_millis(32));
        assert_eq!(planner.grants(), vec![remapped]);
        // The next new grant still gets a new id.
        let other = planner
            .reserve(
                Owner::Thread(8),
                Nanos::from_millis(1),
                Nanos::from_millis(16),
            )
            .unwrap();
        assert_ne!(other.id, grant.id);
    }

    #[test]
    fn a_growth_past_the_capacity_is_refused_and_the_old_rate_stays() {
        let mut planner = planner();
        let first = planner
            .reserve(
                Owner::Thread(7),
                Nanos::from_millis(4),
                Nanos::from_millis(16),
            )
            .unwrap();
        planner
            .reserve(
                Owner::Thread(8),
                Nanos::from_millis(8),
                Nanos::from_millis(16),
            )
            .unwrap();
        let before = planner.grants();
        let fractions = planner.reserved_fractions();
        let refused = planner
            .resize(first.id, Nanos::from_millis(12), Nanos::from_millis(16))
            .unwrap_err();
        assert!(matches!(refused, ResizeError::Denied(_)), "{refused:?}");
        assert_eq!(planner.grants(), before);
        assert_eq!(planner.reserved_fractions(), fractions);
        assert!(matches!(
            planner.resize(GrantId(99), Nanos::from_millis(1), Nanos::from_millis(16)),
            Err(ResizeError::Planner(PlannerError::UnknownGrant(99)))
        ));
    }
}
