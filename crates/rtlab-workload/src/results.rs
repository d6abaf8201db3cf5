//! What one workload thread and one device counted during a run: the runner fills these, the
//! explainer (`crate::explain`) reads them, and `crate::record` turns them into the record. A
//! module of their own, so that the runner (which starts the explainer's tracer) and the
//! explainer do not use each other.

use rtlab_core::{LatencyHistogram, Nanos, WorkloadEvent};
use rtlab_sys::sched::Policy;

/// What one thread counted.
#[derive(Clone, Debug)]
pub struct ThreadResult {
    pub name: String,
    pub tid: u32,
    /// What it really ran as (policy, or the granted reservation).
    pub scheduling: String,
    pub policy: Policy,
    pub activations: u64,
    pub wakeup: LatencyHistogram,
    pub response: LatencyHistogram,
    pub wakeup_max_per_second: Vec<u64>,
    pub deadline_misses: u64,
    pub deadline_miss_events: Vec<WorkloadEvent>,
    pub starvations: u64,
    pub starvation_events: Vec<WorkloadEvent>,
    pub cpu_time_ns: u64,
}

/// What one device counted.
#[derive(Clone, Debug)]
pub struct DeviceResult {
    pub name: String,
    pub buffer_period: Nanos,
    pub buffers: u32,
    pub periods: u64,
    pub underruns: u64,
    pub underrun_events: Vec<WorkloadEvent>,
    /// One entry per period played: true = a buffer, false = an underrun (when kept).
    pub play_log: Vec<bool>,
    pub realtime: bool,
    /// How late the device thread took each underrun's buffer (beside `underrun_events`).
    pub underrun_device_late_ns: Vec<u64>,
    pub tid: u32,
}
