//! The record's `workload` part: what a workload run (`rtlab workload`) counted that a latency
//! distribution cannot hold — per thread activations, deadline misses and starvations, per device
//! underruns — each counted event with its time, so a report can say *when* the audio glitched
//! and `explain` can look at what ran then.
//!
//! The distributions themselves (a thread's wake-up and `response` time) are ordinary series of
//! the record, labelled with the thread's name as their class.

use serde::{Deserialize, Serialize};

/// One counted event: when it happened (ns since the start of the workload) and, where it has
/// one, how late the thing that should have happened was (ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadEvent {
    pub at_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_ns: Option<u64>,
}

/// What one workload thread did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadOutcome {
    pub name: String,
    /// `SCHED_FIFO 24`, `SCHED_OTHER 0`, `reserve 1ms/16ms (deadline)`, …: what it ran as.
    pub scheduling: String,
    pub activations: u64,
    /// Activations that completed after their deadline.
    pub deadline_misses: u64,
    /// Activations that found their input ring empty.
    pub starvations: u64,
    /// The thread's CPU time over the run, ns.
    pub cpu_time_ns: u64,
    /// The first deadline misses with their times (at most [`EVENTS_KEPT`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deadline_miss_events: Vec<WorkloadEvent>,
    /// The first starvations with their times (at most [`EVENTS_KEPT`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub starvation_events: Vec<WorkloadEvent>,
}

/// What one device (a sound card draining one buffer every period) found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceOutcome {
    pub name: String,
    pub buffer_period_ns: u64,
    pub buffers: u32,
    /// Device periods played (with a buffer or as an underrun).
    pub periods: u64,
    /// Periods in which the device found no buffer ready.
    pub underruns: u64,
    /// The first underruns with their times (at most [`EVENTS_KEPT`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub underrun_events: Vec<WorkloadEvent>,
}

/// How many events of each kind a record keeps with their times (the counts are always exact).
pub const EVENTS_KEPT: usize = 1000;

/// What a thread's time went to over an explained window (`rtlab workload --explain`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LatenessKind {
    /// The thread itself ran (its own work).
    Ran,
    /// Another task ran on its CPU while it was runnable, at its priority or above.
    Task,
    /// A hard interrupt handler or interrupt vector on its CPU.
    Irq,
    Softirq,
    /// It was runnable but a lower-priority task (or nothing) ran: its SCHED_DEADLINE budget was
    /// used up, or RT throttling / the fair server held its RT class.
    Throttled,
    /// It was asleep: waiting for its release, its waker, or a lock.
    Waiting,
    /// Its CPU was silent longer than two scheduler ticks while busy: the time vanished
    /// (hypervisor, firmware).
    Vanished,
    /// The trace did not show the thread (lost events, or it was not traced yet).
    Unseen,
}

impl LatenessKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LatenessKind::Ran => "ran",
            LatenessKind::Task => "task",
            LatenessKind::Irq => "irq",
            LatenessKind::Softirq => "softirq",
            LatenessKind::Throttled => "throttled",
            LatenessKind::Waiting => "waiting",
            LatenessKind::Vanished => "vanished",
            LatenessKind::Unseen => "unseen",
        }
    }

    /// True for what kept a thread from the CPU (not its own running or sleeping).
    pub fn is_cause(self) -> bool {
        !matches!(self, LatenessKind::Ran | LatenessKind::Waiting)
    }
}

/// One part of an explained window: a kind, what it was (task name, IRQ, …) and how long. The
/// same type as an episode's cause, with the workload's kinds.
pub type LatenessPart = crate::cause::Cause<LatenessKind>;

/// Where one thread's time went over an explained window; the parts sum to the window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadAccount {
    pub thread: String,
    pub tid: u32,
    pub parts: Vec<LatenessPart>,
}

