//! rtlab-probe: the measuring threads and hand-off chains (the load they measure under is
//! rtlab-load's).
//!
//! The probe is what turns "how late does this machine run my thread?" into numbers: pinned
//! periodic timer threads per CPU and priority class, and waiter threads woken by them, each
//! recording into preallocated histograms. Everything here must not measure itself: the sample
//! path does no allocation, no locking, no logging and no syscall beyond the clock read, the
//! futex hand-off and the absolute sleep.

pub mod recorder;
pub mod schedule;
#[cfg(windows)]
pub mod windows;

// Linux only: the measuring threads (Windows has its own in `windows`).
cfg_if::cfg_if! {
    if #[cfg(target_os = "linux")] {
        pub mod buffer_experiment;
        pub mod class;
        pub mod probe;
        pub mod timers;
    }
}

#[cfg(target_os = "linux")]
pub use class::Class;
#[cfg(target_os = "linux")]
pub use probe::{
    LateSample, LateSampleSink, Probe, ProbeConfig, ProbeError, ProbeResult, RunningProbe,
    SeriesKey, SeriesResult,
};
