//! Root-only: the application-trace programs load, record the target's switches, futex calls and
//! new threads (added in the kernel at their fork), and leave nothing behind when dropped.

use rtlab_testkit::wait;

use rtlab_bpf::{program_ids_of_process, still_loaded, AppBpfRecorder};
use std::time::Duration;

#[test]
#[ignore = "needs root and BPF"]
fn the_target_is_recorded_its_new_threads_followed_and_nothing_left_on_drop() {
    let mut recorder = AppBpfRecorder::start(1 << 20, &[]).expect("the programs load as root");
    assert!(recorder
        .enabled_events()
        .contains(&"syscalls:sys_enter_futex".to_owned()));
    let ids = program_ids_of_process(std::process::id()).expect("fdinfo");
    assert!(ids.len() >= 14, "this process holds its programs: {ids:?}");
    let pid = std::process::id();
    let tid = rtlab_sys::cpu::current_tid();
    recorder.add_process(pid).expect("process");
    recorder.add_thread(tid, pid).expect("thread");
    // A new thread sleeps and takes a contended lock: its fork, switches and futex calls.
    let lock = std::sync::Arc::new(std::sync::Mutex::new(()));
    let guard = lock.lock().unwrap();
    let child_lock = lock.clone();
    let child = std::thread::spawn(move || {
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(2));
        }
        drop(child_lock.lock().unwrap());
        rtlab_sys::cpu::current_tid()
    });
    std::thread::sleep(Duration::from_millis(50));
    drop(guard);
    let child_tid = child.join().unwrap() as i32;
    let mut kinds = std::collections::BTreeMap::<u8, u64>::new();
    let mut forked = false;
    let mut child_switches = 0;
    let mut child_futex = 0;
    let (read, wrong) = recorder.drain(|record| {
        *kinds.entry(record[10]).or_default() += 1;
        let record_tid = i32::from_le_bytes(record[12..16].try_into().unwrap());
        match record[10] {
            4 if record_tid == child_tid => forked = true,
            1 if record_tid == child_tid => child_switches += 1,
            8 if record_tid == child_tid => child_futex += 1,
            _ => {}
        }
    });
    assert_eq!(wrong, 0);
    assert!(read > 0);
    assert!(forked, "the fork of the new thread: {kinds:?}");
    assert!(child_switches >= 5, "{child_switches} switches: {kinds:?}");
    assert!(
        child_futex >= 1,
        "the contended lock's futex wait: {kinds:?}"
    );
    assert!(kinds.contains_key(&14), "names: {kinds:?}");
    let counters = recorder.counters().expect("counters");
    assert!(
        counters.records >= read && counters.lost == 0,
        "{counters:?}"
    );
    drop(recorder);
    let left = || still_loaded(&ids).expect("BPF_PROG_GET_NEXT_ID works as root");
    wait::eventually(Duration::from_secs(10), || left().is_empty());
    let left = left();
    assert!(left.is_empty(), "still loaded after drop: {left:?}");
}
