//! Per-CPU placement of `deadline` reservations: a cpuset partition of one CPU per reserved thread,
//! made and removed by rtlab, journalled so that nothing is left behind after a SIGKILL.
//!
//! Why: under global EDF a SCHED_DEADLINE thread migrates between CPUs whose ticks have different
//! phases, and its budget was seen to overrun by more than one tick there (BENCHMARKS.md,
//! "Reservations: supply under RT load"); the kernel refuses to pin a deadline thread unless its
//! affinity spans its root domain. A partition gives the CPU a root domain of its own, so the thread
//! can stay on it.
//!
//! With cgroup v1 (this project's VM) a partition of CPU `c` is three changes, made in this order,
//! each journalled before it is made:
//!
//! 1. `rtlab-PID-rest`: a child cpuset of the other CPUs that balances load inside itself (so the
//!    rest of the machine keeps balancing between them);
//! 2. `rtlab-PID-cpuC`: an exclusive child cpuset of CPU `c`;
//! 3. the top cpuset's `cpuset.sched_load_balance` set to 0, which makes the kernel build one
//!    root domain per load-balanced child.
//!
//! Threads of the top cpuset keep every CPU in their affinity; only load balancing *between* the
//! partitions stops while one exists (a task stays on the CPU it woke on). The reserved thread is
//! moved into its partition (its affinity becomes `{c}`) before it is given SCHED_DEADLINE, and
//! back to the cpuset it came from after it has left SCHED_DEADLINE. The last partition removed
//! puts the top cpuset's setting back and removes the rest cpuset. One enforcer at a time holds
//! placement (an flock on the hierarchy's root, released by the kernel when the process dies).
//!
//! cgroup v2 is not used: a v2 partition takes whole processes (a single thread can only move into
//! a threaded subtree of its own process), and reservations are per thread. On a v2-only machine,
//! or when the top cpuset is not load-balanced already (someone else arranged the domains), or
//! another process holds placement, reservations run under global EDF and the grant says so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rtlab_sys::cpuset::{self, CpusetHierarchy, HierarchyLock, TasksFile};

use super::journal::{Journal, JournalEntry, Pending};

/// The top cpuset's file that decides whether the kernel balances across all CPUs.
pub const LOAD_BALANCE_FILE: &str = "cpuset.sched_load_balance";

/// Why placement is not available here (then reservations run under global EDF).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unplaceable {
    NoCpusetController,
    CgroupV2Only,
    OneCpu,
    /// The top cpuset does not balance load: someone else arranged the scheduling domains.
    TopNotBalanced,
    /// Another process holds placement.
    Busy,
    /// Placement was turned off (configuration).
    TurnedOff,
    System(String),
}

impl std::fmt::Display for Unplaceable {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unplaceable::NoCpusetController => {
                formatter.write_str("no cpuset controller is mounted")
            }
            Unplaceable::CgroupV2Only => formatter.write_str(
                "only cgroup v2 offers cpusets here, and its partitions take whole processes",
            ),
            Unplaceable::OneCpu => formatter.write_str("this machine has one CPU"),
            Unplaceable::TopNotBalanced => formatter.write_str(
                "the top cpuset does not balance load (the scheduling domains are arranged by \
                 someone else)",
            ),
            Unplaceable::Busy => {
                formatter.write_str("another process holds the cpuset hierarchy's placement lock")
            }
            Unplaceable::TurnedOff => formatter.write_str("placement is turned off"),
            Unplaceable::System(text) => formatter.write_str(text),
        }
    }
}

/// The partitions in force.
#[derive(Debug)]
pub struct Placement {
    root: PathBuf,
    cpus: Vec<usize>,
    mems: String,
    prefix: String,
    lock: Option<HierarchyLock>,
    rest: Option<PathBuf>,
    partitions: BTreeMap<usize, PathBuf>,
    /// Each partition's `tasks` file, opened at its first move and closed with the partition: a
    /// kept (lingering) partition then takes a thread in one write.
    tasks: BTreeMap<usize, TasksFile>,
}

fn list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn system(context: &str) -> impl FnOnce(std::io::Error) -> Unplaceable + '_ {
    move |error| Unplaceable::System(format!("{context}: {error}"))
}

