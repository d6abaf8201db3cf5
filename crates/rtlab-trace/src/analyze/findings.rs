//! The end of the pass: the thread table (periods from activation times), hangs with their
//! wait-for cycles, starvation, and late activations with their critical paths.

use super::period::{detect_period, percentile};
use super::report::*;
use super::streaming::{ActivationSummary, ACTIVATIONS_KEPT};
use super::timeline::{SpanState, Timeline};
use super::xrun_rule::{held_through_its_wakers_cycle, missed_periods, restarted_at_once};
use super::{Activation, Analyzer, BlockReason, State, Thread};
use rtlab_core::header::OutputHeader;
use std::collections::HashMap;

/// Most entries kept in the late-activation and PI-boost lists.
pub const MAX_LISTED: usize = 200;
/// Late activations collected before the earliest [`MAX_LISTED`] are kept.
const MAX_KEPT: usize = 20_000;
/// Threads with a shorter period are not judged late.
const MIN_JUDGED_PERIOD_NS: u64 = 100_000;
/// A `cpu` wait with this much time nothing recorded ran is the hypervisor's.
const HYPERVISOR_MIN_NS: u64 = 100_000;
/// Most starvation entries kept (worst first): a loaded machine starves many threads at once.
const MAX_STARVATION_LISTED: usize = 2000;

/// A thread still blocked on a futex at the end of the trace, long enough to be a hang.
pub(super) struct OngoingHang {
    pub tid: i32,
    pub since: u64,
    pub uaddr: u64,
}

/// The late activations found so far, and the counts of late jobs and missed periods (more
/// than the entries kept).
#[derive(Default)]
struct LateFound {
    entries: Vec<LateActivation>,
    total: u64,
    missed: u64,
}

impl LateFound {
    fn keep(&mut self, entry: LateActivation) {
        if self.entries.len() < MAX_KEPT {
            self.entries.push(entry);
        }
    }
}

/// What judging a thread's lateness needs to know of it.
struct JudgedThread<'a> {
    tid: i32,
    /// The end of the trace (where the open activation stops).
    end: u64,
    /// The completed activations kept.
    activations: &'a [Activation],
    period: Option<(u64, u64)>,
    dominant: Option<i32>,
    /// More activations than are kept: the bounded summaries judge.
    overflowed: bool,
}

