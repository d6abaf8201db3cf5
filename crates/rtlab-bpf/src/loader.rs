//! Loading, attaching and reading the programs (aya).
//!
//! [`BpfRecorder::start`] loads the committed object with the running kernel's BTF (CO-RE
//! relocations resolve the few `task_struct`/`hrtimer` fields the programs read), sizes the
//! per-CPU windows, sets the measured CPUs and the address of `hrtimer_wakeup` as read-only
//! globals, and attaches every program through a BPF link this process owns. Nothing is pinned:
//! dropping the recorder, or the process dying in any way, closes the links and the kernel
//! detaches and frees everything.

use crate::records::{
    decode_record, u32_at, u64_at, Record, RecordError, HISTOGRAM_BUCKETS, MAX_SLOTS,
};
use aya::maps::{Array, HashMap, MapData, PerCpuArray, RingBuf};
use aya::programs::BtfTracePoint;
use aya::{Btf, Ebpf, EbpfLoader};
use std::os::fd::{AsFd, BorrowedFd};
use thiserror::Error;

/// Every program of ours is named with this prefix (the kernel keeps 15 characters of a name).
pub const PROGRAM_PREFIX: &str = "rtlab_";

/// The compiled programs (`bpf/build.sh`; `.ci/bpf-check` rebuilds and compares it).
static OBJECT: &[u8] = aya::include_bytes_aligned!("../bpf/rtlab.bpf.o");

/// Size of the C `struct measured`.
const MEASURED_SIZE: usize = 232;

/// Size of the C `struct cpu_state` and where its per-event counters (`events`, `clock_reads`,
/// `untimed`, three `u64`) start.
const CPU_STATE_SIZE: usize = 208;
const CPU_STATE_COUNTERS: usize = 184;

/// The C `TID_TABLE` and `TID_PROBES`: the measured threads' open-addressed tid table.
const TID_TABLE: usize = 1024;
const TID_PROBES: usize = 8;
/// Size of the C `struct tid_table`: `overflow`, `pad`, then `TID_TABLE` (tid, slot) pairs.
const TID_TABLE_SIZE: usize = 8 + 8 * TID_TABLE;

/// Where the tid table's probes for `tid` start (the C `measured_of`'s hash).
fn tid_home(tid: u32) -> usize {
    tid.wrapping_mul(2_654_435_761) as usize
}

/// Puts (`tid`, `slot`) into the tid table `table` (the C `struct tid_table`'s bytes) at the
/// first of its probes that is free or already holds `tid`, as the C `measured_of` searches it.
/// False when every probe holds another tid: the caller puts the tid in the overflow map and
/// sets the table's `overflow` word.
fn place_tid(table: &mut [u8; TID_TABLE_SIZE], tid: u32, slot: u32) -> bool {
    let home = tid_home(tid);
    let free = (0..TID_PROBES)
        .map(|probe| 8 + 8 * ((home + probe) % TID_TABLE))
        .find(|&at| {
            let present = u32_at(&table[..], at);
            present == 0 || present == tid
        });
    match free {
        Some(at) => {
            table[at..at + 4].copy_from_slice(&tid.to_ne_bytes());
            table[at + 4..at + 8].copy_from_slice(&slot.to_ne_bytes());
            true
        }
        None => false,
    }
}

/// The programs in attach order, as (program, tracepoint, in the standard event set, required):
/// the rows of rtlab-core's table this recorder attaches
/// (`rtlab_core::tracepoints::explain_bpf_programs`). The full set attaches all; a required
/// tracepoint's absence fails the start, the others are attached where the kernel has them.
fn programs() -> Vec<(&'static str, &'static str, bool, bool)> {
    use rtlab_core::tracepoints::{ExplainSet, Need};
    rtlab_core::tracepoints::explain_bpf_programs()
        .into_iter()
        .map(|(row, program)| {
            (
                program.program,
                row.name,
                program.set == ExplainSet::Standard,
                program.need == Need::Required,
            )
        })
        .collect()
}

