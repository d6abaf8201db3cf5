//! Root first: how the daemon keeps answering privileged callers while unprivileged users flood
//! it (issue 39: "the daemon answers root within 100 ms").
//!
//! Measured under `rtlab-hostile` before this module (BENCHMARKS.md, "root's answer under
//! attack"), root's late answers had all waited for the registry lock — behind requests of
//! attackers that held it for up to 54 ms each, several in a row, while two dozen connection
//! threads serving the attackers competed with root's at the same priority. So:
//!
//! * A connection thread serving an unprivileged peer runs at nice 19 ([`ThreadPriority`]); the
//!   accept thread and the threads of privileged peers keep the daemon's own priority. A flood
//!   makes the flooders' answers slow, not root's. They are the daemon's own threads, lowered
//!   for the part of the work that is the peer's alone (reading its lines, looking at its
//!   process, writing its answers).
//! * Unprivileged requests enter the registry one at a time, through a turnstile
//!   ([`RegistryGate`]), and at the daemon's priority for as long as they are inside: a nice-19
//!   thread preempted while it holds the registry lock would keep everyone behind it waiting
//!   (priority inversion). A privileged caller waiting for the registry holds the turnstile's
//!   next entrant back, so it waits for the one request inside at most, never for a queue.
//!   Unprivileged users are still served, one after another, whenever no privileged caller
//!   waits.
//! * The registry's lock, and the RealtimeKit1 book's, inherit priority ([`PiLock`], the
//!   kernel's PI futexes): a real-time thread waiting for one (the dispatcher, a privileged
//!   caller run at a real-time priority) lends its priority to whoever holds it. The turnstile's
//!   wake-up is sent without its lock, which a nice-19 waiter may hold.
//! * No lock without inheritance between them: glibc's malloc arenas are shared by all threads
//!   behind plain locks, and a nice-19 connection thread preempted inside `malloc` held one that
//!   the registry's holder then waited for, with root behind it (645 ms, traced). The `rtlab`
//!   binary therefore allocates with mimalloc (per-thread heaps, frees from other threads through
//!   atomic lists; `crates/rtlab/src/main.rs`).
//!
//! On the shared socket root's path stays at the daemon's base priority (SCHED_OTHER). Users'
//! SCHED_RR threads may hold every CPU within their shares — two users' budgets, 1 s of both
//! CPUs here — and an answer at SCHED_OTHER then waits for the kernel's fair server (50 ms of
//! every second): 118–459 ms, 12 times in a 10-minute hostile run. Running the shared socket's
//! accept thread at SCHED_FIFO above RealtimeKit1's priorities was tried: in 600 s of attack
//! that accept thread, serving the users' floods of connections above every granted thread,
//! starved a CPU's canary long enough that the watchdog demoted a quiet user's SCHED_RR thread.
//! An unprivileged user must not be able to buy CPU above audio threads through the daemon. So
//! root has a socket of its own ([`root_policy`], `crate::server`'s "Root's socket"): the only
//! real-time work there is root's, and a root waiting for the registry lends its priority to
//! whoever holds it (the lock inherits priority, below).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use rtlab_sys::sched::Policy;

/// A lock that lends a waiter's priority to its holder (`FUTEX_LOCK_PI`): the registry's.
pub type PiLock<T> = priority_inheriting_lock::PriorityInheritingLock<T>;
/// A held [`PiLock`].
pub type PiGuard<'a, T> = priority_inheriting_lock::PriorityInheritingLockGuard<'a, T>;

/// Sets the calling thread to `policy` with SCHED_RESET_ON_FORK: a thread it starts begins at
/// SCHED_OTHER (nice 0), whatever the thread's own level.
pub fn set_current_thread(policy: Policy) -> std::io::Result<()> {
    rtlab_sys::thread_control::set_thread_policy_with_flags(
        rtlab_sys::cpu::current_tid(),
        policy,
        rtlab_sys::thread_control::SCHED_FLAG_RESET_ON_FORK,
    )
}

/// The policy of root's socket (`crate::server`, "Root's socket"): SCHED_FIFO one above the
/// highest priority RealtimeKit1 grants (`rtkit.max_realtime_priority`), so users' granted
/// threads cannot keep root's answer waiting; never 99, the canary watchdog's and the
/// dispatchers'. Only uid 0 reaches it: no user's requests are served above their own threads.
pub fn root_policy(max_realtime_priority: u32) -> Policy {
    Policy::Fifo {
        priority: (max_realtime_priority + 1).clamp(1, 98),
    }
}

/// The nice value of a thread serving an unprivileged peer: the lowest SCHED_OTHER weight (15
/// against 1024 at nice 0). Not SCHED_IDLE: on a machine busy with anything else an idle-class
/// thread may not run for seconds, and unprivileged users are to be served, only after root.
pub const UNPRIVILEGED_NICE: i32 = 19;

