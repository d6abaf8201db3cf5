//! Another process's locks: who owns the futex a thread waits on (read from the process's memory
//! with `process_vm_readv`), and a glibc mutex the test programs of `rtlab trace` lock.
//!
//! `rtlab trace record` sees a thread blocked on a futex address; the trace alone does not say who
//! holds the lock. A glibc `pthread_mutex_t` keeps the owner's TID beside the futex word
//! (`__lock` at offset 0, `__owner` at offset 8, in every x86-64 and arm64 glibc), and a PI futex
//! keeps it in the word itself (low 30 bits). Reading those two words while the process is alive
//! is what names a deadlock's wait-for cycle.

use std::io;

/// Where a glibc mutex keeps its owner, counted from the futex word (`__lock`).
pub const GLIBC_OWNER_OFFSET: u64 = 8;
/// The owner TID bits of a PI futex word (`FUTEX_TID_MASK`).
pub const FUTEX_TID_MASK: u32 = 0x3fff_ffff;

/// The two words that say who holds a lock: the futex word and the word at
/// [`GLIBC_OWNER_OFFSET`] after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockWords {
    pub futex_word: u32,
    pub glibc_owner: i32,
}

/// Reads the futex word at `uaddr` of process `pid` and the glibc owner field after it.
/// Needs the right to ptrace `pid` (root, or the same user without Yama restrictions).
pub fn read_lock_words(pid: u32, uaddr: u64) -> io::Result<LockWords> {
    let mut buffer = [0u8; 12];
    let local = libc::iovec {
        iov_base: buffer.as_mut_ptr().cast(),
        iov_len: buffer.len(),
    };
    let remote = libc::iovec {
        iov_base: uaddr as usize as *mut libc::c_void,
        iov_len: buffer.len(),
    };
    // SAFETY: `local` points at `buffer`, 12 writable bytes that outlive the call; the remote
    // iovec is only an address in the other process, which the kernel checks (EFAULT) and never
    // dereferences in ours. One iovec each, flags 0.
    let read = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if read < 0 {
        return Err(io::Error::last_os_error());
    }
    if read as usize != buffer.len() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("process {pid}: only {read} of 12 bytes at {uaddr:#x}"),
        ));
    }
    Ok(LockWords {
        futex_word: u32::from_ne_bytes(buffer[0..4].try_into().expect("4 bytes")),
        glibc_owner: i32::from_ne_bytes(buffer[8..12].try_into().expect("4 bytes")),
    })
}

/// The owner a lock's words name, if it is one of `threads` (the process's live TIDs): the PI
/// owner in the futex word first, then glibc's `__owner` of a locked mutex. Anything else (a
/// condition variable, a Rust `Mutex`, a word that is not a lock) gives `None`.
pub fn lock_owner(words: LockWords, threads: &[u32]) -> Option<u32> {
    let pi_owner = words.futex_word & FUTEX_TID_MASK;
    if pi_owner != 0 && threads.contains(&pi_owner) {
        return Some(pi_owner);
    }
    let owner = u32::try_from(words.glibc_owner).ok()?;
    (words.futex_word != 0 && owner != 0 && threads.contains(&owner)).then_some(owner)
}

/// A glibc `pthread_mutex_t` (normal or priority-inheriting) that stays at one address, so that a
/// tracer can find its futex word and owner. Used by the test programs of `rtlab trace`.
pub struct GlibcMutex {
    mutex: Box<std::cell::UnsafeCell<libc::pthread_mutex_t>>,
}

// SAFETY: a pthread mutex is made to be shared between threads; every access goes through the
// pthread functions, which synchronise.
unsafe impl Sync for GlibcMutex {}
// SAFETY: the mutex is heap-allocated and never moves; sending the owning box is fine.
unsafe impl Send for GlibcMutex {}

impl std::fmt::Debug for GlibcMutex {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "GlibcMutex({:#x})", self.futex_address())
    }
}

