//! rtlab-load: the load a run measures under — built-in stressors, named profiles and RT
//! competitor threads.
//!
//! A latency figure without its load means nothing, so the load is part of rtlab: `stress`
//! holds the seven stressors (SCHED_OTHER worker threads under a duty cycle, each reporting what
//! it consumed), `profile` the named workload classes of paper 002 as stressor mixes, and
//! `competitor` the spinners at a chosen policy and priority of paper 003 with their watchdog.
//! Nothing here measures: the measuring threads are rtlab-probe's, and rtlab-session starts and
//! stops the load around a run. Every thread started here stops on its own at the run's deadline
//! (or on the stop flag), and dropping a running load stops and joins its threads.

// Linux only: the loads' threads read and set what only Linux has (per-thread usage in /proc,
// sched_setattr); Windows has no load yet.
cfg_if::cfg_if! {
    if #[cfg(target_os = "linux")] {
        pub mod competitor;
        pub mod profile;
        pub mod stress;
    }
}
