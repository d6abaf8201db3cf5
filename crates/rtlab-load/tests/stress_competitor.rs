//! Competitor threads spin at their policy, stop when asked or at their deadline, and the
//! watchdog demotes an RT thread that would outlive the run.

use rtlab_load::competitor::{self, CompetitorSpec, Guarded, StopReason, Watchdog};
use rtlab_sys::sched::{thread_policy, Policy};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn thread_alive(tid: u32) -> bool {
    std::path::Path::new(&format!("/proc/self/task/{tid}")).exists()
}

#[test]
fn nice_competitor_spins_until_asked_to_stop() {
    let spec: CompetitorSpec = "other:5@0".parse().unwrap();
    let far = rtlab_sys::clock::monotonic_ns() + 60_000_000_000;
    let running = competitor::start(&[spec], far).unwrap();
    // Wait until the kernel has charged it CPU time (bounded: 30 s).
    let tid = running.thread_ids()[0];
    let ticks = rtlab_sys::load_syscalls::clock_ticks_per_second();
    for _ in 0..600 {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
        let usage = rtlab_sys::load_syscalls::parse_thread_usage(&stat, &status, ticks).unwrap();
        if usage.cpu_time_ns >= 50_000_000 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let reports = running.stop();
    assert_eq!(reports.len(), 1);
    let report = &reports[0];
    assert_eq!(report.stop_reason, StopReason::Requested);
    assert!(report.usage.cpu_time_ns >= 50_000_000, "{report:?}");
    assert!(!thread_alive(report.thread_id));
}

#[test]
#[ignore = "needs root (SCHED_FIFO)"]
fn rt_competitor_stops_itself_at_the_deadline() {
    rtlab_testkit::require_realtime("SCHED_FIFO competitors");
    let cpu = *rtlab_sys::cpu::online_cpus().unwrap().last().unwrap();
    let spec: CompetitorSpec = format!("fifo:1@{cpu}").parse().unwrap();
    let deadline = rtlab_sys::clock::monotonic_ns() + 300_000_000;
    let running = competitor::start(&[spec], deadline).unwrap();
    // Wait (by condition) for the spinner to pass its deadline; never asked to stop.
    while rtlab_sys::clock::monotonic_ns() < deadline + 100_000_000 {
        std::thread::sleep(Duration::from_millis(50));
    }
    let reports = running.stop();
    let report = &reports[0];
    assert!(
        matches!(
            report.stop_reason,
            StopReason::Deadline | StopReason::Watchdog
        ),
        "{report:?}"
    );
    assert!(report.stopped_ns >= deadline, "{report:?}");
    assert!(!thread_alive(report.thread_id));
}

#[test]
#[ignore = "needs root (SCHED_FIFO)"]
fn watchdog_demotes_an_rt_thread_that_ignores_its_deadline() {
    rtlab_testkit::require_realtime("SCHED_FIFO competitors");
    let thread_id = Arc::new(AtomicU32::new(0));
    let exited = Arc::new(AtomicBool::new(false));
    let (id, done) = (Arc::clone(&thread_id), Arc::clone(&exited));
    // A misbehaving spinner: FIFO 1 until someone takes its RT policy away (bounded: 30 s).
    let spinner = std::thread::spawn(move || {
        rtlab_sys::sched::set_current_thread_policy(Policy::Fifo { priority: 1 }).unwrap();
        id.store(rtlab_sys::cpu::current_tid(), Ordering::Release);
        let give_up = rtlab_sys::clock::monotonic_ns() + 30_000_000_000;
        let mut demoted = false;
        while rtlab_sys::clock::monotonic_ns() < give_up {
            if matches!(thread_policy(0), Ok(Policy::Other { .. })) {
                demoted = true;
                break;
            }
        }
        let _ = rtlab_sys::sched::set_current_thread_policy(Policy::Other { nice: 0 });
        done.store(true, Ordering::Release);
        demoted
    });
    while thread_id.load(Ordering::Acquire) == 0 {
        std::thread::yield_now();
    }
    let tid = thread_id.load(Ordering::Acquire);
    let watchdog = Watchdog::start(
        rtlab_sys::clock::monotonic_ns() + 200_000_000,
        vec![Guarded {
            thread_id: tid,
            exited: Arc::clone(&exited),
        }],
    )
    .unwrap();
    let demoted_ids = watchdog.wait();
    assert_eq!(demoted_ids, vec![tid]);
    assert!(
        spinner.join().unwrap(),
        "the spinner saw its policy become SCHED_OTHER"
    );
}

#[test]
fn watchdog_leaves_exited_threads_alone_and_can_be_cancelled() {
    let exited = Arc::new(AtomicBool::new(true));
    let watchdog = Watchdog::start(
        rtlab_sys::clock::monotonic_ns() + 50_000_000,
        vec![Guarded {
            thread_id: std::process::id(),
            exited,
        }],
    )
    .unwrap();
    assert!(watchdog.wait().is_empty());
    let cancelled = Watchdog::start(
        rtlab_sys::clock::monotonic_ns() + 60_000_000_000,
        Vec::new(),
    )
    .unwrap();
    assert!(cancelled.finish().is_empty());
}

#[test]
fn unavailable_cpu_is_a_start_error() {
    let spec: CompetitorSpec = "other:0@4000".parse().unwrap();
    let error = competitor::start(&[spec], rtlab_sys::clock::monotonic_ns() + 1_000_000_000)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("other:0@4000") && error.contains("CPU 4000"),
        "{error}"
    );
}