#[derive(Debug, Error)]
pub enum BpfError {
    #[error("kernel BTF (/sys/kernel/btf/vmlinux): {0}")]
    Btf(String),
    #[error("loading the BPF object: {0}")]
    Load(String),
    #[error("BPF program {program} ({tracepoint}): {reason}")]
    Program {
        program: &'static str,
        tracepoint: &'static str,
        reason: String,
    },
    #[error("BPF map {map}: {reason}")]
    Map { map: &'static str, reason: String },
    #[error("/proc/kallsyms: {0}")]
    Symbols(String),
    #[error("CPU {0} is beyond the 256 CPUs the recorder supports")]
    CpuOutOfRange(usize),
    #[error("more than {MAX_SLOTS} measuring threads")]
    TooManyThreads,
    #[error("possible CPUs: {0}")]
    Cpus(String),
}

/// An error with its causes, `a: b: c` (aya's outer messages alone say little).
pub(crate) use rtlab_core::error_chain::error_chain as chain;

pub(crate) fn map_error(map: &'static str) -> impl Fn(aya::maps::MapError) -> BpfError {
    move |error| BpfError::Map {
        map,
        reason: chain(&error),
    }
}

/// Loads the tp_btf program `program` of `ebpf` for `tracepoint` and attaches it (the link is
/// owned by `ebpf`, so it goes when the recorder is dropped); the reason in words when it fails.
pub(crate) fn attach_btf_tracepoint(
    ebpf: &mut Ebpf,
    program: &str,
    tracepoint: &str,
    btf: &Btf,
) -> Result<(), String> {
    let handle: &mut BtfTracePoint = ebpf
        .program_mut(program)
        .ok_or_else(|| "not in the object".to_owned())?
        .try_into()
        .map_err(|error: aya::programs::ProgramError| chain(&error))?;
    handle
        .load(tracepoint, btf)
        .map_err(|error| chain(&error))?;
    handle.attach().map_err(|error| chain(&error))?;
    Ok(())
}

/// Slot `index` of a per-CPU `u64` counter array (the map named `map`), summed over CPUs.
pub(crate) fn per_cpu_sum(
    counters: &PerCpuArray<MapData, u64>,
    map: &'static str,
    index: u32,
) -> Result<u64, BpfError> {
    Ok(counters
        .get(&index, 0)
        .map_err(map_error(map))?
        .iter()
        .sum())
}

/// What to record.
#[derive(Clone, Debug, Default)]
pub struct BpfConfig {
    /// The measured CPUs: events are kept only for these.
    pub cpus: Vec<usize>,
    /// Attach the full event set (adds the local timer vector, sched_wakeup, sched_migrate_task).
    pub full_events: bool,
    /// Which events read the clock (the default is the cheapest; the others exist to measure what
    /// each saving is worth).
    pub clock: ClockPolicy,
    /// Every episode copies the whole 1024-event window instead of its tail (only to measure
    /// what the tails save in ring space and lost episodes).
    pub whole_window_episodes: bool,
    /// Every program returns at once: nothing is recorded (only to measure the floor, what the
    /// attached programs cost the wake-up path before they do any work).
    pub attach_only: bool,
}

/// Which events read the clock (`bpf_ktime_get_ns`), the C `enum clock_policy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClockPolicy {
    /// The timer tracepoint's own time is reused (its expiry, and the measured thread's waking
    /// inside that callback), and while no measured wake-up is pending on a CPU the events that
    /// cannot change an attribution (switches between two ordinary tasks, wakings of unmeasured
    /// tasks, migrations, work items) take the CPU's last known time, marked as a lower bound.
    #[default]
    WhilePending,
    /// Only the timer tracepoint's time is reused; every other event reads the clock.
    ReuseTracepoint,
    /// Every event reads the clock.
    EveryEvent,
}

