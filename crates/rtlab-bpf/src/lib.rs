//! rtlab-bpf: the BPF recorders behind `rtlab run --explain` and `rtlab trace record`, kernel
//! side and loaders.
//!
//! The tracefs recorder copies every scheduling and interrupt event of the measured CPUs to user
//! space (~300-460 ns per event here); this one keeps the state in the kernel instead and hands
//! over only what a late wake-up needs. The programs (`bpf/rtlab.bpf.c`, compiled into the
//! committed `bpf/rtlab.bpf.o` by `bpf/build.sh`, checked by `.ci/bpf-check`) keep per measured
//! CPU the running task, the open interrupt contexts and a window of the last 1024 events; for
//! each measuring thread they compute the wake-up latency in the kernel at its switch-in, update
//! a per-CPU histogram, write a 40-byte sample record without waking user space, and only for a
//! late wake-up an episode record (header plus the part of the CPU's window since its last
//! context switch before the wake-up began: 64 or 256 events, or the whole window when longer).
//!
//! Like `rtlab-sys` this crate talks to the kernel; unlike it, it needs no `unsafe` and no `libc`:
//! the loader is aya (pure Rust), and map values cross as byte arrays. Every program is attached
//! through a BPF link owned by this process and nothing is pinned, so the kernel detaches it all
//! when the process exits, however it exits. `records.rs` decodes the ring buffer's records.
//!
//! A second object, `bpf/apptrace.bpf.o` (`apptrace.rs`), records the full event stream of an
//! application's threads for `rtlab trace record`, filtered in the kernel to the target's threads
//! and whatever preempts or wakes them, as the rtlab trace file's 32-byte records.

mod apptrace;
mod loader;
pub mod records;

pub use apptrace::{AppBpfRecorder, AppCounters, APPTRACE_PROGRAM_PREFIX, APPTRACE_RECORD_SIZE};

pub use loader::{
    loaded_program_costs, loaded_program_ids, loaded_program_names, program_ids_of_process,
    still_loaded, BpfConfig, BpfError, BpfRecorder, ClockPolicy, Counters, ProgramCost,
    RunTimeStats, PROGRAM_PREFIX,
};
pub use records::{
    decode_record, ContextEntry, EpisodeRecord, RawEvent, RawKind, Record, RecordError,
    SampleRecord, TaskSnapshot, HISTOGRAM_BUCKETS, MAX_SLOTS, VECTOR_NAMES, WINDOW_EVENTS,
};
