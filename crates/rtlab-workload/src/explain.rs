//! `--explain` for workloads: why each underrun and deadline miss happened.
//!
//! `rtlab run --explain` asks why one wake-up was late; a workload asks why a thread did not get
//! its work done over a stretch of time — the device's producer in the `n·t` before an underrun,
//! a thread between its release and its missed deadline. The runner records the scheduler and
//! interrupt events of every CPU for the whole run through `rtlab_explain::Recorder` (the tracefs
//! recorder of `rtlab run --explain`, its private instance, decoder and per-CPU windows); after
//! the run [`account`] replays them over each window and says where the thread's time went —
//! ran, waited, what ran instead on its CPU (task, IRQ, softirq), throttled (runnable but a
//! lower-priority task or nothing ran: SCHED_DEADLINE budget used up, RT throttling or the fair
//! server), or vanished (its busy CPU silent for more than two ticks: the hypervisor). The parts
//! add up to the window. [`account`] is pure, so it is tested on synthetic event streams.

use rtlab_core::{LatenessKind, LatenessPart, ThreadAccount};
use rtlab_explain::attribution::{sort_largest_first, CauseTotals};
use rtlab_explain::{EventKind, TraceEvent};
use std::collections::BTreeMap;

/// A busy CPU takes a scheduler tick at least this often (HZ=100 is the slowest common rate);
/// silence twice as long while it was busy is time the CPU did not run.
pub const SILENCE_NS: u64 = 2 * 10_000_000;

/// Names for tids the trace only knows by a 15-character comm (workload threads, the device,
/// competitors), with their kernel priority when known (a thread that changed its policy after
/// its last switch-in still shows the old one in the trace).
pub type KnownNames = BTreeMap<u32, KnownName>;

/// A tid's name, and its kernel priority when known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownName {
    pub name: String,
    pub kernel_prio: Option<i32>,
}

