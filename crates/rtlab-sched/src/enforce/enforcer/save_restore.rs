//! Saving a thread's policy and affinity before the first change (journalled), putting it back
//! (`restore`, `undo_threads`), and `Enforcer::repair`: what a previous instance's journal left.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rtlab_sys::cpuset::TasksFile;
use rtlab_sys::thread_control;

use super::super::journal::{Journal, JournalEntry, SavedThread};
use super::super::placement;
use super::super::EnforceError;
use super::{system, Enforcer, ManagedThread, Repair};

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

    /// Journals a thread's current policy and affinity, once, before the first change.
    pub(super) fn save(&mut self, tid: u32) -> Result<SavedThread, EnforceError> {
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
    pub(super) fn restore(&mut self, tid: u32) -> Result<(), EnforceError> {
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

    pub(super) fn undo_threads(&mut self, threads: &[u32]) {
        for &tid in threads {
            let _ = self.restore(tid);
        }
    }
}
