//! `rtlab trace record` as a library call: one of the two recorders (`recorders.rs`: eBPF,
//! filtered in the kernel, or a tracefs instance), the target's threads followed in /proc
//! (their process, policy and priority become `ThreadInfo` records, and the kernel's filter
//! follows them), the owners of the futexes they hang on read from their memory, and the events
//! written in time order to an rtlab trace file.
//!
//! Memory is bounded: events wait in a reorder buffer only until every ring has been read past
//! them (one poll), and the writer holds one block. A stop request (SIGINT) ends the recording
//! at the next poll with everything read so far written and the trailer saying so.

use crate::file::{FileHeader, FileTrailer, TraceFileWriter};
use crate::model::{futex_op, Event, EventKind, Policy};
pub use crate::record_error::RecordError;
use crate::recorders::Backend;
pub use crate::recorders::RecorderChoice;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Whom to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Pid(u32),
    /// Every process whose name (`/proc/PID/comm`) is this, also those started later.
    Comm(String),
    /// A command started for the recording (and killed if still running at the end).
    Command(Vec<String>),
}

impl Target {
    /// The target `--pid`, `--comm` or the command after `--` names (`--pid` first, then
    /// `--comm`, else the command).
    pub fn from_flags(pid: Option<u32>, comm: Option<&str>, command: &[String]) -> Target {
        match (pid, comm) {
            (Some(pid), _) => Target::Pid(pid),
            (None, Some(name)) => Target::Comm(name.to_owned()),
            (None, None) => Target::Command(command.to_vec()),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Target::Pid(pid) => format!("pid {pid}"),
            Target::Comm(name) => format!("comm {name}"),
            Target::Command(command) => format!("command {}", command.join(" ")),
        }
    }
}

/// Recording settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordConfig {
    pub target: Target,
    /// None: until the target ends or a stop request.
    pub duration: Option<Duration>,
    /// Ring buffer per CPU.
    pub buffer_kb: u32,
    pub poll_interval: Duration,
    /// A target thread blocked on a futex this long has the futex's owner read.
    pub owner_probe_after: Duration,
    /// `--recorder`.
    pub recorder: RecorderChoice,
    /// `--cycle-marker`: the program's own cycle start, probed.
    pub cycle_marker: Option<crate::cycle_marker::CycleMarker>,
    /// `--work-done-marker`: where a thread's cycle work ends, probed at the function's return.
    pub work_done_marker: Option<crate::cycle_marker::CycleMarker>,
}

impl Default for RecordConfig {
    fn default() -> Self {
        RecordConfig {
            target: Target::Pid(0),
            duration: None,
            buffer_kb: 8192,
            poll_interval: Duration::from_millis(100),
            owner_probe_after: Duration::from_millis(200),
            recorder: RecorderChoice::Auto,
            cycle_marker: None,
            work_done_marker: None,
        }
    }
}

pub use rtlab_core::trace_record::{RecordProgress, RecordSummary};

/// A target thread waiting in a futex call.
#[derive(Clone, Copy, Debug)]
struct FutexWait {
    uaddr: u64,
    since: u64,
    probed: bool,
}

struct Targets {
    target: Target,
    child: Option<std::process::Child>,
    /// tid → tgid of every target thread seen.
    threads: HashMap<u32, u32>,
    /// The policy last written for each thread (a thread may change it after it starts).
    policies: HashMap<u32, (Policy, i32)>,
    pids: HashSet<u32>,
}