/// A connection thread's scheduling: its normal one (the daemon's), lowered while it serves an
/// unprivileged peer, or the daemon's base priority while such a request is inside the
/// registry.
#[derive(Debug)]
pub struct ThreadPriority {
    /// Its normal policy, when the thread can be set to it and back: the daemon runs as root
    /// (CAP_SYS_NICE). `None`: the thread is never changed (a daemon run without root could lower
    /// its threads but not raise them again).
    normal: Option<Policy>,
    /// The daemon's base priority (its policy at start: SCHED_OTHER), for an unprivileged
    /// request inside the registry.
    inside: Option<Policy>,
}

impl ThreadPriority {
    /// A connection thread's: `normal` for privileged peers, `inside` for an unprivileged
    /// request inside the registry; neither is used unless the daemon runs as root.
    pub fn new(normal: Policy, inside: Policy) -> ThreadPriority {
        let may_raise = rtlab_sys::proc_thread::current_uid() == 0;
        ThreadPriority {
            normal: may_raise.then_some(normal),
            inside: may_raise.then_some(inside),
        }
    }

    /// Lowers the calling thread to nice [`UNPRIVILEGED_NICE`].
    pub fn lower(&self) {
        if self.normal.is_some() {
            let _ = set_current_thread(Policy::Other {
                nice: UNPRIVILEGED_NICE,
            });
        }
    }

    /// Puts the calling thread back to its normal policy.
    pub fn restore(&self) {
        if let Some(normal) = self.normal {
            let _ = set_current_thread(normal);
        }
    }

    /// Raises the calling thread, serving an unprivileged peer, to the daemon's base priority
    /// while its request is inside the registry.
    fn raise_inside(&self) {
        if let Some(inside) = self.inside {
            let _ = set_current_thread(inside);
        }
    }
}

/// How long an unprivileged request waits between looks at whether privileged callers still
/// wait, should a wake-up be missed (a privileged caller wakes them when it gets in).
const RECHECK: Duration = Duration::from_millis(5);

/// The registry's lock, with privileged callers first and unprivileged ones one at a time.
pub struct RegistryGate<T> {
    registry: Arc<PiLock<T>>,
    /// Held by the one unprivileged request inside or about to enter.
    turnstile: Mutex<()>,
    /// Privileged callers waiting for the registry now.
    privileged_waiting: AtomicUsize,
    cleared: Condvar,
    cleared_lock: Mutex<()>,
}

/// The registry, held: what is dropped first is let go first (the registry, then the
/// turnstile), then the thread goes back to its lowered priority.
pub struct RegistryGuard<'g, T> {
    /// When the registry's lock was taken.
    acquired: std::time::Instant,
    registry: Option<PiGuard<'g, T>>,
    turnstile: Option<MutexGuard<'g, ()>>,
    lower_after: Option<&'g ThreadPriority>,
}

impl<T> std::ops::Deref for RegistryGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.registry.as_ref().expect("held until dropped")
    }
}

impl<T> std::ops::DerefMut for RegistryGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.registry.as_mut().expect("held until dropped")
    }
}

impl<T> Drop for RegistryGuard<'_, T> {
    fn drop(&mut self) {
        self.registry.take();
        LAST_HELD.with(|held| held.set(self.acquired.elapsed()));
        self.turnstile.take();
        if let Some(priority) = self.lower_after {
            priority.lower();
        }
    }
}

thread_local! {
    /// How long this thread last held the registry (`RegistryGuard`), for the server's log of
    /// requests that held it long ([`take_last_held`]).
    static LAST_HELD: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
}

/// How long the calling thread held the registry the last time it let go of it (zero if it has
/// not since the last call).
pub fn take_last_held() -> Duration {
    LAST_HELD.with(|held| held.replace(Duration::ZERO))
}

