//! Thread and process priority on Windows: the measuring classes of `rtlab run`.
//!
//! - `rt-high`: THREAD_PRIORITY_TIME_CRITICAL in REALTIME_PRIORITY_CLASS (base priority 31).
//!   Without SeIncreaseBasePriorityPrivilege Windows silently grants HIGH_PRIORITY_CLASS instead
//!   (base 15), so the class actually granted is read back, never assumed.
//! - `mmcss`: the Multimedia Class Scheduler Service's "Pro Audio" task
//!   (AvSetMmThreadCharacteristicsW), how audio applications really run.
//! - `normal`: left as it is.
//!
//! Every change is a guard that puts the old value back on drop.

use std::io;
use windows_sys::Win32::Foundation::HANDLE;
use windows_sys::Win32::System::Threading::{
    AvRevertMmThreadCharacteristics, AvSetMmThreadCharacteristicsW, GetCurrentProcess,
    GetCurrentThread, GetPriorityClass, GetThreadPriority, SetPriorityClass, SetThreadAffinityMask,
    SetThreadPriority, ABOVE_NORMAL_PRIORITY_CLASS, BELOW_NORMAL_PRIORITY_CLASS,
    HIGH_PRIORITY_CLASS, IDLE_PRIORITY_CLASS, NORMAL_PRIORITY_CLASS, REALTIME_PRIORITY_CLASS,
    THREAD_PRIORITY_TIME_CRITICAL,
};

/// The process's priority class, by name (`REALTIME`, `HIGH`, `NORMAL`, …).
pub fn priority_class_name(class: u32) -> &'static str {
    match class {
        REALTIME_PRIORITY_CLASS => "REALTIME",
        HIGH_PRIORITY_CLASS => "HIGH",
        ABOVE_NORMAL_PRIORITY_CLASS => "ABOVE_NORMAL",
        NORMAL_PRIORITY_CLASS => "NORMAL",
        BELOW_NORMAL_PRIORITY_CLASS => "BELOW_NORMAL",
        IDLE_PRIORITY_CLASS => "IDLE",
        _ => "unknown",
    }
}

/// This process's priority class now.
pub fn process_priority_class() -> io::Result<u32> {
    // SAFETY: GetCurrentProcess returns a pseudo-handle that needs no closing; the call reads it.
    let class = unsafe { GetPriorityClass(GetCurrentProcess()) };
    if class == 0 {
        return Err(super::last_error("GetPriorityClass"));
    }
    Ok(class)
}

/// The process in REALTIME_PRIORITY_CLASS if Windows allows it, else whatever it granted (HIGH
/// without the privilege); the old class comes back on drop.
#[derive(Debug)]
pub struct RealtimeProcess {
    previous: u32,
    /// The class Windows actually granted.
    pub granted: u32,
}

impl RealtimeProcess {
    pub fn raise() -> io::Result<RealtimeProcess> {
        let previous = process_priority_class()?;
        // SAFETY: pseudo-handle of this process; the call changes only its priority class.
        let result = unsafe { SetPriorityClass(GetCurrentProcess(), REALTIME_PRIORITY_CLASS) };
        if result == 0 {
            return Err(super::last_error(
                "SetPriorityClass(REALTIME_PRIORITY_CLASS)",
            ));
        }
        let granted = process_priority_class()?;
        Ok(RealtimeProcess { previous, granted })
    }

    pub fn is_realtime(&self) -> bool {
        self.granted == REALTIME_PRIORITY_CLASS
    }
}

impl Drop for RealtimeProcess {
    fn drop(&mut self) {
        // SAFETY: as in `raise`; restoring the class read before it.
        unsafe { SetPriorityClass(GetCurrentProcess(), self.previous) };
    }
}

/// The calling thread's relative priority (-15..15; 15 is TIME_CRITICAL).
pub fn thread_priority() -> i32 {
    // SAFETY: pseudo-handle of the calling thread; the call reads its priority.
    unsafe { GetThreadPriority(GetCurrentThread()) }
}

