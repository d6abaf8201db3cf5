//! The `deadline` backend in the enforcer: its own admission beside the budgets in force, giving
//! a thread SCHED_DEADLINE (placed where it can be), and changing a budget's size in place.

use rtlab_core::Nanos;
use rtlab_sys::sched::Policy;
use rtlab_sys::thread_control::{self, SCHED_FLAG_RESET_ON_FORK};

use super::super::deadline_map::{deadline_params, DeadlineAdmission};
use super::super::{BackendKind, DeadlineParams, EnforceError, EnforcedGrant, KernelAdmission};
use super::Enforcer;

/// The `sched_setattr` flags of a reserved SCHED_DEADLINE thread: its children start at
/// SCHED_OTHER, and with `reclaim` it may run on the deadline bandwidth no reservation uses.
fn deadline_flags(reclaim: bool) -> u64 {
    if reclaim {
        SCHED_FLAG_RESET_ON_FORK | thread_control::SCHED_FLAG_RECLAIM
    } else {
        SCHED_FLAG_RESET_ON_FORK
    }
}

impl Enforcer {
    pub(super) fn deadline_params_in_force(&self) -> Vec<DeadlineParams> {
        let mut params: Vec<DeadlineParams> = self
            .grants
            .values()
            .filter_map(|grant| grant.deadline_params)
            .collect();
        for managed in self.threads.values() {
            if managed.grant.is_none() && managed.constraint.is_some() {
                if let Ok(Policy::Deadline {
                    runtime_ns,
                    deadline_ns,
                    period_ns,
                }) = rtlab_sys::sched::thread_policy(managed.saved.tid)
                {
                    params.push(DeadlineParams {
                        runtime: Nanos(runtime_ns),
                        deadline: Nanos(deadline_ns),
                        period: Nanos(period_ns),
                    });
                }
            }
        }
        params
    }

    fn admission(&self) -> DeadlineAdmission {
        DeadlineAdmission {
            n_cpus: self.facts.cpus.len(),
            cap: self.planner.cap(),
            kernel_limit: self.facts.deadline_limit,
            fair_server_share: self.facts.fair_server_share,
        }
    }

    /// Whether a SCHED_DEADLINE budget of `params` is admitted beside the budgets in force;
    /// the refusal as the error a request gets.
    pub(super) fn admit_deadline(&self, params: DeadlineParams) -> Result<(), EnforceError> {
        self.admission()
            .admit(&self.deadline_params_in_force(), params)
            .map_err(|reason| EnforceError::Unenforceable {
                backend: BackendKind::Deadline,
                reason,
            })
    }

    /// Gives `tid` SCHED_DEADLINE `params` (with SCHED_FLAG_RECLAIM when `reclaim`), first in the
    /// partition of `cpu` when one is asked for and possible. Returns the CPU it was placed on.
    pub(super) fn set_deadline(
        &mut self,
        tid: u32,
        params: DeadlineParams,
        cpu: Option<usize>,
        reclaim: bool,
    ) -> Result<Option<usize>, EnforceError> {
        let saved = self.save(tid)?;
        let all_cpus = &self.facts.cpus;
        if saved.affinity != *all_cpus {
            return Err(EnforceError::Unenforceable {
                backend: BackendKind::Deadline,
                reason: format!(
                    "thread {tid} is confined to CPUs {:?}; a SCHED_DEADLINE thread must be allowed \
                     every CPU of its root domain (use the dispatch backend for pinned threads)",
                    saved.affinity
                ),
            });
        }
        let placed = match cpu {
            Some(cpu) if self.place(tid, saved.start_time, cpu)? => Some(cpu),
            _ => None,
        };
        thread_control::set_thread_policy_with_flags(
            tid,
            Policy::Deadline {
                runtime_ns: params.runtime.0,
                deadline_ns: params.deadline.0,
                period_ns: params.period.0,
            },
            deadline_flags(reclaim),
        )
        .map_err(|source| {
            let context = match source.raw_os_error() {
                Some(16) => format!(
                    "the kernel refused SCHED_DEADLINE {}/{} for thread {tid} (EBUSY: its \
                     deadline bandwidth limit is reached)",
                    params.runtime, params.period
                ),
                Some(1) => format!(
                    "the kernel refused SCHED_DEADLINE for thread {tid} (EPERM: needs root or \
                     CAP_SYS_NICE, and the thread's affinity must span its root domain)"
                ),
                _ => format!("setting SCHED_DEADLINE for thread {tid}"),
            };
            EnforceError::System { context, source }
        })
        .map(|()| placed)
    }