impl Targets {
    /// Re-reads the target's processes and threads; returns the new threads' info events.
    fn refresh(&mut self, now: u64) -> Vec<Event> {
        match &self.target {
            Target::Pid(pid) => {
                self.pids.insert(*pid);
            }
            Target::Comm(name) => {
                for (pid, tid) in rtlab_sys::proc_thread::threads_named(name).unwrap_or_default() {
                    if pid == tid {
                        self.pids.insert(pid);
                    }
                }
            }
            Target::Command(_) => {}
        }
        let mut events = Vec::new();
        for &pid in &self.pids {
            let Ok(tids) = rtlab_sys::sched::process_thread_ids(pid) else {
                continue;
            };
            for tid in tids {
                self.threads.insert(tid, pid);
                let (policy, priority) = match rtlab_sys::sched::thread_policy(tid) {
                    Ok(policy) => (convert_policy(&policy), policy.priority_or_nice()),
                    Err(_) => continue,
                };
                if self.policies.insert(tid, (policy, priority)) == Some((policy, priority)) {
                    continue;
                }
                events.push(Event {
                    timestamp_ns: now,
                    cpu: 0,
                    kind: EventKind::ThreadInfo {
                        tid: tid as i32,
                        tgid: pid as i32,
                        policy,
                        priority,
                    },
                });
            }
        }
        events
    }

    fn alive(&mut self) -> bool {
        if let Some(child) = &mut self.child {
            return matches!(child.try_wait(), Ok(None));
        }
        match &self.target {
            Target::Pid(pid) => std::path::Path::new(&format!("/proc/{pid}")).exists(),
            // A name may match processes started later: record until stopped.
            _ => true,
        }
    }
}

fn convert_policy(policy: &rtlab_sys::sched::Policy) -> Policy {
    use rtlab_sys::sched::Policy as Sys;
    match policy {
        Sys::Other { .. } => Policy::Other,
        Sys::Fifo { .. } => Policy::Fifo,
        Sys::RoundRobin { .. } => Policy::RoundRobin,
        Sys::Batch { .. } => Policy::Batch,
        Sys::Idle => Policy::Idle,
        Sys::Deadline { .. } => Policy::Deadline,
    }
}

/// Records `config.target` into `output` until the duration passes, the target ends, or `stop`
/// is set; `progress` is called after every poll.
pub fn record<W: Write>(
    config: &RecordConfig,
    output: W,
    mut header: FileHeader,
    stop: &AtomicBool,
    mut progress: impl FnMut(&RecordProgress),
) -> Result<(W, RecordSummary), RecordError> {
    let start_ns = rtlab_sys::clock::monotonic_ns();
    let (mut targets, mut pending) = find_targets(&config.target, start_ns)?;
    let processes: Vec<u32> = targets.pids.iter().copied().collect();
    let (mut recorder, bpf_unavailable) = Backend::start(
        config.recorder,
        config.buffer_kb,
        &targets.threads,
        &processes,
        &config
            .cycle_marker
            .iter()
            .chain(config.work_done_marker.iter())
            .collect::<Vec<_>>(),
    )?;
    header.events = recorder.enabled_events();
    header.recorder = Some(recorder.name().to_owned());
    let mut writer = TraceFileWriter::new(output, &header)?;
    if let Target::Command(command) = &config.target {
        pending.extend(start_command(command, &mut recorder, &mut targets)?);
    }
    let mut watch = Watch::default();
    let mut summary = RecordSummary {
        enabled_events: recorder.enabled_events(),
        removed_stale_instances: recorder.removed_stale_instances(),
        recorder: recorder.name().to_owned(),
        bpf_unavailable,
        ..RecordSummary::default()
    };
    let mut lost_events = 0u64;
    let end_ns = config
        .duration
        .map(|duration| start_ns + duration.as_nanos() as u64);
    let mut last_round = false;
    loop {
        let poll_start = rtlab_sys::clock::monotonic_ns();
        if last_round {
            recorder.stop()?;
        }
        let (lost, read_up_to) = recorder.poll(&mut pending, poll_start)?;
        lost_events += lost;
        watch.follow_futex_waits(&pending);
        let others = watch.other_policies(&pending, &targets);
        pending.extend(others);
        let probe_before = poll_start.saturating_sub(config.owner_probe_after.as_nanos() as u64);
        let owners = watch.probe_owners(&targets, probe_before, poll_start);
        summary.owners_found += owners.len() as u64;
        pending.extend(owners);
        let changed = targets.refresh(poll_start);
        if !changed.is_empty() {
            pending.extend(changed);
            let processes: Vec<u32> = targets.pids.iter().copied().collect();
            recorder.set_targets(&targets.threads, &processes)?;
        }
        write_ready(
            &mut pending,
            read_up_to,
            last_round,
            &mut writer,
            &mut summary,
        )?;
        summary.progress = RecordProgress {
            elapsed_ns: poll_start.saturating_sub(start_ns),
            n_events: writer.n_events(),
            bytes_written: writer.bytes_written(),
            lost_events,
            n_threads: targets.threads.len(),
        };
        progress(&summary.progress);
        if last_round {
            break;
        }
        let interrupted = stop.load(Ordering::SeqCst);
        let timed_out = end_ns.is_some_and(|end| poll_start >= end);
        if interrupted || timed_out || !targets.alive() {
            summary.interrupted = interrupted;
            last_round = true;
            continue;
        }
        let mut sleep = config.poll_interval;
        if let Some(end) = end_ns {
            sleep = sleep.min(Duration::from_nanos(end.saturating_sub(poll_start)));
        }
        recorder.wait(sleep);
    }
    summary.target_pids = end_targets(&mut targets);
    drop(recorder);
    let output = writer.finish(FileTrailer {
        n_events: 0,
        lost_events,
        duration_ns: summary.progress.elapsed_ns,
        interrupted: summary.interrupted,
    })?;
    Ok((output, summary))
}

