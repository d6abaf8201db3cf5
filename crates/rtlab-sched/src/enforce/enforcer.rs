//! [`Enforcer`]: the real [`Enforcement`], over the planner, the journal and the two backends.
//!
//! Order of every change: planner admission → backend's own admission → journal line (written, see `journal`) →
//! the kernel change. On any failure the steps already taken are undone, so an error leaves the
//! machine and the planner as they were.
//!
//! This file holds that order (reserve, add, remove, release, resize, revert); the parts it calls
//! are in `enforcer/`, one job each: `machine` (what the machine offers), `save_restore` (a
//! thread's policy saved, put back, and the next start's repair), `deadline` and `dispatching`
//! (each backend's side), `partitions` (which CPU, when a partition goes), `constraints` (Time
//! Constraints).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rtlab_core::Nanos;
use rtlab_sys::cpuset::TasksFile;
use rtlab_sys::sched::Policy;
use rtlab_sys::thread_control;

use super::deadline_map::deadline_params;
use super::dispatch::{Dispatcher, DispatcherStats};
use super::journal::{Journal, JournalEntry, SavedThread};
use super::placement::{Placement, Unplaceable};
use super::{
    BackendKind, ConstraintEnd, ConstraintRequest, EnforceError, EnforcedGrant, Enforcement,
    HeldSource, KernelHeld, ReserveRequest,
};
use rtlab_plan::{ConstraintId, GrantId, Planner, DEFAULT_CAP};

mod constraints;
mod deadline;
mod dispatching;
mod machine;
mod partitions;
mod save_restore;

pub use constraints::thread_cpu_time;
use constraints::ConstraintState;
pub use machine::MachineFacts;

/// The planner's quantum under enforcement: periods are power-of-two multiples of it.
pub const ENFORCE_QUANTUM: Nanos = Nanos(250_000);
/// Whether the dispatch backend pins threads that may run anywhere to their plan's CPU.
pub const PIN_DISPATCHED: bool = true;
/// How far ahead a new dispatch table is installed, at the least, so every dispatcher sees it
/// before it applies.
pub const SWITCH_MARGIN: Nanos = Nanos(2_000_000);

pub use rtlab_core::enforce_repair::Repair;

#[derive(Clone, Debug)]
struct ManagedThread {
    saved: SavedThread,
    /// A pidfd of the saved thread (`saved.start_time` checked after opening it), for the
    /// dispatcher; `None` where the kernel has no thread pidfds.
    pidfd: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
    /// Placed in the cpuset partition of this CPU, moved there from the cpuset directory given.
    placed: Option<(usize, PathBuf)>,
    /// Held by a reservation (its grant) or only by a constraint.
    grant: Option<GrantId>,
    /// A constraint changed it (one-shot budget or pinning) and restores it at its end.
    constraint: Option<ConstraintId>,
}

/// The real enforcement: planner + journal + SCHED_DEADLINE and dispatch backends.
pub struct Enforcer {
    state_dir: PathBuf,
    facts: MachineFacts,
    default_backend: BackendKind,
    planner: Planner,
    journal: Journal,
    /// CLOCK_MONOTONIC of plan time 0.
    epoch: u64,
    grants: BTreeMap<GrantId, EnforcedGrant>,
    threads: BTreeMap<u32, ManagedThread>,
    constraints: BTreeMap<ConstraintId, ConstraintState>,
    dispatcher: Option<Dispatcher>,
    /// Per-CPU cpuset partitions for `deadline`, or why there are none here.
    placement: Result<Placement, Unplaceable>,
    /// Why the last `deadline` reservation could not be placed, when it could not.
    placement_note: Option<String>,
    /// How long an emptied partition is kept for the next reservation on its CPU.
    placement_linger: Duration,
    /// Partitions without a thread, and when each is removed (see [`Enforcer::set_placement_linger`]).
    idle_partitions: BTreeMap<usize, Instant>,
    /// /proc/TID/stat of the threads of the request being handled, read once by
    /// `check_threads_free` and used by `save` and the placement (cleared after each request).
    request_stats: BTreeMap<u32, thread_control::ThreadStat>,
    /// `tasks` files of the cpusets placed threads go back to, kept open (see `move_thread_back`).
    tasks_files: BTreeMap<PathBuf, TasksFile>,
    repair: Repair,
}

