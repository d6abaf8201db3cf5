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

/// Wakes up to `count` threads waiting on `word`.
pub fn wake(word: &AtomicU32, count: u32) {
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
}
