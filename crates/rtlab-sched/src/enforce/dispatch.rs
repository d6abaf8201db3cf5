//! The `dispatch` backend: rtlab enforces the planner's explicit slot table itself.
//!
//! One SCHED_FIFO 99 dispatcher thread per CPU that has slots sleeps until the next slot edge
//! (absolute CLOCK_MONOTONIC), raises the slot owner's threads to [`RAISED_PRIORITY`] (they are
//! pinned to that CPU while reserved) and puts the previous owner's threads back to the policy they
//! had. It works for an activity (several threads), for time constraints (the free time a
//! constraint holds) and for pinned threads, and needs no SCHED_DEADLINE. The table is swapped at
//! a common boundary of the old and new major cycles (see [`super::switch`]).
//!
//! Safety: raised threads run only inside their slots, which the planner's cap (≤ 90 %) bounds; the
//! dispatcher outranks them on their CPU, so a raised thread cannot keep itself raised. The
//! dispatchers are threads of this process, so they die with it; a SIGKILL leaves at most the raised
//! threads, which the journal restores at the next start.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use rtlab_core::Nanos;
use rtlab_sys::sched::Policy;

use rtlab_plan::{CpuSchedule, Owner};

/// The dispatchers' priority: above every thread they raise.
pub const DISPATCHER_PRIORITY: u32 = 99;
/// The priority a slot owner's threads run at inside their slots: above ordinary RT load (e.g.
/// FIFO 95 spinners), below the dispatcher.
pub const RAISED_PRIORITY: u32 = 98;
/// A dispatcher with nothing to do still wakes this often to see table changes and stop requests.
pub const IDLE_WAKE: Nanos = Nanos(50_000_000);

/// A thread under the dispatcher and the policy it returns to outside its slots.
#[derive(Clone, Debug)]
pub struct DispatchedThread {
    pub tid: u32,
    pub rest_policy: Policy,
    /// A pidfd of the very thread (opened when it was first managed, and checked then against its
    /// start time): the dispatcher changes policies by tid, and asks this first, so a tid that
    /// names another thread since this one exited is never raised or lowered. `None` on kernels
    /// without thread pidfds (before 6.9): then the tid alone, until the watcher notices the exit.
    pub pidfd: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
}

impl DispatchedThread {
    /// Whether the thread is still the one managed (its pidfd has not signalled its exit).
    fn is_the_managed_thread(&self) -> bool {
        self.pidfd.as_ref().is_none_or(|pidfd| {
            !rtlab_sys::ipc::pidfd_process_exited(std::os::fd::AsFd::as_fd(&**pidfd))
                .unwrap_or(true)
        })
    }
}

impl PartialEq for DispatchedThread {
    fn eq(&self, other: &Self) -> bool {
        self.tid == other.tid && self.rest_policy == other.rest_policy
    }
}

impl Eq for DispatchedThread {}

/// Free time a time constraint holds, absolute plan time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldTime {
    pub cpu: usize,
    pub start: u64,
    pub end: u64,
    pub owner: Owner,
}

/// CPU time a slot owner loses at each of its slots' start: the dispatcher's residual lateness
/// after its early wake-up ([`WakeLead`]), its raise and the switch to the owner. Sized from the
/// tail of the start delay the owner sees by its own clock, not its mean: on the development VM
/// under RT load, 6-12 µs median, 20-83 µs p99 with the lead (26-28 µs median, 58-74 µs p99
/// without it); BENCHMARKS.md, "dispatch slots sized from their measured losses".
pub const DISPATCH_EDGE_ALLOWANCE: Nanos = Nanos(60_000);

/// Share of a slot's time, in parts per million, that a raised owner loses inside it (the tick and
/// other interrupts, softirqs, short hypervisor stalls), planned on top of the amount and the edge
/// allowances. Measured as 0.3-0.6 % of slot time on the development VM under RT load, tails
/// higher; planned with room.
pub const DISPATCH_INTERIOR_PPM: u64 = 20_000;

