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
