//! The plan of a request file as `rtlab plan` shows it (`--json` and text): every request
//! admitted or denied, and each CPU's slots. Plain data; the planner fills it in
//! (`rtlab_sched::plan_report::plan_requests`).

use crate::Nanos;
use serde::Serialize;

/// An amount of CPU time in every period.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RateReport {
    pub amount_ns: u64,
    pub period_ns: u64,
}

impl RateReport {
    /// `amount` of every `period`.
    pub fn new(amount: Nanos, period: Nanos) -> RateReport {
        RateReport {
            amount_ns: amount.0,
            period_ns: period.0,
        }
    }
}

/// A request the planner admitted: what was asked and what was granted, on which CPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GrantReport {
    pub owner: String,
    pub cpu: usize,
    pub requested: RateReport,
    pub granted: RateReport,
    /// Admitted without rebuilding the CPU's plan.
    pub incremental: bool,
}

/// A request the planner refused, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeniedReport {
    pub owner: String,
    /// `line N: why`.
    pub reason: String,
}

/// One slot of a CPU's cycle and the reservation it belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SlotReport {
    pub start_ns: u64,
    pub length_ns: u64,
    pub owner: String,
}

/// One CPU's plan: its cycle, its reserved share and its slots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CpuReport {
    pub cpu: usize,
    pub cycle_ns: u64,
    /// Share of the CPU reserved, parts per million.
    pub reserved_ppm: u64,
    pub slots: Vec<SlotReport>,
}

/// The plan of a request file.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanReport {
    pub n_cpus: usize,
    pub quantum_ns: u64,
    pub cap: f64,
    pub requests: usize,
    pub grants: Vec<GrantReport>,
    pub denied: Vec<DeniedReport>,
    pub cpus: Vec<CpuReport>,
}