/// How the planner sizes a `dispatch` reservation so that the requested amount lands in every
/// window although the owner loses time at every slot edge and inside every slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DispatchSizing {
    /// Lost at each slot touching a window.
    pub edge_allowance: Nanos,
    /// Lost inside slots, per million of slot time.
    pub interior_ppm: u64,
}

/// The sizing the enforcer plans with.
pub const DISPATCH_SIZING: DispatchSizing = DispatchSizing {
    edge_allowance: DISPATCH_EDGE_ALLOWANCE,
    interior_ppm: DISPATCH_INTERIOR_PPM,
};

impl DispatchSizing {
    /// The amount to plan so that `amount` still lands in every window of `period` when each of
    /// the at most `⌈period / granted_period⌉ + 1` slots touching a window loses the edge
    /// allowance and every slot loses `interior_ppm` of its time: the least `A` with
    /// `A − slots · edge − A · ppm / 10⁶ ≥ amount`, i.e. `(amount + slots · edge) / (1 − ppm / 10⁶)`
    /// rounded up. A window of `period` holds at least `A` of slot time (the planner's slots of `A`
    /// per `period` at the granted period).
    pub fn amount(&self, amount: Nanos, period: Nanos, granted_period: Nanos) -> Nanos {
        let slots = period.0.div_ceil(granted_period.0.max(1)) + 1;
        let edges = amount
            .0
            .saturating_add(self.edge_allowance.0.saturating_mul(slots));
        let ppm = self.interior_ppm.min(999_999);
        let scaled = (u128::from(edges) * 1_000_000).div_ceil(u128::from(1_000_000 - ppm));
        Nanos(u64::try_from(scaled).unwrap_or(u64::MAX))
    }

    /// "30µs per slot edge and 2.0 % of slot time", for refusals and reports.
    pub fn describe(&self) -> String {
        format!(
            "{} per slot edge and {:.1} % of slot time",
            self.edge_allowance,
            self.interior_ppm as f64 / 10_000.0
        )
    }
}

/// What the dispatchers follow.
#[derive(Clone, Debug, Default)]
pub struct DispatchTable {
    /// Per CPU, the plan in force.
    pub schedules: Vec<CpuSchedule>,
    /// A plan to switch to at an absolute plan time.
    pub pending: Option<(u64, Vec<CpuSchedule>)>,
    pub held: Vec<HeldTime>,
    /// The threads of each owner the dispatchers raise.
    pub owners: BTreeMap<Owner, Vec<DispatchedThread>>,
}

impl DispatchTable {
    /// Who runs on `cpu` at plan time `t`, and until when that stays so (the next edge).
    pub fn owner_at(&self, cpu: usize, t: u64) -> (Option<Owner>, u64) {
        let mut schedules = &self.schedules;
        let mut limit = u64::MAX;
        if let Some((switch_at, next)) = &self.pending {
            if t >= *switch_at {
                schedules = next;
            } else {
                limit = *switch_at;
            }
        }
        let mut owner = None;
        let mut next_edge = limit;
        if let Some(schedule) = schedules
            .iter()
            .find(|schedule| schedule.cpu == cpu && !schedule.slots.is_empty())
        {
            let cycle = schedule.cycle.0.max(1);
            let base = t - t % cycle;
            let inside = t % cycle;
            let mut found_next = false;
            for slot in &schedule.slots {
                let (start, end) = (slot.start.0, slot.start.0 + slot.length.0);
                if start <= inside && inside < end {
                    owner = Some(slot.owner.clone());
                    next_edge = next_edge.min(base + end);
                    found_next = true;
                    break;
                }
                if start > inside {
                    next_edge = next_edge.min(base + start);
                    found_next = true;
                    break;
                }
            }
            if !found_next {
                next_edge = next_edge.min(base + cycle);
            }
        }
        for held in self.held.iter().filter(|held| held.cpu == cpu) {
            if owner.is_none() && held.start <= t && t < held.end {
                owner = Some(held.owner.clone());
                next_edge = next_edge.min(held.end);
            } else if held.start > t {
                next_edge = next_edge.min(held.start);
            }
        }
        (owner, next_edge)
    }

