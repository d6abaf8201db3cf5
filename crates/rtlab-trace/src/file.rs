//! The rtlab trace file (`rtlab trace record -o FILE`), version 1. Little-endian throughout.
//!
//! ```text
//! offset  size  what
//! 0       8     magic "RTLABTRC"
//! 8       4     format version (1)
//! 12      4     header length H
//! 16      H     header: JSON object (schema "rtlab.trace-file/1", tool_version, cmdline,
//!               started_at, host, target, clock, events, recorder)
//! then blocks, each a one-byte tag:
//!   'C'  u32 compressed length L, u32 record count N, then L bytes: raw deflate (RFC 1951)
//!        of N records of 32 bytes, in time order (also across blocks)
//!   'E'  u32 length T, then T bytes: trailer JSON (n_events, lost_events, duration_ns,
//!        interrupted); the last block. A file without it was cut short (rtlab killed): every
//!        complete 'C' block before the cut is still read.
//! ```
//!
//! A record: `u64 time_ns | u16 cpu | u8 kind | u8 0 | i32 tid | 16 bytes body`, with the body by
//! kind (unused bytes 0; i32 unless said):
//!
//! | kind | event | tid | body |
//! | --- | --- | --- | --- |
//! | 1 | switch | prev tid | prev prio, prev state (u32), next tid, next prio |
//! | 2 | waking | wakee | prio, waker, target CPU |
//! | 3 | wakeup_new | new task | prio, waker (parent) |
//! | 4 | fork | child | parent |
//! | 5 | exit | task | — |
//! | 6 | migrate | task | from CPU, to CPU |
//! | 7 | pi_setprio | task | old prio, new prio, by (the waiter) |
//! | 8 | futex enter | caller | uaddr (u64), op (u32), val (u32) |
//! | 9 | futex exit | caller | result (i64) |
//! | 10/11 | irq entry/exit | irq (−1: an x86 vector) | — |
//! | 12/13 | softirq entry/exit | vector | — |
//! | 14 | name | task | comm (16 bytes, NUL-padded) |
//! | 15 | lock owner | waiter | uaddr (u64), owner tid |
//! | 16 | thread info | task | tgid, policy (u32: 0 OTHER 1 FIFO 2 RR 3 BATCH 5 IDLE 6 DEADLINE), RT priority or nice |
//! | 17 | other thread's policy | task | policy (u32), RT priority or nice |
//! | 18 | CPU time so far | task | ns (u64) |
//! | 19 | cycle marker | the thread that began the cycle | — |
//! | 20 | work done | the thread that finished its cycle's work | — |
//!
//! Size: 32 bytes a record before compression; scheduler traces deflate (fastest level) to 5.5–8.6
//! bytes a record here, 6–9 MB per million events (figures in BENCHMARKS.md).

use crate::model::{Comm, Event, EventKind, Policy};
use rtlab_core::header::OutputHeader;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use thiserror::Error;

pub const MAGIC: &[u8; 8] = b"RTLABTRC";
pub const VERSION: u32 = 1;
pub const SCHEMA: &str = "rtlab.trace-file/1";
pub const RECORD_SIZE: usize = 32;
/// Records per compressed block: 512 KiB before compression, the writer's memory bound.
pub const RECORDS_PER_BLOCK: usize = 16384;
const MAX_HEADER: u32 = 1 << 20;

/// The header of a recording.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileHeader {
    #[serde(flatten)]
    pub header: OutputHeader,
    /// What was recorded: `pid 1234`, `comm NAME`, `command …`.
    pub target: String,
    /// The trace clock (`mono`: CLOCK_MONOTONIC).
    pub clock: String,
    /// `system:event` of every event enabled.
    pub events: Vec<String>,
    /// The recorder that wrote it: `bpf` or `tracefs` (absent in files of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorder: Option<String>,
}

impl FileHeader {
    /// The header a recording of `target` (described) starts with: CLOCK_MONOTONIC, the events
    /// and the recorder left for `record::record` to fill in.
    pub fn for_recording(header: OutputHeader, target: String) -> FileHeader {
        FileHeader {
            header,
            target,
            clock: "mono".into(),
            events: Vec::new(),
            recorder: None,
        }
    }
}

