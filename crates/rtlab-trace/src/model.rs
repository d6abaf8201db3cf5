//! The application-trace event model: what the analyses need to know about threads, decoded once
//! from whichever source (a live tracefs recording, an rtlab trace file, a trace-cmd trace.dat).
//!
//! Priorities are the kernel's `prio` as the sched tracepoints print it: 0..=99 real-time (lower
//! is more urgent; RT priority p is 99 − p), 100..=139 normal (120 = nice 0), −1 deadline.

/// A task's command name (16 NUL-padded bytes), as the scheduler tracepoints carry it.
pub use rtlab_explain::event::Comm;

/// Scheduling policy as recorded (`sched_getattr` while recording).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Other = 0,
    Fifo = 1,
    RoundRobin = 2,
    Batch = 3,
    Idle = 5,
    Deadline = 6,
}

impl Policy {
    pub fn from_code(code: u32) -> Option<Policy> {
        Some(match code {
            0 => Policy::Other,
            1 => Policy::Fifo,
            2 => Policy::RoundRobin,
            3 => Policy::Batch,
            5 => Policy::Idle,
            6 => Policy::Deadline,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Policy::Other => "SCHED_OTHER",
            Policy::Fifo => "SCHED_FIFO",
            Policy::RoundRobin => "SCHED_RR",
            Policy::Batch => "SCHED_BATCH",
            Policy::Idle => "SCHED_IDLE",
            Policy::Deadline => "SCHED_DEADLINE",
        }
    }
}

/// What happened. `tid`s are kernel task ids (the tracepoints' `pid`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// `sched_switch`: `prev` left the CPU in `prev_state` (0 = still runnable), `next` got it.
    Switch {
        prev_tid: i32,
        prev_prio: i32,
        prev_state: u32,
        next_tid: i32,
        next_prio: i32,
    },
    /// `sched_waking` (or `sched_wakeup` when waking is not traced): `waker` is the task that was
    /// current on the CPU where the wake-up ran.
    Waking {
        tid: i32,
        prio: i32,
        waker: i32,
        target_cpu: i32,
    },
    WakeupNew {
        tid: i32,
        prio: i32,
        waker: i32,
    },
    Fork {
        parent: i32,
        child: i32,
    },
    Exit {
        tid: i32,
    },
    Migrate {
        tid: i32,
        orig_cpu: i32,
        dest_cpu: i32,
    },
    /// `sched_pi_setprio`: `by` (the current task, usually the waiter) changed `tid`'s priority.
    PiSetprio {
        tid: i32,
        old_prio: i32,
        new_prio: i32,
        by: i32,
    },
    FutexEnter {
        tid: i32,
        uaddr: u64,
        op: u32,
        value: u32,
    },
    FutexExit {
        tid: i32,
        result: i64,
    },
    IrqEntry {
        irq: i32,
    },
    IrqExit {
        irq: i32,
    },
    SoftirqEntry {
        vector: u32,
    },
    SoftirqExit {
        vector: u32,
    },
    /// A task's name, emitted before the first event that names it and when it changes.
    Name {
        tid: i32,
        comm: Comm,
    },
    /// Read from the traced process's memory while recording: `waiter` is blocked on the futex at
    /// `uaddr`, which `owner` holds.
    Owner {
        waiter: i32,
        uaddr: u64,
        owner: i32,
    },
    /// Read while recording: a thread's process and policy (`priority`: RT priority or nice).
    ThreadInfo {
        tid: i32,
        tgid: i32,
        policy: Policy,
        priority: i32,
    },
    /// A target thread's CPU time so far (`se.sum_exec_runtime`, without the time a hypervisor
    /// took on a guest with steal accounting), recorded just before a switch of it (BPF).
    Runtime {
        tid: i32,
        runtime_ns: u64,
    },
    /// Read while recording: the policy of a thread that is not the target's (a real-time
    /// thread that preempted or delayed it), so a culprit is named with its policy.
    OtherPolicy {
        tid: i32,
        policy: Policy,
        priority: i32,
    },
    /// The recorded program's cycle began (`trace record --cycle-marker`: a user-space probe on
    /// the function that starts its cycle, e.g. JACK's `JackEngine::ProcessNext`), in thread `tid`.
    CycleMarker {
        tid: i32,
    },
    /// Thread `tid` finished its cycle's work (`trace record --work-done-marker`: a probe on the
    /// return of the function that does it, e.g. a JACK client's process callback).
    WorkDone {
        tid: i32,
    },
}

/// One event with its time (ns, the trace's clock) and CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub timestamp_ns: u64,
    pub cpu: u32,
    pub kind: EventKind,
}

/// The futex operations the analyses tell apart (`op & FUTEX_CMD_MASK`).
pub mod futex_op {
    pub const WAIT: u32 = 0;
    pub const WAKE: u32 = 1;
    pub const REQUEUE: u32 = 3;
    pub const CMP_REQUEUE: u32 = 4;
    pub const WAKE_OP: u32 = 5;
    pub const LOCK_PI: u32 = 6;
    pub const UNLOCK_PI: u32 = 7;
    pub const TRYLOCK_PI: u32 = 8;
    pub const WAIT_BITSET: u32 = 9;
    pub const WAKE_BITSET: u32 = 10;
    pub const WAIT_REQUEUE_PI: u32 = 11;
    pub const LOCK_PI2: u32 = 13;
    /// `FUTEX_CMD_MASK`: the op without FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME.
    pub const CMD_MASK: u32 = 0x7f;

    /// True for the operations that may block the caller.
    pub fn waits(op: u32) -> bool {
        matches!(
            op & CMD_MASK,
            WAIT | WAIT_BITSET | LOCK_PI | LOCK_PI2 | WAIT_REQUEUE_PI
        )
    }

    /// True for the priority-inheriting lock operations (the futex word holds the owner).
    pub fn is_pi_lock(op: u32) -> bool {
        matches!(op & CMD_MASK, LOCK_PI | LOCK_PI2 | WAIT_REQUEUE_PI)
    }
}

/// The user-facing priority of a kernel `prio`: RT priority for 0..=99, nice for 100..=139.
pub fn user_priority(kernel_prio: i32) -> i32 {
    if (0..100).contains(&kernel_prio) {
        99 - kernel_prio
    } else if kernel_prio >= 100 {
        kernel_prio - 120
    } else {
        0
    }
}

/// The policy a kernel `prio` implies when the recording did not read it.
pub fn policy_class_of(kernel_prio: i32) -> &'static str {
    if kernel_prio < 0 {
        "SCHED_DEADLINE"
    } else if kernel_prio < 100 {
        "SCHED_FIFO|SCHED_RR"
    } else {
        "SCHED_OTHER|SCHED_BATCH"
    }
}
