//! The analyses, as one pass over the time-ordered event stream: a state machine per thread
//! (running / runnable / blocked and why), per CPU (who runs, interrupt time), and the findings
//! it produces on the way — priority inversions when a blocked thread is woken, starvation when a
//! runnable wait ends, hangs and the thread table at the end.
//!
//! Memory is per thread, not per event: each thread keeps its first activations exactly (48 bytes
//! each, at most `streaming::ACTIVATIONS_KEPT`) and summaries of all of them whose size does not
//! grow with their number (`streaming.rs`: periods, CPU per activation, late activations); only
//! when a timeline is asked for (`--svg`, `--perfetto`), the timeline's spans (capped).

mod cycle_rule;
pub(crate) mod cycles;
pub use cycle_rule::CycleRule;
mod findings;
/// How many late activations a report lists at most (the earliest); the totals count them all.
pub use findings::MAX_LISTED as LATE_ACTIVATIONS_LISTED;
pub mod period;
/// The analysis result's types, plain data in rtlab-core so rtlab-render can write them.
pub use rtlab_core::apptrace_report as report;
mod streaming;
/// The timeline's spans, plain data in rtlab-core so rtlab-render can draw them.
pub use rtlab_core::apptrace_timeline as timeline;
mod xrun_rule;

use crate::model::{futex_op, Comm, Event, EventKind, Policy};
use report::*;
use rustc_hash::FxHashMap;
use std::collections::{HashMap, VecDeque};
use timeline::{SpanState, Timeline};

