//! rtlab-plan: CPU Reservations and Time Constraints: the planner and its admission control.
//!
//! A thread (or an activity, a set of threads) asks for "X of every Y" and, if admitted, runs at
//! least X in every window of length Y, on one CPU, forever; or asks for `estimate` of work between
//! `start` and `deadline` and is told at once whether that is guaranteed. The [`Planner`] is pure and
//! deterministic (no syscalls, no clock) so it is property-tested against the independent
//! [`check`] module. Nothing here is Linux's: the crate depends on rtlab-core alone and builds for
//! every target; the enforcement on real threads (SCHED_DEADLINE, a dispatcher that calls
//! [`Planner::who_runs`]) is rtlab-sched's.
//!
//! ```
//! use rtlab_core::Nanos;
//! use rtlab_plan::{Owner, Planner};
//!
//! let mut planner = Planner::new(2, Nanos::from_millis(1), 0.9)?;
//! let mixer = Owner::Activity("kernel-mixer".into());
//! let grant = planner.reserve(mixer.clone(), Nanos::from_millis(1), Nanos::from_millis(16))?;
//! assert_eq!(grant.granted.period, Nanos::from_millis(16));
//! // The mixer holds the first slot of its CPU's cycle.
//! assert_eq!(planner.who_runs(grant.cpu, Nanos(0)), Some(&mixer));
//! // 5 ms of work in the next 10 ms: its reservation plus free time.
//! let constraint = planner.begin_constraint(mixer, Nanos(0), Nanos::from_millis(5), Nanos::from_millis(10))?;
//! let taken = planner.end_constraint(constraint, Nanos::from_millis(9))?;
//! assert!(taken.met_deadline);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod check;
pub mod owner;
pub mod plan_report;
pub mod planner;
pub mod request_file;
pub mod rounding;
mod tree;

pub use owner::{Owner, OwnerError};
pub use plan_report::{plan_requests, PlanReport, PlanReportError};
pub use planner::{
    AdmissionPath, ConstraintId, ConstraintInfo, CpuSchedule, Denied, Grant, GrantId, Infeasible,
    Plan, Planner, PlannerError, Rate, ResizeError, Slot, TimeTaken, DEFAULT_CAP,
    MAX_CONSTRAINT_PIECES, MAX_SPAN,
};
pub use request_file::{parse_requests, Request, RequestFileError};

/// True when `cause` is one of this crate's errors and the request is at fault (a request the
/// planner refuses), not the system.
pub fn is_input_error(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause
        .downcast_ref::<PlanReportError>()
        .is_some_and(|error| matches!(error, PlanReportError::Planner(_)))
}
