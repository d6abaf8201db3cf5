//! rtlab-sys: every syscall and pseudo-file rtlab touches (Linux; on Windows the Win32 and native
//! API, `src/windows/`).
//!
//! Keeping the kernel behind one crate means the measuring, tracing and planning code is ordinary
//! safe Rust that can be read and tested without root, and every `unsafe` block in the project but
//! rtlab-client's C ABI is here, each with a `// SAFETY:` comment. Functions return `std::io::Result` or this crate's
//! errors; nothing here prints.

pub mod host;
pub mod hypervisor;
#[cfg_attr(windows, path = "windows/output_file.rs")]
pub mod output_file;
mod output_target;
#[cfg(windows)]
pub mod windows;

// Linux only: the syscalls and pseudo-files (Windows has its own in `windows`).
cfg_if::cfg_if! {
    if #[cfg(target_os = "linux")] {
        pub mod clock;
        pub mod cpu;
        pub mod cpuidle;
        pub mod cpuset;
        pub mod dma_latency;
        pub mod fifo;
        pub mod futex;
        pub mod ipc;
        pub mod load_supervisor;
        pub mod load_syscalls;
        pub mod locks;
        pub mod memory;
        pub mod perf;
        pub mod proc_stat;
        pub mod process_environment;
        pub mod proc_thread;
        pub mod process_locks;
        pub mod sched;
        pub mod service_manager;
        pub mod signals;
        pub mod task_counters;
        #[cfg(test)]
        mod test_thread;
        pub mod thread_clock;
        pub mod thread_control;
        pub mod timer_apis;
        pub mod timer_audit;
        pub mod tracefs;
        pub mod tunables;
        pub mod uprobe_events;
        pub mod user_namespace;
        pub mod users;
    }
}