/// Makes the calling thread THREAD_PRIORITY_TIME_CRITICAL. A measuring thread ends with its
/// priority (threads never go back to a pool), so there is nothing to restore.
pub fn set_thread_time_critical() -> io::Result<()> {
    // SAFETY: pseudo-handle of the calling thread; the call changes only its priority.
    let result = unsafe { SetThreadPriority(GetCurrentThread(), THREAD_PRIORITY_TIME_CRITICAL) };
    if result == 0 {
        return Err(super::last_error("SetThreadPriority(TIME_CRITICAL)"));
    }
    Ok(())
}

/// The calling thread registered with MMCSS under a task name ("Pro Audio"); reverted on drop.
/// Must be dropped on the thread that registered.
#[derive(Debug)]
pub struct MmcssTask {
    handle: HANDLE,
    /// The task index MMCSS assigned.
    pub task_index: u32,
}

impl MmcssTask {
    pub fn join(task: &str) -> io::Result<MmcssTask> {
        let name = super::wide(task);
        let mut task_index: u32 = 0;
        // SAFETY: `name` is NUL-terminated UTF-16 that outlives the call; `task_index` is a live
        // local the call writes.
        let handle = unsafe { AvSetMmThreadCharacteristicsW(name.as_ptr(), &mut task_index) };
        if handle.is_null() {
            return Err(super::last_error(&format!(
                "AvSetMmThreadCharacteristicsW(\"{task}\")"
            )));
        }
        Ok(MmcssTask { handle, task_index })
    }
}

impl Drop for MmcssTask {
    fn drop(&mut self) {
        // SAFETY: the handle came from AvSetMmThreadCharacteristicsW on this thread and is
        // reverted once.
        unsafe { AvRevertMmThreadCharacteristics(self.handle) };
    }
}

/// Pins the calling thread to one CPU (SetThreadAffinityMask); CPUs beyond 63 are refused
/// (processor groups are not handled).
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= 64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu}: only the first 64 CPUs (processor group 0) can be chosen"),
        ));
    }
    // SAFETY: pseudo-handle of the calling thread; the mask is a plain integer.
    let previous = unsafe { SetThreadAffinityMask(GetCurrentThread(), 1usize << cpu) };
    if previous == 0 {
        return Err(super::last_error(&format!(
            "SetThreadAffinityMask(CPU {cpu})"
        )));
    }
    Ok(())
}

/// The Windows base priority (1..31) of a thread with relative priority `relative` in a
/// process of `class`, as the scheduler computes it (TIME_CRITICAL and IDLE saturate).
pub fn base_priority(class: u32, relative: i32) -> i32 {
    let realtime = class == REALTIME_PRIORITY_CLASS;
    match relative {
        15 => {
            if realtime {
                31
            } else {
                15
            }
        }
        -15 => {
            if realtime {
                16
            } else {
                1
            }
        }
        relative => {
            let base = match class {
                REALTIME_PRIORITY_CLASS => 24,
                HIGH_PRIORITY_CLASS => 13,
                ABOVE_NORMAL_PRIORITY_CLASS => 10,
                BELOW_NORMAL_PRIORITY_CLASS => 6,
                IDLE_PRIORITY_CLASS => 4,
                _ => 8,
            };
            base + relative
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_priorities_follow_the_scheduler_table() {
        assert_eq!(base_priority(REALTIME_PRIORITY_CLASS, 15), 31);
        assert_eq!(base_priority(HIGH_PRIORITY_CLASS, 15), 15);
        assert_eq!(base_priority(NORMAL_PRIORITY_CLASS, 0), 8);
        assert_eq!(base_priority(HIGH_PRIORITY_CLASS, 0), 13);
        assert_eq!(base_priority(REALTIME_PRIORITY_CLASS, -15), 16);
        assert_eq!(base_priority(NORMAL_PRIORITY_CLASS, -15), 1);
    }

    #[test]
    fn a_thread_becomes_time_critical_and_joins_mmcss() {
        std::thread::spawn(|| {
            pin_current_thread(0).unwrap();
            set_thread_time_critical().unwrap();
            assert_eq!(thread_priority(), 15);
            let task = MmcssTask::join("Pro Audio").unwrap();
            drop(task);
        })
        .join()
        .unwrap();
        assert!(pin_current_thread(64).is_err());
    }
}
