//! Acting on *other* threads for enforcement: their policy with flags, their CPU affinity, their
//! identity (start time) and CPU time, and the kernel's enforcement granularity (the tick).
//!
//! The enforcer changes threads it does not own, journals what they had, and after a SIGKILL must
//! tell "the same thread" from "a new thread that reused the id": /proc/TID/stat's start time
//! (field 22, in clock ticks since boot) does that.

use std::io;

use crate::sched::Policy;

/// SCHED_FLAG_RESET_ON_FORK: children of the thread start at SCHED_OTHER, not with its budget.
pub const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;
/// SCHED_FLAG_RECLAIM: a SCHED_DEADLINE thread may run past its runtime on the deadline bandwidth
/// no reservation uses (the kernel's GRUB reclaiming, Documentation/scheduler/sched-deadline.rst).
pub const SCHED_FLAG_RECLAIM: u64 = 0x02;

/// Whether thread `tid` (0: the calling one) has SCHED_RESET_ON_FORK set: the threads it starts
/// are born at SCHED_OTHER, whatever its own policy (sched_getscheduler's flag bit).
pub fn resets_on_fork(tid: u32) -> io::Result<bool> {
    // SAFETY: sched_getscheduler takes a thread id by value and touches no memory of ours.
    let policy = unsafe { libc::sched_getscheduler(tid as libc::pid_t) };
    if policy < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(policy & libc::SCHED_RESET_ON_FORK != 0)
}

/// Sets `tid`'s policy with sched_setattr `flags` (e.g. [`SCHED_FLAG_RESET_ON_FORK`]).
///
/// A *blocked* thread leaving SCHED_DEADLINE is first shrunk to the least deadline bandwidth: the
/// kernel (seen on 6.18) gives a deadline thread's admission bandwidth back only when its "0-lag"
/// timer fires, and that timer is not armed for a thread that is blocked, so a blocked thread
/// switched straight to another policy leaves its bandwidth counted until the root domain is
/// rebuilt (a cpuset change): after a few such releases every SCHED_DEADLINE request on the
/// machine fails with EBUSY. A deadline-to-deadline change adjusts the count at once, and 1 µs
/// per second leaves nothing measurable behind.
///
/// A thread that can run (state R) is switched straight: the kernel arms its 0-lag timer itself,
/// and the shrink would harm it. Running on a 1 µs budget it overruns by up to a tick, the kernel
/// pays that debt back at 1 µs per second, pushing its deadline minutes ahead, and those values
/// outlive the policy change: SCHED_DEADLINE given again before then left the thread throttled
/// and never run (a CPU-bound thread released and reserved again 30 ms later stalled in 40 of 40
/// cycles with the shrink, 17 and 22 of 40 without it: `examples/deadline_restart.rs`; the rest is
/// the kernel's own, ARCHITECTURE.md "Known problems"). When the state cannot be read the thread
/// is switched straight, as a leak is the lesser harm.
///
/// The price: a runnable thread's bandwidth stays counted until its 0-lag time, so a
/// SCHED_DEADLINE request right after its release can meet EBUSY; such a request is retried every
/// 2 ms for up to 100 ms before the EBUSY is returned.
pub fn set_thread_policy_with_flags(tid: u32, policy: Policy, flags: u64) -> io::Result<()> {
    if !matches!(policy, Policy::Deadline { .. })
        && matches!(
            crate::sched::thread_policy(tid),
            Ok(Policy::Deadline { .. })
        )
        && thread_state(tid).is_ok_and(|state| state != 'R')
    {
        crate::sched::set_thread_policy_flags(tid, LEAST_DEADLINE_BANDWIDTH, flags)?;
    }
    if !matches!(policy, Policy::Deadline { .. }) {
        return crate::sched::set_thread_policy_flags(tid, policy, flags);
    }
    // A runnable thread's released bandwidth stays counted until its 0-lag time, a few of its
    // periods at most: a request right after such a release meets EBUSY that clears by itself.
    let asked = std::time::Instant::now();
    loop {
        match crate::sched::set_thread_policy_flags(tid, policy, flags) {
            Err(error)
                if error.raw_os_error() == Some(libc::EBUSY)
                    && asked.elapsed() < DEADLINE_BUSY_PATIENCE =>
            {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            result => return result,
        }
    }
}

/// How long a SCHED_DEADLINE request waits out EBUSY (bandwidth of a just-released thread).
const DEADLINE_BUSY_PATIENCE: std::time::Duration = std::time::Duration::from_millis(100);

/// Thread `tid`'s state letter (/proc/TID/stat field 3: `R` running or runnable, `S` sleeping,
/// `D` in uninterruptible wait, `T` stopped, …).
pub fn thread_state(tid: u32) -> io::Result<char> {
    let stat = read_proc_file(&format!("/proc/{tid}/stat"))?;
    parse_stat_state(&stat)
}

/// The state letter of a /proc/PID/stat line (the field after the command name).
pub fn parse_stat_state(stat: &str) -> io::Result<char> {
    stat.rfind(')')
        .and_then(|index| stat[index + 1..].trim_start().chars().next())
        .ok_or_else(|| invalid("stat: no state after the command name".into()))
}

/// The smallest SCHED_DEADLINE reservation the kernel accepts, per second (runtime ≥ 1024 ns).
const LEAST_DEADLINE_BANDWIDTH: Policy = Policy::Deadline {
    runtime_ns: 1_024,
    deadline_ns: 1_000_000_000,
    period_ns: 1_000_000_000,
};

/// Reads a small /proc file with as few syscalls as the kernel allows: open, `read`s into a 4 KiB
/// buffer until one returns 0 (a seq_file may return less than asked before its end, so a short
/// read does not mean the end), close. `std::fs::read_to_string` also `statx`es
/// the file and reads /proc files (size 0) in doubling chunks from 32 bytes: eight syscalls for a
/// /proc/TID/stat where this takes four, and the daemon reads several on every reservation (BENCHMARKS.md, "The daemon:
/// reserve/release round trip").
pub fn read_proc_file(path: &str) -> io::Result<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut buffer = vec![0u8; 4096];
    let mut filled = 0;
    loop {
        if filled == buffer.len() {
            buffer.resize(buffer.len() * 2, 0);
        }
        let n = file.read(&mut buffer[filled..])?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    buffer.truncate(filled);
    String::from_utf8(buffer).map_err(|_| invalid(format!("{path}: not UTF-8")))
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// Field `number` (1-based, as in proc(5)) of a /proc/PID/stat line, for fields after the command.
pub fn parse_stat_field(stat: &str, number: usize) -> io::Result<u64> {
    let rest = stat
        .rfind(')')
        .map(|index| &stat[index + 1..])
        .ok_or_else(|| invalid("stat: no ')' after the command name".into()))?;
    if number < 3 {
        return Err(invalid(format!("stat: field {number} is not numeric")));
    }
    rest.split_whitespace()
        .nth(number - 3)
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| invalid(format!("stat: field {number} missing or not a number")))
}

/// What one read of /proc/TID/stat tells the enforcer about a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadStat {
    /// Field 22: clock ticks since boot at the thread's start (see [`thread_start_time`]).
    pub start_time: u64,
    /// Field 39: the CPU it last ran on (see [`thread_last_cpu`]).
    pub last_cpu: usize,
}

