//! The settings the timer change experiment (`rtlab timers --change`, run by rtlab-probe) holds in
//! turn, as plain data: what it says before it starts and what the record's steps name.

/// One setting the changer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// Nothing held, the measuring thread's slack as it was.
    Untouched,
    /// /dev/cpu_dma_latency held at this many µs.
    DmaLatency(i32),
    /// The measuring thread's timer slack set to this many ns by the other process.
    TimerSlack(u64),
}

impl Setting {
    /// The setting in words: `cpu_dma_latency 0 µs`, `timer slack 1ns`.
    pub fn describe(self) -> String {
        match self {
            Setting::Untouched => "nothing changed".to_owned(),
            Setting::DmaLatency(micros) => format!("cpu_dma_latency {micros} µs"),
            Setting::TimerSlack(ns) => format!("timer slack {}", crate::Nanos(ns)),
        }
    }
}

/// What the change experiment holds, for how long each, and where it measures.
#[derive(Clone, Debug)]
pub struct ChangeConfig {
    pub settings: Vec<Setting>,
    pub hold: crate::Nanos,
    pub sleep: crate::Nanos,
    /// The CPU of the SCHED_OTHER thread whose slack the changer changes.
    pub cpu: usize,
    /// The CPU of a SCHED_FIFO 90 thread measuring its wake-ups too (None: not measured).
    pub rt_cpu: Option<usize>,
}