/// The target's processes and threads at the start, with their info events; an error when a
/// pid or a name names no process (a command is started later, by the recorder).
fn find_targets(target: &Target, start_ns: u64) -> Result<(Targets, Vec<Event>), RecordError> {
    let mut targets = Targets {
        target: target.clone(),
        child: None,
        threads: HashMap::new(),
        policies: HashMap::new(),
        pids: HashSet::new(),
    };
    if let Target::Pid(pid) = target {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(RecordError::NoTarget(format!(
                "process {pid} does not exist"
            )));
        }
    }
    let info_events = targets.refresh(start_ns);
    if let Target::Comm(name) = target {
        if targets.pids.is_empty() {
            return Err(RecordError::NoTarget(format!(
                "no process is named {name:?}"
            )));
        }
    }
    Ok((targets, info_events))
}

/// Starts the target command through the recorder (which follows it from its first
/// instruction) and returns its threads' info events.
fn start_command(
    command: &[String],
    recorder: &mut Backend,
    targets: &mut Targets,
) -> Result<Vec<Event>, RecordError> {
    let (program, arguments) = command
        .split_first()
        .ok_or_else(|| RecordError::NoTarget("the command is empty".into()))?;
    let child = recorder
        .spawn(std::process::Command::new(program).args(arguments))
        .map_err(|error| match error {
            RecordError::SpawnIo(source) => RecordError::Spawn {
                command: command.join(" "),
                source,
            },
            other => other,
        })?;
    targets.pids.insert(child.id());
    targets.child = Some(child);
    let info_events = targets.refresh(rtlab_sys::clock::monotonic_ns());
    let processes: Vec<u32> = targets.pids.iter().copied().collect();
    recorder.set_targets(&targets.threads, &processes)?;
    Ok(info_events)
}

/// What the recording watches in the events as they come: the target's futex waits (to read
/// the owners of long ones) and the other real-time threads whose policy was read.
#[derive(Default)]
struct Watch {
    waits: HashMap<i32, FutexWait>,
    other_policies_read: HashSet<i32>,
}

impl Watch {
    /// Futex waits of the target's threads: begun by a waiting futex call, ended by its return.
    fn follow_futex_waits(&mut self, pending: &[Event]) {
        for event in pending {
            match event.kind {
                EventKind::FutexEnter { tid, uaddr, op, .. } if futex_op::waits(op) => {
                    self.waits.insert(
                        tid,
                        FutexWait {
                            uaddr,
                            since: event.timestamp_ns,
                            probed: false,
                        },
                    );
                }
                EventKind::FutexExit { tid, .. } => {
                    self.waits.remove(&tid);
                }
                _ => {}
            }
        }
    }

