//! What a forecast reads: the buffer configuration it judges (and, with the response model,
//! the probe's series). A module of its own because every model (`model.rs`, `backlog.rs`,
//! `response.rs`) takes these and `model.rs` calls the others: shared types below all three.

use crate::classes::ApplicationClass;
use rtlab_core::Nanos;
use serde::Serialize;

/// `n` buffers of `t`, `c` compute time per buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BufferConfig {
    pub buffers: u32,
    pub buffer_period: Nanos,
    pub compute: Nanos,
}

impl BufferConfig {
    pub fn of_class(class: &ApplicationClass) -> BufferConfig {
        BufferConfig {
            buffers: class.buffers,
            buffer_period: class.buffer_period,
            compute: class.compute,
        }
    }

    /// `t·(n − 1) − c` in ns; negative when the compute time alone exceeds the buffering.
    pub fn slack_ns(&self) -> i64 {
        let buffering =
            u128::from(self.buffers.saturating_sub(1)) * u128::from(self.buffer_period.0);
        let buffering = i64::try_from(buffering).unwrap_or(i64::MAX);
        buffering.saturating_sub(i64::try_from(self.compute.0).unwrap_or(i64::MAX))
    }

    /// `(n − 1)·t`: the buffering (paper 002's latency tolerance), what a user pays in latency.
    pub fn buffering(&self) -> Nanos {
        Nanos(u64::from(self.buffers.saturating_sub(1)).saturating_mul(self.buffer_period.0))
    }
}
