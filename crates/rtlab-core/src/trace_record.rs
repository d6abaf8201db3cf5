//! What `rtlab trace record` did (its progress after each poll, its summary at the end): filled
//! by rtlab-trace's `record`, which re-exports them as `record::RecordProgress` and
//! `record::RecordSummary`; rtlab-render's `trace_record` writes them out.

/// Progress, after each poll.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordProgress {
    pub elapsed_ns: u64,
    pub n_events: u64,
    pub bytes_written: u64,
    pub lost_events: u64,
    pub n_threads: usize,
}

/// What the recording did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordSummary {
    pub progress: RecordProgress,
    pub interrupted: bool,
    pub enabled_events: Vec<String>,
    pub removed_stale_instances: Vec<String>,
    pub target_pids: Vec<u32>,
    pub owners_found: u64,
    /// `bpf` or `tracefs`.
    pub recorder: String,
    /// Why `auto` did not use the BPF recorder (it did not load, or cycle markers were asked for).
    pub bpf_unavailable: Option<String>,
    /// Cycle markers and work-done markers recorded.
    pub cycle_markers: u64,
    pub work_done_markers: u64,
}
