//! Pass 2 of attribution: replay one CPU's state over the window and cut it into slices.
//!
//! [`CpuReplay`] is a state machine fed the CPU's events in time order: the stack of interrupt
//! contexts open (hard IRQ, vector, softirq, hrtimer callback), the task running, and the most
//! urgent task woken onto the CPU while it idled. Between two events the state is constant, so the
//! window becomes a list of [`Slice`]s, each with one innermost context and one running task;
//! naming what each slice means is the next pass's job. The replay also marks which contexts
//! delivered the probe's own wake-up, so that time is charged to the wake-up, not to a stranger.

use super::key_moments::KeyMoments;
use super::{symbol, LateWakeup, Window};
use crate::event::{softirq_name, Comm, EventKind, TraceEvent};
use crate::symbols::KernelSymbols;
use std::collections::BTreeMap;

/// The kind of an interrupt context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ContextKind {
    Irq,
    Vector,
    Softirq,
    Hrtimer,
}

/// An interrupt context entered and not yet left.
#[derive(Clone, Debug)]
pub(super) struct OpenContext {
    /// Unique within one replay, to tell two entries of the same interrupt apart.
    pub(super) id: u64,
    pub(super) kind: ContextKind,
    /// IRQ number, softirq vector or timer address, to match the exit event.
    pub(super) key: u64,
    pub(super) name: String,
}

/// The task the CPU runs (pid 0: idle).
#[derive(Clone, Debug)]
pub(super) struct Running {
    pub(super) pid: i32,
    pub(super) comm: Option<Comm>,
    pub(super) prio: Option<i32>,
    /// The work item a kernel worker is executing.
    pub(super) work_function: Option<u64>,
}

/// A stretch of the window with one CPU state.
#[derive(Clone, Debug)]
pub(super) struct Slice {
    pub(super) start: u64,
    pub(super) end: u64,
    /// The innermost interrupt context open, if any.
    pub(super) top: Option<OpenContext>,
    pub(super) running: Option<Running>,
}

/// What the replay hands to the classification.
#[derive(Clone, Debug, Default)]
pub(super) struct Replayed {
    /// In time order, covering the window without gaps when any event was seen.
    pub(super) slices: Vec<Slice>,
    /// The contexts open when the probe's waking fired: they delivered its wake-up.
    pub(super) wake_path: Vec<u64>,
    /// False when no event at all fell before the window's end.
    pub(super) saw_any_event: bool,
}

/// The state machine: one CPU's interrupt nesting and running task, replayed event by event.
pub(super) struct CpuReplay<'a> {
    window: Window,
    /// The probe's thread id.
    tid: i32,
    cpu: i32,
    wake_ns: Option<u64>,
    comms: &'a BTreeMap<i32, Comm>,
    prios: &'a BTreeMap<i32, i32>,
    symbols: Option<&'a KernelSymbols>,
    stack: Vec<OpenContext>,
    running: Option<Running>,
    /// The most urgent task woken onto this CPU while it idled: where the switch out of idle is
    /// not traced, it is the task the CPU runs once the waking interrupt returns (an idle CPU has
    /// nothing else to run).
    idle_wakee: Option<Running>,
    next_id: u64,
    /// Where the slice being built began.
    previous: u64,
    replayed: Replayed,
}

