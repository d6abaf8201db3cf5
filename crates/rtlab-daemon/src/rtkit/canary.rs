//! The canary and the watchdog: demote the threads the RealtimeKit1 service made real-time of the
//! users that starve a CPU or run over their share of one.
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
//! back to SCHED_OTHER the SCHED_RR threads of the users whose threads ran on that CPU during the
//! silence ([`super::meter::blamed_users`]), and the service refuses those users for
//! `rtkit.canary_refusal` (rtkit: 5 minutes, and every user). A CPU starved while none of the
//! book's threads ran there (real-time threads of programs with their own privileges, rtlab's own
//! reservations) changes nothing: the service made none of them real-time.
//!
//! rtkit-daemon runs one canary (not pinned) and a 10 s watchdog, so it notices only a machine
//! whose every CPU starves, after 10 s, and then demotes every user's threads; a canary per CPU
//! notices one starved CPU, here within `canary_timeout` plus one 50 ms tick (BENCHMARKS.md,
//! "RealtimeKit1: canary demotion").
//!
//! # The share
//!
//! A thread that naps briefly now and then lets its CPU's canary run while it holds nearly all of
//! that CPU. So at every tick the watchdog also meters each SCHED_RR thread of the book
//! ([`super::meter`]): a user whose threads ran more than `rtkit.user_share` of one CPU over
//! `rtkit.user_share_window`, with what the registry holds for it, has them put back to
//! SCHED_OTHER and is refused for `rtkit.user_share_refusal`. This runs with or without the
//! canaries (`rtkit.canary = false`).
//!
//! The watchdog never waits on a lock a starved thread may hold: it takes the book's and the
//! registry's locks with `try_lock` only, and when that fails it works from what it read at its
//! last tick (a grant made since is announced to it before the thread's policy changes). What it
//! read may be stale, so the kernel has the last word: a thread the registry's view calls
//! reserved is metered and demoted anyway while it is SCHED_RR (a reservation holds a thread at
//! SCHED_DEADLINE, or SCHED_FIFO in its slots and its policy from before the grant between them;
//! SCHED_RR is the book's grant, given back when a reservation ended). And a demotion the book
//! cannot hear of at once (its lock held by a thread the runaways starve) is owed to it and told
//! at a later tick: the watchdog goes on ticking meanwhile (it once waited up to a second there,
//! blind to every other runaway).

use super::book::{demote, Book, Refused};
use super::config::RtkitConfig;
use super::meter::{self, Look, Meter, MeteredThread, OverShare, RegistryView};
use crate::precedence::PiLock;
use crate::registry::Registry;
use rtlab_sys::clock::monotonic_ns;
use rtlab_sys::sched::Policy;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often each canary writes and the watchdog reads.
pub const CANARY_TICK: Duration = Duration::from_millis(50);
/// The canaries' SCHED_RR priority.
pub const CANARY_PRIORITY: u32 = 1;
/// The watchdog's SCHED_FIFO priority (the top).
pub const WATCHDOG_PRIORITY: u32 = 99;

/// What the watchdog did.
#[derive(Clone, Debug)]
pub enum Demotion {
    /// A canary did not run: the users whose threads ran on its CPU were demoted.
    Starvation {
        cpu: usize,
        /// How long the canary had not run when the watchdog saw it.
        silent_for: Duration,
        users: BTreeSet<u32>,
        demoted: Vec<u32>,
    },
    /// A user ran over its share.
    OverShare {
        /// Why, in words (`policy::share_exceeded`).
        why: String,
        uid: u32,
        demoted: Vec<u32>,
    },
}