impl Placement {
    /// Finds the v1 cpuset hierarchy; no change is made until [`Placement::partition`].
    pub fn new(cpus: &[usize]) -> Result<Placement, Unplaceable> {
        if cpus.len() < 2 {
            return Err(Unplaceable::OneCpu);
        }
        let hierarchy = cpuset::find_hierarchy()
            .map_err(system("reading /proc/self/mounts"))?
            .ok_or(Unplaceable::NoCpusetController)?;
        let CpusetHierarchy::V1(root) = hierarchy else {
            return Err(Unplaceable::CgroupV2Only);
        };
        let mems = cpuset::read_value(&root, "cpuset.mems").map_err(system("reading"))?;
        Ok(Placement {
            root,
            cpus: cpus.to_vec(),
            mems,
            prefix: format!("rtlab-{}", std::process::id()),
            lock: None,
            rest: None,
            partitions: BTreeMap::new(),
            tasks: BTreeMap::new(),
        })
    }

    /// The hierarchy's mount point (the top cpuset).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The partition's directory of `cpu`, if one is made.
    pub fn partition_of(&self, cpu: usize) -> Option<&Path> {
        self.partitions.get(&cpu).map(PathBuf::as_path)
    }

    pub fn partitioned_cpus(&self) -> Vec<usize> {
        self.partitions.keys().copied().collect()
    }

    fn journal(journal: &mut Journal, entry: JournalEntry) -> Result<(), Unplaceable> {
        journal
            .append(&entry)
            .map_err(system("writing the enforcement journal"))
    }

    fn rest_cpus(&self, without: Option<usize>) -> Vec<usize> {
        self.cpus
            .iter()
            .copied()
            .filter(|cpu| !self.partitions.contains_key(cpu) && Some(*cpu) != without)
            .collect()
    }

    fn make_cpuset(
        &self,
        journal: &mut Journal,
        name: &str,
        cpus: &[usize],
        exclusive: bool,
    ) -> Result<PathBuf, Unplaceable> {
        let directory = self.root.join(name);
        Self::journal(journal, JournalEntry::CpusetMade(directory.clone()))?;
        std::fs::create_dir(&directory)
            .map_err(|error| Unplaceable::System(format!("{}: {error}", directory.display())))?;
        let configured = cpuset::write_value(&directory, "cpuset.cpus", &list(cpus))
            .and_then(|()| cpuset::write_value(&directory, "cpuset.mems", &self.mems))
            .and_then(|()| {
                if exclusive {
                    cpuset::write_value(&directory, "cpuset.cpu_exclusive", "1")
                } else {
                    Ok(())
                }
            })
            .and_then(|()| cpuset::write_value(&directory, LOAD_BALANCE_FILE, "1"));
        if let Err(error) = configured {
            let _ = remove_cpuset(&self.root, &directory);
            Self::journal(journal, JournalEntry::CpusetRemoved(directory))?;
            return Err(Unplaceable::System(error.to_string()));
        }
        Ok(directory)
    }