/// A thread's period and CPU time per activation and per cycle.
struct ActivationStats {
    period: Option<(u64, u64)>,
    n_activations: u64,
    cpu: CpuPerActivation,
    per_cycle: CpuPerActivation,
}

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
        let mut tids: Vec<i32> = self.threads.keys().copied().collect();
        tids.sort_unstable();
        let ongoing_hangs = self.close_open_states(&tids, end);
        let mut rows = Vec::new();
        let mut late = LateFound::default();
        for &tid in &tids {
            if tid <= 0 {
                continue;
            }
            if let Some(row) = self.thread_row(tid, end, duration, &mut late) {
                rows.push(row);
            }
        }
        rows.sort_by(|a, b| {
            b.target
                .cmp(&a.target)
                .then(a.kernel_prio.cmp(&b.kernel_prio))
                .then(a.tid.cmp(&b.tid))
        });
        // The first ones in time (each thread's were found in two passes).
        // The recorded program's threads first (a tracefs recording has every task's).
        let is_target = |tid: i32| {
            self.threads
                .get(&tid)
                .is_some_and(|thread| thread.tgid.is_some())
        };
        let LateFound {
            entries: mut late_activations,
            total: late_total,
            missed: missed_total,
        } = late;
        late_activations.sort_by(|a, b| {
            is_target(b.thread.tid)
                .cmp(&is_target(a.thread.tid))
                .then(a.at_ns.cmp(&b.at_ns))
                .then(a.thread.tid.cmp(&b.thread.tid))
        });
        late_activations.truncate(MAX_LISTED);
        let hangs = self.hangs(&ongoing_hangs);
        let starvation = self.starvation_list();
        let pi_boosts = self.pi_boost_list();
        let warnings = self.warnings(lost_events);
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
            late_activations,
            late_activations_total: late_total,
            missed_periods_total: missed_total,
            deadline_source: if self.cycles.is_empty() {
                DeadlineSource::Inferred
            } else {
                DeadlineSource::CycleMarker
            },
            cycle_markers: self.main_cycle_markers(),
            warnings,
        };
        (report, self.timeline.take())
    }

    /// Closes each thread's open state at `end`: its run counted, its wait judged as
    /// starvation, its futex wait returned as a hang still going on; and their spans drawn.
    fn close_open_states(&mut self, tids: &[i32], end: u64) -> Vec<OngoingHang> {
        let mut ongoing_hangs = Vec::new();
        for &tid in tids {
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
                        ongoing_hangs.push(OngoingHang { tid, since, uaddr });
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
        ongoing_hangs
    }

    /// `tid`'s row of the thread table (None for a thread that never ran), its late jobs and
    /// missed periods added to `late`.
    fn thread_row(
        &self,
        tid: i32,
        end: u64,
        duration: u64,
        late: &mut LateFound,
    ) -> Option<ThreadRow> {
        let thread = &self.threads[&tid];
        // Beyond the kept activations, the bounded summaries answer (streaming.rs).
        let overflowed = thread.summary.n_activations as usize > ACTIVATIONS_KEPT;
        let mut activations = thread.activations.clone();
        let completed = activations.len();
        if let Some(current) = thread.current {
            activations.push(Activation { end, ..current });
        }
        if activations.is_empty() && thread.cpu_ns == 0 {
            return None;
        }
        let dominant = thread.dominant_waker();
        let stats = if overflowed {
            Self::summary_stats(thread, dominant)
        } else {
            self.activation_stats(thread, &activations, dominant)
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
        let (late_before, missed_before) = (late.total, late.missed);
        let judged = JudgedThread {
            tid,
            end,
            activations: &activations[..completed],
            period: stats.period,
            dominant,
            overflowed,
        };
        let deadline_source = self.judge_late(&judged, late);
        Some(ThreadRow {
            tid,
            name: self.name_of(tid),
            tgid: thread.tgid,
            policy,
            priority: self.user_priority_of(tid),
            kernel_prio: thread.prio,
            target: thread.tgid.is_some(),
            activations: stats.n_activations,
            period_ns: stats.period.map(|(period, _)| period),
            period_jitter_ns: stats.period.map(|(_, jitter)| jitter),
            cpu_per_activation_ns: stats.cpu,
            cpu_per_cycle_ns: stats.per_cycle,
            cpu_ns: thread.cpu_ns,
            cpu_share: thread.cpu_ns as f64 / duration as f64,
            wakers: counted(&thread.wakers),
            wakes: counted(&thread.wakes),
            blocked_ns: BlockedNs {
                futex: thread.blocked_ns[BlockReason::Futex as usize],
                io: thread.blocked_ns[BlockReason::Io as usize],
                sleep: thread.blocked_ns[BlockReason::Sleep as usize],
            },
            late_activations: late.total - late_before,
            missed_periods: late.missed - missed_before,
            deadline_source,
        })
    }

    /// The period and CPU times of a thread with more activations than are kept, from its
    /// bounded summaries.
    fn summary_stats(thread: &Thread, dominant: Option<i32>) -> ActivationStats {
        let summary = &thread.summary;
        let cycles = summary.cycle_cpu();
        ActivationStats {
            period: summary.period(dominant, thread.current.as_ref()),
            n_activations: summary.n_activations + u64::from(thread.current.is_some()),
            cpu: CpuPerActivation {
                mean: summary.cpu.mean(),
                p99: summary.cpu.percentile(99.0),
                max: summary.cpu.max(),
            },
            per_cycle: CpuPerActivation {
                mean: cycles.mean(),
                p99: cycles.percentile(99.0),
                max: cycles.max(),
            },
        }
    }

    /// The period and CPU times of a thread from its kept activations (the open one last).
    fn activation_stats(
        &self,
        thread: &Thread,
        activations: &[Activation],
        dominant: Option<i32>,
    ) -> ActivationStats {
        let all_starts: Vec<u64> = activations
            .iter()
            .map(|activation| activation.start)
            .collect();
        let dominant_starts: Vec<u64> = match dominant {
            Some(waker) => activations
                .iter()
                .filter(|activation| activation.waker == waker)
                .map(|activation| activation.start)
                .collect(),
            _ => all_starts.clone(),
        };
        let period = detect_period(&dominant_starts)
            .or_else(|| detect_period(&all_starts))
            .or_else(|| dominant.and_then(|waker| self.wakers_cycle(waker, &dominant_starts)));
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
        let mut cycles =
            super::cycles::per_cycle(&thread.activations, None, period.map(|(period, _)| period));
        let per_cycle = CpuPerActivation {
            mean: if cycles.is_empty() {
                0
            } else {
                cycles.iter().sum::<u64>() / cycles.len() as u64
            },
            p99: percentile(&mut cycles, 99.0),
            max: cycles.iter().copied().max().unwrap_or(0),
        };
        ActivationStats {
            period,
            n_activations: activations.len() as u64,
            cpu: CpuPerActivation { mean, p99, max },
            per_cycle,
        }
    }

    /// Finds a thread's late jobs and missed periods, and says by what deadline it was
    /// judged (None: not judged).
    fn judge_late(&self, judged: &JudgedThread, late: &mut LateFound) -> Option<DeadlineSource> {
        let thread = &self.threads[&judged.tid];
        // A thread the program's cycle drives (its usual waker hits the cycle markers) is
        // judged by the markers: the program's own deadline (cycle_rule.rs).
        let by_markers = self.cycles.iter().find(|clock| {
            clock.period_ns > 0
                && clock.driven.contains(&judged.tid)
                && judged.dominant == Some(clock.tid)
        });
        if let Some(clock) = by_markers {
            self.judge_by_markers(judged, clock.period_ns, late);
            return Some(DeadlineSource::CycleMarker);
        }
        // Late jobs: among the kept activations (judged by the period learnt from them when
        // the thread overflowed), then those found on the way beyond them.
        let mut summary = thread.summary.clone();
        let judged_by = if judged.overflowed {
            summary
                .finish_jobs()
                .map(|period| (period, summary_waker(&summary)))
        } else {
            judged
                .period
                .zip(judged.dominant)
                .map(|((period, _), waker)| (period, waker))
        };
        // A "period" of microseconds is a busy loop's rhythm, not a deadline.
        let (period, waker) = judged_by.filter(|(period, _)| *period >= MIN_JUDGED_PERIOD_NS)?;
        self.judge_jobs(judged, period, waker, late);
        self.judge_beyond_kept(judged.tid, &summary, period, late);
        Some(DeadlineSource::Inferred)
    }

    /// A thread judged by the program's cycle markers: the late activations its cycle judge
    /// found, and the open one if it already missed a deadline.
    fn judge_by_markers(&self, judged: &JudgedThread, period_ns: u64, late: &mut LateFound) {
        let thread = &self.threads[&judged.tid];
        let judge = &thread.cycle_judge;
        late.total += judge.deadlines_missed;
        late.missed += judge.missed_periods;
        let open = thread
            .current
            .filter(|current| current.cycle_deadlines > 0)
            .map(|current| Activation {
                end: judged.end,
                ..current
            });
        for activation in judge.late.iter().chain(open.iter()) {
            if late.entries.len() < MAX_KEPT {
                let mut entry = self.late_entry(
                    judged.tid,
                    activation.start,
                    period_ns,
                    activation.end.saturating_sub(activation.start),
                    std::slice::from_ref(activation),
                    // Woken after a gap in its waker's rhythm (the cycle itself came
                    // late): the gap, and who held the cycle's thread, come first.
                    activation.gap_ns > 0,
                );
                entry.deadlines_missed = u64::from(activation.cycle_deadlines);
                late.entries.push(entry);
            }
        }
    }

    /// The kept activations' jobs (from one wake-up by `waker` to the next) judged by `period`.
    fn judge_jobs(&self, judged: &JudgedThread, period: u64, waker: i32, late: &mut LateFound) {
        let tid = judged.tid;
        let mut previous: Option<(u64, bool, u64)> = None;
        for job in jobs(judged.activations, waker, period) {
            let response = job.last().map(|last| last.end).unwrap_or(0) - job[0].start;
            let mut is_late = response > period;
            let mut due = job[0].start;
            if restarted_at_once(previous, &job[0], period) {
                late.total += 1;
            }
            if let Some((periods, late_start)) = missed_periods(previous, &job[0], period) {
                late.total += 1;
                late.missed += 1;
                if late.entries.len() < MAX_KEPT {
                    late.entries
                        .push(self.missed_entry(tid, &job[0], period, periods));
                }
                if late_start {
                    is_late = true;
                    due = previous.map_or(due, |(start, _, _)| start + period);
                }
            }
            let end = job.last().map_or(job[0].end, |last| last.end);
            previous = Some((job[0].start, response > period, end));
            if !is_late {
                continue;
            }
            let response = job
                .last()
                .map(|last| last.end)
                .unwrap_or(0)
                .saturating_sub(due);
            late.total += 1 + u64::from(held_through_its_wakers_cycle(&job));
            if late.entries.len() < MAX_KEPT {
                let started_late = due != job[0].start;
                late.entries.push(self.late_entry(
                    tid,
                    job[0].start,
                    period,
                    response,
                    &job,
                    started_late,
                ));
            }
        }
    }

    /// The late jobs and missed periods the bounded summary found beyond the kept activations.
    fn judge_beyond_kept(
        &self,
        tid: i32,
        summary: &ActivationSummary,
        period: u64,
        late: &mut LateFound,
    ) {
        late.total += summary.late_total + summary.missed_total;
        late.missed += summary.missed_total;
        for (job, &(at_ns, response_ns)) in summary.late.iter().zip(&summary.late_responses) {
            late.keep(self.late_entry(tid, at_ns, period, response_ns, job, false));
        }
        for (first, periods, due) in &summary.missed {
            if late.entries.len() < MAX_KEPT {
                late.entries
                    .push(self.missed_entry(tid, first, period, *periods));
                if let Some(due) = due {
                    let response = first.end.saturating_sub(*due);
                    let job = std::slice::from_ref(first);
                    late.entries.push(self.late_entry(
                        tid,
                        first.start,
                        period,
                        response,
                        job,
                        true,
                    ));
                }
            }
        }
    }

    /// The starvation entries, worst first.
    fn starvation_list(&self) -> Vec<Starvation> {
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
        starvation
    }

    /// The first [`MAX_LISTED`] priority-inheritance boosts.
    fn pi_boost_list(&self) -> Vec<PiBoost> {
        self.pi_boosts
            .iter()
            .take(MAX_LISTED)
            .map(|boost| PiBoost {
                at_ns: boost.at,
                owner: self.thread_ref(boost.owner),
                by: self.thread_ref(boost.by),
                from_priority: crate::model::user_priority(boost.from_prio),
                to_priority: crate::model::user_priority(boost.to_prio),
            })
            .collect()
    }

    /// What the trace lacks for the findings to be whole.
    fn warnings(&self, lost_events: u64) -> Vec<String> {
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
        warnings
    }

    /// The clock that drives the recorded program's threads, else the busiest.
    fn main_cycle_markers(&self) -> Option<CycleMarkers> {
        self.cycles
            .iter()
            .max_by_key(|clock| {
                let drives_target = clock.driven.iter().any(|tid| {
                    self.threads
                        .get(tid)
                        .is_some_and(|thread| thread.tgid.is_some())
                });
                (drives_target, clock.n_markers)
            })
            .map(|clock| CycleMarkers {
                n_markers: clock.n_markers,
                thread: self.thread_ref(clock.tid),
                period_ns: (clock.period_ns > 0).then_some(clock.period_ns),
                overruns: clock.overruns,
            })
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

    /// The policy of `tid` as recorded, else the classes its priority implies.
    pub(crate) fn policy_name_of(&self, tid: i32) -> String {
        match self.threads.get(&tid).and_then(|thread| thread.policy) {
            Some((policy, _)) => policy.name().to_owned(),
            None => crate::model::policy_class_of(self.prio_of(tid)).to_owned(),
        }
    }

    fn thread_culprit(&self, tid: i32, ns: u64) -> Culprit {
        Culprit::Thread {
            tid,
            name: self.name_of(tid),
            policy: self.policy_name_of(tid),
            priority: self.user_priority_of(tid),
            ns,
        }
    }

    fn holder(&self, tid: i32) -> Holder {
        Holder {
            tid,
            name: self.name_of(tid),
        }
    }

    fn critical_path(&self, job: &[Activation]) -> Vec<PathStep> {
        let mut steps = Vec::new();
        for (index, activation) in job.iter().enumerate() {
            if index > 0 {
                if let Some(reason) = activation.woke_from {
                    let ns = activation.blocked_before_ns;
                    let mut culprits = Vec::new();
                    if activation.waker > 0 {
                        let who = self.holder(activation.waker);
                        culprits.push(if reason == BlockReason::Futex {
                            Culprit::Lock { holder: who, ns }
                        } else {
                            Culprit::Waker { waker: who, ns }
                        });
                    }
                    steps.push(step(reason.name(), ns, None, culprits));
                }
            }
            if activation.wait_ns > 0 {
                let mut culprits = Vec::new();
                for (holder, ns) in [
                    (activation.top_holder, activation.top_holder_ns),
                    (activation.second_holder, activation.second_holder_ns),
                ] {
                    if ns > 0 {
                        culprits.push(self.thread_culprit(holder, ns));
                    }
                }
                if activation.wait_irq_ns > 0 {
                    culprits.push(irq_culprit(
                        activation.wait_irq_source,
                        activation.wait_irq_ns,
                    ));
                }
                if activation.wait_throttled_ns > 0 {
                    culprits.push(Culprit::Throttled {
                        ns: activation.wait_throttled_ns,
                    });
                }
                if activation.wait_idle_ns >= HYPERVISOR_MIN_NS {
                    culprits.push(Culprit::Hypervisor {
                        ns: activation.wait_idle_ns,
                    });
                }
                if activation.migrated {
                    culprits.push(Culprit::Migration { ns: 0 });
                }
                steps.push(step(
                    "cpu",
                    activation.wait_ns,
                    Some(activation.wait_cpu),
                    culprits,
                ));
            }
            if activation.irq_ns > 0 {
                let source = if activation.irq_source_ns > 0 {
                    activation.irq_source
                } else {
                    super::NO_SOURCE
                };
                steps.push(step(
                    "irq",
                    activation.irq_ns,
                    None,
                    vec![irq_culprit(source, activation.irq_ns)],
                ));
            }
            let mut culprits = Vec::new();
            if activation.vanished_ns >= HYPERVISOR_MIN_NS {
                culprits.push(Culprit::Hypervisor {
                    ns: activation.vanished_ns,
                });
            }
            steps.push(step(
                "run",
                activation.cpu_ns.saturating_sub(activation.irq_ns),
                None,
                culprits,
            ));
        }
        steps
    }

    fn late_entry(
        &self,
        tid: i32,
        at_ns: u64,
        period_ns: u64,
        response_ns: u64,
        job: &[Activation],
        started_late: bool,
    ) -> LateActivation {
        // One that started after its deadline (a gap before it): the gap is its first step.
        let mut critical_path = if started_late {
            self.gap_step(&job[0], period_ns)
        } else {
            Vec::new()
        };
        critical_path.extend(self.critical_path(job));
        let (culprit, explanation) = explain(&critical_path, response_ns);
        LateActivation {
            kind: LateKind::Late,
            thread: self.thread_ref(tid),
            at_ns,
            period_ns,
            response_ns,
            periods: 1,
            deadlines_missed: 1,
            culprit,
            explanation,
            critical_path,
        }
    }

    /// The gap before `next` as a path step: who ran meanwhile (read when it ended).
    fn gap_step(&self, next: &Activation, period_ns: u64) -> Vec<PathStep> {
        let mut culprits = Vec::new();
        if next.gap_holder_ns > 0 {
            culprits.push(self.thread_culprit(next.gap_holder, next.gap_holder_ns));
        }
        if next.gap_idle_ns >= HYPERVISOR_MIN_NS {
            culprits.push(Culprit::Hypervisor {
                ns: next.gap_idle_ns,
            });
        }
        if next.gap_throttled_ns > 0 {
            culprits.push(Culprit::Throttled {
                ns: next.gap_throttled_ns,
            });
        }
        if next.gap_irq_ns > 0 {
            culprits.push(irq_culprit(next.gap_irq_source, next.gap_irq_ns));
        }
        let gap = if next.gap_ns > 0 {
            next.gap_ns
        } else {
            2 * period_ns
        };
        vec![step("missed", gap, None, culprits)]
    }

    /// A gap of `periods` periods without activation before `next` (its first activation after).
    fn missed_entry(
        &self,
        tid: i32,
        next: &Activation,
        period_ns: u64,
        periods: u64,
    ) -> LateActivation {
        let critical_path = self.gap_step(next, period_ns);
        let gap = critical_path[0].ns;
        // A gap's path is one `missed` step: the analysis names who had the CPU meanwhile, if
        // anyone (a wait for the CPU), else nothing.
        let (culprit, explanation) = explain(&critical_path, gap);
        let by = match explanation {
            Explanation::WaitedForCpu { by, .. } => Some(by),
            _ => None,
        };
        let explanation = Explanation::Missed {
            gap_ns: gap,
            periods,
            by,
        };
        LateActivation {
            kind: LateKind::Missed,
            deadlines_missed: 1,
            thread: self.thread_ref(tid),
            at_ns: next.start.saturating_sub(gap.saturating_sub(period_ns)),
            period_ns,
            response_ns: gap,
            periods,
            culprit,
            explanation,
            critical_path,
        }
    }

    /// Hangs: futex waits longer than the threshold (still going at the end, or ended). Waits
    /// that overlap and whose owners (read while recording, or from PI boosts) wait for each
    /// other in a circle are a deadlock; the other waits are grouped by process and overlap.
    fn hangs(&self, ongoing: &[OngoingHang]) -> Vec<Hang> {
        let mut waits: Vec<Wait> = ongoing
            .iter()
            .map(|hang| Wait {
                tid: hang.tid,
                since: hang.since,
                until: None,
                uaddr: hang.uaddr,
            })
            .collect();
        for (tid, thread) in &self.threads {
            for wait in &thread.long_waits {
                waits.push(Wait {
                    tid: *tid,
                    since: wait.since,
                    until: Some(wait.until),
                    uaddr: wait.uaddr,
                });
            }
        }
        waits.sort_by_key(|wait| (wait.since, wait.tid));
        let owner_of = |wait: &Wait| -> Option<i32> {
            let (futex, owner) = *self.owners.get(&wait.tid)?;
            (futex == 0 || futex == wait.uaddr).then_some(owner)
        };
        let overlaps = |a: &Wait, b: &Wait| {
            a.since < b.until.unwrap_or(u64::MAX) && b.since < a.until.unwrap_or(u64::MAX)
        };
        let hung_thread = |wait: &Wait| HungThread {
            tid: wait.tid,
            name: self.name_of(wait.tid),
            futex: format!("{:#x}", wait.uaddr),
            owner: owner_of(wait),
        };
        let make_hang = |members: &[Wait], cycle: bool| Hang {
            since_ns: members.iter().map(|wait| wait.since).max().unwrap_or(0),
            ended_ns: members
                .iter()
                .map(|wait| wait.until)
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
                        && waits[index].tid == owner
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
            .map(|(_, wait)| (self.family_of(wait.tid), *wait))
            .collect();
        rest.sort_by_key(|(tgid, wait)| (*tgid, wait.since, wait.tid));
        let mut group: Vec<Wait> = Vec::new();
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

/// A path step with its culprits sorted (largest first) and the first as `by`.
fn step(kind: &str, ns: u64, cpu: Option<u32>, mut culprits: Vec<Culprit>) -> PathStep {
    culprits.sort_by_key(|culprit| std::cmp::Reverse(culprit.ns()));
    PathStep {
        kind: kind.to_owned(),
        ns,
        cpu,
        by: culprits.first().cloned(),
        culprits,
    }
}

fn irq_culprit(source: i32, ns: u64) -> Culprit {
    if source == super::NO_SOURCE {
        return Culprit::Irq {
            name: "interrupts".to_owned(),
            ns,
        };
    }
    let (name, soft) = super::irq_source_name(source);
    if soft {
        Culprit::Softirq { name, ns }
    } else {
        Culprit::Irq { name, ns }
    }
}

/// The culprit that took the most time over a path (the same one in several steps summed), and
/// which reading of the path tells it (rtlab-render words it).
pub(crate) fn explain(path: &[PathStep], response_ns: u64) -> (Option<Culprit>, Explanation) {
    let mut totals: Vec<(Culprit, u64, usize)> = Vec::new();
    for (index, step) in path.iter().enumerate() {
        for culprit in &step.culprits {
            match totals
                .iter_mut()
                .find(|(known, _, _)| known.same_as(culprit))
            {
                Some(entry) => entry.1 += culprit.ns(),
                None => totals.push((culprit.clone(), culprit.ns(), index)),
            }
        }
    }
    let own: u64 = path
        .iter()
        .filter(|step| step.kind == "run")
        .map(|step| {
            let vanished: u64 = step.culprits.iter().map(Culprit::ns).sum();
            step.ns.saturating_sub(vanished)
        })
        .sum();
    let best = totals
        .into_iter()
        .filter(|(_, ns, _)| *ns > 0)
        .max_by_key(|(_, ns, index)| (*ns, std::cmp::Reverse(*index)));
    let Some((culprit, total, index)) = best else {
        return (
            None,
            Explanation::OwnWork {
                own_ns: own,
                response_ns,
            },
        );
    };
    if own > total {
        let explanation = Explanation::OwnWorkThen {
            own_ns: own,
            response_ns,
            then: culprit.clone(),
            then_ns: total,
        };
        return (Some(culprit), explanation);
    }
    let step = &path[index];
    let by = culprit.clone();
    let explanation = match (step.kind.as_str(), &culprit) {
        ("cpu" | "missed", _) => Explanation::WaitedForCpu {
            ns: step.ns,
            cpu: step.cpu,
            by,
        },
        ("irq", _) => Explanation::Interrupts { ns: step.ns, by },
        ("run", Culprit::Hypervisor { ns }) => Explanation::HypervisorTook {
            on_cpu_ns: step.ns,
            hypervisor_ns: *ns,
        },
        ("futex", _) => Explanation::BlockedOnFutex { ns: step.ns, by },
        _ => Explanation::BlockedUntil {
            ns: step.ns,
            step: step.kind.clone(),
            by,
        },
    };
    (Some(culprit), explanation)
}

impl Analyzer {
    /// The period of `waker`'s own activations, when the starts a thread's waker caused
    /// (`starts`) fall on that rhythm — at least 60 % of their intervals within 10 % of a
    /// whole number of its periods. A thread that its program's clock (JACK's driver thread)
    /// activates in only some of the cycles has the clock's period: the cycles it missed
    /// count as `missed`.
    fn wakers_cycle(&self, waker: i32, starts: &[u64]) -> Option<(u64, u64)> {
        let clock = self.threads.get(&waker)?;
        let clock_starts: Vec<u64> = clock.activations.iter().map(|a| a.start).collect();
        let (period, jitter) = detect_period(&clock_starts)?;
        if period < MIN_JUDGED_PERIOD_NS || starts.len() < 8 {
            return None;
        }
        let intervals: Vec<u64> = starts.windows(2).map(|pair| pair[1] - pair[0]).collect();
        let on_rhythm = intervals
            .iter()
            .filter(|&&interval| {
                let cycles = ((interval + period / 2) / period).max(1);
                interval.abs_diff(cycles * period) * 10 <= period
            })
            .count();
        (on_rhythm * 10 >= intervals.len() * 6).then_some((period, jitter))
    }
}

/// The waker a summary's jobs were grouped by.
fn summary_waker(summary: &ActivationSummary) -> i32 {
    summary.learnt_waker().unwrap_or(0)
}

/// A long futex wait of thread `tid` on the futex at `uaddr`, from `since` until `until` (none:
/// still waiting when the trace ended).
#[derive(Clone, Copy, Debug)]
struct Wait {
    tid: i32,
    since: u64,
    until: Option<u64>,
    uaddr: u64,
}

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
