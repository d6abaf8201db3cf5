//! A CPU-bound thread for rtlab-sched's enforcement tests and its supply benchmark
//! (`crates/rtlab-sched/examples/supply.rs`): optionally pinned, at a policy, spinning all
//! the time or a duty cycle, and stopping on its own at `until` (or when dropped) at SCHED_OTHER,
//! so no real-time spinner outlives a failed test.
//!
//! A spinner can also record its own stalls ([`Spinner::start_recording`]): every gap of at least
//! [`STALL_NS`] between two consecutive CLOCK_MONOTONIC reads of its loop. A CPU-bound thread that
//! is not running cannot read the clock, so the gaps are exactly when it did not run as it sees it
//! (preempted, interrupted, or its vCPU stopped by the hypervisor), independent of tracing.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rtlab_sys::sched::Policy;

/// A spinning thread; `tid` is its thread id.
pub struct Spinner {
    pub tid: u32,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Vec<(u64, u64)>>>,
}

/// The least gap between two clock reads a recording spinner keeps as a stall.
pub const STALL_NS: u64 = 2_000;
/// How many stalls a recording spinner keeps at most (preallocated: 16 MiB).
pub const MAX_STALLS: usize = 1 << 20;

/// The thread could not be pinned or set to its policy (it has already ended).
const FAILED: u32 = u32::MAX;

impl Spinner {
    /// Starts a thread pinned to `cpu` (if given) at `policy` (if given; else it stays
    /// SCHED_OTHER) that spins until `until`, for `duty.0` of every `duty.1` when a duty cycle is
    /// given. Fails when pinning or the policy is refused.
    pub fn start(
        until: Instant,
        policy: Option<Policy>,
        cpu: Option<usize>,
        duty: Option<(Duration, Duration)>,
    ) -> Result<Spinner, String> {
        Spinner::spawn(until, policy, cpu, duty, false)
    }

    /// A SCHED_OTHER spinner on any CPU that records its stalls; [`Spinner::finish`] returns them.
    #[allow(dead_code)]
    pub fn start_recording(until: Instant) -> Result<Spinner, String> {
        Spinner::spawn(until, None, None, None, true)
    }

    /// Stops the spinner and returns the stalls it recorded, `(start, end)` CLOCK_MONOTONIC ns.
    #[allow(dead_code)]
    pub fn finish(mut self) -> Vec<(u64, u64)> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .take()
            .and_then(|handle| handle.join().ok())
            .unwrap_or_default()
    }

    fn spawn(
        until: Instant,
        policy: Option<Policy>,
        cpu: Option<usize>,
        duty: Option<(Duration, Duration)>,
        record: bool,
    ) -> Result<Spinner, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let tid = Arc::new(AtomicU32::new(0));
        let (stop_inner, tid_inner) = (Arc::clone(&stop), Arc::clone(&tid));
        let handle = std::thread::spawn(move || {
            let pinned = cpu.is_none_or(|cpu| rtlab_sys::cpu::pin_current_thread(cpu).is_ok());
            let set = policy
                .is_none_or(|policy| rtlab_sys::sched::set_current_thread_policy(policy).is_ok());
            if !pinned || !set {
                tid_inner.store(FAILED, Ordering::SeqCst);
                return Vec::new();
            }
            let mut stalls: Vec<(u64, u64)> = Vec::new();
            if record {
                stalls.reserve_exact(MAX_STALLS);
                let until_ns = rtlab_sys::clock::monotonic_ns()
                    + until.saturating_duration_since(Instant::now()).as_nanos() as u64;
                tid_inner.store(rtlab_sys::cpu::current_tid(), Ordering::SeqCst);
                let mut last = rtlab_sys::clock::monotonic_ns();
                while !stop_inner.load(Ordering::Relaxed) && last < until_ns {
                    let now = rtlab_sys::clock::monotonic_ns();
                    if now - last >= STALL_NS && stalls.len() < MAX_STALLS {
                        stalls.push((last, now));
                    }
                    last = now;
                }
                // A stall still going on when the stop came ends now: without this, a thread
                // starved until the stop would read as having run throughout.
                let now = rtlab_sys::clock::monotonic_ns();
                if now - last >= STALL_NS && stalls.len() < MAX_STALLS {
                    stalls.push((last, now));
                }
                return stalls;
            }
            tid_inner.store(rtlab_sys::cpu::current_tid(), Ordering::SeqCst);
            let mut cycle_start = Instant::now();
            while !stop_inner.load(Ordering::Relaxed) && Instant::now() < until {
                if let Some((busy, cycle)) = duty {
                    if cycle_start.elapsed() >= busy {
                        std::thread::sleep(cycle - busy);
                        cycle_start = Instant::now();
                    }
                }
                std::hint::spin_loop();
            }
            // Never leave a thread at RT priority, even if the caller failed halfway.
            let _ = rtlab_sys::sched::set_current_thread_policy(Policy::Other { nice: 0 });
            stalls
        });
        // Sleep, not yield: a real-time caller that yields never lets a new SCHED_OTHER thread run
        // on a CPU that RT spinners hold.
        while tid.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let spinner = Spinner {
            tid: tid.load(Ordering::SeqCst),
            stop,
            handle: Some(handle),
        };
        if spinner.tid == FAILED {
            return Err(format!(
                "spinner: could not pin to CPU {cpu:?} or set {policy:?}"
            ));
        }
        Ok(spinner)
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// The thread's own view of when it ran: `[from, to)` less its stalls.
#[allow(dead_code)]
pub fn runs_between_stalls(
    stalls: &[(u64, u64)],
    from: u64,
    to: u64,
) -> Vec<(rtlab_core::Nanos, rtlab_core::Nanos)> {
    let mut runs = Vec::new();
    let mut start = from;
    for &(stall_start, stall_end) in stalls {
        if stall_end <= from || stall_start >= to {
            continue;
        }
        if stall_start > start {
            runs.push((rtlab_core::Nanos(start), rtlab_core::Nanos(stall_start)));
        }
        start = start.max(stall_end);
    }
    if start < to {
        runs.push((rtlab_core::Nanos(start), rtlab_core::Nanos(to)));
    }
    runs
}
