//! CLOCK_MONOTONIC reads and absolute sleeps: the two calls on the probe's sample path.
//!
//! tracefs can be told to stamp events with the same clock (`trace_clock` = `mono`), so times from
//! here and from traces compare directly.

/// CLOCK_MONOTONIC now, in ns. vDSO-backed: no syscall on the fast path.
#[inline]
pub fn monotonic_ns() -> u64 {
    // CLOCK_MONOTONIC is always supported on Linux.
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `clock` now, in ns (clock_gettime); 0 for a clock the kernel does not support, whose read
/// leaves the time untouched.
#[inline]
pub(crate) fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut spec = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `spec` is a valid, writable timespec; an unsupported clock fails with EINVAL
    // without writing to it.
    unsafe { libc::clock_gettime(clock, &mut spec) };
    spec.tv_sec as u64 * 1_000_000_000 + spec.tv_nsec as u64
}

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (clock_nanosleep with TIMER_ABSTIME).
/// Restarts after signals, so a signal never produces an early "wake-up".
#[inline]
pub fn sleep_until_ns(deadline_ns: u64) {
    let spec = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `spec` is a valid timespec; the remaining-time pointer may be null with TIMER_ABSTIME.
        let result = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if result != libc::EINTR {
            return;
        }
    }
}

/// The calling thread's timer slack, ns (PR_GET_TIMERSLACK).
pub fn timer_slack_ns() -> u64 {
    // SAFETY: PR_GET_TIMERSLACK takes no pointers and returns the slack as the result.
    let result = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    result.max(0) as u64
}

/// Sets the calling thread's timer slack (PR_SET_TIMERSLACK). Per thread: a measuring thread sets
/// its own and nothing outlives it.
pub fn set_timer_slack_ns(slack_ns: u64) -> std::io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes the slack by value; no pointers are involved.
    let result =
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack_ns as libc::c_ulong, 0, 0, 0) };
    if result == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_moves_forward_and_sleep_reaches_deadline() {
        let before = monotonic_ns();
        let deadline = before + 2_000_000;
        sleep_until_ns(deadline);
        assert!(monotonic_ns() >= deadline);
    }

    #[test]
    fn timer_slack_round_trips() {
        std::thread::spawn(|| {
            set_timer_slack_ns(1).unwrap();
            assert_eq!(timer_slack_ns(), 1);
        })
        .join()
        .unwrap();
    }
}