/// An underrun or deadline miss with its cause (`--explain`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExplainedEvent {
    /// `underrun` or `deadline_miss`.
    pub kind: String,
    /// The device (underrun) or thread (deadline miss).
    pub source: String,
    /// When it happened, ns since the start.
    pub at_ns: u64,
    /// The window explained, ns since the start, and its length.
    pub window_start_ns: u64,
    pub window_ns: u64,
    /// The threads whose lateness could cause it (the device's producer and the threads that feed
    /// or wake it), largest cause first.
    pub accounts: Vec<ThreadAccount>,
    /// How late the device thread itself took the buffer (underruns only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_late_ns: Option<u64>,
    /// Steal time /proc/stat counted on the machine's CPUs around the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_ns: Option<u64>,
    /// The cause in words (`rtlab-competito[412] SCHED_FIFO 50 ran 9.8 ms of producer's 40 ms`).
    pub cause: String,
    /// The cause's kind (`task`, `throttled`, `vanished`, …) for scripts.
    pub cause_kind: LatenessKind,
}

/// The `workload` part of a Run record.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkloadOutcome {
    /// The workload's name (its file's `name`, or the file name).
    pub name: String,
    /// Where it came from: the file path, and its format (`toml`, `rt-app`).
    pub source: String,
    pub format: String,
    pub threads: Vec<ThreadOutcome>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceOutcome>,
    /// With `--explain`: the first underruns and deadline misses with their causes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub explained: Vec<ExplainedEvent>,
}

impl WorkloadOutcome {
    /// Underruns of every device together.
    pub fn underruns(&self) -> u64 {
        self.devices.iter().map(|device| device.underruns).sum()
    }

    /// Deadline misses of every thread together.
    pub fn deadline_misses(&self) -> u64 {
        self.threads
            .iter()
            .map(|thread| thread.deadline_misses)
            .sum()
    }

    /// Starvations of every thread together.
    pub fn starvations(&self) -> u64 {
        self.threads.iter().map(|thread| thread.starvations).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part is an episode's cause with the workload's kinds: its JSON is what it always was,
    /// and neither takes the other's kinds.
    #[test]
    fn a_lateness_part_keeps_its_json() {
        let part = LatenessPart {
            kind: LatenessKind::Throttled,
            name: "producer".into(),
            pid: Some(41),
            ns: 9,
            detail: Some("SCHED_FIFO 50".into()),
        };
        let text = serde_json::to_string(&part).unwrap();
        assert_eq!(
            text,
            r#"{"kind":"throttled","name":"producer","pid":41,"ns":9,"detail":"SCHED_FIFO 50"}"#
        );
        assert_eq!(serde_json::from_str::<LatenessPart>(&text).unwrap(), part);
        let bare = LatenessPart {
            kind: LatenessKind::Unseen,
            name: "unseen".into(),
            pid: None,
            ns: 3,
            detail: None,
        };
        assert_eq!(
            serde_json::to_string(&bare).unwrap(),
            r#"{"kind":"unseen","name":"unseen","ns":3}"#
        );
        assert!(serde_json::from_str::<crate::Cause>(&text).is_err());
        assert!(
            serde_json::from_str::<LatenessPart>(r#"{"kind":"timer","name":"x","ns":1}"#).is_err()
        );
    }

    #[test]
    fn round_trips_and_sums() {
        let outcome = WorkloadOutcome {
            name: "player".into(),
            source: "player.toml".into(),
            format: "toml".into(),
            threads: vec![ThreadOutcome {
                name: "mixer".into(),
                scheduling: "SCHED_FIFO 24".into(),
                activations: 100,
                deadline_misses: 2,
                starvations: 3,
                cpu_time_ns: 5,
                deadline_miss_events: vec![WorkloadEvent {
                    at_ns: 10,
                    late_ns: Some(4),
                }],
                starvation_events: vec![],
            }],
            devices: vec![DeviceOutcome {
                name: "device".into(),
                buffer_period_ns: 10_000_000,
                buffers: 3,
                periods: 100,
                underruns: 7,
                underrun_events: vec![],
            }],
            explained: vec![],
        };
        let text = serde_json::to_string(&outcome).unwrap();
        assert_eq!(
            serde_json::from_str::<WorkloadOutcome>(&text).unwrap(),
            outcome
        );
        assert_eq!(
            (
                outcome.underruns(),
                outcome.deadline_misses(),
                outcome.starvations()
            ),
            (7, 2, 3)
        );
    }
}