impl ClockPolicy {
    /// Parses `pending`, `reuse` or `every` (the benchmark's `RTLAB_BPF_CLOCK`).
    pub fn parse(text: &str) -> Option<ClockPolicy> {
        match text {
            "pending" => Some(ClockPolicy::WhilePending),
            "reuse" => Some(ClockPolicy::ReuseTracepoint),
            "every" => Some(ClockPolicy::EveryEvent),
            _ => None,
        }
    }

    fn c_value(self) -> u32 {
        match self {
            ClockPolicy::WhilePending => 0,
            ClockPolicy::ReuseTracepoint => 1,
            ClockPolicy::EveryEvent => 2,
        }
    }
}

/// One program's kernel-side cost, as the kernel counts it while run-time statistics are on
/// ([`RunTimeStats`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramCost {
    /// The tracepoint it is attached to.
    pub tracepoint: &'static str,
    /// Total time spent in the program, ns.
    pub run_time_ns: u64,
    /// How many times it ran.
    pub run_count: u64,
}

/// Kernel-side run-time statistics of BPF programs (`BPF_ENABLE_STATS`, what
/// `sysctl kernel.bpf_stats_enabled=1` turns on), on while this value lives: dropping it closes
/// the descriptor and the kernel stops counting, however the process ends, so the setting is
/// never left changed. Counting costs two clock reads per program run, so measure with it on in
/// every mode being compared.
#[derive(Debug)]
pub struct RunTimeStats {
    _descriptor: std::os::fd::OwnedFd,
}

impl RunTimeStats {
    pub fn enable() -> Result<RunTimeStats, BpfError> {
        aya::sys::enable_stats(aya::sys::Stats::RunTime)
            .map(|descriptor| RunTimeStats {
                _descriptor: descriptor,
            })
            .map_err(|error| BpfError::Load(format!("BPF_ENABLE_STATS: {}", chain(&error))))
    }
}

/// The counters the programs keep, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub events: u64,
    pub episodes: u64,
    /// Episodes the ring buffer had no room for.
    pub episodes_lost: u64,
    pub samples: u64,
    pub samples_lost: u64,
    pub clock_reads: u64,
    /// Events stamped with the CPU's last known time instead of a clock read.
    pub untimed_events: u64,
    /// Episodes sent as a short tail (64 or 256 events) instead of the whole window.
    pub tail_episodes: u64,
}

/// The loaded and attached programs with their maps. Dropping it detaches everything.
pub struct BpfRecorder {
    records: RingBuf<MapData>,
    measured: Array<MapData, [u8; MEASURED_SIZE]>,
    /// The tid table as written to the kernel, and the map it goes to.
    tid_table: Box<[u8; TID_TABLE_SIZE]>,
    measured_tids: Array<MapData, [u8; TID_TABLE_SIZE]>,
    measured_overflow: HashMap<MapData, u32, u32>,
    cpu_states: PerCpuArray<MapData, [u8; CPU_STATE_SIZE]>,
    thresholds: Array<MapData, u64>,
    histograms: PerCpuArray<MapData, u64>,
    counters: PerCpuArray<MapData, u64>,
    attached: Vec<&'static str>,
    /// Owns the programs and their links; dropped last.
    ebpf: Ebpf,
}

impl std::fmt::Debug for BpfRecorder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("BpfRecorder")
            .field("attached", &self.attached)
            .finish_non_exhaustive()
    }
}

/// The address of a kernel function from /proc/kallsyms.
fn kernel_symbol(name: &str) -> Result<u64, BpfError> {
    let text = std::fs::read_to_string("/proc/kallsyms")
        .map_err(|error| BpfError::Symbols(error.to_string()))?;
    let address = text
        .lines()
        .find_map(|line| {
            let mut fields = line.split_whitespace();
            let address = fields.next()?;
            let _kind = fields.next()?;
            (fields.next()? == name).then(|| u64::from_str_radix(address, 16).ok())?
        })
        .ok_or_else(|| BpfError::Symbols(format!("no symbol {name}")))?;
    if address == 0 {
        return Err(BpfError::Symbols(format!(
            "{name}'s address is hidden (kptr_restrict; needs root)"
        )));
    }
    Ok(address)
}

