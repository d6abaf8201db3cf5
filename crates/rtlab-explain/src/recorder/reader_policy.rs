//! The explain readers' scheduling policy. A reader runs SCHED_IDLE while it keeps up, so a
//! normal-class measuring thread preempts it at once; it takes a fair share (SCHED_BATCH nice 0)
//! while its rings fill faster than it reads. A SCHED_IDLE thread on a CPU-bound machine may not
//! run for seconds, though, so it cannot notice it fell behind: the rings overflowed, perf's stack
//! samples were overwritten before they were matched, and the last read after the run waited for
//! the load to end. A watchdog thread (SCHED_OTHER, awake a few µs every 100 ms) lifts a
//! background reader that made no progress for [`STARVED_NS`]; the reader returns to the
//! background itself once it has caught up.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the watchdog looks.
const WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// A background reader that has not looped for this long is starved (its polls are ≤ 250 ms).
pub(super) const STARVED_NS: u64 = 400_000_000;

/// The explainer thread's scheduling policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReaderPolicy {
    /// SCHED_IDLE: yields to every other thread at once.
    Background,
    /// SCHED_BATCH nice 0: a fair share, no wake-up preemption of others.
    CatchingUp,
}

impl ReaderPolicy {
    fn policy(self) -> rtlab_sys::sched::Policy {
        match self {
            ReaderPolicy::Background => rtlab_sys::sched::Policy::Idle,
            ReaderPolicy::CatchingUp => rtlab_sys::sched::Policy::Batch { nice: 0 },
        }
    }
}

/// What the reader and its watchdog share.
#[derive(Default)]
struct Shared {
    tid: AtomicU32,
    /// CLOCK_MONOTONIC of the reader's last loop.
    progress_ns: AtomicU64,
    /// The reader is in the background (the watchdog only lifts a background reader).
    background: AtomicBool,
    /// Set by the watchdog when it lifted the reader; taken by the reader.
    lifted: AtomicBool,
    stop: AtomicBool,
}

impl Shared {
    /// One look: lifts a starved background reader. True when it did.
    fn look(&self, now_ns: u64) -> bool {
        let tid = self.tid.load(Ordering::SeqCst);
        if tid == 0
            || !self.background.load(Ordering::SeqCst)
            || now_ns < self.progress_ns.load(Ordering::SeqCst) + STARVED_NS
        {
            return false;
        }
        self.background.store(false, Ordering::SeqCst);
        let _ = rtlab_sys::sched::set_thread_policy(tid, ReaderPolicy::CatchingUp.policy());
        self.lifted.store(true, Ordering::SeqCst);
        true
    }
}

/// The calling reader thread's policy and its watchdog (stopped when this is dropped).
pub(super) struct PolicyKeeper {
    current: ReaderPolicy,
    shared: Arc<Shared>,
    watchdog: Option<JoinHandle<()>>,
    /// Times the reader went to [`ReaderPolicy::CatchingUp`], by itself or lifted.
    pub catch_ups: u64,
}

impl PolicyKeeper {
    /// Puts the calling thread in the background and starts its watchdog.
    pub(super) fn start() -> PolicyKeeper {
        let shared = Arc::new(Shared::default());
        shared
            .progress_ns
            .store(rtlab_sys::clock::monotonic_ns(), Ordering::SeqCst);
        shared
            .tid
            .store(rtlab_sys::cpu::current_tid(), Ordering::SeqCst);
        let watched = Arc::clone(&shared);
        let watchdog = std::thread::Builder::new()
            .name("rtlab-explain-w".into())
            .spawn(move || {
                while !watched.stop.load(Ordering::SeqCst) {
                    std::thread::park_timeout(WATCH_INTERVAL);
                    watched.look(rtlab_sys::clock::monotonic_ns());
                }
            })
            .ok();
        let mut keeper = PolicyKeeper {
            current: ReaderPolicy::CatchingUp,
            shared,
            watchdog,
            catch_ups: 0,
        };
        keeper.set(ReaderPolicy::Background);
        keeper
    }

    /// Called every loop: records progress and takes a lift by the watchdog.
    pub(super) fn beat(&mut self) {
        self.shared
            .progress_ns
            .store(rtlab_sys::clock::monotonic_ns(), Ordering::SeqCst);
        if self.shared.lifted.swap(false, Ordering::SeqCst) {
            self.current = ReaderPolicy::CatchingUp;
            self.catch_ups += 1;
            // Again from here: the watchdog's change may have raced one of ours.
            let _ = rtlab_sys::sched::set_current_thread_policy(self.current.policy());
        }
    }

    /// Applies `wanted` if it is not the current policy.
    pub(super) fn set(&mut self, wanted: ReaderPolicy) {
        if wanted != self.current {
            self.catch_ups += u64::from(wanted == ReaderPolicy::CatchingUp);
            self.apply(wanted);
        }
    }

    /// A fair share for the last read after the measurement (not counted as a catch-up: the
    /// reader no longer perturbs anything).
    pub(super) fn finishing(&mut self) {
        if self.current != ReaderPolicy::CatchingUp {
            self.apply(ReaderPolicy::CatchingUp);
        }
    }

    fn apply(&mut self, wanted: ReaderPolicy) {
        self.current = wanted;
        if wanted == ReaderPolicy::Background {
            self.shared
                .progress_ns
                .store(rtlab_sys::clock::monotonic_ns(), Ordering::SeqCst);
        }
        self.shared
            .background
            .store(wanted == ReaderPolicy::Background, Ordering::SeqCst);
        let _ = rtlab_sys::sched::set_current_thread_policy(wanted.policy());
    }
}

impl Drop for PolicyKeeper {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.thread().unpark();
            let _ = watchdog.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_lifts_only_a_starved_background_reader() {
        let shared = Shared::default();
        // No reader yet.
        assert!(!shared.look(10 * STARVED_NS));
        shared.tid.store(u32::MAX, Ordering::SeqCst); // no such thread: the syscall fails
        shared.progress_ns.store(STARVED_NS, Ordering::SeqCst);
        // Catching up already: left alone however long ago it looped.
        assert!(!shared.look(10 * STARVED_NS));
        shared.background.store(true, Ordering::SeqCst);
        // In the background and recent: left alone.
        assert!(!shared.look(2 * STARVED_NS - 1));
        // In the background and starved: lifted once.
        assert!(shared.look(2 * STARVED_NS));
        assert!(shared.lifted.load(Ordering::SeqCst));
        assert!(!shared.background.load(Ordering::SeqCst));
        assert!(!shared.look(10 * STARVED_NS));
    }
}
