//! Which CPU a `deadline` reservation is placed on, and when its cpuset partition is made, kept
//! (lingering) or removed; the partitions themselves are `super::super::placement`.

use std::time::{Duration, Instant};

use super::super::placement::{Placement, Unplaceable};
use super::super::{BackendKind, EnforceError};
use super::Enforcer;

impl Enforcer {
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
    pub(super) fn place(
        &mut self,
        tid: u32,
        start_time: u64,
        cpu: usize,
    ) -> Result<bool, EnforceError> {
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

    pub(super) fn partition_in_use(&self, cpu: usize) -> bool {
        self.threads
            .values()
            .any(|managed| managed.placed.as_ref().is_some_and(|(on, _)| *on == cpu))
    }

    /// Removes the partition of `cpu` once no managed thread is placed there (or, with a linger,
    /// marks it idle until then).
    pub(super) fn unpartition_if_empty(&mut self, cpu: usize) {
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
    pub(super) fn deadline_cpu(&self, preferred: usize) -> Option<usize> {
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
}
