//! The `dispatch` backend in the enforcer: sizing a grant for what dispatching loses, pinning its
//! threads, and keeping the dispatchers' table (owners, held time, the schedule) up to date with
//! the planner.

use std::collections::BTreeMap;

use rtlab_plan::Owner;
use rtlab_sys::thread_control;

use super::super::dispatch::{
    DispatchTable, DispatchedThread, Dispatcher, HeldTime, DISPATCH_SIZING,
};
use super::super::switch::{check_switch, switch_time};
use super::super::{BackendKind, EnforceError, EnforcedGrant, KernelAdmission, ReserveRequest};
use super::{system, Enforcer, PIN_DISPATCHED, SWITCH_MARGIN};

impl Enforcer {
    /// Builds the dispatch owners map (every dispatch grant's threads at their rest policy).
    pub(super) fn dispatch_owners(&self) -> BTreeMap<Owner, Vec<DispatchedThread>> {
        let mut owners: BTreeMap<Owner, Vec<DispatchedThread>> = BTreeMap::new();
        for grant in self.grants.values() {
            if grant.backend != BackendKind::Dispatch {
                continue;
            }
            let threads = grant
                .threads
                .iter()
                .filter_map(|tid| self.threads.get(tid))
                .map(|managed| DispatchedThread {
                    tid: managed.saved.tid,
                    rest_policy: managed.saved.policy,
                    pidfd: managed.pidfd.clone(),
                })
                .collect();
            owners.insert(grant.grant.owner.clone(), threads);
        }
        for (id, constraint) in &self.constraints {
            let Some(managed) = self.threads.get(&constraint.thread) else {
                continue;
            };
            if managed.constraint == Some(*id) && managed.grant.is_none() {
                owners
                    .entry(Owner::Thread(constraint.thread))
                    .or_insert_with(|| {
                        vec![DispatchedThread {
                            tid: managed.saved.tid,
                            rest_policy: managed.saved.policy,
                            pidfd: managed.pidfd.clone(),
                        }]
                    });
            }
        }
        owners
    }

    pub(super) fn held_times(&self) -> Vec<HeldTime> {
        self.planner
            .constraints()
            .into_iter()
            .flat_map(|info| {
                let owner = info.owner.clone();
                let cpu = info.cpu;
                info.held.into_iter().map(move |(start, end)| HeldTime {
                    cpu,
                    start: start.0,
                    end: end.0,
                    owner: owner.clone(),
                })
            })
            .collect()
    }

    /// Brings the dispatchers up to date with the planner: owners and held time at once, the
    /// schedule at the next common cycle boundary (checked first, see `super::switch`). Starts the
    /// dispatchers on first use. Returns the failed check, if any (nothing is changed then).
    pub(super) fn sync_dispatch(
        &mut self,
        check_against: &[rtlab_plan::Grant],
    ) -> Result<(), EnforceError> {
        let plan = self.planner.plan();
        let owners = self.dispatch_owners();
        let held = self.held_times();
        let needs_dispatch = !owners.is_empty();
        if self.dispatcher.is_none() {
            if !needs_dispatch {
                return Ok(());
            }
            let table = DispatchTable {
                schedules: plan.cpus.clone(),
                pending: None,
                held,
                owners,
            };
            let dispatcher =
                Dispatcher::start(&self.facts.cpus, self.epoch, table).map_err(system(
                    "starting the SCHED_FIFO 99 dispatcher threads (needs root or CAP_SYS_NICE)",
                ))?;
            self.dispatcher = Some(dispatcher);
            return Ok(());
        }
        let Some(dispatcher) = &self.dispatcher else {
            return Ok(());
        };
        let now = dispatcher.now();
        dispatcher.update(|table| -> Result<(), EnforceError> {
            // The schedule the dispatchers will be following when the new one would start.
            let current = match &table.pending {
                Some((_, next)) => next.clone(),
                None => table.schedules.clone(),
            };
            let earliest = table
                .pending
                .as_ref()
                .map_or(now + SWITCH_MARGIN.0, |(at, _)| {
                    (*at).max(now + SWITCH_MARGIN.0)
                });
            let mut at = earliest;
            for (old, new) in current.iter().zip(&plan.cpus) {
                at = at.max(switch_time(earliest, old.cycle, new.cycle));
            }
            let unchanged = current == plan.cpus;
            if !unchanged {
                for (old, new) in current.iter().zip(&plan.cpus) {
                    if let Err((grant, least)) = check_switch(old, new, at, check_against) {
                        return Err(EnforceError::Unenforceable {
                            backend: BackendKind::Dispatch,
                            reason: format!(
                                "the new plan would leave reservation {} only {least} in some \
                                 window of {} while switching",
                                grant.owner, grant.requested.period
                            ),
                        });
                    }
                }
                table.pending = Some((at, plan.cpus.clone()));
            }
            table.owners = owners;
            table.held = held;
            Ok(())
        })
    }

