//! perf_event_open: per-CPU `cpu-clock` sampling with call chains, read from the mmap ring.
//!
//! `rtlab run --explain --stacks` attaches to each late wake-up the call stack of what was running
//! (paper 002 wished for exactly this). The software cpu-clock event works in every VM (no PMU
//! needed); time stamps use CLOCK_MONOTONIC so they line up with the probe and the trace. This
//! module only opens, maps and drains the ring; parsing the records is done by rtlab-explain.

use std::io;
use std::sync::atomic::{fence, Ordering};

/// `struct perf_event_attr`, PERF_ATTR_SIZE_VER5 (112 bytes), include/uapi/linux/perf_event.h.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
pub const PERF_SAMPLE_IP: u64 = 1 << 0;
pub const PERF_SAMPLE_TID: u64 = 1 << 1;
pub const PERF_SAMPLE_TIME: u64 = 1 << 2;
pub const PERF_SAMPLE_CALLCHAIN: u64 = 1 << 5;
pub const PERF_SAMPLE_CPU: u64 = 1 << 7;
/// The sample fields [`CpuClockSampler`] asks for, in record order: ip, pid/tid, time, cpu,
/// callchain.
pub const SAMPLE_TYPE: u64 =
    PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_CALLCHAIN;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const FLAG_USE_CLOCKID: u64 = 1 << 25;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
/// Offsets of `data_head` and `data_tail` in `struct perf_event_mmap_page`.
const DATA_HEAD_OFFSET: usize = 1024;
const DATA_TAIL_OFFSET: usize = 1032;

/// One CPU's cpu-clock sampling event and its mapped ring. Closed and unmapped on drop.
#[derive(Debug)]
pub struct CpuClockSampler {
    fd: libc::c_int,
    base: *mut u8,
    map_length: usize,
    page_size: usize,
    data_size: usize,
    cpu: usize,
}

// SAFETY: the mapping is owned exclusively by this value; the kernel writes the data area
// concurrently, which is what the head/tail protocol in `drain` handles. Moving the owner to
// another thread does not change that.
unsafe impl Send for CpuClockSampler {}

impl CpuClockSampler {
    /// Samples every task on `cpu` every `period_ns` of CPU time, with kernel and user call chains
    /// (at most `max_stack` frames), into a ring of `data_pages` pages (a power of two).
    pub fn open(
        cpu: usize,
        period_ns: u64,
        data_pages: usize,
        max_stack: u16,
    ) -> io::Result<CpuClockSampler> {
        if !data_pages.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "perf ring pages must be a power of two",
            ));
        }
        let attr = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_CPU_CLOCK,
            sample_period: period_ns.max(10_000),
            sample_type: SAMPLE_TYPE,
            flags: FLAG_DISABLED | FLAG_EXCLUDE_HV | FLAG_USE_CLOCKID,
            clockid: libc::CLOCK_MONOTONIC,
            sample_max_stack: max_stack,
            ..PerfEventAttr::default()
        };
        // SAFETY: `attr` is a valid, initialised perf_event_attr whose `size` matches its layout;
        // the kernel only reads it. pid -1 with a cpu means "every task on that CPU".
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                -1 as libc::pid_t,
                cpu as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = fd as libc::c_int;
        // SAFETY: sysconf takes a constant and has no side effects.
        let page_size =
            usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let map_length = page_size * (1 + data_pages);
        // SAFETY: mapping a fresh perf fd with a length of 1 + 2^n pages is the documented use; the
        // result is checked against MAP_FAILED before it is used.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_length,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let error = io::Error::last_os_error();
            // SAFETY: `fd` is a descriptor we opened and nothing else holds.
            unsafe { libc::close(fd) };
            return Err(error);
        }
        Ok(CpuClockSampler {
            fd,
            base: base.cast(),
            map_length,
            page_size,
            data_size: page_size * data_pages,
            cpu,
        })
    }

    pub fn cpu(&self) -> usize {
        self.cpu
    }

    pub fn enable(&self) -> io::Result<()> {
        // SAFETY: an ioctl without argument on our own perf fd.
        let result = unsafe { libc::ioctl(self.fd, PERF_EVENT_IOC_ENABLE as _, 0) };
        if result == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Calls `visit` with each complete record (header included) written since the last call,
    /// then hands the space back to the kernel.
    pub fn drain(&mut self, mut visit: impl FnMut(&[u8])) {
        // SAFETY: `base` maps at least one page; data_head is an aligned u64 inside it that the
        // kernel updates, read volatile.
        let head =
            unsafe { std::ptr::read_volatile(self.base.add(DATA_HEAD_OFFSET) as *const u64) };
        fence(Ordering::Acquire);
        // SAFETY: data_tail is an aligned u64 inside the first page that only we write.
        let mut tail =
            unsafe { std::ptr::read_volatile(self.base.add(DATA_TAIL_OFFSET) as *const u64) };
        // SAFETY: the data area follows the first page and is `data_size` bytes long.
        let data =
            unsafe { std::slice::from_raw_parts(self.base.add(self.page_size), self.data_size) };
        let mut record = Vec::new();
        while tail + 8 <= head {
            let start = (tail % self.data_size as u64) as usize;
            let mut header = [0u8; 8];
            for (index, byte) in header.iter_mut().enumerate() {
                *byte = data[(start + index) % self.data_size];
            }
            let size = u16::from_ne_bytes([header[6], header[7]]) as usize;
            if size < 8 || tail + size as u64 > head {
                break;
            }
            record.clear();
            if start + size <= self.data_size {
                record.extend_from_slice(&data[start..start + size]);
            } else {
                record.extend_from_slice(&data[start..]);
                record.extend_from_slice(&data[..size - (self.data_size - start)]);
            }
            visit(&record);
            tail += size as u64;
        }
        fence(Ordering::Release);
        // SAFETY: as above; writing data_tail tells the kernel the space is free again.
        unsafe { std::ptr::write_volatile(self.base.add(DATA_TAIL_OFFSET) as *mut u64, tail) };
    }
}

impl Drop for CpuClockSampler {
    fn drop(&mut self) {
        // SAFETY: `fd` and the mapping are ours; after this nothing uses them.
        unsafe {
            libc::ioctl(self.fd, PERF_EVENT_IOC_DISABLE as _, 0);
            libc::munmap(self.base.cast(), self.map_length);
            libc::close(self.fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_has_the_version_5_layout() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 112);
    }

    #[test]
    #[ignore = "needs root (perf_event_open on a CPU)"]
    fn samples_a_busy_cpu() {
        let cpu = crate::cpu::current_cpu().unwrap_or(0);
        let mut sampler = CpuClockSampler::open(cpu, 100_000, 8, 32).unwrap_or_else(|error| {
            panic!("this test needs perf_event_open on CPU {cpu} (run it as root): {error}")
        });
        crate::cpu::pin_current_thread(cpu).unwrap();
        sampler.enable().unwrap();
        let stop = crate::clock::monotonic_ns() + 20_000_000;
        while crate::clock::monotonic_ns() < stop {
            std::hint::spin_loop();
        }
        let mut samples = 0;
        sampler.drain(|record| {
            if u32::from_ne_bytes(record[0..4].try_into().unwrap()) == 9 {
                samples += 1;
            }
        });
        assert!(
            samples > 0,
            "20 ms of spinning produced no cpu-clock sample"
        );
    }
}
