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

use crate::owner::Owner;
use crate::rounding::{self, Rounding, MAX_LEVEL};
use crate::tree::{CpuTree, PieceRef};
use rtlab_core::Nanos;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The default cap: at most 90 % of a CPU is reserved.
pub const DEFAULT_CAP: f64 = 0.9;

/// Most pieces of free time one constraint may hold; a window fragmented more finely is refused.
pub const MAX_CONSTRAINT_PIECES: usize = 65_536;

/// Most doublings between the shortest and the longest period on one CPU. A longer major cycle would
/// make the explicit plan of that CPU huge; long requests are rounded down to stay within it.
pub const MAX_SPAN: u32 = 16;

const PARTS_PER_MILLION: u128 = 1_000_000;

/// Identifies a granted reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GrantId(pub u64);

/// Identifies an admitted time constraint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConstraintId(pub u64);

/// An amount of CPU time in every period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub amount: Nanos,
    pub period: Nanos,
}

impl fmt::Display for Rate {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}/{}", self.amount, self.period)
    }
}

/// How a reservation was admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdmissionPath {
    /// Inserted into the existing plan of its CPU.
    Incremental,
    /// The CPU's plan was rebuilt to make room.
    Rebuild,
}

/// A granted reservation: where it runs and what it really gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub id: GrantId,
    pub owner: Owner,
    pub cpu: usize,
    pub requested: Rate,
    /// At least `requested.amount` lands in every sliding window of `requested.period`.
    pub granted: Rate,
    pub path: AdmissionPath,
}

/// Why a reservation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("amount is zero")]
    ZeroAmount,
    #[error("amount {amount} exceeds period {period}")]
    AmountExceedsPeriod { amount: Nanos, period: Nanos },
    #[error("period {period} is shorter than the quantum {quantum}")]
    PeriodBelowQuantum { period: Nanos, quantum: Nanos },
    #[error("owner {0} already has a reservation")]
    AlreadyReserved(Owner),
    #[error(
        "no CPU has room: needs {needed_ppm} ppm of a CPU, the least-utilised CPU {cpu} has {free_ppm} ppm free under the cap"
    )]
    NoCapacity {
        cpu: usize,
        needed_ppm: u64,
        free_ppm: u64,
    },
    #[error("period would span more than {span} times the shortest or longest period already on CPU {cpu}")]
    PeriodSpan { cpu: usize, span: u64 },
    #[error("would take time that admitted time constraint {0} holds on CPU {1}")]
    WouldBreakConstraint(u64, usize),
}

/// Why a time constraint could not be guaranteed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Infeasible {
    #[error("estimate {estimate} does not fit between start {start} and deadline {deadline}")]
    InvalidWindow {
        start: Nanos,
        estimate: Nanos,
        deadline: Nanos,
    },
    #[error("owner {0} already has an active time constraint")]
    AlreadyActive(Owner),
    #[error(
        "only {available} of the {estimate} estimate is available before the deadline on CPU {cpu}"
    )]
    NotEnoughTime {
        cpu: usize,
        available: Nanos,
        estimate: Nanos,
    },
    #[error(
        "free time before the deadline is split into more than {MAX_CONSTRAINT_PIECES} pieces"
    )]
    TooFragmented,
}

/// Errors of the planner's bookkeeping calls (bad arguments, unknown ids).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlannerError {
    #[error("at least one CPU is needed")]
    NoCpus,
    #[error("quantum must be positive")]
    ZeroQuantum,
    #[error("cap {0} is not in (0, 1]")]
    BadCap(f64),
    #[error("unknown reservation {0}")]
    UnknownGrant(u64),
    #[error("unknown time constraint {0}")]
    UnknownConstraint(u64),
    #[error("owner {0} has an active time constraint; end it before releasing the reservation")]
    ConstraintActive(Owner),
}

/// What `end_constraint` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeTaken {
    /// `now − start`: how long the constraint was open.
    pub elapsed: Nanos,
    /// CPU time the plan gave the owner between `start` and `min(now, deadline)`: its reserved slots
    /// plus the free time the constraint held. Enforcement reports the measured CPU time instead.
    pub scheduled: Nanos,
    /// Whether the constraint ended by its deadline.
    pub met_deadline: bool,
}

/// One slot of a CPU's major cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    pub start: Nanos,
    pub length: Nanos,
    pub owner: Owner,
}

/// One CPU's schedule: a major cycle of slots that repeats forever.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSchedule {
    pub cpu: usize,
    pub cycle: Nanos,
    pub slots: Vec<Slot>,
}

/// The explicit schedule of every CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub cpus: Vec<CpuSchedule>,
}

/// An admitted time constraint and the free time it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConstraintInfo {
    pub id: ConstraintId,
    pub owner: Owner,
    pub cpu: usize,
    pub start: Nanos,
    pub estimate: Nanos,
    pub deadline: Nanos,
    /// Absolute `[start, end)` intervals of free time held for this constraint, in time order.
    pub held: Vec<(Nanos, Nanos)>,
}

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

/// Free intervals of one major cycle, for constraint feasibility.
#[derive(Clone, Debug)]
struct FreeIndex {
    cycle: u64,
    intervals: Vec<(u64, u64)>,
    free_per_cycle: u64,
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

    /// Asks for `amount` of CPU time in every window of length `period` for `owner`.
    pub fn reserve(&mut self, owner: Owner, amount: Nanos, period: Nanos) -> Result<Grant, Denied> {
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
        let id = GrantId(self.next_grant);
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
        self.next_grant += 1;
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
            if taken.len() > MAX_CONSTRAINT_PIECES {
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
    fn reallocate_constraints(&mut self, cpu: usize) -> Result<(), ConstraintId> {
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
