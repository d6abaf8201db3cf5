//! rtlab-sched: CPU Reservations and Time Constraints on Linux: rtlab-plan's plans enforced on
//! real threads.
//!
//! The planner (what is admitted, which slot of which CPU's cycle belongs to whom) is pure and
//! lives in rtlab-plan; this crate makes real threads receive what it granted
//! ([`enforce`]: SCHED_DEADLINE, the plan dispatcher, cpuset placement, the journal that undoes
//! it all after a crash) and decides what `rtlab reserve --auto` asks for ([`auto_reserve`]) and how its `--follow`
//! changes it as the thread's need changes ([`auto_follow`]); the plan it decides is plain data
//! in rtlab-core's `auto_plan`, re-exported from [`auto_reserve`], so rtlab-render can show it.

pub mod auto_follow;
// `--follow` for every reservation `--auto` made, over the caller's daemon: Linux only.
#[cfg(target_os = "linux")]
pub mod auto_follow_all;
// This machine as `auto_reserve` reads it, from what the kernel enforces: Linux only.
#[cfg(target_os = "linux")]
pub mod auto_machine;
pub mod auto_reserve;
// `reserve --auto`'s loop over the caller's observation and daemon: Linux only.
#[cfg(target_os = "linux")]
pub mod auto_reserve_run;
// Grants on real threads (SCHED_DEADLINE, the plan dispatcher): Linux only.
#[cfg(target_os = "linux")]
pub mod enforce;