/// Locks ignoring poison: a panicking connection thread must not take the daemon's shutdown
/// (which reverts every thread) down with it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<T> RegistryGate<T> {
    pub fn new(registry: Arc<PiLock<T>>) -> RegistryGate<T> {
        RegistryGate {
            registry,
            turnstile: Mutex::new(()),
            privileged_waiting: AtomicUsize::new(0),
            cleared: Condvar::new(),
            cleared_lock: Mutex::new(()),
        }
    }

    /// The registry for a privileged caller: it waits only for whoever is inside.
    pub fn privileged(&self) -> RegistryGuard<'_, T> {
        self.privileged_waiting.fetch_add(1, Ordering::SeqCst);
        let registry = self.registry.lock();
        if self.privileged_waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
            // Without `cleared_lock`: a waiter at nice 19 may hold it, and root waits for no
            // thread below it. A wake-up lost to that race is made up within `RECHECK`.
            self.cleared.notify_all();
        }
        RegistryGuard {
            acquired: std::time::Instant::now(),
            registry: Some(registry),
            turnstile: None,
            lower_after: None,
        }
    }

    /// The registry for an unprivileged caller whose thread runs lowered (`priority`): one at a
    /// time, after every privileged caller waiting, at the daemon's priority while inside.
    pub fn unprivileged<'g>(&'g self, priority: &'g ThreadPriority) -> RegistryGuard<'g, T> {
        let turnstile = lock(&self.turnstile);
        priority.raise_inside();
        {
            let mut cleared = lock(&self.cleared_lock);
            while self.privileged_waiting.load(Ordering::SeqCst) > 0 {
                cleared = self
                    .cleared
                    .wait_timeout(cleared, RECHECK)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
        }
        let registry = self.registry.lock();
        RegistryGuard {
            acquired: std::time::Instant::now(),
            registry: Some(registry),
            turnstile: Some(turnstile),
            lower_after: Some(priority),
        }
    }

    /// The registry for a caller that is `privileged` or not.
    pub fn for_caller<'g>(
        &'g self,
        privileged: bool,
        priority: &'g ThreadPriority,
    ) -> RegistryGuard<'g, T> {
        if privileged {
            self.privileged()
        } else {
            self.unprivileged(priority)
        }
    }

    #[cfg(test)]
    fn privileged_waiting(&self) -> usize {
        self.privileged_waiting.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// The order of events: an unprivileged request inside, another unprivileged one
    /// and a privileged one waiting: the privileged one goes next. Before the gate, both waited
    /// on one mutex, in no order; root had waited behind several attackers' requests in turn.
    /// What the server's log of long holds reads: how long this thread held the registry last,
    /// once.
    #[test]
    fn the_time_a_thread_held_the_registry_is_taken_once() {
        let gate = RegistryGate::new(Arc::new(PiLock::new(())));
        let priority = ThreadPriority {
            normal: None,
            inside: None,
        };
        take_last_held();
        {
            let _inside = gate.unprivileged(&priority);
            std::thread::sleep(Duration::from_millis(30));
        }
        assert!(take_last_held() >= Duration::from_millis(30));
        assert_eq!(take_last_held(), Duration::ZERO);
        drop(gate.privileged());
        take_last_held();
        assert_eq!(take_last_held(), Duration::ZERO);
    }

    #[test]
    fn a_waiting_privileged_caller_goes_before_unprivileged_ones() {
        let order = Arc::new(PiLock::new(Vec::new()));
        let gate = RegistryGate::new(Arc::clone(&order));
        let priority = ThreadPriority {
            normal: None,
            inside: None,
        };
        std::thread::scope(|scope| {
            let gate = &gate;
            let inside = gate.unprivileged(&priority);
            let (queued, queued_seen) = mpsc::channel();
            let unprivileged = scope.spawn(move || {
                let priority = ThreadPriority {
                    normal: None,
                    inside: None,
                };
                queued.send(()).unwrap();
                gate.unprivileged(&priority).push("unprivileged");
            });
            queued_seen.recv().unwrap();
            let privileged = scope.spawn(move || gate.privileged().push("privileged"));
            while gate.privileged_waiting() == 0 {
                std::thread::yield_now();
            }
            drop(inside);
            privileged.join().unwrap();
            unprivileged.join().unwrap();
        });
        assert_eq!(*order.lock(), ["privileged", "unprivileged"]);
    }

    /// Unprivileged callers are served, one at a time, while privileged ones come and go.
    #[test]
    fn unprivileged_callers_all_get_in_among_privileged_ones() {
        let count = Arc::new(PiLock::new(0u32));
        let gate = RegistryGate::new(Arc::clone(&count));
        std::thread::scope(|scope| {
            for n in 0..8 {
                let gate = &gate;
                scope.spawn(move || {
                    let priority = ThreadPriority {
                        normal: None,
                        inside: None,
                    };
                    for _ in 0..200 {
                        if n % 4 == 0 {
                            *gate.privileged() += 1;
                        } else {
                            *gate.unprivileged(&priority) += 1;
                        }
                    }
                });
            }
        });
        assert_eq!(*count.lock(), 8 * 200);
    }

    #[test]
    #[ignore = "needs root: raises a lowered thread again"]
    fn a_connection_thread_is_lowered_raised_inside_and_put_back() {
        assert_eq!(rtlab_sys::proc_thread::current_uid(), 0, "needs root");
        std::thread::spawn(|| {
            let base = Policy::Other { nice: 0 };
            let root = Policy::Other { nice: -5 };
            let priority = ThreadPriority::new(root, base);
            priority.lower();
            assert_eq!(
                rtlab_sys::sched::thread_policy(0).unwrap(),
                Policy::Other {
                    nice: UNPRIVILEGED_NICE
                }
            );
            priority.raise_inside();
            assert_eq!(rtlab_sys::sched::thread_policy(0).unwrap(), base);
            priority.restore();
            assert_eq!(rtlab_sys::sched::thread_policy(0).unwrap(), root);
            // SCHED_RESET_ON_FORK: a thread it starts is at nice 0.
            let child = std::thread::spawn(|| rtlab_sys::sched::thread_policy(0).unwrap())
                .join()
                .unwrap();
            assert_eq!(child, base);
        })
        .join()
        .unwrap();
    }
}