    /// The policy of the real-time threads that are not the target's, read once each: a
    /// culprit is then named "qhog0 (SCHED_FIFO 95)", not by the classes its priority implies.
    fn other_policies(&mut self, pending: &[Event], targets: &Targets) -> Vec<Event> {
        let mut others = Vec::new();
        for event in pending {
            let EventKind::Switch {
                prev_tid,
                prev_prio,
                next_tid,
                next_prio,
                ..
            } = event.kind
            else {
                continue;
            };
            for (tid, prio) in [(prev_tid, prev_prio), (next_tid, next_prio)] {
                if tid > 0
                    && prio < 100
                    && !targets.threads.contains_key(&(tid as u32))
                    && self.other_policies_read.insert(tid)
                {
                    if let Ok(policy) = rtlab_sys::sched::thread_policy(tid as u32) {
                        others.push(Event {
                            timestamp_ns: event.timestamp_ns,
                            cpu: event.cpu,
                            kind: EventKind::OtherPolicy {
                                tid,
                                policy: convert_policy(&policy),
                                priority: policy.priority_or_nice(),
                            },
                        });
                    }
                }
            }
        }
        others
    }

    /// The owners of the futexes target threads have waited on since before `probe_before`,
    /// read once per wait from the process's memory, as events stamped `poll_start`.
    fn probe_owners(
        &mut self,
        targets: &Targets,
        probe_before: u64,
        poll_start: u64,
    ) -> Vec<Event> {
        let mut owners = Vec::new();
        for (&tid, wait) in self.waits.iter_mut() {
            if wait.probed || wait.since > probe_before {
                continue;
            }
            wait.probed = true;
            let Some(&tgid) = targets.threads.get(&(tid as u32)) else {
                continue;
            };
            let Ok(words) = rtlab_sys::process_locks::read_lock_words(tgid, wait.uaddr) else {
                continue;
            };
            let siblings: Vec<u32> = targets
                .threads
                .iter()
                .filter(|(_, pid)| **pid == tgid)
                .map(|(tid, _)| *tid)
                .collect();
            if let Some(owner) = rtlab_sys::process_locks::lock_owner(words, &siblings) {
                owners.push(Event {
                    timestamp_ns: poll_start,
                    cpu: 0,
                    kind: EventKind::Owner {
                        waiter: tid,
                        uaddr: wait.uaddr,
                        owner: owner as i32,
                    },
                });
            }
        }
        owners
    }
}

/// Writes the pending events stamped before `read_up_to` (everything there has been read from
/// every ring), or all of them in the last round, in time order; counts the markers.
fn write_ready<W: Write>(
    pending: &mut Vec<Event>,
    read_up_to: u64,
    last_round: bool,
    writer: &mut TraceFileWriter<W>,
    summary: &mut RecordSummary,
) -> Result<(), RecordError> {
    pending.sort_by_key(|event| event.timestamp_ns);
    let ready = if last_round {
        pending.len()
    } else {
        pending.partition_point(|event| event.timestamp_ns < read_up_to)
    };
    for event in pending.drain(..ready) {
        match event.kind {
            EventKind::CycleMarker { .. } => summary.cycle_markers += 1,
            EventKind::WorkDone { .. } => summary.work_done_markers += 1,
            _ => {}
        }
        writer.push(&event)?;
    }
    Ok(())
}

/// Ends a command the recording started, if still running, and returns the target's pids.
fn end_targets(targets: &mut Targets) -> Vec<u32> {
    if let Some(mut child) = targets.child.take() {
        if matches!(child.try_wait(), Ok(None)) {
            let _ = child.kill();
        }
        let _ = child.wait();
    }
    let mut pids: Vec<u32> = targets.pids.iter().copied().collect();
    pids.sort_unstable();
    pids
}