/// The kernel's `prio` of a policy (-1 deadline, 99 - p real-time, 120 + nice otherwise).
pub fn kernel_prio(policy: rtlab_sys::sched::Policy) -> i32 {
    use rtlab_sys::sched::Policy;
    match policy {
        Policy::Deadline { .. } => -1,
        Policy::Fifo { priority } | Policy::RoundRobin { priority } => 99 - priority as i32,
        Policy::Other { nice } | Policy::Batch { nice } => 120 + nice,
        Policy::Idle => 139,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TargetState {
    Unknown,
    Running(u32),
    Runnable(u32),
    Blocked,
}

#[derive(Clone, Debug, Default)]
struct CpuState {
    running: Option<RunningTask>,
    /// Open interrupt contexts, innermost last.
    contexts: Vec<InterruptContext>,
}

/// The task running on a CPU (pid 0 = idle).
#[derive(Clone, Debug)]
struct RunningTask {
    pid: i32,
    comm: String,
    kernel_prio: i32,
}

/// An interrupt, vector or softirq a CPU is in.
#[derive(Clone, Debug)]
struct InterruptContext {
    kind: LatenessKind,
    name: String,
}

/// Per CPU, stretches in which it was busy but recorded no event for more than [`SILENCE_NS`],
/// as (start, end) of the part beyond one tick: time the CPU did not run. Only CPUs whose timer
/// ticks are traced (the `local_timer` vector) are judged; `events` are in time order.
fn silent_stretches(events: &[TraceEvent]) -> BTreeMap<u32, Vec<(u64, u64)>> {
    let ticks_traced: std::collections::BTreeSet<u32> = events
        .iter()
        .filter(
            |event| matches!(event.kind, EventKind::VectorEntry { name } if name == "local_timer"),
        )
        .map(|event| event.cpu)
        .collect();
    let mut last: BTreeMap<u32, (u64, bool)> = BTreeMap::new();
    let mut stretches: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    for event in events {
        let busy_after = match &event.kind {
            EventKind::Switch { next_pid, .. } => Some(*next_pid != 0),
            _ => None,
        };
        if let Some((previous, busy)) = last.get(&event.cpu).copied() {
            if busy
                && ticks_traced.contains(&event.cpu)
                && event.timestamp_ns.saturating_sub(previous) > SILENCE_NS
            {
                stretches
                    .entry(event.cpu)
                    .or_default()
                    .push((previous + SILENCE_NS / 2, event.timestamp_ns));
            }
            last.insert(event.cpu, (event.timestamp_ns, busy_after.unwrap_or(busy)));
        } else {
            // Busy unless the first event says the CPU goes idle.
            last.insert(
                event.cpu,
                (event.timestamp_ns, busy_after.unwrap_or(event.pid != 0)),
            );
        }
    }
    stretches
}

fn overlap(start: u64, end: u64, stretches: Option<&Vec<(u64, u64)>>) -> u64 {
    stretches.map_or(0, |stretches| {
        stretches
            .iter()
            .map(|&(from, to)| to.min(end).saturating_sub(from.max(start)))
            .sum()
    })
}

/// One stretch of a thread's time with one part (kind, name, pid, detail).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimedPart {
    pub start_ns: u64,
    pub ns: u64,
    pub kind: LatenessKind,
    pub name: String,
    pub pid: Option<u32>,
    pub detail: Option<String>,
}

#[derive(Default)]
struct Tally {
    timeline: Vec<TimedPart>,
}

impl Tally {
    fn add(
        &mut self,
        start_ns: u64,
        kind: LatenessKind,
        name: String,
        pid: Option<u32>,
        detail: Option<String>,
        ns: u64,
    ) {
        if ns == 0 {
            return;
        }
        if let Some(last) = self.timeline.last_mut() {
            if last.kind == kind
                && last.name == name
                && last.pid == pid
                && last.start_ns + last.ns == start_ns
            {
                last.ns += ns;
                return;
            }
        }
        self.timeline.push(TimedPart {
            start_ns,
            ns,
            kind,
            name,
            pid,
            detail,
        });
    }
}

/// Sums a thread's timeline over [`start_ns`, `end_ns`]: the parts, largest first, adding up to
/// the window (time the timeline does not cover is `unseen`).
pub fn sum_window(timeline: &[TimedPart], start_ns: u64, end_ns: u64) -> Vec<LatenessPart> {
    let mut sums: CauseTotals<LatenessKind> = CauseTotals::default();
    let first = timeline.partition_point(|part| part.start_ns + part.ns <= start_ns);
    let mut covered = 0;
    for part in timeline[first..]
        .iter()
        .take_while(|part| part.start_ns < end_ns)
    {
        let ns = (part.start_ns + part.ns)
            .min(end_ns)
            .saturating_sub(part.start_ns.max(start_ns));
        if ns == 0 {
            continue;
        }
        covered += ns;
        sums.add(
            part.kind,
            part.name.clone(),
            part.pid,
            part.detail.clone(),
            ns,
        );
    }
    let window = end_ns.saturating_sub(start_ns);
    if covered < window {
        sums.add(
            LatenessKind::Unseen,
            "not in the trace".to_owned(),
            None,
            None,
            window - covered,
        );
    }
    let mut parts = sums.into_causes();
    sort_largest_first(&mut parts);
    parts
}

/// [`timeline`] summed over the window: where thread `tid`'s time went over [`start_ns`,
/// `end_ns`], largest first, adding up to the window.
pub fn account(
    events: &[TraceEvent],
    tid: u32,
    start_ns: u64,
    end_ns: u64,
    names: &KnownNames,
) -> Vec<LatenessPart> {
    sum_window(
        &timeline(events, tid, start_ns, end_ns, names),
        start_ns,
        end_ns,
    )
}

/// Where thread `tid`'s time went over [`start_ns`, `end_ns`], in time order. `events` are every
/// traced CPU's events in time order, from some time before `start_ns` (so the thread's state at
/// the start is known: one pass over a whole run serves every window of it) to `end_ns` or later.
pub fn timeline(
    events: &[TraceEvent],
    tid: u32,
    start_ns: u64,
    end_ns: u64,
    names: &KnownNames,
) -> Vec<TimedPart> {
    let mut replay = Replay {
        tid: tid as i32,
        silent: silent_stretches(events),
        names,
        cpus: BTreeMap::new(),
        target: TargetState::Unknown,
        target_prio: None,
        tally: Tally::default(),
    };
    let mut cursor = start_ns;
    for event in events {
        let time = event.timestamp_ns;
        if time > start_ns {
            let to = time.min(end_ns);
            replay.settle(cursor, to);
            cursor = cursor.max(to);
        }
        if time >= end_ns {
            break;
        }
        replay.apply(event);
    }
    replay.settle(cursor, end_ns);
    replay.tally.timeline
}

/// One thread's timeline being replayed from the trace: every CPU's state, the thread's, and
/// the parts tallied so far.
struct Replay<'a> {
    /// The thread followed.
    tid: i32,
    /// Per CPU, the stretches it was busy but silent ([`silent_stretches`]).
    silent: BTreeMap<u32, Vec<(u64, u64)>>,
    names: &'a KnownNames,
    cpus: BTreeMap<u32, CpuState>,
    target: TargetState,
    /// The thread's kernel priority, once an event shows it.
    target_prio: Option<i32>,
    tally: Tally,
}

