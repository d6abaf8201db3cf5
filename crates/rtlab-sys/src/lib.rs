//! rtlab-sys: every Linux syscall and pseudo-file rtlab touches.
//!
//! Keeping the kernel behind one crate means the measuring, tracing and planning code is ordinary
//! safe Rust that can be read and tested without root, and every `unsafe` block in the project is
//! here, each with a `// SAFETY:` comment. Functions return `std::io::Result` or this crate's
//! errors; nothing here prints.

#[cfg(target_os = "linux")]
pub mod clock;
#[cfg(target_os = "linux")]
pub mod cpu;
#[cfg(target_os = "linux")]
pub mod cpuidle;
#[cfg(target_os = "linux")]
pub mod cpuset;
#[cfg(target_os = "linux")]
pub mod dma_latency;
#[cfg(target_os = "linux")]
pub mod futex;
pub mod host;
pub mod hypervisor;
#[cfg(target_os = "linux")]
pub mod ipc;
#[cfg(target_os = "linux")]
pub mod load_supervisor;
#[cfg(target_os = "linux")]
pub mod load_syscalls;
#[cfg(target_os = "linux")]
pub mod locks;
#[cfg(target_os = "linux")]
pub mod memory;
#[cfg_attr(windows, path = "windows/output_file.rs")]
pub mod output_file;
mod output_target;
#[cfg(target_os = "linux")]
pub mod perf;
#[cfg(target_os = "linux")]
pub mod proc_stat;
#[cfg(target_os = "linux")]
pub mod proc_thread;
#[cfg(target_os = "linux")]
pub mod process_locks;
#[cfg(target_os = "linux")]
pub mod sched;
#[cfg(target_os = "linux")]
pub mod service_manager;
#[cfg(target_os = "linux")]
pub mod signals;
#[cfg(all(test, target_os = "linux"))]
mod test_thread;
#[cfg(target_os = "linux")]
pub mod thread_clock;
#[cfg(target_os = "linux")]
pub mod thread_control;
#[cfg(target_os = "linux")]
pub mod timer_apis;
#[cfg(target_os = "linux")]
pub mod timer_audit;
#[cfg(target_os = "linux")]
pub mod tracefs;
#[cfg(target_os = "linux")]
pub mod uprobe_events;
#[cfg(target_os = "linux")]
pub mod users;
#[cfg(windows)]
pub mod windows;