    pub(super) fn stop_dispatcher_if_idle(&mut self) {
        let idle = !self
            .grants
            .values()
            .any(|grant| grant.backend == BackendKind::Dispatch)
            && self.constraints.is_empty();
        if idle {
            if let Some(mut dispatcher) = self.dispatcher.take() {
                dispatcher.stop();
            }
        }
    }

    /// Reserves in the planner enough that, after every slot edge and the time lost inside slots
    /// ([`DISPATCH_SIZING`]), the requested amount still lands in every window: asks for
    /// `(X + edge · (⌈Y / P'⌉ + 1)) / (1 − interior share)` where `P'` is the granted period, again
    /// if `P'` changed. The planner admits the planned amount; the grant reports the request.
    pub(super) fn reserve_with_edge_allowance(
        &mut self,
        request: &ReserveRequest,
    ) -> Result<rtlab_plan::Grant, EnforceError> {
        let mut asked = request.amount;
        for _ in 0..4 {
            let mut grant = self
                .planner
                .reserve(request.owner.clone(), asked, request.period)?;
            let needed =
                DISPATCH_SIZING.amount(request.amount, request.period, grant.granted.period);
            if needed <= asked {
                grant.requested.amount = request.amount;
                return Ok(grant);
            }
            self.planner.release(grant.id)?;
            if needed > request.period {
                break;
            }
            asked = needed;
        }
        Err(EnforceError::Unenforceable {
            backend: BackendKind::Dispatch,
            reason: format!(
                "{} of every {} leaves no room for what the owner loses to dispatching ({})",
                request.amount,
                request.period,
                DISPATCH_SIZING.describe()
            ),
        })
    }

    /// Prepares a thread for the dispatcher of `cpu`. With [`PIN_DISPATCHED`] off, a thread free
    /// to run on every CPU stays free (a raised thread that a kernel deadline entity preempts is
    /// then pushed to another CPU by the RT balancer instead of waiting); a thread its program
    /// confined keeps its confinement if it includes `cpu`, pinned to `cpu`.
    pub(super) fn pin_for_dispatch(&mut self, tid: u32, cpu: usize) -> Result<(), EnforceError> {
        let saved = self.save(tid)?;
        let free = self
            .facts
            .cpus
            .iter()
            .all(|online| saved.affinity.contains(online));
        if free && !PIN_DISPATCHED {
            return Ok(());
        }
        if !saved.affinity.contains(&cpu) {
            return Err(EnforceError::Unenforceable {
                backend: BackendKind::Dispatch,
                reason: format!(
                    "thread {tid} is confined to CPUs {:?}, and the plan placed it on CPU {cpu}",
                    saved.affinity
                ),
            });
        }
        thread_control::set_thread_affinity(tid, &[cpu])
            .map_err(system(format!("pinning thread {tid} to CPU {cpu}")))
    }

    pub(super) fn enforce_dispatch(
        &mut self,
        grant: &rtlab_plan::Grant,
        threads: &[u32],
        grants_before: &[rtlab_plan::Grant],
    ) -> Result<EnforcedGrant, EnforceError> {
        for &tid in threads {
            self.pin_for_dispatch(tid, grant.cpu)?;
            if let Some(managed) = self.threads.get_mut(&tid) {
                managed.grant = Some(grant.id);
            }
        }
        let enforced = EnforcedGrant {
            grant: grant.clone(),
            backend: BackendKind::Dispatch,
            cpu: Some(grant.cpu),
            deadline_params: None,
            kernel_admission: KernelAdmission::NotApplicable,
            threads: threads.to_vec(),
            reclaim: false,
        };
        self.grants.insert(grant.id, enforced.clone());
        self.sync_dispatch(grants_before)?;
        Ok(enforced)
    }
}
