//! Sizing a `[[rtkit.reserve]]` program's thread by observation, as `rtlab reserve --auto` does:
//! the thread gets SCHED_RR at once (the D-Bus reply never waits), a short trace of its process
//! finds its period and CPU per activation, and [`rtlab_sched::auto_reserve::decide`] turns them
//! into a reservation (the percentile plus the margin, the window and backend this kernel can
//! enforce), which then replaces the SCHED_RR.
//!
//! Where tracing is not allowed (the hardened `rtlabd.service` keeps neither tracefs nor BPF), the
//! binary's observer falls back to the kernel's per-task counters (`rtlab_trace::counters`).
//!
//! The trace is not the daemon's to take: recording a program's scheduling needs the trace
//! crates, which sit beside the daemon, not below it. The binary that runs the daemon registers a
//! [`ThreadObserver`] (the one `reserve --auto` observes with) through [`set_observer`]; without
//! one, observed entries stay SCHED_RR and say why.

use rtlab_core::Nanos;
use rtlab_sched::auto_follow::FollowWindow;
use rtlab_sched::auto_reserve::{decide, AutoMachine, AutoReservation, ObservedThread};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

/// What an observation of a process found: its threads as `reserve --auto`'s decision reads
/// them, and what this machine can enforce.
#[derive(Clone, Debug)]
pub struct Observation {
    pub threads: Vec<ObservedThread>,
    pub machine: AutoMachine,
    /// How the threads were observed, for the log: "a trace", or "the kernel's per-task
    /// counters" with the reason tracing was not used.
    pub how: String,
}

/// Observes a process's threads (the binary's trace recorder).
pub trait ThreadObserver: Send + Sync {
    /// Observes process `pid` for `duration`, ending early when `stop` is set. An `Err` says why
    /// nothing could be observed.
    fn observe(&self, pid: u32, duration: Nanos, stop: &AtomicBool) -> Result<Observation, String>;

    /// Observes thread `tid` alone for one window of `duration` at low cost (no trace: the
    /// kernel's per-task counters, sampled from a thread at SCHED_FIFO `sampler_priority`), for a
    /// followed reservation (`rtkit::follow`); `None` once the thread has ended, or when `stop`
    /// was set mid-window (the sampler looks at it every sample, so a stop waits for one sample,
    /// not a window).
    fn observe_window(
        &self,
        tid: u32,
        duration: Nanos,
        sampler_priority: u32,
        stop: &AtomicBool,
    ) -> Option<FollowWindow>;
}

static OBSERVER: OnceLock<Arc<dyn ThreadObserver>> = OnceLock::new();

/// Registers the observer observed `[[rtkit.reserve]]` entries use (once per process; a second
/// call is ignored).
pub fn set_observer(observer: Arc<dyn ThreadObserver>) {
    let _ = OBSERVER.set(observer);
}

/// The registered observer, if any.
pub(super) fn observer() -> Option<Arc<dyn ThreadObserver>> {
    OBSERVER.get().cloned()
}

/// The reservation the observation calls for, for thread `tid` alone (no other thread of the
/// program, nor its waker, is reserved on its behalf); `Err` says why none (no regular period,
/// too few activations, more than a CPU).
pub fn size_thread(observation: &Observation, tid: u32) -> Result<AutoReservation, String> {
    let threads: Vec<ObservedThread> = observation
        .threads
        .iter()
        .filter(|thread| thread.tid == tid)
        .cloned()
        .map(|mut thread| {
            thread.in_target = true;
            thread.usual_waker = None;
            thread
        })
        .collect();
    if threads.is_empty() {
        return Err(format!("thread {tid} did not run while it was observed"));
    }
    let plan = decide(&threads, &observation.machine).map_err(|refused| refused.to_string())?;
    plan.reservations
        .into_iter()
        .find(|reservation| reservation.tid == tid)
        .ok_or_else(|| format!("thread {tid} needs no reservation"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(tid: u32, period: Option<Nanos>) -> ObservedThread {
        ObservedThread {
            tid,
            name: "data-loop.0".to_owned(),
            pid: Some(100),
            in_target: false,
            real_time: true,
            policy: "SCHED_RR".to_owned(),
            priority: 20,
            activations: 300,
            period,
            period_jitter: Some(Nanos(50_000)),
            cpu_per_cycle_high: Nanos(500_000),
            usual_waker: Some(7),
        }
    }

    fn machine() -> AutoMachine {
        AutoMachine {
            n_cpus: 2,
            deadline_overrun: Nanos(4_000_000),
            granularity_described: "4ms tick (HZ=250)".to_owned(),
            deadline_share_per_cpu: 0.9,
            deadline_preferred: true,
        }
    }

    #[test]
    fn only_the_asking_thread_is_sized_from_its_period_and_cpu() {
        let observation = Observation {
            threads: vec![
                thread(101, Some(Nanos(10_000_000))),
                thread(102, Some(Nanos(5_000_000))),
                thread(7, Some(Nanos(10_000_000))),
            ],
            machine: machine(),
            how: "a trace".to_owned(),
        };
        let reservation = size_thread(&observation, 101).unwrap();
        assert_eq!(reservation.tid, 101);
        assert_eq!(reservation.period, Nanos(10_000_000));
        // p99 500 µs plus 20 %.
        assert_eq!(reservation.need_per_activation, Nanos(600_000));
        assert_eq!(
            reservation.amount.0 * reservation.period.0,
            reservation.need_per_activation.0 * reservation.window.0
        );
    }

    #[test]
    fn a_thread_without_a_period_or_unseen_gets_a_reason() {
        let observation = Observation {
            threads: vec![thread(101, None)],
            machine: machine(),
            how: "a trace".to_owned(),
        };
        assert!(size_thread(&observation, 101)
            .unwrap_err()
            .contains("no regular period"));
        assert!(size_thread(&observation, 999)
            .unwrap_err()
            .contains("did not run"));
    }
}