    /// Makes the partition of `cpu` (and, for the first, the rest cpuset and the top cpuset's
    /// setting), journalling each change first. Idempotent for a CPU already partitioned.
    pub fn partition(&mut self, journal: &mut Journal, cpu: usize) -> Result<PathBuf, Unplaceable> {
        if let Some(directory) = self.partitions.get(&cpu) {
            return Ok(directory.clone());
        }
        let rest = self.rest_cpus(Some(cpu));
        if rest.is_empty() {
            return Err(Unplaceable::System(format!(
                "a partition of CPU {cpu} would leave the machine no CPU outside partitions"
            )));
        }
        let first = self.partitions.is_empty();
        if first {
            let hierarchy = CpusetHierarchy::V1(self.root.clone());
            let lock = HierarchyLock::try_lock(&hierarchy)
                .map_err(system("locking the cpuset hierarchy"))?
                .ok_or(Unplaceable::Busy)?;
            let balanced =
                cpuset::read_value(&self.root, LOAD_BALANCE_FILE).map_err(system("reading"))?;
            if balanced != "1" {
                return Err(Unplaceable::TopNotBalanced);
            }
            self.lock = Some(lock);
            let rest_directory =
                match self.make_cpuset(journal, &format!("{}-rest", self.prefix), &rest, false) {
                    Ok(directory) => directory,
                    Err(error) => {
                        self.lock = None;
                        return Err(error);
                    }
                };
            self.rest = Some(rest_directory);
        } else if let Some(rest_directory) = &self.rest {
            cpuset::write_value(rest_directory, "cpuset.cpus", &list(&rest))
                .map_err(|error| Unplaceable::System(error.to_string()))?;
        }
        let made = self.make_cpuset(journal, &format!("{}-cpu{cpu}", self.prefix), &[cpu], true);
        let directory = match made {
            Ok(directory) => directory,
            Err(error) => {
                self.undo_rest(journal);
                return Err(error);
            }
        };
        self.partitions.insert(cpu, directory.clone());
        if first {
            let switched = Self::journal(
                journal,
                JournalEntry::CpusetSet {
                    directory: self.root.clone(),
                    file: LOAD_BALANCE_FILE.into(),
                    old_value: "1".into(),
                },
            )
            .and_then(|()| {
                cpuset::write_value(&self.root, LOAD_BALANCE_FILE, "0")
                    .map_err(|error| Unplaceable::System(error.to_string()))
            });
            if let Err(error) = switched {
                let _ = self.unpartition(journal, cpu);
                return Err(error);
            }
        }
        Ok(directory)
    }

    /// After a failed partition: the rest cpuset gets the CPUs back (or goes, with the lock, when
    /// no partition is left).
    fn undo_rest(&mut self, journal: &mut Journal) {
        if self.partitions.is_empty() {
            if let Some(rest) = self.rest.take() {
                let _ = remove_cpuset(&self.root, &rest);
                let _ = Self::journal(journal, JournalEntry::CpusetRemoved(rest));
            }
            self.lock = None;
        } else if let Some(rest) = &self.rest {
            let _ = cpuset::write_value(rest, "cpuset.cpus", &list(&self.rest_cpus(None)));
        }
    }

    /// Removes the partition of `cpu` (its threads must have been moved out); the last one puts the
    /// top cpuset's setting back first and removes the rest cpuset.
    pub fn unpartition(&mut self, journal: &mut Journal, cpu: usize) -> Result<(), Unplaceable> {
        let Some(directory) = self.partitions.remove(&cpu) else {
            return Ok(());
        };
        self.tasks.remove(&cpu);
        let mut first_error = None;
        if self.partitions.is_empty() {
            match cpuset::write_value(&self.root, LOAD_BALANCE_FILE, "1") {
                Ok(()) => Self::journal(
                    journal,
                    JournalEntry::CpusetReset {
                        directory: self.root.clone(),
                        file: LOAD_BALANCE_FILE.into(),
                    },
                )?,
                Err(error) => {
                    first_error.get_or_insert(Unplaceable::System(error.to_string()));
                }
            }
        }
        match remove_cpuset(&self.root, &directory) {
            Ok(()) => Self::journal(journal, JournalEntry::CpusetRemoved(directory))?,
            Err(error) => {
                first_error.get_or_insert(Unplaceable::System(error.to_string()));
            }
        }
        self.undo_rest(journal);
        match first_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Moves `tid` into the partition of `cpu`, journalling where it came from first. Returns the
    /// cpuset directory it came from.
    pub fn move_in(
        &mut self,
        journal: &mut Journal,
        tid: u32,
        start_time: u64,
        cpu: usize,
    ) -> Result<PathBuf, Unplaceable> {
        let directory = self
            .partitions
            .get(&cpu)
            .cloned()
            .ok_or_else(|| Unplaceable::System(format!("no partition of CPU {cpu}")))?;
        let from = cpuset::thread_cpuset(tid).map_err(system("reading /proc/TID/cpuset"))?;
        let from = cpuset::directory_of(&CpusetHierarchy::V1(self.root.clone()), &from);
        Self::journal(
            journal,
            JournalEntry::CpusetThread {
                tid,
                start_time,
                from: from.clone(),
            },
        )?;
        let tasks = match self.tasks.entry(cpu) {
            std::collections::btree_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::btree_map::Entry::Vacant(entry) => entry.insert(
                TasksFile::open(&directory)
                    .map_err(|error| Unplaceable::System(error.to_string()))?,
            ),
        };
        tasks
            .move_thread(tid)
            .map_err(|error| Unplaceable::System(error.to_string()))?;
        Ok(from)
    }
}

/// Moves whatever is still in `directory` to the top cpuset and removes it.
fn remove_cpuset(root: &Path, directory: &Path) -> std::io::Result<()> {
    let hierarchy = CpusetHierarchy::V1(root.to_owned());
    for tid in cpuset::threads_in(&hierarchy, directory).unwrap_or_default() {
        let _ = cpuset::move_thread_v1(root, tid);
    }
    match std::fs::remove_dir(directory) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(std::io::Error::new(
            error.kind(),
            format!("removing {}: {error}", directory.display()),
        )),
    }
}