impl Replay<'_> {
    /// The name of `pid`: the one rtlab knows, else the traced comm.
    fn name_of(&self, pid: i32, comm: &str) -> String {
        self.names
            .get(&(pid as u32))
            .map_or_else(|| comm.to_owned(), |known| known.name.clone())
    }

    /// The kernel priority of `pid`: the one rtlab knows, else the traced one.
    fn prio_of(&self, pid: i32, traced: i32) -> i32 {
        self.names
            .get(&(pid as u32))
            .and_then(|known| known.kernel_prio)
            .unwrap_or(traced)
    }

    /// Tallies [`from`, `to`] to what the thread's state and its CPU's say it was doing.
    fn settle(&mut self, from: u64, to: u64) {
        if to <= from {
            return;
        }
        let duration = to - from;
        let cpu = match self.target {
            TargetState::Running(cpu) | TargetState::Runnable(cpu) => cpu,
            TargetState::Blocked => {
                self.tally.add(
                    from,
                    LatenessKind::Waiting,
                    "asleep".into(),
                    None,
                    None,
                    duration,
                );
                return;
            }
            TargetState::Unknown => {
                self.tally.add(
                    from,
                    LatenessKind::Unseen,
                    "not in the trace".into(),
                    None,
                    None,
                    duration,
                );
                return;
            }
        };
        let vanished = overlap(from, to, self.silent.get(&cpu)).min(duration);
        self.tally.add(
            from,
            LatenessKind::Vanished,
            "vanished".into(),
            None,
            Some(format!(
                "CPU {cpu} busy with no trace event for more than {} ms: hypervisor or firmware",
                SILENCE_NS / 1_000_000
            )),
            vanished,
        );
        let duration = duration - vanished;
        let from = from + vanished;
        let state = self.cpus.get(&cpu).cloned().unwrap_or_default();
        if let Some(context) = state.contexts.last() {
            self.tally.add(
                from,
                context.kind,
                context.name.clone(),
                None,
                None,
                duration,
            );
            return;
        }
        if matches!(self.target, TargetState::Running(_)) {
            self.tally.add(
                from,
                LatenessKind::Ran,
                "own work".into(),
                None,
                None,
                duration,
            );
            return;
        }
        self.settle_runnable(from, duration, state.running.as_ref());
    }

    /// Tallies time the thread was runnable but not running on a CPU in no interrupt: to the
    /// task that ran instead when it outranks the thread (or the thread's priority is unknown),
    /// else to throttling.
    fn settle_runnable(&mut self, from: u64, duration: u64, running: Option<&RunningTask>) {
        let target_prio = self.target_prio;
        match (running, target_prio) {
            (Some(task), Some(own)) if task.pid != 0 && task.kernel_prio <= own => {
                let name = self.name_of(task.pid, &task.comm);
                self.tally.add(
                    from,
                    LatenessKind::Task,
                    name,
                    Some(task.pid as u32),
                    Some(format!(
                        "{}, {}",
                        rtlab_explain::describe_prio(task.kernel_prio),
                        if task.kernel_prio < own {
                            "outranks it"
                        } else {
                            "same priority"
                        }
                    )),
                    duration,
                )
            }
            (Some(task), _) if task.pid != 0 && target_prio.is_none() => {
                let name = self.name_of(task.pid, &task.comm);
                self.tally.add(
                    from,
                    LatenessKind::Task,
                    name,
                    Some(task.pid as u32),
                    Some(rtlab_explain::describe_prio(task.kernel_prio)),
                    duration,
                )
            }
            (running, own) => {
                let what = match running {
                    Some(task) if task.pid != 0 => {
                        format!(
                            "{} ({}) ran",
                            self.name_of(task.pid, &task.comm),
                            rtlab_explain::describe_prio(task.kernel_prio)
                        )
                    }
                    _ => "the CPU idled".to_owned(),
                };
                let name = match own {
                    Some(prio) if prio < 0 => "SCHED_DEADLINE budget used up",
                    Some(prio) if prio < 100 => "RT throttling or the fair server",
                    _ => "throttled",
                };
                self.tally.add(
                    from,
                    LatenessKind::Throttled,
                    name.into(),
                    None,
                    Some(format!("runnable, yet {what}")),
                    duration,
                );
            }
        }
    }

    /// Updates the CPU's and the thread's state with one event.
    fn apply(&mut self, event: &TraceEvent) {
        let tid = self.tid;
        if let EventKind::Switch {
            next_pid,
            next_comm,
            next_prio,
            ..
        } = &event.kind
        {
            // Resolved before the CPU's state is borrowed below.
            let kernel_prio = self.prio_of(*next_pid, *next_prio);
            self.cpus.entry(event.cpu).or_default().running = Some(RunningTask {
                pid: *next_pid,
                comm: next_comm.to_string(),
                kernel_prio,
            });
        }
        let cpu = self.cpus.entry(event.cpu).or_default();
        match &event.kind {
            EventKind::Switch {
                prev_pid,
                prev_state,
                prev_prio,
                next_pid,
                next_prio,
                ..
            } => {
                cpu.contexts.clear();
                if *next_pid == tid {
                    self.target = TargetState::Running(event.cpu);
                    self.target_prio = Some(*next_prio);
                } else if *prev_pid == tid {
                    self.target_prio = Some(*prev_prio);
                    // TASK_RUNNING (0) when preempted or throttled; a sleep state otherwise.
                    self.target = if *prev_state == 0 {
                        TargetState::Runnable(event.cpu)
                    } else {
                        TargetState::Blocked
                    };
                }
            }
            EventKind::Waking {
                pid,
                prio,
                target_cpu,
                ..
            }
            | EventKind::Wakeup {
                pid,
                prio,
                target_cpu,
                ..
            } if *pid == tid => {
                self.target_prio = Some(*prio);
                if !matches!(self.target, TargetState::Running(_)) {
                    self.target = TargetState::Runnable((*target_cpu).max(0) as u32);
                }
            }
            EventKind::Migrate { pid, dest_cpu, .. } if *pid == tid => {
                if let TargetState::Runnable(_) = self.target {
                    self.target = TargetState::Runnable((*dest_cpu).max(0) as u32);
                }
            }
            EventKind::IrqEntry { name, .. } => cpu.contexts.push(InterruptContext {
                kind: LatenessKind::Irq,
                name: format!("irq {name}"),
            }),
            EventKind::VectorEntry { name } => cpu.contexts.push(InterruptContext {
                kind: LatenessKind::Irq,
                name: (*name).to_owned(),
            }),
            EventKind::SoftirqEntry { vector } => cpu.contexts.push(InterruptContext {
                kind: LatenessKind::Softirq,
                name: rtlab_explain::event::SOFTIRQ_NAMES
                    .get(*vector as usize)
                    .map_or_else(|| format!("softirq {vector}"), |name| (*name).to_owned()),
            }),
            EventKind::IrqExit { .. }
            | EventKind::VectorExit { .. }
            | EventKind::SoftirqExit { .. } => {
                cpu.contexts.pop();
            }
            _ => {}
        }
    }
}

