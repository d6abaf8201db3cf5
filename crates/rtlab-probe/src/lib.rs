//! rtlab-probe: the measuring threads, hand-off chains, stress loads and competitor threads.
//!
//! The probe is what turns "how late does this machine run my thread?" into numbers: pinned
//! periodic timer threads per CPU and priority class, and waiter threads woken by them, each
//! recording into preallocated histograms. Everything here must not measure itself: the sample
//! path does no allocation, no locking, no logging and no syscall beyond the clock read, the
//! futex hand-off and the absolute sleep.

pub mod buffer_experiment;
pub mod class;
pub mod competitor;
pub mod probe;
pub mod profile;
pub mod recorder;
pub mod schedule;
pub mod stress;
pub mod timers;

pub use class::Class;
pub use probe::{
    LateSample, LateSampleSink, Probe, ProbeConfig, ProbeError, ProbeResult, RunningProbe,
    SeriesKey, SeriesResult,
};
