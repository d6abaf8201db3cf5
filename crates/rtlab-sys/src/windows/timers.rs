//! Every way to wait that `rtlab run` and `rtlab timers` measure on Windows (papers 000 and
//! 004): Sleep, WaitForSingleObject with a timeout, waitable timers with and without
//! CREATE_WAITABLE_TIMER_HIGH_RESOLUTION, and the multimedia timer (timeSetEvent periodic).
//!
//! Each wait is bounded by its own timeout; nothing here blocks forever.

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, WAIT_OBJECT_0, WAIT_TIMEOUT};
use windows_sys::Win32::Media::{
    timeKillEvent, timeSetEvent, TIME_CALLBACK_FUNCTION, TIME_KILL_SYNCHRONOUS, TIME_PERIODIC,
};
use windows_sys::Win32::System::Threading::{
    CreateEventW, CreateWaitableTimerExW, SetWaitableTimer, Sleep, WaitForSingleObject,
    CREATE_WAITABLE_TIMER_HIGH_RESOLUTION, TIMER_ALL_ACCESS,
};

/// Sleep(ms).
pub fn sleep_ms(milliseconds: u32) {
    // SAFETY: a plain integer; the call only suspends this thread.
    unsafe { Sleep(milliseconds) };
}

/// An owned kernel handle, closed on drop.
#[derive(Debug)]
struct OwnedHandle(HANDLE);

impl Drop for OwnedHandle {
    fn drop(&mut self) {
        // SAFETY: the handle was returned by a Create* call, is owned here and closed once.
        unsafe { CloseHandle(self.0) };
    }
}

// SAFETY: a kernel handle may be used from any thread of the process.
unsafe impl Send for OwnedHandle {}

/// A manual-reset event nobody sets: WaitForSingleObject on it returns after its timeout, the
/// way a worker thread waiting for work with a timeout does.
#[derive(Debug)]
pub struct TimeoutEvent(OwnedHandle);

impl TimeoutEvent {
    pub fn new() -> io::Result<TimeoutEvent> {
        // SAFETY: null attributes and name are allowed; a manual-reset event, initially unset.
        let handle = unsafe { CreateEventW(std::ptr::null(), 1, 0, std::ptr::null()) };
        if handle.is_null() {
            return Err(super::last_error("CreateEventW"));
        }
        Ok(TimeoutEvent(OwnedHandle(handle)))
    }

    /// WaitForSingleObject(event, ms): returns when the timeout elapses.
    pub fn wait_ms(&self, milliseconds: u32) -> io::Result<()> {
        // SAFETY: the handle is a live event owned by self.
        let result = unsafe { WaitForSingleObject(self.0 .0, milliseconds) };
        match result {
            WAIT_TIMEOUT | WAIT_OBJECT_0 => Ok(()),
            _ => Err(super::last_error("WaitForSingleObject")),
        }
    }
}

/// A waitable timer (CreateWaitableTimerExW), optionally with
/// CREATE_WAITABLE_TIMER_HIGH_RESOLUTION (Windows 10 1803+: expires at its due time rather than
/// at the next clock interrupt, whatever timeBeginPeriod says).
#[derive(Debug)]
pub struct WaitableTimer {
    handle: OwnedHandle,
    high_resolution: bool,
}

impl WaitableTimer {
    pub fn new(high_resolution: bool) -> io::Result<WaitableTimer> {
        let flags = if high_resolution {
            CREATE_WAITABLE_TIMER_HIGH_RESOLUTION
        } else {
            0
        };
        // SAFETY: null attributes and name are allowed; the flags and access are constants.
        let handle = unsafe {
            CreateWaitableTimerExW(std::ptr::null(), std::ptr::null(), flags, TIMER_ALL_ACCESS)
        };
        if handle.is_null() {
            return Err(super::last_error(if high_resolution {
                "CreateWaitableTimerExW(CREATE_WAITABLE_TIMER_HIGH_RESOLUTION)"
            } else {
                "CreateWaitableTimerExW"
            }));
        }
        Ok(WaitableTimer {
            handle: OwnedHandle(handle),
            high_resolution,
        })
    }

    pub fn is_high_resolution(&self) -> bool {
        self.high_resolution
    }

    /// Arms the timer to expire `delay_ns` from now (rounded up to the timer's 100 ns unit) and
    /// waits for it, at most `delay + 1 s`.
    ///
    /// The caller's deadlines are absolute on QueryPerformanceCounter; each wait is armed with
    /// what remains until the next one. Absolute due times of a waitable timer are system time
    /// (FILETIME), which NTP slews and steps independently of QPC: arming them would let the
    /// wake-ups drift against the deadlines they are measured from.
    pub fn wait_ns(&self, delay_ns: u64) -> io::Result<()> {
        // Negative: relative, in 100 ns units; at least one unit.
        let due: i64 = -(delay_ns.div_ceil(100).max(1) as i64);
        // SAFETY: the handle is a live timer owned by self; `due` outlives the call; no
        // completion routine, no period.
        let result = unsafe { SetWaitableTimer(self.handle.0, &due, 0, None, std::ptr::null(), 0) };
        if result == 0 {
            return Err(super::last_error("SetWaitableTimer"));
        }
        let bound_ms = (delay_ns / 1_000_000)
            .saturating_add(1_000)
            .min(u32::MAX as u64 - 1);
        // SAFETY: the handle is a live timer owned by self.
        let waited = unsafe { WaitForSingleObject(self.handle.0, bound_ms as u32) };
        match waited {
            WAIT_OBJECT_0 => Ok(()),
            WAIT_TIMEOUT => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the waitable timer did not expire within its delay plus 1 s",
            )),
            _ => Err(super::last_error("WaitForSingleObject(waitable timer)")),
        }
    }
}

