//! A reserved CPU-bound thread gets its amount beside SCHED_FIFO 95 spinners on every CPU (root
//! and tracefs only). A binary of its own, so its spinners never run beside other tests.
//!
//! The bar is a share of windows, not every window: on a VM the hypervisor can take a CPU for
//! milliseconds (steal) and the kernel's fair server (a deadline entity) takes its 5 % from RT
//! threads, and neither is under rtlab's control. Without a reservation the thread gets about
//! nothing while the spinners run, so the share tells a working backend from a broken one.

use std::time::{Duration, Instant};

use rtlab_analysis::supply::{sliding_window_supply, DEFAULT_STEP};
use rtlab_core::Nanos;
use rtlab_sched::enforce::{BackendKind, Enforcement, Enforcer, ReserveRequest};
use rtlab_sched::Owner;
use rtlab_sys::sched::Policy;
use rtlab_trace::supply::RunRecorder;

mod support;
use support::spinner::Spinner;

/// Share of 10 ms windows in which the measured thread got 2 ms, over `record` with FIFO 95
/// spinners on every CPU.
fn share_beside_spinners(backend: Option<BackendKind>) -> f64 {
    let directory = std::env::temp_dir().join(format!(
        "rtlab-enforce-supply-{}-{backend:?}",
        std::process::id()
    ));
    let measured = Spinner::start(Instant::now() + Duration::from_secs(10), None, None, None)
        .expect("spinner");
    let mut enforcer = Enforcer::open(&directory, backend).unwrap();
    if let Some(backend) = backend {
        enforcer
            .reserve(ReserveRequest {
                owner: Owner::Thread(measured.tid),
                threads: vec![measured.tid],
                amount: Nanos::from_millis(2),
                period: Nanos::from_millis(10),
                backend: Some(backend),
            })
            .unwrap();
    }
    // Trace first, then the spinners, and judge only the windows while they spin (they stop on
    // their own after 1.2 s; the judged stretch is 800 ms of it).
    let mut recorder = RunRecorder::start(measured.tid).unwrap();
    let spinners: Vec<Spinner> = rtlab_sys::cpu::online_cpus()
        .unwrap()
        .into_iter()
        .map(|cpu| {
            Spinner::start(
                Instant::now() + Duration::from_millis(1200),
                Some(Policy::Fifo { priority: 95 }),
                Some(cpu),
                None,
            )
            .expect("spinner")
        })
        .collect();
    let from = Nanos(rtlab_sys::clock::monotonic_ns());
    let to = Nanos(from.0 + 800_000_000);
    while rtlab_sys::clock::monotonic_ns() < to.0 {
        std::thread::sleep(Duration::from_millis(100));
        recorder.poll().unwrap();
    }
    let runs = recorder.finish().unwrap();
    drop(spinners);
    drop(enforcer);
    let _ = std::fs::remove_dir_all(&directory);
    let report = sliding_window_supply(
        &runs.runs,
        from,
        to,
        Nanos::from_millis(2),
        Nanos::from_millis(10),
        DEFAULT_STEP,
    )
    .unwrap();
    eprintln!("{backend:?}: {report:?}");
    report.share_meeting
}

#[test]
#[ignore = "needs root and tracefs"]
fn a_reserved_thread_gets_its_amount_beside_fifo_spinners() {
    assert!(
        rtlab_sys::sched::realtime_permitted(),
        "needs root or CAP_SYS_NICE (run as root: cargo test -- --include-ignored)"
    );
    // This thread must not starve under the spinners it starts; its children start at SCHED_OTHER.
    rtlab_sys::thread_control::set_thread_policy_with_flags(
        0,
        Policy::Fifo { priority: 97 },
        rtlab_sys::thread_control::SCHED_FLAG_RESET_ON_FORK,
    )
    .unwrap();
    let unreserved = share_beside_spinners(None);
    let deadline = share_beside_spinners(Some(BackendKind::Deadline));
    let dispatch = share_beside_spinners(Some(BackendKind::Dispatch));
    rtlab_sys::sched::set_current_thread_policy(Policy::Other { nice: 0 }).unwrap();
    assert!(unreserved < 0.5, "unreserved share {unreserved}");
    assert!(deadline >= 0.95, "deadline share {deadline}");
    // The dispatch backend raises the thread at its slots, but on this VM it does not hold the
    // amount in every window: 80-94 % of windows by the thread's own clock and 88-99 % by this
    // trace (BENCHMARKS.md, issue 11; the fair server and the hypervisor are the candidates). The
    // test holds it to what it reliably does — most windows where the unreserved thread got
    // none — not to the deadline backend's bar.
    assert!(
        dispatch >= 0.5 && dispatch > unreserved + 0.4,
        "dispatch share {dispatch} (unreserved {unreserved})"
    );
}
