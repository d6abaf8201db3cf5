//! A thread's scheduling policy with its parameters (SCHED_OTHER … SCHED_DEADLINE), as plain
//! data: rtlab-sys sets and reads it (`rtlab_sys::sched`), records and reports name it.

/// A scheduling policy with its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// SCHED_OTHER with a nice value (-20..=19).
    Other { nice: i32 },
    /// SCHED_FIFO with an RT priority (1..=99).
    Fifo { priority: u32 },
    /// SCHED_RR with an RT priority (1..=99).
    RoundRobin { priority: u32 },
    /// SCHED_BATCH with a nice value.
    Batch { nice: i32 },
    /// SCHED_IDLE.
    Idle,
    /// SCHED_DEADLINE: `runtime` of every `period`, finished by `deadline` after each period start.
    Deadline {
        runtime_ns: u64,
        deadline_ns: u64,
        period_ns: u64,
    },
}

impl Policy {
    /// The kernel's name for the policy (`SCHED_FIFO`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Other { .. } => "SCHED_OTHER",
            Policy::Fifo { .. } => "SCHED_FIFO",
            Policy::RoundRobin { .. } => "SCHED_RR",
            Policy::Batch { .. } => "SCHED_BATCH",
            Policy::Idle => "SCHED_IDLE",
            Policy::Deadline { .. } => "SCHED_DEADLINE",
        }
    }

    /// The number shown beside the policy: RT priority, nice value, or 0.
    pub fn priority_or_nice(&self) -> i32 {
        match *self {
            Policy::Other { nice } | Policy::Batch { nice } => nice,
            Policy::Fifo { priority } | Policy::RoundRobin { priority } => priority as i32,
            Policy::Idle | Policy::Deadline { .. } => 0,
        }
    }

    /// True for the policies that outrank every SCHED_OTHER thread (FIFO, RR, DEADLINE).
    pub fn is_realtime(&self) -> bool {
        matches!(
            self,
            Policy::Fifo { .. } | Policy::RoundRobin { .. } | Policy::Deadline { .. }
        )
    }
}
