//! The application-trace recorder's loader (`rtlab trace record --recorder bpf`): loads
//! `bpf/apptrace.bpf.o`, attaches its programs through links this process owns (nothing pinned,
//! so the kernel detaches everything when the process ends, however it ends), keeps the target
//! maps and hands out the ring buffer's 32-byte records (the rtlab trace file's record layout;
//! decoding them is the trace file's business).

use crate::loader::{chain, map_error, missing_map, BpfError};
use aya::maps::{HashMap, MapData, PerCpuArray, RingBuf};
use aya::{Btf, Ebpf, EbpfLoader};
use std::os::fd::{AsFd, BorrowedFd};

/// Every program of this object is named with this prefix.
pub const APPTRACE_PROGRAM_PREFIX: &str = "apptrace_";

/// Bytes of one record (the C `struct app_record`, the trace file's record).
pub const APPTRACE_RECORD_SIZE: usize = 32;

/// The compiled programs (`bpf/build-apptrace.sh`; `.ci/bpf-check` rebuilds and compares it).
static OBJECT: &[u8] = aya::include_bytes_aligned!("../bpf/apptrace.bpf.o");

/// The futex syscall's number (the programs read x86-64 registers).
#[cfg(target_arch = "x86_64")]
const FUTEX_NR: Option<u32> = Some(202);
#[cfg(not(target_arch = "x86_64"))]
const FUTEX_NR: Option<u32> = None;

/// The programs in attach order, as (program, tracepoint, the tracefs name of what it records,
/// required): the rows of rtlab-core's table this recorder attaches
/// (`rtlab_core::tracepoints::app_bpf_programs`). A required tracepoint's absence fails the
/// start; the x86 vectors are attached where they exist.
fn programs() -> Vec<(&'static str, &'static str, Option<String>, bool)> {
    rtlab_core::tracepoints::app_bpf_programs()
        .into_iter()
        .map(|(row, program)| {
            (
                program.program,
                program.attach_to,
                program.records.then(|| row.full_name()),
                program.need == rtlab_core::tracepoints::Need::Required,
            )
        })
        .collect()
}

/// The counters the programs keep, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AppCounters {
    /// Records written to the ring buffer.
    pub records: u64,
    /// Records the ring buffer had no room for.
    pub lost: u64,
}

/// The programs that record cycle markers and work-done markers, and the names their records
/// are listed under.
const CYCLE_MARKER_PROGRAM: &str = "apptrace_cycle_marker";
const WORK_DONE_PROGRAM: &str = "apptrace_work_done";
pub const CYCLE_MARKER_RECORD: &str = "uprobe:cycle";
pub const WORK_DONE_RECORD: &str = "uprobe:done";

/// Loads `program` (a uprobe or uretprobe) and attaches it at each of `offsets` in `binary`,
/// for every process.
fn attach_uprobes(
    ebpf: &mut Ebpf,
    program: &str,
    binary: &std::path::Path,
    offsets: &[u64],
) -> Result<(), String> {
    use aya::programs::uprobe::{UProbeAttachLocation, UProbeScope};
    let handle: &mut aya::programs::UProbe = ebpf
        .program_mut(program)
        .ok_or_else(|| "not in the object".to_owned())?
        .try_into()
        .map_err(|error: aya::programs::ProgramError| chain(&error))?;
    handle.load().map_err(|error| chain(&error))?;
    for offset in offsets {
        handle
            .attach(
                UProbeAttachLocation::AbsoluteOffset(*offset),
                binary,
                UProbeScope::AllProcesses,
            )
            .map_err(|error| chain(&error))?;
    }
    Ok(())
}

/// The loaded and attached application-trace programs. Dropping it detaches everything.
pub struct AppBpfRecorder {
    events: RingBuf<MapData>,
    targets: HashMap<MapData, u32, [u8; 8]>,
    target_processes: HashMap<MapData, u32, u32>,
    spawners: HashMap<MapData, u32, u32>,
    counters: PerCpuArray<MapData, u64>,
    enabled: Vec<String>,
    /// Owns the programs and their links; dropped last.
    _ebpf: Ebpf,
}

impl std::fmt::Debug for AppBpfRecorder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("AppBpfRecorder")
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

