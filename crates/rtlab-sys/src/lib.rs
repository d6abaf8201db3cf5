//! rtlab-sys: every Linux syscall and pseudo-file rtlab touches.
//!
//! Keeping the kernel behind one crate means the measuring, tracing and planning code is ordinary
//! safe Rust that can be read and tested without root, and every `unsafe` block in the project is
//! here, each with a `// SAFETY:` comment. Functions return `std::io::Result` or this crate's
//! errors; nothing here prints.

pub mod clock;
pub mod cpu;
pub mod cpuidle;
pub mod cpuset;
pub mod dma_latency;
pub mod futex;
pub mod host;
pub mod ipc;
pub mod load_supervisor;
pub mod load_syscalls;
pub mod memory;
pub mod output_file;
pub mod perf;
pub mod proc_stat;
pub mod proc_thread;
pub mod sched;
pub mod signals;
pub mod thread_clock;
pub mod thread_control;
pub mod timer_apis;
pub mod timer_audit;
pub mod tracefs;
