//! Two futex mutexes that differ only in priority inheritance: what a workload's shared locks are.
//!
//! [`PlainMutex`] is the classic three-state futex lock (Drepper, "Futexes Are Tricky"): a waiter
//! sleeps in FUTEX_WAIT and the holder keeps its own priority, so a medium-priority thread that
//! preempts a low-priority holder delays every high-priority waiter — paper 003's priority
//! inversion. [`PiMutex`] is the kernel's priority-inheritance futex (FUTEX_LOCK_PI2 /
//! FUTEX_UNLOCK_PI): the word holds the owner's thread id, and while a higher-priority thread waits
//! the kernel runs the owner at the waiter's priority (or deadline). Both take a timeout so a
//! thread never waits past the end of a run.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

/// FUTEX_LOCK_PI2 (Linux 5.14): FUTEX_LOCK_PI whose timeout is CLOCK_MONOTONIC.
const FUTEX_LOCK_PI2: libc::c_int = 13;

/// The lock was not taken before the deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the lock was not taken before the deadline")]
pub struct LockTimedOut;

/// A futex mutex without priority inheritance.
#[derive(Debug, Default)]
pub struct PlainMutex {
    /// 0 unlocked, 1 locked, 2 locked with (possible) waiters.
    word: AtomicU32,
}

impl PlainMutex {
    pub fn new() -> PlainMutex {
        PlainMutex::default()
    }

    /// Takes the lock, waiting at most until `deadline_ns` (CLOCK_MONOTONIC).
    pub fn lock_until(&self, deadline_ns: u64) -> Result<(), LockTimedOut> {
        if self
            .word
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return Ok(());
        }
        loop {
            if self.word.swap(2, Ordering::Acquire) == 0 {
                return Ok(());
            }
            let now = crate::clock::monotonic_ns();
            if now >= deadline_ns {
                return Err(LockTimedOut);
            }
            crate::futex::wait(&self.word, 2, deadline_ns - now);
        }
    }

    /// Releases the lock (the caller holds it).
    pub fn unlock(&self) {
        if self.word.fetch_sub(1, Ordering::Release) != 1 {
            self.word.store(0, Ordering::Release);
            crate::futex::wake(&self.word, 1);
        }
    }
}

/// A priority-inheritance futex mutex (FUTEX_LOCK_PI2 / FUTEX_UNLOCK_PI).
#[derive(Debug, Default)]
pub struct PiMutex {
    /// 0 unlocked, else the owner's thread id with FUTEX_WAITERS / FUTEX_OWNER_DIED bits.
    word: AtomicU32,
}

impl PiMutex {
    pub fn new() -> PiMutex {
        PiMutex::default()
    }

    /// Takes the lock, waiting at most until `deadline_ns` (CLOCK_MONOTONIC). While the calling
    /// thread waits, the owner runs at least at its priority.
    pub fn lock_until(&self, deadline_ns: u64) -> io::Result<Result<(), LockTimedOut>> {
        let tid = crate::cpu::current_tid();
        if self
            .word
            .compare_exchange(0, tid, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return Ok(Ok(()));
        }
        let timeout = libc::timespec {
            tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
        };
        loop {
            // SAFETY: `word` is a valid, aligned u32 that outlives the call; `timeout` is a valid
            // absolute CLOCK_MONOTONIC timespec; FUTEX_LOCK_PI2 reads and writes only the word.
            let result = unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.word.as_ptr(),
                    FUTEX_LOCK_PI2 | libc::FUTEX_PRIVATE_FLAG,
                    0,
                    &timeout as *const libc::timespec,
                )
            };
            if result == 0 {
                return Ok(Ok(()));
            }
            let error = io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EINTR) | Some(libc::EAGAIN) => continue,
                Some(libc::ETIMEDOUT) => return Ok(Err(LockTimedOut)),
                _ => return Err(error),
            }
        }
    }

    /// Releases the lock (the calling thread holds it); hands it to the highest-priority waiter.
    pub fn unlock(&self) -> io::Result<()> {
        let tid = crate::cpu::current_tid();
        if self
            .word
            .compare_exchange(tid, 0, Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            return Ok(());
        }
        // SAFETY: `word` is a valid, aligned u32; FUTEX_UNLOCK_PI reads and writes only the word.
        let result = unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.word.as_ptr(),
                libc::FUTEX_UNLOCK_PI | libc::FUTEX_PRIVATE_FLAG,
            )
        };
        if result == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    fn far() -> u64 {
        crate::clock::monotonic_ns() + 10_000_000_000
    }

    /// Four threads increment a counter non-atomically under the lock 2000 times each: lost
    /// updates if exclusion failed.
    fn hammer<L: Send + Sync + 'static>(lock: Arc<L>, lock_it: fn(&L), unlock_it: fn(&L)) {
        let counter = Arc::new(AtomicU64::new(0));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (lock, counter) = (Arc::clone(&lock), Arc::clone(&counter));
                std::thread::spawn(move || {
                    for _ in 0..2000 {
                        lock_it(&lock);
                        let value = counter.load(Ordering::Relaxed);
                        counter.store(value + 1, Ordering::Relaxed);
                        unlock_it(&lock);
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        assert_eq!(counter.load(Ordering::Relaxed), 8000);
    }

    #[test]
    fn plain_mutex_excludes_and_times_out() {
        let lock = Arc::new(PlainMutex::new());
        hammer(
            Arc::clone(&lock),
            |lock| lock.lock_until(far()).unwrap(),
            PlainMutex::unlock,
        );
        lock.lock_until(far()).unwrap();
        let other = Arc::clone(&lock);
        let timed_out =
            std::thread::spawn(move || other.lock_until(crate::clock::monotonic_ns() + 20_000_000))
                .join()
                .unwrap();
        assert_eq!(timed_out, Err(LockTimedOut));
        lock.unlock();
    }

    #[test]
    fn pi_mutex_excludes_and_times_out() {
        let lock = Arc::new(PiMutex::new());
        hammer(
            Arc::clone(&lock),
            |lock| lock.lock_until(far()).unwrap().unwrap(),
            |lock| lock.unlock().unwrap(),
        );
        lock.lock_until(far()).unwrap().unwrap();
        let other = Arc::clone(&lock);
        let timed_out = std::thread::spawn(move || {
            other
                .lock_until(crate::clock::monotonic_ns() + 20_000_000)
                .unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(timed_out, Err(LockTimedOut));
        lock.unlock().unwrap();
    }
}
