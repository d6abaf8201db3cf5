//! The Windows side of the session (`cfg(windows)`): a run, the timer study and the change
//! experiment, each as a library call that returns the same Run record (`rtlab.run/1`) the Linux
//! build writes, so history, show, forecast, check, compare and report read it unchanged.
//!
//! What has no Windows counterpart (explain over tracefs/BPF, load, competitors, SCHED_DEADLINE
//! reservations, the daemon) is not built here; the CLI says so when asked.

mod run;
mod timers;

pub use run::{run, AnnounceOnce, WindowsRunConfig, WindowsSessionError};
pub use timers::{
    audit, change_experiment, timer_study, ChangeSettings, StudySettings, WindowsStudyRequest,
};

/// The CPU measuring threads are pinned to when the caller names none: the last one.
pub fn last_cpu() -> usize {
    std::thread::available_parallelism()
        .map(|count| count.get() - 1)
        .unwrap_or(0)
}

/// The warning every record made under Wine carries: its timings are the Linux host's.
pub(crate) fn wine_warning(host: &rtlab_core::Host) -> Option<String> {
    let wine = host.windows.as_ref()?.wine.as_ref()?;
    Some(format!(
        "measured under Wine {wine}: the timings are the Linux host's, not Windows'; run rtlab.exe on Windows for Windows figures"
    ))
}
