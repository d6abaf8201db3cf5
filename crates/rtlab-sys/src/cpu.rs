//! Which CPUs are online, and pinning the calling thread to one.

use std::io;

/// Parses a kernel CPU list such as `0-3,8,10-11` (the format of /sys/devices/system/cpu/online
/// and of `--cpus`).
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in text
        .trim()
        .split(',')
        .filter(|part| !part.trim().is_empty())
    {
        let part = part.trim();
        let (first, last) = match part.split_once('-') {
            Some((first, last)) => (first.trim(), last.trim()),
            None => (part, part),
        };
        let first: usize = first
            .parse()
            .map_err(|_| format!("'{part}' is not a CPU number or range"))?;
        let last: usize = last
            .parse()
            .map_err(|_| format!("'{part}' is not a CPU number or range"))?;
        if last < first || last >= 4096 {
            return Err(format!("'{part}' is not a valid CPU range"));
        }
        cpus.extend(first..=last);
    }
    if cpus.is_empty() {
        return Err(format!("'{text}' names no CPU"));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// The online CPUs, from /sys/devices/system/cpu/online.
pub fn online_cpus() -> io::Result<Vec<usize>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online")?;
    parse_cpu_list(&text).map_err(|message| io::Error::new(io::ErrorKind::InvalidData, message))
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    pin_current_thread_to(&[cpu])
}

/// Restricts the calling thread to a set of CPUs.
pub fn pin_current_thread_to(cpus: &[usize]) -> io::Result<()> {
    // Thread id 0 is the calling thread.
    set_thread_affinity(0, cpus)
}

/// Restricts thread `tid` to `cpus`.
pub fn set_thread_affinity(tid: u32, cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is a plain bitmask; all-zero is the valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is out of range"),
            ));
        }
        // SAFETY: `cpu` was checked to be below CPU_SETSIZE.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; the kernel only reads it.
    let result = unsafe {
        libc::sched_setaffinity(
            tid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &set,
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's kernel thread id.
pub fn current_tid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// The CPU the calling thread is running on right now.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no arguments; it returns -1 on error.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kernel_cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8\n").unwrap(), vec![0, 1, 2, 3, 8]);
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert_eq!(parse_cpu_list("1,0,1").unwrap(), vec![0, 1]);
        for bad in ["", "a", "3-1", "0-", "1,,x"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pinning_moves_the_thread() {
        let online = online_cpus().unwrap();
        let target = *online.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(target).unwrap();
            assert_eq!(current_cpu(), Some(target));
        })
        .join()
        .unwrap();
    }
}
