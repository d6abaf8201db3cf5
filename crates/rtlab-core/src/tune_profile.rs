//! What `rtlab tune --apply` and the profile half of `--revert` did, as plain data: rtlab-tune's
//! `profile_apply` fills it, rtlab-render's `tune_profile` writes it out.

use std::path::PathBuf;

/// What `--apply` came to.
#[derive(Clone, Debug, PartialEq)]
pub enum ProfileApplied {
    /// The tune was interrupted: no profile written.
    Interrupted,
    /// No setting was kept (`placebo_kept`: the placebo was, and is never part of a profile).
    NothingKept { placebo_kept: bool },
    /// The profile written and put in force.
    Written(ProfileWritten),
}

/// A profile written and put in force.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileWritten {
    /// The placebo was kept (noise) and left out.
    pub placebo_kept: bool,
    /// The settings kept, by name.
    pub kept: Vec<String>,
    /// The files written.
    pub written: Vec<PathBuf>,
    /// The values in force now, and those the kernel refused (IRQs that keep their affinity).
    pub applied: Vec<String>,
    pub refused: Vec<String>,
    /// The tuned profile's name, when its file was written too.
    pub tuned_profile: Option<String>,
    /// Whether systemd manages the system (then it was told), and what it said when it failed.
    pub systemd_manages: bool,
    pub reload_warning: Option<String>,
    /// The unit holding `cpu_dma_latency` at 0, when the profile has one, and what systemd said
    /// when starting it failed.
    pub holder_unit: Option<String>,
    pub start_warning: Option<String>,
}

/// What the profile half of `--revert` came to.
#[derive(Clone, Debug, PartialEq)]
pub enum ProfileReverted {
    /// There was none (its state file).
    NoProfile {
        state_file: PathBuf,
    },
    Removed(ProfileRemoved),
}

/// A profile removed.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileRemoved {
    /// What systemd said when stopping the units failed.
    pub stop_warning: Option<String>,
    pub systemd_manages: bool,
    pub reload_warning: Option<String>,
    /// The profile's units.
    pub units: Vec<String>,
    /// The files removed, the values put back, those that could not be.
    pub removed: Vec<PathBuf>,
    pub restored: Vec<String>,
    pub failed: Vec<String>,
    /// The tuned profile's name, when tuned had it selected.
    pub tuned_was_selected: Option<String>,
    /// The state file, which stays when a value could not be put back.
    pub state_file: PathBuf,
}
