//! The system timer's resolution: what is in force (NtQueryTimerResolution) and this process's
//! own request (timeBeginPeriod / timeEndPeriod, a guard).
//!
//! Windows runs its clock interrupt at the finest period any process asked for (before Windows 10
//! 2004, system-wide; since then a process that did not ask sees the default unless it is
//! visible or plays audio, and since Windows 11 a minimised window's request may be ignored).
//! Which process asked is not readable without admin (`powercfg /energy` needs it).

use std::io;
use windows_sys::Win32::Media::{timeBeginPeriod, timeEndPeriod, timeGetDevCaps, TIMECAPS};

/// NtQueryTimerResolution's three values, in 100 ns units as the kernel reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerResolution {
    /// The coarsest period (the default, 156,250 = 15.625 ms on most machines).
    pub coarsest_100ns: u32,
    /// The finest period a request can get (5,000 = 0.5 ms on most machines).
    pub finest_100ns: u32,
    /// The period in force now.
    pub current_100ns: u32,
}

#[link(name = "ntdll")]
extern "system" {
    // Undocumented but stable since NT 3.5 (paper 004 uses it); windows-sys does not declare it.
    fn NtQueryTimerResolution(
        maximum_time: *mut u32,
        minimum_time: *mut u32,
        current_time: *mut u32,
    ) -> i32;
}

/// The timer resolution in force and its limits.
pub fn query() -> io::Result<TimerResolution> {
    let (mut coarsest, mut finest, mut current) = (0u32, 0u32, 0u32);
    // SAFETY: three live local u32s the call writes; it reads nothing else.
    let status = unsafe { NtQueryTimerResolution(&mut coarsest, &mut finest, &mut current) };
    if status < 0 {
        return Err(io::Error::other(format!(
            "NtQueryTimerResolution: NTSTATUS {:#010x}",
            status as u32
        )));
    }
    Ok(TimerResolution {
        coarsest_100ns: coarsest,
        finest_100ns: finest,
        current_100ns: current,
    })
}

/// timeGetDevCaps: the multimedia timer's period range, ms (1..1,000,000 on current Windows).
pub fn multimedia_period_range_ms() -> io::Result<(u32, u32)> {
    let mut caps = TIMECAPS {
        wPeriodMin: 0,
        wPeriodMax: 0,
    };
    // SAFETY: `caps` is a live TIMECAPS and the size passed is its size.
    let result = unsafe { timeGetDevCaps(&mut caps, std::mem::size_of::<TIMECAPS>() as u32) };
    if result != 0 {
        return Err(io::Error::other(format!(
            "timeGetDevCaps: MMRESULT {result}"
        )));
    }
    Ok((caps.wPeriodMin, caps.wPeriodMax))
}

/// This process's timeBeginPeriod(ms) request, ended (timeEndPeriod) on drop. Windows also ends
/// it when the process exits, however it exits.
#[derive(Debug)]
pub struct PeriodRequest {
    period_ms: u32,
}

impl PeriodRequest {
    pub fn begin(period_ms: u32) -> io::Result<PeriodRequest> {
        // SAFETY: a plain integer; the call only records this process's request.
        let result = unsafe { timeBeginPeriod(period_ms) };
        if result != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("timeBeginPeriod({period_ms}): MMRESULT {result} (out of range)"),
            ));
        }
        Ok(PeriodRequest { period_ms })
    }

    pub fn period_ms(&self) -> u32 {
        self.period_ms
    }
}

impl Drop for PeriodRequest {
    fn drop(&mut self) {
        // SAFETY: ends the request `begin` made, once, with the same value.
        unsafe { timeEndPeriod(self.period_ms) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resolution_is_read_and_a_request_is_ended() {
        let resolution = query().unwrap();
        assert!(resolution.finest_100ns <= resolution.current_100ns);
        assert!(resolution.current_100ns <= resolution.coarsest_100ns);
        let request = PeriodRequest::begin(1).unwrap();
        assert_eq!(request.period_ms(), 1);
        drop(request);
        assert!(PeriodRequest::begin(0).is_err());
        let (low, high) = multimedia_period_range_ms().unwrap();
        assert!(low >= 1 && low <= high);
    }
}