/// Analysis settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnalysisConfig {
    /// A futex wait longer than this is a hang (`--hang`, default 1 s).
    pub hang_ns: u64,
    /// A runnable wait longer than this is starvation (`--starve`, default 100 ms).
    pub starve_ns: u64,
    /// Keep spans for a timeline (SVG, Perfetto), at most this many (0: none).
    pub timeline_spans: usize,
    /// How the threads a cycle marker drives are judged (`--cycle-marker pipewire`: as
    /// PipeWire's profiler counts).
    pub cycle_rule: CycleRule,
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        AnalysisConfig {
            hang_ns: 1_000_000_000,
            starve_ns: 100_000_000,
            timeline_spans: 0,
            cycle_rule: CycleRule::Jack,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockReason {
    Futex,
    Io,
    Sleep,
}

impl BlockReason {
    pub(crate) fn name(self) -> &'static str {
        match self {
            BlockReason::Futex => "futex",
            BlockReason::Io => "io",
            BlockReason::Sleep => "sleep",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Unknown,
    Running {
        cpu: u32,
        since: u64,
    },
    Runnable {
        since: u64,
    },
    Blocked {
        since: u64,
        reason: BlockReason,
        uaddr: u64,
    },
    Dead,
}

/// One activation: from a wake-up to the next block.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Activation {
    pub start: u64,
    pub end: u64,
    pub cpu_ns: u64,
    pub wait_ns: u64,
    /// The two threads that held the CPU longest while it waited (tid, ns; 0: none).
    pub top_holder: i32,
    pub top_holder_ns: u64,
    pub second_holder: i32,
    pub second_holder_ns: u64,
    /// The CPU of its longest runnable wait.
    pub wait_cpu: u32,
    pub longest_wait_ns: u64,
    /// Of its runnable waits: interrupts on the CPU it waited for (with the largest source),
    /// time less urgent threads ran while it (real-time) waited (throttling), and time nothing
    /// recorded ran there (the virtual CPU was not running: the hypervisor).
    pub wait_irq_ns: u64,
    pub wait_irq_source: i32,
    pub wait_throttled_ns: u64,
    pub wait_idle_ns: u64,
    /// It moved to another CPU while runnable.
    pub migrated: bool,
    pub irq_ns: u64,
    /// The interrupt source that took most of `irq_ns` (see [`irq_source_name`]) and its ns.
    pub irq_source: i32,
    pub irq_source_ns: u64,
    /// When this activation came after a gap of more than 1.5 of its usual intervals: who ran
    /// in the gap (the largest; tid, ns), and how much of the gap nothing recorded ran.
    pub gap_holder: i32,
    pub gap_holder_ns: u64,
    pub gap_idle_ns: u64,
    pub gap_ns: u64,
    /// Of the gap, when the thread that activates it was itself held back: the time it was
    /// throttled, and interrupts (with the largest source) on the CPU it waited for.
    pub gap_throttled_ns: u64,
    pub gap_irq_ns: u64,
    pub gap_irq_source: i32,
    /// Time it was on the CPU by the switches but not by its CPU time (`Runtime` records):
    /// the hypervisor had the virtual CPU.
    pub vanished_ns: u64,
    pub waker: i32,
    /// It got a CPU only after its waker had run another whole activation (a cycle-driven
    /// program's clock ran a cycle while this job was held back: see
    /// `findings::held_through_its_wakers_cycle`).
    pub resumed_after_waker: bool,
    /// How it was blocked before this activation (None: first seen, or a new thread).
    pub woke_from: Option<BlockReason>,
    pub blocked_before_ns: u64,
    /// Deadlines missed while it was under way, judged by the program's cycle markers
    /// (`cycle_rule.rs`; 0 without markers).
    pub cycle_deadlines: u32,
}

/// A runnable wait and who ran meanwhile.
#[derive(Clone, Debug)]
pub(crate) struct Episode {
    pub start: u64,
    pub end: u64,
    /// The CPU it waited for (who ran there is read back from its slices when needed).
    pub queue_cpu: u32,
}

#[derive(Clone, Debug)]
pub(crate) struct Thread {
    pub name: Comm,
    pub tgid: Option<i32>,
    pub policy: Option<(Policy, i32)>,
    /// Kernel prio, without PI boosts.
    pub prio: i32,
    pub prio_known: bool,
    pub boosted: bool,
    pub state: State,
    pub futex: Option<(u64, u32)>,
    pub exiting: bool,
    pub current: Option<Activation>,
    /// The first activations, exactly (at most `streaming::ACTIVATIONS_KEPT`).
    pub activations: Vec<Activation>,
    /// Every completed activation, summarised in bounded memory.
    pub summary: streaming::ActivationSummary,
    pub cpu_ns: u64,
    pub irq_mark: u64,
    pub wakers: HashMap<i32, u64>,
    pub wakes: HashMap<i32, u64>,
    pub blocked_ns: [u64; 3],
    /// The CPU whose run queue it waits on while runnable.
    pub queue_cpu: u32,
    /// While runnable: the switch-chain breaks of `queue_cpu` when it started waiting there,
    /// and whether one happened on a CPU it waited on (its wait is then not known whole).
    pub breaks_mark: u64,
    pub wait_broken: bool,
    pub episodes: VecDeque<Episode>,
    /// While runnable: the interrupt time of `queue_cpu` when it started waiting there.
    pub wait_irq_mark: u64,
    /// Per waker (the first few): the start of the last activation it caused and the latest
    /// intervals between them (a ring), for noticing a gap in a waker's rhythm as it ends.
    pub rhythms: Vec<Rhythm>,
    /// Its CPU time (`Runtime` records) when it last went on a CPU.
    pub runtime_in: Option<u64>,
    /// Long futex waits that ended.
    pub long_waits: Vec<LongWait>,
    /// Its deadlines judged by the program's cycle markers (when the trace has them).
    pub cycle_judge: cycle_rule::CycleJudge,
}

impl Thread {
    /// The waker that woke it most (ties: the lowest tid).
    pub(crate) fn dominant_waker(&self) -> Option<i32> {
        self.wakers
            .iter()
            .max_by_key(|(waker, count)| (**count, -**waker))
            .map(|(waker, _)| *waker)
    }

    /// Files a completed activation: kept while there is room, summarised always.
    fn complete(&mut self, activation: Activation) {
        let dominant = if self.activations.len() == streaming::ACTIVATIONS_KEPT {
            self.dominant_waker().unwrap_or(0)
        } else {
            0
        };
        self.cycle_judge.completed(&activation);
        self.summary.add(&activation, &self.activations, dominant);
        if self.activations.len() < streaming::ACTIVATIONS_KEPT {
            self.activations.push(activation);
        }
    }
}

impl Default for Thread {
    fn default() -> Self {
        Thread {
            name: Comm::default(),
            tgid: None,
            policy: None,
            prio: 120,
            prio_known: false,
            boosted: false,
            state: State::Unknown,
            futex: None,
            exiting: false,
            current: None,
            activations: Vec::new(),
            summary: streaming::ActivationSummary::default(),
            cpu_ns: 0,
            irq_mark: 0,
            wakers: HashMap::new(),
            wakes: HashMap::new(),
            blocked_ns: [0; 3],
            queue_cpu: 0,
            breaks_mark: 0,
            wait_broken: false,
            episodes: VecDeque::new(),
            wait_irq_mark: 0,
            rhythms: Vec::new(),
            runtime_in: None,
            long_waits: Vec::new(),
            cycle_judge: cycle_rule::CycleJudge::default(),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct CpuState {
    pub current: i32,
    pub since: u64,
    pub irq_depth: u32,
    pub irq_since: u64,
    pub irq_total: u64,
    /// The latest slices run here, (tid, start, end), oldest first: who held the CPU while a
    /// thread waited for it is read back from them when the wait ends.
    pub slices: VecDeque<(i32, u64, u64)>,
    /// A switch was seen here: `current` is known.
    pub seen: bool,
    /// Switches whose `prev` was not the thread the previous switch here put on the CPU
    /// (events missing between them), and how many of those followed a switch to idle.
    pub breaks: u64,
    pub breaks_after_idle: u64,
    /// The outermost interrupt under way: its source (see [`irq_source_name`]).
    pub irq_source: i32,
    /// The latest outermost interrupt spans here, (source, start, end), oldest first.
    pub irqs: VecDeque<(i32, u64, u64)>,
}

/// Interrupt spans kept per CPU (for naming the interrupts in a wait or a run).
const IRQS_KEPT: usize = 512;

/// No interrupt source known.
pub(crate) const NO_SOURCE: i32 = i32::MIN;

/// Intervals between activations kept per thread (for noticing a gap as it ends).
pub(crate) const INTERVALS_KEPT: usize = 8;

/// Runnable waits at least this long get their culprits worked out.
const ATTRIBUTED_WAIT_NS: u64 = 50_000;

/// The source code of a softirq vector (kept apart from hardware interrupt numbers).
pub(crate) fn softirq_source(vector: u32) -> i32 {
    -1000 - vector as i32
}

/// `irq 11`, `local timer or reschedule vector`, `TIMER` (softirq) …: the name of a source,
/// and whether it is a softirq.
pub(crate) fn irq_source_name(source: i32) -> (String, bool) {
    const SOFTIRQS: [&str; 10] = [
        "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER",
        "RCU",
    ];
    if source <= -1000 {
        let vector = (-1000 - source) as usize;
        let name = SOFTIRQS
            .get(vector)
            .map(|name| (*name).to_owned())
            .unwrap_or_else(|| format!("vector {vector}"));
        (name, true)
    } else if source < 0 {
        ("local timer or reschedule vector".to_owned(), false)
    } else {
        (format!("irq {source}"), false)
    }
}

/// Slices kept per CPU: a wait longer than this many slices sees only the latest of them.
pub(crate) const SLICES_KEPT: usize = 16384;

/// A starvation found on the way: (tid, since, waited, who ran meanwhile with how long).
pub(crate) type Starved = (i32, u64, u64, Vec<(i32, u64)>);

/// Slices read back for a critical path's wait (who held the CPU last is enough).
const RECENT_SLICES: usize = 32;

/// Recent runnable episodes kept per thread (for the inversion check).
const EPISODES_KEPT: usize = 32;

fn add_to(list: &mut Vec<(i32, u64)>, tid: i32, ns: u64) {
    if ns == 0 {
        return;
    }
    match list.iter_mut().find(|(known, _)| *known == tid) {
        Some(entry) => entry.1 = entry.1.saturating_add(ns),
        None => list.push((tid, ns)),
    }
}

/// Adds `ns` of `holder` to an activation's two largest holders.
fn add_holder(activation: &mut Activation, holder: i32, ns: u64) {
    if ns == 0 {
        return;
    }
    if activation.top_holder == holder && activation.top_holder_ns > 0 {
        activation.top_holder_ns += ns;
    } else if activation.second_holder == holder && activation.second_holder_ns > 0 {
        activation.second_holder_ns += ns;
    } else if ns > activation.second_holder_ns {
        activation.second_holder = holder;
        activation.second_holder_ns = ns;
    }
    if activation.second_holder_ns > activation.top_holder_ns {
        std::mem::swap(&mut activation.top_holder, &mut activation.second_holder);
        std::mem::swap(
            &mut activation.top_holder_ns,
            &mut activation.second_holder_ns,
        );
    }
}

/// The activations one waker causes: the last one's start and the latest intervals.
#[derive(Clone, Debug)]
pub(crate) struct Rhythm {
    pub waker: i32,
    pub last_start: u64,
    pub intervals: [u64; INTERVALS_KEPT],
    pub n_intervals: usize,
}

/// Wakers whose rhythm is followed per thread.
const RHYTHMS_KEPT: usize = 4;

/// The shortest of the latest `intervals` (0 with fewer than 4): a gap is judged against it, so
/// a rhythm disturbed for a while (every other period missed) still shows its gaps.
fn typical_interval(intervals: &[u64]) -> u64 {
    if intervals.len() < 4 {
        return 0;
    }
    intervals.iter().copied().min().unwrap_or(0)
}

/// Linux's largest CONFIG_NR_CPUS: CPU numbers in a trace are below it.
const MAX_CPUS: usize = 8192;

/// The longest span of time one analysis covers: 2^50 ns, 13 days.
const MAX_SPAN_NS: u64 = 1 << 50;

/// A priority-inheritance boost as the trace showed it: `owner`'s kernel priority went from
/// `from_prio` to `to_prio` at `at` because `by` waited for it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PiBoostSeen {
    pub at: u64,
    pub owner: i32,
    pub by: i32,
    pub from_prio: i32,
    pub to_prio: i32,
}

/// A long futex wait of a thread that ended: from `since` to `until`, on the futex at `uaddr`.
#[derive(Clone, Copy, Debug)]
pub struct LongWait {
    pub since: u64,
    pub until: u64,
    pub uaddr: u64,
}

/// The analysis in progress: feed it events in time order, then [`Analyzer::finish`].
#[derive(Debug)]
pub struct Analyzer {
    pub(crate) config: AnalysisConfig,
    /// FxHash: looked up several times per event, by small integer keys.
    pub(crate) threads: FxHashMap<i32, Thread>,
    pub(crate) cpus: Vec<CpuState>,
    pub(crate) first_ns: Option<u64>,
    pub(crate) last_ns: u64,
    pub(crate) n_events: u64,
    pub(crate) inversions: Vec<Inversion>,
    pub(crate) pi_boosts: Vec<PiBoostSeen>,
    /// (tid, since, waited, who ran meanwhile)
    pub(crate) starvation: Vec<Starved>,
    /// waiter → (futex, owner), from memory reads while recording and from PI boosts.
    pub(crate) owners: HashMap<i32, (u64, i32)>,
    /// child → parent, from fork events (for grouping hangs when processes are unknown).
    pub(crate) parent_of: HashMap<i32, i32>,
    pub(crate) timeline: Option<Timeline>,
    pub(crate) saw_futex: bool,
    /// The source says the futex syscalls were recorded (so seeing none means none were made).
    pub(crate) futex_recorded: bool,
    /// The recorder kept only the switches around the target (see `declare_switches_filtered`).
    pub(crate) switches_filtered: bool,
    pub(crate) saw_waking: bool,
    /// The programs' clocks, one per thread that hit cycle markers (`cycle_rule.rs`; two JACK
    /// servers on one machine are two clocks), at most [`cycle_rule::CLOCKS_KEPT`].
    pub(crate) cycles: Vec<cycle_rule::CycleClock>,
}

impl Analyzer {
    pub fn new(config: AnalysisConfig) -> Analyzer {
        Analyzer {
            config,
            threads: FxHashMap::default(),
            cpus: Vec::new(),
            first_ns: None,
            last_ns: 0,
            n_events: 0,
            inversions: Vec::new(),
            pi_boosts: Vec::new(),
            starvation: Vec::new(),
            owners: HashMap::new(),
            parent_of: HashMap::new(),
            timeline: (config.timeline_spans > 0).then(|| Timeline::new(config.timeline_spans)),
            saw_futex: false,
            futex_recorded: false,
            switches_filtered: false,
            saw_waking: false,
            cycles: Vec::new(),
        }
    }

    /// Tells the analyzer which events (`system:event`) the recording enabled, when the source
    /// says so: a recorded event that never occurs is then no gap in the trace.
    pub fn declare_recorded(&mut self, events: &[String]) {
        self.futex_recorded = events
            .iter()
            .any(|event| event == "syscalls:sys_enter_futex");
    }

    /// Declares that the recorder kept only the switches around the target's threads: a switch
    /// that does not follow the previous one on its CPU is then no gap worth a warning.
    pub fn declare_switches_filtered(&mut self, filtered: bool) {
        self.switches_filtered = filtered;
    }

    /// The state of `cpu`. A trace is untrusted input: a CPU number no kernel can have (at or
    /// above [`MAX_CPUS`], e.g. a corrupt wake-up's target) shares one last slot instead of
    /// growing the table to its size (a fuzzed file asked for 146 GB).
    fn cpu(&mut self, cpu: u32) -> &mut CpuState {
        let index = (cpu as usize).min(MAX_CPUS);
        if self.cpus.len() <= index {
            self.cpus.resize(index + 1, CpuState::default());
        }
        &mut self.cpus[index]
    }

    /// Switch-chain breaks on `cpu` so far after a thread (not idle) was put on it: that
    /// thread's switch-out is missing, so whoever ran after it, unseen, may have been a thread
    /// waiting there. (A missing switch out of idle alone hides no one's run: the thread it put
    /// on the CPU is the `prev` of the next switch.) None where the recording filters switches.
    fn breaks_on(&self, cpu: u32) -> u64 {
        if self.switches_filtered {
            return 0;
        }
        self.cpus
            .get(cpu as usize)
            .map_or(0, |state| state.breaks - state.breaks_after_idle)
    }

    /// `tid` starts waiting on `cpu`'s run queue.
    fn start_waiting(&mut self, tid: i32, cpu: u32) {
        let breaks = self.breaks_on(cpu);
        let irq_mark = self.cpu(cpu).irq_total;
        let thread = self.thread(tid);
        thread.wait_irq_mark = irq_mark;
        thread.queue_cpu = cpu;
        thread.breaks_mark = breaks;
        thread.wait_broken = false;
    }

    /// Whether switches went missing on a CPU `tid` waited on since it became runnable.
    fn wait_broken(&self, tid: i32) -> bool {
        self.threads.get(&tid).is_some_and(|thread| {
            thread.wait_broken || self.breaks_on(thread.queue_cpu) != thread.breaks_mark
        })
    }

    fn thread(&mut self, tid: i32) -> &mut Thread {
        self.threads.entry(tid).or_default()
    }

    pub(crate) fn prio_of(&self, tid: i32) -> i32 {
        self.threads
            .get(&tid)
            .map(|thread| thread.prio)
            .unwrap_or(120)
    }

    fn span(&mut self, tid: i32, start: u64, end: u64, state: SpanState) {
        if let Some(timeline) = &mut self.timeline {
            timeline.push(tid, start, end, state);
        }
    }

    /// Feeds one event (events must come in time order; small disorder is clamped).
    pub fn push(&mut self, event: &Event) {
        if self.note_thread_facts(event) {
            return;
        }
        let mut time = event.timestamp_ns;
        let first = *self.first_ns.get_or_insert(time);
        // Time only moves forward, and at most MAX_SPAN_NS past the first event: a trace is
        // untrusted input, and the sums of durations below then cannot overflow (a corrupt
        // file's timestamps near u64::MAX did). No recording rtlab makes is that long; `trace
        // watch` analyses in short windows.
        time = time
            .max(self.last_ns)
            .min(first.saturating_add(MAX_SPAN_NS));
        self.last_ns = time;
        self.n_events += 1;
        let cpu = event.cpu;
        match event.kind {
            EventKind::Switch {
                prev_tid,
                prev_prio,
                prev_state,
                next_tid,
                next_prio,
            } => {
                // A clock's thread slept (or waited): it did not begin its next cycle at once.
                if prev_state & 0xff != 0 {
                    for clock in &mut self.cycles {
                        if prev_tid == clock.tid {
                            clock.slept();
                        }
                    }
                }
                self.switch(
                    time, cpu, prev_tid, prev_prio, prev_state, next_tid, next_prio,
                )
            }
            EventKind::CycleMarker { tid } => self.cycle_marker(time, tid),
            EventKind::WorkDone { tid } => self.work_done(tid),
            EventKind::Waking {
                tid,
                waker,
                prio,
                target_cpu,
            } => {
                self.saw_waking = true;
                let in_interrupt = self.cpu(cpu).irq_depth > 0;
                let waker = if in_interrupt || waker <= 0 { 0 } else { waker };
                self.waking(time, tid, prio, waker, false, target_cpu.max(0) as u32);
            }
            EventKind::WakeupNew { tid, prio, waker } => {
                self.waking(time, tid, prio, waker.max(0), true, cpu)
            }
            EventKind::Migrate { tid, dest_cpu, .. } => self.migrate(tid, dest_cpu.max(0) as u32),
            EventKind::Exit { tid } => self.thread(tid).exiting = true,
            EventKind::Fork { parent, child } => {
                self.parent_of.insert(child, parent);
            }
            EventKind::PiSetprio {
                tid,
                old_prio,
                new_prio,
                by,
            } => self.pi_setprio(time, tid, old_prio, new_prio, by),
            EventKind::FutexEnter { tid, uaddr, op, .. } => {
                self.saw_futex = true;
                self.thread(tid).futex = Some((uaddr, op & futex_op::CMD_MASK));
            }
            EventKind::FutexExit { tid, .. } => self.thread(tid).futex = None,
            EventKind::IrqEntry { irq } => self.irq_entry(time, cpu, irq.max(-1)),
            EventKind::SoftirqEntry { vector } => self.irq_entry(time, cpu, softirq_source(vector)),
            EventKind::IrqExit { .. } | EventKind::SoftirqExit { .. } => self.irq_exit(time, cpu),
            EventKind::Owner {
                waiter,
                uaddr,
                owner,
            } => {
                self.owners.insert(waiter, (uaddr, owner));
            }
            EventKind::Name { .. }
            | EventKind::Runtime { .. }
            | EventKind::ThreadInfo { .. }
            | EventKind::OtherPolicy { .. } => {}
        }
    }

    /// What an event tells about a thread, not about time (its name, process, policy, or
    /// runtime counter): noted, and true; false for any other event.
    fn note_thread_facts(&mut self, event: &Event) -> bool {
        match event.kind {
            EventKind::Name { tid, comm } => self.thread(tid).name = comm,
            EventKind::ThreadInfo {
                tid,
                tgid,
                policy,
                priority,
            } => {
                let thread = self.thread(tid);
                thread.tgid = Some(tgid);
                thread.policy = Some((policy, priority));
            }
            EventKind::OtherPolicy {
                tid,
                policy,
                priority,
            } => self.thread(tid).policy = Some((policy, priority)),
            EventKind::Runtime { tid, runtime_ns } => self.runtime(
                event.timestamp_ns.max(self.last_ns),
                event.cpu,
                tid,
                runtime_ns,
            ),
            _ => return false,
        }
        true
    }

    /// The program marked its cycle's work done on `tid`.
    fn work_done(&mut self, tid: i32) {
        let pipewire = self.config.cycle_rule == CycleRule::Pipewire;
        let Thread {
            cycle_judge,
            current,
            ..
        } = self.thread(tid);
        cycle_judge.work_done();
        if pipewire {
            cycle_judge.pipewire_signalled(true, current.as_mut());
        }
    }

    /// `tid` moves to `dest`: a runnable thread now waits on that CPU's run queue.
    fn migrate(&mut self, tid: i32, dest: u32) {
        if matches!(self.thread(tid).state, State::Runnable { .. }) {
            let broken = self.wait_broken(tid);
            self.start_waiting(tid, dest);
            let thread = self.thread(tid);
            thread.wait_broken = broken;
            if let Some(activation) = &mut thread.current {
                activation.migrated = true;
            }
        } else {
            self.thread(tid).queue_cpu = dest;
        }
    }

    /// A priority-inheritance change of `tid`'s priority, caused by `by`'s wait.
    fn pi_setprio(&mut self, time: u64, tid: i32, old_prio: i32, new_prio: i32, by: i32) {
        let base = self.prio_of(tid);
        let thread = self.thread(tid);
        if new_prio < base {
            thread.boosted = true;
            if new_prio < old_prio {
                self.pi_boosts.push(PiBoostSeen {
                    at: time,
                    owner: tid,
                    by,
                    from_prio: old_prio,
                    to_prio: new_prio,
                });
                if by > 0 && by != tid {
                    let futex = self
                        .threads
                        .get(&by)
                        .and_then(|waiter| waiter.futex)
                        .map(|(uaddr, _)| uaddr)
                        .unwrap_or(0);
                    self.owners.insert(by, (futex, tid));
                }
            }
        } else {
            thread.boosted = false;
        }
    }

    /// An interrupt (hard or soft, from `source`) begins on `cpu`.
    fn irq_entry(&mut self, time: u64, cpu: u32, source: i32) {
        let state = self.cpu(cpu);
        if state.irq_depth == 0 {
            state.irq_since = time;
            state.irq_source = source;
        }
        state.irq_depth += 1;
    }

    /// An interrupt ends on `cpu`; the outermost one's span is kept.
    fn irq_exit(&mut self, time: u64, cpu: u32) {
        let state = self.cpu(cpu);
        if state.irq_depth > 0 {
            state.irq_depth -= 1;
            if state.irq_depth == 0 {
                state.irq_total += time.saturating_sub(state.irq_since);
                if state.irqs.len() == IRQS_KEPT {
                    state.irqs.pop_front();
                }
                let span = (state.irq_source, state.irq_since, time);
                state.irqs.push_back(span);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn switch(
        &mut self,
        time: u64,
        cpu: u32,
        prev: i32,
        prev_prio: i32,
        prev_state: u32,
        next: i32,
        next_prio: i32,
    ) {
        // A switch whose `prev` is not the thread last seen switching in here means events of
        // this CPU are missing (a filtered recording, lost records): when the one seen last
        // stopped running, and what it did since, is not known.
        let (seen, last) = (self.cpu(cpu).seen, self.cpu(cpu).current);
        if seen && last != prev {
            let state = self.cpu(cpu);
            state.breaks += 1;
            if last == 0 {
                state.breaks_after_idle += 1;
            }
            if last > 0 {
                let thread = self.thread(last);
                if matches!(thread.state, State::Running { cpu: on, .. } if on == cpu) {
                    thread.state = State::Unknown;
                }
            }
        }
        // `prev` ran here since a switch not recorded (a recorder that keeps only the switches
        // of CPUs a target is on): it held the CPU at most since the last switch seen here,
        // which is what a thread that waited here meanwhile is told.
        if prev > 0 && seen {
            let since = self.cpu(cpu).since;
            let running_here =
                matches!(self.thread(prev).state, State::Running { cpu: on, .. } if on == cpu);
            if !running_here && since < time {
                let slices = &mut self.cpu(cpu).slices;
                if slices.len() == SLICES_KEPT {
                    slices.pop_front();
                }
                slices.push_back((prev, since, time));
            }
        }
        if prev > 0 {
            self.end_running(time, cpu, prev, prev_prio, prev_state);
        }
        let irq_total = self.cpu(cpu).irq_total;
        if next > 0 {
            let waited_since = match self.thread(next).state {
                State::Runnable { since } => Some(since),
                _ => None,
            };
            self.start_running(time, cpu, next, next_prio, irq_total);
            self.note_resumed_after_waker(next, waited_since);
        }
        let state = self.cpu(cpu);
        state.current = next;
        state.since = time;
        state.seen = true;
    }

    fn end_running(&mut self, time: u64, on_cpu: u32, prev: i32, prev_prio: i32, prev_state: u32) {
        let (since, cpu) = match self.thread(prev).state {
            State::Running { since, cpu } => (since, Some(cpu)),
            _ => (time, None),
        };
        let irq_now = cpu.map(|cpu| self.cpu(cpu).irq_total).unwrap_or(0);
        let slice = time.saturating_sub(since);
        let breaks_here = self.breaks_on(on_cpu);
        if slice > 0 {
            let slices = &mut self.cpu(on_cpu).slices;
            if slices.len() == SLICES_KEPT {
                slices.pop_front();
            }
            slices.push_back((prev, since, time));
        }
        let irq_top = if irq_now > self.thread(prev).irq_mark {
            self.irq_sources(on_cpu, since, time).into_iter().next()
        } else {
            None
        };
        let wait_irq_mark = self.cpu(on_cpu).irq_total;
        let thread = self.thread(prev);
        if !thread.boosted {
            thread.prio = prev_prio;
            thread.prio_known = true;
        }
        thread.cpu_ns += slice;
        let irq_during = irq_now.saturating_sub(thread.irq_mark);
        if let Some(activation) = &mut thread.current {
            activation.cpu_ns += slice;
            activation.irq_ns += irq_during;
            if let Some((source, ns)) = irq_top {
                if source == activation.irq_source {
                    activation.irq_source_ns += ns;
                } else if ns > activation.irq_source_ns {
                    activation.irq_source = source;
                    activation.irq_source_ns = ns;
                }
            }
        }
        let exiting = thread.exiting || prev_state & 0x30 != 0;
        let preempted = prev_state & 0xff == 0 && !exiting;
        let futex = thread.futex;
        if preempted {
            thread.state = State::Runnable { since: time };
            thread.queue_cpu = on_cpu;
            thread.wait_irq_mark = wait_irq_mark;
            thread.breaks_mark = breaks_here;
            thread.wait_broken = false;
        } else if exiting {
            thread.state = State::Dead;
            if let Some(mut activation) = thread.current.take() {
                activation.end = time;
                thread.complete(activation);
            }
        } else {
            let (reason, uaddr) = match futex {
                Some((uaddr, op)) if futex_op::waits(op) => (BlockReason::Futex, uaddr),
                _ if prev_state & 0x2 != 0 => (BlockReason::Io, 0),
                _ => (BlockReason::Sleep, 0),
            };
            thread.state = State::Blocked {
                since: time,
                reason,
                uaddr,
            };
            if let Some(mut activation) = thread.current.take() {
                activation.end = time;
                thread.complete(activation);
            }
        }
        if since < time {
            self.span(prev, since, time, SpanState::Running);
        }
    }

    /// `tid` gets a CPU after a runnable wait that began at `waited_since`: when its waker ran a
    /// whole activation meanwhile — one that began after `tid`'s own activation began and
    /// ended while `tid` waited (not the hand-over of the activation that woke it) — say so in
    /// `tid`'s activation.
    fn note_resumed_after_waker(&mut self, tid: i32, waited_since: Option<u64>) {
        let Some(waited_since) = waited_since else {
            return;
        };
        let Some(activation) = self.threads.get(&tid).and_then(|thread| thread.current) else {
            return;
        };
        if activation.waker <= 0 {
            return;
        }
        let waker_cycled = self.threads.get(&activation.waker).is_some_and(|waker| {
            let blocked_since = match waker.state {
                State::Blocked { since, .. } => since,
                _ => 0,
            };
            blocked_since > waited_since
                && waker
                    .summary
                    .last_start
                    .is_some_and(|start| start > activation.start)
        });
        if waker_cycled {
            if let Some(activation) = &mut self.thread(tid).current {
                activation.resumed_after_waker = true;
            }
        }
    }

    fn start_running(&mut self, time: u64, cpu: u32, next: i32, next_prio: i32, irq_total: u64) {
        let state = self.thread(next).state;
        match state {
            State::Runnable { since } => self.end_runnable(time, cpu, next, since),
            State::Blocked {
                since,
                reason,
                uaddr,
            } => {
                // Woken without a traced wake-up (sched_waking not recorded).
                self.end_blocked(time, next, since, reason, uaddr, -1);
                self.thread(next).current = Some(Activation {
                    start: time,
                    waker: -1,
                    woke_from: Some(reason),
                    blocked_before_ns: time - since,
                    ..Activation::default()
                });
            }
            State::Running { .. } | State::Unknown | State::Dead => {}
        }
        let thread = self.thread(next);
        if !thread.boosted {
            thread.prio = next_prio;
            thread.prio_known = true;
        }
        thread.cycle_judge.pipewire_ran();
        thread.state = State::Running { cpu, since: time };
        thread.irq_mark = irq_total;
    }

    /// Who ran on `queue_cpu` between `since` and `until` (not `tid`), with how long: the
    /// slices kept, and the one still running there unless `tid` just took that CPU.
    pub(crate) fn meanwhile(
        &self,
        tid: i32,
        queue_cpu: u32,
        since: u64,
        until: u64,
        started_on: Option<u32>,
        max_slices: usize,
    ) -> Vec<(i32, u64)> {
        let Some(cpu) = self.cpus.get(queue_cpu as usize) else {
            return Vec::new();
        };
        // A short scan sums in a small list; a long one (starvation) in a map.
        let mut meanwhile: Vec<(i32, u64)> = Vec::new();
        let mut sums: FxHashMap<i32, u64> = FxHashMap::default();
        let small = max_slices <= RECENT_SLICES;
        let mut add = |other: i32, ns: u64| {
            if small {
                add_to(&mut meanwhile, other, ns);
            } else {
                let sum = sums.entry(other).or_insert(0);
                *sum = sum.saturating_add(ns);
            }
        };
        for &(other, start, end) in cpu.slices.iter().rev().take(max_slices) {
            if end <= since {
                break;
            }
            if other != tid && start < until {
                add(other, end.min(until).saturating_sub(start.max(since)));
            }
        }
        if started_on != Some(queue_cpu) && cpu.current > 0 && cpu.current != tid {
            add(cpu.current, until.saturating_sub(cpu.since.max(since)));
        }
        meanwhile.extend(sums.into_iter().filter(|(_, ns)| *ns > 0));
        // Deterministic order: most first, then by tid.
        meanwhile.sort_unstable_by_key(|(other, ns)| (std::cmp::Reverse(*ns), *other));
        meanwhile
    }

    /// A target thread's CPU time, recorded just before a switch of it: going off the CPU, the
    /// part of its run it did not get (minus interrupts) vanished — the hypervisor's; going on,
    /// the mark the next one is measured from.
    fn runtime(&mut self, time: u64, cpu: u32, tid: i32, runtime_ns: u64) {
        let irq_total = self.cpu(cpu).irq_total;
        let thread = self.thread(tid);
        match thread.state {
            State::Running { cpu: on, since } if on == cpu => {
                if let Some(runtime_in) = thread.runtime_in.take() {
                    let got = runtime_ns.saturating_sub(runtime_in);
                    let irq = irq_total.saturating_sub(thread.irq_mark);
                    let vanished = time.saturating_sub(since).saturating_sub(got + irq);
                    if let Some(activation) = &mut thread.current {
                        activation.vanished_ns += vanished;
                    }
                }
            }
            _ => thread.runtime_in = Some(runtime_ns),
        }
    }

    /// The interrupt sources on `cpu` between `since` and `until`, with their time, most first.
    pub(crate) fn irq_sources(&self, cpu: u32, since: u64, until: u64) -> Vec<(i32, u64)> {
        let Some(state) = self.cpus.get(cpu as usize) else {
            return Vec::new();
        };
        let mut sums: Vec<(i32, u64)> = Vec::new();
        for &(source, start, end) in state.irqs.iter().rev() {
            if end <= since {
                break;
            }
            if start < until {
                add_to(
                    &mut sums,
                    source,
                    end.min(until).saturating_sub(start.max(since)),
                );
            }
        }
        sums.sort_unstable_by_key(|(source, ns)| (std::cmp::Reverse(*ns), *source));
        sums
    }

    /// Who ran on every CPU between `since` and `until` (not `tid`), most first — real-time
    /// threads before the others when `tid` is real-time (only they can hold back what
    /// activates it) — and the time of that window nothing recorded ran on the busiest CPU.
    fn gap_holders(&self, tid: i32, since: u64, until: u64) -> (Vec<(i32, u64)>, u64) {
        let mut all: Vec<(i32, u64)> = Vec::new();
        let window = until.saturating_sub(since);
        let mut busiest = 0u64;
        for cpu in 0..self.cpus.len() as u32 {
            // The one running there now only when its start was recorded (a recorder that
            // keeps some switches may leave a stale one).
            let current = self.cpus[cpu as usize].current;
            let known = matches!(
                self.threads.get(&current).map(|thread| thread.state),
                Some(State::Running { cpu: on, .. }) if on == cpu
            );
            let started_on = if known { None } else { Some(cpu) };
            let ran = self.meanwhile(tid, cpu, since, until, started_on, RECENT_SLICES * 4);
            let irq: u64 = self
                .irq_sources(cpu, since, until)
                .iter()
                .map(|(_, ns)| *ns)
                .sum();
            busiest = busiest.max(ran.iter().map(|(_, ns)| *ns).sum::<u64>() + irq);
            for (other, ns) in ran {
                add_to(&mut all, other, ns);
            }
        }
        let real_time = self.prio_of(tid) < 100;
        all.sort_unstable_by_key(|(other, ns)| {
            let urgent = real_time && self.prio_of(*other) < 100;
            (!urgent, std::cmp::Reverse(*ns), *other)
        });
        (all, window.saturating_sub(busiest))
    }

    /// The share of the second before `until` that real-time threads ran on `cpu` (from the
    /// slices kept; 0 when they do not reach back that far).
    fn real_time_share(&self, cpu: u32, until: u64) -> f64 {
        let Some(state) = self.cpus.get(cpu as usize) else {
            return 0.0;
        };
        let since = until.saturating_sub(1_000_000_000);
        let mut real_time = 0u64;
        let mut reached = false;
        for &(tid, start, end) in state.slices.iter().rev() {
            if end <= since {
                reached = true;
                break;
            }
            if start < until && self.prio_of(tid) < 100 {
                real_time += end.min(until).saturating_sub(start.max(since));
            }
        }
        if !reached {
            return 0.0;
        }
        real_time as f64 / 1e9
    }

    fn end_runnable(&mut self, time: u64, start_cpu: u32, tid: i32, since: u64) {
        let queue_cpu = self.thread(tid).queue_cpu;
        let waited = time.saturating_sub(since);
        // Who held the CPU matters for waits long enough to show in a critical path or as
        // starvation; reading it back for every short wait would cost a scan per switch.
        let meanwhile = if waited >= self.config.starve_ns {
            self.meanwhile(tid, queue_cpu, since, time, Some(start_cpu), SLICES_KEPT)
        } else if waited >= ATTRIBUTED_WAIT_NS {
            // For a critical path, who held the CPU last is enough.
            self.meanwhile(tid, queue_cpu, since, time, Some(start_cpu), RECENT_SLICES)
        } else {
            Vec::new()
        };
        let broken = self.wait_broken(tid);
        let (irq_during, irq_source) = if waited >= ATTRIBUTED_WAIT_NS {
            let total = self
                .cpu(queue_cpu)
                .irq_total
                .saturating_sub(self.thread(tid).wait_irq_mark);
            let source = self
                .irq_sources(queue_cpu, since, time)
                .first()
                .map_or(NO_SOURCE, |(source, _)| *source);
            (total.min(waited), source)
        } else {
            (0, NO_SOURCE)
        };
        // A real-time thread kept waiting by less urgent threads on a CPU where real-time
        // threads had used up the kernel's real-time share (`sched_rt_runtime_us`, 95 % of each
        // second) was throttled. (Otherwise the less urgent one is named: it held the CPU, in a
        // section the kernel did not preempt, or while the hypervisor had the virtual CPU.)
        let my_prio = self.prio_of(tid);
        let less_urgent: u64 = meanwhile
            .iter()
            .filter(|(other, _)| my_prio < 100 && self.prio_of(*other) > my_prio)
            .map(|(_, ns)| *ns)
            .sum();
        let throttled_cpu = less_urgent > 0 && self.real_time_share(queue_cpu, since) >= 0.9;
        let (mut holders, mut throttled) = (Vec::with_capacity(meanwhile.len()), 0u64);
        for &(other, ns) in &meanwhile {
            if throttled_cpu && self.prio_of(other) > my_prio {
                throttled += ns;
            } else {
                holders.push((other, ns));
            }
        }
        // Saturating: a trace is untrusted input, and overlapping slices of a corrupt one could sum
        // past u64.
        let accounted: u64 = meanwhile
            .iter()
            .fold(irq_during, |total, (_, ns)| total.saturating_add(*ns));
        let idle = if waited >= ATTRIBUTED_WAIT_NS && !broken {
            waited.saturating_sub(accounted)
        } else {
            0
        };
        let starve_ns = self.config.starve_ns;
        let thread = self.thread(tid);
        if let Some(activation) = &mut thread.current {
            activation.wait_ns += waited;
            if waited > activation.longest_wait_ns {
                activation.longest_wait_ns = waited;
                activation.wait_cpu = queue_cpu;
            }
            activation.wait_irq_ns += irq_during;
            if irq_during > 0 && irq_source != NO_SOURCE {
                activation.wait_irq_source = irq_source;
            }
            activation.wait_throttled_ns += throttled;
            activation.wait_idle_ns += idle;
            for (holder, ns) in holders {
                add_holder(activation, holder, ns);
            }
        }
        // A wait across missing switches of its CPU may have been cut by a run not recorded.
        if waited >= starve_ns && !self.wait_broken(tid) {
            self.starvation.push((tid, since, waited, meanwhile));
        }
        let thread = self.thread(tid);
        if thread.episodes.len() == EPISODES_KEPT {
            thread.episodes.pop_front();
        }
        thread.episodes.push_back(Episode {
            start: since,
            end: time,
            queue_cpu,
        });
        if since < time {
            self.span(tid, since, time, SpanState::Runnable);
        }
    }

    fn end_blocked(
        &mut self,
        time: u64,
        tid: i32,
        since: u64,
        reason: BlockReason,
        uaddr: u64,
        _waker: i32,
    ) {
        let hang_ns = self.config.hang_ns;
        let thread = self.thread(tid);
        let blocked = time.saturating_sub(since);
        thread.blocked_ns[reason as usize] += blocked;
        if reason == BlockReason::Futex && blocked >= hang_ns {
            thread.long_waits.push(LongWait {
                since,
                until: time,
                uaddr,
            });
        }
        let state = match reason {
            BlockReason::Futex => SpanState::BlockedFutex,
            BlockReason::Io => SpanState::BlockedIo,
            BlockReason::Sleep => SpanState::BlockedSleep,
        };
        if since < time {
            self.span(tid, since, time, state);
        }
    }

    fn waking(
        &mut self,
        time: u64,
        tid: i32,
        prio: i32,
        waker: i32,
        new_thread: bool,
        queue_cpu: u32,
    ) {
        if tid <= 0 {
            return;
        }
        let state = self.thread(tid).state;
        let (woke_from, blocked_before) = match state {
            State::Blocked {
                since,
                reason,
                uaddr,
            } => {
                self.end_blocked(time, tid, since, reason, uaddr, waker);
                if reason == BlockReason::Futex && waker > 0 {
                    self.check_inversion(tid, waker, since, time, uaddr);
                }
                (Some(reason), time - since)
            }
            State::Unknown => (None, 0),
            State::Dead if new_thread => (None, 0),
            // A runnable thread is not woken (the kernel traces a wake-up only of a sleeping
            // one): its run and its block were not recorded. What it waited is not known.
            State::Runnable { .. } => {
                self.thread(tid).current = None;
                (None, 0)
            }
            _ => return,
        };
        *self.thread(tid).wakers.entry(waker).or_insert(0) += 1;
        if waker > 0 {
            *self.thread(waker).wakes.entry(tid).or_insert(0) += 1;
        }
        self.start_waiting(tid, queue_cpu);
        // A gap: more than 1.5 of its usual interval since its last activation. Who ran in the
        // gap (on any CPU) is read now, while the slices are still kept.
        let (mut gap_holder, mut gap_holder_ns, mut gap_idle_ns, mut gap_ns) = (0, 0, 0, 0);
        let (mut gap_throttled, mut gap_irq) = (0, (0, NO_SOURCE));
        let thread = self.thread(tid);
        let rhythm = thread
            .rhythms
            .iter()
            .position(|rhythm| rhythm.waker == waker);
        if rhythm.is_none() && thread.rhythms.len() < RHYTHMS_KEPT {
            thread.rhythms.push(Rhythm {
                waker,
                last_start: time,
                intervals: [0; INTERVALS_KEPT],
                n_intervals: 0,
            });
        }
        if let Some(index) = rhythm {
            let rhythm = &thread.rhythms[index];
            let last = rhythm.last_start;
            let interval = time.saturating_sub(last);
            let kept = rhythm.n_intervals.min(INTERVALS_KEPT);
            let typical = typical_interval(&rhythm.intervals[..kept]);
            if typical > 0 && interval.saturating_mul(2) > typical.saturating_mul(3) {
                let window = interval - typical;
                // The thread that activates it was held back itself (its wait before it ran,
                // with its culprits): that is the gap's cause. Otherwise, who ran anywhere.
                let waker_activation = self
                    .threads
                    .get(&waker)
                    .and_then(|thread| thread.current)
                    .filter(|activation| {
                        waker > 0 && activation.wait_ns.saturating_mul(5) >= window
                    });
                if let Some(held) = waker_activation {
                    (gap_holder, gap_holder_ns) = (held.top_holder, held.top_holder_ns);
                    gap_idle_ns = held.wait_idle_ns;
                    gap_throttled = held.wait_throttled_ns;
                    gap_irq = (held.wait_irq_ns, held.wait_irq_source);
                } else {
                    let (holders, idle) = self.gap_holders(tid, last + typical, time);
                    if let Some(&(holder, ns)) = holders.first() {
                        (gap_holder, gap_holder_ns) = (holder, ns);
                    }
                    gap_idle_ns = idle;
                }
                gap_ns = interval;
            }
            let rhythm = &mut self.thread(tid).rhythms[index];
            rhythm.intervals[rhythm.n_intervals % INTERVALS_KEPT] = interval;
            rhythm.n_intervals = rhythm.n_intervals.wrapping_add(1);
            rhythm.last_start = time;
        }
        let thread = self.thread(tid);
        if !thread.prio_known {
            thread.prio = prio;
        }
        thread.state = State::Runnable { since: time };
        thread.current = Some(Activation {
            start: time,
            waker,
            woke_from,
            blocked_before_ns: blocked_before,
            gap_holder,
            gap_holder_ns,
            gap_idle_ns,
            gap_ns,
            gap_throttled_ns: gap_throttled,
            gap_irq_ns: gap_irq.0,
            gap_irq_source: gap_irq.1,
            ..Activation::default()
        });
        let mut trigger_clock = None;
        let mut driven = false;
        for (index, clock) in self.cycles.iter_mut().enumerate() {
            let woken_by_clock = clock.woke(waker, tid);
            if woken_by_clock {
                trigger_clock = Some(index);
            }
            driven |= woken_by_clock || clock.driven.contains(&tid);
        }
        if self.config.cycle_rule == CycleRule::Pipewire {
            self.pipewire_waking(time, tid, waker, trigger_clock);
        }
        if driven {
            let thread = self.threads.get_mut(&tid).expect("just woken");
            if let Some(activation) = &mut thread.current {
                thread.cycle_judge.activated(activation);
            }
        }
    }

    /// PipeWire's rule at a wake-up: the driver's thread (clock `trigger_clock`) woke follower
    /// `tid` (its trigger, a cycle start), or follower `waker` woke the driver's thread (its
    /// signal).
    ///
    /// Only a follower's wake-up is a trigger: the driver's thread also wakes threads that are
    /// no follower (the server's main thread for the profiler's flush, `migration/N`), and a
    /// cycle started there found the follower at work — 2 or 3 misses PipeWire never logged
    /// (issue 40, idle rounds).
    fn pipewire_waking(&mut self, time: u64, tid: i32, waker: i32, trigger_clock: Option<usize>) {
        if let Some(index) =
            trigger_clock.filter(|&index| self.cycles[index].is_pipewire_follower(tid))
        {
            if self.cycles[index].pipewire_cycle_start(time, true) {
                self.pipewire_cycle_start(index);
            }
            if let Some(thread) = self.threads.get_mut(&tid) {
                thread.cycle_judge.pipewire_woken();
            }
        }
        if waker > 0 {
            for clock in self.cycles.iter_mut().filter(|clock| clock.tid == tid) {
                clock.pipewire_woken_by(waker);
            }
        }
        let signals = waker > 0
            && self
                .cycles
                .iter()
                .any(|clock| clock.tid == tid && clock.is_pipewire_follower(waker));
        if signals {
            if let Some(thread) = self.threads.get_mut(&waker) {
                thread
                    .cycle_judge
                    .pipewire_signalled(false, thread.current.as_mut());
            }
        }
    }

    /// PipeWire's rule: clock `index` began a cycle: each follower is judged.
    fn pipewire_cycle_start(&mut self, index: usize) {
        let cycle_delay = self.cycle_delay_of(self.cycles[index].tid);
        for driven in self.cycles[index].pipewire_followers() {
            if let Some(thread) = self.threads.get_mut(&driven) {
                thread
                    .cycle_judge
                    .pipewire_cycle_start(thread.current.as_mut(), cycle_delay.as_ref());
            }
        }
    }

    /// The activation of a clock's thread `tid` under way when it waited for a CPU a tenth of
    /// its period or more (a cycle that came late), for the misses charged at its cycle start.
    fn cycle_delay_of(&self, tid: i32) -> Option<Activation> {
        let period = self
            .cycles
            .iter()
            .find(|clock| clock.tid == tid)
            .map_or(0, |clock| clock.period_ns);
        self.threads
            .get(&tid)
            .and_then(|thread| thread.current)
            .filter(|activation| period > 0 && activation.wait_ns * 10 >= period)
    }

    /// The program began a cycle (a cycle marker of `tid`): each thread it drives is judged.
    fn cycle_marker(&mut self, time: u64, tid: i32) {
        let index = match self.cycles.iter().position(|clock| clock.tid == tid) {
            Some(index) => index,
            None if self.cycles.len() < cycle_rule::CLOCKS_KEPT => {
                self.cycles.push(cycle_rule::CycleClock::default());
                self.cycles.len() - 1
            }
            // PipeWire's marker (libc's `timerfd_settime`) fires in every process that arms a
            // timer: a clock that never drove a thread gives its place to a new one.
            None if self.config.cycle_rule == CycleRule::Pipewire => {
                match self.cycles.iter().position(|clock| clock.driven.is_empty()) {
                    Some(index) => {
                        self.cycles[index] = cycle_rule::CycleClock::default();
                        index
                    }
                    None => return,
                }
            }
            None => return,
        };
        let clock = &mut self.cycles[index];
        let overran = clock.marker(time, tid);
        if self.config.cycle_rule == CycleRule::Pipewire {
            self.cycles[index].pipewire_run_marker();
            for driven in self.cycles[index].pipewire_followers() {
                if let Some(thread) = self.threads.get_mut(&driven) {
                    thread.cycle_judge.pipewire_marker();
                }
            }
            if self.cycles[index].pipewire_cycle_start(time, false) {
                self.pipewire_cycle_start(index);
            }
            return;
        }
        let period = clock.period_ns;
        // The cycle came late when its thread waited for a CPU a tenth of a period or more.
        let cycle_delay = self
            .threads
            .get(&tid)
            .and_then(|thread| thread.current)
            .filter(|activation| period > 0 && activation.wait_ns * 10 >= period);
        for driven in self.cycles[index].driven.clone() {
            if let Some(thread) = self.threads.get_mut(&driven) {
                let Thread {
                    cycle_judge,
                    current,
                    ..
                } = thread;
                cycle_judge.marker(
                    time,
                    period,
                    overran,
                    current.as_mut(),
                    cycle_delay.as_ref(),
                );
            }
        }
    }

    fn check_inversion(&mut self, high: i32, low: i32, blocked_at: u64, woken_at: u64, uaddr: u64) {
        let high_prio = self.prio_of(high);
        let low_prio = self.prio_of(low);
        if low_prio <= high_prio {
            return;
        }
        let Some(low_thread) = self.threads.get(&low) else {
            return;
        };
        let mut middle: Vec<(i32, u64)> = Vec::new();
        let mut low_runnable_ns = 0;
        for episode in &low_thread.episodes {
            if episode.end <= blocked_at || episode.start >= woken_at {
                continue;
            }
            let from = episode.start.max(blocked_at);
            let to = episode.end.min(woken_at);
            low_runnable_ns += to - from;
            for (other, ns) in self.meanwhile(low, episode.queue_cpu, from, to, None, SLICES_KEPT) {
                if other == high || other == low {
                    continue;
                }
                let other_prio = self.prio_of(other);
                if other_prio >= high_prio && other_prio < low_prio {
                    add_to(&mut middle, other, ns);
                }
            }
        }
        if middle.is_empty() {
            return;
        }
        middle.sort_by_key(|entry| std::cmp::Reverse(entry.1));
        let middle = middle
            .into_iter()
            .map(|(tid, ns)| Middle {
                tid,
                name: self.name_of(tid),
                priority: crate::model::user_priority(self.prio_of(tid)),
                ns,
            })
            .collect();
        self.inversions.push(Inversion {
            high: self.thread_ref(high),
            low: self.thread_ref(low),
            middle,
            futex: format!("{uaddr:#x}"),
            at_ns: blocked_at,
            duration_ns: woken_at - blocked_at,
            low_runnable_ns,
        });
    }

    pub(crate) fn name_of(&self, tid: i32) -> String {
        if tid <= 0 {
            return "(interrupt)".into();
        }
        self.threads
            .get(&tid)
            .map(|thread| thread.name.to_string())
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| format!("<{tid}>"))
    }

    pub(crate) fn thread_ref(&self, tid: i32) -> ThreadRef {
        ThreadRef {
            tid,
            name: self.name_of(tid),
            priority: self.user_priority_of(tid),
        }
    }

    pub(crate) fn user_priority_of(&self, tid: i32) -> i32 {
        match self.threads.get(&tid).and_then(|thread| thread.policy) {
            Some((_, priority)) => priority,
            None => crate::model::user_priority(self.prio_of(tid)),
        }
    }

    /// The events seen so far.
    pub fn n_events(&self) -> u64 {
        self.n_events
    }
}

#[cfg(test)]
mod tests;
