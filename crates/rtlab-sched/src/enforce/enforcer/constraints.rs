//! Time Constraints in the enforcer: beginning one (the planner's held time, then the thread's
//! reservation, a one-shot SCHED_DEADLINE budget or the dispatchers), ending one (the thread's own
//! policy back whatever else fails), and the CPU time a constrained thread used.

use rtlab_core::Nanos;
use rtlab_plan::{ConstraintId, Owner};
use rtlab_sys::thread_control;

use super::super::{BackendKind, ConstraintEnd, ConstraintRequest, DeadlineParams, EnforceError};
use super::Enforcer;

/// CPU time of `tid`: its thread CPU clock when it is ours (exact), else its schedstat.
pub fn thread_cpu_time(tid: u32) -> std::io::Result<u64> {
    if thread_control::thread_group_id(tid).ok() == Some(std::process::id()) {
        if let Ok(time) = thread_control::thread_cpu_clock_ns(tid) {
            return Ok(time);
        }
    }
    thread_control::thread_cpu_time_ns(tid)
}

/// A Time Constraint in force: its thread, what it had run at the start, its deadline.
#[derive(Clone, Debug)]
pub(super) struct ConstraintState {
    pub(super) thread: u32,
    pub(super) cpu_time_at_begin: u64,
    pub(super) deadline: u64,
    /// The share of a CPU a SCHED_DEADLINE one-shot budget holds (runtime / period, the tick's
    /// overrun included); `None` when the constraint is served otherwise.
    pub(super) held_fraction: Option<f64>,
}

impl Enforcer {
    /// `Enforcement::begin_constraint`: planner first, then the time served by the thread's
    /// reservation, a one-shot budget (`deadline`) or the dispatchers (`dispatch`); undone on failure.
    pub(super) fn begin_time_constraint(
        &mut self,
        request: ConstraintRequest,
    ) -> Result<ConstraintId, EnforceError> {
        let ConstraintRequest {
            thread,
            start,
            estimate,
            deadline,
            share_at_most,
        } = request;
        let managed = self.threads.get(&thread).cloned();
        if managed
            .as_ref()
            .is_some_and(|managed| managed.constraint.is_some())
        {
            return Err(EnforceError::ThreadAlreadyManaged(thread));
        }
        thread_control::thread_start_time(thread)
            .map_err(|_| EnforceError::NoSuchThread(thread))?;
        let reservation = managed
            .as_ref()
            .and_then(|managed| managed.grant)
            .and_then(|grant| self.grants.get(&grant).cloned());
        let owner = reservation
            .as_ref()
            .map_or(Owner::Thread(thread), |grant| grant.grant.owner.clone());
        let backend = reservation
            .as_ref()
            .map_or(self.default_backend, |grant| grant.backend);
        let id = self.planner.begin_constraint(
            owner,
            Nanos(self.plan_time(start.0)),
            estimate,
            Nanos(self.plan_time(deadline.0)),
        )?;
        let info = self
            .planner
            .constraints()
            .into_iter()
            .find(|info| info.id == id);
        let needs_free_time = info.as_ref().is_some_and(|info| !info.held.is_empty());
        let cpu = info.as_ref().map_or(0, |info| info.cpu);
        let cpu_time_at_begin = thread_cpu_time(thread).unwrap_or(0);
        // The share of a CPU a one-shot budget holds, when the constraint is served by one.
        let outcome: Result<Option<f64>, EnforceError> = match (backend, reservation.is_some()) {
            // Its reservation covers it, nothing to add.
            (_, true) if !needs_free_time => Ok(None),
            (BackendKind::Deadline, true) => Err(EnforceError::Unenforceable {
                backend,
                reason: format!(
                    "thread {thread}'s deadline reservation does not cover {estimate} by the \
                     deadline, and free time cannot be added to a SCHED_DEADLINE budget"
                ),
            }),
            (BackendKind::Deadline, false) => self
                .one_shot_budget(thread, id, estimate, deadline, share_at_most)
                .map(Some),
            (BackendKind::Dispatch, _) => {
                let result = if reservation.is_none() {
                    self.pin_for_dispatch(thread, cpu)
                } else {
                    Ok(())
                };
                result
                    .and_then(|()| {
                        if let Some(managed) = self.threads.get_mut(&thread) {
                            managed.constraint = Some(id);
                        }
                        self.constraints.insert(
                            id,
                            ConstraintState {
                                thread,
                                cpu_time_at_begin,
                                deadline: deadline.0,
                                held_fraction: None,
                            },
                        );
                        self.sync_dispatch(&[])
                    })
                    .map(|()| None)
            }
        };
        let held_fraction = match outcome {
            Ok(held_fraction) => held_fraction,
            Err(error) => {
                let _ = self
                    .planner
                    .end_constraint(id, Nanos(self.plan_time(start.0)));
                self.constraints.remove(&id);
                if let Some(managed) = self.threads.get_mut(&thread) {
                    if managed.constraint == Some(id) {
                        managed.constraint = None;
                    }
                }
                if reservation.is_none() {
                    let _ = self.restore(thread);
                }
                self.stop_dispatcher_if_idle();
                return Err(error);
            }
        };
        if let Some(managed) = self.threads.get_mut(&thread) {
            managed.constraint = Some(id);
        }
        self.constraints.entry(id).or_insert(ConstraintState {
            thread,
            cpu_time_at_begin,
            deadline: deadline.0,
            held_fraction,
        });
        Ok(id)
    }