/// The largest part that kept a thread from its work, over the accounts of an event.
pub fn main_cause(accounts: &[ThreadAccount]) -> Option<(&ThreadAccount, &LatenessPart)> {
    accounts
        .iter()
        .flat_map(|account| account.parts.iter().map(move |part| (account, part)))
        .filter(|(_, part)| part.kind.is_cause())
        .max_by_key(|(_, part)| part.ns)
}

/// The cause in words: `rtlab-competitor fifo:50@1 (RT priority 50, outranks it) took 9.8 ms of
/// producer's 40.0 ms`.
pub fn cause_sentence(accounts: &[ThreadAccount], window_ns: u64) -> (String, LatenessKind) {
    let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
    match main_cause(accounts) {
        Some((account, part)) => {
            let what = match part.kind {
                LatenessKind::Task => format!(
                    "{}{} ran instead",
                    part.name,
                    part.detail
                        .as_deref()
                        .map_or(String::new(), |detail| format!(" ({detail})"))
                ),
                LatenessKind::Throttled => format!(
                    "throttled: {}{}",
                    part.name,
                    part.detail
                        .as_deref()
                        .map_or(String::new(), |detail| format!(" ({detail})"))
                ),
                LatenessKind::Vanished => "the time vanished (hypervisor or firmware)".to_owned(),
                LatenessKind::Unseen => "not seen in the trace".to_owned(),
                _ => part.name.clone(),
            };
            (
                format!(
                    "{what}: {} of {}'s {}",
                    ms(part.ns),
                    account.thread,
                    ms(window_ns)
                ),
                part.kind,
            )
        }
        None => (
            "nothing kept the threads from the CPU: they ran or slept (a dependency or the model)"
                .to_owned(),
            LatenessKind::Waiting,
        ),
    }
}

/// How many underruns and deadline misses are explained (the first ones).
pub const EXPLAINED_KEPT: usize = 200;

/// The run's recording: the tracefs recorder over every online CPU for the whole run, the
/// machine's steal time sampled beside it, and the names of the tids it will meet.
pub struct Tracer {
    recorder: rtlab_explain::Recorder,
    steal: Vec<StealSample>,
    names: KnownNames,
}

