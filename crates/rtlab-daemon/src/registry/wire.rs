//! Wire conversions: enforcement errors, backends and what the kernel holds, and a grant as
//! `rtlab_core::rpc` puts them on the wire.

use super::{GrantRecord, Registry};
use rtlab_core::rpc::{
    self, ErrorCode, GrantInfo, RpcError, WireDeadlineParams, WireKernelHeld, WireRate,
};
use rtlab_plan::{GrantId, PlannerError};
use rtlab_sched::enforce::{BackendKind, EnforceError, HeldSource, KernelAdmission, KernelHeld};
use std::time::SystemTime;

pub(super) fn error(code: ErrorCode, message: impl Into<String>) -> RpcError {
    RpcError::new(code, message)
}

/// Maps an enforcement error to its wire error.
pub fn enforce_error(failure: EnforceError) -> RpcError {
    let code = match &failure {
        EnforceError::Denied(_) => ErrorCode::Denied,
        EnforceError::Infeasible(_) => ErrorCode::Infeasible,
        EnforceError::Planner(PlannerError::UnknownGrant(_))
        | EnforceError::Planner(PlannerError::UnknownConstraint(_))
        | EnforceError::ThreadNotManaged(_) => ErrorCode::NotFound,
        EnforceError::Planner(_) => ErrorCode::Denied,
        EnforceError::Unenforceable { .. } => ErrorCode::Unenforceable,
        EnforceError::NoSuchThread(_) => ErrorCode::NoSuchThread,
        EnforceError::ThreadAlreadyManaged(_) => ErrorCode::AlreadyReserved,
        EnforceError::System { .. } => ErrorCode::System,
        EnforceError::OverShare { .. } => ErrorCode::Limit,
    };
    let message = match &failure {
        EnforceError::System { .. } => rtlab_core::error_chain::error_chain(&failure),
        _ => failure.to_string(),
    };
    error(code, message)
}

pub(super) fn backend_kind(backend: rpc::Backend) -> BackendKind {
    match backend {
        rpc::Backend::Deadline => BackendKind::Deadline,
        rpc::Backend::Dispatch => BackendKind::Dispatch,
    }
}

/// A wire backend from an enforcement backend.
pub fn wire_backend(backend: BackendKind) -> rpc::Backend {
    match backend {
        BackendKind::Deadline => rpc::Backend::Deadline,
        BackendKind::Dispatch => rpc::Backend::Dispatch,
    }
}

/// What a reservation really holds, on the wire.
fn wire_held(held: KernelHeld) -> WireKernelHeld {
    let share = held.share();
    let mut wire = WireKernelHeld {
        read_from: String::new(),
        runtime_ns: held.runtime.0,
        window_ns: held.window.0,
        share,
        tid: None,
        deadline_ns: None,
        cpu: None,
        slots_per_window: None,
        policy: None,
        reclaim: false,
    };
    match held.source {
        HeldSource::SchedGetattr {
            tid,
            deadline,
            reclaim,
        } => {
            wire.read_from = "sched_getattr".to_owned();
            wire.tid = Some(tid);
            wire.deadline_ns = Some(deadline.0);
            wire.reclaim = reclaim;
        }
        HeldSource::NotDeadline { tid, policy } => {
            wire.read_from = "not_deadline".to_owned();
            wire.tid = Some(tid);
            wire.policy = Some(policy);
        }
        HeldSource::DispatcherSlots {
            cpu,
            slots_per_window,
        } => {
            wire.read_from = "dispatcher".to_owned();
            wire.cpu = Some(cpu);
            wire.slots_per_window = Some(slots_per_window);
        }
    }
    wire
}

fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_millis(time).to_string()
}

impl Registry {
    pub(super) fn info(&self, id: GrantId, record: &GrantRecord) -> GrantInfo {
        let enforced = &record.enforced;
        GrantInfo {
            grant_id: id.0,
            owner_uid: record.owner_uid,
            owner: enforced.grant.owner.to_string(),
            threads: record.threads.values().cloned().collect(),
            requested: WireRate {
                amount_ns: enforced.grant.requested.amount.0,
                period_ns: enforced.grant.requested.period.0,
            },
            granted: WireRate {
                amount_ns: enforced.grant.granted.amount.0,
                period_ns: enforced.grant.granted.period.0,
            },
            backend: wire_backend(enforced.backend),
            cpu: enforced.cpu,
            planner_cpu: enforced.grant.cpu,
            kernel_admission: match enforced.kernel_admission {
                KernelAdmission::Accepted => "accepted".to_owned(),
                KernelAdmission::NotApplicable => "not_applicable".to_owned(),
            },
            deadline_params: enforced.deadline_params.map(|params| WireDeadlineParams {
                runtime_ns: params.runtime.0,
                deadline_ns: params.deadline.0,
                period_ns: params.period.0,
            }),
            since: rfc3339(record.since),
            lingering_until: record.lingering_until.map(|(_, wall)| rfc3339(wall)),
            kernel_held: self.enforcement.held_by_kernel(id).map(wire_held),
        }
    }
}
