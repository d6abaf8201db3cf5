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

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use rtlab_sys::sched::Policy;

/// The nice value of a thread serving an unprivileged peer: the lowest SCHED_OTHER weight (15
/// against 1024 at nice 0). Not SCHED_IDLE: on a machine busy with anything else an idle-class
/// thread may not run for seconds, and unprivileged users are to be served, only after root.
pub const UNPRIVILEGED_NICE: i32 = 19;

/// A connection thread's scheduling: the daemon's own, or lowered while it serves an
/// unprivileged peer.
#[derive(Debug)]
pub struct ThreadPriority {
    /// The policy the thread started with (the accept thread's), when it can be set back: the
    /// daemon runs as root (CAP_SYS_NICE). `None`: the thread is never lowered (a daemon run
    /// without root could lower its threads but not raise them again).
    normal: Option<Policy>,
}

impl ThreadPriority {
    /// The calling thread's policy now, to come back to.
    pub fn of_current_thread() -> ThreadPriority {
        let may_raise = rtlab_sys::proc_thread::current_uid() == 0;
        ThreadPriority {
            normal: may_raise
                .then(|| rtlab_sys::sched::thread_policy(0).ok())
                .flatten(),
        }
    }

    /// Lowers the calling thread to nice [`UNPRIVILEGED_NICE`].
    pub fn lower(&self) {
        if self.normal.is_some() {
            let _ = rtlab_sys::sched::set_current_thread_policy(Policy::Other {
                nice: UNPRIVILEGED_NICE,
            });
        }
    }

    /// Puts the calling thread back to the policy it started with.
    pub fn restore(&self) {
        if let Some(normal) = self.normal {
            let _ = rtlab_sys::sched::set_current_thread_policy(normal);
        }
    }
}

/// How long an unprivileged request waits between looks at whether privileged callers still
/// wait, should a wake-up be missed (a privileged caller wakes them when it gets in).
const RECHECK: Duration = Duration::from_millis(5);

/// The registry's lock, with privileged callers first and unprivileged ones one at a time.
pub struct RegistryGate<T> {
    registry: Arc<Mutex<T>>,
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
    registry: Option<MutexGuard<'g, T>>,
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
        self.turnstile.take();
        if let Some(priority) = self.lower_after {
            priority.lower();
        }
    }
}

/// Locks ignoring poison: a panicking connection thread must not take the daemon's shutdown
/// (which reverts every thread) down with it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<T> RegistryGate<T> {
    pub fn new(registry: Arc<Mutex<T>>) -> RegistryGate<T> {
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
        let registry = lock(&self.registry);
        if self.privileged_waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
            let _cleared = lock(&self.cleared_lock);
            self.cleared.notify_all();
        }
        RegistryGuard {
            registry: Some(registry),
            turnstile: None,
            lower_after: None,
        }
    }

    /// The registry for an unprivileged caller whose thread runs lowered (`priority`): one at a
    /// time, after every privileged caller waiting, at the daemon's priority while inside.
    pub fn unprivileged<'g>(&'g self, priority: &'g ThreadPriority) -> RegistryGuard<'g, T> {
        let turnstile = lock(&self.turnstile);
        priority.restore();
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
        RegistryGuard {
            registry: Some(lock(&self.registry)),
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
    #[test]
    fn a_waiting_privileged_caller_goes_before_unprivileged_ones() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let gate = RegistryGate::new(Arc::clone(&order));
        let priority = ThreadPriority { normal: None };
        std::thread::scope(|scope| {
            let gate = &gate;
            let inside = gate.unprivileged(&priority);
            let (queued, queued_seen) = mpsc::channel();
            let unprivileged = scope.spawn(move || {
                let priority = ThreadPriority { normal: None };
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
        assert_eq!(*order.lock().unwrap(), ["privileged", "unprivileged"]);
    }

    /// Unprivileged callers are served, one at a time, while privileged ones come and go.
    #[test]
    fn unprivileged_callers_all_get_in_among_privileged_ones() {
        let count = Arc::new(Mutex::new(0u32));
        let gate = RegistryGate::new(Arc::clone(&count));
        std::thread::scope(|scope| {
            for n in 0..8 {
                let gate = &gate;
                scope.spawn(move || {
                    let priority = ThreadPriority { normal: None };
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
        assert_eq!(*count.lock().unwrap(), 8 * 200);
    }

    #[test]
    fn a_lowered_thread_runs_at_nice_19_and_comes_back() {
        if rtlab_sys::proc_thread::current_uid() != 0 {
            eprintln!("skipped: needs root (a thread's nice is lowered only where it can be raised again)");
            return;
        }
        std::thread::spawn(|| {
            let before = rtlab_sys::sched::thread_policy(0).unwrap();
            let priority = ThreadPriority::of_current_thread();
            priority.lower();
            assert_eq!(
                rtlab_sys::sched::thread_policy(0).unwrap(),
                Policy::Other {
                    nice: UNPRIVILEGED_NICE
                }
            );
            priority.restore();
            assert_eq!(rtlab_sys::sched::thread_policy(0).unwrap(), before);
        })
        .join()
        .unwrap();
    }
}