/// The machine's steal time, summed over CPUs, read at one moment.
struct StealSample {
    at_ns: u64,
    steal_ns: u64,
}

impl Tracer {
    /// Starts recording (root and tracefs needed). Events are kept for the whole run.
    pub fn start(duration: rtlab_core::Nanos) -> Result<Tracer, rtlab_explain::TraceError> {
        let cpus = rtlab_sys::cpu::online_cpus()?;
        let recorder = rtlab_explain::Recorder::start(&rtlab_explain::RecorderConfig {
            cpus,
            buffer_size_kb: 8192,
            retention: std::time::Duration::from_nanos(duration.0 + 10_000_000_000),
            max_events_per_cpu: 4_000_000,
            stack_period_ns: None,
            events: rtlab_explain::EventSet::Full,
        })?;
        let mut tracer = Tracer {
            recorder,
            steal: Vec::new(),
            names: KnownNames::new(),
        };
        tracer.sample_steal();
        Ok(tracer)
    }

    fn sample_steal(&mut self) {
        if let Ok(times) = rtlab_sys::proc_stat::cpu_times() {
            let steal = times.values().map(|cpu| cpu.steal_ns).sum();
            self.steal.push(StealSample {
                at_ns: rtlab_sys::clock::monotonic_ns(),
                steal_ns: steal,
            });
        }
    }

    /// Reads the rings (call every few tens of ms while the run lasts).
    pub fn poll(&mut self) {
        let _ = self.recorder.poll(1024);
        self.sample_steal();
    }

    /// Names this process's competitor threads (`rtlab-competitor-…` is cut to 15 characters
    /// in the trace) by their policy, once they run.
    pub fn name_competitors(&mut self) {
        let Ok(tids) = rtlab_sys::sched::process_thread_ids(std::process::id()) else {
            return;
        };
        for tid in tids {
            let Ok(comm) = rtlab_sys::proc_thread::thread_comm(tid) else {
                continue;
            };
            if comm.trim().starts_with("rtlab-competito") {
                let policy = rtlab_sys::sched::thread_policy(tid).ok();
                let label = policy.map_or_else(String::new, |policy| {
                    format!("{} {}", policy.name(), policy.priority_or_nice())
                });
                self.names.insert(
                    tid,
                    KnownName {
                        name: format!("competitor[{tid}] {label}").trim().to_owned(),
                        kernel_prio: policy.map(kernel_prio),
                    },
                );
            }
        }
    }

    /// Steal time counted between the samples around [start, end].
    fn steal_between(&self, start_ns: u64, end_ns: u64) -> Option<u64> {
        let before = self
            .steal
            .iter()
            .rev()
            .find(|sample| sample.at_ns <= start_ns)?;
        let after = self.steal.iter().find(|sample| sample.at_ns >= end_ns)?;
        Some(after.steal_ns.saturating_sub(before.steal_ns))
    }

    /// Every traced CPU's events over [start, end], merged in time order.
    fn events(&self, start_ns: u64, end_ns: u64) -> (Vec<TraceEvent>, bool) {
        let mut events = Vec::new();
        let mut lost = false;
        for cpu in rtlab_sys::cpu::online_cpus().unwrap_or_default() {
            if let Some(window) = self.recorder.window(cpu) {
                events.extend(window.range(start_ns, end_ns));
                lost |= window.lost_between(start_ns, end_ns);
            }
        }
        events.sort_by_key(|event| event.timestamp_ns);
        (events, lost)
    }

    /// After the run: drains the rings and explains the first underruns of every device and
    /// deadline misses of every thread. Returns them and the warnings (lost events).
    pub fn explain_run(
        &mut self,
        workload: &crate::Workload,
        threads: &[crate::results::ThreadResult],
        devices: &[crate::results::DeviceResult],
        start_ns: u64,
    ) -> (Vec<rtlab_core::ExplainedEvent>, Vec<String>) {
        self.drain_and_name(workload, threads, devices);
        // One pass per thread over the whole recording: its state is known at every window.
        let (events, any_lost) = self.events(0, u64::MAX);
        let mut accounts = Accounts {
            first_ns: events.first().map_or(start_ns, |event| event.timestamp_ns),
            last_ns: events.last().map_or(start_ns, |event| event.timestamp_ns),
            events: &events,
            names: &self.names,
            timelines: BTreeMap::new(),
        };
        let mut explained = Vec::new();
        for device in devices {
            self.explain_underruns(
                workload,
                threads,
                device,
                start_ns,
                &mut accounts,
                &mut explained,
            );
        }
        for thread in threads {
            self.explain_deadline_misses(workload, thread, start_ns, &mut accounts, &mut explained);
        }
        let mut warnings = Vec::new();
        let stats = self.recorder.stats();
        if any_lost || stats.lost_events > 0 {
            warnings.push(format!(
                "--explain: the trace lost {} events; parts of some windows are 'unseen'",
                stats.lost_events
            ));
        }
        warnings.extend(self.recorder.warnings().iter().cloned());
        (explained, warnings)
    }