    /// `Enforcement::end_constraint`: the thread gets its own policy back whatever else fails.
    pub(super) fn end_time_constraint(
        &mut self,
        id: ConstraintId,
    ) -> Result<ConstraintEnd, EnforceError> {
        let state = self
            .constraints
            .get(&id)
            .cloned()
            .ok_or(EnforceError::Planner(
                rtlab_plan::PlannerError::UnknownConstraint(id.0),
            ))?;
        let now = rtlab_sys::clock::monotonic_ns();
        let used = thread_cpu_time(state.thread)
            .unwrap_or(state.cpu_time_at_begin)
            .saturating_sub(state.cpu_time_at_begin);
        // The thread gets its own policy back whatever else fails here: the caller (the daemon's
        // registry) stops counting a constraint once it is ended, so a budget left in the kernel
        // after an error would be held by nobody's count (rtlab-hostile saw a one-shot budget
        // outlive its constraint by 22 s).
        let planned = self.planner.end_constraint(id, Nanos(self.plan_time(now)));
        self.constraints.remove(&id);
        let only_constraint = match self.threads.get_mut(&state.thread) {
            Some(managed) => {
                managed.constraint = None;
                managed.grant.is_none()
            }
            None => false,
        };
        let synced = if self.dispatcher.is_some() {
            self.sync_dispatch(&[])
        } else {
            Ok(())
        };
        let restored = if only_constraint {
            self.restore(state.thread)
        } else {
            Ok(())
        };
        self.stop_dispatcher_if_idle();
        restored?;
        synced?;
        planned?;
        Ok(ConstraintEnd {
            used: Nanos(used),
            met_deadline: now <= state.deadline,
        })
    }

    /// A constraint on `deadline` for a thread without a reservation: a one-shot SCHED_DEADLINE
    /// budget of the estimate plus one enforcement granule, due at the deadline. Returns the share
    /// of a CPU the budget holds (runtime / period), refused unchanged when that is more than
    /// `share_at_most`.
    pub(super) fn one_shot_budget(
        &mut self,
        thread: u32,
        id: ConstraintId,
        estimate: Nanos,
        deadline: Nanos,
        share_at_most: Option<f64>,
    ) -> Result<f64, EnforceError> {
        let now = rtlab_sys::clock::monotonic_ns();
        let window = deadline.0.saturating_sub(now);
        if window < estimate.0 {
            return Err(EnforceError::Unenforceable {
                backend: BackendKind::Deadline,
                reason: format!(
                    "only {} is left before the deadline, less than the estimate {estimate}",
                    Nanos(window)
                ),
            });
        }
        let runtime = (estimate.0 + self.facts.granularity.overrun().0).min(window);
        let params = DeadlineParams {
            runtime: Nanos(runtime.max(1_024)),
            deadline: Nanos(window),
            period: Nanos(window),
        };
        let share = params.runtime.0 as f64 / params.period.0.max(1) as f64;
        if let Some(allowed) = share_at_most.filter(|&allowed| share > allowed) {
            return Err(EnforceError::OverShare { share, allowed });
        }
        self.admit_deadline(params)?;
        let _ = self.set_deadline(thread, params, None, false)?;
        if let Some(managed) = self.threads.get_mut(&thread) {
            managed.constraint = Some(id);
        }
        Ok(share)
    }
}