fn system(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> EnforceError {
    let context = context.into();
    move |source| EnforceError::System { context, source }
}

impl Enforcer {
    /// Opens the enforcer: repairs what a previous instance journalled in `state_dir` and did not
    /// undo (threads still alive and the same get their old policy and affinity back), then starts
    /// with no reservation. `default_backend`: `None` picks the best for this machine.
    pub fn open(
        state_dir: &Path,
        default_backend: Option<BackendKind>,
    ) -> Result<Enforcer, EnforceError> {
        let facts = MachineFacts::detect()?;
        Enforcer::open_with(state_dir, default_backend, facts)
    }

    /// [`Enforcer::open`] with given machine facts (tests, or a caller that detected them).
    pub fn open_with(
        state_dir: &Path,
        default_backend: Option<BackendKind>,
        facts: MachineFacts,
    ) -> Result<Enforcer, EnforceError> {
        let (pending, _) = Journal::read_pending(state_dir).map_err(system(format!(
            "reading the journal in {}",
            state_dir.display()
        )))?;
        let repair = Enforcer::repair(state_dir)?;
        // What could not be undone stays in the fresh journal for the next start.
        let mut journal = Journal::create(state_dir).map_err(system(format!(
            "creating the journal in {}",
            state_dir.display()
        )))?;
        let mut kept = Vec::new();
        for saved in pending
            .threads
            .iter()
            .filter(|saved| repair.failed.iter().any(|(tid, _)| *tid == saved.tid))
        {
            kept.push(JournalEntry::Save(saved.clone()));
            if let Some((tid, start_time, from)) = pending
                .moved_threads
                .iter()
                .find(|moved| moved.0 == saved.tid && moved.1 == saved.start_time)
            {
                kept.push(JournalEntry::CpusetThread {
                    tid: *tid,
                    start_time: *start_time,
                    from: from.clone(),
                });
            }
        }
        for (directory, file, old_value) in &pending.settings {
            let current = rtlab_sys::cpuset::read_value(directory, file).ok();
            if current.as_deref().is_some_and(|value| value != old_value) {
                kept.push(JournalEntry::CpusetSet {
                    directory: directory.clone(),
                    file: file.clone(),
                    old_value: old_value.clone(),
                });
            }
        }
        for directory in pending.directories.iter().filter(|dir| dir.exists()) {
            kept.push(JournalEntry::CpusetMade(directory.clone()));
        }
        for entry in &kept {
            journal.append(entry).map_err(system(format!(
                "writing the journal in {}",
                state_dir.display()
            )))?;
        }
        let placement = Placement::new(&facts.cpus);
        let n_cpus = facts.cpus.iter().max().map_or(1, |&cpu| cpu + 1);
        let planner =
            Planner::new(n_cpus, ENFORCE_QUANTUM, DEFAULT_CAP).map_err(EnforceError::Planner)?;
        let default_backend = default_backend.unwrap_or_else(|| facts.best_backend());
        Ok(Enforcer {
            state_dir: state_dir.to_owned(),
            facts,
            default_backend,
            planner,
            journal,
            epoch: rtlab_sys::clock::monotonic_ns(),
            grants: BTreeMap::new(),
            threads: BTreeMap::new(),
            constraints: BTreeMap::new(),
            dispatcher: None,
            placement,
            placement_note: None,
            placement_linger: Duration::ZERO,
            idle_partitions: BTreeMap::new(),
            request_stats: BTreeMap::new(),
            tasks_files: BTreeMap::new(),
            repair,
        })
    }

    /// What `open` repaired.
    pub fn repaired(&self) -> &Repair {
        &self.repair
    }

    pub fn facts(&self) -> &MachineFacts {
        &self.facts
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// CLOCK_MONOTONIC at plan time 0.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The dispatchers' own measurements (empty when none runs).
    pub fn dispatcher_stats(&self) -> Vec<DispatcherStats> {
        self.dispatcher
            .as_ref()
            .map(Dispatcher::stats)
            .unwrap_or_default()
    }

    /// Read-only view of the planner (the plan the dispatcher follows, utilisation).
    pub fn planner(&self) -> &Planner {
        &self.planner
    }

    /// The reservation `grant` as enforced, or the planner's error for a grant it does not know.
    fn enforced_grant(&self, grant: GrantId) -> Result<EnforcedGrant, EnforceError> {
        self.grants
            .get(&grant)
            .cloned()
            .ok_or(EnforceError::Planner(
                rtlab_plan::PlannerError::UnknownGrant(grant.0),
            ))
    }

    /// Takes `thread` out of its reservation: a thread still under a constraint only loses the
    /// grant (the constraint's end restores it), any other gets its old policy back.
    fn leave_grant(&mut self, thread: u32) -> Result<(), EnforceError> {
        let constrained = self
            .threads
            .get(&thread)
            .is_some_and(|managed| managed.constraint.is_some());
        if !constrained {
            return self.restore(thread);
        }
        if let Some(managed) = self.threads.get_mut(&thread) {
            managed.grant = None;
        }
        Ok(())
    }

    /// Checks that no thread is managed yet and each exists, keeping what its /proc/TID/stat says
    /// for the rest of the request (`request_stats`).
    fn check_threads_free(&mut self, threads: &[u32]) -> Result<(), EnforceError> {
        self.request_stats.clear();
        for &tid in threads {
            if let Some(managed) = self.threads.get(&tid) {
                if managed.grant.is_some() || managed.constraint.is_some() {
                    return Err(EnforceError::ThreadAlreadyManaged(tid));
                }
            }
            let stat =
                thread_control::thread_stat(tid).map_err(|_| EnforceError::NoSuchThread(tid))?;
            self.request_stats.insert(tid, stat);
        }
        Ok(())
    }

    fn plan_time(&self, monotonic: u64) -> u64 {
        monotonic.saturating_sub(self.epoch)
    }

    /// Compacts the journal once it has grown by `bytes` (default
    /// [`super::journal::COMPACT_AFTER_BYTES`]); tests use a small bound.
    pub fn set_journal_compact_after(&mut self, bytes: u64) {
        self.journal.set_compact_after(bytes);
    }

    /// The journal's size now and how many times it was compacted.
    pub fn journal_size_and_compactions(&self) -> (u64, u64) {
        (self.journal.len_bytes(), self.journal.compactions())
    }
}

impl Enforcer {
    fn reserve_now(&mut self, request: ReserveRequest) -> Result<EnforcedGrant, EnforceError> {
        let backend = request
            .backend
            .unwrap_or_else(|| self.backend_for(&request));
        self.check_threads_free(&request.threads)?;
        if backend == BackendKind::Deadline && request.threads.len() > 1 {
            return Err(EnforceError::Unenforceable {
                backend,
                reason: "a SCHED_DEADLINE budget belongs to one thread; an activity of several \
                         threads needs the dispatch backend"
                    .into(),
            });
        }
        let grants_before = self.planner.grants();
        let grant = match backend {
            BackendKind::Deadline => {
                self.planner
                    .reserve(request.owner.clone(), request.amount, request.period)?
            }
            BackendKind::Dispatch => self.reserve_with_edge_allowance(&request)?,
        };
        let outcome = match backend {
            BackendKind::Deadline => {
                self.enforce_deadline(&grant, &request.threads, request.reclaim)
            }
            BackendKind::Dispatch => {
                self.enforce_dispatch(&grant, &request.threads, &grants_before)
            }
        };
        match outcome {
            Ok(enforced) => Ok(enforced),
            Err(error) => {
                let _ = self.planner.release(grant.id);
                self.grants.remove(&grant.id);
                self.undo_threads(&request.threads);
                if backend == BackendKind::Dispatch {
                    let _ = self.sync_dispatch(&[]);
                    self.stop_dispatcher_if_idle();
                }
                Err(error)
            }
        }
    }

    fn add_threads_now(&mut self, grant: GrantId, threads: &[u32]) -> Result<(), EnforceError> {
        let enforced = self.enforced_grant(grant)?;
        self.check_threads_free(threads)?;
        match enforced.backend {
            BackendKind::Deadline => {
                if enforced.threads.len() + threads.len() > 1 {
                    return Err(EnforceError::Unenforceable {
                        backend: BackendKind::Deadline,
                        reason: "a SCHED_DEADLINE budget belongs to one thread; an activity of \
                                 several threads needs the dispatch backend"
                            .into(),
                    });
                }
                let params =
                    enforced
                        .deadline_params
                        .ok_or_else(|| EnforceError::Unenforceable {
                            backend: BackendKind::Deadline,
                            reason: "grant has no deadline parameters".into(),
                        })?;
                for &tid in threads {
                    if let Err(error) =
                        self.set_deadline(tid, params, enforced.cpu, enforced.reclaim)
                    {
                        self.undo_threads(threads);
                        return Err(error);
                    }
                    if let Some(managed) = self.threads.get_mut(&tid) {
                        managed.grant = Some(grant);
                    }
                }
            }
            BackendKind::Dispatch => {
                for &tid in threads {
                    if let Err(error) = self.pin_for_dispatch(tid, enforced.grant.cpu) {
                        self.undo_threads(threads);
                        return Err(error);
                    }
                    if let Some(managed) = self.threads.get_mut(&tid) {
                        managed.grant = Some(grant);
                    }
                }
            }
        }
        if let Some(entry) = self.grants.get_mut(&grant) {
            entry.threads.extend_from_slice(threads);
        }
        if enforced.backend == BackendKind::Dispatch {
            self.sync_dispatch(&[])?;
        }
        Ok(())
    }
}

impl Enforcement for Enforcer {
    fn default_backend(&self) -> BackendKind {
        self.default_backend
    }

    fn kernel_share(&self, request: &ReserveRequest) -> Option<f64> {
        let backend = request.backend.unwrap_or_else(|| self.backend_for(request));
        match backend {
            BackendKind::Deadline => {
                deadline_params(request.amount, request.period, self.facts.granularity)
                    .ok()
                    .map(|params| params.runtime.0 as f64 / params.period.0.max(1) as f64)
            }
            BackendKind::Dispatch => None,
        }
    }

    fn reserve(&mut self, request: ReserveRequest) -> Result<EnforcedGrant, EnforceError> {
        let result = self.reserve_now(request);
        self.request_stats.clear();
        result
    }

    fn add_threads(&mut self, grant: GrantId, threads: &[u32]) -> Result<(), EnforceError> {
        let result = self.add_threads_now(grant, threads);
        self.request_stats.clear();
        result
    }

    fn remove_thread(&mut self, thread: u32) -> Result<(GrantId, usize), EnforceError> {
        let grant = self
            .threads
            .get(&thread)
            .and_then(|managed| managed.grant)
            .ok_or(EnforceError::ThreadNotManaged(thread))?;
        let backend = self.grants.get(&grant).map(|enforced| enforced.backend);
        let remaining = match self.grants.get_mut(&grant) {
            Some(enforced) => {
                enforced.threads.retain(|&tid| tid != thread);
                enforced.threads.len()
            }
            None => 0,
        };
        if backend == Some(BackendKind::Dispatch) {
            // Out of the table first, so no dispatcher raises it again after the restore.
            self.sync_dispatch(&[])?;
            if let Some(dispatcher) = &self.dispatcher {
                dispatcher.update(|_| ());
            }
        }
        self.leave_grant(thread)?;
        Ok((grant, remaining))
    }

    fn release(&mut self, grant: GrantId) -> Result<(), EnforceError> {
        let enforced = self.enforced_grant(grant)?;
        self.planner.release(grant)?;
        self.grants.remove(&grant);
        if enforced.backend == BackendKind::Dispatch {
            // Releasing never moves the others' slots; the owner simply leaves the table. Should
            // the planner's plan differ, the switch is checked against the grants left.
            let remaining = self.planner.grants();
            if self.sync_dispatch(&remaining).is_err() {
                // Keep the installed schedule (the released owner's slots just raise nobody).
                let owners = self.dispatch_owners();
                let held = self.held_times();
                if let Some(dispatcher) = &self.dispatcher {
                    dispatcher.update(|table| {
                        table.owners = owners;
                        table.held = held;
                    });
                }
            }
        }
        let mut first_error = None;
        for tid in enforced.threads {
            if let Err(error) = self.leave_grant(tid) {
                first_error.get_or_insert(error);
            }
        }
        self.stop_dispatcher_if_idle();
        match first_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    fn resize(
        &mut self,
        grant: GrantId,
        amount: Nanos,
        period: Nanos,
    ) -> Result<EnforcedGrant, EnforceError> {
        let enforced = self.enforced_grant(grant)?;
        if enforced.backend != BackendKind::Deadline {
            return Err(EnforceError::Unenforceable {
                backend: enforced.backend,
                reason: "only a deadline reservation can change its size in place; release it \
                         and reserve again"
                    .into(),
            });
        }
        let planner_before = self.planner.clone();
        let resized = self.planner.resize(grant, amount, period)?;
        let outcome = self.resize_deadline(&enforced, &resized);
        if outcome.is_err() {
            self.planner = planner_before;
        }
        outcome
    }

    fn grants(&self) -> Vec<EnforcedGrant> {
        self.grants.values().cloned().collect()
    }

    fn reserved_fractions(&self) -> Vec<f64> {
        self.planner.reserved_fractions()
    }

    fn held_by_kernel(&self, grant: GrantId) -> Option<KernelHeld> {
        let enforced = self.grants.get(&grant)?;
        match enforced.backend {
            BackendKind::Deadline => {
                let tid = *enforced.threads.first()?;
                let policy = rtlab_sys::sched::thread_policy(tid).ok()?;
                Some(match policy {
                    Policy::Deadline {
                        runtime_ns,
                        deadline_ns,
                        period_ns,
                    } => KernelHeld {
                        runtime: Nanos(runtime_ns),
                        window: Nanos(period_ns),
                        source: HeldSource::SchedGetattr {
                            tid,
                            deadline: Nanos(deadline_ns),
                            reclaim: rtlab_sys::sched::thread_sched_flags(tid)
                                .is_ok_and(|flags| flags & thread_control::SCHED_FLAG_RECLAIM != 0),
                        },
                    },
                    other => KernelHeld {
                        runtime: Nanos(0),
                        window: Nanos(0),
                        source: HeldSource::NotDeadline {
                            tid,
                            policy: other.name().to_owned(),
                        },
                    },
                })
            }
            BackendKind::Dispatch => {
                let owner = &enforced.grant.owner;
                let schedule = self.dispatcher.as_ref()?.schedule_of(owner)?;
                let window = enforced.grant.granted.period;
                let (runtime, slots_per_window) =
                    super::dispatch::slot_time_per_window(&schedule, owner, window)?;
                Some(KernelHeld {
                    runtime,
                    window,
                    source: HeldSource::DispatcherSlots {
                        cpu: schedule.cpu,
                        slots_per_window,
                    },
                })
            }
        }
    }

    fn begin_constraint(
        &mut self,
        request: ConstraintRequest,
    ) -> Result<ConstraintId, EnforceError> {
        self.begin_time_constraint(request)
    }

    fn constraint_held_fraction(&self, id: ConstraintId) -> Option<f64> {
        self.constraints.get(&id)?.held_fraction
    }

    fn end_constraint(&mut self, id: ConstraintId) -> Result<ConstraintEnd, EnforceError> {
        self.end_time_constraint(id)
    }

    fn revert_all(&mut self) {
        if let Some(mut dispatcher) = self.dispatcher.take() {
            dispatcher.stop();
        }
        let tids: Vec<u32> = self.threads.keys().copied().collect();
        for tid in tids {
            let _ = self.restore(tid);
        }
        for id in self.constraints.keys().copied().collect::<Vec<_>>() {
            let _ = self.planner.end_constraint(id, Nanos(u64::MAX / 2));
        }
        self.constraints.clear();
        for id in self.grants.keys().copied().collect::<Vec<_>>() {
            let _ = self.planner.release(id);
        }
        self.grants.clear();
        self.idle_partitions.clear();
        if let Ok(placement) = &mut self.placement {
            for cpu in placement.partitioned_cpus() {
                let _ = placement.unpartition(&mut self.journal, cpu);
            }
        }
    }

    fn expire(&mut self, now: Instant) -> Option<Instant> {
        let due: Vec<usize> = self
            .idle_partitions
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(cpu, _)| *cpu)
            .collect();
        for cpu in due {
            self.idle_partitions.remove(&cpu);
            if !self.partition_in_use(cpu) {
                if let Ok(placement) = &mut self.placement {
                    let _ = placement.unpartition(&mut self.journal, cpu);
                }
            }
        }
        self.idle_partitions.values().min().copied()
    }
}

impl Enforcer {
    /// The backend for a request that names none: the default, unless that is `deadline` and it
    /// cannot take this request (period too short for the tick, several threads, or no room under
    /// its own admission), in which case `dispatch`.
    fn backend_for(&self, request: &ReserveRequest) -> BackendKind {
        if self.default_backend != BackendKind::Deadline {
            return self.default_backend;
        }
        let fits = request.threads.len() <= 1
            && deadline_params(request.amount, request.period, self.facts.granularity)
                .is_ok_and(|params| self.admit_deadline(params).is_ok());
        if fits {
            BackendKind::Deadline
        } else {
            BackendKind::Dispatch
        }
    }
}

impl Drop for Enforcer {
    fn drop(&mut self) {
        self.revert_all();
    }
}

#[cfg(test)]
mod tests {
    use super::super::deadline_map::Granularity;
    use super::*;
    use rtlab_plan::Owner;

    fn facts(fair_server: bool) -> MachineFacts {
        MachineFacts {
            cpus: vec![0, 1],
            granularity: Granularity {
                tick: Nanos::from_millis(4),
                hrtick_dl: None,
            },
            fair_server,
            fair_server_share: if fair_server { 0.05 } else { 0.0 },
            fair_server_visible: false,
            deadline_limit: 0.95,
        }
    }

    fn request(amount: Nanos, period: Nanos, threads: Vec<u32>) -> ReserveRequest {
        ReserveRequest {
            owner: Owner::Activity("a".into()),
            threads,
            amount,
            period,
            backend: None,
            reclaim: false,
        }
    }

    #[test]
    fn the_default_backend_follows_the_machine_and_falls_back_per_request() {
        let directory = std::env::temp_dir().join(format!(
            "rtlab-enforcer-unit-{}-{}",
            std::process::id(),
            line!()
        ));
        let enforcer = Enforcer::open_with(&directory, None, facts(true)).unwrap();
        assert_eq!(enforcer.default_backend(), BackendKind::Deadline);
        let ms = Nanos::from_millis;
        assert_eq!(
            enforcer.backend_for(&request(ms(2), ms(10), vec![1])),
            BackendKind::Deadline
        );
        // 500 µs of every 2 ms cannot be policed at a 4 ms tick: the dispatcher takes it.
        assert_eq!(
            enforcer.backend_for(&request(Nanos::from_micros(500), ms(2), vec![1])),
            BackendKind::Dispatch
        );
        // An activity of several threads needs the dispatcher.
        assert_eq!(
            enforcer.backend_for(&request(ms(2), ms(10), vec![1, 2])),
            BackendKind::Dispatch
        );
        drop(enforcer);
        let enforcer = Enforcer::open_with(&directory, None, facts(false)).unwrap();
        assert_eq!(enforcer.default_backend(), BackendKind::Dispatch);
        drop(enforcer);
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
