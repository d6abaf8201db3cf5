//! Locking the process's memory so the sample path never takes a page fault.

use std::io;

/// Holds mlockall(MCL_CURRENT | MCL_FUTURE) until dropped, then munlockall: the process is left
/// as it was found.
#[derive(Debug)]
pub struct MemoryLock {
    _private: (),
}

impl MemoryLock {
    pub fn lock_all() -> io::Result<MemoryLock> {
        // SAFETY: mlockall takes flags by value and touches no Rust-visible memory.
        let result = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
        if result == 0 {
            Ok(MemoryLock { _private: () })
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl Drop for MemoryLock {
    fn drop(&mut self) {
        // SAFETY: munlockall has no arguments; unlocking is always safe.
        unsafe { libc::munlockall() };
    }
}

/// Touches every page of a buffer so it is resident before measuring starts.
pub fn prefault(buffer: &mut [u8]) {
    for index in (0..buffer.len()).step_by(4096) {
        // A volatile write so the compiler cannot drop the touch.
        // SAFETY: `index` is within `buffer`, so the pointer is valid and aligned for u8.
        unsafe { std::ptr::write_volatile(buffer.as_mut_ptr().add(index), 0) };
    }
}