/// The start time and last CPU of thread `tid` from one read of /proc/TID/stat.
pub fn thread_stat(tid: u32) -> io::Result<ThreadStat> {
    let stat = read_proc_file(&format!("/proc/{tid}/stat"))?;
    Ok(ThreadStat {
        start_time: parse_stat_field(&stat, 22)?,
        last_cpu: parse_stat_field(&stat, 39)? as usize,
    })
}

/// The start time of thread `tid` (clock ticks since boot): with the id, it names one thread for
/// the life of the machine.
pub fn thread_start_time(tid: u32) -> io::Result<u64> {
    let stat = read_proc_file(&format!("/proc/{tid}/stat"))?;
    parse_stat_field(&stat, 22)
}

/// The CPU thread `tid` last ran on (/proc/TID/stat field 39): the run queue it is on while it
/// sleeps, whatever its affinity says.
pub fn thread_last_cpu(tid: u32) -> io::Result<usize> {
    let stat = read_proc_file(&format!("/proc/{tid}/stat"))?;
    Ok(parse_stat_field(&stat, 39)? as usize)
}

/// The thread group (process) id of thread `tid`, from /proc/TID/status.
pub fn thread_group_id(tid: u32) -> io::Result<u32> {
    let status = read_proc_file(&format!("/proc/{tid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:"))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| invalid(format!("/proc/{tid}/status: no Tgid line")))
}

/// Parses /proc/TID/schedstat: (time on CPU ns, time waiting on a runqueue ns, timeslices).
pub fn parse_schedstat(text: &str) -> io::Result<(u64, u64, u64)> {
    let mut fields = text.split_whitespace().map(|field| field.parse::<u64>());
    let mut next = |name: &str| -> io::Result<u64> {
        fields
            .next()
            .and_then(Result::ok)
            .ok_or_else(|| invalid(format!("schedstat: {name} missing or not a number")))
    };
    Ok((next("run time")?, next("wait time")?, next("timeslices")?))
}

