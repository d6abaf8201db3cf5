//! Enforcement: turning the planner's grants into CPU time for real threads.
//!
//! The [`Planner`](rtlab_plan::Planner) decides *who* may have *how much*; an [`Enforcement`] makes the
//! kernel deliver it, through one of the [`BackendKind`]s, and puts every thread it touched back
//! the way it found it. The daemon (`rtlab daemon`) owns one `Enforcement` and talks only to this
//! trait, so its protocol, authorisation and thread watching are tested against a
//! deterministic implementation without root, and the real backends are tested on their own.
//!
//! Times are absolute CLOCK_MONOTONIC nanoseconds wherever a time of day is meant (constraints),
//! and durations elsewhere.

pub mod cbs_sim;
pub mod deadline_map;
pub mod dispatch;
mod enforcer;
pub mod journal;
pub mod placement;
pub mod switch;

pub use enforcer::{thread_cpu_time, Enforcer, MachineFacts, Repair, ENFORCE_QUANTUM};

use std::fmt;
use std::str::FromStr;

use rtlab_core::Nanos;

use rtlab_plan::{ConstraintId, Grant, GrantId, Owner};

/// How a reservation is enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendKind {
    /// The kernel's constant-bandwidth server (SCHED_DEADLINE), with parameters derived so that the
    /// grant holds at this kernel's enforcement granularity.
    Deadline,
    /// rtlab's own per-CPU dispatcher, which raises the slot owner's threads to a high SCHED_FIFO
    /// priority for the slots of the planner's explicit plan.
    Dispatch,
}

impl BackendKind {
    pub const ALL: [BackendKind; 2] = [BackendKind::Deadline, BackendKind::Dispatch];

    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Deadline => "deadline",
            BackendKind::Dispatch => "dispatch",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// The text was not a backend name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown backend '{0}' (expected deadline or dispatch)")]
pub struct UnknownBackend(pub String);

impl FromStr for BackendKind {
    type Err = UnknownBackend;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "deadline" => Ok(BackendKind::Deadline),
            "dispatch" => Ok(BackendKind::Dispatch),
            other => Err(UnknownBackend(other.to_owned())),
        }
    }
}

/// A request to reserve `amount` of every `period` for `threads`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReserveRequest {
    /// `Owner::Thread(tid)` for one thread, `Owner::Activity(name)` for threads sharing one
    /// reservation.
    pub owner: Owner,
    /// The threads to put under the reservation now (for a thread owner: that thread).
    pub threads: Vec<u32>,
    pub amount: Nanos,
    pub period: Nanos,
    /// `None`: the enforcement's default for this machine.
    pub backend: Option<BackendKind>,
    /// A `deadline` thread may also run on the deadline bandwidth no reservation uses
    /// (SCHED_FLAG_RECLAIM): "at least `amount` in every window", not at most. The daemon grants
    /// it to privileged callers only.
    pub reclaim: bool,
}

/// A request for `estimate` of CPU for `thread` between `start` and `deadline` (absolute
/// CLOCK_MONOTONIC): a time constraint, see [`Enforcement::begin_constraint`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConstraintRequest {
    pub thread: u32,
    pub start: Nanos,
    pub estimate: Nanos,
    pub deadline: Nanos,
    /// The most of a CPU a budget of the thread's own may hold for it (the caller's room under
    /// its limit), `None` for no bound: a one-shot SCHED_DEADLINE budget that would hold more,
    /// its overrun included, is refused (`OverShare`) before the kernel is asked, so that the
    /// kernel never holds it, not even until a check after.
    pub share_at_most: Option<f64>,
}

/// The SCHED_DEADLINE parameters set for a `deadline` grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeadlineParams {
    pub runtime: Nanos,
    pub deadline: Nanos,
    pub period: Nanos,
}

/// What a reservation really holds now, read back from where it is enforced rather than recalled
/// from what was asked: the kernel's SCHED_DEADLINE parameters (`sched_getattr`) or the slots the
/// dispatcher follows. `rtlab reserve` and `rtlab reservations` print it beside the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelHeld {
    /// CPU time the reservation is given in each window: the kernel's runtime, or the least slot
    /// time the dispatcher's table holds in any window of `window` (aligned to its cycle).
    pub runtime: Nanos,
    /// The window that runtime comes in: the kernel's period, or the grant's period on the
    /// dispatcher.
    pub window: Nanos,
    pub source: HeldSource,
}

