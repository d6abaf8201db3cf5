//! The analysis result, schema `rtlab.trace/1`: what the text report, SVG and Perfetto writers
//! read, and what `--json` writes through rtlab-render's `apptrace_json::TraceReportJson` (which
//! words [`Explanation`]). Plain data: the words are rtlab-render's.

use crate::header::OutputHeader;
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
    /// CPU per cycle of its period: an activation that ran past its next cycle's start and on
    /// into that cycle without sleeping (it fell behind) counts as the cycles it ran, its CPU
    /// (less the hypervisor's time, when recorded) shared among them (`analyze::cycles`). What
    /// `reserve --auto` sizes by; without a period, the CPU per activation.
    pub cpu_per_cycle_ns: CpuPerActivation,
    pub cpu_ns: u64,
    pub cpu_share: f64,
    pub wakers: Vec<Counted>,
    pub wakes: Vec<Counted>,
    pub blocked_ns: BlockedNs,
    /// Its late activations and gaps without activation (of `late_activations_total`).
    pub late_activations: u64,
    pub missed_periods: u64,
    /// What its lateness was judged by: the program's cycle markers, or the period inferred
    /// from its activations (absent: not judged, no period).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_source: Option<DeadlineSource>,
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

/// A thread named as a culprit, with what is known of its scheduling.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Holder {
    pub tid: i32,
    pub name: String,
}

/// Who or what a critical-path segment waited for (`by`, `culprits[]`): serialized as an object
/// whose `kind` says which, e.g. `{"kind":"thread","tid":4242,"name":"qhog0",
/// "policy":"SCHED_FIFO","priority":95,"ns":5897000}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Culprit {
    /// Another thread ran on the CPU ours waited for (`policy` as recorded, or the classes the
    /// trace's priority implies, e.g. `SCHED_FIFO|SCHED_RR`).
    Thread {
        tid: i32,
        name: String,
        policy: String,
        priority: i32,
        ns: u64,
    },
    /// A hardware interrupt handler (`name`: `irq 11`, or the vector: `local timer`).
    Irq { name: String, ns: u64 },
    /// A softirq (`name`: the vector, `TIMER`, `NET_RX`, `SCHED`, …).
    Softirq { name: String, ns: u64 },
    /// The CPU ran nothing of this machine: the hypervisor had the virtual CPU (a wait with
    /// nothing else running, or a run far longer than the CPU time the thread got).
    Hypervisor { ns: u64 },
    /// The thread was runnable but its class's budget was used up (RT throttling, the fair
    /// server, a SCHED_DEADLINE runtime).
    Throttled { ns: u64 },
    /// Blocked on a futex until `holder` released it.
    Lock { holder: Holder, ns: u64 },
    /// Blocked (sleep, I/O, a futex without a known owner) until `waker` woke it.
    Waker { waker: Holder, ns: u64 },
    /// Moved between CPUs meanwhile.
    Migration { ns: u64 },
}

impl Culprit {
    /// The time this culprit accounts for.
    pub fn ns(&self) -> u64 {
        match self {
            Culprit::Thread { ns, .. }
            | Culprit::Irq { ns, .. }
            | Culprit::Softirq { ns, .. }
            | Culprit::Hypervisor { ns }
            | Culprit::Throttled { ns }
            | Culprit::Lock { ns, .. }
            | Culprit::Waker { ns, .. }
            | Culprit::Migration { ns } => *ns,
        }
    }