impl BpfRecorder {
    /// Loads and attaches the programs. Errors say which step and which program failed.
    pub fn start(config: &BpfConfig) -> Result<BpfRecorder, BpfError> {
        let btf = Btf::from_sys_fs().map_err(|error| BpfError::Btf(chain(&error)))?;
        let possible_cpus = aya::util::nr_cpus()
            .map_err(|(what, error)| BpfError::Cpus(format!("{what}: {error}")))?;
        let mut cpu_mask = [0u64; 4];
        for cpu in &config.cpus {
            if *cpu >= 256 {
                return Err(BpfError::CpuOutOfRange(*cpu));
            }
            cpu_mask[cpu / 64] |= 1 << (cpu % 64);
        }
        let hrtimer_wakeup = kernel_symbol("hrtimer_wakeup")?;
        let clock_policy = config.clock.c_value();
        let whole_window_episodes = u32::from(config.whole_window_episodes);
        let attach_only = u32::from(config.attach_only);
        let mut ebpf = EbpfLoader::new()
            .btf(Some(&btf))
            .map_max_entries("windows", possible_cpus as u32)
            .override_global("cpu_mask", &cpu_mask, true)
            .override_global("hrtimer_wakeup_function", &hrtimer_wakeup, true)
            .override_global("clock_policy", &clock_policy, true)
            .override_global("whole_window_episodes", &whole_window_episodes, true)
            .override_global("attach_only", &attach_only, true)
            .load(OBJECT)
            .map_err(|error| BpfError::Load(chain(&error)))?;
        let mut thresholds: Array<MapData, u64> = Array::try_from(
            ebpf.take_map("thresholds")
                .ok_or_else(|| missing_map("thresholds"))?,
        )
        .map_err(map_error("thresholds"))?;
        // No episode before a threshold is set.
        for slot in 0..MAX_SLOTS as u32 {
            thresholds
                .set(slot, u64::MAX, 0)
                .map_err(map_error("thresholds"))?;
        }
        let mut attached = Vec::new();
        for (program, tracepoint, standard, required) in programs() {
            if !standard && !config.full_events {
                continue;
            }
            let result = attach_btf_tracepoint(&mut ebpf, program, tracepoint, &btf);
            match result {
                Ok(()) => attached.push(tracepoint),
                Err(reason) if required => {
                    return Err(BpfError::Program {
                        program,
                        tracepoint,
                        reason,
                    })
                }
                // An optional tracepoint this kernel lacks (e.g. x86 vectors elsewhere).
                Err(_) => {}
            }
        }
        let records = RingBuf::try_from(
            ebpf.take_map("records")
                .ok_or_else(|| missing_map("records"))?,
        )
        .map_err(map_error("records"))?;
        let measured = Array::try_from(
            ebpf.take_map("measured")
                .ok_or_else(|| missing_map("measured"))?,
        )
        .map_err(map_error("measured"))?;
        let measured_tids = Array::try_from(
            ebpf.take_map("measured_tids")
                .ok_or_else(|| missing_map("measured_tids"))?,
        )
        .map_err(map_error("measured_tids"))?;
        let measured_overflow = HashMap::try_from(
            ebpf.take_map("measured_overflow")
                .ok_or_else(|| missing_map("measured_overflow"))?,
        )
        .map_err(map_error("measured_overflow"))?;
        let cpu_states = PerCpuArray::try_from(
            ebpf.take_map("cpu_states")
                .ok_or_else(|| missing_map("cpu_states"))?,
        )
        .map_err(map_error("cpu_states"))?;
        let histograms = PerCpuArray::try_from(
            ebpf.take_map("histograms")
                .ok_or_else(|| missing_map("histograms"))?,
        )
        .map_err(map_error("histograms"))?;
        let counters = PerCpuArray::try_from(
            ebpf.take_map("counters")
                .ok_or_else(|| missing_map("counters"))?,
        )
        .map_err(map_error("counters"))?;
        Ok(BpfRecorder {
            records,
            measured,
            tid_table: Box::new([0; TID_TABLE_SIZE]),
            measured_tids,
            measured_overflow,
            cpu_states,
            thresholds,
            histograms,
            counters,
            attached,
            ebpf,
        })
    }

