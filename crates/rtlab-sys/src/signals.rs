//! SIGINT / SIGTERM: the first one asks the run to stop cleanly (threads finish, the partial
//! record is written); a second one exits at once. Either way the kernel takes RT threads and
//! the cpu_dma_latency request down with the process.

use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Registers SIGINT and SIGTERM so that the first sets `flag` and the second terminates the
/// process with exit status 130.
pub fn install_stop_flag(flag: &Arc<AtomicBool>) -> io::Result<()> {
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Order matters: the conditional shutdown is checked first, so it only fires when the
        // flag was already set by an earlier signal.
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(flag))?;
        signal_hook::flag::register(signal, Arc::clone(flag))?;
    }
    Ok(())
}

/// Registers SIGINT and SIGTERM so that every one of them sets `flag` and nothing else: for a
/// process (the daemon) that must always finish its own clean-up, however often it is asked.
pub fn install_flag_only(flag: &Arc<AtomicBool>) -> io::Result<()> {
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(flag))?;
    }
    Ok(())
}

/// Sends `signal` to process `pid` (tests and load commands use it).
pub fn send(pid: u32, signal: i32) -> io::Result<()> {
    // SAFETY: kill takes plain integers; it cannot corrupt memory.
    let result = unsafe { libc::kill(pid as libc::pid_t, signal) };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

pub use signal_hook::consts::{SIGINT, SIGKILL, SIGTERM};

/// Sends SIGINT to process `pid`: how a helper program that ends cleanly on Ctrl-C is stopped
/// (`pw-profiler` closes its log).
pub fn interrupt(pid: u32) -> io::Result<()> {
    send(pid, libc::SIGINT)
}
