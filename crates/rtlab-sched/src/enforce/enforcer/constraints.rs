//! Time Constraints in the enforcer: a one-shot SCHED_DEADLINE budget for a thread without a
//! reservation, and the CPU time a constrained thread used.

use rtlab_core::Nanos;
use rtlab_plan::ConstraintId;
use rtlab_sys::thread_control;

use super::super::{BackendKind, DeadlineParams, EnforceError};
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

impl Enforcer {
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
