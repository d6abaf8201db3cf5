//! Futex wait/wake on an `AtomicU32`: the cheapest way one thread can wake another, used by the
//! hand-off series (signal → first instruction of the woken thread).

use std::sync::atomic::AtomicU32;

/// Waits while `word` still holds `expected`, at most `timeout_ns`. Returns on wake-up, value
/// change, timeout or signal; the caller re-checks the word.
pub fn wait(word: &AtomicU32, expected: u32, timeout_ns: u64) {
    let timeout = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 that lives for the duration of the call; the timeout
    // pointer is valid; FUTEX_WAIT_PRIVATE only reads the word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &timeout as *const libc::timespec,
        );
    }
}

/// Waits while `word` still holds `expected`, until CLOCK_MONOTONIC reaches `deadline_ns`
/// (FUTEX_WAIT_BITSET, an absolute timeout on the same high-resolution timer as
/// `clock_nanosleep` with TIMER_ABSTIME): a sleep until a time that another thread can end early
/// with [`wake`]. Returns on wake-up, value change, the deadline or a signal; the caller re-checks
/// the word and the clock.
pub fn wait_until(word: &AtomicU32, expected: u32, deadline_ns: u64) {
    let deadline = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 that lives for the duration of the call; the
    // deadline pointer is valid; FUTEX_WAIT_BITSET_PRIVATE (without FUTEX_CLOCK_REALTIME: an
    // absolute CLOCK_MONOTONIC time) only reads the word; the second address is unused.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &deadline as *const libc::timespec,
            std::ptr::null::<u32>(),
            libc::FUTEX_BITSET_MATCH_ANY,
        );
    }
}

/// Wakes up to `count` threads waiting on `word` (`u32::MAX`: all of them).
pub fn wake(word: &AtomicU32, count: u32) {
    // The kernel reads the count as a C int: u32::MAX would arrive as -1, which wakes one.
    let count = count.min(i32::MAX as u32) as libc::c_int;
    // SAFETY: `word` is a valid, aligned u32; FUTEX_WAKE_PRIVATE does not dereference anything else.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            count,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    #[test]
    fn wake_releases_a_waiter() {
        let word = Arc::new(AtomicU32::new(0));
        let waiter_word = Arc::clone(&word);
        let waiter = std::thread::spawn(move || {
            while waiter_word.load(Ordering::Acquire) == 0 {
                wait(&waiter_word, 0, 1_000_000_000);
            }
            waiter_word.load(Ordering::Acquire)
        });
        std::thread::sleep(std::time::Duration::from_millis(10));
        word.store(7, Ordering::Release);
        wake(&word, 1);
        assert_eq!(waiter.join().unwrap(), 7);
    }

    #[test]
    fn wait_until_sleeps_to_its_deadline_unless_woken() {
        let deadline = crate::clock::monotonic_ns() + 20_000_000;
        let word = AtomicU32::new(0);
        wait_until(&word, 0, deadline);
        assert!(crate::clock::monotonic_ns() >= deadline);
        // A minute away, ended by a wake-up long before.
        let word = Arc::new(AtomicU32::new(0));
        let waiter_word = Arc::clone(&word);
        let far = crate::clock::monotonic_ns() + 60_000_000_000;
        let waiter = std::thread::spawn(move || {
            while waiter_word.load(Ordering::Acquire) == 0 && crate::clock::monotonic_ns() < far {
                wait_until(&waiter_word, 0, far);
            }
            crate::clock::monotonic_ns() < far
        });
        std::thread::sleep(std::time::Duration::from_millis(10));
        word.store(1, Ordering::Release);
        wake(&word, 1);
        assert!(waiter.join().unwrap(), "woken before its deadline");
    }

    /// `u32::MAX` wakes every waiter. It had woken one (the kernel read it as -1): the rtlab
    /// daemon's dispatcher threads, told to stop, were woken one of two, and the other's idle
    /// wake-up, 50 ms later, was spent under the daemon's registry lock.
    #[test]
    fn wake_with_u32_max_wakes_every_waiter() {
        let word = Arc::new(AtomicU32::new(0));
        let far = crate::clock::monotonic_ns() + 10_000_000_000;
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let word = Arc::clone(&word);
                std::thread::spawn(move || {
                    wait_until(&word, 0, far);
                    crate::clock::monotonic_ns() < far
                })
            })
            .collect();
        // Each waiter is asleep on the word (or has not reached it: then the value stops it).
        std::thread::sleep(std::time::Duration::from_millis(50));
        word.store(1, Ordering::Release);
        wake(&word, u32::MAX);
        for waiter in waiters {
            assert!(waiter.join().unwrap(), "woken, not timed out");
        }
    }
}
