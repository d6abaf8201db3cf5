//! What the kernel keeps per task without a trace: run time (`sum_exec_runtime`), time waiting on
//! a run queue and timeslices (`/proc/TID/schedstat`), and voluntary and involuntary context
//! switches (`/proc/TID/status`). Readable by the task's owner, or root, with no tracefs, BPF or
//! capability beyond that: what observation can use where tracing is not allowed
//! (`rtlab_trace::counters`). The files stay open between samples (a sample is two `pread`s).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// One reading of a task's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskCounters {
    /// CLOCK_MONOTONIC when read, ns.
    pub at_ns: u64,
    /// CPU time used (`se.sum_exec_runtime`, exact at every switch, up to a tick behind for a task
    /// running right now), ns.
    pub run_ns: u64,
    /// Time spent runnable, waiting for a CPU, ns.
    pub wait_ns: u64,
    pub timeslices: u64,
    /// Times it gave up the CPU by blocking or sleeping (`voluntary_ctxt_switches`).
    pub voluntary_switches: u64,
    /// Times it was preempted (`nonvoluntary_ctxt_switches`).
    pub involuntary_switches: u64,
    /// Running or runnable when read (`State: R`); false while it sleeps or blocks. Read after
    /// the run time: a thread found asleep had used exactly `run_ns` by then.
    pub running: bool,
}

/// A task's counter files, open.
#[derive(Debug)]
pub struct TaskCounterFiles {
    tid: u32,
    schedstat: File,
    status: File,
    buffer: Vec<u8>,
}

impl TaskCounterFiles {
    /// Opens `/proc/TID/schedstat` and `/proc/TID/status` (any thread's tid names it in /proc).
    pub fn open(tid: u32) -> io::Result<TaskCounterFiles> {
        Ok(TaskCounterFiles {
            tid,
            schedstat: File::open(format!("/proc/{tid}/schedstat"))?,
            status: File::open(format!("/proc/{tid}/status"))?,
            buffer: vec![0; 4096],
        })
    }

    pub fn tid(&self) -> u32 {
        self.tid
    }

    fn read_at_start(file: &File, buffer: &mut Vec<u8>) -> io::Result<usize> {
        loop {
            let n = file.read_at(buffer, 0)?;
            if n < buffer.len() {
                return Ok(n);
            }
            buffer.resize(buffer.len() * 2, 0);
        }
    }

    /// Reads the counters now. Fails once the thread has exited (ESRCH).
    pub fn read(&mut self) -> io::Result<TaskCounters> {
        let at_ns = crate::clock::monotonic_ns();
        let n = Self::read_at_start(&self.schedstat, &mut self.buffer)?;
        let (run_ns, wait_ns, timeslices) = crate::thread_control::parse_schedstat(
            std::str::from_utf8(&self.buffer[..n]).map_err(io::Error::other)?,
        )?;
        let n = Self::read_at_start(&self.status, &mut self.buffer)?;
        let status = std::str::from_utf8(&self.buffer[..n]).map_err(io::Error::other)?;
        let (voluntary_switches, involuntary_switches) = parse_switches(status)?;
        let running = status
            .lines()
            .find_map(|line| line.strip_prefix("State:"))
            .is_some_and(|state| state.trim_start().starts_with('R'));
        Ok(TaskCounters {
            at_ns,
            run_ns,
            wait_ns,
            timeslices,
            voluntary_switches,
            involuntary_switches,
            running,
        })
    }
}

/// `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` from a /proc status file.
pub fn parse_switches(status: &str) -> io::Result<(u64, u64)> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().parse::<u64>().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("status: no {name}")))
    };
    Ok((
        field("voluntary_ctxt_switches:")?,
        field("nonvoluntary_ctxt_switches:")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_are_read_from_status() {
        let status =
            "Name:\tjackd\nvoluntary_ctxt_switches:\t1200\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(parse_switches(status).unwrap(), (1200, 7));
        assert!(parse_switches("Name:\tx\n").is_err());
    }

    #[test]
    fn this_threads_counters_grow_as_it_runs_and_sleeps() {
        let tid = crate::cpu::current_tid();
        let mut files = TaskCounterFiles::open(tid).unwrap();
        let first = files.read().unwrap();
        let spin_until = crate::clock::monotonic_ns() + 2_000_000;
        while crate::clock::monotonic_ns() < spin_until {}
        std::thread::sleep(std::time::Duration::from_millis(2));
        let second = files.read().unwrap();
        assert!(second.run_ns > first.run_ns, "{first:?} {second:?}");
        assert!(second.voluntary_switches > first.voluntary_switches);
        assert!(second.at_ns > first.at_ns);
    }
}
