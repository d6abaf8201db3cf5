//! rtlab-sched: CPU Reservations and Time Constraints on Linux: rtlab-plan's plans enforced on
//! real threads.
//!
//! The planner (what is admitted, which slot of which CPU's cycle belongs to whom) is pure and
//! lives in rtlab-plan; this crate makes real threads receive what it granted
//! ([`enforce`]: SCHED_DEADLINE, the plan dispatcher, cpuset placement, the journal that undoes
//! it all after a crash) and decides what `rtlab reserve --auto` asks for ([`auto_reserve`]) and how its `--follow`
//! changes it as the thread's need changes ([`auto_follow`]).

pub mod auto_follow;
pub mod auto_reserve;
// Grants on real threads (SCHED_DEADLINE, the plan dispatcher): Linux only.
#[cfg(target_os = "linux")]
pub mod enforce;
