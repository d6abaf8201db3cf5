//! The helpers the workspace's tests share, in one dev-dependency crate (issue 36, item 6), so a
//! crate's tests use them by name rather than include another crate's test files by
//! `#[path]` or write their own copy.
//!
//! - [`wait`]: the one "wait until a condition holds or a deadline passes";
//! - [`fixture_files`]: the lister of data-driven fixtures (`test_data/<format>/{ok,err}/`);
//! - [`root`] (Linux): the root, real-time and tracefs checks a root-only test starts with, and
//!   taking turns among a test binary's root tests;
//! - [`priority`] (Linux): starting a test's helpers at the default priority;
//! - [`process`]: child processes that are ended when the test fails;
//! - [`spinner`] (Linux): a CPU-bound thread, pinned and at a policy, that stops on its own and can
//!   record its own stalls (the enforcement tests and the supply benchmark);
//! - [`measured_cpu`] and [`thread_policy`] (Linux): the CPU the measuring tests pin to, and a
//!   thread's policy as /proc shows it;
//! - [`c_example`]: the C client example (`rtlab-client/examples/reserve.c`) compiled with `cc`;
//! - [`fake_enforcement`] (Linux): an in-process `Enforcement` on the real planner that touches
//!   no kernel, for the daemon's registry tests (unit and integration).
//!
//! Helpers tied to one crate's own types stay in that crate's tests: the CLI tests' `Sandbox`
//! (`crates/rtlab/tests/common`, it runs `CARGO_BIN_EXE_rtlab`), the daemon's in-process
//! `TestDaemon` (`crates/rtlab-daemon/tests/support`), the apptrace test
//! program (`crates/rtlab-trace/tests/support`). No library or binary depends on this crate
//! (the architecture test, `crates/rtlab/tests/architecture.rs`, holds every edge to it `dev`).
//!
//! A test crate uses only some of these helpers; they are `pub`, so the rest is not dead code.

pub mod c_example;
#[cfg(target_os = "linux")]
pub mod fake_enforcement;
pub mod fixture_files;
#[cfg(target_os = "linux")]
pub mod priority;
pub mod process;
#[cfg(target_os = "linux")]
pub mod root;
#[cfg(target_os = "linux")]
pub mod spinner;
pub mod wait;

#[cfg(target_os = "linux")]
pub use priority::start_at_the_default_priority;
pub use process::{end, KillOnDrop};
#[cfg(target_os = "linux")]
pub use root::{
    require_realtime, require_root, require_root_and_tracefs,
    require_root_and_tracefs_taking_turns, require_root_for_turns, require_root_taking_turns,
    require_writable, take_turns,
};
pub use wait::{eventually, poll, wait_for, wait_until};

/// The CPU the measuring tests pin to: the last online one (CPU 0 carries most housekeeping).
#[cfg(target_os = "linux")]
pub fn measured_cpu() -> usize {
    *rtlab_sys::cpu::online_cpus()
        .expect("the online CPUs")
        .last()
        .expect("an online CPU")
}

/// The scheduling policy of thread `tid` of process `pid`, as the kernel numbers it
/// (`/proc/PID/task/TID/stat` field 41: 0 SCHED_OTHER, 1 FIFO, 2 RR, 6 DEADLINE); `None` once
/// the thread is gone.
pub fn thread_policy(pid: u32, tid: u64) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(38)?.parse().ok()
}
