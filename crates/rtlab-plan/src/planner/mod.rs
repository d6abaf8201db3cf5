//! The planner: CPU Reservations ("X of every Y, continuously") and Time Constraints ("`estimate` of
//! work between `start` and `deadline`") with admission control, after Rialto/NT (paper 003, §2.2,
//! §2.3 and §4).
//!
//! It is pure and deterministic: no clock, no syscalls, no randomness. Times are nanoseconds on the
//! plan's own timeline, whose major cycles start at 0; enforcement maps that timeline onto
//! CLOCK_MONOTONIC.
//!
//! # Policy
//!
//! * **Rounding.** A request `X/Y` is granted at a period `quantum · 2^k ≤ Y` with the least amount
//!   that still puts `X` into every sliding window of length `Y` (see [`crate::rounding`]). The
//!   preferred period is the one, among the three longest candidates, reserving the smallest
//!   fraction (ties to the longer period); shorter periods are used only when the preferred one does
//!   not fit.
//! * **Placement.** Each reservation lives on one CPU: the least-utilised one (003: "try the
//!   least-utilised plan first"). Since every CPU is offered the same rounding, the least-utilised CPU
//!   is the only one that can take a request no other CPU can; a request it cannot take is denied.
//! * **Cap.** A CPU's reserved fraction never exceeds `cap`, so there is always time left for
//!   everything that has no reservation.
//! * **Admission** is exact for the model "a fixed budget per power-of-two period on one CPU": a
//!   request is granted iff some rounding fits under the cap on the least-utilised CPU. Granted
//!   reservations are never moved to another CPU, and layouts that would need less than the budget by
//!   spreading it inside the period are not explored (those are the cases the planner gives up on).
//! * **Incremental first.** The new reservation goes into the existing plan when a node of its period
//!   has room (one descent of the CPU's tree, O(D²) for tree depth D); otherwise, or when its period is
//!   shorter than any on that CPU, the CPU's plan is rebuilt, which always succeeds under the cap.
//!   [`Grant::path`] says which happened. An incremental admission may move the slots of
//!   longer-period reservations later inside their windows (never their amounts or periods); a
//!   rebuild may move any slot of that CPU. Releases never rebuild.
//! * **Time Constraints** run on the owner's reservation CPU (or the least-utilised CPU when the
//!   owner has none). They are guaranteed from the owner's own reserved time in `[start, deadline)`
//!   plus free time of that CPU, which the constraint then holds, earliest first. Later reservations
//!   on that CPU are denied if they would take time an admitted constraint holds.
//!
//! The planner's parts, one module each: `types.rs` holds what callers see (grants, plans, rates,
//! errors); `reservations.rs` admits, places and releases reservations; `constraints.rs` finds,
//! holds and gives back the free time of Time Constraints. This file holds the planner's state and
//! what reads it (the plan, who runs when).

mod constraints;
mod reservations;
mod types;

pub use types::{
    AdmissionPath, ConstraintId, ConstraintInfo, CpuSchedule, Denied, Grant, GrantId, Infeasible,
    Plan, PlannerError, Rate, ResizeError, Slot, TimeTaken, DEFAULT_CAP, MAX_CONSTRAINT_PIECES,
    MAX_SPAN,
};

use crate::owner::Owner;
use crate::rounding::{Rounding, MAX_LEVEL};
use crate::tree::{CpuTree, PieceRef};
use constraints::FreeIndex;
use rtlab_core::Nanos;
use std::collections::{BTreeMap, BTreeSet};

const PARTS_PER_MILLION: u128 = 1_000_000;

#[derive(Clone, Debug)]
struct GrantRecord {
    grant: Grant,
    rounding: Rounding,
    pieces: Vec<PieceRef>,
}

#[derive(Clone, Debug)]
struct ConstraintRecord {
    owner: Owner,
    cpu: usize,
    start: u64,
    estimate: u64,
    deadline: u64,
    held: Vec<(u64, u64)>,
}

#[derive(Clone, Debug, Default)]
struct CpuState {
    tree: Option<CpuTree>,
    load: u128,
    grants: BTreeSet<GrantId>,
    /// Free time held by constraints: start → (end, constraint).
    held: BTreeMap<u64, (u64, ConstraintId)>,
    constraints: BTreeSet<ConstraintId>,
    free_index: Option<FreeIndex>,
}

