//! Pass 3 of attribution: name the cause of each slice the replay cut, and sum them.
//!
//! This is where the rules of the module's doc live (inside an interrupt → that interrupt; before
//! the timer fired → the timer's lateness; after the wake-up → the task that ran, or the switch).
//! The totals and the timeline are then reconciled with the probe's own latency, so the parts add
//! up to it exactly whatever the trace missed.

use super::key_moments::KeyMoments;
use super::replay::{ContextKind, OpenContext, Replayed, Running, Slice};
use super::totals::{sort_largest_first, CauseTotals};
use super::{symbol, AttributionContext, LateWakeup, Window, UNACCOUNTED_NAME};
use crate::event::Comm;
use rtlab_core::{Cause, CauseKind, Metric, Segment};
use std::collections::BTreeMap;

/// The causes summed so far, and the timeline they make in time order.
#[derive(Default)]
struct Tally {
    totals: CauseTotals<CauseKind>,
    /// Slices arrive in time order and cover the window without gaps, so each one starts where
    /// the timeline ends.
    timeline: Vec<Segment>,
}

impl Tally {
    fn add(
        &mut self,
        kind: CauseKind,
        name: String,
        pid: Option<u32>,
        detail: Option<String>,
        ns: u64,
    ) {
        match self.timeline.last_mut() {
            Some(last) if last.kind == kind && last.name == name && last.pid == pid => {
                last.ns += ns;
            }
            _ => self.timeline.push(Segment {
                start_ns: self
                    .timeline
                    .last()
                    .map_or(0, |last| last.start_ns + last.ns),
                ns,
                kind,
                name: name.clone(),
                pid,
            }),
        }
        self.totals.add(kind, name, pid, detail, ns);
    }
}

/// Names every slice's cause and returns the causes (largest first) and the timeline, both adding
/// up to `late.latency_ns`.
pub(super) fn classify(
    late: &LateWakeup,
    window: Window,
    moments: &KeyMoments,
    replayed: &Replayed,
    context: AttributionContext<'_>,
) -> (Vec<Cause>, Vec<Segment>) {
    let mut tally = Tally::default();
    if !replayed.saw_any_event {
        let detail = format!(
            "no trace events on CPU {} during the window{}",
            late.cpu,
            if context.events_lost {
                " (the ring buffer lost events)"
            } else {
                ""
            }
        );
        tally.add(
            CauseKind::Unaccounted,
            UNACCOUNTED_NAME.to_owned(),
            None,
            Some(detail),
            window.end - window.start,
        );
    }
    let classifier = SliceClassifier {
        late,
        moments,
        replayed,
        context,
    };
    for slice in replayed.slices.iter().filter(|_| replayed.saw_any_event) {
        classifier.add_slice(&mut tally, slice);
    }

    let Tally {
        totals,
        mut timeline,
    } = tally;
    let mut causes = totals.into_causes();
    reconcile(&mut causes, late.latency_ns, context.events_lost);
    sort_largest_first(&mut causes);
    reconcile_timeline(&mut timeline, late.latency_ns);
    (causes, timeline)
}

/// What naming a slice's cause needs to know about the late wake-up and the replay.
struct SliceClassifier<'a> {
    late: &'a LateWakeup,
    moments: &'a KeyMoments,
    replayed: &'a Replayed,
    context: AttributionContext<'a>,
}