    /// Applies a pending switch whose time has come.
    fn settle(&mut self, t: u64) {
        if self.pending.as_ref().is_some_and(|(at, _)| t >= *at) {
            if let Some((_, next)) = self.pending.take() {
                self.schedules = next;
            }
        }
        self.held.retain(|held| held.end > t);
    }
}

/// The dispatcher's slots for `owner` in `schedule`, per window of `window` aligned to the
/// cycle's start: the least slot time any window holds and the most slots one touches. `None`
/// when `owner` has no slot there (or `window` is 0). The cycle repeats, so a window reaching past
/// its end continues at its start.
pub fn slot_time_per_window(
    schedule: &CpuSchedule,
    owner: &Owner,
    window: Nanos,
) -> Option<(Nanos, u32)> {
    let cycle = schedule.cycle.0;
    if window.0 == 0 || cycle == 0 {
        return None;
    }
    let owned: Vec<(u64, u64)> = schedule
        .slots
        .iter()
        .filter(|slot| slot.owner == *owner)
        .map(|slot| (slot.start.0, slot.start.0 + slot.length.0))
        .collect();
    if owned.is_empty() {
        return None;
    }
    // Each slot is added to the windows it overlaps, so the work is the slots plus the windows.
    // (Every window against every slot was quadratic: 6–18 ms a grant in the debug build for a
    // 128 ms cycle of 250 µs windows, done for each grant while the daemon held its registry, and
    // minutes for the planner's longest cycles, 2¹⁶ quanta.)
    let windows = usize::try_from(cycle.div_ceil(window.0)).ok()?;
    let mut time = vec![0u64; windows];
    let mut slots = vec![0u32; windows];
    // The slots of this cycle and the next (a window may reach past the cycle's end).
    for repeat in [0, cycle] {
        for (start, end) in &owned {
            let (start, end) = (start + repeat, end + repeat);
            if end <= start {
                continue;
            }
            let first = start / window.0;
            let last = ((end - 1) / window.0).min(windows as u64 - 1);
            for index in first..=last {
                let (from, to) = (index * window.0, index * window.0 + window.0);
                let overlap = end.min(to).saturating_sub(start.max(from));
                if overlap > 0 {
                    time[index as usize] += overlap;
                    slots[index as usize] += 1;
                }
            }
        }
    }
    let least = time.iter().copied().min().unwrap_or(0);
    let most_slots = slots.iter().copied().max().unwrap_or(0);
    Some((Nanos(least), most_slots))
}

/// What one dispatcher measured about itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DispatcherStats {
    pub cpu: usize,
    /// Slot edges acted on.
    pub edges: u64,
    /// How late the dispatcher acted on the edges it changed something at (after its early
    /// wake-up and wait, for slots following free time): sum, max, and how many were over 50 µs.
    pub lateness_sum: Nanos,
    pub lateness_max: Nanos,
    pub late_over_50us: u64,
    /// The dispatcher thread's own CPU time.
    pub cpu_time: Nanos,
    /// Raise/lower calls that failed (the thread exited meanwhile).
    pub failed_changes: u64,
    /// Time spent waiting on the clock for slot edges after an early wake-up (part of `cpu_time`).
    pub spun: Nanos,
    /// The wake-up lead in force (see [`WakeLead`]).
    pub lead: Nanos,
}

struct Shared {
    table: Mutex<DispatchTable>,
    stop: AtomicBool,
    /// Raised with `stop`: the dispatchers sleep on it (a futex), so stopping wakes them at once
    /// instead of at their next edge or idle wake-up (up to 50 ms, which the daemon spent holding
    /// its registry lock when a release left no dispatch grant).
    wake: AtomicU32,
    stats: Mutex<Vec<DispatcherStats>>,
    epoch: u64,
}