    /// `thread`, `irq`, … (the JSON `kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            Culprit::Thread { .. } => "thread",
            Culprit::Irq { .. } => "irq",
            Culprit::Softirq { .. } => "softirq",
            Culprit::Hypervisor { .. } => "hypervisor",
            Culprit::Throttled { .. } => "throttled",
            Culprit::Lock { .. } => "lock",
            Culprit::Waker { .. } => "waker",
            Culprit::Migration { .. } => "migration",
        }
    }

    /// Two culprits are the same one (what `ns` adds up for).
    pub fn same_as(&self, other: &Culprit) -> bool {
        match (self, other) {
            (Culprit::Thread { tid: a, .. }, Culprit::Thread { tid: b, .. }) => a == b,
            (Culprit::Irq { name: a, .. }, Culprit::Irq { name: b, .. })
            | (Culprit::Softirq { name: a, .. }, Culprit::Softirq { name: b, .. }) => a == b,
            (Culprit::Lock { holder: a, .. }, Culprit::Lock { holder: b, .. })
            | (Culprit::Waker { waker: a, .. }, Culprit::Waker { waker: b, .. }) => a.tid == b.tid,
            _ => self.kind() == other.kind(),
        }
    }
}

/// One piece of a late activation's critical path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PathStep {
    /// `cpu` (runnable, waiting for `cpu`), `futex` / `sleep` / `io` (blocked until woken),
    /// `irq` (interrupts while it ran), `run` (on the CPU: its own work, and time the
    /// hypervisor took from it), `missed` (a period the thread was not activated in).
    pub kind: String,
    pub ns: u64,
    /// The CPU it waited for or ran on, when known.
    pub cpu: Option<u32>,
    /// The main culprit of this segment (the first of `culprits`); null only when the trace
    /// does not say (e.g. a `run` segment that was all the thread's own work).
    pub by: Option<Culprit>,
    /// Every culprit found for this segment, largest first, with their ns.
    pub culprits: Vec<Culprit>,
}

/// `late` (its work ended after the next period began) or `missed` (a period in which the
/// thread was not activated at all: the application skipped a cycle, as JACK does after an xrun).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LateKind {
    Late,
    Missed,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LateActivation {
    pub kind: LateKind,
    pub thread: ThreadRef,
    /// The activation's start (`missed`: the period's expected start).
    pub at_ns: u64,
    pub period_ns: u64,
    /// From activation to the end of its work (its last block); `missed`: the gap from the
    /// previous activation to the next one.
    pub response_ns: u64,
    /// Periods this entry stands for (1 for `late`; `missed`: the periods without activation).
    pub periods: u64,
    /// 1: a `late` job misses one deadline however long it took, as JACK counts, and a
    /// `missed` entry counts its gap once. (`late_activations_total` adds a second one for a
    /// late job whose program restarted its cycle the moment it ended: see docs/trace.md.)
    pub deadlines_missed: u64,
    /// The culprit that took the most time over the whole path (null: its own work).
    pub culprit: Option<Culprit>,
    /// What the analysis found, as numbers and culprits; rtlab-render words it (the JSON's
    /// `explanation`: "waited 5.9 ms for CPU 0: qhog0 (SCHED_FIFO 95) ran", written through
    /// `rtlab_render::apptrace_json::TraceReportJson`).
    pub explanation: Explanation,
    pub critical_path: Vec<PathStep>,
}

/// Why an activation was late, as the analysis chose to say it: which reading of its critical
/// path applies, with exactly the numbers and the culprit that reading names. The choice is the
/// analysis's (`analyze::findings`); the words are rtlab-render's (`apptrace_words::explanation`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Explanation {
    /// Nothing else in the trace took time from it: `own_ns` of CPU in a `response_ns` response.
    OwnWork { own_ns: u64, response_ns: u64 },
    /// Its own work took longer than any culprit; `then` the largest one, `then_ns` its time
    /// summed over the path.
    OwnWorkThen {
        own_ns: u64,
        response_ns: u64,
        then: Culprit,
        then_ns: u64,
    },
    /// It waited `ns` for a CPU (`cpu` when known; a `cpu` or `missed` step) that `by` had: a
    /// thread, an interrupt, the hypervisor (nothing of this machine ran), throttling, ….
    WaitedForCpu {
        ns: u64,
        cpu: Option<u32>,
        by: Culprit,
    },
    /// Interrupts took `ns` while it ran (an `irq` step), `by` the main one.
    Interrupts { ns: u64, by: Culprit },
    /// It was on a CPU `on_cpu_ns` but the hypervisor took `hypervisor_ns` of it (a `run` step).
    HypervisorTook { on_cpu_ns: u64, hypervisor_ns: u64 },
    /// Blocked `ns` on a futex (a `futex` step) `by` its holder or waker.
    BlockedOnFutex { ns: u64, by: Culprit },
    /// Blocked `ns` in a step of kind `step` (`sleep`, `io`, …, as [`PathStep::kind`]) until `by`.
    BlockedUntil { ns: u64, step: String, by: Culprit },
    /// No activation for `gap_ns` (`periods` periods); `by` who had the CPU meanwhile, when the
    /// trace says.
    Missed {
        gap_ns: u64,
        periods: u64,
        by: Option<Culprit>,
    },
}

