//! Ctrl-C, Ctrl-Break and console close: the console control handler that asks a run to stop
//! cleanly (the partial record is written), like SIGINT/SIGTERM on Linux. A second event while
//! the first is being handled ends the process with exit status 130.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use windows_sys::core::BOOL;
use windows_sys::Win32::System::Console::{
    GenerateConsoleCtrlEvent, SetConsoleCtrlHandler, CTRL_BREAK_EVENT, CTRL_CLOSE_EVENT,
    CTRL_C_EVENT,
};

/// The flags the handler sets. The handler runs on a thread Windows creates for it, so it reads
/// them under a mutex (never contended on the measuring path: nobody else takes it).
static FLAGS: Mutex<Vec<Arc<AtomicBool>>> = Mutex::new(Vec::new());

unsafe extern "system" fn handler(event: u32) -> BOOL {
    if !matches!(event, CTRL_C_EVENT | CTRL_BREAK_EVENT | CTRL_CLOSE_EVENT) {
        return 0;
    }
    let flags = match FLAGS.lock() {
        Ok(flags) => flags,
        Err(poisoned) => poisoned.into_inner(),
    };
    if flags.iter().any(|flag| flag.load(Ordering::SeqCst)) {
        // Asked twice: stop now.
        std::process::exit(130);
    }
    for flag in flags.iter() {
        flag.store(true, Ordering::SeqCst);
    }
    // Handled: Windows does not run the default handler (which would end the process).
    1
}

/// Sets `flag` on the first Ctrl-C / Ctrl-Break / close and exits with 130 on the second.
pub fn install_stop_flag(flag: &Arc<AtomicBool>) -> io::Result<()> {
    let mut flags = FLAGS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if flags.is_empty() {
        // SAFETY: `handler` is a valid `extern "system"` function for the life of the process
        // (it is never removed); it touches only the static above.
        let result = unsafe { SetConsoleCtrlHandler(Some(handler), 1) };
        if result == 0 {
            return Err(super::last_error("SetConsoleCtrlHandler"));
        }
    }
    flags.push(Arc::clone(flag));
    Ok(())
}

/// Sends Ctrl-C (`break_event` false) or Ctrl-Break to every process attached to this console
/// in process group `group` (0: all of them, this one included). Tests use it to interrupt a
/// run the way a user does.
pub fn send_ctrl_event(break_event: bool, group: u32) -> io::Result<()> {
    let event = if break_event {
        CTRL_BREAK_EVENT
    } else {
        CTRL_C_EVENT
    };
    // SAFETY: plain integers; the call only queues console events.
    let result = unsafe { GenerateConsoleCtrlEvent(event, group) };
    if result == 0 {
        return Err(super::last_error("GenerateConsoleCtrlEvent"));
    }
    Ok(())
}
