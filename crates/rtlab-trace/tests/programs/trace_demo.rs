//! A program with a known thread structure, for the tests of `rtlab trace` (needs root: it uses
//! SCHED_FIFO). Every thread stops on its own within `--seconds` (the deadlocked pair gives up
//! its timed lock after `--seconds` + 2 s); a test may kill it earlier.
//!
//! - pipeline (CPU 0): `pipe-src` SCHED_FIFO 20 every 10 ms wakes `pipe-mid` (FIFO 19), which
//!   wakes `pipe-sink` (FIFO 18); `ui` SCHED_OTHER every 45 ms on its own.
//! - inversion (CPU 1): every 250 ms `inv-low` (FIFO 10) takes a glibc mutex and works 8 ms of
//!   CPU; 2 ms in, `inv-high` (FIFO 30) wants the mutex; 4 ms in, `inv-mid` (FIFO 20) spins
//!   20 ms, so `inv-low` cannot run to release it.
//! - deadlock: `dead-a` holds mutex 1 and wants 2, `dead-b` holds 2 and wants 1.
//! - starvation (CPU 1): `starved` (FIFO 1) every 20 ms, while `hog` (FIFO 5) spins 300 ms.
//!   Not SCHED_OTHER: since Linux 6.12 the fair deadline server may run SCHED_OTHER threads
//!   under an RT hog (50 ms of each second, at a moment set by earlier load), so a SCHED_OTHER
//!   thread's wait would depend on what ran on the CPU before the test.
//!
//! Prints `thread NAME TID` for each thread once all started, then `ready`.
//! Usage: trace_demo [--seconds S] [--only pipeline,inversion,deadlock,starvation]

use rtlab_sys::clock::{monotonic_ns, sleep_until_ns};
use rtlab_sys::process_locks::GlibcMutex;
use rtlab_sys::sched::{set_current_thread_policy, Policy};
use rtlab_sys::thread_clock::spin_cpu_time_ns;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

const MS: u64 = 1_000_000;

struct Setup {
    name: &'static str,
    cpu: Option<usize>,
    policy: Policy,
}

fn spawn(
    setup: Setup,
    started: &mpsc::Sender<(String, u32)>,
    body: impl FnOnce() + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let started = started.clone();
    std::thread::Builder::new()
        .name(setup.name.into())
        .spawn(move || {
            if let Some(cpu) = setup.cpu {
                rtlab_sys::cpu::pin_current_thread(cpu).expect("pin");
            }
            set_current_thread_policy(setup.policy).expect("set policy (needs root)");
            started
                .send((setup.name.to_owned(), rtlab_sys::cpu::current_tid()))
                .expect("main waits");
            drop(started);
            body();
        })
        .expect("spawn")
}

/// A counter and a condition variable: one stage of the pipeline signals the next.
#[derive(Default)]
struct Signal {
    count: Mutex<u64>,
    changed: Condvar,
}

impl Signal {
    fn post(&self) {
        *self.count.lock().expect("no poison") += 1;
        self.changed.notify_one();
    }

    /// Waits for a post; false when `deadline_ns` passed first.
    fn wait(&self, seen: &mut u64, deadline_ns: u64) -> bool {
        let mut count = self.count.lock().expect("no poison");
        while *count == *seen {
            let now = monotonic_ns();
            if now >= deadline_ns {
                return false;
            }
            count = self
                .changed
                .wait_timeout(count, Duration::from_nanos(deadline_ns - now))
                .expect("no poison")
                .0;
        }
        *seen = *count;
        true
    }
}

fn periodic(start: u64, period: u64, end: u64, mut work: impl FnMut()) {
    let mut next = start;
    while next < end {
        sleep_until_ns(next);
        work();
        next += period;
    }
}

