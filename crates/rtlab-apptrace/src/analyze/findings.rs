//! The end of the pass: the thread table (periods from activation times), hangs with their
//! wait-for cycles, starvation, and late activations with their critical paths.

use super::period::{detect_period, percentile};
use super::report::*;
use super::streaming::{ActivationSummary, ACTIVATIONS_KEPT};
use super::timeline::{SpanState, Timeline};
use super::{Activation, Analyzer, BlockReason, State};
use rtlab_core::header::OutputHeader;
use std::collections::HashMap;

/// Most entries kept in the late-activation and PI-boost lists.
const MAX_LISTED: usize = 200;
/// Most starvation entries kept (worst first): a loaded machine starves many threads at once.
const MAX_STARVATION_LISTED: usize = 2000;

impl Analyzer {
    /// Ends the pass: closes what is still open at the last event and builds the report.
    pub fn finish(
        mut self,
        header: OutputHeader,
        source: SourceInfo,
        lost_events: u64,
    ) -> (TraceReport, Option<Timeline>) {
        let end = self.last_ns;
        let first = self.first_ns.unwrap_or(end);
        let duration = end.saturating_sub(first).max(1);
        // Close the open states.
        let mut tids: Vec<i32> = self.threads.keys().copied().collect();
        tids.sort_unstable();
        let mut ongoing_hangs: Vec<(i32, u64, u64)> = Vec::new();
        for &tid in &tids {
            let state = self.threads[&tid].state;
            match state {
                State::Running { since, .. } => {
                    if let Some(timeline) = &mut self.timeline {
                        timeline.push(tid, since, end, SpanState::Running);
                    }
                    let thread = self.threads.get_mut(&tid).expect("listed");
                    thread.cpu_ns += end - since;
                    if let Some(activation) = &mut thread.current {
                        activation.cpu_ns += end - since;
                    }
                }
                State::Runnable { since } => {
                    let queue_cpu = self.threads[&tid].queue_cpu;
                    let meanwhile =
                        self.meanwhile(tid, queue_cpu, since, end, None, super::SLICES_KEPT);
                    if end - since >= self.config.starve_ns && !self.wait_broken(tid) {
                        self.starvation.push((tid, since, end - since, meanwhile));
                    }
                    if let Some(timeline) = &mut self.timeline {
                        timeline.push(tid, since, end, SpanState::Runnable);
                    }
                }
                State::Blocked {
                    since,
                    reason,
                    uaddr,
                } => {
                    let thread = &self.threads[&tid];
                    let was_active = !thread.activations.is_empty() || thread.cpu_ns > 0;
                    if reason == BlockReason::Futex
                        && end - since >= self.config.hang_ns
                        && was_active
                    {
                        ongoing_hangs.push((tid, since, uaddr));
                    }
                    if let Some(timeline) = &mut self.timeline {
                        let state = match reason {
                            BlockReason::Futex => SpanState::BlockedFutex,
                            BlockReason::Io => SpanState::BlockedIo,
                            BlockReason::Sleep => SpanState::BlockedSleep,
                        };
                        timeline.push(tid, since, end, state);
                    }
                }
                State::Unknown | State::Dead => {}
            }
        }
        let mut rows = Vec::new();
        let mut late = Vec::new();
        let mut late_total = 0u64;
        let mut sorted_tids = tids.clone();
        sorted_tids.sort_unstable();
        for &tid in &sorted_tids {
            if tid <= 0 {
                continue;
            }
            let thread = &self.threads[&tid];
            // Beyond the kept activations, the bounded summaries answer (streaming.rs).
            let overflowed = thread.summary.n_activations as usize > ACTIVATIONS_KEPT;
            let mut activations = thread.activations.clone();
            let completed = activations.len();
            if let Some(current) = thread.current {
                activations.push(Activation { end, ..current });
            }
            if activations.is_empty() && thread.cpu_ns == 0 {
                continue;
            }
            let dominant = thread
                .dominant_waker()
                .map(|waker| (waker, thread.wakers[&waker]));
            let (period, n_activations, mean, p99, max) = if overflowed {
                let summary = &thread.summary;
                (
                    summary.period(dominant.map(|(waker, _)| waker), thread.current.as_ref()),
                    summary.n_activations + u64::from(thread.current.is_some()),
                    summary.cpu.mean(),
                    summary.cpu.percentile(99.0),
                    summary.cpu.max(),
                )
            } else {
                let all_starts: Vec<u64> = activations
                    .iter()
                    .map(|activation| activation.start)
                    .collect();
                let dominant_starts: Vec<u64> = match dominant {
                    Some((waker, _)) => activations
                        .iter()
                        .filter(|activation| activation.waker == waker)
                        .map(|activation| activation.start)
                        .collect(),
                    _ => all_starts.clone(),
                };
                let period = detect_period(&dominant_starts).or_else(|| detect_period(&all_starts));
                let mut cpu: Vec<u64> = thread
                    .activations
                    .iter()
                    .map(|activation| activation.cpu_ns)
                    .collect();
                let mean = if cpu.is_empty() {
                    0
                } else {
                    cpu.iter().sum::<u64>() / cpu.len() as u64
                };
                let p99 = percentile(&mut cpu, 99.0);
                let max = cpu.iter().copied().max().unwrap_or(0);
                (period, activations.len() as u64, mean, p99, max)
            };
            let counted = |map: &HashMap<i32, u64>| -> Vec<Counted> {
                let mut list: Vec<Counted> = map
                    .iter()
                    .map(|(tid, count)| Counted {
                        tid: *tid,
                        name: self.name_of(*tid),
                        count: *count,
                    })
                    .collect();
                list.sort_by(|a, b| b.count.cmp(&a.count).then(a.tid.cmp(&b.tid)));
                list.truncate(5);
                list
            };
            let policy = match thread.policy {
                Some((policy, _)) => policy.name().to_owned(),
                None => crate::model::policy_class_of(thread.prio).to_owned(),
            };
            rows.push(ThreadRow {
                tid,
                name: self.name_of(tid),
                tgid: thread.tgid,
                policy,
                priority: self.user_priority_of(tid),
                kernel_prio: thread.prio,
                target: thread.tgid.is_some(),
                activations: n_activations,
                period_ns: period.map(|(period, _)| period),
                period_jitter_ns: period.map(|(_, jitter)| jitter),
                cpu_per_activation_ns: CpuPerActivation { mean, p99, max },
                cpu_ns: thread.cpu_ns,
                cpu_share: thread.cpu_ns as f64 / duration as f64,
                wakers: counted(&thread.wakers),
                wakes: counted(&thread.wakes),
                blocked_ns: BlockedNs {
                    futex: thread.blocked_ns[BlockReason::Futex as usize],
                    io: thread.blocked_ns[BlockReason::Io as usize],
                    sleep: thread.blocked_ns[BlockReason::Sleep as usize],
                },
            });
            // Late jobs: among the kept activations (judged by the period learnt from them when
            // the thread overflowed), then those found on the way beyond them.
            let mut summary = thread.summary.clone();
            let judged_by = if overflowed {
                summary
                    .finish_jobs()
                    .map(|period| (period, summary_waker(&summary)))
            } else {
                period
                    .zip(dominant)
                    .map(|((period, _), (waker, _))| (period, waker))
            };
            if let Some((period, waker)) = judged_by {
                for job in jobs(&activations[..completed], waker, period) {
                    let response = job.last().map(|last| last.end).unwrap_or(0) - job[0].start;
                    if response <= period {
                        continue;
                    }
                    late_total += 1;
                    if late.len() < MAX_LISTED {
                        late.push(LateActivation {
                            thread: self.thread_ref(tid),
                            at_ns: job[0].start,
                            period_ns: period,
                            response_ns: response,
                            critical_path: self.critical_path(&job),
                        });
                    }
                }
                late_total += summary.late_total;
                for (job, &(at_ns, response_ns)) in summary.late.iter().zip(&summary.late_responses)
                {
                    if late.len() < MAX_LISTED {
                        late.push(LateActivation {
                            thread: self.thread_ref(tid),
                            at_ns,
                            period_ns: period,
                            response_ns,
                            critical_path: self.critical_path(job),
                        });
                    }
                }
            }
        }
        rows.sort_by(|a, b| {
            b.target
                .cmp(&a.target)
                .then(a.kernel_prio.cmp(&b.kernel_prio))
                .then(a.tid.cmp(&b.tid))
        });
        let hangs = self.hangs(&ongoing_hangs);
        let mut starvation: Vec<Starvation> = self
            .starvation
            .iter()
            .map(|(tid, since, waited, meanwhile)| {
                let mut ran: Vec<Ran> = meanwhile
                    .iter()
                    .map(|(other, ns)| Ran {
                        tid: *other,
                        name: self.name_of(*other),
                        ns: *ns,
                    })
                    .collect();
                ran.sort_by_key(|ran| std::cmp::Reverse(ran.ns));
                ran.truncate(5);
                Starvation {
                    thread: self.thread_ref(*tid),
                    since_ns: *since,
                    runnable_ns: *waited,
                    ran,
                }
            })
            .collect();
        starvation.sort_by(|a, b| {
            b.runnable_ns
                .cmp(&a.runnable_ns)
                .then(a.since_ns.cmp(&b.since_ns))
        });
        starvation.truncate(MAX_STARVATION_LISTED);
        let pi_boosts = self
            .pi_boosts
            .iter()
            .take(MAX_LISTED)
            .map(|&(at, owner, by, from, to)| PiBoost {
                at_ns: at,
                owner: self.thread_ref(owner),
                by: self.thread_ref(by),
                from_priority: crate::model::user_priority(from),
                to_priority: crate::model::user_priority(to),
            })
            .collect();
        let mut warnings = Vec::new();
        if !self.saw_futex && !self.futex_recorded {
            warnings.push("the trace has no futex syscall events (syscalls:sys_enter_futex/sys_exit_futex): blocked time is not split into futex and sleep, and neither inversions nor hangs can be found".to_owned());
        }
        if !self.saw_waking {
            warnings.push("the trace has no sched_waking or sched_wakeup events: wakers and activations are unknown".to_owned());
        }
        if !self.switches_filtered {
            for (cpu, state) in self.cpus.iter().enumerate() {
                if state.breaks > 0 {
                    warnings.push(format!(
                        "on CPU {cpu} the trace misses switches: {} switches did not start from the thread the previous one put on the CPU ({} of them from idle); runs and waits of the threads involved stop at those gaps",
                        state.breaks, state.breaks_after_idle
                    ));
                }
            }
        }
        if lost_events > 0 {
            warnings.push(format!("{lost_events} events were lost (a full ring buffer): findings near the gaps may be wrong"));
        }
        if let Some(timeline) = &self.timeline {
            if timeline.dropped > 0 {
                warnings.push(format!(
                    "the timeline keeps the first {} spans; {} later ones are not drawn",
                    timeline.cap, timeline.dropped
                ));
            }
        }
        let report = TraceReport {
            header,
            source,
            first_ns: first,
            last_ns: end,
            duration_ns: end - first,
            n_events: self.n_events,
            lost_events,
            hang_threshold_ns: self.config.hang_ns,
            starve_threshold_ns: self.config.starve_ns,
            threads: rows,
            inversions: std::mem::take(&mut self.inversions),
            pi_boosts,
            hangs,
            starvation,
            late_activations: late,
            late_activations_total: late_total,
            warnings,
        };
        (report, self.timeline.take())
    }

