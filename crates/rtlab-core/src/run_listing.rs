//! One run of the history as `rtlab history` lists it (rtlab-store reads it from its database).

/// One line of `rtlab history`.
#[derive(Clone, Debug, PartialEq)]
pub struct RunListing {
    pub id: String,
    pub started_at: String,
    pub duration_ns: u64,
    pub hostname: String,
    pub kernel: String,
    pub n_series: u64,
    /// Largest rt-high (or any) wake-up latency in the run, ns.
    pub worst_wakeup_ns: u64,
    pub interrupted: bool,
    pub summary: String,
}
