//! The analysis result, schema `rtlab.trace/1`: what `--json` writes and the text report, SVG and
//! Perfetto writers read.

use rtlab_core::header::OutputHeader;
use serde::Serialize;

pub const SCHEMA: &str = "rtlab.trace/1";

/// A thread named in a finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ThreadRef {
    pub tid: i32,
    pub name: String,
    /// RT priority (SCHED_FIFO/RR) or nice (SCHED_OTHER/BATCH), as `priority` in `threads`.
    pub priority: i32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Counted {
    pub tid: i32,
    /// `(interrupt)` for wake-ups from interrupt context or the idle task.
    pub name: String,
    pub count: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CpuPerActivation {
    pub mean: u64,
    pub p99: u64,
    pub max: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BlockedNs {
    pub futex: u64,
    pub io: u64,
    pub sleep: u64,
}

/// One row of paper 003's Table 3-1.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThreadRow {
    pub tid: i32,
    pub name: String,
    /// Process id when the recording read it, else null.
    pub tgid: Option<i32>,
    /// `SCHED_FIFO`, …; when only the trace's priority is known, the classes it implies
    /// (`SCHED_FIFO|SCHED_RR`, `SCHED_OTHER|SCHED_BATCH`).
    pub policy: String,
    pub priority: i32,
    /// The kernel's `prio` (lower is more urgent).
    pub kernel_prio: i32,
    /// One of the recorded application's threads (false: another task that ran or woke).
    pub target: bool,
    pub activations: u64,
    pub period_ns: Option<u64>,
    pub period_jitter_ns: Option<u64>,
    pub cpu_per_activation_ns: CpuPerActivation,
    pub cpu_ns: u64,
    pub cpu_share: f64,
    pub wakers: Vec<Counted>,
    pub wakes: Vec<Counted>,
    pub blocked_ns: BlockedNs,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Middle {
    pub tid: i32,
    pub name: String,
    pub priority: i32,
    /// How long it ran while the low thread waited for a CPU.
    pub ns: u64,
}

/// H blocked on a futex until L released it, while L sat runnable because `middle` ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Inversion {
    pub high: ThreadRef,
    pub low: ThreadRef,
    pub middle: Vec<Middle>,
    pub futex: String,
    pub at_ns: u64,
    pub duration_ns: u64,
    /// How long L waited for a CPU while H was blocked.
    pub low_runnable_ns: u64,
}

/// `sched_pi_setprio` raising a lock owner's priority.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PiBoost {
    pub at_ns: u64,
    pub owner: ThreadRef,
    pub by: ThreadRef,
    pub from_priority: i32,
    pub to_priority: i32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HungThread {
    pub tid: i32,
    pub name: String,
    /// The futex address it waits on, hex.
    pub futex: String,
    /// Who holds that futex, when known (read while recording, or a PI boost).
    pub owner: Option<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Hang {
    pub threads: Vec<HungThread>,
    /// True when the threads wait for each other in a cycle (a deadlock).
    pub cycle: bool,
    pub since_ns: u64,
    /// When the last of them woke again; null when still blocked at the end of the trace.
    pub ended_ns: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Ran {
    pub tid: i32,
    pub name: String,
    pub ns: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Starvation {
    pub thread: ThreadRef,
    pub since_ns: u64,
    pub runnable_ns: u64,
    /// Who ran on the CPUs meanwhile, most first.
    pub ran: Vec<Ran>,
}

/// One piece of a late activation's critical path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PathStep {
    /// `cpu` (runnable, the CPU held by `by`), `futex` / `sleep` / `io` (blocked until `by`
    /// woke it), `irq` (interrupts while it ran), `run` (its own CPU time).
    pub kind: String,
    pub ns: u64,
    pub by: Option<Ran>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LateActivation {
    pub thread: ThreadRef,
    pub at_ns: u64,
    pub period_ns: u64,
    /// From activation to the end of its work (its last block).
    pub response_ns: u64,
    pub critical_path: Vec<PathStep>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceInfo {
    pub path: String,
    /// `rtlab-trace v1`, `trace.dat v7 zstd`, …
    pub format: String,
    pub clock: Option<String>,
}

/// The whole result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceReport {
    #[serde(flatten)]
    pub header: OutputHeader,
    pub source: SourceInfo,
    pub first_ns: u64,
    pub last_ns: u64,
    pub duration_ns: u64,
    pub n_events: u64,
    pub lost_events: u64,
    pub hang_threshold_ns: u64,
    pub starve_threshold_ns: u64,
    pub threads: Vec<ThreadRow>,
    pub inversions: Vec<Inversion>,
    pub pi_boosts: Vec<PiBoost>,
    pub hangs: Vec<Hang>,
    pub starvation: Vec<Starvation>,
    pub late_activations: Vec<LateActivation>,
    /// Late activations found (the list keeps the first 200).
    pub late_activations_total: u64,
    /// What the analysis could not do with this input.
    pub warnings: Vec<String>,
}