    /// Drains the rings, takes a last steal sample and names the run's threads and devices.
    fn drain_and_name(
        &mut self,
        workload: &crate::Workload,
        threads: &[crate::results::ThreadResult],
        devices: &[crate::results::DeviceResult],
    ) {
        for _ in 0..64 {
            match self.recorder.poll(4096) {
                Ok(outcome) if !outcome.caught_up => continue,
                _ => break,
            }
        }
        self.sample_steal();
        for (thread, spec) in threads.iter().zip(&workload.threads) {
            let prio = match spec.reserve {
                Some(_) => None,
                None => Some(kernel_prio(spec.policy)),
            };
            self.names.insert(
                thread.tid,
                KnownName {
                    name: spec.name.clone(),
                    kernel_prio: prio,
                },
            );
        }
        for device in devices {
            self.names.insert(
                device.tid,
                KnownName {
                    name: format!("device {}", device.name),
                    kernel_prio: None,
                },
            );
        }
    }

    /// Explains the first underruns of `device` (until [`EXPLAINED_KEPT`] are explained in all).
    fn explain_underruns(
        &self,
        workload: &crate::Workload,
        threads: &[crate::results::ThreadResult],
        device: &crate::results::DeviceResult,
        start_ns: u64,
        accounts: &mut Accounts<'_>,
        explained: &mut Vec<rtlab_core::ExplainedEvent>,
    ) {
        let Some(ring) = workload
            .rings
            .iter()
            .position(|ring| ring.name == device.name)
        else {
            return;
        };
        let chain = feeding_threads(workload, ring);
        let window_ns = device.buffer_period.0 * u64::from(device.buffers.max(1));
        for (index, event) in device.underrun_events.iter().enumerate() {
            if explained.len() >= EXPLAINED_KEPT {
                break;
            }
            let end = start_ns + event.at_ns;
            let start = end.saturating_sub(window_ns).max(start_ns);
            let mut chain_accounts: Vec<ThreadAccount> = chain
                .iter()
                .filter_map(|&thread| threads.get(thread))
                .map(|thread| accounts.account(&thread.name, thread.tid, start, end))
                .collect();
            chain_accounts.sort_by_key(|account| std::cmp::Reverse(held_ns(account)));
            let device_late_ns = device.underrun_device_late_ns.get(index).copied();
            let (cause, cause_kind) = underrun_cause(
                device,
                start,
                end,
                device_late_ns,
                accounts,
                &mut chain_accounts,
            );
            explained.push(rtlab_core::ExplainedEvent {
                kind: "underrun".into(),
                source: device.name.clone(),
                at_ns: event.at_ns,
                window_start_ns: start - start_ns,
                window_ns: end - start,
                accounts: chain_accounts,
                device_late_ns,
                steal_ns: self.steal_between(start, end),
                cause,
                cause_kind,
            });
        }
    }

    /// Explains the first deadline misses of `thread` (until [`EXPLAINED_KEPT`] are explained
    /// in all).
    fn explain_deadline_misses(
        &self,
        workload: &crate::Workload,
        thread: &crate::results::ThreadResult,
        start_ns: u64,
        accounts: &mut Accounts<'_>,
        explained: &mut Vec<rtlab_core::ExplainedEvent>,
    ) {
        for event in &thread.deadline_miss_events {
            if explained.len() >= EXPLAINED_KEPT {
                break;
            }
            let Some(spec) = workload
                .threads
                .iter()
                .find(|spec| spec.name == thread.name)
            else {
                continue;
            };
            let Some(deadline) = spec.effective_deadline() else {
                continue;
            };
            let start = start_ns + event.at_ns;
            let end = start + deadline.0 + event.late_ns.unwrap_or(0);
            let thread_accounts = vec![accounts.account(&thread.name, thread.tid, start, end)];
            let (cause, cause_kind) = cause_sentence(&thread_accounts, end - start);
            explained.push(rtlab_core::ExplainedEvent {
                kind: "deadline_miss".into(),
                source: thread.name.clone(),
                at_ns: event.at_ns,
                window_start_ns: event.at_ns,
                window_ns: end - start,
                accounts: thread_accounts,
                device_late_ns: None,
                steal_ns: self.steal_between(start, end),
                cause,
                cause_kind,
            });
        }
    }
}

