//! What `reserve --auto` decides against on this machine: `auto_reserve::AutoMachine` read from
//! what the kernel enforces (`enforce::MachineFacts`), for the CLI and the daemon's
//! `[[rtkit.reserve]]` observer alike.

use crate::auto_reserve::AutoMachine;
use crate::enforce::{BackendKind, EnforceError, MachineFacts};

/// This machine as `auto_reserve::decide` reads it: its CPUs, the SCHED_DEADLINE overrun its
/// tick allows, the share SCHED_DEADLINE may take of a CPU (the kernel's limit less its fair
/// server, at most 90 %), and whether SCHED_DEADLINE is its best backend.
pub fn detect() -> Result<AutoMachine, EnforceError> {
    let facts = MachineFacts::detect()?;
    let deadline_share_per_cpu = (facts.deadline_limit - facts.fair_server_share).clamp(0.0, 0.9);
    Ok(AutoMachine {
        n_cpus: facts.cpus.len(),
        deadline_overrun: facts.granularity.overrun(),
        granularity_described: facts.granularity.describe(),
        deadline_share_per_cpu,
        deadline_preferred: facts.best_backend() == BackendKind::Deadline,
    })
}