/// The CPU Reservation and Time Constraint planner for `n_cpus` CPUs.
///
/// Every index is a B-tree, never a hash table: a hash table's occasional rehash of all entries
/// would put an O(n) pause into some unlucky admission (measured: 0.7 ms at the 7,169th).
#[derive(Clone, Debug)]
pub struct Planner {
    quantum: u64,
    cap: f64,
    capacity: u128,
    cpus: Vec<CpuState>,
    by_load: BTreeSet<(u128, usize)>,
    grants: BTreeMap<GrantId, GrantRecord>,
    owners: BTreeMap<Owner, GrantId>,
    next_grant: u64,
    constraints: BTreeMap<ConstraintId, ConstraintRecord>,
    active_by_owner: BTreeMap<Owner, ConstraintId>,
    next_constraint: u64,
}

impl Planner {
    /// A planner for `n_cpus` CPUs whose periods are power-of-two multiples of `quantum` and whose
    /// CPUs are each reserved to at most `cap` (a fraction in (0, 1]; [`DEFAULT_CAP`] is usual).
    pub fn new(n_cpus: usize, quantum: Nanos, cap: f64) -> Result<Planner, PlannerError> {
        if n_cpus == 0 {
            return Err(PlannerError::NoCpus);
        }
        if quantum.0 == 0 {
            return Err(PlannerError::ZeroQuantum);
        }
        if !(cap > 0.0 && cap <= 1.0) {
            return Err(PlannerError::BadCap(cap));
        }
        let cap_ppm = (cap * 1e6).round() as u128;
        let whole = u128::from(quantum.0) << MAX_LEVEL;
        let capacity = whole * cap_ppm / PARTS_PER_MILLION;
        Ok(Planner {
            quantum: quantum.0,
            cap,
            capacity,
            cpus: vec![CpuState::default(); n_cpus],
            by_load: (0..n_cpus).map(|cpu| (0u128, cpu)).collect(),
            grants: BTreeMap::new(),
            owners: BTreeMap::new(),
            next_grant: 1,
            constraints: BTreeMap::new(),
            active_by_owner: BTreeMap::new(),
            next_constraint: 1,
        })
    }

    pub fn n_cpus(&self) -> usize {
        self.cpus.len()
    }

    pub fn quantum(&self) -> Nanos {
        Nanos(self.quantum)
    }

    pub fn cap(&self) -> f64 {
        self.cap
    }

    fn to_ppm(&self, load: u128) -> u64 {
        let whole = u128::from(self.quantum) << MAX_LEVEL;
        u64::try_from(load * PARTS_PER_MILLION / whole).unwrap_or(u64::MAX)
    }

    /// Reserved fraction of `cpu` in parts per million (0 for an unknown CPU).
    pub fn utilisation_ppm(&self, cpu: usize) -> u64 {
        self.cpus
            .get(cpu)
            .map_or(0, |state| self.to_ppm(state.load))
    }

    /// Reserved fraction of each CPU (index = CPU), in [0, 1].
    pub fn reserved_fractions(&self) -> Vec<f64> {
        (0..self.n_cpus())
            .map(|cpu| self.utilisation_ppm(cpu) as f64 / 1e6)
            .collect()
    }

    /// The explicit schedule: per CPU a major cycle of slots. A CPU without reservations has an
    /// empty cycle one quantum long.
    pub fn plan(&self) -> Plan {
        let cpus = self
            .cpus
            .iter()
            .enumerate()
            .map(|(cpu, state)| match &state.tree {
                None => CpuSchedule {
                    cpu,
                    cycle: Nanos(self.quantum),
                    slots: Vec::new(),
                },
                Some(tree) => CpuSchedule {
                    cpu,
                    cycle: Nanos(tree.cycle()),
                    slots: tree
                        .slots()
                        .into_iter()
                        .filter_map(|(start, length, grant)| {
                            self.grants.get(&GrantId(grant)).map(|record| Slot {
                                start: Nanos(start),
                                length: Nanos(length),
                                owner: record.grant.owner.clone(),
                            })
                        })
                        .collect(),
                },
            })
            .collect();
        Plan { cpus }
    }

    /// Who should run on `cpu` at time `t` of the plan's timeline: the reservation holding that
    /// slot, else the time constraint holding that free time, else nobody (`None`: free time).
    pub fn who_runs(&self, cpu: usize, t: Nanos) -> Option<&Owner> {
        let state = self.cpus.get(cpu)?;
        if let Some(tree) = &state.tree {
            if let Some(grant) = tree.grant_at(t.0) {
                return self
                    .grants
                    .get(&GrantId(grant))
                    .map(|record| &record.grant.owner);
            }
        }
        let (_, &(end, constraint)) = state.held.range(..=t.0).next_back()?;
        if end > t.0 {
            self.constraints
                .get(&constraint)
                .map(|record| &record.owner)
        } else {
            None
        }
    }
}
