//! Who a thread is, from /proc: its process, its uids and effective capabilities
//! (/proc/TID/status), its name (comm), whether it is still the thread that started at a given
//! time (start times: `thread_control::thread_start_time`), and which threads bear a name. The
//! daemon decides with these which client may act on which thread.

use std::io;

/// CAP_SYS_NICE's bit in the capability sets.
pub const CAP_SYS_NICE: u32 = 23;

/// The parts of /proc/TID/status the daemon's authorisation needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadStatus {
    /// The thread's process id (`Tgid`).
    pub tgid: u32,
    /// Real, effective, saved and filesystem uid (`Uid`).
    pub uids: [u32; 4],
    /// Effective capabilities (`CapEff`).
    pub cap_effective: u64,
}

impl ThreadStatus {
    pub fn real_uid(&self) -> u32 {
        self.uids[0]
    }

    pub fn effective_uid(&self) -> u32 {
        self.uids[1]
    }

    /// Whether the effective set holds capability `capability` (e.g. [`CAP_SYS_NICE`]).
    pub fn has_capability(&self, capability: u32) -> bool {
        capability < 64 && self.cap_effective & (1u64 << capability) != 0
    }
}

/// Why a status text could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StatusError {
    #[error("status has no {0} line")]
    Missing(&'static str),
    #[error("status line {0} is malformed")]
    Malformed(&'static str),
}

/// Parses the text of /proc/TID/status.
pub fn parse_status(text: &str) -> Result<ThreadStatus, StatusError> {
    let field = |name: &'static str| -> Result<&str, StatusError> {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
            .ok_or(StatusError::Missing(name))
    };
    let tgid = field("Tgid")?
        .parse()
        .map_err(|_| StatusError::Malformed("Tgid"))?;
    let uid_numbers: Vec<u32> = field("Uid")?
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| StatusError::Malformed("Uid"))?;
    let uids: [u32; 4] = uid_numbers
        .try_into()
        .map_err(|_| StatusError::Malformed("Uid"))?;
    let cap_effective =
        u64::from_str_radix(field("CapEff")?, 16).map_err(|_| StatusError::Malformed("CapEff"))?;
    Ok(ThreadStatus {
        tgid,
        uids,
        cap_effective,
    })
}

fn no_such_thread(tid: u32) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("no thread {tid}"))
}

fn not_found_is_no_thread(tid: u32) -> impl Fn(io::Error) -> io::Error {
    move |error| {
        if error.kind() == io::ErrorKind::NotFound {
            no_such_thread(tid)
        } else {
            error
        }
    }
}

/// /proc/TID/status of any thread (a thread id works as a /proc entry though it is not listed).
/// A thread that does not exist gives an error of kind `NotFound`.
pub fn thread_status(tid: u32) -> io::Result<ThreadStatus> {
    if tid == 0 {
        return Err(no_such_thread(tid));
    }
    let text = crate::thread_control::read_proc_file(&format!("/proc/{tid}/status"))
        .map_err(not_found_is_no_thread(tid))?;
    parse_status(&text).map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))
}

/// Who a thread is for authorisation: (process id, real uid, effective uid). From a thread pidfd's
/// `PIDFD_GET_INFO` where the kernel has it (Linux 6.13+, about 10 µs with the pidfd's opening),
/// else /proc/TID/status (25-35 µs on the development VM). A thread that does not exist gives an
/// error of kind `NotFound`.
pub fn thread_owner(tid: u32) -> io::Result<(u32, u32, u32)> {
    if tid == 0 || tid > i32::MAX as u32 {
        return Err(no_such_thread(tid));
    }
    match crate::ipc::pidfd_open_thread(tid) {
        Ok(pidfd) => {
            if let Ok(info) = crate::ipc::pidfd_info(std::os::fd::AsFd::as_fd(&pidfd)) {
                if info.pid == tid {
                    return Ok((info.tgid, info.real_uid, info.effective_uid));
                }
            }
        }
        Err(error) if crate::ipc::is_no_such_process(&error) => return Err(no_such_thread(tid)),
        Err(_) => {}
    }
    let status = thread_status(tid)?;
    Ok((status.tgid, status.real_uid(), status.effective_uid()))
}

