//! A deterministic, in-process [`Enforcement`] for tests: the real planner decides, nothing
//! touches the kernel, and a shared log says which threads are "managed" and whether everything
//! was reverted. Used by the daemon's registry unit tests and integration tests; never by the
//! shipped daemon.

use rtlab_core::Nanos;
use rtlab_plan::{ConstraintId, GrantId, Owner, Planner};
use rtlab_sched::enforce::{
    BackendKind, ConstraintEnd, ConstraintRequest, DeadlineParams, EnforceError, EnforcedGrant,
    Enforcement, KernelAdmission, ReserveRequest,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// What the fake did, for the test to check.
#[derive(Debug, Default)]
pub struct FakeLog {
    /// Threads currently under a reservation.
    pub managed: BTreeSet<u32>,
    pub revert_all_calls: usize,
    /// Grants released, in order.
    pub released: Vec<u64>,
}

pub struct FakeEnforcement {
    planner: Planner,
    grants: BTreeMap<GrantId, EnforcedGrant>,
    thread_grants: BTreeMap<u32, GrantId>,
    constraints: BTreeMap<ConstraintId, (Nanos, Nanos)>,
    log: Arc<Mutex<FakeLog>>,
}

impl FakeEnforcement {
    /// Two CPUs, a 1 ms quantum, the planner's default cap.
    pub fn new() -> (FakeEnforcement, Arc<Mutex<FakeLog>>) {
        let log = Arc::new(Mutex::new(FakeLog::default()));
        (
            FakeEnforcement {
                planner: Planner::new(2, Nanos::from_millis(1), rtlab_plan::DEFAULT_CAP)
                    .expect("a valid planner"),
                grants: BTreeMap::new(),
                thread_grants: BTreeMap::new(),
                constraints: BTreeMap::new(),
                log: Arc::clone(&log),
            },
            log,
        )
    }

    fn log(&self) -> std::sync::MutexGuard<'_, FakeLog> {
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Enforcement for FakeEnforcement {
    fn default_backend(&self) -> BackendKind {
        BackendKind::Deadline
    }

    fn reserve(&mut self, request: ReserveRequest) -> Result<EnforcedGrant, EnforceError> {
        if let Some(tid) = request
            .threads
            .iter()
            .find(|tid| self.thread_grants.contains_key(tid))
        {
            return Err(EnforceError::ThreadAlreadyManaged(*tid));
        }
        let grant = self
            .planner
            .reserve(request.owner, request.amount, request.period)?;
        let backend = request.backend.unwrap_or(BackendKind::Deadline);
        let enforced = EnforcedGrant {
            backend,
            cpu: None,
            deadline_params: (backend == BackendKind::Deadline).then_some(DeadlineParams {
                runtime: grant.granted.amount,
                deadline: grant.granted.period,
                period: grant.granted.period,
            }),
            kernel_admission: match backend {
                BackendKind::Deadline => KernelAdmission::Accepted,
                BackendKind::Dispatch => KernelAdmission::NotApplicable,
            },
            threads: request.threads.clone(),
            reclaim: request.reclaim && backend == BackendKind::Deadline,
            grant,
        };
        for tid in &request.threads {
            self.thread_grants.insert(*tid, enforced.grant.id);
        }
        self.log().managed.extend(request.threads.iter().copied());
        self.grants.insert(enforced.grant.id, enforced.clone());
        Ok(enforced)
    }

    fn add_threads(&mut self, grant: GrantId, threads: &[u32]) -> Result<(), EnforceError> {
        if !self.grants.contains_key(&grant) {
            return Err(rtlab_plan::PlannerError::UnknownGrant(grant.0).into());
        }
        if let Some(tid) = threads
            .iter()
            .find(|tid| self.thread_grants.contains_key(tid))
        {
            return Err(EnforceError::ThreadAlreadyManaged(*tid));
        }
        let enforced = self.grants.get_mut(&grant).expect("checked");
        enforced.threads.extend_from_slice(threads);
        for tid in threads {
            self.thread_grants.insert(*tid, grant);
        }
        self.log().managed.extend(threads.iter().copied());
        Ok(())
    }

    fn remove_thread(&mut self, thread: u32) -> Result<(GrantId, usize), EnforceError> {
        let grant = self
            .thread_grants
            .remove(&thread)
            .ok_or(EnforceError::ThreadNotManaged(thread))?;
        let enforced = self.grants.get_mut(&grant).expect("a known grant");
        enforced.threads.retain(|tid| *tid != thread);
        let remaining = enforced.threads.len();
        self.log().managed.remove(&thread);
        Ok((grant, remaining))
    }

    fn resize(
        &mut self,
        grant: GrantId,
        amount: Nanos,
        period: Nanos,
    ) -> Result<EnforcedGrant, EnforceError> {
        let resized = self.planner.resize(grant, amount, period)?;
        let enforced = self.grants.get_mut(&grant).expect("the planner knew it");
        if enforced.backend == BackendKind::Deadline {
            enforced.deadline_params = Some(DeadlineParams {
                runtime: resized.granted.amount,
                deadline: resized.granted.period,
                period: resized.granted.period,
            });
        }
        enforced.grant = resized;
        Ok(enforced.clone())
    }

    fn release(&mut self, grant: GrantId) -> Result<(), EnforceError> {
        self.planner.release(grant)?;
        let enforced = self.grants.remove(&grant).expect("the planner knew it");
        for tid in &enforced.threads {
            self.thread_grants.remove(tid);
        }
        let mut log = self.log();
        for tid in &enforced.threads {
            log.managed.remove(tid);
        }
        log.released.push(grant.0);
        Ok(())
    }

    fn grants(&self) -> Vec<EnforcedGrant> {
        self.grants.values().cloned().collect()
    }

    fn reserved_fractions(&self) -> Vec<f64> {
        self.planner.reserved_fractions()
    }

    fn begin_constraint(
        &mut self,
        request: ConstraintRequest,
    ) -> Result<ConstraintId, EnforceError> {
        let ConstraintRequest {
            thread,
            start,
            estimate,
            deadline,
            ..
        } = request;
        let owner = self
            .thread_grants
            .get(&thread)
            .and_then(|grant| self.grants.get(grant))
            .map_or(Owner::Thread(thread), |enforced| {
                enforced.grant.owner.clone()
            });
        let id = self
            .planner
            .begin_constraint(owner, start, estimate, deadline)?;
        self.constraints.insert(id, (start, estimate));
        Ok(id)
    }

    fn end_constraint(&mut self, id: ConstraintId) -> Result<ConstraintEnd, EnforceError> {
        let (start, estimate) = self
            .constraints
            .remove(&id)
            .ok_or(rtlab_plan::PlannerError::UnknownConstraint(id.0))?;
        // Deterministic: the work took exactly its estimate.
        let taken = self
            .planner
            .end_constraint(id, Nanos(start.0 + estimate.0))?;
        Ok(ConstraintEnd {
            used: estimate,
            met_deadline: taken.met_deadline,
        })
    }

    fn revert_all(&mut self) {
        let mut log = self.log();
        log.revert_all_calls += 1;
        log.managed.clear();
        drop(log);
        self.grants.clear();
        self.thread_grants.clear();
        self.constraints.clear();
    }
}
