//! What the buffer experiment (`rtlab buffer-experiment`, run by rtlab-probe) found, as plain
//! data for its renderer.

use crate::sched_policy::Policy;
use crate::LatencyHistogram;

/// What happened.
#[derive(Clone, Debug)]
pub struct ExperimentResult {
    /// Producer wake-up latency (actual − intended), one sample per period.
    pub wakeup: LatencyHistogram,
    /// Largest wake-up latency in each second.
    pub max_per_second: Vec<u64>,
    /// Buffers produced.
    pub periods: u64,
    /// `(n, buffers checked, underruns)`.
    pub underruns: Vec<(u32, u64, u64)>,
    /// Checks the device could not make because it fell more than the ring behind.
    pub unchecked: u64,
    /// The policy the producer actually ran with.
    pub producer_policy: Policy,
    /// False when the device could not get SCHED_FIFO (not root): it then ran as SCHED_OTHER.
    pub device_realtime: bool,
    /// True when `stop` ended the experiment early.
    pub interrupted: bool,
}