    /// The tracepoints attached.
    pub fn attached(&self) -> &[&'static str] {
        &self.attached
    }

    /// Starts watching measuring thread `tid`, whose wake-ups feed series slot `slot`.
    pub fn watch_thread(&mut self, tid: u32, slot: u32) -> Result<(), BpfError> {
        if slot as usize >= MAX_SLOTS {
            return Err(BpfError::TooManyThreads);
        }
        let mut value = [0u8; MEASURED_SIZE];
        value[0..4].copy_from_slice(&slot.to_ne_bytes());
        self.measured
            .set(slot, value, 0)
            .map_err(map_error("measured"))?;
        // The tid table, else the overflow map, which the programs look in only once
        // `overflow` is set.
        if !place_tid(&mut self.tid_table, tid, slot) {
            self.measured_overflow
                .insert(tid, slot, 0)
                .map_err(map_error("measured_overflow"))?;
            self.tid_table[0..4].copy_from_slice(&1u32.to_ne_bytes());
        }
        self.measured_tids
            .set(0, *self.tid_table, 0)
            .map_err(map_error("measured_tids"))
    }

    /// Sets the late threshold of slot `slot`: wake-ups later than this (switch-in − intended)
    /// become episodes. `u64::MAX`: none.
    pub fn set_threshold(&mut self, slot: u32, threshold_ns: u64) -> Result<(), BpfError> {
        self.thresholds
            .set(slot, threshold_ns, 0)
            .map_err(map_error("thresholds"))
    }

    /// The ring buffer's descriptor: readable when records are waiting (the programs wake
    /// readers only for episodes).
    pub fn ring_fd(&self) -> BorrowedFd<'_> {
        self.records.as_fd()
    }

    /// Decodes every record waiting in the ring buffer; returns how many were read and how many
    /// could not be decoded.
    pub fn drain(&mut self, mut on_record: impl FnMut(Record)) -> (u64, u64) {
        self.drain_while(|record| {
            on_record(record);
            true
        })
    }

    /// Decodes the records waiting in the ring buffer until `on_record` returns false (after
    /// that record) or none is left. The programs go on writing while a reader drains, so a
    /// reader that matches records with another source stops to read that source again; returns
    /// how many were read and how many could not be decoded.
    pub fn drain_while(&mut self, mut on_record: impl FnMut(Record) -> bool) -> (u64, u64) {
        let mut read = 0;
        let mut undecodable = 0;
        while let Some(item) = self.records.next() {
            read += 1;
            let more = match decode_record(&item) {
                Ok(record) => on_record(record),
                Err(RecordError::Short(_) | RecordError::UnknownType(_)) => {
                    undecodable += 1;
                    true
                }
            };
            if !more {
                break;
            }
        }
        (read, undecodable)
    }

    /// The counters, summed over CPUs.
    pub fn counters(&self) -> Result<Counters, BpfError> {
        let read = |index: u32| per_cpu_sum(&self.counters, "counters", index);
        // The per-event counters live in each CPU's state.
        let states = self
            .cpu_states
            .get(&0, 0)
            .map_err(map_error("cpu_states"))?;
        let state_counter = |which: usize| -> u64 {
            let at = CPU_STATE_COUNTERS + 8 * which;
            states.iter().map(|state| u64_at(&state[..], at)).sum()
        };
        Ok(Counters {
            events: state_counter(0),
            episodes: read(1)?,
            episodes_lost: read(2)?,
            samples: read(3)?,
            samples_lost: read(4)?,
            clock_reads: state_counter(1),
            untimed_events: state_counter(2),
            tail_episodes: read(7)?,
        })
    }

    /// Each attached program's kernel-side cost so far (zero unless [`RunTimeStats`] is on).
    pub fn program_costs(&self) -> Result<Vec<ProgramCost>, BpfError> {
        let mut costs = Vec::new();
        for (program, tracepoint, _, _) in programs() {
            if !self.attached.contains(&tracepoint) {
                continue;
            }
            let info = self
                .ebpf
                .program(program)
                .ok_or_else(|| BpfError::Program {
                    program,
                    tracepoint,
                    reason: "not in the object".into(),
                })?
                .info()
                .map_err(|error| BpfError::Program {
                    program,
                    tracepoint,
                    reason: chain(&error),
                })?;
            costs.push(ProgramCost {
                tracepoint,
                run_time_ns: info.run_time().as_nanos() as u64,
                run_count: info.run_count(),
            });
        }
        Ok(costs)
    }

    /// Slot `slot`'s latency histogram (switch-in − intended), summed over CPUs: counts per
    /// bucket (`records::bucket_lower_bound_ns`).
    pub fn histogram(&self, slot: u32) -> Result<Vec<u64>, BpfError> {
        if slot as usize >= MAX_SLOTS {
            return Err(BpfError::TooManyThreads);
        }
        (0..HISTOGRAM_BUCKETS as u32)
            .map(|bucket| {
                let index = slot * HISTOGRAM_BUCKETS as u32 + bucket;
                Ok(self
                    .histograms
                    .get(&index, 0)
                    .map_err(map_error("histograms"))?
                    .iter()
                    .sum())
            })
            .collect()
    }
}

