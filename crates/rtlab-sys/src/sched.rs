//! Scheduling policy and priority of threads: sched_setattr / sched_getattr.
//!
//! One call sets every policy, including SCHED_DEADLINE, which sched_setscheduler cannot.

use std::io;

/// A scheduling policy with its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// SCHED_OTHER with a nice value (-20..=19).
    Other { nice: i32 },
    /// SCHED_FIFO with an RT priority (1..=99).
    Fifo { priority: u32 },
    /// SCHED_RR with an RT priority (1..=99).
    RoundRobin { priority: u32 },
    /// SCHED_BATCH with a nice value.
    Batch { nice: i32 },
    /// SCHED_IDLE.
    Idle,
    /// SCHED_DEADLINE: `runtime` of every `period`, finished by `deadline` after each period start.
    Deadline {
        runtime_ns: u64,
        deadline_ns: u64,
        period_ns: u64,
    },
}

impl Policy {
    /// The kernel's name for the policy (`SCHED_FIFO`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Other { .. } => "SCHED_OTHER",
            Policy::Fifo { .. } => "SCHED_FIFO",
            Policy::RoundRobin { .. } => "SCHED_RR",
            Policy::Batch { .. } => "SCHED_BATCH",
            Policy::Idle => "SCHED_IDLE",
            Policy::Deadline { .. } => "SCHED_DEADLINE",
        }
    }

    /// The number shown beside the policy: RT priority, nice value, or 0.
    pub fn priority_or_nice(&self) -> i32 {
        match *self {
            Policy::Other { nice } | Policy::Batch { nice } => nice,
            Policy::Fifo { priority } | Policy::RoundRobin { priority } => priority as i32,
            Policy::Idle | Policy::Deadline { .. } => 0,
        }
    }

    /// True for the policies that outrank every SCHED_OTHER thread (FIFO, RR, DEADLINE).
    pub fn is_realtime(&self) -> bool {
        matches!(
            self,
            Policy::Fifo { .. } | Policy::RoundRobin { .. } | Policy::Deadline { .. }
        )
    }
}

/// `struct sched_attr`, version 0 (48 bytes), as in include/uapi/linux/sched/types.h.
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

const SCHED_ATTR_SIZE_VER0: u32 = 48;
const SCHED_DEADLINE: u32 = 6;

fn to_attr(policy: Policy) -> SchedAttr {
    let mut attr = SchedAttr {
        size: SCHED_ATTR_SIZE_VER0,
        ..Default::default()
    };
    match policy {
        Policy::Other { nice } => {
            attr.sched_policy = libc::SCHED_OTHER as u32;
            attr.sched_nice = nice;
        }
        Policy::Batch { nice } => {
            attr.sched_policy = libc::SCHED_BATCH as u32;
            attr.sched_nice = nice;
        }
        Policy::Idle => attr.sched_policy = libc::SCHED_IDLE as u32,
        Policy::Fifo { priority } => {
            attr.sched_policy = libc::SCHED_FIFO as u32;
            attr.sched_priority = priority;
        }
        Policy::RoundRobin { priority } => {
            attr.sched_policy = libc::SCHED_RR as u32;
            attr.sched_priority = priority;
        }
        Policy::Deadline {
            runtime_ns,
            deadline_ns,
            period_ns,
        } => {
            attr.sched_policy = SCHED_DEADLINE;
            attr.sched_runtime = runtime_ns;
            attr.sched_deadline = deadline_ns;
            attr.sched_period = period_ns;
        }
    }
    attr
}

/// Sets the policy of thread `tid` (0 = the calling thread).
pub fn set_thread_policy(tid: u32, policy: Policy) -> io::Result<()> {
    set_thread_policy_flags(tid, policy, 0)
}

