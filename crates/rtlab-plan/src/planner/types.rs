//! What the planner's callers see: identifiers, rates, grants, the explicit plan, constraint
//! reports, the limits the planner keeps to, and why a request was refused.
//!
//! Kept apart from the planner's bookkeeping so enforcement, the checker and the CLI read one
//! short file to know the planner's contract.

use crate::owner::Owner;
use rtlab_core::Nanos;
use std::fmt;

/// The default cap: at most 90 % of a CPU is reserved.
pub const DEFAULT_CAP: f64 = 0.9;

/// Most pieces of free time the Time Constraints on one CPU may hold together; a constraint that
/// would take more is refused. Every reservation made or changed on a CPU finds free time again for
/// each of its constraints, so this bounds the work of one request: in the daemon that work is
/// done holding the registry, which everyone else's requests, root's among them, wait for. With
/// 65,536 pieces allowed each constraint, three constraints of 1,312–4,374 pieces made a
/// reservation on their CPU take 33–44 ms in the debug build; at this cap 12 ms, and 1 ms in a
/// release build (`cargo run -p rtlab-plan --example constraint_cost [--release]`).
pub const MAX_CONSTRAINT_PIECES: usize = 4_096;

/// Most doublings between the shortest and the longest period on one CPU. A longer major cycle would
/// make the explicit plan of that CPU huge; long requests are rounded down to stay within it.
pub const MAX_SPAN: u32 = 16;

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
        "the Time Constraints on this CPU would hold its free time in more than {MAX_CONSTRAINT_PIECES} pieces (a window too finely split by the reservations there)"
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

/// Why [`Planner::resize`](super::Planner::resize) refused: the new rate is not admitted, or the
/// grant is unknown or busy. The old rate is still held.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResizeError {
    #[error(transparent)]
    Denied(#[from] Denied),
    #[error(transparent)]
    Planner(#[from] PlannerError),
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