pub(crate) fn missing_map(map: &'static str) -> BpfError {
    BpfError::Map {
        map,
        reason: "not in the object".into(),
    }
}

/// The names of every BPF program loaded in the kernel now (any process's), for the tests that
/// check nothing of ours is left.
pub fn loaded_program_names() -> Result<Vec<String>, BpfError> {
    aya::programs::loaded_programs()
        .map(|info| {
            info.map(|info| info.name_as_str().unwrap_or("").to_owned())
                .map_err(|error| BpfError::Load(chain(&error)))
        })
        .collect()
}

/// Every loaded program whose name starts with [`PROGRAM_PREFIX`] (any process's): its name (as
/// the kernel keeps it, 15 characters), run count and total run time in ns, for measuring what
/// another rtlab process's programs cost (counted only while [`RunTimeStats`] is on).
pub fn loaded_program_costs() -> Result<Vec<(String, u64, u64)>, BpfError> {
    let mut costs = Vec::new();
    for info in aya::programs::loaded_programs() {
        let info = info.map_err(|error| BpfError::Load(chain(&error)))?;
        let name = info.name_as_str().unwrap_or("");
        if name.starts_with(PROGRAM_PREFIX) {
            costs.push((
                name.to_owned(),
                info.run_count(),
                info.run_time().as_nanos() as u64,
            ));
        }
    }
    Ok(costs)
}

/// The ids of every BPF program loaded in the kernel now.
pub fn loaded_program_ids() -> Result<Vec<u32>, BpfError> {
    aya::programs::loaded_programs()
        .map(|info| {
            info.map(|info| info.id())
                .map_err(|error| BpfError::Load(chain(&error)))
        })
        .collect()
}

/// Which of `ids` are loaded in the kernel now: the tests' check that a process's programs went
/// with it (the kernel frees a program after its last link closes, asynchronously, so they poll).
/// By id, as another rtlab may have its own programs loaded.
pub fn still_loaded(ids: &[u32]) -> Result<Vec<u32>, BpfError> {
    let loaded = loaded_program_ids()?;
    Ok(ids
        .iter()
        .copied()
        .filter(|id| loaded.contains(id))
        .collect())
}

