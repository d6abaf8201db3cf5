//! QueryPerformanceCounter: the one monotonic, high-resolution clock on Windows, in nanoseconds.

use std::sync::OnceLock;
use windows_sys::Win32::System::Performance::{QueryPerformanceCounter, QueryPerformanceFrequency};

/// Counts per second of QueryPerformanceCounter (fixed at boot; 10 MHz on current Windows).
pub fn qpc_frequency() -> u64 {
    static FREQUENCY: OnceLock<u64> = OnceLock::new();
    *FREQUENCY.get_or_init(|| {
        let mut frequency: i64 = 0;
        // SAFETY: the pointer is to a live local i64; the call only writes it. Since Windows XP
        // it cannot fail.
        unsafe { QueryPerformanceFrequency(&mut frequency) };
        frequency.max(1) as u64
    })
}

/// The raw counter.
#[inline]
pub fn qpc_ticks() -> u64 {
    let mut counter: i64 = 0;
    // SAFETY: the pointer is to a live local i64; the call only writes it and cannot fail.
    unsafe { QueryPerformanceCounter(&mut counter) };
    counter as u64
}

/// `ticks` of a counter running at `frequency` per second, in nanoseconds (the product is
/// computed in 128 bits; a result beyond 584 years saturates).
#[inline]
pub fn ticks_to_ns(ticks: u64, frequency: u64) -> u64 {
    let nanos = (ticks as u128 * 1_000_000_000) / frequency.max(1) as u128;
    nanos.min(u64::MAX as u128) as u64
}

/// QueryPerformanceCounter in nanoseconds since boot.
#[inline]
pub fn monotonic_ns() -> u64 {
    ticks_to_ns(qpc_ticks(), qpc_frequency())
}

/// The counter's resolution, ns (100 at 10 MHz).
pub fn resolution_ns() -> u64 {
    ticks_to_ns(1, qpc_frequency()).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_ticks_without_overflow() {
        assert_eq!(ticks_to_ns(10_000_000, 10_000_000), 1_000_000_000);
        // A year of a 3 GHz counter: the product overflows 64 bits, the result does not.
        let year_ticks = 3_000_000_000u64 * 86_400 * 365;
        assert_eq!(
            ticks_to_ns(year_ticks, 3_000_000_000),
            31_536_000_000_000_000
        );
        // Beyond 584 years of nanoseconds it saturates rather than wrapping.
        assert_eq!(ticks_to_ns(u64::MAX, 1_000), u64::MAX);
    }

    #[test]
    fn the_clock_moves_forward() {
        let first = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(monotonic_ns() > first);
    }
}
