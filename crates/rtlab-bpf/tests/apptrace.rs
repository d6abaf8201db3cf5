//! Root-only: the application-trace programs load, record the target's switches, futex calls and
//! new threads (added in the kernel at their fork), and leave nothing behind when dropped.

use rtlab_bpf::{loaded_program_ids, program_ids_of_process, AppBpfRecorder};
use std::time::{Duration, Instant};

fn gettid() -> u32 {
    std::fs::read_link("/proc/thread-self")
        .expect("thread-self")
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(|name| name.parse().ok())
        .expect("tid")
}

#[test]
#[ignore = "needs root and BPF"]
fn the_target_is_recorded_its_new_threads_followed_and_nothing_left_on_drop() {
    let mut recorder = AppBpfRecorder::start(1 << 20).expect("the programs load as root");
    assert!(recorder
        .enabled_events()
        .contains(&"syscalls:sys_enter_futex".to_owned()));
    let ids = program_ids_of_process(std::process::id()).expect("fdinfo");
    assert!(ids.len() >= 14, "this process holds its programs: {ids:?}");
    let pid = std::process::id();
    let tid = gettid();
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
        gettid()
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
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let loaded = loaded_program_ids().expect("BPF_PROG_GET_NEXT_ID works as root");
        let left: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|id| loaded.contains(id))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still loaded after drop: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
