//! [`Enforcer`]: the real [`Enforcement`], over the planner, the journal and the two backends.
//!
//! Order of every change: planner admission → backend's own admission → journal line (written, see `journal`) →
//! the kernel change. On any failure the steps already taken are undone, so an error leaves the
//! machine and the planner as they were.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rtlab_core::Nanos;
use rtlab_sys::cpuset::TasksFile;
use rtlab_sys::sched::Policy;
use rtlab_sys::thread_control::{self, SCHED_FLAG_RESET_ON_FORK};

use super::deadline_map::{deadline_params, DeadlineAdmission, Granularity};
use super::dispatch::{
    DispatchTable, DispatchedThread, Dispatcher, DispatcherStats, HeldTime, DISPATCH_SIZING,
};
use super::journal::{Journal, JournalEntry, SavedThread};
use super::placement::{self, Placement, Unplaceable};
use super::switch::{check_switch, switch_time};
use super::{
    BackendKind, ConstraintEnd, ConstraintRequest, DeadlineParams, EnforceError, EnforcedGrant,
    Enforcement, HeldSource, KernelAdmission, KernelHeld, ReserveRequest,
};
use rtlab_plan::{ConstraintId, GrantId, Owner, Planner, DEFAULT_CAP};

/// The planner's quantum under enforcement: periods are power-of-two multiples of it.
pub const ENFORCE_QUANTUM: Nanos = Nanos(250_000);
/// Whether the dispatch backend pins threads that may run anywhere to their plan's CPU.
pub const PIN_DISPATCHED: bool = true;
/// How far ahead a new dispatch table is installed, at the least, so every dispatcher sees it
/// before it applies.
pub const SWITCH_MARGIN: Nanos = Nanos(2_000_000);

pub use rtlab_core::enforce_repair::Repair;

/// What the machine offers the backends, detected at `open`.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineFacts {
    pub cpus: Vec<usize>,
    pub granularity: Granularity,
    /// The kernel runs SCHED_OTHER through a deadline server (Linux 6.12 and later), which takes
    /// up to its share (5 %) from real-time threads whenever normal threads starve.
    pub fair_server: bool,
    /// The fair server's share of each CPU, which the kernel's deadline admission counts: read
    /// from debugfs where visible, else the kernel's default (50 ms of every second).
    pub fair_server_share: f64,
    /// Whether `fair_server_share` was read (true) or assumed (false).
    pub fair_server_visible: bool,
    /// The share of each CPU the kernel admits for deadline and RT in all
    /// (`sched_rt_runtime_us / sched_rt_period_us`).
    pub deadline_limit: f64,
}

/// The fair server's default share: 50 ms of every 1 s per CPU.
pub const FAIR_SERVER_DEFAULT_SHARE: f64 = 0.05;

/// The first kernel whose SCHED_OTHER runs through a deadline "fair server".
pub const FAIR_SERVER_SINCE: (u32, u32) = (6, 12);

impl MachineFacts {
    /// Detects the online CPUs, the deadline enforcement granularity and the fair server.
    pub fn detect() -> Result<MachineFacts, EnforceError> {
        let cpus = rtlab_sys::cpu::online_cpus().map_err(|source| EnforceError::System {
            context: "reading /sys/devices/system/cpu/online".into(),
            source,
        })?;
        let tick = thread_control::tick_ns().map_err(|source| EnforceError::System {
            context: "reading the tick (CLOCK_MONOTONIC_COARSE resolution)".into(),
            source,
        })?;
        let hrtick_dl = thread_control::hrtick_dl_enabled().unwrap_or(None);
        let fair_server = thread_control::kernel_release()
            .ok()
            .and_then(|release| thread_control::parse_kernel_version(&release))
            .is_some_and(|version| version >= FAIR_SERVER_SINCE);
        let read_share = cpus
            .first()
            .and_then(|&cpu| thread_control::fair_server_share(cpu).ok().flatten());
        let fair_server_share = match (fair_server, read_share) {
            (_, Some(share)) => share,
            (true, None) => FAIR_SERVER_DEFAULT_SHARE,
            (false, None) => 0.0,
        };
        Ok(MachineFacts {
            cpus,
            granularity: Granularity {
                tick: Nanos(tick),
                hrtick_dl,
            },
            fair_server,
            fair_server_share,
            fair_server_visible: read_share.is_some(),
            deadline_limit: thread_control::deadline_bandwidth_limit().unwrap_or(0.95),
        })
    }

