//! Cause attribution: what the CPU did between a late wake-up's intended and actual time.
//!
//! Paper 002's latency cause tool sampled what ran into a circular buffer and dumped it on a
//! threshold; here the CPU's trace events are replayed instead, so every nanosecond of the window
//! [intended, actual] is assigned to exactly one cause and the parts add up to the measured
//! latency:
//!
//! * inside a hard-IRQ handler → `irq` (handler name, or the x86 vector such as `local_timer`);
//! * inside a softirq → `softirq` (vector name: `NET_RX`, `TIMER`, …);
//! * inside another hrtimer's callback → `timer` (callback symbol);
//! * inside the interrupt that delivers the probe's own wake-up → `timer` ("wake-up interrupt");
//! * before the probe's timer fired, while a task ran → `timer` (the timer interrupt was late);
//! * after the wake-up, while another task ran → `task` (comm, pid, priority, whether it outranked
//!   the probe);
//!   (also when it preempted the probe after the switch-in, before the probe read its clock);
//! * after the wake-up with nothing else running, and while the probe itself runs → `switch`;
//! * time before the timer fired on an idle CPU, or with no events at all → `unaccounted`: the CPU
//!   did nothing we can name (idle-state exit, the hypervisor, firmware/SMIs). The caller puts the
//!   /proc/stat steal delta beside it.

//!
//! The work is three passes over the CPU's events, one module each: `key_moments` finds when the
//! probe's timer fired and when it was woken; `replay` replays the CPU's state (`CpuReplay`:
//! interrupt nesting, the running task) and cuts the window into slices of one state each;
//! `classify` names each slice's cause and sums them (`totals`, which rtlab-workload's explained
//! windows sum their parts with too).

mod classify;
pub use classify::describe_prio;
mod key_moments;
mod replay;
#[cfg(test)]
mod tests;
mod totals;
pub use totals::{sort_largest_first, CauseTotals};

use crate::event::TraceEvent;
use crate::symbols::KernelSymbols;
use key_moments::KeyMoments;
use replay::CpuReplay;
use rtlab_core::{Cause, Metric, Segment};

/// A late sample handed over by the probe: absolute CLOCK_MONOTONIC times.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LateWakeup {
    /// The series label (`class/metric@cpu`).
    pub series: String,
    pub metric: Metric,
    pub cpu: u32,
    /// The measuring (or, for hand-off, the woken) thread.
    pub tid: u32,
    pub intended_ns: u64,
    pub actual_ns: u64,
    pub latency_ns: u64,
}

/// Name given to the unaccounted remainder.
pub const UNACCOUNTED_NAME: &str = "unaccounted";

/// What attribution needs besides the CPU's events.
#[derive(Clone, Copy, Debug, Default)]
pub struct AttributionContext<'a> {
    /// When the thread was woken, if the waking event was seen on another CPU.
    pub wake_hint_ns: Option<u64>,
    /// True when the ring buffer lost events on this CPU around the window.
    pub events_lost: bool,
    pub symbols: Option<&'a KernelSymbols>,
}

/// The window [intended, actual] every pass works on (never reversed).
#[derive(Clone, Copy, Debug)]
struct Window {
    start: u64,
    end: u64,
}

impl Window {
    fn of(late: &LateWakeup) -> Window {
        Window {
            start: late.intended_ns,
            end: late.actual_ns.max(late.intended_ns),
        }
    }

    fn contains(&self, time_ns: u64) -> bool {
        time_ns >= self.start && time_ns <= self.end
    }
}

/// Decomposes one late wake-up. `events` are the CPU's events in time order, starting some time
/// before `late.intended_ns` (so the state at the window's start is known) and ending at or after
/// `late.actual_ns`. The returned causes are sorted by time, largest first, and their `ns` sum to
/// `late.latency_ns`.
pub fn attribute(
    late: &LateWakeup,
    events: &[TraceEvent],
    context: AttributionContext<'_>,
) -> Vec<Cause> {
    attribute_with_timeline(late, events, context).0
}

/// [`attribute`], plus the window in time order: consecutive stretches with one cause each (what
/// a trace viewer shows), starting at the intended time and adding up to the latency too.
pub fn attribute_with_timeline(
    late: &LateWakeup,
    events: &[TraceEvent],
    context: AttributionContext<'_>,
) -> (Vec<Cause>, Vec<Segment>) {
    let window = Window::of(late);
    let moments = KeyMoments::find(late, window, events, context.wake_hint_ns);
    let replayed = CpuReplay::new(late, window, &moments, context.symbols).replay(events);
    classify::classify(late, window, &moments, &replayed, context)
}

/// A kernel address by name when the symbol table is loaded, in hex otherwise.
fn symbol(symbols: Option<&KernelSymbols>, address: u64) -> String {
    match symbols {
        Some(table) => table.name(address),
        None => format!("{address:#x}"),
    }
}