impl KernelHeld {
    /// The share of one CPU held: runtime / window (0 when nothing is held).
    pub fn share(&self) -> f64 {
        if self.window.0 == 0 {
            0.0
        } else {
            self.runtime.0 as f64 / self.window.0 as f64
        }
    }
}

/// Where [`KernelHeld`] was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeldSource {
    /// `sched_getattr` of thread `tid` (the first of the reservation's threads) found
    /// SCHED_DEADLINE with this relative deadline.
    SchedGetattr {
        tid: u32,
        deadline: Nanos,
        /// SCHED_FLAG_RECLAIM is set.
        reclaim: bool,
    },
    /// `sched_getattr` of thread `tid` found another policy (named here): the kernel holds
    /// nothing for it, runtime and window are 0.
    NotDeadline { tid: u32, policy: String },
    /// The dispatcher's slot table in force on `cpu`: at most `slots_per_window` slots in a
    /// window.
    DispatcherSlots { cpu: usize, slots_per_window: u32 },
}

/// What the kernel itself said about a reservation, beside the planner's admission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelAdmission {
    /// The kernel accepted the parameters (sched_setattr succeeded for every thread).
    Accepted,
    /// The backend does not ask the kernel (the dispatcher).
    NotApplicable,
}

/// A reservation in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnforcedGrant {
    /// The planner's grant: requested and granted rate, planner CPU, admission path.
    pub grant: Grant,
    pub backend: BackendKind,
    /// The CPU the threads are confined to (a `deadline` thread: its cpuset partition), or `None`
    /// under global EDF.
    pub cpu: Option<usize>,
    /// Set for `deadline` grants.
    pub deadline_params: Option<DeadlineParams>,
    pub kernel_admission: KernelAdmission,
    /// The threads under the reservation.
    pub threads: Vec<u32>,
    /// Its `deadline` threads have SCHED_FLAG_RECLAIM (see [`ReserveRequest::reclaim`]).
    pub reclaim: bool,
}

/// The result of ending a time constraint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConstraintEnd {
    /// CPU time the thread really used between begin and end (its thread CPU clock).
    pub used: Nanos,
    /// Whether the constraint ended by its deadline.
    pub met_deadline: bool,
}

