//! Syscalls the stress loads and competitor threads need that std does not offer.
//!
//! The stressors in rtlab-probe churn anonymous mappings (page faults) and read files with
//! `O_DIRECT`; `--load-cmd` must signal a whole process group; per-thread CPU times in
//! /proc/PID/task/TID/stat are in clock ticks. Every `unsafe` block of that lives here, each
//! behind a small safe wrapper, so rtlab-probe stays free of `unsafe` and `libc`.

use std::io;

/// The `open(2)` flag that bypasses the page cache, for `OpenOptionsExt::custom_flags`.
pub const OPEN_DIRECT_FLAG: i32 = libc::O_DIRECT;

/// An anonymous private read-write mapping, unmapped on drop.
///
/// Used by the memory stressor for page-fault churn (each `new` + first touch faults every page)
/// and as a page-aligned buffer for `O_DIRECT` reads.
#[derive(Debug)]
pub struct AnonymousMapping {
    address: *mut u8,
    length: usize,
}

// SAFETY: the mapping is owned exclusively by this value; moving it to another thread moves that
// ownership, and no other alias to the memory exists.
unsafe impl Send for AnonymousMapping {}

impl AnonymousMapping {
    /// Maps `length` bytes (rounded up by the kernel to whole pages) of zeroed memory.
    pub fn new(length: usize) -> io::Result<AnonymousMapping> {
        if length == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a mapping needs a length above 0",
            ));
        }
        // SAFETY: a fresh anonymous mapping with no fixed address cannot alias existing memory;
        // the result is checked against MAP_FAILED before use.
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                length,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if address == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(AnonymousMapping {
            address: address.cast::<u8>(),
            length,
        })
    }

    pub fn len(&self) -> usize {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The mapped bytes; the first write to each page faults it in.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `address` points to `length` readable and writable bytes that live as long as
        // `self`, and `&mut self` guarantees this is the only reference to them.
        unsafe { std::slice::from_raw_parts_mut(self.address, self.length) }
    }
}

impl Drop for AnonymousMapping {
    fn drop(&mut self) {
        // SAFETY: `address`/`length` are exactly what mmap returned, and no slice borrowed from
        // the mapping can outlive `self`.
        unsafe {
            libc::munmap(self.address.cast::<libc::c_void>(), self.length);
        }
    }
}

/// Which signal to send to a process group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupSignal {
    Terminate,
    Kill,
}

/// Sends a signal to every process in group `group_id` (a `--load-cmd` started with
/// `process_group(0)`, whose group id is its pid). `Ok(false)` when the group no longer exists.
pub fn signal_process_group(group_id: u32, signal: GroupSignal) -> io::Result<bool> {
    let group = libc::pid_t::try_from(group_id)
        .ok()
        .filter(|group| *group > 1)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "refusing process group id <= 1",
            )
        })?;
    let number = match signal {
        GroupSignal::Terminate => libc::SIGTERM,
        GroupSignal::Kill => libc::SIGKILL,
    };
    // SAFETY: killpg only takes integers; the group id was checked to be > 1 so it can never
    // address "every process" (0 / -1 semantics of kill).
    let result = unsafe { libc::killpg(group, number) };
    if result == -1 {
        let error = io::Error::last_os_error();
        if error.raw_os_error() == Some(libc::ESRCH) {
            return Ok(false);
        }
        return Err(error);
    }
    Ok(true)
}

/// The live (not zombie) processes in process group `group_id`, from /proc: how a caller checks
/// that a load's group is really gone.
pub fn live_process_group_members(group_id: u32) -> io::Result<Vec<u32>> {
    let group = group_id.to_string();
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // Gone between the listing and the read: not a member any more.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The fields after the command name, which may itself hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').and_then(|index| stat.get(index + 2..)) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let (state, _parent, process_group) = (fields.next(), fields.next(), fields.next());
        if state != Some("Z") && process_group == Some(group.as_str()) {
            members.push(pid);
        }
    }
    Ok(members)
}