/// Sets the policy of thread `tid` with `sched_flags` (e.g. SCHED_FLAG_RESET_ON_FORK).
pub(crate) fn set_thread_policy_flags(tid: u32, policy: Policy, flags: u64) -> io::Result<()> {
    let mut attr = to_attr(policy);
    attr.sched_flags = flags;
    // SAFETY: `attr` is a valid, initialised sched_attr whose `size` field matches its layout;
    // the kernel only reads it. The syscall's own flags argument is 0.
    let result = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid as libc::pid_t,
            &attr as *const SchedAttr,
            0u32,
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the calling thread's policy.
pub fn set_current_thread_policy(policy: Policy) -> io::Result<()> {
    set_thread_policy(0, policy)
}

/// Reads the policy of thread `tid` (0 = the calling thread).
///
/// The kernel reads a thread's policy and priority without a lock, so a read racing a change can
/// pair the new policy with the old priority: SCHED_FIFO at priority 0 was seen while rtlab's
/// dispatcher lowered a thread from FIFO 98 to SCHED_OTHER. A real-time policy at priority 0
/// cannot be set, so such a read is taken again.
pub fn thread_policy(tid: u32) -> io::Result<Policy> {
    let mut policy = read_thread_policy(tid)?;
    for _ in 0..8 {
        match policy {
            Policy::Fifo { priority: 0 } | Policy::RoundRobin { priority: 0 } => {
                std::thread::sleep(std::time::Duration::from_micros(10));
                policy = read_thread_policy(tid)?;
            }
            _ => break,
        }
    }
    Ok(policy)
}

fn read_thread_policy(tid: u32) -> io::Result<Policy> {
    let mut attr = SchedAttr::default();
    // SAFETY: `attr` is writable and SCHED_ATTR_SIZE_VER0 bytes long, the size we pass; flags 0.
    let result = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid as libc::pid_t,
            &mut attr as *mut SchedAttr,
            SCHED_ATTR_SIZE_VER0,
            0u32,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    let policy_number = attr.sched_policy as i32;
    Ok(match policy_number {
        libc::SCHED_FIFO => Policy::Fifo {
            priority: attr.sched_priority,
        },
        libc::SCHED_RR => Policy::RoundRobin {
            priority: attr.sched_priority,
        },
        libc::SCHED_BATCH => Policy::Batch {
            nice: attr.sched_nice,
        },
        libc::SCHED_IDLE => Policy::Idle,
        6 => Policy::Deadline {
            runtime_ns: attr.sched_runtime,
            deadline_ns: attr.sched_deadline,
            period_ns: attr.sched_period,
        },
        _ => Policy::Other {
            nice: attr.sched_nice,
        },
    })
}

/// Whether this process may use SCHED_FIFO: tried for real in a short-lived thread, so nothing in
/// the process changes whatever the answer.
pub fn realtime_permitted() -> bool {
    std::thread::spawn(|| set_current_thread_policy(Policy::Fifo { priority: 1 }).is_ok())
        .join()
        .unwrap_or(false)
}

/// The thread ids of every thread of process `pid`.
pub fn process_thread_ids(pid: u32) -> io::Result<Vec<u32>> {
    let mut tids = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        if let Some(tid) = entry?
            .file_name()
            .to_str()
            .and_then(|name| name.parse().ok())
        {
            tids.push(tid);
        }
    }
    tids.sort_unstable();
    Ok(tids)
}

/// RT throttling: /proc/sys/kernel/sched_rt_runtime_us (−1 means RT threads may take 100 % CPU).
pub fn rt_runtime_us() -> io::Result<i64> {
    let text = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")?;
    text.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "sched_rt_runtime_us is not a number",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_policy() {
        let policy = thread_policy(0).unwrap();
        assert!(matches!(policy, Policy::Other { .. } | Policy::Fifo { .. }));
    }

    #[test]
    #[ignore = "needs root (SCHED_FIFO)"]
    fn fifo_round_trip() {
        assert!(
            realtime_permitted(),
            "this test needs SCHED_FIFO permission: run it as root or with CAP_SYS_NICE"
        );
        std::thread::spawn(|| {
            set_current_thread_policy(Policy::Fifo { priority: 7 }).unwrap();
            assert_eq!(thread_policy(0).unwrap(), Policy::Fifo { priority: 7 });
            set_current_thread_policy(Policy::Other { nice: 0 }).unwrap();
            assert_eq!(thread_policy(0).unwrap(), Policy::Other { nice: 0 });
        })
        .join()
        .unwrap();
    }

    #[test]
    fn lists_own_threads() {
        let tids = process_thread_ids(std::process::id()).unwrap();
        assert!(tids.contains(&std::process::id()));
    }

    #[test]
    #[ignore = "needs root"]
    fn a_read_racing_a_policy_change_never_gives_fifo_at_priority_zero() {
        let (tid_sender, tid_receiver) = std::sync::mpsc::channel();
        let (exit_sender, exit_receiver) = std::sync::mpsc::channel::<()>();
        let target = std::thread::spawn(move || {
            tid_sender.send(crate::cpu::current_tid()).unwrap();
            let _ = exit_receiver.recv();
        });
        let tid = tid_receiver.recv().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let toggler = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                // A change every 20 µs: far denser than rtlab's dispatcher, which changes a
                // thread at slot edges, hundreds of microseconds apart.
                let pause = || {
                    let until = std::time::Instant::now() + std::time::Duration::from_micros(20);
                    while std::time::Instant::now() < until {
                        std::hint::spin_loop();
                    }
                };
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    set_thread_policy(tid, Policy::Fifo { priority: 98 }).unwrap();
                    pause();
                    set_thread_policy(tid, Policy::Other { nice: 0 }).unwrap();
                    pause();
                }
            })
        };
        let (mut torn, mut reads) = (0, 0);
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(300) {
            reads += 1;
            if matches!(
                read_thread_policy(tid).unwrap(),
                Policy::Fifo { priority: 0 }
            ) {
                torn += 1;
            }
            assert_ne!(thread_policy(tid).unwrap(), Policy::Fifo { priority: 0 });
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        toggler.join().unwrap();
        set_thread_policy(tid, Policy::Other { nice: 0 }).unwrap();
        drop(exit_sender);
        target.join().unwrap();
        println!("{torn} torn reads of {reads}");
    }
}