/// The ids of the BPF programs process `pid` holds (a program's or a link's descriptor names its
/// program in `/proc/PID/fdinfo`), to check that a process's programs go when it does.
pub fn program_ids_of_process(pid: u32) -> std::io::Result<Vec<u32>> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))? {
        let Ok(text) = std::fs::read_to_string(entry?.path()) else {
            continue;
        };
        ids.extend(text.lines().filter_map(|line| {
            line.strip_prefix("prog_id:")
                .and_then(|id| id.trim().parse::<u32>().ok())
        }));
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The slot the C `measured_of` finds for `tid` in `table` (None: not in the table).
    fn find(table: &[u8; TID_TABLE_SIZE], tid: u32) -> Option<u32> {
        let home = tid_home(tid);
        for probe in 0..TID_PROBES {
            let at = 8 + 8 * ((home + probe) % TID_TABLE);
            match u32_at(&table[..], at) {
                found if found == tid => return Some(u32_at(&table[..], at + 4)),
                0 => return None,
                _ => {}
            }
        }
        None
    }

    #[test]
    fn tids_are_found_in_their_slots_and_a_rewatch_replaces_the_slot() {
        let mut table = Box::new([0u8; TID_TABLE_SIZE]);
        for (slot, tid) in (4_000..4_064).enumerate() {
            assert!(place_tid(&mut table, tid, slot as u32));
        }
        for (slot, tid) in (4_000..4_064).enumerate() {
            assert_eq!(find(&table, tid), Some(slot as u32), "tid {tid}");
        }
        assert_eq!(find(&table, 4_064), None);
        assert!(place_tid(&mut table, 4_010, 63));
        assert_eq!(find(&table, 4_010), Some(63));
    }

    #[test]
    fn a_tid_whose_probes_are_all_taken_is_refused_and_the_others_stay_found() {
        let mut table = Box::new([0u8; TID_TABLE_SIZE]);
        let home = tid_home(1) % TID_TABLE;
        // Tids whose probes start at the same entry.
        let colliding: Vec<u32> = (1..u32::MAX)
            .filter(|&tid| tid_home(tid) % TID_TABLE == home)
            .take(TID_PROBES + 1)
            .collect();
        for (slot, tid) in colliding[..TID_PROBES].iter().enumerate() {
            assert!(place_tid(&mut table, *tid, slot as u32));
        }
        assert!(!place_tid(&mut table, colliding[TID_PROBES], 9));
        for (slot, tid) in colliding[..TID_PROBES].iter().enumerate() {
            assert_eq!(find(&table, *tid), Some(slot as u32));
        }
        assert_eq!(
            u32_at(&table[..], 0),
            0,
            "place_tid never sets overflow itself"
        );
    }

    /// Tids other than `tid` whose probes start where `tid`'s do.
    fn colliding_with(tid: u32, count: usize) -> Vec<u32> {
        let home = tid_home(tid) % TID_TABLE;
        (1..u32::MAX)
            .filter(|&other| other != tid && tid_home(other) % TID_TABLE == home)
            .take(count)
            .collect()
    }

    #[test]
    #[ignore = "needs root"]
    fn a_thread_in_the_overflow_map_is_still_measured() {
        let cpu = rtlab_sys::cpu::current_cpu().expect("current cpu");
        rtlab_sys::cpu::pin_current_thread(cpu).expect("pin");
        let mut recorder = BpfRecorder::start(&BpfConfig {
            cpus: vec![cpu],
            ..BpfConfig::default()
        })
        .expect("the recorder loads as root");
        let tid = rtlab_sys::cpu::current_tid();
        // Every probe of this thread's tid taken by others (slots 0..8), so it overflows.
        for (slot, other) in colliding_with(tid, TID_PROBES).into_iter().enumerate() {
            recorder.watch_thread(other, slot as u32).expect("watch");
        }
        recorder.watch_thread(tid, 20).expect("watch");
        assert_eq!(
            u32_at(&recorder.tid_table[..], 0),
            1,
            "the table says it overflowed"
        );
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut samples = 0;
        recorder.drain(|record| {
            if let Record::Sample(sample) = record {
                if sample.slot == 20 {
                    assert_eq!(sample.tid, tid);
                    samples += 1;
                }
            }
        });
        assert!(
            samples >= 10,
            "{samples} samples of the overflowed thread from 50 sleeps"
        );
    }
}