/// CPU time thread `tid` has used, ns. From /proc/TID/schedstat (the scheduler's
/// `sum_exec_runtime`), which is exact at every switch but lags by up to one tick for a thread
/// that is running right now; for a thread of this process, [`thread_cpu_clock_ns`] is exact.
pub fn thread_cpu_time_ns(tid: u32) -> io::Result<u64> {
    let text = read_proc_file(&format!("/proc/{tid}/schedstat"))?;
    Ok(parse_schedstat(&text)?.0)
}

/// The CPU clock of thread `tid` of *this* process (exact, including the running slice).
pub fn thread_cpu_clock_ns(tid: u32) -> io::Result<u64> {
    // The kernel's encoding of a per-thread CPU clock id (CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD).
    let clock_id = ((!(tid as libc::clockid_t)) << 3) | 6;
    let mut spec = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `spec` is a valid, writable timespec; the kernel checks the clock id and fails with
    // EINVAL for a thread that is not in this process or does not exist.
    let result = unsafe { libc::clock_gettime(clock_id, &mut spec) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(spec.tv_sec as u64 * 1_000_000_000 + spec.tv_nsec as u64)
}

/// The CPUs thread `tid` may run on.
pub fn thread_affinity(tid: u32) -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is a plain bitmask; all-zero is the valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable and of the size passed.
    let result = unsafe {
        libc::sched_getaffinity(
            tid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &mut set,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, so CPU_ISSET reads inside `set`.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

pub use crate::cpu::set_thread_affinity;

/// The kernel's tick (1/HZ), ns: the resolution of CLOCK_MONOTONIC_COARSE, which advances once per
/// jiffy. This is the granularity at which SCHED_DEADLINE budgets are enforced without HRTICK.
pub fn tick_ns() -> io::Result<u64> {
    let mut spec = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `spec` is a valid, writable timespec.
    let result = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut spec) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    let tick = spec.tv_sec as u64 * 1_000_000_000 + spec.tv_nsec as u64;
    if tick == 0 {
        return Err(invalid(
            "CLOCK_MONOTONIC_COARSE reports a zero resolution".into(),
        ));
    }
    Ok(tick)
}

/// The running kernel's release (`6.18.44-…`), from /proc/sys/kernel/osrelease.
pub fn kernel_release() -> io::Result<String> {
    Ok(std::fs::read_to_string("/proc/sys/kernel/osrelease")?
        .trim()
        .to_owned())
}

/// (major, minor) of a kernel release string.
pub fn parse_kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Where the fair server's per-CPU runtime and period are shown (debugfs, Linux 6.12 and later).
pub const FAIR_SERVER_PATH: &str = "/sys/kernel/debug/sched/fair_server";

/// The fair server's share of CPU `cpu` (runtime / period), from debugfs: `Ok(None)` when it is not
/// there or not readable (debugfs not mounted, or kernel lockdown restricts it).
pub fn fair_server_share(cpu: usize) -> io::Result<Option<f64>> {
    let read = |file: &str| -> io::Result<Option<u64>> {
        match std::fs::read_to_string(format!("{FAIR_SERVER_PATH}/cpu{cpu}/{file}")) {
            Ok(text) => text
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| invalid(format!("fair_server/cpu{cpu}/{file}: not a number"))),
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
                ) || error.raw_os_error() == Some(libc::EPERM) =>
            {
                Ok(None)
            }
            Err(error) => Err(error),
        }
    };
    match (read("runtime")?, read("period")?) {
        (Some(runtime), Some(period)) if period > 0 => Ok(Some(runtime as f64 / period as f64)),
        _ => Ok(None),
    }
}

/// The share of each CPU the kernel admits for SCHED_DEADLINE (and RT) in all:
/// `sched_rt_runtime_us / sched_rt_period_us` (0.95 by default; 1.0 when unlimited, -1).
pub fn deadline_bandwidth_limit() -> io::Result<f64> {
    let read = |name: &str| -> io::Result<i64> {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))?
            .trim()
            .parse()
            .map_err(|_| invalid(format!("/proc/sys/kernel/{name}: not a number")))
    };
    let runtime = read("sched_rt_runtime_us")?;
    let period = read("sched_rt_period_us")?;
    if runtime < 0 || period <= 0 {
        return Ok(1.0);
    }
    Ok((runtime as f64 / period as f64).min(1.0))
}