/// The stamps a multimedia timer's callback writes: preallocated, written by the callback thread
/// with one atomic increment per expiry, read after the timer is killed.
#[derive(Debug)]
struct StampBuffer {
    stamps: Box<[AtomicU64]>,
    next: AtomicUsize,
}

/// A periodic multimedia timer (timeSetEvent, TIME_PERIODIC | TIME_CALLBACK_FUNCTION |
/// TIME_KILL_SYNCHRONOUS) whose callback stamps QueryPerformanceCounter at every expiry, like
/// paper 000's measurement. Killed on drop; after `stop` no callback runs any more.
#[derive(Debug)]
pub struct MultimediaTimer {
    id: u32,
    buffer: Box<StampBuffer>,
}

unsafe extern "system" fn stamp_callback(_id: u32, _message: u32, user: usize, _: usize, _: usize) {
    // SAFETY: `user` is the address of the boxed StampBuffer, which outlives the timer: the
    // timer is killed synchronously (no callback runs after timeKillEvent returns) before the
    // box is dropped.
    let buffer = unsafe { &*(user as *const StampBuffer) };
    let index = buffer.next.fetch_add(1, Ordering::Relaxed);
    if let Some(slot) = buffer.stamps.get(index) {
        slot.store(super::clock::qpc_ticks(), Ordering::Relaxed);
    }
}

impl MultimediaTimer {
    /// Starts a periodic timer of `period_ms` (resolution 0: as exact as the system can) with
    /// room for `capacity` stamps; expiries beyond that are counted but not stamped.
    pub fn start(period_ms: u32, capacity: usize) -> io::Result<MultimediaTimer> {
        let buffer = Box::new(StampBuffer {
            stamps: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            next: AtomicUsize::new(0),
        });
        let user = &*buffer as *const StampBuffer as usize;
        // SAFETY: the callback is a valid `extern "system"` function; `user` points at the boxed
        // buffer, which self keeps alive until the timer is killed.
        let id = unsafe {
            timeSetEvent(
                period_ms,
                0,
                Some(stamp_callback),
                user,
                TIME_PERIODIC | TIME_CALLBACK_FUNCTION | TIME_KILL_SYNCHRONOUS,
            )
        };
        if id == 0 {
            return Err(io::Error::other(format!(
                "timeSetEvent({period_ms} ms, TIME_PERIODIC) refused"
            )));
        }
        Ok(MultimediaTimer { id, buffer })
    }

    /// Expiries so far.
    pub fn count(&self) -> usize {
        self.buffer.next.load(Ordering::Relaxed)
    }

    /// Kills the timer and returns its stamps (QPC ticks, in expiry order) and how many expiries
    /// found the buffer full.
    pub fn stop(mut self) -> (Vec<u64>, usize) {
        self.kill();
        let fired = self.buffer.next.load(Ordering::Relaxed);
        let kept = fired.min(self.buffer.stamps.len());
        let stamps = self.buffer.stamps[..kept]
            .iter()
            .map(|slot| slot.load(Ordering::Relaxed))
            .collect();
        (stamps, fired - kept)
    }

    fn kill(&mut self) {
        if self.id != 0 {
            // SAFETY: the id came from timeSetEvent and is killed once; TIME_KILL_SYNCHRONOUS
            // makes this wait for a running callback.
            unsafe { timeKillEvent(self.id) };
            self.id = 0;
        }
    }
}

impl Drop for MultimediaTimer {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_waiter_returns() {
        sleep_ms(1);
        TimeoutEvent::new().unwrap().wait_ms(1).unwrap();
        for high_resolution in [false, true] {
            let timer = WaitableTimer::new(high_resolution).unwrap();
            assert_eq!(timer.is_high_resolution(), high_resolution);
            timer.wait_ns(500_000).unwrap();
        }
    }

    #[test]
    fn the_multimedia_timer_stamps_in_order_and_stops() {
        let timer = MultimediaTimer::start(1, 4).unwrap();
        while timer.count() < 6 {
            sleep_ms(5);
        }
        let (stamps, beyond) = timer.stop();
        assert_eq!(stamps.len(), 4);
        assert!(beyond >= 2);
        assert!(stamps.windows(2).all(|pair| pair[0] <= pair[1]));
    }
}