impl SliceClassifier<'_> {
    /// Adds `slice` to the tally under its cause: the interrupt context open in it if any,
    /// otherwise what the CPU was doing (see the module's rules).
    fn add_slice(&self, tally: &mut Tally, slice: &Slice) {
        let duration = slice.end - slice.start;
        match &slice.top {
            Some(top) => self.add_interrupt(tally, top, duration),
            None => self.add_outside_interrupts(tally, slice, duration),
        }
    }

    /// Adds a slice spent in interrupt context `top`: delivering the wake-up itself, or another
    /// interrupt, vector, softirq or timer callback.
    fn add_interrupt(&self, tally: &mut Tally, top: &OpenContext, duration: u64) {
        if self.replayed.wake_path.contains(&top.id) {
            let (wake_kind, name) = if self.late.metric == Metric::Wakeup {
                (CauseKind::Timer, "wake-up interrupt")
            } else {
                (CauseKind::Switch, "wake-up IPI")
            };
            tally.add(
                wake_kind,
                name.to_owned(),
                None,
                Some(format!("delivering the wake-up ({})", top.name)),
                duration,
            );
            return;
        }
        match top.kind {
            ContextKind::Irq => tally.add(
                CauseKind::Irq,
                top.name.clone(),
                None,
                Some("hard IRQ handler".into()),
                duration,
            ),
            ContextKind::Vector => tally.add(
                CauseKind::Irq,
                top.name.clone(),
                None,
                Some("interrupt vector".into()),
                duration,
            ),
            ContextKind::Softirq => {
                tally.add(CauseKind::Softirq, top.name.clone(), None, None, duration)
            }
            ContextKind::Hrtimer => tally.add(
                CauseKind::Timer,
                top.name.clone(),
                None,
                Some("hrtimer callback".into()),
                duration,
            ),
        }
    }

    /// Adds a slice with no interrupt context open: the switch to the probe, the timer firing
    /// late, the wake-up in flight, scheduling out of idle, or the task that ran.
    fn add_outside_interrupts(&self, tally: &mut Tally, slice: &Slice, duration: u64) {
        let late = self.late;
        let before_fire = self
            .moments
            .fired_ns
            .is_some_and(|fired| slice.start < fired);
        let running = slice.running.as_ref();
        let idle = running.is_none_or(|task| task.pid == 0);
        if running.is_some_and(|task| task.pid == late.tid as i32) {
            tally.add(
                CauseKind::Switch,
                "switch to the probe".into(),
                None,
                Some("context switch and return to user space".into()),
                duration,
            );
        } else if before_fire && late.metric == Metric::Wakeup {
            if idle {
                tally.add(
                    CauseKind::Unaccounted,
                    UNACCOUNTED_NAME.to_owned(),
                    None,
                    Some("the timer fired late on an idle CPU: idle-state exit, hypervisor or firmware".into()),
                    duration,
                );
            } else {
                let task = running.expect("not idle means a task");
                tally.add(
                    CauseKind::Timer,
                    "timer fired late".into(),
                    None,
                    Some(format!(
                        "while {} ran (interrupts off, another timer callback, or the hypervisor)",
                        task_label(task, &self.moments.comms)
                    )),
                    duration,
                );
            }
        } else if before_fire {
            tally.add(
                CauseKind::Switch,
                "wake-up in flight".into(),
                None,
                Some("signal sent, waking not yet traced on this CPU".into()),
                duration,
            );
        } else if idle {
            tally.add(
                CauseKind::Switch,
                "scheduling".into(),
                None,
                Some("idle exit and scheduler".into()),
                duration,
            );
        } else {
            let task = running.expect("not idle means a task");
            self.add_task(tally, task, duration);
        }
    }

    /// Adds a slice in which `task` ran after the wake-up, named by its command and described by
    /// its priority against the probe's (and its work item, for a kernel worker).
    fn add_task(&self, tally: &mut Tally, task: &Running, duration: u64) {
        let name = task
            .comm
            .or_else(|| self.moments.comms.get(&task.pid).copied())
            .map(|comm| comm.to_string())
            .unwrap_or_else(|| format!("pid {}", task.pid));
        let mut detail = match task.prio {
            Some(prio) => {
                let rank = match self.moments.probe_prio {
                    Some(probe) if prio < probe => ", outranks the probe",
                    Some(probe) if prio == probe => ", same priority as the probe",
                    Some(_) => ", below the probe's priority",
                    None => "",
                };
                format!("{}{rank}", describe_prio(prio))
            }
            None => "priority unknown".to_owned(),
        };
        if let Some(function) = task.work_function {
            detail.push_str(&format!(
                ", work {}",
                symbol(self.context.symbols, function)
            ));
        }
        tally.add(
            CauseKind::Task,
            name,
            u32::try_from(task.pid).ok(),
            Some(detail),
            duration,
        );
    }
}

/// A kernel priority (`prio`: -1 deadline, 0-99 real-time, 100-139 nice) as a user reads it.
pub fn describe_prio(prio: i32) -> String {
    if prio < 0 {
        "SCHED_DEADLINE".to_owned()
    } else if prio < 100 {
        format!("RT priority {}", 99 - prio)
    } else {
        format!("nice {}", prio - 120)
    }
}

fn task_label(task: &Running, comms: &BTreeMap<i32, Comm>) -> String {
    match task.comm.or_else(|| comms.get(&task.pid).copied()) {
        Some(comm) => format!("{comm}[{}]", task.pid),
        None => format!("pid {}", task.pid),
    }
}

/// Makes the timeline end at the latency, as `reconcile` does for the totals: a shortfall is
/// unaccounted time at the end, an excess is cut from the end.
fn reconcile_timeline(timeline: &mut Vec<Segment>, latency_ns: u64) {
    let mut total: u64 = timeline.iter().map(|segment| segment.ns).sum();
    while total > latency_ns {
        let Some(last) = timeline.last_mut() else {
            break;
        };
        let cut = (total - latency_ns).min(last.ns);
        last.ns -= cut;
        total -= cut;
        if last.ns == 0 {
            timeline.pop();
        }
    }
    if total < latency_ns {
        match timeline.last_mut() {
            Some(last) if last.kind == CauseKind::Unaccounted => last.ns += latency_ns - total,
            _ => timeline.push(Segment {
                start_ns: total,
                ns: latency_ns - total,
                kind: CauseKind::Unaccounted,
                name: UNACCOUNTED_NAME.to_owned(),
                pid: None,
            }),
        }
    }
}

/// Makes the causes sum to exactly `latency_ns`: a shortfall becomes (more) unaccounted time, an
/// excess (the probe's clock read and the trace's differ by a few ns) is taken from the largest.
fn reconcile(causes: &mut Vec<Cause>, latency_ns: u64, events_lost: bool) {
    let total: u64 = causes.iter().map(|cause| cause.ns).sum();
    if total < latency_ns {
        let missing = latency_ns - total;
        if let Some(unaccounted) = causes
            .iter_mut()
            .find(|cause| cause.kind == CauseKind::Unaccounted)
        {
            unaccounted.ns += missing;
        } else {
            causes.push(Cause {
                kind: CauseKind::Unaccounted,
                name: UNACCOUNTED_NAME.to_owned(),
                pid: None,
                ns: missing,
                detail: Some(if events_lost {
                    "not visible in the trace (the ring buffer lost events)".to_owned()
                } else {
                    "not visible in the trace".to_owned()
                }),
            });
        }
    } else {
        let mut excess = total - latency_ns;
        causes.sort_by_key(|cause| std::cmp::Reverse(cause.ns));
        for cause in causes.iter_mut() {
            let taken = excess.min(cause.ns);
            cause.ns -= taken;
            excess -= taken;
            if excess == 0 {
                break;
            }
        }
    }
    causes.retain(|cause| cause.ns > 0);
}