/// Where the scheduler's feature flags are shown (debugfs).
pub const SCHED_FEATURES_PATH: &str = "/sys/kernel/debug/sched/features";

/// Whether `HRTICK_DL` is on in a sched features line (`NO_HRTICK_DL` or absent: off).
pub fn parse_hrtick_dl(features: &str) -> bool {
    features.split_whitespace().any(|word| word == "HRTICK_DL")
}

/// HRTICK_DL from debugfs: `Ok(None)` when the file is not there or not readable (debugfs not
/// mounted, or no permission), so the caller assumes the tick.
pub fn hrtick_dl_enabled() -> io::Result<Option<bool>> {
    match std::fs::read_to_string(SCHED_FEATURES_PATH) {
        Ok(text) => Ok(Some(parse_hrtick_dl(&text))),
        Err(error)
            if matches!(
                error.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
            ) =>
        {
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

/// Raises this process's soft RLIMIT_NOFILE towards `wanted` (never above its hard limit, never
/// lowering it); returns the soft limit in force afterwards. The daemon opens a descriptor per
/// connection and per watched thread, and the default soft limit (1024) is below what its caps
/// allow.
pub fn raise_open_files_limit(wanted: u64) -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit the kernel fills.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let target = wanted.min(limit.rlim_max);
    if target > limit.rlim_cur {
        let raised = libc::rlimit {
            rlim_cur: target,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit read only by the kernel.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(io::Error::last_os_error());
        }
        return Ok(target);
    }
    Ok(limit.rlim_cur)
}

/// A process's RLIMIT_RTTIME (µs of CPU a real-time thread may use without blocking), read with
/// `prlimit(2)` on another process: (soft, hard), `None` meaning unlimited. RealtimeKit1 grants
/// real-time only to a process whose hard limit is set and small, so a runaway thread of it is
/// stopped by the kernel (SIGXCPU at the soft limit, SIGKILL at the hard one).
pub fn process_rttime_limit(pid: u32) -> io::Result<(Option<u64>, Option<u64>)> {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a null new limit only reads; `old` is a valid, writable rlimit the kernel fills.
    let result = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_RTTIME,
            std::ptr::null(),
            &mut old,
        )
    };
    if result != 0 {
        let error = io::Error::last_os_error();
        // prlimit on another uid's process needs CAP_SYS_RESOURCE, which a confined root (a
        // container, a hardened unit) may lack; /proc/PID/limits tells anyone (rtkit reads it).
        if error.raw_os_error() == Some(libc::EPERM) {
            let text = read_proc_file(&format!("/proc/{pid}/limits"))?;
            return parse_rttime_limit(&text).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("/proc/{pid}/limits has no 'Max realtime timeout' line"),
                )
            });
        }
        return Err(error);
    }
    let finite = |value: libc::rlim_t| (value != libc::RLIM_INFINITY).then_some(value);
    Ok((finite(old.rlim_cur), finite(old.rlim_max)))
}