/// The names of the cpusets rtlab processes made (`rtlab-PID-…`) under the v1 hierarchy's root;
/// empty where there is none.
pub fn rtlab_cpusets() -> Vec<String> {
    let Ok(Some(CpusetHierarchy::V1(root))) = cpuset::find_hierarchy() else {
        return Vec::new();
    };
    let mut names: Vec<String> = std::fs::read_dir(root)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with("rtlab-"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Removes the partitions of rtlab processes that are gone (`rtlab-PID-…` whose PID no longer
/// exists) even when their journal is not this instance's (another state directory, or deleted),
/// and, when no rtlab partition is left, puts the top cpuset's load balancing back on: rtlab only
/// ever turns it off when it was on. Needs the hierarchy's lock (skipped while another process
/// holds it). Returns the directories removed, or failures as text.
pub fn remove_stale() -> (Vec<PathBuf>, Vec<String>) {
    let Ok(Some(hierarchy @ CpusetHierarchy::V1(_))) = cpuset::find_hierarchy() else {
        return (Vec::new(), Vec::new());
    };
    let root = hierarchy.root().to_owned();
    let Ok(Some(_lock)) = HierarchyLock::try_lock(&hierarchy) else {
        return (Vec::new(), Vec::new());
    };
    let Ok(entries) = std::fs::read_dir(&root) else {
        return (Vec::new(), Vec::new());
    };
    let mut removed = Vec::new();
    let mut failures = Vec::new();
    let mut live_left = false;
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("rtlab-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            live_left = true;
            continue;
        }
        match remove_cpuset(&root, &entry.path()) {
            Ok(()) => removed.push(entry.path()),
            Err(error) => failures.push(error.to_string()),
        }
    }
    if !removed.is_empty() && !live_left && failures.is_empty() {
        if let Err(error) = cpuset::write_value(&root, LOAD_BALANCE_FILE, "1") {
            failures.push(format!("putting {LOAD_BALANCE_FILE} back to 1: {error}"));
        }
    }
    (removed, failures)
}

/// Puts back what a killed instance's journal says it changed in the cpuset hierarchy: threads
/// moved back to their cpusets (if still the same thread), settings reset, directories removed
/// (newest first). Returns one line per failure.
pub fn repair(pending: &Pending, same_thread: impl Fn(u32, u64) -> bool) -> Vec<String> {
    let mut failures = Vec::new();
    for (tid, start_time, from) in &pending.moved_threads {
        if same_thread(*tid, *start_time) {
            if let Err(error) = cpuset::move_thread_v1(from, *tid) {
                // ESRCH: it exited meanwhile.
                if error.raw_os_error() != Some(3) {
                    failures.push(format!("moving thread {tid} back: {error}"));
                }
            }
        }
    }
    for (directory, file, old_value) in pending.settings.iter().rev() {
        if let Err(error) = cpuset::write_value(directory, file, old_value) {
            failures.push(format!("putting {file} back to {old_value}: {error}"));
        }
    }
    for directory in pending.directories.iter().rev() {
        let root = directory.parent().unwrap_or(Path::new("/"));
        if let Err(error) = remove_cpuset(root, directory) {
            failures.push(error.to_string());
        }
    }
    failures
}