impl AppBpfRecorder {
    /// Loads and attaches the programs with a ring buffer of at least `ring_bytes` (rounded up to
    /// a power of two, at least 1 MiB); user space is woken once a quarter of it is waiting.
    ///
    /// With `markers` (an ELF file, the file offsets of functions in it, and whether at their
    /// return), uprobes there record a cycle marker at each call (entry) or a work-done marker
    /// (return), in every process mapping the file (detached with the rest: the kernel drops a
    /// uprobe made through perf_event_open with its last fd).
    pub fn start(
        ring_bytes: usize,
        markers: &[(&std::path::Path, Vec<u64>, bool)],
    ) -> Result<AppBpfRecorder, BpfError> {
        let futex_nr = FUTEX_NR.ok_or_else(|| {
            BpfError::Load("the application-trace programs read x86-64 registers".into())
        })?;
        let btf = Btf::from_sys_fs().map_err(|error| BpfError::Btf(chain(&error)))?;
        let possible_cpus = aya::util::nr_cpus()
            .map_err(|(what, error)| BpfError::Cpus(format!("{what}: {error}")))?;
        let ring_bytes = ring_bytes.clamp(1 << 20, 1 << 30).next_power_of_two();
        let wakeup_bytes = (ring_bytes / 4) as u64;
        let mut ebpf = EbpfLoader::new()
            .btf(Some(&btf))
            .map_max_entries("presence", possible_cpus as u32)
            .map_max_entries("events", ring_bytes as u32)
            .override_global("futex_nr", &futex_nr, true)
            .override_global("wakeup_bytes", &wakeup_bytes, true)
            .load(OBJECT)
            .map_err(|error| BpfError::Load(chain(&error)))?;
        let mut enabled = Vec::new();
        for (program, tracepoint, records, required) in programs() {
            let result = crate::loader::attach_btf_tracepoint(&mut ebpf, program, tracepoint, &btf);
            match result {
                Ok(()) => enabled.extend(records),
                Err(reason) if required => {
                    return Err(BpfError::Program {
                        program,
                        tracepoint,
                        reason,
                    })
                }
                // An x86 vector this kernel lacks.
                Err(_) => {}
            }
        }
        for (binary, offsets, at_return) in markers {
            let (program, record) = if *at_return {
                (WORK_DONE_PROGRAM, WORK_DONE_RECORD)
            } else {
                (CYCLE_MARKER_PROGRAM, CYCLE_MARKER_RECORD)
            };
            attach_uprobes(&mut ebpf, program, binary, offsets).map_err(|reason| {
                BpfError::Program {
                    program,
                    tracepoint: "uprobe",
                    reason,
                }
            })?;
            enabled.push(record.to_owned());
        }
        let take = |ebpf: &mut Ebpf, name: &'static str| {
            ebpf.take_map(name).ok_or_else(|| missing_map(name))
        };
        let events = RingBuf::try_from(take(&mut ebpf, "events")?).map_err(map_error("events"))?;
        let targets =
            HashMap::try_from(take(&mut ebpf, "targets")?).map_err(map_error("targets"))?;
        let target_processes = HashMap::try_from(take(&mut ebpf, "target_processes")?)
            .map_err(map_error("target_processes"))?;
        let spawners =
            HashMap::try_from(take(&mut ebpf, "spawners")?).map_err(map_error("spawners"))?;
        let counters =
            PerCpuArray::try_from(take(&mut ebpf, "counters")?).map_err(map_error("counters"))?;
        Ok(AppBpfRecorder {
            events,
            targets,
            target_processes,
            spawners,
            counters,
            enabled,
            _ebpf: ebpf,
        })
    }

    /// `system:event` of every tracepoint event recorded (the names tracefs gives them).
    pub fn enabled_events(&self) -> &[String] {
        &self.enabled
    }

    /// Follows process `tgid`: threads it creates from now on become targets in the kernel.
    pub fn add_process(&mut self, tgid: u32) -> Result<(), BpfError> {
        self.target_processes
            .insert(tgid, 1, 0)
            .map_err(map_error("target_processes"))
    }

    /// The next process thread `tid` creates is a target from its fork on (call before starting
    /// the target command from that thread; [`AppBpfRecorder::forget_spawner`] after).
    pub fn follow_next_child_of(&mut self, tid: u32) -> Result<(), BpfError> {
        self.spawners
            .insert(tid, 1, 0)
            .map_err(map_error("spawners"))
    }

    /// Undoes [`AppBpfRecorder::follow_next_child_of`] if no fork used it.
    pub fn forget_spawner(&mut self, tid: u32) {
        let _ = self.spawners.remove(&tid);
    }

    /// Makes thread `tid` of process `tgid` a target (kept if the kernel has it already, with the
    /// CPU it knows).
    pub fn add_thread(&mut self, tid: u32, tgid: u32) -> Result<(), BpfError> {
        if self.targets.get(&tid, 0).is_ok() {
            return Ok(());
        }
        let mut value = [0u8; 8];
        value[0..4].copy_from_slice(&(tgid as i32).to_ne_bytes());
        value[4..8].copy_from_slice(&(-1i32).to_ne_bytes());
        // BPF_NOEXIST: a fork the kernel saw meanwhile wins.
        match self.targets.insert(tid, value, 1) {
            Ok(()) => Ok(()),
            Err(aya::maps::MapError::SyscallError(error))
                if error.io_error.raw_os_error() == Some(17) =>
            {
                Ok(())
            }
            Err(error) => Err(map_error("targets")(error)),
        }
    }

    /// The target threads the kernel knows now (those it added at their fork included).
    pub fn target_threads(&self) -> Vec<(u32, u32)> {
        self.targets
            .iter()
            .filter_map(Result::ok)
            .map(|(tid, value)| {
                let tgid = i32::from_ne_bytes(value[0..4].try_into().expect("4 bytes"));
                (tid, tgid as u32)
            })
            .collect()
    }

    /// The ring buffer's descriptor: readable once a quarter of the ring is waiting (the
    /// programs write without waking user space below that; read on a timer too).
    pub fn ring_fd(&self) -> BorrowedFd<'_> {
        self.events.as_fd()
    }

    /// Hands every record waiting in the ring buffer to `on_record`; returns how many there were
    /// and how many had the wrong size (never expected; counted, not guessed at).
    pub fn drain(&mut self, mut on_record: impl FnMut(&[u8; APPTRACE_RECORD_SIZE])) -> (u64, u64) {
        let mut read = 0;
        let mut wrong_size = 0;
        while let Some(item) = self.events.next() {
            match <&[u8; APPTRACE_RECORD_SIZE]>::try_from(&item[..]) {
                Ok(record) => {
                    read += 1;
                    on_record(record);
                }
                Err(_) => wrong_size += 1,
            }
        }
        (read, wrong_size)
    }

    /// The counters, summed over CPUs.
    pub fn counters(&self) -> Result<AppCounters, BpfError> {
        let read = |index: u32| crate::loader::per_cpu_sum(&self.counters, "counters", index);
        Ok(AppCounters {
            records: read(0)?,
            lost: read(1)?,
        })
    }
}
