//! A request file planned in one go (what `rtlab plan` shows): every request admitted or denied in
//! file order, the resulting per-CPU plan, checked by the independent checker, as one serialisable
//! report. Nothing is enforced.

use crate::{AdmissionPath, Planner, PlannerError, Request};
use rtlab_core::Nanos;

pub use rtlab_core::plan_report::{
    CpuReport, DeniedReport, GrantReport, PlanReport, RateReport, SlotReport,
};

#[derive(Debug, thiserror::Error)]
pub enum PlanReportError {
    /// The planner's settings are wrong (an input error).
    #[error(transparent)]
    Planner(#[from] PlannerError),
    /// The independent checker found the plan broken (a bug, never the input's fault).
    #[error("planner self-check failed ({count} problems), first: {first}")]
    SelfCheck { count: usize, first: String },
}

/// Admits `requests` in order on a fresh planner and reports the outcome and the plan.
pub fn plan_requests(
    n_cpus: usize,
    quantum: Nanos,
    cap: f64,
    requests: &[Request],
) -> Result<PlanReport, PlanReportError> {
    let mut planner = Planner::new(n_cpus, quantum, cap)?;
    let mut report = PlanReport {
        n_cpus,
        quantum_ns: quantum.0,
        cap,
        requests: requests.len(),
        grants: Vec::new(),
        denied: Vec::new(),
        cpus: Vec::new(),
    };
    for request in requests {
        match planner.reserve(request.owner.clone(), request.amount, request.period) {
            Ok(grant) => report.grants.push(GrantReport {
                owner: grant.owner.to_string(),
                cpu: grant.cpu,
                requested: RateReport::new(grant.requested.amount, grant.requested.period),
                granted: RateReport::new(grant.granted.amount, grant.granted.period),
                incremental: grant.path == AdmissionPath::Incremental,
            }),
            Err(denied) => report.denied.push(DeniedReport {
                owner: request.owner.to_string(),
                reason: format!("line {}: {denied}", request.line),
            }),
        }
    }
    let plan = planner.plan();
    let violations = crate::check::check(
        &plan,
        &planner.grants(),
        &[],
        planner.quantum(),
        planner.cap(),
    );
    if let Some(first) = violations.first() {
        return Err(PlanReportError::SelfCheck {
            count: violations.len(),
            first: first.to_string(),
        });
    }
    report.cpus = plan
        .cpus
        .iter()
        .map(|schedule| CpuReport {
            cpu: schedule.cpu,
            cycle_ns: schedule.cycle.0,
            reserved_ppm: planner.utilisation_ppm(schedule.cpu),
            slots: schedule
                .slots
                .iter()
                .map(|slot| SlotReport {
                    start_ns: slot.start.0,
                    length_ns: slot.length.0,
                    owner: slot.owner.to_string(),
                })
                .collect(),
        })
        .collect();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_file_is_granted_denied_and_laid_out() {
        let requests = crate::parse_requests("a 1ms/4ms\nb 3ms/4ms\nc 1ms/8ms\n").unwrap();
        let report = plan_requests(1, Nanos::from_millis(1), 0.9, &requests).unwrap();
        assert_eq!(report.requests, 3);
        assert_eq!(report.grants.len() + report.denied.len(), 3);
        assert!(report.denied.iter().any(|denied| denied.owner == "b"));
        assert!(report.denied[0].reason.starts_with("line 2: "));
        assert_eq!(report.cpus.len(), 1);
        let reserved: u64 = report.cpus[0].slots.iter().map(|slot| slot.length_ns).sum();
        assert!(reserved > 0 && reserved <= report.cpus[0].cycle_ns);
        assert!(matches!(
            plan_requests(0, Nanos::from_millis(1), 0.9, &requests),
            Err(PlanReportError::Planner(_))
        ));
    }
}