impl<'a> CpuReplay<'a> {
    pub(super) fn new(
        late: &LateWakeup,
        window: Window,
        moments: &'a KeyMoments,
        symbols: Option<&'a KernelSymbols>,
    ) -> CpuReplay<'a> {
        CpuReplay {
            window,
            tid: late.tid as i32,
            cpu: late.cpu as i32,
            wake_ns: moments.wake_ns,
            comms: &moments.comms,
            prios: &moments.prios,
            symbols,
            stack: Vec::new(),
            running: None,
            idle_wakee: None,
            next_id: 0,
            previous: window.start,
            replayed: Replayed::default(),
        }
    }

    /// Replays `events` (in time order) up to the window's end and returns the slices.
    pub(super) fn replay(mut self, events: &[TraceEvent]) -> Replayed {
        for event in events {
            if event.timestamp_ns > self.window.end {
                break;
            }
            self.step(event);
        }
        // No event after the waking: the woken task ran up to the window's end.
        self.adopt_idle_wakee();
        self.push_slice(self.previous, self.window.end);
        self.replayed
    }

    fn idle(&self) -> bool {
        self.running.as_ref().is_none_or(|task| task.pid == 0)
    }

    /// An idle CPU with a task woken onto it runs that task.
    fn adopt_idle_wakee(&mut self) {
        if self.idle() {
            if let Some(wakee) = &self.idle_wakee {
                self.running = Some(wakee.clone());
            }
        }
    }

    fn push_slice(&mut self, start: u64, end: u64) {
        let start = start.max(self.window.start);
        let end = end.min(self.window.end);
        if end > start {
            self.replayed.slices.push(Slice {
                start,
                end,
                top: self.stack.last().cloned(),
                running: self.running.clone(),
            });
        }
    }

    fn open(&mut self, kind: ContextKind, key: u64, name: String) {
        self.next_id += 1;
        self.stack.push(OpenContext {
            id: self.next_id,
            kind,
            key,
            name,
        });
    }

    /// Leaves the innermost open context of `kind` (with `key`, when given) and any inside it.
    fn close(&mut self, kind: ContextKind, key: Option<u64>) {
        if let Some(position) = self
            .stack
            .iter()
            .rposition(|open| open.kind == kind && key.is_none_or(|key| open.key == key))
        {
            self.stack.truncate(position);
        }
    }

    /// Takes one event: closes the slice before it, then applies it to the state.
    fn step(&mut self, event: &TraceEvent) {
        self.replayed.saw_any_event = true;
        // An idle CPU that had a task woken onto it and is next seen running a task has left idle
        // without a traced switch. When the interrupt's exit is not traced either (the standard
        // event set records no timer vector), the only moment left is the waking itself: the woken
        // task runs from there, not "idle" until the next event, which can be milliseconds away.
        if event.pid > 0 {
            self.adopt_idle_wakee();
        }
        if event.timestamp_ns > self.previous {
            self.push_slice(self.previous, event.timestamp_ns);
            self.previous = event.timestamp_ns;
        }
        if event.pid >= 0
            && self
                .running
                .as_ref()
                .is_none_or(|task| task.pid != event.pid)
        {
            // Any event names the task that was current when it fired (`common_pid`, also inside
            // interrupts). Some kernels do not trace every switch (on this project's Firecracker
            // VM, CPU 1 never shows a switch out of idle while CPU 0 does), so a task seen running
            // is believed from here on.
            self.running = Some(Running {
                pid: event.pid,
                comm: self.comms.get(&event.pid).copied(),
                prio: self.prios.get(&event.pid).copied(),
                work_function: None,
            });
            if event.pid != 0 {
                self.idle_wakee = None;
            }
        }
        match &event.kind {
            EventKind::IrqEntry { irq, name } => {
                self.open(ContextKind::Irq, *irq as u64, name.to_string())
            }
            EventKind::IrqExit { irq } => self.close(ContextKind::Irq, Some(*irq as u64)),
            EventKind::VectorEntry { name } => self.open(ContextKind::Vector, 0, name.to_string()),
            EventKind::VectorExit { .. } => self.close(ContextKind::Vector, None),
            EventKind::SoftirqEntry { vector } => self.open(
                ContextKind::Softirq,
                u64::from(*vector),
                softirq_name(*vector),
            ),
            EventKind::SoftirqExit { vector } => {
                self.close(ContextKind::Softirq, Some(u64::from(*vector)))
            }
            EventKind::HrtimerExpireEntry {
                timer, function, ..
            } => {
                let name = symbol(self.symbols, *function);
                self.open(ContextKind::Hrtimer, *timer, name)
            }
            EventKind::HrtimerExpireExit { timer } => {
                self.close(ContextKind::Hrtimer, Some(*timer))
            }
            EventKind::Waking {
                pid,
                prio,
                comm,
                target_cpu,
            }
            | EventKind::Wakeup {
                pid,
                prio,
                comm,
                target_cpu,
            } => {
                if matches!(event.kind, EventKind::Waking { .. })
                    && *pid == self.tid
                    && Some(event.timestamp_ns) == self.wake_ns
                {
                    let open_ids = self.stack.iter().map(|open| open.id);
                    self.replayed.wake_path.extend(open_ids);
                }
                if self.idle()
                    && *target_cpu == self.cpu
                    && self
                        .idle_wakee
                        .as_ref()
                        .is_none_or(|best| best.prio.is_none_or(|best| *prio < best))
                {
                    self.idle_wakee = Some(Running {
                        pid: *pid,
                        comm: Some(*comm),
                        prio: Some(*prio),
                        work_function: None,
                    });
                }
            }
            EventKind::Switch {
                next_pid,
                next_comm,
                next_prio,
                ..
            } => {
                // Nothing nests across a context switch; a stale entry would only mislead.
                self.stack.clear();
                self.idle_wakee = None;
                self.running = Some(Running {
                    pid: *next_pid,
                    comm: Some(*next_comm),
                    prio: Some(*next_prio),
                    work_function: None,
                });
            }
            EventKind::WorkStart { function } => {
                if let Some(task) = self.running.as_mut() {
                    task.work_function = Some(*function);
                }
            }
            EventKind::WorkEnd { .. } => {
                if let Some(task) = self.running.as_mut() {
                    task.work_function = None;
                }
            }
            _ => {}
        }
        let returned_from_interrupt = matches!(
            event.kind,
            EventKind::IrqExit { .. }
                | EventKind::VectorExit { .. }
                | EventKind::SoftirqExit { .. }
                | EventKind::HrtimerExpireExit { .. }
        );
        if returned_from_interrupt && self.stack.is_empty() {
            self.adopt_idle_wakee();
        }
    }
}
