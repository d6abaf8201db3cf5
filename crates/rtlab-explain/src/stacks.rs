//! Sampled call stacks (`--stacks`): perf cpu-clock samples with call chains, kept in a bounded ring
//! per CPU and attached to episodes.
//!
//! Trace events say *which* task or handler ran during a late wake-up; a stack sampled inside the
//! window says *where* in it the time went (paper 002's "future work"). Kernel frames are named
//! through /proc/kallsyms; user frames are shown as addresses (naming them would need the
//! process's ELF files, which may be gone by the end of the run).

use crate::symbols::KernelSymbols;
use std::collections::VecDeque;
use thiserror::Error;

/// `PERF_RECORD_SAMPLE`.
const RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_LOST`.
const RECORD_LOST: u32 = 2;
/// Call-chain entries at or above this are context markers (`PERF_CONTEXT_KERNEL`, …).
const CONTEXT_MARKER_MIN: u64 = (-4095i64) as u64;
const CONTEXT_KERNEL: u64 = (-128i64) as u64;
const CONTEXT_USER: u64 = (-512i64) as u64;
/// Call chains longer than this are malformed (the kernel caps them at 127 by default).
const MAX_FRAMES: u64 = 1024;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum StackError {
    #[error("perf record of {0} bytes is shorter than its header")]
    Short(usize),
    #[error("perf sample record ends inside field '{0}'")]
    Truncated(&'static str),
    #[error("perf sample record claims {0} call-chain frames")]
    TooManyFrames(u64),
}

/// Where a frame was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameSpace {
    Kernel,
    User,
}

/// One sampled stack, innermost frame first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackSample {
    pub timestamp_ns: u64,
    pub cpu: u32,
    pub pid: u32,
    pub tid: u32,
    pub frames: Vec<(FrameSpace, u64)>,
}

/// What a perf record was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PerfRecord {
    Sample(StackSample),
    Lost(u64),
    Other,
}

fn read_u64(record: &[u8], offset: usize, field: &'static str) -> Result<u64, StackError> {
    record
        .get(offset..offset + 8)
        .map(|bytes| u64::from_ne_bytes(bytes.try_into().expect("8 bytes")))
        .ok_or(StackError::Truncated(field))
}

fn read_u32(record: &[u8], offset: usize, field: &'static str) -> Result<u32, StackError> {
    record
        .get(offset..offset + 4)
        .map(|bytes| u32::from_ne_bytes(bytes.try_into().expect("4 bytes")))
        .ok_or(StackError::Truncated(field))
}

/// Parses one record with the layout rtlab-sys' sampler asks for (ip, pid/tid, time, cpu,
/// callchain).
pub fn parse_record(record: &[u8]) -> Result<PerfRecord, StackError> {
    if record.len() < 8 {
        return Err(StackError::Short(record.len()));
    }
    let kind = read_u32(record, 0, "type")?;
    match kind {
        RECORD_SAMPLE => {
            let mut offset = 8;
            let _ip = read_u64(record, offset, "ip")?;
            offset += 8;
            let pid = read_u32(record, offset, "pid")?;
            let tid = read_u32(record, offset + 4, "tid")?;
            offset += 8;
            let timestamp_ns = read_u64(record, offset, "time")?;
            offset += 8;
            let cpu = read_u32(record, offset, "cpu")?;
            offset += 8;
            let n_frames = read_u64(record, offset, "callchain length")?;
            offset += 8;
            if n_frames > MAX_FRAMES {
                return Err(StackError::TooManyFrames(n_frames));
            }
            let mut frames = Vec::with_capacity(n_frames as usize);
            let mut space = FrameSpace::Kernel;
            for index in 0..n_frames as usize {
                let address = read_u64(record, offset + index * 8, "callchain")?;
                if address >= CONTEXT_MARKER_MIN {
                    space = match address {
                        CONTEXT_USER => FrameSpace::User,
                        CONTEXT_KERNEL => FrameSpace::Kernel,
                        _ => space,
                    };
                    continue;
                }
                frames.push((space, address));
            }
            Ok(PerfRecord::Sample(StackSample {
                timestamp_ns,
                cpu,
                pid,
                tid,
                frames,
            }))
        }
        RECORD_LOST => Ok(PerfRecord::Lost(read_u64(record, 16, "lost")?)),
        _ => Ok(PerfRecord::Other),
    }
}

/// A bounded ring of one CPU's recent samples.
#[derive(Debug)]
pub struct StackRing {
    samples: VecDeque<StackSample>,
    capacity: usize,
}

impl StackRing {
    pub fn new(capacity: usize) -> StackRing {
        StackRing {
            samples: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    pub fn push(&mut self, sample: StackSample) {
        if self.samples.len() == self.capacity {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
    }

    pub fn trim(&mut self, before_ns: u64) {
        while self
            .samples
            .front()
            .is_some_and(|sample| sample.timestamp_ns < before_ns)
        {
            self.samples.pop_front();
        }
    }

    /// The first sample in [start_ns, end_ns] not taken in thread `except_tid` (the measuring
    /// thread itself says nothing about what delayed it).
    pub fn during(&self, start_ns: u64, end_ns: u64, except_tid: u32) -> Option<&StackSample> {
        self.samples
            .iter()
            .filter(|sample| sample.timestamp_ns >= start_ns && sample.timestamp_ns <= end_ns)
            .find(|sample| sample.tid != except_tid)
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

/// Frames as text: kernel frames by symbol, user frames by address; the task first.
pub fn render_stack(
    sample: &StackSample,
    comm: Option<&str>,
    symbols: &KernelSymbols,
) -> Vec<String> {
    let mut lines = vec![match comm {
        Some(comm) => format!("{comm} [{}]", sample.tid),
        None => format!("tid {}", sample.tid),
    }];
    for (space, address) in &sample.frames {
        lines.push(match space {
            FrameSpace::Kernel => symbols.name(*address),
            FrameSpace::User => format!("{address:#x} (user)"),
        });
    }
    lines
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn sample_record(time: u64, tid: u32, chain: &[u64]) -> Vec<u8> {
        let mut record = Vec::new();
        let size = 8 + 8 + 8 + 8 + 8 + 8 + chain.len() * 8;
        record.extend_from_slice(&RECORD_SAMPLE.to_ne_bytes());
        record.extend_from_slice(&0u16.to_ne_bytes());
        record.extend_from_slice(&(size as u16).to_ne_bytes());
        record.extend_from_slice(&0xffffffff81000123u64.to_ne_bytes());
        record.extend_from_slice(&tid.to_ne_bytes());
        record.extend_from_slice(&tid.to_ne_bytes());
        record.extend_from_slice(&time.to_ne_bytes());
        record.extend_from_slice(&1u32.to_ne_bytes());
        record.extend_from_slice(&0u32.to_ne_bytes());
        record.extend_from_slice(&(chain.len() as u64).to_ne_bytes());
        for address in chain {
            record.extend_from_slice(&address.to_ne_bytes());
        }
        record
    }

    #[test]
    fn parses_kernel_and_user_frames() {
        let record = sample_record(
            5_000,
            77,
            &[
                CONTEXT_KERNEL,
                0xffffffff81000150,
                0xffffffff81000010,
                CONTEXT_USER,
                0x401000,
            ],
        );
        let PerfRecord::Sample(sample) = parse_record(&record).unwrap() else {
            panic!("a sample")
        };
        assert_eq!(sample.timestamp_ns, 5_000);
        assert_eq!(sample.tid, 77);
        assert_eq!(sample.cpu, 1);
        assert_eq!(
            sample.frames,
            vec![
                (FrameSpace::Kernel, 0xffffffff81000150),
                (FrameSpace::Kernel, 0xffffffff81000010),
                (FrameSpace::User, 0x401000)
            ]
        );
        let symbols = KernelSymbols::parse(
            "ffffffff81000000 T _stext\nffffffff81000100 T spin_loop_kernel\n",
        );
        assert_eq!(
            render_stack(&sample, Some("spin"), &symbols),
            vec!["spin [77]", "spin_loop_kernel", "_stext", "0x401000 (user)"]
        );
    }

    #[test]
    fn malformed_records_are_errors() {
        assert_eq!(parse_record(&[1, 2]), Err(StackError::Short(2)));
        let record = sample_record(1, 2, &[1, 2, 3]);
        assert!(matches!(
            parse_record(&record[..record.len() - 4]),
            Err(StackError::Truncated(_))
        ));
        let mut huge = sample_record(1, 2, &[]);
        let at = huge.len() - 8;
        huge[at..].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert!(matches!(
            parse_record(&huge),
            Err(StackError::TooManyFrames(_))
        ));
    }

    #[test]
    fn the_ring_is_bounded_and_skips_the_probe() {
        let mut ring = StackRing::new(2);
        for (time, tid) in [(10, 1), (20, 5), (30, 6)] {
            let PerfRecord::Sample(sample) = parse_record(&sample_record(time, tid, &[])).unwrap()
            else {
                panic!("a sample")
            };
            ring.push(sample);
        }
        assert_eq!(ring.len(), 2);
        assert_eq!(ring.during(0, 100, 5).unwrap().tid, 6);
        assert!(ring.during(0, 25, 5).is_none());
        ring.trim(25);
        assert_eq!(ring.len(), 1);
    }
}