/// The running dispatchers.
pub struct Dispatcher {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A dispatcher that panicked leaves consistent data (every change is one assignment).
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn set_threads(threads: &[DispatchedThread], raised: bool) -> u64 {
    let mut failed = 0;
    for thread in threads {
        if !thread.is_the_managed_thread() {
            // Exited: its tid may be another thread's now. The watcher removes it.
            failed += 1;
            continue;
        }
        let policy = if raised {
            Policy::Fifo {
                priority: RAISED_PRIORITY,
            }
        } else {
            thread.rest_policy
        };
        if rtlab_sys::thread_control::set_thread_policy_with_flags(
            thread.tid,
            policy,
            rtlab_sys::thread_control::SCHED_FLAG_RESET_ON_FORK,
        )
        .is_err()
        {
            failed += 1;
        }
    }
    failed
}

impl Dispatcher {
    /// Starts one dispatcher per CPU in `cpus`, following plan time `t = now − epoch`.
    pub fn start(cpus: &[usize], epoch: u64, table: DispatchTable) -> std::io::Result<Dispatcher> {
        let shared = Arc::new(Shared {
            table: Mutex::new(table),
            stop: AtomicBool::new(false),
            wake: AtomicU32::new(0),
            stats: Mutex::new(
                cpus.iter()
                    .map(|&cpu| DispatcherStats {
                        cpu,
                        ..DispatcherStats::default()
                    })
                    .collect(),
            ),
            epoch,
        });
        let mut dispatcher = Dispatcher {
            shared: Arc::clone(&shared),
            threads: Vec::new(),
        };
        for (index, &cpu) in cpus.iter().enumerate() {
            let shared = Arc::clone(&shared);
            let (ready_sender, ready) = std::sync::mpsc::channel();
            let handle = std::thread::Builder::new()
                .name(format!("rtlab-dispatch{cpu}"))
                .spawn(move || {
                    let setup = rtlab_sys::cpu::pin_current_thread(cpu).and_then(|()| {
                        rtlab_sys::thread_control::set_thread_policy_with_flags(
                            0,
                            Policy::Fifo {
                                priority: DISPATCHER_PRIORITY,
                            },
                            rtlab_sys::thread_control::SCHED_FLAG_RESET_ON_FORK,
                        )
                    });
                    let failed = setup.is_err();
                    let _ = ready_sender.send(setup);
                    if !failed {
                        dispatch_loop(&shared, cpu, index);
                    }
                })?;
            dispatcher.threads.push(handle);
            match ready.recv() {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    dispatcher.stop();
                    return Err(error);
                }
                Err(_) => {
                    dispatcher.stop();
                    return Err(std::io::Error::other("a dispatcher thread died at start"));
                }
            }
        }
        Ok(dispatcher)
    }

    /// Changes the table under the dispatchers' lock (they act on it at their next edge; `change`
    /// may also raise or lower threads itself, e.g. to restore a released owner at once).
    pub fn update<R>(&self, change: impl FnOnce(&mut DispatchTable) -> R) -> R {
        let mut table = lock(&self.shared.table);
        change(&mut table)
    }

    /// The schedule in force (not one pending) of the CPU holding `owner`'s slots.
    pub fn schedule_of(&self, owner: &Owner) -> Option<CpuSchedule> {
        let table = lock(&self.shared.table);
        table
            .schedules
            .iter()
            .find(|schedule| schedule.slots.iter().any(|slot| slot.owner == *owner))
            .cloned()
    }

    /// The current plan time.
    pub fn now(&self) -> u64 {
        rtlab_sys::clock::monotonic_ns().saturating_sub(self.shared.epoch)
    }

    pub fn stats(&self) -> Vec<DispatcherStats> {
        lock(&self.shared.stats).clone()
    }