/// Prepares a helper child process (the timer change experiment's changer): its own process
/// group and SIGTERM from the kernel if rtlab dies without cleaning up (even by SIGKILL). A
/// `--load-cmd` goes through [`crate::load_supervisor`] instead, which also reaches its children.
///
/// The parent-death signal fires when the *thread* that spawned the child exits, so spawn from a
/// thread that lives as long as the load (the main thread).
pub fn configure_load_command(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    command.process_group(0);
    let parent = std::process::id();
    // SAFETY: the closure runs in the child between fork and exec; it only calls prctl, getppid
    // and _exit, which are async-signal-safe, and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0,
                0,
                0,
            ) == -1
            {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect: then never start the load.
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Clock ticks per second, the unit of utime/stime in /proc/PID/stat.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

/// What the calling thread has used so far, from /proc/thread-self/{stat,status}.
///
/// The stressors report these deltas so a load can be shown (and tested) to really consume what
/// it claims, measured by the kernel rather than by wall-clock time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadUsage {
    /// utime + stime, ns (clock-tick resolution).
    pub cpu_time_ns: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

impl ThreadUsage {
    /// `self − earlier`, field by field (saturating).
    pub fn since(&self, earlier: &ThreadUsage) -> ThreadUsage {
        ThreadUsage {
            cpu_time_ns: self.cpu_time_ns.saturating_sub(earlier.cpu_time_ns),
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
            major_faults: self.major_faults.saturating_sub(earlier.major_faults),
            voluntary_switches: self
                .voluntary_switches
                .saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self
                .involuntary_switches
                .saturating_sub(earlier.involuntary_switches),
        }
    }

    /// Field-by-field sum.
    pub fn add(&mut self, other: &ThreadUsage) {
        self.cpu_time_ns += other.cpu_time_ns;
        self.minor_faults += other.minor_faults;
        self.major_faults += other.major_faults;
        self.voluntary_switches += other.voluntary_switches;
        self.involuntary_switches += other.involuntary_switches;
    }
}

/// Parses a /proc/PID/stat line and a /proc/PID/status text into a [`ThreadUsage`].
pub fn parse_thread_usage(
    stat: &str,
    status: &str,
    ticks_per_second: u64,
) -> io::Result<ThreadUsage> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("stat: {what}"));
    // The command name (field 2) may contain spaces and parentheses: fields restart after the
    // last ')'. After it, field 3 (state) is index 0, so field N is index N - 3.
    let rest = stat
        .rfind(')')
        .map(|index| &stat[index + 1..])
        .ok_or_else(|| invalid("no ')' after the command name"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |number: usize| -> io::Result<u64> {
        fields
            .get(number - 3)
            .and_then(|text| text.parse::<u64>().ok())
            .ok_or_else(|| invalid(&format!("field {number} missing or not a number")))
    };
    let ticks = field(14)? + field(15)?;
    let status_field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0)
    };
    Ok(ThreadUsage {
        cpu_time_ns: ticks.saturating_mul(1_000_000_000) / ticks_per_second.max(1),
        minor_faults: field(10)?,
        major_faults: field(12)?,
        voluntary_switches: status_field("voluntary_ctxt_switches:"),
        involuntary_switches: status_field("nonvoluntary_ctxt_switches:"),
    })
}

/// The calling thread's usage so far.
pub fn current_thread_usage() -> io::Result<ThreadUsage> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat")?;
    let status = std::fs::read_to_string("/proc/thread-self/status")?;
    parse_thread_usage(&stat, &status, clock_ticks_per_second())
}

/// Bytes this process asked to write (`wchar`) and bytes it caused to reach storage
/// (`write_bytes`), from /proc/self/io.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessIo {
    pub written_chars: u64,
    pub storage_write_bytes: u64,
    pub storage_read_bytes: u64,
}

pub fn parse_process_io(text: &str) -> ProcessIo {
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0)
    };
    ProcessIo {
        written_chars: field("wchar:"),
        storage_write_bytes: field("write_bytes:"),
        storage_read_bytes: field("read_bytes:"),
    }
}