/// The trailer, written when a recording ends (also on SIGINT).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileTrailer {
    pub n_events: u64,
    pub lost_events: u64,
    pub duration_ns: u64,
    pub interrupted: bool,
}

#[derive(Debug, Error)]
pub enum FileError {
    #[error("offset {offset} ({section}): {message}")]
    Malformed {
        offset: u64,
        section: &'static str,
        message: String,
    },
    #[error("writing the trace file: {0}")]
    Write(#[from] std::io::Error),
}

fn malformed(offset: u64, section: &'static str, message: impl Into<String>) -> FileError {
    FileError::Malformed {
        offset,
        section,
        message: message.into(),
    }
}

/// Encodes one event as a 32-byte record.
pub fn encode(event: &Event) -> [u8; RECORD_SIZE] {
    let mut record = [0u8; RECORD_SIZE];
    record[0..8].copy_from_slice(&event.timestamp_ns.to_le_bytes());
    record[8..10].copy_from_slice(&(event.cpu.min(u32::from(u16::MAX)) as u16).to_le_bytes());
    let mut body = [0u8; 16];
    let put = |body: &mut [u8; 16], index: usize, value: i32| {
        body[index * 4..index * 4 + 4].copy_from_slice(&value.to_le_bytes())
    };
    let (kind, tid) = match event.kind {
        EventKind::Switch {
            prev_tid,
            prev_prio,
            prev_state,
            next_tid,
            next_prio,
        } => {
            put(&mut body, 0, prev_prio);
            put(&mut body, 1, prev_state as i32);
            put(&mut body, 2, next_tid);
            put(&mut body, 3, next_prio);
            (1, prev_tid)
        }
        EventKind::Waking {
            tid,
            prio,
            waker,
            target_cpu,
        } => {
            put(&mut body, 0, prio);
            put(&mut body, 1, waker);
            put(&mut body, 2, target_cpu);
            (2, tid)
        }
        EventKind::WakeupNew { tid, prio, waker } => {
            put(&mut body, 0, prio);
            put(&mut body, 1, waker);
            (3, tid)
        }
        EventKind::Fork { parent, child } => {
            put(&mut body, 0, parent);
            (4, child)
        }
        EventKind::Exit { tid } => (5, tid),
        EventKind::Migrate {
            tid,
            orig_cpu,
            dest_cpu,
        } => {
            put(&mut body, 0, orig_cpu);
            put(&mut body, 1, dest_cpu);
            (6, tid)
        }
        EventKind::PiSetprio {
            tid,
            old_prio,
            new_prio,
            by,
        } => {
            put(&mut body, 0, old_prio);
            put(&mut body, 1, new_prio);
            put(&mut body, 2, by);
            (7, tid)
        }
        EventKind::FutexEnter {
            tid,
            uaddr,
            op,
            value,
        } => {
            body[0..8].copy_from_slice(&uaddr.to_le_bytes());
            put(&mut body, 2, op as i32);
            put(&mut body, 3, value as i32);
            (8, tid)
        }
        EventKind::FutexExit { tid, result } => {
            body[0..8].copy_from_slice(&result.to_le_bytes());
            (9, tid)
        }
        EventKind::IrqEntry { irq } => (10, irq),
        EventKind::IrqExit { irq } => (11, irq),
        EventKind::SoftirqEntry { vector } => (12, vector as i32),
        EventKind::SoftirqExit { vector } => (13, vector as i32),
        EventKind::Name { tid, comm } => {
            body.copy_from_slice(comm.bytes());
            (14, tid)
        }
        EventKind::Owner {
            waiter,
            uaddr,
            owner,
        } => {
            body[0..8].copy_from_slice(&uaddr.to_le_bytes());
            put(&mut body, 2, owner);
            (15, waiter)
        }
        EventKind::ThreadInfo {
            tid,
            tgid,
            policy,
            priority,
        } => {
            put(&mut body, 0, tgid);
            put(&mut body, 1, policy as i32);
            put(&mut body, 2, priority);
            (16, tid)
        }
        EventKind::Runtime { tid, runtime_ns } => {
            body[0..8].copy_from_slice(&runtime_ns.to_le_bytes());
            (18, tid)
        }
        EventKind::OtherPolicy {
            tid,
            policy,
            priority,
        } => {
            put(&mut body, 0, policy as i32);
            put(&mut body, 1, priority);
            (17, tid)
        }
        EventKind::CycleMarker { tid } => (19, tid),
        EventKind::WorkDone { tid } => (20, tid),
    };
    record[10] = kind;
    record[12..16].copy_from_slice(&tid.to_le_bytes());
    record[16..32].copy_from_slice(&body);
    record
}

/// Decodes one record; `Err` names what is wrong with it.
pub fn decode(record: &[u8; RECORD_SIZE]) -> Result<Event, String> {
    let word = |index: usize| {
        i32::from_le_bytes(
            record[16 + index * 4..20 + index * 4]
                .try_into()
                .expect("4 bytes"),
        )
    };
    let long = || u64::from_le_bytes(record[16..24].try_into().expect("8 bytes"));
    let tid = i32::from_le_bytes(record[12..16].try_into().expect("4 bytes"));
    let kind = match record[10] {
        1 => EventKind::Switch {
            prev_tid: tid,
            prev_prio: word(0),
            prev_state: word(1) as u32,
            next_tid: word(2),
            next_prio: word(3),
        },
        2 => EventKind::Waking {
            tid,
            prio: word(0),
            waker: word(1),
            target_cpu: word(2),
        },
        3 => EventKind::WakeupNew {
            tid,
            prio: word(0),
            waker: word(1),
        },
        4 => EventKind::Fork {
            parent: word(0),
            child: tid,
        },
        5 => EventKind::Exit { tid },
        6 => EventKind::Migrate {
            tid,
            orig_cpu: word(0),
            dest_cpu: word(1),
        },
        7 => EventKind::PiSetprio {
            tid,
            old_prio: word(0),
            new_prio: word(1),
            by: word(2),
        },
        8 => EventKind::FutexEnter {
            tid,
            uaddr: long(),
            op: word(2) as u32,
            value: word(3) as u32,
        },
        9 => EventKind::FutexExit {
            tid,
            result: long() as i64,
        },
        10 => EventKind::IrqEntry { irq: tid },
        11 => EventKind::IrqExit { irq: tid },
        12 => EventKind::SoftirqEntry { vector: tid as u32 },
        13 => EventKind::SoftirqExit { vector: tid as u32 },
        14 => EventKind::Name {
            tid,
            comm: Comm::from_bytes(&record[16..32]),
        },
        15 => EventKind::Owner {
            waiter: tid,
            uaddr: long(),
            owner: word(2),
        },
        16 => EventKind::ThreadInfo {
            tid,
            tgid: word(0),
            policy: Policy::from_code(word(1) as u32)
                .ok_or_else(|| format!("unknown policy {}", word(1)))?,
            priority: word(2),
        },
        17 => EventKind::OtherPolicy {
            tid,
            policy: Policy::from_code(word(0) as u32)
                .ok_or_else(|| format!("unknown policy {}", word(0)))?,
            priority: word(1),
        },
        18 => EventKind::Runtime {
            tid,
            runtime_ns: long(),
        },
        19 => EventKind::CycleMarker { tid },
        20 => EventKind::WorkDone { tid },
        other => return Err(format!("unknown record kind {other}")),
    };
    Ok(Event {
        timestamp_ns: u64::from_le_bytes(record[0..8].try_into().expect("8 bytes")),
        cpu: u32::from(u16::from_le_bytes([record[8], record[9]])),
        kind,
    })
}

/// Writes a recording: header first, then blocks of records as they come, the trailer last.
pub struct TraceFileWriter<W: Write> {
    output: W,
    block: Vec<u8>,
    n_in_block: usize,
    n_events: u64,
    bytes_written: u64,
}

impl<W: Write> std::fmt::Debug for TraceFileWriter<W> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TraceFileWriter")
            .field("n_events", &self.n_events)
            .finish()
    }
}