    /// The backend that keeps "X in every window of Y" best here.
    ///
    /// With a fair server, only SCHED_DEADLINE outranks it: the dispatcher (SCHED_FIFO 99) and the
    /// threads it raises lose up to the server's whole budget in one piece (measured: 10 ms) when
    /// normal threads starve, so `deadline` is the default, and a request it cannot map (period
    /// shorter than `X + 2T` at a coarse tick) falls back to `dispatch` (see `Enforcer::reserve`).
    /// Without a fair server and without HRTICK_DL, the dispatcher's hrtimer precision wins.
    pub fn best_backend(&self) -> BackendKind {
        if self.fair_server || self.granularity.hrtick_dl == Some(true) {
            BackendKind::Deadline
        } else {
            BackendKind::Dispatch
        }
    }
}

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

#[derive(Clone, Debug)]
struct ConstraintState {
    thread: u32,
    cpu_time_at_begin: u64,
    deadline: u64,
    /// The share of a CPU a SCHED_DEADLINE one-shot budget holds (runtime / period, the tick's
    /// overrun included); `None` when the constraint is served otherwise.
    held_fraction: Option<f64>,
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

/// Puts a saved thread back if it is still the same thread. `Ok(false)`: it is gone. A thread
/// placed in a cpuset partition goes back to the cpuset `move_back` after it has left its policy
/// and before its affinity is restored (a cpuset move resets the affinity).
fn restore_saved(
    saved: &SavedThread,
    move_back: Option<&Path>,
    tasks_files: &mut BTreeMap<PathBuf, TasksFile>,
) -> std::io::Result<bool> {
    match thread_control::thread_start_time(saved.tid) {
        Ok(start) if start == saved.start_time => {}
        Ok(_) => return Ok(false),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(error),
    }
    let result = thread_control::set_thread_policy_with_flags(saved.tid, saved.policy, 0)
        .and_then(|()| match move_back {
            Some(directory) => move_thread_back(tasks_files, directory, saved.tid),
            None => Ok(()),
        })
        .and_then(|()| {
            if saved.affinity.is_empty() {
                Ok(())
            } else {
                thread_control::set_thread_affinity(saved.tid, &saved.affinity)
            }
        });
    match result {
        Ok(()) => Ok(true),
        // ESRCH: it exited between the check and the change.
        Err(error) if error.raw_os_error() == Some(3) => Ok(false),
        Err(error) => Err(error),
    }
}

/// How many cpusets' `tasks` files the enforcer keeps open for moving threads back.
const MAX_TASKS_FILES: usize = 16;

/// Moves `tid` back into the cpuset `directory` through its `tasks` file kept open in
/// `tasks_files` (opened at first use; an open costs more than the move, BENCHMARKS.md "The
/// daemon: reserve/release round trip"). A kept file that fails (its cpuset removed meanwhile) is
/// dropped and the move tried once more through a fresh one.
fn move_thread_back(
    tasks_files: &mut BTreeMap<PathBuf, TasksFile>,
    directory: &Path,
    tid: u32,
) -> std::io::Result<()> {
    if let Some(file) = tasks_files.get(directory) {
        if file.move_thread(tid).is_ok() {
            return Ok(());
        }
        tasks_files.remove(directory);
    }
    let file = TasksFile::open(directory)?;
    file.move_thread(tid)?;
    if tasks_files.len() >= MAX_TASKS_FILES {
        tasks_files.clear();
    }
    tasks_files.insert(directory.to_owned(), file);
    Ok(())
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

    /// Restores every thread a previous instance's journal in `state_dir` left changed, and
    /// removes the cpuset partitions it made (putting the top cpuset's setting back).
    pub fn repair(state_dir: &Path) -> Result<Repair, EnforceError> {
        let (pending, unreadable) = Journal::read_pending(state_dir).map_err(system(format!(
            "reading the journal in {}",
            state_dir.display()
        )))?;
        let mut repair = Repair {
            unreadable,
            ..Repair::default()
        };
        // Restore in reverse order of saving, so a thread saved twice ends at its first state.
        for saved in pending.threads.iter().rev() {
            let move_back = pending
                .moved_threads
                .iter()
                .find(|moved| moved.0 == saved.tid && moved.1 == saved.start_time)
                .map(|moved| moved.2.as_path());
            match restore_saved(saved, move_back, &mut BTreeMap::new()) {
                Ok(true) => repair.restored.push(saved.tid),
                Ok(false) => repair.gone.push(saved.tid),
                Err(error) => repair.failed.push((saved.tid, error.to_string())),
            }
        }
        // Threads restored above are back already; a thread moved but never saved (killed between
        // the two lines cannot happen: save comes first) would be moved back here.
        let mut rest = pending.clone();
        rest.moved_threads.retain(|moved| {
            !pending
                .threads
                .iter()
                .any(|saved| saved.tid == moved.0 && saved.start_time == moved.1)
        });
        repair.cpuset_failures = placement::repair(&rest, |tid, start_time| {
            thread_control::thread_start_time(tid).is_ok_and(|start| start == start_time)
        });
        repair.cpusets_removed = pending
            .directories
            .iter()
            .filter(|directory| !directory.exists())
            .cloned()
            .collect();
        // Partitions of rtlab processes that died with another journal (or none left).
        let (stale, failures) = placement::remove_stale();
        repair.cpusets_removed.extend(stale);
        repair.cpuset_failures.extend(failures);
        Ok(repair)
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

    /// Journals a thread's current policy and affinity, once, before the first change.
    fn save(&mut self, tid: u32) -> Result<SavedThread, EnforceError> {
        if let Some(managed) = self.threads.get(&tid) {
            return Ok(managed.saved.clone());
        }
        let start_time = match self.request_stats.get(&tid) {
            Some(stat) => stat.start_time,
            None => thread_control::thread_start_time(tid)
                .map_err(|_| EnforceError::NoSuchThread(tid))?,
        };
        let policy = rtlab_sys::sched::thread_policy(tid)
            .map_err(system(format!("reading the policy of thread {tid}")))?;
        let affinity = thread_control::thread_affinity(tid)
            .map_err(system(format!("reading the CPU affinity of thread {tid}")))?;
        let saved = SavedThread {
            tid,
            start_time,
            policy,
            affinity,
        };
        self.journal
            .append(&JournalEntry::Save(saved.clone()))
            .map_err(system(format!(
                "writing the journal {}",
                self.journal.path().display()
            )))?;
        // Opened by tid, so it names the saved thread only if that thread still has the start
        // time saved once it is open.
        let pidfd = rtlab_sys::ipc::pidfd_open_thread(tid)
            .ok()
            .filter(|_| thread_control::thread_start_time(tid).ok() == Some(start_time))
            .map(std::sync::Arc::new);
        self.threads.insert(
            tid,
            ManagedThread {
                saved: saved.clone(),
                pidfd,
                placed: None,
                grant: None,
                constraint: None,
            },
        );
        Ok(saved)
    }

    /// Restores a managed thread and journals that it is done. Errors on a thread that still
    /// exists are returned (the journal then keeps it for the next start).
    fn restore(&mut self, tid: u32) -> Result<(), EnforceError> {
        let Some(managed) = self.threads.remove(&tid) else {
            return Ok(());
        };
        let move_back = managed.placed.as_ref().map(|(_, from)| from.as_path());
        let restored = restore_saved(&managed.saved, move_back, &mut self.tasks_files);
        if let Some((cpu, _)) = &managed.placed {
            self.unpartition_if_empty(*cpu);
        }
        match restored {
            Ok(_) => {
                self.journal
                    .append(&JournalEntry::Done {
                        tid,
                        start_time: managed.saved.start_time,
                    })
                    .map_err(system(format!(
                        "writing the journal {}",
                        self.journal.path().display()
                    )))?;
                Ok(())
            }
            Err(source) => Err(EnforceError::System {
                context: format!("restoring thread {tid}'s policy"),
                source,
            }),
        }
    }

    fn deadline_params_in_force(&self) -> Vec<DeadlineParams> {
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
    fn admit_deadline(&self, params: DeadlineParams) -> Result<(), EnforceError> {
        self.admission()
            .admit(&self.deadline_params_in_force(), params)
            .map_err(|reason| EnforceError::Unenforceable {
                backend: BackendKind::Deadline,
                reason,
            })
    }

    /// Gives `tid` SCHED_DEADLINE `params` (with SCHED_FLAG_RECLAIM when `reclaim`), first in the
    /// partition of `cpu` when one is asked for and possible. Returns the CPU it was placed on.
    fn set_deadline(
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

    fn plan_time(&self, monotonic: u64) -> u64 {
        monotonic.saturating_sub(self.epoch)
    }

    /// Whether `deadline` reservations get a cpuset partition of their own CPU here (the CPUs
    /// partitioned now); the reason if not, or why the last one could not be placed.
    pub fn placement(&self) -> Result<Vec<usize>, String> {
        match (&self.placement, &self.placement_note) {
            (Err(reason), _) => Err(reason.to_string()),
            (Ok(placement), None) => Ok(placement.partitioned_cpus()),
            (Ok(placement), Some(_)) if !placement.partitioned_cpus().is_empty() => {
                Ok(placement.partitioned_cpus())
            }
            (Ok(_), Some(note)) => Err(note.clone()),
        }
    }

    /// Turns per-CPU placement of `deadline` reservations off (they then run under global EDF) or
    /// back on where the machine offers it. Affects later reservations only.
    pub fn set_placement(&mut self, enabled: bool) {
        match (&self.placement, enabled) {
            (Ok(placement), false) if placement.partitioned_cpus().is_empty() => {
                self.placement = Err(Unplaceable::TurnedOff);
            }
            (Err(Unplaceable::TurnedOff), true) => {
                self.placement = Placement::new(&self.facts.cpus);
            }
            _ => {}
        }
    }

    /// Keeps a partition whose last thread left for `linger` before removing it, so that the next
    /// `deadline` reservation on that CPU moves its thread into it instead of making it again
    /// (making or removing a partition rebuilds the kernel's scheduling domains: ~10 ms here,
    /// BENCHMARKS.md "The daemon: reserve/release round trip"); paper 003 §4.3's hysteresis for
    /// the machinery. Zero (the default) removes it at once. While one lingers the kernel does not
    /// balance load between that CPU and the others; [`Enforcement::expire`] removes it when its
    /// time is up, and `revert_all`, drop and the next start's repair as always.
    pub fn set_placement_linger(&mut self, linger: Duration) {
        self.placement_linger = linger;
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

    /// CPUs whose partition is kept without a thread in it, lingering.
    pub fn idle_partitions(&self) -> Vec<usize> {
        self.idle_partitions.keys().copied().collect()
    }

    /// Removes lingering partitions (other than on `cpu`) when one more partition, on `cpu`,
    /// would leave no CPU outside the partitions.
    fn make_room(&mut self, cpu: usize) {
        let Ok(placement) = &self.placement else {
            return;
        };
        if placement.partition_of(cpu).is_some() {
            return;
        }
        if placement.partitioned_cpus().len() + 2 <= self.facts.cpus.len() {
            return;
        }
        let idle: Vec<usize> = self
            .idle_partitions
            .keys()
            .copied()
            .filter(|&other| other != cpu)
            .collect();
        for other in idle {
            self.idle_partitions.remove(&other);
            if let Ok(placement) = &mut self.placement {
                let _ = placement.unpartition(&mut self.journal, other);
            }
        }
    }

    /// Moves a saved thread into the partition of `cpu`, making the partition if needed.
    /// `Ok(false)`: placement is not possible right now (another process holds it, or the top
    /// cpuset is arranged by someone else); nothing was changed and the thread stays under global
    /// EDF.
    fn place(&mut self, tid: u32, start_time: u64, cpu: usize) -> Result<bool, EnforceError> {
        let unplaceable = |reason: Unplaceable| EnforceError::Unenforceable {
            backend: BackendKind::Deadline,
            reason: format!("placing thread {tid} on CPU {cpu}: {reason}"),
        };
        self.make_room(cpu);
        let Ok(placement) = &mut self.placement else {
            return Ok(false);
        };
        match placement.partition(&mut self.journal, cpu) {
            Ok(_) => {
                self.idle_partitions.remove(&cpu);
            }
            Err(reason @ (Unplaceable::Busy | Unplaceable::TopNotBalanced)) => {
                self.placement_note = Some(reason.to_string());
                return Ok(false);
            }
            Err(reason) => return Err(unplaceable(reason)),
        }
        match placement.move_in(&mut self.journal, tid, start_time, cpu) {
            Ok(from) => {
                if let Some(managed) = self.threads.get_mut(&tid) {
                    managed.placed = Some((cpu, from));
                }
                self.placement_note = None;
                Ok(true)
            }
            Err(reason) => {
                self.unpartition_if_empty(cpu);
                Err(unplaceable(reason))
            }
        }
    }

    fn partition_in_use(&self, cpu: usize) -> bool {
        self.threads
            .values()
            .any(|managed| managed.placed.as_ref().is_some_and(|(on, _)| *on == cpu))
    }

    /// Removes the partition of `cpu` once no managed thread is placed there (or, with a linger,
    /// marks it idle until then).
    fn unpartition_if_empty(&mut self, cpu: usize) {
        if self.partition_in_use(cpu) {
            return;
        }
        if !self.placement_linger.is_zero()
            && self
                .placement
                .as_ref()
                .is_ok_and(|placement| placement.partition_of(cpu).is_some())
        {
            self.idle_partitions
                .insert(cpu, Instant::now() + self.placement_linger);
            return;
        }
        self.idle_partitions.remove(&cpu);
        if let Ok(placement) = &mut self.placement {
            let _ = placement.unpartition(&mut self.journal, cpu);
        }
    }

    /// The CPU a new `deadline` reservation is placed on, or `None` under global EDF: `preferred`
    /// (the CPU the thread last ran on) unless another reservation holds it. The kernel checks a
    /// new deadline thread against the root domain of the run queue it is on *now*, and a sleeping
    /// thread moved into a cpuset stays on its old run queue until it wakes; so a thread is placed
    /// on the CPU it already is on.
    fn deadline_cpu(&self, preferred: usize) -> Option<usize> {
        let planner_cpu = preferred;
        let placement = self.placement.as_ref().ok()?;
        // A lingering partition is free for the taking (on its CPU) or for removal (elsewhere).
        let taken: Vec<usize> = placement
            .partitioned_cpus()
            .into_iter()
            .filter(|cpu| !self.idle_partitions.contains_key(cpu))
            .collect();
        // One CPU always stays outside the partitions, for everything else.
        if taken.len() + 1 >= self.facts.cpus.len() {
            return None;
        }
        if !taken.contains(&planner_cpu) && self.facts.cpus.contains(&planner_cpu) {
            return Some(planner_cpu);
        }
        self.facts
            .cpus
            .iter()
            .rev()
            .copied()
            .find(|cpu| !taken.contains(cpu))
    }

    /// Builds the dispatch owners map (every dispatch grant's threads at their rest policy).
    fn dispatch_owners(&self) -> BTreeMap<Owner, Vec<DispatchedThread>> {
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

    fn held_times(&self) -> Vec<HeldTime> {
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
    fn sync_dispatch(&mut self, check_against: &[rtlab_plan::Grant]) -> Result<(), EnforceError> {
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

    fn undo_threads(&mut self, threads: &[u32]) {
        for &tid in threads {
            let _ = self.restore(tid);
        }
    }

    fn stop_dispatcher_if_idle(&mut self) {
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

    fn constraint_held_fraction(&self, id: ConstraintId) -> Option<f64> {
        self.constraints.get(&id)?.held_fraction
    }

    fn end_constraint(&mut self, id: ConstraintId) -> Result<ConstraintEnd, EnforceError> {
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
    fn enforce_deadline(
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
    fn resize_deadline(
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

    /// Reserves in the planner enough that, after every slot edge and the time lost inside slots
    /// ([`DISPATCH_SIZING`]), the requested amount still lands in every window: asks for
    /// `(X + edge · (⌈Y / P'⌉ + 1)) / (1 − interior share)` where `P'` is the granted period, again
    /// if `P'` changed. The planner admits the planned amount; the grant reports the request.
    fn reserve_with_edge_allowance(
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
    fn pin_for_dispatch(&mut self, tid: u32, cpu: usize) -> Result<(), EnforceError> {
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

    fn enforce_dispatch(
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

    /// A constraint on `deadline` for a thread without a reservation: a one-shot SCHED_DEADLINE
    /// budget of the estimate plus one enforcement granule, due at the deadline. Returns the share
    /// of a CPU the budget holds (runtime / period), refused unchanged when that is more than
    /// `share_at_most`.
    fn one_shot_budget(
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

impl Drop for Enforcer {
    fn drop(&mut self) {
        self.revert_all();
    }
}

/// CPU time of `tid`: its thread CPU clock when it is ours (exact), else its schedstat.
pub fn thread_cpu_time(tid: u32) -> std::io::Result<u64> {
    if thread_control::thread_group_id(tid).ok() == Some(std::process::id()) {
        if let Ok(time) = thread_control::thread_cpu_clock_ns(tid) {
            return Ok(time);
        }
    }
    thread_control::thread_cpu_time_ns(tid)
}

/// The `sched_setattr` flags of a reserved SCHED_DEADLINE thread: its children start at
/// SCHED_OTHER, and with `reclaim` it may run on the deadline bandwidth no reservation uses.
fn deadline_flags(reclaim: bool) -> u64 {
    if reclaim {
        SCHED_FLAG_RESET_ON_FORK | thread_control::SCHED_FLAG_RECLAIM
    } else {
        SCHED_FLAG_RESET_ON_FORK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