/// The answer to "is there a periodic real-time thread here" (`rtlab reserve --auto`, `trace
/// watch`): the threads with a detected period, most urgent first, or why there is none.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeriodicThreads {
    pub threads: Vec<PeriodicThread>,
    /// Set when `threads` is empty: why there is none (worded "no periodic real-time thread
    /// found: …" where it is shown).
    pub none_because: Option<NoPeriodicThread>,
}

/// Why a trace has no periodic real-time thread of the recorded program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NoPeriodicThread {
    /// The trace has no thread of the recorded program.
    NoThreadOfTheProgram,
    /// `recorded` threads of the program, `real_time` of them real-time (none activated at a
    /// regular period when there are some), `periodic_normal` periodic at normal priority.
    NonePeriodicAndRealTime {
        recorded: usize,
        real_time: usize,
        periodic_normal: usize,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeriodicThread {
    pub tid: i32,
    pub tgid: Option<i32>,
    pub name: String,
    pub policy: String,
    pub priority: i32,
    pub period_ns: u64,
    pub period_jitter_ns: u64,
    pub activations: u64,
    pub cpu_per_activation_ns: CpuPerActivation,
    /// As in [`ThreadRow::cpu_per_cycle_ns`].
    pub cpu_per_cycle_ns: CpuPerActivation,
    /// The thread that usually wakes it (the chain that drives it), when there is one.
    pub woken_by: Option<Holder>,
    /// Late activations and missed periods of this thread.
    pub late: u64,
    pub missed_periods: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceInfo {
    pub path: String,
    /// `rtlab-explain v1`, `trace.dat v7 zstd`, …
    pub format: String,
    pub clock: Option<String>,
}

/// What deadlines were judged by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeadlineSource {
    /// The program's own cycle starts, probed (`--cycle-marker`).
    CycleMarker,
    /// The period inferred from the scheduler's events.
    Inferred,
}

/// The program's cycle markers in a trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CycleMarkers {
    pub n_markers: u64,
    /// The thread that began the cycles (the latest marker's).
    pub thread: ThreadRef,
    /// The program's period, from the markers.
    pub period_ns: Option<u64>,
    /// Cycles begun at once after the previous one, which overran its successor's start.
    pub overruns: u64,
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
    /// Deadlines missed: the late activations and gaps found, each counted as JACK counts
    /// xruns (see `deadlines_missed`; the list keeps the first 200, the target's first).
    pub late_activations_total: u64,
    /// Of `late_activations_total`, the gaps without activation (`kind: missed`). With cycle
    /// markers: the program's cycles with no activation of a thread it drives, counted apart
    /// (a cycle the thread missed because it was still busy is already a late activation).
    pub missed_periods_total: u64,
    /// `cycle_marker` when the trace holds the program's own cycle starts (`trace record
    /// --cycle-marker`) and the threads its cycle drives were judged by them; `inferred` when
    /// deadlines were inferred from the scheduler's events alone.
    pub deadline_source: DeadlineSource,
    /// The cycle markers, when the trace has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycle_markers: Option<CycleMarkers>,
    /// What the analysis could not do with this input.
    pub warnings: Vec<String>,
}

