//! Locking the process's memory so the sample path never takes a page fault.

use std::io;

/// Holds mlockall until dropped, then munlockall: the process is left as it was found.
#[derive(Debug)]
pub struct MemoryLock {
    _private: (),
}

impl MemoryLock {
    /// mlockall(MCL_CURRENT | MCL_FUTURE): every mapped page is made resident and locked now,
    /// and every later mapping as it is made.
    pub fn lock_all() -> io::Result<MemoryLock> {
        Self::lock(libc::MCL_CURRENT | libc::MCL_FUTURE)
    }

    /// mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT): a page is locked once it is first
    /// touched and never paged out afterwards, but nothing is populated up front. Locking a
    /// 6 MB binary, every thread's whole stack and every heap mapping ahead costs more than the
    /// measuring itself in a short run; with this the caller touches (see [`prefault`]) what
    /// its sample path will use before measuring, and only that becomes resident.
    pub fn lock_on_fault() -> io::Result<MemoryLock> {
        Self::lock(libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT)
    }

    fn lock(flags: libc::c_int) -> io::Result<MemoryLock> {
        // SAFETY: mlockall takes flags by value and touches no Rust-visible memory.
        let result = unsafe { libc::mlockall(flags) };
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
