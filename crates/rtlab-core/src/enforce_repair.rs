//! What the reservation enforcer (rtlab-sched) found and repaired of a previous instance when it
//! opened, as plain data: `rtlab daemon` says it when it starts.

use std::path::PathBuf;

/// What the enforcer's `open` found and repaired from a previous instance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Repair {
    /// Threads put back to the policy and affinity they had.
    pub restored: Vec<u32>,
    /// Threads the journal named that are gone (or whose id now names another thread).
    pub gone: Vec<u32>,
    /// Threads that exist but could not be restored, with the error.
    pub failed: Vec<(u32, String)>,
    /// Journal lines that could not be read (a torn last line after a crash).
    pub unreadable: Vec<JournalLineError>,
    /// Cpuset directories the previous instance made, removed now.
    pub cpusets_removed: Vec<PathBuf>,
    /// Cpuset changes that could not be undone, one line each.
    pub cpuset_failures: Vec<String>,
}

/// A journal line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}:{line}: {message}")]
pub struct JournalLineError {
    pub path: String,
    pub line: usize,
    pub message: String,
}