impl TraceReport {
    /// The recorded application's periodic real-time threads (SCHED_FIFO/RR/DEADLINE, with a
    /// detected period), most urgent first; when there is none, `none_because` says why. What `rtlab reserve --auto`
    /// and `rtlab trace watch` build on: they never guess a period the trace does not show.
    pub fn periodic_threads(&self) -> PeriodicThreads {
        let targets: Vec<&ThreadRow> = self.threads.iter().filter(|row| row.target).collect();
        let real_time = |row: &&&ThreadRow| row.kernel_prio < 100;
        let mut threads: Vec<PeriodicThread> = targets
            .iter()
            .filter(real_time)
            .filter_map(|row| {
                let period_ns = row.period_ns?;
                let woken_by = row
                    .wakers
                    .first()
                    .filter(|waker| waker.tid > 0 && waker.count * 2 >= row.activations)
                    .map(|waker| Holder {
                        tid: waker.tid,
                        name: waker.name.clone(),
                    });
                Some(PeriodicThread {
                    tid: row.tid,
                    tgid: row.tgid,
                    name: row.name.clone(),
                    policy: row.policy.clone(),
                    priority: row.priority,
                    period_ns,
                    period_jitter_ns: row.period_jitter_ns.unwrap_or(0),
                    activations: row.activations,
                    cpu_per_activation_ns: row.cpu_per_activation_ns,
                    cpu_per_cycle_ns: row.cpu_per_cycle_ns,
                    woken_by,
                    late: row.late_activations,
                    missed_periods: row.missed_periods,
                })
            })
            .collect();
        threads.sort_by(|a, b| {
            let prio = |tid: i32| {
                self.threads
                    .iter()
                    .find(|row| row.tid == tid)
                    .map_or(140, |row| row.kernel_prio)
            };
            prio(a.tid).cmp(&prio(b.tid)).then(a.tid.cmp(&b.tid))
        });
        let none_because = if !threads.is_empty() {
            None
        } else if targets.is_empty() {
            Some(NoPeriodicThread::NoThreadOfTheProgram)
        } else {
            Some(NoPeriodicThread::NonePeriodicAndRealTime {
                recorded: targets.len(),
                real_time: targets.iter().filter(real_time).count(),
                periodic_normal: targets
                    .iter()
                    .filter(|row| row.period_ns.is_some() && row.kernel_prio >= 100)
                    .count(),
            })
        };
        PeriodicThreads {
            threads,
            none_because,
        }
    }
}

// Which threads' misses count: the selection `trace watch` counts and `report --trace` draws.

/// The shortest period a thread's misses are reported for.
pub const SHORTEST_WATCHED_PERIOD_NS: u64 = 100_000;

fn is_real_time(policy: &str) -> bool {
    ["FIFO", "RR", "DEADLINE"]
        .iter()
        .any(|name| policy.contains(name))
}

/// The threads whose misses are shown (`trace watch`, `report --trace`): the recorded program's
/// periodic real-time threads, or, in a program without any, its threads with a period of at
/// least [`SHORTEST_WATCHED_PERIOD_NS`] (shorter "periods" of normal threads are bursts of short
/// sleeps, not deadlines). Other programs' threads appear only as culprits.
pub fn watched_threads(report: &TraceReport) -> Vec<i32> {
    let periodic = |row: &&ThreadRow| {
        row.target
            && row
                .period_ns
                .is_some_and(|period| period >= SHORTEST_WATCHED_PERIOD_NS)
    };
    let real_time: Vec<i32> = report
        .threads
        .iter()
        .filter(periodic)
        .filter(|row| is_real_time(&row.policy))
        .map(|row| row.tid)
        .collect();
    if !real_time.is_empty() {
        return real_time;
    }
    report
        .threads
        .iter()
        .filter(periodic)
        .map(|row| row.tid)
        .collect()
}

/// The misses of the watched threads, in time order.
pub fn watched_misses(report: &TraceReport) -> Vec<&LateActivation> {
    let watched = watched_threads(report);
    let mut misses: Vec<&LateActivation> = report
        .late_activations
        .iter()
        .filter(|late| watched.contains(&late.thread.tid))
        .collect();
    misses.sort_by_key(|late| (late.at_ns, late.thread.tid));
    misses
}