/// The thread's name (`comm`, at most 15 bytes).
pub fn thread_comm(tid: u32) -> io::Result<String> {
    let text = crate::thread_control::read_proc_file(&format!("/proc/{tid}/comm"))
        .map_err(not_found_is_no_thread(tid))?;
    Ok(text.trim_end_matches('\n').to_owned())
}

/// Whether thread `tid` of process `tgid` still exists and is the one that started at
/// `start_time` (the poll fallback for kernels without thread pidfds).
pub fn thread_is_alive(tgid: u32, tid: u32, start_time: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/stat"))
        .ok()
        .and_then(|text| crate::thread_control::parse_stat_field(&text, 22).ok())
        .is_some_and(|now| now == start_time)
}

/// Every (pid, tid) whose comm is exactly `name`, by pid and then tid. Processes and threads that
/// exit while being read are skipped.
pub fn threads_named(name: &str) -> io::Result<Vec<(u32, u32)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Some(pid) = entry?
            .file_name()
            .to_str()
            .and_then(|text| text.parse::<u32>().ok())
        else {
            continue;
        };
        // Read as `process_thread_ids` reads it: one read can miss a live thread.
        let Ok(tids) = crate::sched::process_thread_ids(pid) else {
            continue;
        };
        for tid in tids {
            if let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")) {
                if comm.trim_end_matches('\n') == name {
                    found.push((pid, tid));
                }
            }
        }
    }
    Ok(found)
}

/// Every process id in /proc, in the order /proc lists them (RealtimeKit1's `ResetAll` walks them).
pub fn process_ids() -> io::Result<Vec<u32>> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        if let Some(pid) = entry?
            .file_name()
            .to_str()
            .and_then(|text| text.parse::<u32>().ok())
        {
            pids.push(pid);
        }
    }
    Ok(pids)
}

/// The calling process's real and effective uid (who owns the files it creates), kept here under
/// their old names; they are `users`' (a thread's identity, not its /proc entry).
pub use crate::users::{current_uid, effective_uid as current_effective_uid};

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tbash\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nNgid:\t0\nPid:\t4243\nPPid:\t1\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nCapInh:\t0000000000000000\nCapPrm:\t0000000000800000\nCapEff:\t0000000000800000\n";

    #[test]
    fn status_gives_process_uids_and_capabilities() {
        let status = parse_status(STATUS).unwrap();
        assert_eq!(status.tgid, 4242);
        assert_eq!(status.real_uid(), 1000);
        assert_eq!(status.effective_uid(), 1000);
        assert!(status.has_capability(CAP_SYS_NICE));
        assert!(!status.has_capability(0));
        assert_eq!(
            parse_status("Tgid:\t1\nUid:\t1 2 3\nCapEff:\t0\n"),
            Err(StatusError::Malformed("Uid"))
        );
        assert_eq!(parse_status("Tgid:\t1\n"), Err(StatusError::Missing("Uid")));
    }

    /// The owner from a thread pidfd (`PIDFD_GET_INFO`, where the kernel has it) and from the
    /// /proc fallback answer alike.
    #[test]
    fn thread_owner_agrees_with_proc_status() {
        let thread = crate::test_thread::WaitingThread::spawn();
        let tid = thread.tid;
        let status = thread_status(tid).unwrap();
        assert_eq!(
            thread_owner(tid).unwrap(),
            (status.tgid, status.real_uid(), status.effective_uid())
        );
        thread.finish();
    }

    #[test]
    fn our_own_thread_is_found_by_status_comm_start_time_and_name() {
        let tid = crate::cpu::current_tid();
        let status = thread_status(tid).unwrap();
        assert_eq!(status.tgid, std::process::id());
        assert_eq!(status.real_uid(), current_uid());
        let start_time = crate::thread_control::thread_start_time(tid).unwrap();
        assert!(thread_is_alive(std::process::id(), tid, start_time));
        assert!(!thread_is_alive(std::process::id(), tid, start_time + 1));
        let comm = thread_comm(tid).unwrap();
        assert!(threads_named(&comm)
            .unwrap()
            .contains(&(std::process::id(), tid)));
        let missing = thread_status(i32::MAX as u32).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }
}