    /// The process of `tid` when the recording read it; otherwise the oldest ancestor the
    /// trace's fork events name (threads and processes alike), or the thread itself.
    fn family_of(&self, tid: i32) -> i32 {
        if let Some(tgid) = self.threads.get(&tid).and_then(|thread| thread.tgid) {
            return tgid;
        }
        let mut current = tid;
        for _ in 0..64 {
            match self.parent_of.get(&current) {
                Some(&parent) if parent > 0 && parent != current => current = parent,
                _ => break,
            }
        }
        current
    }

    fn critical_path(&self, job: &[Activation]) -> Vec<PathStep> {
        let mut steps = Vec::new();
        let by = |tid: i32, ns: u64| Ran {
            tid,
            name: self.name_of(tid),
            ns,
        };
        for (index, activation) in job.iter().enumerate() {
            if index > 0 {
                if let Some(reason) = activation.woke_from {
                    steps.push(PathStep {
                        kind: reason.name().to_owned(),
                        ns: activation.blocked_before_ns,
                        by: Some(by(activation.waker, activation.blocked_before_ns)),
                    });
                }
            }
            if activation.wait_ns > 0 {
                steps.push(PathStep {
                    kind: "cpu".into(),
                    ns: activation.wait_ns,
                    by: (activation.top_holder_ns > 0)
                        .then(|| by(activation.top_holder, activation.top_holder_ns)),
                });
            }
            if activation.irq_ns > 0 {
                steps.push(PathStep {
                    kind: "irq".into(),
                    ns: activation.irq_ns,
                    by: None,
                });
            }
            steps.push(PathStep {
                kind: "run".into(),
                ns: activation.cpu_ns.saturating_sub(activation.irq_ns),
                by: None,
            });
        }
        steps
    }