impl<W: Write> TraceFileWriter<W> {
    pub fn new(mut output: W, header: &FileHeader) -> Result<TraceFileWriter<W>, FileError> {
        let json = serde_json::to_vec(header).map_err(std::io::Error::other)?;
        output.write_all(MAGIC)?;
        output.write_all(&VERSION.to_le_bytes())?;
        output.write_all(&(json.len() as u32).to_le_bytes())?;
        output.write_all(&json)?;
        Ok(TraceFileWriter {
            output,
            block: Vec::with_capacity(RECORDS_PER_BLOCK * RECORD_SIZE),
            n_in_block: 0,
            n_events: 0,
            bytes_written: 16 + json.len() as u64,
        })
    }

    pub fn push(&mut self, event: &Event) -> Result<(), FileError> {
        self.block.extend_from_slice(&encode(event));
        self.n_in_block += 1;
        self.n_events += 1;
        if self.n_in_block == RECORDS_PER_BLOCK {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> Result<(), FileError> {
        if self.n_in_block == 0 {
            return Ok(());
        }
        let mut encoder =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(&self.block)?;
        let compressed = encoder.finish()?;
        self.output.write_all(b"C")?;
        self.output
            .write_all(&(compressed.len() as u32).to_le_bytes())?;
        self.output
            .write_all(&(self.n_in_block as u32).to_le_bytes())?;
        self.output.write_all(&compressed)?;
        self.output.flush()?;
        self.bytes_written += 9 + compressed.len() as u64;
        self.block.clear();
        self.n_in_block = 0;
        Ok(())
    }

    pub fn n_events(&self) -> u64 {
        self.n_events
    }

    /// Bytes in the file so far (compressed blocks written).
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Writes the last block and the trailer; returns the output.
    pub fn finish(mut self, mut trailer: FileTrailer) -> Result<W, FileError> {
        self.flush_block()?;
        trailer.n_events = self.n_events;
        let json = serde_json::to_vec(&trailer).map_err(std::io::Error::other)?;
        self.output.write_all(b"E")?;
        self.output.write_all(&(json.len() as u32).to_le_bytes())?;
        self.output.write_all(&json)?;
        self.output.flush()?;
        Ok(self.output)
    }
}

/// What reading a file found besides its events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadSummary {
    pub n_events: u64,
    /// None: the file was cut short before its trailer.
    pub trailer: Option<FileTrailer>,
}

/// An opened recording.
#[derive(Debug)]
pub struct TraceFile<R: Read> {
    input: R,
    pub header: FileHeader,
    offset: u64,
}

fn read_exact_at<R: Read>(
    input: &mut R,
    buffer: &mut [u8],
    offset: u64,
    section: &'static str,
) -> Result<(), FileError> {
    input.read_exact(buffer).map_err(|error| {
        malformed(
            offset,
            section,
            if error.kind() == std::io::ErrorKind::UnexpectedEof {
                format!("the file ends inside {} bytes", buffer.len())
            } else {
                error.to_string()
            },
        )
    })
}

impl<R: Read> TraceFile<R> {
    pub fn open(mut input: R) -> Result<TraceFile<R>, FileError> {
        let mut fixed = [0u8; 16];
        read_exact_at(&mut input, &mut fixed, 0, "file header")?;
        if &fixed[0..8] != MAGIC {
            return Err(malformed(
                0,
                "file header",
                "not an rtlab trace file (magic)",
            ));
        }
        let version = u32::from_le_bytes(fixed[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(malformed(
                8,
                "file header",
                format!("version {version}, this rtlab reads {VERSION}"),
            ));
        }
        let length = u32::from_le_bytes(fixed[12..16].try_into().expect("4 bytes"));
        if length > MAX_HEADER {
            return Err(malformed(
                12,
                "file header",
                format!("header of {length} bytes"),
            ));
        }
        let mut json = vec![0u8; length as usize];
        read_exact_at(&mut input, &mut json, 16, "header")?;
        let header: FileHeader = serde_json::from_slice(&json)
            .map_err(|error| malformed(16, "header", error.to_string()))?;
        Ok(TraceFile {
            input,
            header,
            offset: 16 + u64::from(length),
        })
    }

    /// Every event in file order.
    pub fn for_each_event(
        &mut self,
        mut visit: impl FnMut(&Event),
    ) -> Result<ReadSummary, FileError> {
        let mut n_events = 0u64;
        let mut compressed = Vec::new();
        let mut records = Vec::new();
        loop {
            let block_at = self.offset;
            let mut tag = [0u8; 1];
            match self.input.read(&mut tag) {
                Ok(0) => {
                    return Ok(ReadSummary {
                        n_events,
                        trailer: None,
                    })
                }
                Ok(_) => {}
                Err(error) => return Err(malformed(block_at, "block", error.to_string())),
            }
            let mut sizes = [0u8; 4];
            match tag[0] {
                b'C' => {
                    let mut head = [0u8; 8];
                    if self.input.read_exact(&mut head).is_err() {
                        // Cut short while a block was being written.
                        return Ok(ReadSummary {
                            n_events,
                            trailer: None,
                        });
                    }
                    let length =
                        u32::from_le_bytes(head[0..4].try_into().expect("4 bytes")) as usize;
                    let count =
                        u32::from_le_bytes(head[4..8].try_into().expect("4 bytes")) as usize;
                    if count > RECORDS_PER_BLOCK || length > RECORDS_PER_BLOCK * RECORD_SIZE * 2 {
                        return Err(malformed(
                            block_at,
                            "block",
                            format!("{count} records in {length} bytes"),
                        ));
                    }
                    compressed.resize(length, 0);
                    if self.input.read_exact(&mut compressed).is_err() {
                        return Ok(ReadSummary {
                            n_events,
                            trailer: None,
                        });
                    }
                    records.clear();
                    flate2::read::DeflateDecoder::new(&compressed[..])
                        .take((count * RECORD_SIZE + 1) as u64)
                        .read_to_end(&mut records)
                        .map_err(|error| {
                            malformed(block_at, "block", format!("deflate: {error}"))
                        })?;
                    if records.len() != count * RECORD_SIZE {
                        return Err(malformed(
                            block_at,
                            "block",
                            format!(
                                "{} bytes of records, {count} records expected",
                                records.len()
                            ),
                        ));
                    }
                    for (index, chunk) in records.chunks_exact(RECORD_SIZE).enumerate() {
                        let event =
                            decode(chunk.try_into().expect("32 bytes")).map_err(|message| {
                                malformed(block_at, "block", format!("record {index}: {message}"))
                            })?;
                        visit(&event);
                        n_events += 1;
                    }
                    self.offset += 9 + length as u64;
                }
                b'E' => {
                    let cut_short = Ok(ReadSummary {
                        n_events,
                        trailer: None,
                    });
                    if self.input.read_exact(&mut sizes).is_err() {
                        return cut_short;
                    }
                    let length = u32::from_le_bytes(sizes);
                    if length > MAX_HEADER {
                        return Err(malformed(
                            block_at,
                            "trailer",
                            format!("trailer of {length} bytes"),
                        ));
                    }
                    let mut json = vec![0u8; length as usize];
                    if self.input.read_exact(&mut json).is_err() {
                        return cut_short;
                    }
                    let trailer: FileTrailer = serde_json::from_slice(&json)
                        .map_err(|error| malformed(block_at + 5, "trailer", error.to_string()))?;
                    return Ok(ReadSummary {
                        n_events,
                        trailer: Some(trailer),
                    });
                }
                other => {
                    return Err(malformed(
                        block_at,
                        "block",
                        format!("unknown block tag {other:#04x}"),
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample_header() -> FileHeader {
        FileHeader {
            header: OutputHeader {
                schema: SCHEMA.into(),
                tool_version: "test".into(),
                cmdline: vec!["rtlab".into()],
                started_at: "2026-01-01T00:00:00Z".into(),
                host: None,
            },
            target: "pid 1".into(),
            clock: "mono".into(),
            events: vec!["sched:sched_switch".into()],
            recorder: Some("tracefs".into()),
        }
    }

    fn every_kind() -> Vec<Event> {
        let kinds = vec![
            EventKind::Switch {
                prev_tid: 1,
                prev_prio: 120,
                prev_state: 0x100,
                next_tid: 2,
                next_prio: 89,
            },
            EventKind::Waking {
                tid: 3,
                prio: 70,
                waker: 4,
                target_cpu: 1,
            },
            EventKind::WakeupNew {
                tid: 5,
                prio: 120,
                waker: 1,
            },
            EventKind::Fork {
                parent: 1,
                child: 5,
            },
            EventKind::Exit { tid: 5 },
            EventKind::Migrate {
                tid: 3,
                orig_cpu: 0,
                dest_cpu: 1,
            },
            EventKind::PiSetprio {
                tid: 2,
                old_prio: 89,
                new_prio: 69,
                by: 3,
            },
            EventKind::FutexEnter {
                tid: 3,
                uaddr: 0x7fff_1234_5678,
                op: 0x80,
                value: 2,
            },
            EventKind::FutexExit {
                tid: 3,
                result: -110,
            },
            EventKind::IrqEntry { irq: -1 },
            EventKind::IrqExit { irq: 11 },
            EventKind::SoftirqEntry { vector: 1 },
            EventKind::SoftirqExit { vector: 1 },
            EventKind::Name {
                tid: 3,
                comm: Comm::new("inv-high"),
            },
            EventKind::Owner {
                waiter: 3,
                uaddr: 0x55_0000,
                owner: 2,
            },
            EventKind::ThreadInfo {
                tid: 3,
                tgid: 1,
                policy: Policy::Fifo,
                priority: 30,
            },
            EventKind::Runtime {
                tid: 3,
                runtime_ns: 123_456_789,
            },
            EventKind::OtherPolicy {
                tid: 9,
                policy: Policy::RoundRobin,
                priority: 95,
            },
            EventKind::CycleMarker { tid: 8 },
            EventKind::WorkDone { tid: 3 },
        ];
        kinds
            .into_iter()
            .enumerate()
            .map(|(index, kind)| Event {
                timestamp_ns: 1000 + index as u64,
                cpu: (index % 2) as u32,
                kind,
            })
            .collect()
    }

    #[test]
    fn every_record_kind_round_trips_through_a_file() {
        let events = every_kind();
        let mut writer = TraceFileWriter::new(Vec::new(), &sample_header()).unwrap();
        for _ in 0..2000 {
            for event in &events {
                writer.push(event).unwrap();
            }
        }
        let bytes = writer
            .finish(FileTrailer {
                lost_events: 3,
                ..FileTrailer::default()
            })
            .unwrap();
        let mut file = TraceFile::open(&bytes[..]).unwrap();
        assert_eq!(file.header, sample_header());
        let mut read = Vec::new();
        let summary = file.for_each_event(|event| read.push(*event)).unwrap();
        assert_eq!(read.len(), events.len() * 2000);
        assert_eq!(&read[..events.len()], &events[..]);
        let trailer = summary.trailer.unwrap();
        assert_eq!(
            (trailer.n_events, trailer.lost_events),
            (events.len() as u64 * 2000, 3)
        );
        // Cut inside the last block: the complete blocks before it are still read.
        let trailer_at = bytes.iter().rposition(|byte| *byte == b'E').unwrap();
        let cut = &bytes[..trailer_at - 10];
        let mut file = TraceFile::open(cut).unwrap();
        let summary = file.for_each_event(|_| {}).unwrap();
        assert_eq!(summary.trailer, None);
        let complete = events.len() * 2000 / RECORDS_PER_BLOCK * RECORDS_PER_BLOCK;
        assert_eq!(summary.n_events, complete as u64);
    }

    #[test]
    fn malformed_files_name_offset_and_section() {
        let error = TraceFile::open(&b"RTLABTRX\x01\0\0\0\0\0\0\0"[..])
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("offset 0 (file header)"), "{error}");
        let mut bytes = TraceFileWriter::new(Vec::new(), &sample_header())
            .unwrap()
            .finish(FileTrailer::default())
            .unwrap();
        let trailer_at = bytes.iter().rposition(|byte| *byte == b'E').unwrap();
        bytes[trailer_at] = b'Q';
        let error = TraceFile::open(&bytes[..])
            .unwrap()
            .for_each_event(|_| {})
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            format!("offset {trailer_at} (block): unknown block tag 0x51")
        );
    }
}