/// The RLIMIT_RTTIME line of a /proc/PID/limits text: (soft, hard) in µs, `None` for unlimited.
pub fn parse_rttime_limit(limits: &str) -> Option<(Option<u64>, Option<u64>)> {
    let line = limits
        .lines()
        .find_map(|line| line.strip_prefix("Max realtime timeout"))?;
    let mut fields = line.split_whitespace();
    let mut value = || -> Option<Option<u64>> {
        match fields.next()? {
            "unlimited" => Some(None),
            number => number.parse().ok().map(Some),
        }
    };
    Some((value()?, value()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_a_command_with_spaces_and_parentheses() {
        let stat =
            "1234 (a (b) c) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 98765 1000 50";
        assert_eq!(parse_stat_field(stat, 22).unwrap(), 98765);
        assert_eq!(parse_stat_field(stat, 4).unwrap(), 1);
        assert!(parse_stat_field(stat, 60).is_err());
        assert!(parse_stat_field("no parenthesis", 22).is_err());
    }

    #[test]
    fn schedstat_three_numbers() {
        assert_eq!(
            parse_schedstat("123456 789 12\n").unwrap(),
            (123456, 789, 12)
        );
        assert!(parse_schedstat("123 x 1").is_err());
        assert!(parse_schedstat("").is_err());
    }

    #[test]
    fn proc_files_read_in_one_go_match_the_slow_way() {
        // /proc/self/status fits the first read; /proc/self/smaps needs more than 4 KiB.
        for path in ["/proc/self/status", "/proc/self/smaps"] {
            let fast = read_proc_file(path).unwrap();
            let slow = std::fs::read_to_string(path).unwrap();
            // smaps changes as the test allocates; compare the first lines only.
            assert_eq!(
                fast.lines().take(5).collect::<Vec<_>>(),
                slow.lines().take(5).collect::<Vec<_>>(),
                "{path}"
            );
            assert!(fast.len() > 100, "{path}");
        }
        assert!(read_proc_file("/proc/self/smaps").unwrap().len() > 4096);
        assert_eq!(
            read_proc_file("/proc/0/stat").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn kernel_versions() {
        assert_eq!(parse_kernel_version("6.18.44-fc-v669"), Some((6, 18)));
        assert_eq!(parse_kernel_version("5.10.0-27-amd64"), Some((5, 10)));
        assert_eq!(parse_kernel_version("garbage"), None);
    }

    #[test]
    fn hrtick_dl_word_not_its_negation() {
        assert!(parse_hrtick_dl("GENTLE_FAIR_SLEEPERS HRTICK_DL NO_HRTICK"));
        assert!(!parse_hrtick_dl("HRTICK NO_HRTICK_DL"));
        assert!(!parse_hrtick_dl(""));
    }

    #[test]
    fn own_thread_identity_clock_and_affinity() {
        let tid = crate::cpu::current_tid();
        let start = thread_start_time(tid).unwrap();
        assert_eq!(thread_start_time(tid).unwrap(), start);
        assert_eq!(thread_group_id(tid).unwrap(), std::process::id());
        let before = thread_cpu_clock_ns(tid).unwrap();
        crate::thread_clock::spin_cpu_time_ns(2_000_000);
        assert!(thread_cpu_clock_ns(tid).unwrap() >= before + 2_000_000);
        assert!(thread_cpu_time_ns(tid).is_ok());
        assert!(!thread_affinity(tid).unwrap().is_empty());
        assert!(tick_ns().unwrap() >= 1_000);
    }

    #[test]
    fn the_state_letter_follows_the_command_name_even_with_parentheses_in_it() {
        assert_eq!(
            parse_stat_state("42 (a (b) c) S 1 42 42 0 -1").unwrap(),
            'S'
        );
        assert_eq!(parse_stat_state("7 (spin) R 1").unwrap(), 'R');
        assert!(parse_stat_state("7 (spin").is_err());
        assert!(parse_stat_state("7 (spin)   ").is_err());
    }

    #[test]
    #[ignore = "needs root"]
    fn a_blocked_deadline_thread_switched_back_leaves_no_bandwidth_counted() {
        let blocked = crate::test_thread::WaitingThread::spawn();
        let tid = blocked.tid;
        let thirty_percent = Policy::Deadline {
            runtime_ns: 3_000_000,
            deadline_ns: 10_000_000,
            period_ns: 10_000_000,
        };
        // Ten times 30 % of a CPU is more than any machine's deadline capacity here: without the
        // shrink, the kernel would refuse one of the later requests with EBUSY.
        for round in 0..10 {
            set_thread_policy_with_flags(tid, thirty_percent, 0)
                .unwrap_or_else(|error| panic!("round {round}: {error}"));
            std::thread::sleep(std::time::Duration::from_millis(2));
            set_thread_policy_with_flags(tid, Policy::Other { nice: 0 }, 0).unwrap();
        }
        assert_eq!(
            crate::sched::thread_policy(tid).unwrap(),
            Policy::Other { nice: 0 }
        );
        blocked.finish();
    }

    #[test]
    fn the_rttime_limit_of_this_process_reads_as_the_kernel_reports_it() {
        let (soft, hard) = process_rttime_limit(std::process::id()).unwrap();
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
        let line = limits
            .lines()
            .find(|line| line.starts_with("Max realtime timeout"))
            .unwrap();
        let fields: Vec<&str> = line["Max realtime timeout".len()..]
            .split_whitespace()
            .collect();
        let parse = |text: &str| text.parse::<u64>().ok();
        assert_eq!((soft, hard), (parse(fields[0]), parse(fields[1])));
        assert!(process_rttime_limit(u32::MAX >> 2).is_err());
        assert_eq!(
            parse_rttime_limit(&limits),
            Some((soft, hard)),
            "/proc/self/limits and prlimit agree"
        );
        assert_eq!(
            parse_rttime_limit(
                "Max realtime timeout      200000               unlimited            us\n"
            ),
            Some((Some(200_000), None))
        );
        assert_eq!(parse_rttime_limit("Max nice priority 0 0\n"), None);
    }
}