fn main() {
    let mut seconds = 3u64;
    let mut only: Vec<String> = ["pipeline", "inversion", "deadlock", "starvation"]
        .map(String::from)
        .to_vec();
    let mut arguments = std::env::args().skip(1);
    while let Some(argument) = arguments.next() {
        match argument.as_str() {
            "--seconds" => {
                seconds = arguments
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--seconds N")
            }
            "--only" => {
                only = arguments
                    .next()
                    .expect("--only LIST")
                    .split(',')
                    .map(String::from)
                    .collect()
            }
            other => panic!("unknown argument {other}"),
        }
    }
    let wants = |name: &str| only.iter().any(|item| item == name);
    let (started, started_rx) = mpsc::channel();
    let start = monotonic_ns() + 100 * MS;
    let end = start + seconds * 1_000_000_000;
    let mut handles = Vec::new();
    let fifo = |priority| Policy::Fifo { priority };
    let other = Policy::Other { nice: 0 };

    if wants("pipeline") {
        let to_mid = Arc::new(Signal::default());
        let to_sink = Arc::new(Signal::default());
        let (post, next) = (Arc::clone(&to_mid), Arc::clone(&to_sink));
        handles.push(spawn(
            Setup {
                name: "pipe-src",
                cpu: Some(0),
                policy: fifo(20),
            },
            &started,
            move || {
                periodic(start, 10 * MS, end, || {
                    spin_cpu_time_ns(MS);
                    post.post();
                })
            },
        ));
        let wait = Arc::clone(&to_mid);
        handles.push(spawn(
            Setup {
                name: "pipe-mid",
                cpu: Some(0),
                policy: fifo(19),
            },
            &started,
            move || {
                let mut seen = 0;
                while wait.wait(&mut seen, end + 50 * MS) {
                    spin_cpu_time_ns(MS / 2);
                    next.post();
                }
            },
        ));
        handles.push(spawn(
            Setup {
                name: "pipe-sink",
                cpu: Some(0),
                policy: fifo(18),
            },
            &started,
            move || {
                let mut seen = 0;
                while to_sink.wait(&mut seen, end + 50 * MS) {
                    spin_cpu_time_ns(MS / 3);
                }
            },
        ));
        handles.push(spawn(
            Setup {
                name: "ui",
                cpu: Some(0),
                policy: other,
            },
            &started,
            move || {
                periodic(start + 3 * MS, 45 * MS, end, || {
                    spin_cpu_time_ns(MS / 5);
                })
            },
        ));
    }

    if wants("inversion") {
        let lock = Arc::new(GlibcMutex::new(false).expect("mutex"));
        let cycle = 250 * MS;
        let first = start + 20 * MS;
        let low_lock = Arc::clone(&lock);
        handles.push(spawn(
            Setup {
                name: "inv-low",
                cpu: Some(1),
                policy: fifo(10),
            },
            &started,
            move || {
                periodic(first, cycle, end, || {
                    let _guard = low_lock.lock().expect("lock");
                    spin_cpu_time_ns(8 * MS);
                })
            },
        ));
        handles.push(spawn(
            Setup {
                name: "inv-high",
                cpu: Some(1),
                policy: fifo(30),
            },
            &started,
            move || {
                periodic(first + 2 * MS, cycle, end, || {
                    let _guard = lock.lock().expect("lock");
                    spin_cpu_time_ns(MS / 2);
                })
            },
        ));
        handles.push(spawn(
            Setup {
                name: "inv-mid",
                cpu: Some(1),
                policy: fifo(20),
            },
            &started,
            move || {
                periodic(first + 4 * MS, cycle, end, || {
                    spin_cpu_time_ns(20 * MS);
                })
            },
        ));
    }

    if wants("deadlock") {
        let one = Arc::new(GlibcMutex::new(false).expect("mutex"));
        let two = Arc::new(GlibcMutex::new(false).expect("mutex"));
        let give_up = Duration::from_secs(seconds + 2);
        let (a_first, a_second) = (Arc::clone(&one), Arc::clone(&two));
        handles.push(spawn(
            Setup {
                name: "dead-a",
                cpu: None,
                policy: other,
            },
            &started,
            move || {
                sleep_until_ns(start + 200 * MS);
                let _held = a_first.lock().expect("lock");
                sleep_until_ns(start + 300 * MS);
                let _ = a_second.lock_timeout(give_up).expect("timed lock");
            },
        ));
        handles.push(spawn(
            Setup {
                name: "dead-b",
                cpu: None,
                policy: other,
            },
            &started,
            move || {
                sleep_until_ns(start + 250 * MS);
                let _held = two.lock().expect("lock");
                sleep_until_ns(start + 350 * MS);
                let _ = one.lock_timeout(give_up).expect("timed lock");
            },
        ));
    }

    if wants("starvation") {
        let hog_at = start + seconds * 1_000_000_000 / 2;
        handles.push(spawn(
            Setup {
                name: "starved",
                cpu: Some(1),
                policy: fifo(1),
            },
            &started,
            move || {
                periodic(start + 7 * MS, 20 * MS, end, || {
                    spin_cpu_time_ns(MS / 10);
                })
            },
        ));
        handles.push(spawn(
            Setup {
                name: "hog",
                cpu: Some(1),
                policy: fifo(5),
            },
            &started,
            move || {
                sleep_until_ns(hog_at);
                spin_cpu_time_ns(300 * MS);
            },
        ));
    }

    drop(started);
    let mut lines = Vec::new();
    for (name, tid) in started_rx.iter() {
        lines.push(format!("thread {name} {tid}"));
    }
    lines.sort();
    for line in lines {
        println!("{line}");
    }
    println!("ready");
    for handle in handles {
        let _ = handle.join();
    }
}
