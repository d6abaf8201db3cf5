//! rtlab-sched: CPU Reservations and Time Constraints: the planner and its admission control.
//!
//! A thread (or an activity, a set of threads) asks for "X of every Y" and, if admitted, runs at
//! least X in every window of length Y, on one CPU, forever; or asks for `estimate` of work between
//! `start` and `deadline` and is told at once whether that is guaranteed. The [`Planner`] is pure and
//! deterministic (no syscalls, no clock) so it is property-tested against the independent
//! [`check`] module; enforcement (SCHED_DEADLINE, a dispatcher) calls [`Planner::who_runs`].

pub mod check;
pub mod owner;
pub mod planner;
pub mod request_file;
pub mod rounding;
mod tree;

pub use owner::{Owner, OwnerError};
pub use planner::{
    AdmissionPath, ConstraintId, ConstraintInfo, CpuSchedule, Denied, Grant, GrantId, Infeasible,
    Plan, Planner, PlannerError, Rate, Slot, TimeTaken, DEFAULT_CAP, MAX_CONSTRAINT_PIECES,
    MAX_SPAN,
};
pub use request_file::{parse_requests, Request, RequestFileError};
