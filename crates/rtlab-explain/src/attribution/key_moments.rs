//! Pass 1 of attribution: the key moments of one late wake-up — the probe's timer, its wake-up,
//! its switch-in, and its priority — and the task names and priorities the trace showed.
//!
//! The replay and the classification both need to know *when* the probe's timer fired and when
//! it was woken before they look at a single slice: time before the timer fired is the timer's
//! lateness, time after it is the scheduler's. These moments are found first, over all the
//! events given, so the later passes read them as plain values.

use super::{LateWakeup, Window};
use crate::event::{Comm, EventKind, TraceEvent};
use rtlab_core::Metric;
use std::collections::BTreeMap;

/// What the first pass learns about the window before it is replayed.
#[derive(Clone, Debug, Default)]
pub(super) struct KeyMoments {
    /// The probe's kernel priority, as its last switch or waking showed it.
    pub(super) probe_prio: Option<i32>,
    /// Task names by pid, from switches and wakings.
    pub(super) comms: BTreeMap<i32, Comm>,
    /// Kernel priorities by pid, from wakings.
    pub(super) prios: BTreeMap<i32, i32>,
    /// When the probe was woken: its waking in the window, or the hint from another CPU.
    pub(super) wake_ns: Option<u64>,
    /// When the probe's timer fired: its hrtimer's expiry for a wake-up series, else the waking.
    pub(super) fired_ns: Option<u64>,
}

impl KeyMoments {
    /// Reads the key moments of `late` from the CPU's `events`; `wake_hint_ns` is the probe's
    /// waking seen on another CPU, used when this CPU's events don't show it.
    pub(super) fn find(
        late: &LateWakeup,
        window: Window,
        events: &[TraceEvent],
        wake_hint_ns: Option<u64>,
    ) -> KeyMoments {
        let tid = late.tid as i32;
        let mut own_timer = None;
        let mut moments = KeyMoments::default();
        for event in events {
            match &event.kind {
                EventKind::HrtimerStart { timer, .. }
                    if event.pid == tid && event.timestamp_ns <= window.start =>
                {
                    own_timer = Some(*timer);
                }
                EventKind::Switch {
                    prev_pid,
                    prev_prio,
                    prev_comm,
                    next_pid,
                    next_prio,
                    next_comm,
                    ..
                } => {
                    moments.comms.insert(*prev_pid, *prev_comm);
                    moments.comms.insert(*next_pid, *next_comm);
                    if *next_pid == tid {
                        moments.probe_prio = Some(*next_prio);
                    } else if *prev_pid == tid {
                        moments.probe_prio = Some(*prev_prio);
                    }
                }
                EventKind::Waking {
                    pid, prio, comm, ..
                }
                | EventKind::Wakeup {
                    pid, prio, comm, ..
                } => {
                    moments.comms.insert(*pid, *comm);
                    moments.prios.insert(*pid, *prio);
                    if *pid == tid {
                        moments.probe_prio = Some(*prio);
                    }
                }
                _ => {}
            }
        }
        let in_window = |event: &&TraceEvent| window.contains(event.timestamp_ns);
        moments.wake_ns = events
            .iter()
            .filter(in_window)
            .find(|event| matches!(event.kind, EventKind::Waking { pid, .. } if pid == tid))
            .map(|event| event.timestamp_ns)
            .or(wake_hint_ns.filter(|time| window.contains(*time)));
        let own_expiry_ns = own_timer.and_then(|own| {
            events
                .iter()
                .filter(in_window)
                .find(|event| matches!(event.kind, EventKind::HrtimerExpireEntry { timer, .. } if timer == own))
                .map(|event| event.timestamp_ns)
        });
        moments.fired_ns = match (late.metric, own_expiry_ns, moments.wake_ns) {
            (Metric::Wakeup, Some(expiry), _) => Some(expiry),
            (_, _, wake) => wake,
        };
        moments
    }
}
