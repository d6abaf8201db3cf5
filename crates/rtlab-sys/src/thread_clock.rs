//! The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID).
//!
//! An experiment that must do "c ms of work per buffer" has to count the CPU time the thread got,
//! not the wall time that passed: under load a thread is preempted in the middle of its work, and
//! that stretch is part of what is being measured.

/// CPU time consumed by the calling thread so far, in ns.
#[inline]
pub fn thread_cpu_time_ns() -> u64 {
    // CLOCK_THREAD_CPUTIME_ID is supported on every Linux rtlab runs on (since 2.6.12).
    crate::clock::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Burns CPU until the calling thread has consumed `work_ns` more of it; returns the CPU time
/// actually consumed (≥ `work_ns`, by at most one clock read).
pub fn spin_cpu_time_ns(work_ns: u64) -> u64 {
    let start = thread_cpu_time_ns();
    loop {
        let used = thread_cpu_time_ns().saturating_sub(start);
        if used >= work_ns {
            return used;
        }
        std::hint::spin_loop();
    }
}

/// CPU time of this process (every thread) plus that of the children it has reaped, in ns.
pub fn process_and_children_cpu_time_ns() -> u64 {
    let usage = |who: libc::c_int| {
        // SAFETY: an all-zero rusage is a valid value to be overwritten.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid, writable rusage; RUSAGE_SELF and RUSAGE_CHILDREN are valid.
        if unsafe { libc::getrusage(who, &mut usage) } != 0 {
            return 0;
        }
        let micros = |time: libc::timeval| time.tv_sec as u64 * 1_000_000 + time.tv_usec as u64;
        (micros(usage.ru_utime) + micros(usage.ru_stime)) * 1_000
    };
    usage(libc::RUSAGE_SELF) + usage(libc::RUSAGE_CHILDREN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinning_consumes_at_least_the_asked_cpu_time() {
        let before = thread_cpu_time_ns();
        let used = spin_cpu_time_ns(2_000_000);
        assert!(used >= 2_000_000);
        assert!(thread_cpu_time_ns() - before >= 2_000_000);
    }

    #[test]
    fn sleeping_does_not_count() {
        let before = thread_cpu_time_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        // A sleep costs microseconds of CPU at most, never the 20 ms that passed.
        assert!(thread_cpu_time_ns() - before < 10_000_000);
    }
}
