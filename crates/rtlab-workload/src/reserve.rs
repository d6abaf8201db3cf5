//! Reservations for workload threads: through the rtlab daemon when its socket answers (so its
//! admission sees every other reservation on the machine), else in-process through
//! `rtlab_sched::enforce::Enforcer` (root only), exactly as the daemon would enforce them.
//! Every reservation is released at the end of the run; the threads are ours, so if rtlab dies
//! they die with it and neither the daemon nor the kernel keeps anything.

use crate::model::Reservation;
use rtlab_client::{Client, ReserveTarget};
use rtlab_plan::{GrantId, Owner};
use rtlab_sched::enforce::{BackendKind, Enforcement, Enforcer, ReserveRequest};
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReserveError {
    #[error("reservations need a running rtlab daemon or root (in-process enforcement): {0}")]
    Unavailable(String),
    #[error("reserving {reservation} for thread '{thread}': {message}")]
    Refused {
        thread: String,
        reservation: String,
        message: String,
    },
}

/// Who enforces the workload's reservations.
pub enum Reserver {
    Daemon {
        client: Client,
        grants: Vec<u64>,
    },
    InProcess {
        enforcer: Box<Enforcer>,
        state_dir: PathBuf,
        grants: Vec<GrantId>,
    },
}

impl std::fmt::Debug for Reserver {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.describe())
    }
}

/// In-process enforcers journal under `$TMPDIR/rtlab-workload-PID`.
const STATE_DIR_PREFIX: &str = "rtlab-workload-";

/// A workload killed with SIGKILL leaves its journal directory (its threads died with it, but a
/// cpuset partition the enforcer made may remain): the next in-process enforcer repairs what each
/// dead process's journal lists, then removes the directory.
fn repair_stale_state_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix(STATE_DIR_PREFIX))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let dir = entry.path();
        // Opening repairs what the journal lists; dropping reverts nothing more (no reservation).
        if Enforcer::open(&dir, None).is_ok() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

impl Reserver {
    /// The daemon if it answers a ping, else an in-process enforcer (needs root).
    pub fn open() -> Result<Reserver, ReserveError> {
        if let Ok(mut client) = Client::connect_default() {
            if client.ping().is_ok() {
                return Ok(Reserver::Daemon {
                    client,
                    grants: Vec::new(),
                });
            }
        }
        repair_stale_state_dirs();
        let state_dir =
            std::env::temp_dir().join(format!("{STATE_DIR_PREFIX}{}", std::process::id()));
        std::fs::create_dir_all(&state_dir).map_err(|error| {
            ReserveError::Unavailable(format!("creating {}: {error}", state_dir.display()))
        })?;
        match Enforcer::open(&state_dir, None) {
            Ok(enforcer) => Ok(Reserver::InProcess {
                enforcer: Box::new(enforcer),
                state_dir,
                grants: Vec::new(),
            }),
            Err(error) => {
                let _ = std::fs::remove_dir_all(&state_dir);
                Err(ReserveError::Unavailable(error.to_string()))
            }
        }
    }

    /// `daemon` or `in-process`.
    pub fn describe(&self) -> &'static str {
        match self {
            Reserver::Daemon { .. } => "the rtlab daemon",
            Reserver::InProcess { .. } => "in-process enforcement",
        }
    }

    /// Reserves for one thread; returns what was granted, for the record (`deadline 5ms/16ms`).
    pub fn reserve(
        &mut self,
        thread: &str,
        tid: u32,
        reservation: &Reservation,
    ) -> Result<String, ReserveError> {
        let refused = |message: String| ReserveError::Refused {
            thread: thread.to_owned(),
            reservation: reservation.to_string(),
            message,
        };
        match self {
            Reserver::Daemon { client, grants } => {
                let backend = reservation.backend.map(|backend| match backend {
                    BackendKind::Deadline => rtlab_client::Backend::Deadline,
                    BackendKind::Dispatch => rtlab_client::Backend::Dispatch,
                });
                let grant = client
                    .reserve(
                        ReserveTarget::Thread { tid },
                        reservation.amount,
                        reservation.period,
                        backend,
                    )
                    .map_err(|error| refused(error.to_string()))?;
                grants.push(grant.grant_id);
                Ok(format!("{} via daemon", grant.backend.as_str()))
            }
            Reserver::InProcess {
                enforcer, grants, ..
            } => {
                let grant = enforcer
                    .reserve(ReserveRequest {
                        owner: Owner::Thread(tid),
                        threads: vec![tid],
                        amount: reservation.amount,
                        period: reservation.period,
                        backend: reservation.backend,
                        reclaim: false,
                    })
                    .map_err(|error| refused(error.to_string()))?;
                grants.push(grant.grant.id);
                Ok(match grant.deadline_params {
                    Some(params) => format!(
                        "deadline runtime {} period {}",
                        params.runtime, params.period
                    ),
                    None => format!("{} on CPU {:?}", grant.backend, grant.cpu),
                })
            }
        }
    }

    /// Releases every reservation made (before the threads exit, so they are restored alive).
    pub fn release_all(&mut self) {
        match self {
            Reserver::Daemon { client, grants } => {
                for grant_id in grants.drain(..) {
                    let _ = client.release(rtlab_client::Release::Grant { grant_id });
                }
            }
            Reserver::InProcess {
                enforcer, grants, ..
            } => {
                for grant in grants.drain(..) {
                    let _ = enforcer.release(grant);
                }
                enforcer.revert_all();
            }
        }
    }
}

impl Drop for Reserver {
    fn drop(&mut self) {
        self.release_all();
        if let Reserver::InProcess { state_dir, .. } = self {
            let _ = std::fs::remove_dir_all(&*state_dir);
        }
    }
}