impl GlibcMutex {
    /// A new unlocked mutex; `priority_inheritance` makes it PTHREAD_PRIO_INHERIT.
    pub fn new(priority_inheritance: bool) -> io::Result<GlibcMutex> {
        // SAFETY: an all-zero pthread_mutex_t is PTHREAD_MUTEX_INITIALIZER in glibc; it is
        // initialised properly below before any use.
        let mutex = Box::new(std::cell::UnsafeCell::new(unsafe {
            std::mem::zeroed::<libc::pthread_mutex_t>()
        }));
        // SAFETY: zeroed attributes are initialised by pthread_mutexattr_init before use.
        let mut attributes: libc::pthread_mutexattr_t = unsafe { std::mem::zeroed() };
        // SAFETY: `attributes` is valid writable memory for the attribute object.
        let mut result = unsafe { libc::pthread_mutexattr_init(&mut attributes) };
        if result == 0 && priority_inheritance {
            // SAFETY: `attributes` was initialised above.
            result = unsafe {
                libc::pthread_mutexattr_setprotocol(&mut attributes, libc::PTHREAD_PRIO_INHERIT)
            };
        }
        if result == 0 {
            // SAFETY: the mutex memory is heap-allocated, writable and never moves; the
            // attributes are initialised.
            result = unsafe { libc::pthread_mutex_init(mutex.get(), &attributes) };
        }
        // SAFETY: `attributes` was initialised (or init failed, in which case destroy is a
        // no-op on glibc).
        unsafe { libc::pthread_mutexattr_destroy(&mut attributes) };
        if result != 0 {
            return Err(io::Error::from_raw_os_error(result));
        }
        Ok(GlibcMutex { mutex })
    }

    /// The address of the futex word (`__lock`), as the futex syscalls see it.
    pub fn futex_address(&self) -> u64 {
        self.mutex.get() as usize as u64
    }

    /// Locks; the guard unlocks.
    pub fn lock(&self) -> io::Result<GlibcMutexGuard<'_>> {
        // SAFETY: the mutex was initialised in `new` and lives as long as `self`.
        let result = unsafe { libc::pthread_mutex_lock(self.mutex.get()) };
        if result != 0 {
            return Err(io::Error::from_raw_os_error(result));
        }
        Ok(GlibcMutexGuard { mutex: self })
    }

    /// Locks, giving up after `timeout` (CLOCK_REALTIME, as pthread_mutex_timedlock measures):
    /// `Ok(None)` when it timed out.
    pub fn lock_timeout(
        &self,
        timeout: std::time::Duration,
    ) -> io::Result<Option<GlibcMutexGuard<'_>>> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            + timeout;
        let deadline = libc::timespec {
            tv_sec: now.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(now.subsec_nanos() as i32),
        };
        // SAFETY: the mutex was initialised in `new`; `deadline` is a valid timespec.
        let result = unsafe { libc::pthread_mutex_timedlock(self.mutex.get(), &deadline) };
        match result {
            0 => Ok(Some(GlibcMutexGuard { mutex: self })),
            libc::ETIMEDOUT => Ok(None),
            error => Err(io::Error::from_raw_os_error(error)),
        }
    }
}

impl Drop for GlibcMutex {
    fn drop(&mut self) {
        // SAFETY: no guard borrows the mutex any more (guards borrow `self`); destroying an
        // unlocked initialised mutex is defined.
        unsafe { libc::pthread_mutex_destroy(self.mutex.get()) };
    }
}

/// Holds a [`GlibcMutex`]; unlocks on drop.
#[derive(Debug)]
pub struct GlibcMutexGuard<'mutex> {
    mutex: &'mutex GlibcMutex,
}

impl Drop for GlibcMutexGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: this thread locked the mutex when the guard was made.
        unsafe { libc::pthread_mutex_unlock(self.mutex.mutex.get()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_owner_of_a_locked_glibc_mutex_in_this_process() {
        let mutex = GlibcMutex::new(false).unwrap();
        let pid = std::process::id();
        let me = crate::cpu::current_tid();
        let unlocked = read_lock_words(pid, mutex.futex_address()).unwrap();
        assert_eq!(lock_owner(unlocked, &[me]), None);
        let guard = mutex.lock().unwrap();
        let words = read_lock_words(pid, mutex.futex_address()).unwrap();
        assert_eq!(words.glibc_owner, me as i32);
        assert_eq!(lock_owner(words, &[me]), Some(me));
        assert_eq!(lock_owner(words, &[me + 1]), None);
        drop(guard);
        let pi = GlibcMutex::new(true).unwrap();
        let _guard = pi.lock().unwrap();
        let words = read_lock_words(pid, pi.futex_address()).unwrap();
        assert_eq!(words.futex_word & FUTEX_TID_MASK, me);
        assert_eq!(lock_owner(words, &[me]), Some(me));
    }

    #[test]
    fn a_timed_lock_gives_up() {
        let mutex = std::sync::Arc::new(GlibcMutex::new(false).unwrap());
        let _guard = mutex.lock().unwrap();
        let other = std::sync::Arc::clone(&mutex);
        let got = std::thread::spawn(move || {
            other
                .lock_timeout(std::time::Duration::from_millis(20))
                .map(|guard| guard.is_some())
        })
        .join()
        .unwrap()
        .unwrap();
        assert!(!got);
    }

    #[test]
    fn an_unmapped_address_is_an_error() {
        assert!(read_lock_words(std::process::id(), 8).is_err());
    }
}