/// Each thread's timeline over the whole recording, built the first time a window of it is
/// asked for.
struct Accounts<'a> {
    events: &'a [TraceEvent],
    first_ns: u64,
    last_ns: u64,
    names: &'a KnownNames,
    timelines: BTreeMap<u32, Vec<TimedPart>>,
}

impl Accounts<'_> {
    /// Where thread `tid` (`name` in the account) spent [`start`, `end`].
    fn account(&mut self, name: &str, tid: u32, start: u64, end: u64) -> ThreadAccount {
        let (events, first_ns, last_ns, names) =
            (self.events, self.first_ns, self.last_ns, self.names);
        let timeline = self
            .timelines
            .entry(tid)
            .or_insert_with(|| timeline(events, tid, first_ns, last_ns, names));
        ThreadAccount {
            thread: name.to_owned(),
            tid,
            parts: sum_window(timeline, start, end),
        }
    }
}

/// The time an account charges to causes (not to running or sleeping).
fn held_ns(account: &ThreadAccount) -> u64 {
    account
        .parts
        .iter()
        .filter(|part| part.kind.is_cause())
        .map(|part| part.ns)
        .sum()
}

/// The cause of one underrun over [`start`, `end`], with the device thread's own account added
/// to `chain_accounts` when it was held.
fn underrun_cause(
    device: &crate::results::DeviceResult,
    start: u64,
    end: u64,
    device_late_ns: Option<u64>,
    accounts: &mut Accounts<'_>,
    chain_accounts: &mut Vec<ThreadAccount>,
) -> (String, LatenessKind) {
    match device_late_ns.filter(|late| *late >= device.buffer_period.0) {
        // The device thread itself was held past a period (a sound card is not):
        // its own account says by what.
        Some(late) => {
            let account = accounts.account(
                &format!("device {}", device.name),
                device.tid,
                end,
                end + late,
            );
            let (cause, kind) = cause_sentence(std::slice::from_ref(&account), late);
            chain_accounts.insert(0, account);
            (
                format!(
                    "the device thread took the buffer {:.1} ms late: {cause}",
                    late as f64 / 1e6
                ),
                if kind.is_cause() {
                    kind
                } else {
                    LatenessKind::Unseen
                },
            )
        }
        // The device thread held earlier in the window woke the producer late
        // (a sound card's interrupt is not held): its account stands beside the
        // chain's, so such a hold is named rather than "nothing".
        None => {
            let device_account = accounts.account(
                &format!("device {}", device.name),
                device.tid,
                start,
                end + device_late_ns.unwrap_or(0),
            );
            let held: u64 = held_ns(&device_account);
            if held > 0 {
                chain_accounts.push(device_account);
            }
            cause_sentence(chain_accounts, end - start)
        }
    }
}

/// The threads whose lateness can empty `ring`: its producer, the threads that feed that
/// producer's input ring, and their wakers, nearest first (at most 6).
pub fn feeding_threads(workload: &crate::Workload, ring: usize) -> Vec<usize> {
    let mut chain: Vec<usize> = Vec::new();
    let mut rings = vec![ring];
    while let Some(ring) = rings.pop() {
        let Some(producer) = workload
            .threads
            .iter()
            .position(|thread| thread.produces == Some(ring))
        else {
            continue;
        };
        let mut next = vec![producer];
        while let Some(thread) = next.pop() {
            if chain.contains(&thread) || chain.len() >= 6 {
                continue;
            }
            chain.push(thread);
            if let crate::model::Trigger::WokenBy(waker) = workload.threads[thread].trigger {
                next.push(waker);
            }
            if let Some(input) = workload.threads[thread].consumes {
                rings.push(input);
            }
        }
    }
    chain
}

