//! A CPU-bound thread given SCHED_DEADLINE, released, and given it again: does it run? (root)
//!
//! Each cycle reserves 1 ms/10 ms for a spinning thread for 30 ms, switches it back to
//! SCHED_OTHER (through `set_thread_policy_with_flags`, as the enforcer releases), waits GAP_MS,
//! reserves 1 ms/10 ms again and counts the CPU time the thread gets in the next 300 ms (10 %
//! of it is 30 ms). A cycle where it gets under 5 ms is a stall: the kernel left the thread
//! throttled with no replenishment coming (ARCHITECTURE.md, "Known problems").
//!
//!   cargo run --release -p rtlab-sys --example deadline_restart -- [CYCLES=40] [GAP_MS=30]

use rtlab_sys::sched::Policy;
use rtlab_sys::thread_control::{set_thread_policy_with_flags, thread_cpu_clock_ns};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut arguments = std::env::args().skip(1);
    let cycles: u32 = arguments.next().map_or(Ok(40), |text| text.parse())?;
    let gap = Duration::from_millis(arguments.next().map_or(Ok(30), |text| text.parse())?);
    let stop = Arc::new(AtomicBool::new(false));
    let (tid_sender, tid_receiver) = std::sync::mpsc::channel();
    let spinning = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            tid_sender.send(rtlab_sys::cpu::current_tid()).unwrap();
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    let tid = tid_receiver.recv()?;
    let ten_percent = Policy::Deadline {
        runtime_ns: 1_000_000,
        deadline_ns: 10_000_000,
        period_ns: 10_000_000,
    };
    let other = Policy::Other { nice: 0 };
    let mut stalls = 0;
    let result = (|| -> std::io::Result<()> {
        for cycle in 0..cycles {
            set_thread_policy_with_flags(tid, ten_percent, 0)?;
            std::thread::sleep(Duration::from_millis(30));
            set_thread_policy_with_flags(tid, other, 0)?;
            std::thread::sleep(gap);
            set_thread_policy_with_flags(tid, ten_percent, 0)?;
            let before = thread_cpu_clock_ns(tid)?;
            std::thread::sleep(Duration::from_millis(300));
            let got = thread_cpu_clock_ns(tid)? - before;
            set_thread_policy_with_flags(tid, other, 0)?;
            if got < 5_000_000 {
                stalls += 1;
                println!(
                    "cycle {cycle}: reserved again, ran {:.2} ms in 300 ms",
                    got as f64 / 1e6
                );
            }
        }
        Ok(())
    })();
    // Whatever happened, the thread ends at SCHED_OTHER and stops.
    let _ = set_thread_policy_with_flags(tid, other, 0);
    stop.store(true, Ordering::Relaxed);
    spinning.join().expect("the spinning thread");
    result?;
    println!(
        "{stalls} of {cycles} cycles stalled (released, {} ms later reserved again)",
        gap.as_millis()
    );
    Ok(())
}