pub fn process_io() -> io::Result<ProcessIo> {
    Ok(parse_process_io(&std::fs::read_to_string("/proc/self/io")?))
}

/// Processes created since boot (`processes` in /proc/stat): counts every fork and clone.
pub fn forks_since_boot() -> io::Result<u64> {
    let text = std::fs::read_to_string("/proc/stat")?;
    text.lines()
        .find_map(|line| line.strip_prefix("processes "))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "/proc/stat: no 'processes' line",
            )
        })
}

/// Size of the largest CPU cache of CPU 0 in bytes (the last-level cache), from sysfs.
pub fn last_level_cache_bytes() -> Option<u64> {
    let directory = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    directory
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let size = std::fs::read_to_string(entry.path().join("size")).ok()?;
            parse_cache_size(&size)
        })
        .max()
}

/// `32768K` / `8M` / `512` → bytes.
pub fn parse_cache_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, multiplier) = match text.chars().last()? {
        'K' | 'k' => (&text[..text.len() - 1], 1024),
        'M' | 'm' => (&text[..text.len() - 1], 1024 * 1024),
        _ => (text, 1),
    };
    digits.parse::<u64>().ok().map(|value| value * multiplier)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_is_zeroed_and_writable() {
        let mut mapping = AnonymousMapping::new(3 * 4096).unwrap();
        assert_eq!(mapping.len(), 3 * 4096);
        let bytes = mapping.as_mut_slice();
        assert!(bytes.iter().all(|byte| *byte == 0));
        bytes[4096 * 2 + 7] = 42;
        assert_eq!(bytes[4096 * 2 + 7], 42);
        assert!(AnonymousMapping::new(0).is_err());
    }

    #[test]
    fn parses_thread_stat_with_spaces_in_the_name() {
        let stat =
            "1234 (rtlab load) cpu) R 1 1234 1234 0 -1 4194560 77 0 3 0 250 50 0 0 20 0 1 0 5 0 0";
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        let usage = parse_thread_usage(stat, status, 100).unwrap();
        assert_eq!(usage.cpu_time_ns, 3_000_000_000);
        assert_eq!(usage.minor_faults, 77);
        assert_eq!(usage.major_faults, 3);
        assert_eq!(usage.voluntary_switches, 12);
        assert_eq!(usage.involuntary_switches, 3);
        assert!(parse_thread_usage("garbage", "", 100).is_err());
    }

    #[test]
    fn own_thread_usage_is_readable() {
        let before = current_thread_usage().unwrap();
        let mut mapping = AnonymousMapping::new(64 * 4096).unwrap();
        for page in mapping.as_mut_slice().chunks_mut(4096) {
            page[0] = 1;
        }
        let after = current_thread_usage().unwrap();
        assert!(
            after.since(&before).minor_faults >= 32,
            "{before:?} {after:?}"
        );
    }

    #[test]
    fn parses_process_io_and_cache_sizes() {
        let io =
            parse_process_io("rchar: 5\nwchar: 4096\nsyscr: 1\nread_bytes: 0\nwrite_bytes: 8192\n");
        assert_eq!(io.written_chars, 4096);
        assert_eq!(io.storage_write_bytes, 8192);
        assert_eq!(parse_cache_size("32768K\n"), Some(32 * 1024 * 1024));
        assert_eq!(parse_cache_size("8M"), Some(8 * 1024 * 1024));
        assert_eq!(parse_cache_size("x"), None);
        assert!(forks_since_boot().unwrap() > 0);
    }

    #[test]
    fn refuses_to_signal_group_one() {
        assert!(signal_process_group(1, GroupSignal::Terminate).is_err());
        assert!(signal_process_group(0, GroupSignal::Terminate).is_err());
    }

    #[test]
    fn finds_its_own_process_group() {
        // SAFETY: getpgrp only returns this process's group id.
        let group = unsafe { libc::getpgrp() } as u32;
        let members = live_process_group_members(group).unwrap();
        assert!(members.contains(&std::process::id()), "{members:?}");
    }

    #[test]
    fn clock_ticks_are_positive() {
        assert!(clock_ticks_per_second() > 0);
    }
}