/// The explained underruns alone (the study prints its glitches, not the UI thread's misses).
pub fn underruns_only(explained: &[rtlab_core::ExplainedEvent]) -> Vec<rtlab_core::ExplainedEvent> {
    explained
        .iter()
        .filter(|event| event.kind == "underrun")
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_explain::Comm;

    fn switch(
        time: u64,
        cpu: u32,
        prev: i32,
        prev_state: i64,
        next: i32,
        next_prio: i32,
        comm: &str,
    ) -> TraceEvent {
        TraceEvent {
            timestamp_ns: time,
            cpu,
            pid: prev,
            kind: EventKind::Switch {
                prev_comm: Comm::new("prev"),
                prev_pid: prev,
                prev_prio: if prev == 7 { 89 } else { 120 },
                prev_state,
                next_comm: Comm::new(comm),
                next_pid: next,
                next_prio,
            },
        }
    }

    #[test]
    fn a_preempted_thread_is_charged_to_the_task_that_ran() {
        // Thread 7 (FIFO 10, prio 89) runs, is preempted at 2 ms by pid 9 (FIFO 50, prio 49)
        // until 8 ms, then runs until 9 ms and sleeps.
        let events = vec![
            switch(0, 1, 0, 0, 7, 89, "producer"),
            switch(2_000_000, 1, 7, 0, 9, 49, "rtlab-competito"),
            switch(8_000_000, 1, 9, 0, 7, 89, "producer"),
            switch(9_000_000, 1, 7, 1, 0, 120, "swapper/1"),
        ];
        let names = KnownNames::from([(
            9,
            KnownName {
                name: "competitor fifo:50@1".to_owned(),
                kernel_prio: Some(49),
            },
        )]);
        let parts = account(&events, 7, 1_000_000, 10_000_000, &names);
        let total: u64 = parts.iter().map(|part| part.ns).sum();
        assert_eq!(total, 9_000_000);
        assert_eq!(parts[0].kind, LatenessKind::Task);
        assert_eq!(parts[0].name, "competitor fifo:50@1");
        assert_eq!(parts[0].ns, 6_000_000);
        assert!(parts[0].detail.as_deref().unwrap().contains("outranks"));
        let ran = parts
            .iter()
            .find(|part| part.kind == LatenessKind::Ran)
            .unwrap();
        assert_eq!(ran.ns, 2_000_000);
        let asleep = parts
            .iter()
            .find(|part| part.kind == LatenessKind::Waiting)
            .unwrap();
        assert_eq!(asleep.ns, 1_000_000);
        let account = ThreadAccount {
            thread: "producer".into(),
            tid: 7,
            parts,
        };
        let (sentence, kind) = cause_sentence(std::slice::from_ref(&account), 9_000_000);
        assert_eq!(kind, LatenessKind::Task);
        assert!(sentence.starts_with("competitor fifo:50@1"), "{sentence}");
    }

    #[test]
    fn runnable_while_a_lower_priority_task_runs_is_throttling() {
        // A deadline thread (prio -1) preempted while runnable, then a nice-0 task runs.
        let events = vec![
            switch(0, 0, 0, 0, 7, -1, "producer"),
            TraceEvent {
                timestamp_ns: 1_000_000,
                cpu: 0,
                pid: 7,
                kind: EventKind::Switch {
                    prev_comm: Comm::new("producer"),
                    prev_pid: 7,
                    prev_prio: -1,
                    prev_state: 0,
                    next_comm: Comm::new("cc1"),
                    next_pid: 30,
                    next_prio: 120,
                },
            },
        ];
        let parts = account(&events, 7, 0, 5_000_000, &KnownNames::new());
        assert_eq!(parts[0].kind, LatenessKind::Throttled);
        assert_eq!(parts[0].name, "SCHED_DEADLINE budget used up");
        assert_eq!(parts[0].ns, 4_000_000);
    }

    #[test]
    fn silence_on_a_busy_cpu_is_vanished_time_and_irqs_are_named() {
        let tick = |time: u64, entry: bool| TraceEvent {
            timestamp_ns: time,
            cpu: 0,
            pid: 7,
            kind: if entry {
                EventKind::VectorEntry {
                    name: "local_timer",
                }
            } else {
                EventKind::VectorExit {
                    name: "local_timer",
                }
            },
        };
        let events = vec![
            switch(0, 0, 0, 0, 7, 89, "producer"),
            tick(4_000_000, true),
            tick(4_500_000, false),
            // 40 ms of nothing on a busy CPU.
            tick(44_500_000, true),
            tick(45_000_000, false),
        ];
        let parts = account(&events, 7, 0, 50_000_000, &KnownNames::new());
        let total: u64 = parts.iter().map(|part| part.ns).sum();
        assert_eq!(total, 50_000_000);
        let vanished = parts
            .iter()
            .find(|part| part.kind == LatenessKind::Vanished)
            .unwrap();
        assert_eq!(vanished.ns, 40_000_000 - SILENCE_NS / 2);
        let irq = parts
            .iter()
            .find(|part| part.kind == LatenessKind::Irq)
            .unwrap();
        assert_eq!((irq.name.as_str(), irq.ns), ("local_timer", 1_000_000));
        let account = ThreadAccount {
            thread: "producer".into(),
            tid: 7,
            parts,
        };
        assert_eq!(
            cause_sentence(std::slice::from_ref(&account), 50_000_000).1,
            LatenessKind::Vanished
        );
    }
}