    pub(super) fn enforce_deadline(
        &mut self,
        grant: &rtlab_plan::Grant,
        threads: &[u32],
        reclaim: bool,
    ) -> Result<EnforcedGrant, EnforceError> {
        let params = deadline_params(
            grant.requested.amount,
            grant.requested.period,
            self.facts.granularity,
        )
        .map_err(|refused| EnforceError::Unenforceable {
            backend: BackendKind::Deadline,
            reason: refused.to_string(),
        })?;
        self.admit_deadline(params)?;
        let preferred = threads
            .first()
            .and_then(|tid| self.request_stats.get(tid))
            .map_or(grant.cpu, |stat| stat.last_cpu);
        let wanted = self.deadline_cpu(preferred);
        let mut cpu = None;
        for &tid in threads {
            cpu = match self.set_deadline(tid, params, wanted, reclaim) {
                Ok(cpu) => cpu,
                // The thread moved to another run queue between the look and the move: it keeps
                // its reservation under global EDF instead.
                Err(EnforceError::System { source, .. })
                    if wanted.is_some() && source.raw_os_error() == Some(1) =>
                {
                    self.restore(tid)?;
                    self.set_deadline(tid, params, None, reclaim)?
                }
                Err(error) => return Err(error),
            };
            if let Some(managed) = self.threads.get_mut(&tid) {
                managed.grant = Some(grant.id);
            }
        }
        let enforced = EnforcedGrant {
            grant: grant.clone(),
            backend: BackendKind::Deadline,
            cpu,
            deadline_params: Some(params),
            kernel_admission: KernelAdmission::Accepted,
            threads: threads.to_vec(),
            reclaim,
        };
        self.grants.insert(grant.id, enforced.clone());
        Ok(enforced)
    }

    /// Gives the threads of deadline reservation `enforced` the SCHED_DEADLINE parameters of
    /// `resized` (the planner's new grant), after the deadline admission without its old
    /// parameters. On any refusal the threads keep their old parameters.
    pub(super) fn resize_deadline(
        &mut self,
        enforced: &EnforcedGrant,
        resized: &rtlab_plan::Grant,
    ) -> Result<EnforcedGrant, EnforceError> {
        let params = deadline_params(
            resized.requested.amount,
            resized.requested.period,
            self.facts.granularity,
        )
        .map_err(|refused| EnforceError::Unenforceable {
            backend: BackendKind::Deadline,
            reason: refused.to_string(),
        })?;
        let mut others = self.deadline_params_in_force();
        if let Some(old) = enforced.deadline_params {
            if let Some(index) = others.iter().position(|held| *held == old) {
                others.remove(index);
            }
        }
        self.admission()
            .admit(&others, params)
            .map_err(|reason| EnforceError::Unenforceable {
                backend: BackendKind::Deadline,
                reason,
            })?;
        let policy = |params: DeadlineParams| Policy::Deadline {
            runtime_ns: params.runtime.0,
            deadline_ns: params.deadline.0,
            period_ns: params.period.0,
        };
        for (index, &tid) in enforced.threads.iter().enumerate() {
            if let Err(source) = thread_control::set_thread_policy_with_flags(
                tid,
                policy(params),
                deadline_flags(enforced.reclaim),
            ) {
                // Those already changed go back to the old parameters.
                if let Some(old) = enforced.deadline_params {
                    for &done in &enforced.threads[..index] {
                        let _ = thread_control::set_thread_policy_with_flags(
                            done,
                            policy(old),
                            deadline_flags(enforced.reclaim),
                        );
                    }
                }
                let context = match source.raw_os_error() {
                    Some(16) => format!(
                        "the kernel refused SCHED_DEADLINE {}/{} for thread {tid} (EBUSY: its \
                         deadline bandwidth limit is reached); the old size is kept",
                        params.runtime, params.period
                    ),
                    Some(3) => return Err(EnforceError::NoSuchThread(tid)),
                    _ => format!("changing SCHED_DEADLINE of thread {tid}"),
                };
                return Err(EnforceError::System { context, source });
            }
        }
        let entry = self
            .grants
            .get_mut(&resized.id)
            .expect("a held grant is recorded");
        entry.grant = resized.clone();
        entry.deadline_params = Some(params);
        Ok(entry.clone())
    }
}