    /// Stops and joins every dispatcher; each lowers the threads it had raised before it exits.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.wake.store(1, Ordering::SeqCst);
        rtlab_sys::futex::wake(&self.shared.wake, u32::MAX);
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The least and most a dispatcher wakes before a slot that follows free time (see [`WakeLead`]).
pub const LEAD_MIN: Nanos = Nanos(20_000);
pub const LEAD_MAX: Nanos = Nanos(300_000);
/// The lead before the first `LEAD_SAMPLES` (256) wake-ups have been measured.
pub const LEAD_INITIAL: Nanos = Nanos(50_000);
/// Added to the measured wake-up latency quantile to make the lead.
pub const LEAD_MARGIN: Nanos = Nanos(5_000);
/// How many recent wake-ups the lead is computed from.
const LEAD_SAMPLES: usize = 256;

/// How early a dispatcher asks to be woken for a slot that starts after free time, from its own
/// wake-up latencies: the p99 of the last `LEAD_SAMPLES` (256) wake-ups (how late the timer woke it)
/// plus [`LEAD_MARGIN`], within [`LEAD_MIN`, `LEAD_MAX`]. Waking early, the dispatcher does its
/// bookkeeping, waits for the edge on the clock and raises the owner at the edge itself, so the
/// owner does not lose the timer's wake-up latency at the start of every slot (measured on the
/// development VM: 26 µs median, 58-74 µs p99 lost per slot without a lead).
#[derive(Clone, Debug)]
pub struct WakeLead {
    samples: Vec<u64>,
    next: usize,
    lead: Nanos,
}

impl Default for WakeLead {
    fn default() -> WakeLead {
        WakeLead {
            samples: Vec::with_capacity(LEAD_SAMPLES),
            next: 0,
            lead: LEAD_INITIAL,
        }
    }
}

impl WakeLead {
    /// Records how late one wake-up came after the time asked for.
    pub fn record(&mut self, latency: Nanos) {
        if self.samples.len() < LEAD_SAMPLES {
            self.samples.push(latency.0);
        } else {
            self.samples[self.next] = latency.0;
        }
        self.next = (self.next + 1) % LEAD_SAMPLES;
        if self.next == 0 {
            let mut sorted = self.samples.clone();
            sorted.sort_unstable();
            let p99 = sorted[(sorted.len() - 1) * 99 / 100];
            self.lead = Nanos(
                p99.saturating_add(LEAD_MARGIN.0)
                    .clamp(LEAD_MIN.0, LEAD_MAX.0),
            );
        }
    }