/// The running canaries and watchdog; stopped when dropped.
pub struct Canary {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Joined after the watchdog (it ends when the watchdog has).
    notifier: Option<JoinHandle<()>>,
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
    /// Starts a canary per online CPU (with `rtkit.canary`) and the watchdog, which also meters
    /// the book's threads against `rtkit.user_share`; `fired` hears of each demotion after it, on a
    /// thread of its own: the watchdog never waits for it (`fired` writes the log, and a thread
    /// the runaways starve may hold stderr's lock, as it may any lock).
    pub fn start(
        book: Arc<PiLock<Book>>,
        registry: Arc<PiLock<Registry>>,
        config: &RtkitConfig,
        fired: impl Fn(&Demotion) + Send + 'static,
    ) -> std::io::Result<Canary> {
        let cpus = if config.canary {
            rtlab_sys::cpu::online_cpus()?
        } else {
            Vec::new()
        };
        let stop = Arc::new(AtomicBool::new(false));
        let slots: Arc<Vec<AtomicU64>> = Arc::new(
            cpus.iter()
                .map(|_| AtomicU64::new(monotonic_ns()))
                .collect(),
        );
        let mut canary = Canary {
            stop: Arc::clone(&stop),
            threads: Vec::new(),
            notifier: None,
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
        let (notices, fired_ones) = std::sync::mpsc::channel::<Demotion>();
        let notifier = std::thread::Builder::new()
            .name("rtkit-notices".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                // Ends when the watchdog, the only sender, has ended.
                for demotion in fired_ones {
                    fired(&demotion);
                }
            })?;
        canary.notifier = Some(notifier);
        let watchdog_stop = Arc::clone(&stop);
        let config = config.clone();
        let announced = book.lock().announcements();
        let watchdog = std::thread::Builder::new()
            .name("rtkit-watchdog".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                let made = rtlab_sys::sched::set_current_thread_policy(Policy::Fifo {
                    priority: WATCHDOG_PRIORITY,
                });
                let _ = ready_sender.send(made);
                let watchdog = Watchdog {
                    book: &book,
                    announced: &announced,
                    registry: &registry,
                    config: &config,
                    fired: &notices,
                    owed: RefCell::new(Vec::new()),
                };
                watchdog.run(&slots, &cpus, &watchdog_stop);
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
        if let Some(notifier) = self.notifier.take() {
            let _ = notifier.join();
        }
    }
}

/// Takes `mutex` if it is free (or poisoned); never waits.
fn try_lock<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match mutex.try_lock() {
        Ok(guard) => Some(guard),
        Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// The watchdog thread's state between ticks.
struct Watchdog<'a> {
    book: &'a PiLock<Book>,
    announced: &'a Mutex<Vec<MeteredThread>>,
    registry: &'a PiLock<Registry>,
    config: &'a RtkitConfig,
    /// To the notices thread, which calls `fired` (a send never waits).
    fired: &'a std::sync::mpsc::Sender<Demotion>,
    /// Demotions the book has not heard of yet (its lock was held): the users and their refusal.
    owed: RefCell<Vec<(BTreeSet<u32>, Refused)>>,
}

/// What the watchdog read at its last tick that found the locks free.
#[derive(Default)]
struct Known {
    threads: Vec<MeteredThread>,
    registry: RegistryView,
}

impl Watchdog<'_> {
    fn run(&self, slots: &[AtomicU64], cpus: &[usize], stop: &AtomicBool) {
        let timeout_ns = self.config.canary_timeout.as_nanos() as u64;
        // Each thread's looks are kept for the longest silence the canary may have to explain.
        let mut meter = Meter::new(
            self.config.user_share_window.as_nanos() as u64,
            2 * timeout_ns + 1_000_000_000,
        );
        let mut known = Known::default();
        // Announced grants not yet seen in a read of the book.
        let mut pending: Vec<MeteredThread> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(CANARY_TICK);
            self.pay_owed();
            // First the announcements, then the book: a grant announced before a read that found
            // the book's lock free is in that read (announced under the book's lock).
            if let Some(mut announced) = try_lock(self.announced) {
                pending.append(&mut announced);
            }
            if let Some(book) = self.book.try_lock() {
                known.threads = book.realtime_threads();
                pending.clear();
            }
            for thread in &pending {
                if !known.threads.iter().any(|known| known.tid == thread.tid) {
                    known.threads.push(*thread);
                }
            }
            if let Some(registry) = self.registry.try_lock() {
                known.registry = registry.realtimekit_view();
            }
            let realtime_users = self.look(&mut meter, &known);
            let now = monotonic_ns();
            let ran = meter.fractions(now);
            if let Some(mut book) = self.book.try_lock() {
                book.set_run_fractions(ran.clone());
            }
            let over = meter::over_share(
                &ran,
                &known.registry.held,
                &realtime_users,
                self.config.user_share,
            );
            for user in over {
                self.demote_over_share(user, &known);
            }
            let starved = slots.iter().enumerate().find_map(|(index, slot)| {
                let silent = now.saturating_sub(slot.load(Ordering::Relaxed));
                (silent > timeout_ns).then_some((index, silent))
            });
            let Some((index, silent_ns)) = starved else {
                continue;
            };
            let cpu = cpus[index];
            let users = meter::blamed_users(
                &meter.ran_on_cpu(cpu, now.saturating_sub(silent_ns)),
                silent_ns,
                self.config.user_share,
            );
            if !users.is_empty() {
                let demoted = self.demote_users(
                    &users,
                    &known,
                    Refused {
                        until: Instant::now() + self.config.canary_refusal,
                        why: format!(
                            "the canary found CPU {cpu} starved by real-time threads of {}",
                            uid_list(&users)
                        ),
                        key: "rtkit.canary_refusal",
                    },
                );
                let _ = self.fired.send(Demotion::Starvation {
                    cpu,
                    silent_for: Duration::from_nanos(silent_ns),
                    users,
                    demoted,
                });
                // Every canary starts a fresh wait, as rtkit's watchdog does after it acted.
                let now = monotonic_ns();
                for slot in slots {
                    slot.store(now, Ordering::Relaxed);
                }
            } else {
                // Starved by real-time threads that are not the service's (a program with its
                // own privileges, rtlab's reservations): nothing of ours to demote, and no reason
                // to refuse requests. The canary waits afresh.
                slots[index].store(monotonic_ns(), Ordering::Relaxed);
            }
        }
    }

    /// Looks at every known thread (not one a reservation holds) and records it in the meter;
    /// returns the users with a thread real-time now.
    fn look(&self, meter: &mut Meter, known: &Known) -> BTreeSet<u32> {
        let mut present = BTreeSet::new();
        let mut realtime_users = BTreeSet::new();
        for thread in &known.threads {
            let policy = rtlab_sys::sched::thread_policy(thread.tid);
            if !is_the_books(known, thread.tid, policy.as_ref().ok()) {
                continue;
            }
            let Ok(stat) = rtlab_sys::thread_control::thread_stat(thread.tid) else {
                continue;
            };
            if stat.start_time != thread.thread_start {
                continue;
            }
            let Ok(cpu_time_ns) = rtlab_sys::thread_control::thread_cpu_time_ns(thread.tid) else {
                continue;
            };
            let realtime = policy.is_ok_and(|policy| policy.is_realtime());
            present.insert((thread.tid, thread.thread_start));
            if realtime {
                realtime_users.insert(thread.uid);
            }
            meter.record(
                *thread,
                Look {
                    at_ns: monotonic_ns(),
                    cpu_time_ns,
                    cpu: stat.last_cpu,
                    realtime,
                },
            );
        }
        meter.end_tick(&present, monotonic_ns());
        realtime_users
    }

    fn demote_over_share(&self, user: OverShare, known: &Known) {
        let why = super::policy::share_exceeded(user.uid, user.ran, user.held, self.config);
        let demoted = self.demote_users(
            &BTreeSet::from([user.uid]),
            known,
            Refused {
                until: Instant::now() + self.config.user_share_refusal,
                why: format!("{why}; its real-time threads were put back to SCHED_OTHER"),
                key: "rtkit.user_share_refusal",
            },
        );
        let _ = self.fired.send(Demotion::OverShare {
            why,
            uid: user.uid,
            demoted,
        });
    }

    /// Puts the known real-time threads of `users` back to SCHED_OTHER at once (no lock), then
    /// tells the book, which forgets them and refuses their users; returns the demoted tids.
    fn demote_users(&self, users: &BTreeSet<u32>, known: &Known, refused: Refused) -> Vec<u32> {
        let demoted: Vec<u32> = known
            .threads
            .iter()
            .filter(|thread| {
                users.contains(&thread.uid)
                    && is_the_books(
                        known,
                        thread.tid,
                        rtlab_sys::sched::thread_policy(thread.tid).ok().as_ref(),
                    )
                    && demote(thread.tid, thread.thread_start)
            })
            .map(|thread| thread.tid)
            .collect();
        // The book forgets the threads and refuses the users now if its lock is free (it often is,
        // now that the runaways are demoted), else at a later tick. Meanwhile a grant it makes is
        // metered as any other: the users' run time is still in the window, so the next tick
        // demotes it again.
        self.owed.borrow_mut().push((users.clone(), refused));
        self.pay_owed();
        demoted
    }

    /// Tells the book of the demotions it has not heard of, if its lock is free.
    fn pay_owed(&self) {
        let mut owed = self.owed.borrow_mut();
        if owed.is_empty() {
            return;
        }
        if let Some(mut book) = self.book.try_lock() {
            for (users, refused) in owed.drain(..) {
                book.demote_users(&users, &refused);
            }
        }
    }
}

