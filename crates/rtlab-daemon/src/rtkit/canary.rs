//! The canary: demotes every thread the RealtimeKit1 service made real-time when a CPU starves.
//!
//! # How starvation is detected
//!
//! One canary thread per online CPU, pinned to it, at SCHED_RR priority 1 — below every priority
//! the service grants (1 is allowed too; equal priorities take turns every RR slice, 100 ms, so a
//! runaway at priority 1 lets its CPU's canary run and is not one). Every 50 ms each canary
//! writes the time into its slot and sleeps. A watchdog thread at SCHED_FIFO 99, above everything
//! the service can grant, wakes every 50 ms and reads the slots: a canary that has not written
//! for `rtkit.canary_timeout` (500 ms by default) means real-time threads have held its CPU that
//! long without a break, so nothing of normal priority ran there either. The watchdog then puts
//! every SCHED_RR thread of the book back to SCHED_OTHER (rtkit's `reset_known`) and the service
//! refuses requests for `rtkit.canary_refusal` (rtkit: 5 minutes). A CPU starved while the book
//! holds no SCHED_RR thread (real-time threads of programs with their own privileges, rtlab's own
//! reservations) changes nothing: the service made none of them real-time.
//!
//! rtkit-daemon runs one canary (not pinned) and a 10 s watchdog, so it notices only a machine
//! whose every CPU starves, after 10 s; a canary per CPU notices one starved CPU, here within
//! `canary_timeout` plus one 50 ms tick (BENCHMARKS.md, "RealtimeKit1: canary demotion").
//!
//! The watchdog never waits on a lock a starved thread may hold: it takes the book's lock with
//! `try_lock` only, and when that fails it demotes from the list of threads it read at its last
//! tick (a thread granted since is granted by a thread that just held the lock, so the next
//! attempt sees it).

use super::book::{demote, Book};
use rtlab_sys::clock::monotonic_ns;
use rtlab_sys::sched::Policy;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often each canary writes and the watchdog reads.
pub const CANARY_TICK: Duration = Duration::from_millis(50);
/// The canaries' SCHED_RR priority.
pub const CANARY_PRIORITY: u32 = 1;
/// The watchdog's SCHED_FIFO priority (the top).
pub const WATCHDOG_PRIORITY: u32 = 99;

/// One time the canary fired.
#[derive(Clone, Debug)]
pub struct Starvation {
    pub cpu: usize,
    /// How long the canary had not run when the watchdog saw it.
    pub silent_for: Duration,
    pub demoted: Vec<u32>,
}

/// The running canaries and watchdog; stopped when dropped.
pub struct Canary {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Canary {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Canary")
            .field("threads", &self.threads.len())
            .finish()
    }
}

impl Canary {
    /// Starts a canary per online CPU and the watchdog; `fired` hears of each starvation (from
    /// the watchdog thread, after the demotion).
    pub fn start(
        book: Arc<Mutex<Book>>,
        timeout: Duration,
        fired: impl Fn(&Starvation) + Send + 'static,
    ) -> std::io::Result<Canary> {
        let cpus = rtlab_sys::cpu::online_cpus()?;
        let stop = Arc::new(AtomicBool::new(false));
        let slots: Arc<Vec<AtomicU64>> = Arc::new(
            cpus.iter()
                .map(|_| AtomicU64::new(monotonic_ns()))
                .collect(),
        );
        let mut canary = Canary {
            stop: Arc::clone(&stop),
            threads: Vec::new(),
        };
        let (ready_sender, ready) = std::sync::mpsc::channel::<std::io::Result<()>>();
        for (index, cpu) in cpus.iter().copied().enumerate() {
            let slots = Arc::clone(&slots);
            let stop = Arc::clone(&stop);
            let ready_sender = ready_sender.clone();
            let thread = std::thread::Builder::new()
                .name(format!("rtkit-canary{cpu}"))
                .stack_size(64 * 1024)
                .spawn(move || {
                    // A CPU that is in an isolated partition refuses the pin: the canary then runs
                    // wherever it may, and still tells when every CPU it may use starves.
                    let _ = rtlab_sys::cpu::pin_current_thread(cpu);
                    let made = rtlab_sys::sched::set_current_thread_policy(Policy::RoundRobin {
                        priority: CANARY_PRIORITY,
                    });
                    let _ = ready_sender.send(made);
                    while !stop.load(Ordering::Relaxed) {
                        slots[index].store(monotonic_ns(), Ordering::Relaxed);
                        std::thread::sleep(CANARY_TICK);
                    }
                })?;
            canary.threads.push(thread);
        }
        let watchdog_stop = Arc::clone(&stop);
        let watchdog = std::thread::Builder::new()
            .name("rtkit-watchdog".into())
            .stack_size(128 * 1024)
            .spawn(move || {
                let made = rtlab_sys::sched::set_current_thread_policy(Policy::Fifo {
                    priority: WATCHDOG_PRIORITY,
                });
                let _ = ready_sender.send(made);
                watch(&book, &slots, &cpus, timeout, &watchdog_stop, &fired);
            })?;
        canary.threads.push(watchdog);
        for _ in 0..canary.threads.len() {
            match ready.recv() {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    return Err(std::io::Error::new(
                        error.kind(),
                        format!("making the canary and its watchdog real-time: {error}"),
                    ))
                }
                Err(_) => break,
            }
        }
        Ok(canary)
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn watch(
    book: &Mutex<Book>,
    slots: &[AtomicU64],
    cpus: &[usize],
    timeout: Duration,
    stop: &AtomicBool,
    fired: &dyn Fn(&Starvation),
) {
    let timeout_ns = timeout.as_nanos() as u64;
    let mut known: Vec<(u32, u64)> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(CANARY_TICK);
        if let Ok(book) = book.try_lock() {
            known = book.realtime_threads();
        }
        let now = monotonic_ns();
        let starved = slots.iter().enumerate().find_map(|(index, slot)| {
            let silent = now.saturating_sub(slot.load(Ordering::Relaxed));
            (silent > timeout_ns).then_some((index, silent))
        });
        let Some((index, silent_ns)) = starved else {
            continue;
        };
        let threads = match book.try_lock() {
            Ok(book) => book.realtime_threads(),
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner().realtime_threads(),
            Err(TryLockError::WouldBlock) => known.clone(),
        };
        if threads.is_empty() {
            // Starved by real-time threads that are not the service's (a program with its own
            // privileges, rtlab's reservations): nothing of ours to demote, and no reason to
            // refuse requests. The canary waits afresh.
            let now = monotonic_ns();
            slots[index].store(now, Ordering::Relaxed);
            continue;
        }
        let demoted: Vec<u32> = threads
            .iter()
            .filter(|(tid, start_time)| demote(*tid, *start_time))
            .map(|(tid, _)| *tid)
            .collect();
        // The book forgets them and refuses for a while; its lock is free again now that the
        // runaways are demoted (tried for a second, then left to the next tick's demotion).
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until {
            match book.try_lock() {
                Ok(mut book) => {
                    book.demoted(Instant::now());
                    break;
                }
                Err(TryLockError::Poisoned(poisoned)) => {
                    poisoned.into_inner().demoted(Instant::now());
                    break;
                }
                Err(TryLockError::WouldBlock) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        // Every canary starts a fresh wait, as rtkit's watchdog does after it acted.
        let now = monotonic_ns();
        for slot in slots {
            slot.store(now, Ordering::Relaxed);
        }
        fired(&Starvation {
            cpu: cpus[index],
            silent_for: Duration::from_nanos(silent_ns),
            demoted,
        });
    }
}