/// Why enforcement refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum EnforceError {
    /// The planner refused the reservation (no capacity, bad rate, …).
    #[error("denied: {0}")]
    Denied(#[from] rtlab_plan::Denied),
    /// The planner cannot guarantee the constraint.
    #[error("infeasible: {0}")]
    Infeasible(#[from] rtlab_plan::Infeasible),
    /// An unknown id or a constraint still active.
    #[error(transparent)]
    Planner(#[from] rtlab_plan::PlannerError),
    /// The backend cannot give this grant on this machine (e.g. the tick is too coarse for the
    /// period); the text says why.
    #[error("backend {backend} cannot enforce this: {reason}")]
    Unenforceable {
        backend: BackendKind,
        reason: String,
    },
    /// The thread does not exist (or exited meanwhile).
    #[error("no thread {0}")]
    NoSuchThread(u32),
    /// A thread is already under another reservation.
    #[error("thread {0} already holds a reservation")]
    ThreadAlreadyManaged(u32),
    /// The thread is not managed by this enforcement.
    #[error("thread {0} holds no reservation")]
    ThreadNotManaged(u32),
    /// The budget the kernel would hold is more than the request allows
    /// ([`ConstraintRequest::share_at_most`]); nothing was changed.
    #[error(
        "the kernel's budget would hold {:.1} % of a CPU (its overrun included), more than the {:.1} % allowed",
        share * 100.0,
        allowed * 100.0
    )]
    OverShare { share: f64, allowed: f64 },
    /// The kernel refused (sched_setattr, cgroup files, timers).
    #[error("{context}: {source}")]
    System {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

/// Something that enforces reservations and constraints on real threads.
///
/// Every method leaves the machine consistent: on an error nothing it was asked to change stays
/// changed. Implementations restore every thread they touched in `revert_all` and on drop, and keep
/// a journal so that the next start after a SIGKILL can restore them too.
pub trait Enforcement: Send {
    /// The backend used when a request names none.
    fn default_backend(&self) -> BackendKind;

    /// The share of a CPU the kernel will hold for `request` on the backend it would get now (a
    /// SCHED_DEADLINE budget is the amount and a tick of possible overrun), so that it can be
    /// checked against a limit before it is asked for; `None` when that is just amount/period or
    /// the enforcement cannot say.
    fn kernel_share(&self, request: &ReserveRequest) -> Option<f64> {
        let _ = request;
        None
    }

    /// Admits (planner first) and enforces a reservation for `request.threads`.
    fn reserve(&mut self, request: ReserveRequest) -> Result<EnforcedGrant, EnforceError>;

    /// Puts more threads under an existing (activity) reservation.
    fn add_threads(&mut self, grant: GrantId, threads: &[u32]) -> Result<(), EnforceError>;

    /// Takes one thread out of its reservation (it exited, or was released), restoring its policy
    /// if it still exists. Returns the grant and how many threads it still has.
    fn remove_thread(&mut self, thread: u32) -> Result<(GrantId, usize), EnforceError>;

    /// Ends a reservation: every thread still under it gets its old policy back.
    fn release(&mut self, grant: GrantId) -> Result<(), EnforceError>;

    /// Changes a held reservation to `amount` of every `period`, keeping its id, owner and
    /// threads: admitted (planner, then the kernel) as a new request would be beside every other
    /// reservation, its old rate counted as free. On a refusal the old rate is still held and
    /// enforced. An enforcement that cannot resize says so (`Unenforceable`).
    fn resize(
        &mut self,
        grant: GrantId,
        amount: Nanos,
        period: Nanos,
    ) -> Result<EnforcedGrant, EnforceError> {
        let _ = (grant, amount, period);
        Err(EnforceError::Unenforceable {
            backend: self.default_backend(),
            reason: "this enforcement cannot change a reservation's size".into(),
        })
    }

    /// Every reservation in force.
    fn grants(&self) -> Vec<EnforcedGrant>;

    /// Reserved fraction of each CPU (index = CPU), in [0, 1].
    fn reserved_fractions(&self) -> Vec<f64>;

    /// Asks for the request's `estimate` of CPU for its thread between its `start` and its
    /// `deadline`. Answers at once: admitted, or infeasible with the reason.
    fn begin_constraint(
        &mut self,
        request: ConstraintRequest,
    ) -> Result<ConstraintId, EnforceError>;

    /// Ends a constraint: the CPU time the thread used and whether it met its deadline.
    fn end_constraint(&mut self, id: ConstraintId) -> Result<ConstraintEnd, EnforceError>;

    /// The share of a CPU the kernel holds for constraint `id` when that is a budget of its own
    /// (a SCHED_DEADLINE one-shot budget: runtime / period, the tick's overrun included, so 1 µs
    /// by a deadline 10 ms away holds 40 % at HZ=250); `None` when the constraint holds no more
    /// than its planned density. Admission counts the larger.
    fn constraint_held_fraction(&self, id: ConstraintId) -> Option<f64> {
        let _ = id;
        None
    }

    /// What reservation `grant` really holds now (see [`KernelHeld`]); `None` for an unknown
    /// grant, one without threads, or an enforcement with nothing to read back (a simulation).
    fn held_by_kernel(&self, grant: GrantId) -> Option<KernelHeld> {
        let _ = grant;
        None
    }

    /// Restores every managed thread and removes everything created (cpusets, timers, threads).
    fn revert_all(&mut self);

    /// Lets go of machinery kept past its last use whose time is up by `now` (CLOCK_MONOTONIC,
    /// as `Instant`), and says when to call again (`None`: nothing is waiting). The daemon calls
    /// it from its watcher; an implementation that keeps nothing needs not override it.
    fn expire(&mut self, now: std::time::Instant) -> Option<std::time::Instant> {
        let _ = now;
        None
    }
}

impl From<rtlab_plan::ResizeError> for EnforceError {
    fn from(error: rtlab_plan::ResizeError) -> EnforceError {
        match error {
            rtlab_plan::ResizeError::Denied(denied) => EnforceError::Denied(denied),
            rtlab_plan::ResizeError::Planner(planner) => EnforceError::Planner(planner),
        }
    }
}