/// Whether the watchdog meters and may demote `tid`, a thread the book made real-time, whose
/// policy is `policy` now: unless a reservation holds it, as the registry's view (perhaps stale)
/// says and the kernel agrees (it is not SCHED_RR: see the module's doc).
fn is_the_books(known: &Known, tid: u32, policy: Option<&Policy>) -> bool {
    !known.registry.reserved_tids.contains(&tid)
        || matches!(policy, Some(Policy::RoundRobin { .. }))
}

/// "uid 65534" or "uids 1, 65534".
pub fn uid_list(uids: &BTreeSet<u32>) -> String {
    let list: Vec<String> = uids.iter().map(u32::to_string).collect();
    if list.len() == 1 {
        format!("uid {}", list[0])
    } else {
        format!("uids {}", list.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known_with_reserved(tid: u32) -> Known {
        Known {
            threads: Vec::new(),
            registry: RegistryView {
                held: Default::default(),
                reserved_tids: BTreeSet::from([tid]),
            },
        }
    }

    #[test]
    fn a_thread_the_view_calls_reserved_is_the_books_again_once_it_is_round_robin() {
        let known = known_with_reserved(7);
        // Held by its reservation: SCHED_FIFO in a dispatch slot, its old policy between slots,
        // SCHED_DEADLINE.
        for policy in [
            Policy::Fifo { priority: 50 },
            Policy::Other { nice: 0 },
            Policy::Deadline {
                runtime_ns: 1_000_000,
                deadline_ns: 10_000_000,
                period_ns: 10_000_000,
            },
        ] {
            assert!(!is_the_books(&known, 7, Some(&policy)), "{policy:?}");
        }
        // The view is stale (the reservation ended and the book gave SCHED_RR back): metered.
        assert!(is_the_books(
            &known,
            7,
            Some(&Policy::RoundRobin { priority: 5 })
        ));
        assert!(!is_the_books(&known, 7, None));
        // A thread no reservation holds is the book's, whatever the kernel says.
        assert!(is_the_books(&known, 8, Some(&Policy::Other { nice: 0 })));
        assert!(is_the_books(&known, 8, None));
    }
}