    /// The lead in force.
    pub fn lead(&self) -> Nanos {
        self.lead
    }
}

fn dispatch_loop(shared: &Shared, cpu: usize, index: usize) {
    let mut raised: Option<(Owner, Vec<DispatchedThread>)> = None;
    let mut wake_lead = WakeLead::default();
    // The plan time of the edge the dispatcher heads for, and the absolute time it asked to wake.
    let mut edge = rtlab_sys::clock::monotonic_ns().saturating_sub(shared.epoch);
    let mut asked = shared.epoch + edge;
    let mut local = DispatcherStats {
        cpu,
        ..DispatcherStats::default()
    };
    let publish = |local: &mut DispatcherStats| {
        local.cpu_time = Nanos(rtlab_sys::thread_clock::thread_cpu_time_ns());
        if let Some(slot) = lock(&shared.stats).get_mut(index) {
            *slot = local.clone();
        }
    };
    loop {
        let woke = rtlab_sys::clock::monotonic_ns();
        wake_lead.record(Nanos(woke.saturating_sub(asked)));
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let edge_at = shared.epoch + edge;
        let early = woke < edge_at;
        if early {
            // Woken before a slot that follows free time: bookkeeping now, then wait for the edge
            // on the clock (FIFO 99 on this CPU, in time no reservation holds).
            publish(&mut local);
            let mut now = rtlab_sys::clock::monotonic_ns();
            let spin_from = now;
            while now < edge_at {
                std::hint::spin_loop();
                now = rtlab_sys::clock::monotonic_ns();
            }
            local.spun = Nanos(local.spun.0 + (now - spin_from));
        }
        let acted = rtlab_sys::clock::monotonic_ns();
        let lateness = acted.saturating_sub(edge_at);
        let now = acted.saturating_sub(shared.epoch);
        let next_wake;
        let raises_next;
        {
            let mut table = lock(&shared.table);
            table.settle(now);
            let (owner, next_edge) = table.owner_at(cpu, now);
            let threads = owner
                .as_ref()
                .and_then(|owner| table.owners.get(owner))
                .cloned()
                .unwrap_or_default();
            let changed = match (&raised, &owner) {
                (Some((current, current_threads)), Some(new)) => {
                    current != new || *current_threads != threads
                }
                (None, None) => false,
                _ => true,
            };
            if changed {
                if let Some((_, previous)) = raised.take() {
                    local.failed_changes += set_threads(&previous, false);
                }
                if let Some(owner) = owner {
                    if !threads.is_empty() {
                        local.failed_changes += set_threads(&threads, true);
                        raised = Some((owner, threads));
                    }
                }
                local.edges += 1;
                local.lateness_sum = Nanos(local.lateness_sum.0 + lateness);
                local.lateness_max = local.lateness_max.max(Nanos(lateness));
                if lateness > 50_000 {
                    local.late_over_50us += 1;
                }
            }
            next_wake = next_edge.min(now + IDLE_WAKE.0);
            raises_next = table.owner_at(cpu, next_wake).0.is_some();
        }
        if !early {
            publish(&mut local);
        }
        local.lead = wake_lead.lead();
        edge = next_wake;
        // Early only for a slot that follows free time: waking early inside a slot would take the
        // lead from its owner (at a slot's end the dispatcher's lateness is the owner's gain, not
        // its loss), and an idle wake-up needs no precision.
        let lead = if raised.is_none() && raises_next {
            wake_lead.lead().0
        } else {
            0
        };
        asked = (shared.epoch + edge).saturating_sub(lead).max(acted);
        // As `clock_nanosleep` to `asked` (the same absolute timer), but `stop` ends it.
        while shared.wake.load(Ordering::SeqCst) == 0 && rtlab_sys::clock::monotonic_ns() < asked {
            rtlab_sys::futex::wait_until(&shared.wake, 0, asked);
        }
    }
    if let Some((_, previous)) = raised.take() {
        set_threads(&previous, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_plan::Slot;

    fn table() -> DispatchTable {
        DispatchTable {
            schedules: vec![CpuSchedule {
                cpu: 0,
                cycle: Nanos(10),
                slots: vec![Slot {
                    start: Nanos(2),
                    length: Nanos(3),
                    owner: Owner::Thread(7),
                }],
            }],
            ..DispatchTable::default()
        }
    }

    /// A tid taken by another thread since the managed one exited (simulated: a live thread's tid
    /// with the pidfd of one that has exited) is neither raised nor lowered. Before pidfds the
    /// dispatcher raised such a tid to FIFO 98 (as root; without root the change fails anyway).
    #[test]
    fn a_tid_that_names_another_thread_now_is_left_alone() {
        let exited = std::thread::spawn(|| {
            rtlab_sys::ipc::pidfd_open_thread(rtlab_sys::cpu::current_tid()).unwrap()
        })
        .join()
        .unwrap();
        let (tid_sender, tid) = std::sync::mpsc::channel();
        let (stop, wait) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            tid_sender.send(rtlab_sys::cpu::current_tid()).unwrap();
            let _ = wait.recv();
        });
        let tid = tid.recv().unwrap();
        let before = rtlab_sys::sched::thread_policy(tid).unwrap();
        let thread = DispatchedThread {
            tid,
            rest_policy: Policy::Other { nice: 0 },
            pidfd: Some(Arc::new(exited)),
        };
        assert_eq!(set_threads(std::slice::from_ref(&thread), true), 1);
        assert_eq!(rtlab_sys::sched::thread_policy(tid).unwrap(), before);
        drop(stop);
        other.join().unwrap();
    }

    fn slot(start: u64, length: u64, owner: u32) -> Slot {
        Slot {
            start: Nanos(start),
            length: Nanos(length),
            owner: Owner::Thread(owner),
        }
    }

    #[test]
    fn slot_time_per_window_is_the_least_any_window_holds() {
        // A cycle of 20 with windows of 10: 3 in the first window (2+1), 4 in the second.
        let schedule = CpuSchedule {
            cpu: 1,
            cycle: Nanos(20),
            slots: vec![slot(0, 2, 7), slot(5, 1, 7), slot(6, 3, 8), slot(12, 4, 7)],
        };
        let owner = Owner::Thread(7);
        assert_eq!(
            slot_time_per_window(&schedule, &owner, Nanos(10)),
            Some((Nanos(3), 2))
        );
        // A slot crossing a window's edge counts in both, clipped.
        let crossing = CpuSchedule {
            cpu: 0,
            cycle: Nanos(20),
            slots: vec![slot(8, 4, 7), slot(18, 2, 7)],
        };
        assert_eq!(
            slot_time_per_window(&crossing, &owner, Nanos(10)),
            Some((Nanos(2), 2))
        );
        // A cycle that is not a multiple of the window: the last window runs into the next cycle.
        let uneven = CpuSchedule {
            cpu: 0,
            cycle: Nanos(15),
            slots: vec![slot(0, 3, 7)],
        };
        assert_eq!(
            slot_time_per_window(&uneven, &owner, Nanos(10)),
            Some((Nanos(3), 1))
        );
        assert_eq!(
            slot_time_per_window(&schedule, &Owner::Thread(9), Nanos(10)),
            None
        );
        assert_eq!(slot_time_per_window(&schedule, &owner, Nanos(0)), None);
    }

    /// The definition, every window against every slot: what `slot_time_per_window` computes.
    fn slot_time_per_window_by_definition(
        schedule: &CpuSchedule,
        owner: &Owner,
        window: Nanos,
    ) -> Option<(Nanos, u32)> {
        let cycle = schedule.cycle.0;
        if window.0 == 0 || cycle == 0 {
            return None;
        }
        let owned: Vec<(u64, u64)> = schedule
            .slots
            .iter()
            .filter(|slot| slot.owner == *owner)
            .map(|slot| (slot.start.0, slot.start.0 + slot.length.0))
            .collect();
        if owned.is_empty() {
            return None;
        }
        let mut least = u64::MAX;
        let mut most_slots = 0;
        for index in 0..cycle.div_ceil(window.0) {
            let (from, to) = (index * window.0, index * window.0 + window.0);
            let (mut time, mut slots) = (0, 0);
            for repeat in [0, cycle] {
                for (start, end) in &owned {
                    let overlap = (end + repeat)
                        .min(to)
                        .saturating_sub((start + repeat).max(from));
                    if overlap > 0 {
                        time += overlap;
                        slots += 1;
                    }
                }
            }
            least = least.min(time);
            most_slots = most_slots.max(slots);
        }
        Some((Nanos(least), most_slots))
    }

    proptest::proptest! {
        #[test]
        fn slot_time_per_window_is_its_definition(
            cycle in 1u64..400,
            window in 0u64..500,
            raw in proptest::collection::vec((0u64..400, 0u64..120, 7u32..9), 0..12),
        ) {
            let slots = raw
                .into_iter()
                .filter(|(start, _, _)| *start < cycle)
                .map(|(start, length, owner)| slot(start, length.min(cycle - start), owner))
                .collect();
            let schedule = CpuSchedule { cpu: 0, cycle: Nanos(cycle), slots };
            let owner = Owner::Thread(7);
            proptest::prop_assert_eq!(
                slot_time_per_window(&schedule, &owner, Nanos(window)),
                slot_time_per_window_by_definition(&schedule, &owner, Nanos(window))
            );
        }
    }

    fn edges_only(allowance: Nanos) -> DispatchSizing {
        DispatchSizing {
            edge_allowance: allowance,
            interior_ppm: 0,
        }
    }

    #[test]
    fn the_edge_allowance_grows_with_the_slots_per_window() {
        let sizing = edges_only(Nanos::from_micros(30));
        // 2 ms of every 10 ms in slots every 2 ms: 6 slots touch a window (30 µs each); in
        // slots every 8 ms, 3 do.
        for (slot_period_ms, expected_us) in [(2, 2_180), (8, 2_090)] {
            assert_eq!(
                sizing.amount(
                    Nanos::from_millis(2),
                    Nanos::from_millis(10),
                    Nanos::from_millis(slot_period_ms)
                ),
                Nanos::from_micros(expected_us),
                "slots every {slot_period_ms} ms"
            );
        }
    }

    #[test]
    fn the_interior_share_scales_the_planned_amount() {
        let sizing = DispatchSizing {
            edge_allowance: Nanos::from_micros(30),
            interior_ppm: 20_000,
        };
        // (2 ms + 6 × 30 µs) / 0.98 = 2224.49 µs, rounded up to the nanosecond.
        let planned = sizing.amount(
            Nanos::from_millis(2),
            Nanos::from_millis(10),
            Nanos::from_millis(2),
        );
        assert_eq!(planned, Nanos(2_224_490));
        // What is left after the losses it plans for is at least the amount, and a nanosecond
        // less would not be.
        let left = |planned: u64| planned - 6 * 30_000 - (planned * 20_000).div_ceil(1_000_000);
        assert!(left(planned.0) >= 2_000_000);
        assert!(left(planned.0 - 1) < 2_000_000);
        // No loss planned: the amount itself; a share of a million is capped, not a division by 0.
        assert_eq!(
            edges_only(Nanos(0)).amount(Nanos(500), Nanos(1_000), Nanos(1_000)),
            Nanos(500)
        );
        let all = DispatchSizing {
            edge_allowance: Nanos(0),
            interior_ppm: 1_000_000,
        };
        assert_eq!(all.amount(Nanos(1), Nanos(10), Nanos(10)), Nanos(1_000_000));
    }

    #[test]
    fn the_sizing_in_force_names_its_terms() {
        assert_eq!(
            DispatchSizing {
                edge_allowance: Nanos::from_micros(30),
                interior_ppm: 20_000,
            }
            .describe(),
            "30us per slot edge and 2.0 % of slot time"
        );
    }

    #[test]
    fn the_wake_lead_follows_the_p99_of_recent_wake_ups() {
        let mut lead = WakeLead::default();
        let initial = lead.lead();
        assert!(initial >= LEAD_MIN && initial <= LEAD_MAX);
        // Fewer than a full window of samples: the lead does not move yet.
        for _ in 0..LEAD_SAMPLES - 1 {
            lead.record(Nanos::from_micros(100));
        }
        assert_eq!(lead.lead(), initial);
        lead.record(Nanos::from_micros(100));
        assert_eq!(lead.lead(), Nanos::from_micros(105));
        // One very late wake-up in a window is beyond the p99: the lead follows the rest.
        for index in 0..LEAD_SAMPLES {
            lead.record(if index == 7 {
                Nanos::from_millis(8)
            } else {
                Nanos::from_micros(10)
            });
        }
        assert_eq!(lead.lead(), LEAD_MIN);
        // Always late: capped.
        for _ in 0..LEAD_SAMPLES {
            lead.record(Nanos::from_millis(2));
        }
        assert_eq!(lead.lead(), LEAD_MAX);
    }

    #[test]
    fn owner_and_next_edge_follow_the_cycle() {
        let table = table();
        assert_eq!(table.owner_at(0, 0), (None, 2));
        assert_eq!(table.owner_at(0, 13), (Some(Owner::Thread(7)), 15));
        assert_eq!(table.owner_at(0, 16), (None, 20));
        assert_eq!(table.owner_at(1, 16), (None, u64::MAX));
    }

    #[test]
    fn held_free_time_and_a_pending_switch_are_edges() {
        let mut table = table();
        table.held.push(HeldTime {
            cpu: 0,
            start: 6,
            end: 8,
            owner: Owner::Thread(9),
        });
        assert_eq!(table.owner_at(0, 5), (None, 6));
        assert_eq!(table.owner_at(0, 6), (Some(Owner::Thread(9)), 8));
        table.pending = Some((
            30,
            vec![CpuSchedule {
                cpu: 0,
                cycle: Nanos(10),
                slots: Vec::new(),
            }],
        ));
        assert_eq!(table.owner_at(0, 25), (None, 30));
        // An empty schedule has no edges: the dispatcher only wakes for held time or changes.
        assert_eq!(table.owner_at(0, 32), (None, u64::MAX));
        table.settle(31);
        assert!(table.pending.is_none());
        assert!(table.held.is_empty());
    }
}
