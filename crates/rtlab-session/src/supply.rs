//! `rtlab reserve --verify`: what a reserved thread really received. Records when the thread ran
//! (`sched_switch` through `rtlab-explain`) for a while and measures the CPU time it got in every
//! sliding window of its period (`rtlab-analysis::supply`).

pub use rtlab_analysis::supply::VerifiedSupply;
use rtlab_analysis::supply::{sliding_window_supply, SupplyError, DEFAULT_STEP};
use rtlab_core::Nanos;
use rtlab_explain::TraceError;
use rtlab_sys::sched::{set_current_thread_policy, thread_policy, Policy};
use serde::Serialize;

/// A grant and, when it was verified, what the thread received (`rtlab reserve --json`).
#[derive(Debug, Serialize)]
pub struct VerifiedGrant<'a> {
    pub grant: &'a rtlab_core::rpc::GrantInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifiedSupply>,
    /// True when the thread already held this reservation, the same budget asked before (`grant`
    /// is that reservation); absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub already_held: bool,
}

/// Why a verification failed.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("recording when thread {tid} ran: {source}")]
    Recording {
        tid: u32,
        #[source]
        source: TraceError,
    },
    /// The reservation's rate or the recording's length do not make a supply (input).
    #[error("{0}")]
    Supply(#[from] SupplyError),
}

impl VerifyError {
    /// True when the request was at fault (a rate or a duration), not the system.
    pub fn is_input(&self) -> bool {
        matches!(self, VerifyError::Supply(_))
    }
}

/// Records when `tid` ran for `duration` and measures its supply in every sliding window of
/// `period` against `amount`. The reading thread (the caller's) runs at SCHED_FIFO 97 meanwhile
/// where permitted (under real-time load it would otherwise read only when the load pauses) and
/// gets its old policy back afterwards.
pub fn verify_supply(
    tid: u32,
    amount: Nanos,
    period: Nanos,
    duration: Nanos,
) -> Result<VerifiedSupply, VerifyError> {
    let own = rtlab_sys::cpu::current_tid();
    let previous = thread_policy(own).ok();
    let raised = rtlab_sys::sched::realtime_permitted()
        && set_current_thread_policy(Policy::Fifo { priority: 97 }).is_ok();
    let runs = rtlab_explain::supply::record_thread_runs(
        tid,
        std::time::Duration::from_nanos(duration.as_u64()),
    );
    if raised {
        let _ = set_current_thread_policy(previous.unwrap_or(Policy::Other { nice: 0 }));
    }
    let runs = runs.map_err(|source| VerifyError::Recording { tid, source })?;
    let supply =
        sliding_window_supply(&runs.runs, runs.from, runs.to, amount, period, DEFAULT_STEP)?;
    Ok(VerifiedSupply {
        tid,
        supply,
        lost_events: runs.lost_events,
    })
}
