//! Scheduling policy and priority of threads: sched_setattr / sched_getattr.
//!
//! One call sets every policy, including SCHED_DEADLINE, which sched_setscheduler cannot.

use std::collections::BTreeSet;
use std::io;

pub use rtlab_core::sched_policy::Policy;

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
        sched_policy: match policy {
            Policy::Other { .. } => libc::SCHED_OTHER as u32,
            Policy::Batch { .. } => libc::SCHED_BATCH as u32,
            Policy::Idle => libc::SCHED_IDLE as u32,
            Policy::Fifo { .. } => libc::SCHED_FIFO as u32,
            Policy::RoundRobin { .. } => libc::SCHED_RR as u32,
            Policy::Deadline { .. } => SCHED_DEADLINE,
        },
        ..Default::default()
    };
    match policy {
        Policy::Other { nice } | Policy::Batch { nice } => attr.sched_nice = nice,
        Policy::Fifo { priority } | Policy::RoundRobin { priority } => {
            attr.sched_priority = priority;
        }
        Policy::Deadline {
            runtime_ns,
            deadline_ns,
            period_ns,
        } => {
            attr.sched_runtime = runtime_ns;
            attr.sched_deadline = deadline_ns;
            attr.sched_period = period_ns;
        }
        Policy::Idle => {}
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

/// The `sched_flags` the kernel holds for thread `tid` (0 = the calling thread), such as
/// SCHED_FLAG_RECLAIM.
pub fn thread_sched_flags(tid: u32) -> io::Result<u64> {
    Ok(sched_getattr(tid)?.sched_flags)
}

/// `sched_getattr` of thread `tid` (0 = the calling thread), version 0 of the struct.
fn sched_getattr(tid: u32) -> io::Result<SchedAttr> {
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
    Ok(attr)
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
    let attr = sched_getattr(tid)?;
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

/// The thread ids of every thread of process `pid`, sorted.
///
/// One read of /proc/PID/task can miss a live thread. The kernel lists a process's threads by
/// walking its thread list from the last one it listed, and when that thread exits during the
/// read, the walk ends early or resumes by position, past threads it never listed. A thread
/// reading its process's task directory in a loop while 1,500 threads created before it exited
/// missed itself once in about 200,000 reads here (and once in 320,000 with 300 threads), and
/// the daemon's test of resolving a whole process failed on it in a CI rehearsal. So the
/// directory is read again until a read lists no thread the earlier ones missed (at most 8
/// reads), and the union is returned: a thread alive throughout is missing only if every read
/// missed it. A thread that exited meanwhile may be listed, as it may be by any list of threads
/// once read.
pub fn process_thread_ids(pid: u32) -> io::Result<Vec<u32>> {
    let path = format!("/proc/{pid}/task");
    union_of_reads(|| {
        let mut tids = BTreeSet::new();
        for entry in std::fs::read_dir(&path)? {
            if let Some(tid) = entry?
                .file_name()
                .to_str()
                .and_then(|name| name.parse().ok())
            {
                tids.insert(tid);
            }
        }
        Ok(tids)
    })
}

/// Most reads [`process_thread_ids`] makes: each read after the first either lists nothing new,
/// which ends it, or a thread the others missed or one started since.
const TASK_READS: usize = 8;

/// The union of `read`'s answers, read until one adds nothing (at most [`TASK_READS`] times). An
/// error on the first read is returned; a later one (the process has exited) ends the reads.
fn union_of_reads(mut read: impl FnMut() -> io::Result<BTreeSet<u32>>) -> io::Result<Vec<u32>> {
    let mut tids = read()?;
    for _ in 1..TASK_READS {
        let Ok(again) = read() else { break };
        let before = tids.len();
        tids.extend(again);
        if tids.len() == before {
            break;
        }
    }
    Ok(tids.into_iter().collect())
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

/// The longest SCHED_DEADLINE period the kernel accepts, in ns:
/// /proc/sys/kernel/sched_deadline_period_max_us (4,194,304 µs by default); `sched_setattr`
/// fails with EINVAL beyond it.
pub fn deadline_period_max_ns() -> io::Result<u64> {
    let text = std::fs::read_to_string("/proc/sys/kernel/sched_deadline_period_max_us")?;
    let micros: u64 = text.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "sched_deadline_period_max_us is not a number",
        )
    })?;
    Ok(micros.saturating_mul(1_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads answered from a script: each is a set, or None for an error.
    fn scripted(reads: Vec<Option<Vec<u32>>>) -> (io::Result<Vec<u32>>, usize) {
        let mut script = reads.into_iter();
        let mut made = 0;
        let result = union_of_reads(|| {
            made += 1;
            script
                .next()
                .expect("no more reads than scripted")
                .map(|tids| tids.into_iter().collect())
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        });
        (result, made)
    }

    #[test]
    fn a_thread_one_read_missed_is_listed_from_the_next() {
        let (tids, reads) = scripted(vec![
            Some(vec![7, 5]),
            Some(vec![5, 6, 7]),
            Some(vec![7, 6, 5]),
        ]);
        assert_eq!(tids.unwrap(), vec![5, 6, 7]);
        assert_eq!(reads, 3, "reads until one adds nothing");
        let (tids, reads) = scripted(vec![Some(vec![3, 1]), Some(vec![1])]);
        assert_eq!(tids.unwrap(), vec![1, 3], "an exited thread stays listed");
        assert_eq!(reads, 2);
    }

    #[test]
    fn reads_stop_at_the_cap_and_at_a_later_error() {
        let churn = (0..TASK_READS as u32).map(|read| Some(vec![1, 100 + read]));
        let (tids, reads) = scripted(churn.collect());
        assert_eq!(reads, TASK_READS);
        assert_eq!(tids.unwrap().len(), TASK_READS + 1);
        let (tids, reads) = scripted(vec![Some(vec![4, 2]), Some(vec![2, 4, 9]), None]);
        assert_eq!(
            tids.unwrap(),
            vec![2, 4, 9],
            "a process that exited keeps what was read"
        );
        assert_eq!(reads, 3);
        let (error, reads) = scripted(vec![None]);
        assert_eq!(error.unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(reads, 1);
    }

    #[test]
    fn lists_its_own_threads() {
        let helper = crate::test_thread::WaitingThread::spawn();
        let tids = process_thread_ids(std::process::id()).unwrap();
        assert!(tids.contains(&std::process::id()));
        assert!(tids.contains(&helper.tid));
        helper.finish();
        assert!(tids.contains(&crate::cpu::current_tid()));
        assert!(
            tids.windows(2).all(|pair| pair[0] < pair[1]),
            "sorted, no repeats"
        );
    }

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
    #[ignore = "needs root"]
    fn a_read_racing_a_policy_change_never_gives_fifo_at_priority_zero() {
        let target = crate::test_thread::WaitingThread::spawn();
        let tid = target.tid;
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
        target.finish();
        println!("{torn} torn reads of {reads}");
    }
}