    /// Hangs: futex waits longer than the threshold (still going at the end, or ended). Waits
    /// that overlap and whose owners (read while recording, or from PI boosts) wait for each
    /// other in a circle are a deadlock; the other waits are grouped by process and overlap.
    fn hangs(&self, ongoing: &[(i32, u64, u64)]) -> Vec<Hang> {
        // (tid, since, until, uaddr)
        let mut waits: Vec<(i32, u64, Option<u64>, u64)> = ongoing
            .iter()
            .map(|&(tid, since, uaddr)| (tid, since, None, uaddr))
            .collect();
        for (tid, thread) in &self.threads {
            for &(since, until, uaddr) in &thread.long_waits {
                waits.push((*tid, since, Some(until), uaddr));
            }
        }
        waits.sort_by_key(|wait| (wait.1, wait.0));
        let owner_of = |wait: &(i32, u64, Option<u64>, u64)| -> Option<i32> {
            let (futex, owner) = *self.owners.get(&wait.0)?;
            (futex == 0 || futex == wait.3).then_some(owner)
        };
        let overlaps = |a: &(i32, u64, Option<u64>, u64), b: &(i32, u64, Option<u64>, u64)| {
            a.1 < b.2.unwrap_or(u64::MAX) && b.1 < a.2.unwrap_or(u64::MAX)
        };
        let hung_thread = |wait: &(i32, u64, Option<u64>, u64)| HungThread {
            tid: wait.0,
            name: self.name_of(wait.0),
            futex: format!("{:#x}", wait.3),
            owner: owner_of(wait),
        };
        let make_hang = |members: &[(i32, u64, Option<u64>, u64)], cycle: bool| Hang {
            since_ns: members.iter().map(|wait| wait.1).max().unwrap_or(0),
            ended_ns: members
                .iter()
                .map(|wait| wait.2)
                .collect::<Option<Vec<u64>>>()
                .and_then(|ends| ends.into_iter().max()),
            cycle,
            threads: members.iter().map(hung_thread).collect(),
        };
        let mut hangs = Vec::new();
        let mut placed = vec![false; waits.len()];
        for start in 0..waits.len() {
            if placed[start] {
                continue;
            }
            // Follow waiter → owner among overlapping waits; a return closes a cycle.
            let mut path = vec![start];
            let mut current = start;
            while let Some(owner) = owner_of(&waits[current]) {
                let next = (0..waits.len()).find(|&index| {
                    !placed[index]
                        && waits[index].0 == owner
                        && overlaps(&waits[index], &waits[current])
                });
                let Some(next) = next else {
                    break;
                };
                if let Some(position) = path.iter().position(|index| *index == next) {
                    let cycle: Vec<usize> = path[position..].to_vec();
                    for index in &cycle {
                        placed[*index] = true;
                    }
                    let members: Vec<_> = cycle.iter().map(|index| waits[*index]).collect();
                    hangs.push(make_hang(&members, true));
                    break;
                }
                path.push(next);
                current = next;
            }
        }
        // The rest: by process, then while they overlap.
        let mut rest: Vec<(i32, Wait)> = waits
            .iter()
            .enumerate()
            .filter(|(index, _)| !placed[*index])
            .map(|(_, wait)| (self.family_of(wait.0), *wait))
            .collect();
        rest.sort_by_key(|(tgid, wait)| (*tgid, wait.1, wait.0));
        let mut group: Vec<(i32, u64, Option<u64>, u64)> = Vec::new();
        let mut group_process = None;
        for (tgid, wait) in rest {
            let joins =
                group_process == Some(tgid) && group.iter().any(|other| overlaps(other, &wait));
            if !joins && !group.is_empty() {
                hangs.push(make_hang(&group, false));
                group.clear();
            }
            group_process = Some(tgid);
            group.push(wait);
        }
        if !group.is_empty() {
            hangs.push(make_hang(&group, false));
        }
        hangs.sort_by(|a, b| b.cycle.cmp(&a.cycle).then(a.since_ns.cmp(&b.since_ns)));
        hangs
    }
}

/// The waker a summary's jobs were grouped by.
fn summary_waker(summary: &ActivationSummary) -> i32 {
    summary.learnt_waker().unwrap_or(0)
}

/// A long futex wait: (tid, since, until, futex address).
type Wait = (i32, u64, Option<u64>, u64);

/// Groups activations into jobs: a job starts with an activation by the thread's usual waker
/// and takes the activations that follow until the next one.
fn jobs(activations: &[Activation], waker: i32, period: u64) -> Vec<Vec<Activation>> {
    let mut jobs: Vec<Vec<Activation>> = Vec::new();
    for activation in activations {
        // A futex wake-up inside the period continues the job (a lock released); anything else
        // (the usual waker, a timer, a sleep) starts the next one.
        let continues = activation.waker != waker
            && activation.woke_from == Some(BlockReason::Futex)
            && jobs
                .last()
                .and_then(|job| job.first())
                .is_some_and(|first| activation.start < first.start + period);
        let starts_job = !continues;
        if starts_job {
            jobs.push(vec![*activation]);
        } else if let Some(job) = jobs.last_mut() {
            job.push(*activation);
        }
    }
    jobs
}
