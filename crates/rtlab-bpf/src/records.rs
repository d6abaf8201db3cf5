//! The records the BPF programs write into the ring buffer, decoded.
//!
//! The layouts are the C structs of `bpf/rtlab.bpf.c` (native endianness, checked there with
//! `_Static_assert`s); change both together. Decoding never trusts a length: a record shorter
//! than its type says, or of an unknown type, is an error, and an event of an unknown kind is
//! skipped, never guessed at.

use thiserror::Error;

/// Events in one CPU's window (the C `WINDOW_EVENTS`).
pub const WINDOW_EVENTS: usize = 1024;
/// Interrupt contexts remembered per CPU (the C `STACK_DEPTH`).
pub const STACK_DEPTH: usize = 6;
/// Measuring threads the kernel keeps histograms and thresholds for (the C `MAX_SLOTS`).
pub const MAX_SLOTS: usize = 64;
/// Buckets of the kernel's latency histogram (the C `HISTOGRAM_BUCKETS`).
pub const HISTOGRAM_BUCKETS: usize = 320;
/// Names of the x86 vectors, by the C `enum vector_id`; the same names as tracefs' events.
pub const VECTOR_NAMES: [&str; 5] = [
    "local_timer",
    "reschedule",
    "call_function",
    "call_function_single",
    "irq_work",
];

const EVENT_SIZE: usize = 64;
const HEADER_SIZE: usize = 240;
const SAMPLE_SIZE: usize = 40;
const RECORD_EPISODE: u32 = 1;
const RECORD_SAMPLE: u32 = 2;
const RECORD_EPISODE_TAIL: u32 = 3;
/// Or-ed into an event's kind when its time is a lower bound (the C `EVENT_TIME_LOWER_BOUND`).
const TIME_LOWER_BOUND: u16 = 0x8000;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum RecordError {
    #[error("record of {0} bytes is too short for its type")]
    Short(usize),
    #[error("record type {0} is unknown")]
    UnknownType(u32),
}

/// A task's name as the kernel stores it: up to 16 bytes, NUL-padded.
pub type CommBytes = [u8; 16];

/// One event of a CPU's window. Times are CLOCK_MONOTONIC ns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawEvent {
    pub timestamp_ns: u64,
    /// The task current when the event fired.
    pub pid: i32,
    /// True when `timestamp_ns` is the CPU's last known time, not a clock read: an event that
    /// cannot change an attribution, recorded while no measured wake-up was pending on the CPU
    /// (it happened at or after this time, and before the next event).
    pub time_lower_bound: bool,
    pub kind: RawKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawKind {
    Switch {
        prev_pid: i32,
        prev_prio: i32,
        prev_state: u16,
        prev_comm: CommBytes,
        next_pid: i32,
        next_prio: i32,
        next_comm: CommBytes,
    },
    Waking {
        pid: i32,
        prio: i32,
        target_cpu: i32,
        comm: CommBytes,
    },
    Wakeup {
        pid: i32,
        prio: i32,
        target_cpu: i32,
        comm: CommBytes,
    },
    Migrate {
        pid: i32,
        prio: i32,
        orig_cpu: i32,
        dest_cpu: i32,
    },
    IrqEntry {
        irq: i32,
        name: CommBytes,
    },
    IrqExit {
        irq: i32,
    },
    SoftirqEntry {
        vector: u32,
    },
    SoftirqExit {
        vector: u32,
    },
    HrtimerEntry {
        timer: u64,
        function: u64,
        now_ns: i64,
    },
    HrtimerExit {
        timer: u64,
    },
    WorkStart {
        function: u64,
    },
    WorkEnd {
        function: u64,
    },
    VectorEntry {
        name: &'static str,
    },
    VectorExit {
        name: &'static str,
    },
}

/// The task a CPU ran, as the kernel's per-CPU state kept it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskSnapshot {
    /// When it was switched in (0: the switch was not seen).
    pub since_ns: u64,
    pub pid: i32,
    pub prio: i32,
    pub comm: CommBytes,
}

/// An interrupt context open on the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextEntry {
    pub entered_ns: u64,
    /// IRQ number, softirq vector, timer address or vector id.
    pub key: u64,
    /// The kind number of the event that entered it (see `RawKind`'s entry variants).
    pub kind: u32,
}

/// A late wake-up as the kernel saw it, with the CPU's window of events in time order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpisodeRecord {
    /// The wake-up's thread and times, as its sample has them (the C header starts with a
    /// `struct sample`).
    pub wakeup: SampleRecord,
    /// When it blocked again (the record was written then).
    pub blocked_ns: u64,
    /// The task the CPU ran when the wake-up began, and the interrupt contexts then open.
    pub interrupted: TaskSnapshot,
    pub open_contexts: Vec<ContextEntry>,
    /// True when the window wrapped: events older than the first were overwritten. (A tail
    /// record never says so: it starts at the CPU's last switch before the wake-up began, where
    /// the CPU's state is known.)
    pub window_wrapped: bool,
    pub events: Vec<RawEvent>,
}

/// One wake-up of a measuring thread, late or not: the timerlat split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleRecord {
    pub cpu: u32,
    pub tid: u32,
    pub slot: u32,
    pub intended_ns: u64,
    /// When its timer fired (0: not woken by its timer, a hand-off thread).
    pub expired_ns: u64,
    pub switched_ns: u64,
}

impl SampleRecord {
    /// Timer expiry − intended time (rtla's IRQ latency), when woken by its timer.
    pub fn irq_latency_ns(&self) -> Option<u64> {
        (self.expired_ns != 0).then(|| self.expired_ns.saturating_sub(self.intended_ns))
    }

    /// Switch-in − timer expiry (rtla's thread latency minus the return to user space).
    pub fn thread_latency_ns(&self) -> Option<u64> {
        (self.expired_ns != 0).then(|| self.switched_ns.saturating_sub(self.expired_ns))
    }

    /// Switch-in − intended time.
    pub fn latency_ns(&self) -> u64 {
        self.switched_ns.saturating_sub(self.intended_ns)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Episode(Box<EpisodeRecord>),
    Sample(SampleRecord),
}

fn u16_at(bytes: &[u8], offset: usize) -> u16 {
    u16::from_ne_bytes([bytes[offset], bytes[offset + 1]])
}

pub(crate) fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[offset..offset + 4]);
    u32::from_ne_bytes(word)
}

fn i32_at(bytes: &[u8], offset: usize) -> i32 {
    u32_at(bytes, offset) as i32
}

pub(crate) fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[offset..offset + 8]);
    u64::from_ne_bytes(word)
}

fn comm_at(bytes: &[u8], offset: usize) -> CommBytes {
    let mut comm = [0u8; 16];
    comm.copy_from_slice(&bytes[offset..offset + 16]);
    comm
}

/// Decodes one ring-buffer record.
pub fn decode_record(bytes: &[u8]) -> Result<Record, RecordError> {
    if bytes.len() < 4 {
        return Err(RecordError::Short(bytes.len()));
    }
    match u32_at(bytes, 0) {
        RECORD_SAMPLE => {
            if bytes.len() < SAMPLE_SIZE {
                return Err(RecordError::Short(bytes.len()));
            }
            Ok(Record::Sample(decode_sample(bytes)))
        }
        RECORD_EPISODE => decode_episode(bytes).map(|episode| Record::Episode(Box::new(episode))),
        RECORD_EPISODE_TAIL => {
            decode_episode_tail(bytes).map(|episode| Record::Episode(Box::new(episode)))
        }
        other => Err(RecordError::UnknownType(other)),
    }
}

/// A sample record, or the start of an episode's header (the C `struct sample`).
fn decode_sample(bytes: &[u8]) -> SampleRecord {
    SampleRecord {
        cpu: u32_at(bytes, 4),
        tid: u32_at(bytes, 8),
        slot: u32_at(bytes, 12),
        intended_ns: u64_at(bytes, 16),
        expired_ns: u64_at(bytes, 24),
        switched_ns: u64_at(bytes, 32),
    }
}

/// The header's fields; `events` and `window_wrapped` are filled by the caller.
fn decode_header(bytes: &[u8]) -> EpisodeRecord {
    let depth = (u32_at(bytes, 88) as usize).min(STACK_DEPTH);
    let open_contexts = (0..depth)
        .map(|index| {
            let offset = 96 + index * 24;
            ContextEntry {
                entered_ns: u64_at(bytes, offset),
                key: u64_at(bytes, offset + 8),
                kind: u32_at(bytes, offset + 16),
            }
        })
        .collect();
    EpisodeRecord {
        wakeup: decode_sample(bytes),
        blocked_ns: u64_at(bytes, 40),
        interrupted: TaskSnapshot {
            since_ns: u64_at(bytes, 56),
            pid: i32_at(bytes, 64),
            prio: i32_at(bytes, 68),
            comm: comm_at(bytes, 72),
        },
        open_contexts,
        window_wrapped: false,
        events: Vec::new(),
    }
}

/// Events are written in time order per CPU, except that a few take their time from the
/// tracepoint (a timer's expiry) rather than a clock read; a stable sort keeps ties in order.
fn sort_events(events: &mut [RawEvent]) {
    events.sort_by_key(|event| event.timestamp_ns);
}

/// RECORD_EPISODE: the header and the whole window in slot order.
fn decode_episode(bytes: &[u8]) -> Result<EpisodeRecord, RecordError> {
    if bytes.len() < HEADER_SIZE + WINDOW_EVENTS * EVENT_SIZE {
        return Err(RecordError::Short(bytes.len()));
    }
    let next = u64_at(bytes, 48);
    let window = &bytes[HEADER_SIZE..HEADER_SIZE + WINDOW_EVENTS * EVENT_SIZE];
    let count = next.min(WINDOW_EVENTS as u64);
    let mut events = Vec::with_capacity(count as usize);
    for sequence in next - count..next {
        let index = (sequence % WINDOW_EVENTS as u64) as usize;
        if let Some(event) = decode_event(&window[index * EVENT_SIZE..(index + 1) * EVENT_SIZE]) {
            events.push(event);
        }
    }
    sort_events(&mut events);
    let mut episode = decode_header(bytes);
    episode.window_wrapped = next > WINDOW_EVENTS as u64;
    episode.events = events;
    Ok(episode)
}

/// RECORD_EPISODE_TAIL: the header and its last `count` events in sequence order.
fn decode_episode_tail(bytes: &[u8]) -> Result<EpisodeRecord, RecordError> {
    if bytes.len() < HEADER_SIZE {
        return Err(RecordError::Short(bytes.len()));
    }
    let count = u32_at(bytes, 92) as usize;
    if count > WINDOW_EVENTS || bytes.len() < HEADER_SIZE + count * EVENT_SIZE {
        return Err(RecordError::Short(bytes.len()));
    }
    let mut events: Vec<RawEvent> = bytes[HEADER_SIZE..HEADER_SIZE + count * EVENT_SIZE]
        .chunks_exact(EVENT_SIZE)
        .filter_map(decode_event)
        .collect();
    sort_events(&mut events);
    let mut episode = decode_header(bytes);
    episode.events = events;
    Ok(episode)
}

/// One 64-byte event; None for an empty slot or an unknown kind.
fn decode_event(bytes: &[u8]) -> Option<RawEvent> {
    let timestamp_ns = u64_at(bytes, 0);
    if timestamp_ns == 0 {
        return None;
    }
    let current_pid = i32_at(bytes, 8);
    let kind_bits = u16_at(bytes, 12);
    let flags = u16_at(bytes, 14);
    // The C union's members start at offset 16, most with the same fields: a task's pid and prio
    // (`wake`, `migrate`), or the one number an interrupt context or work item is known by.
    let pid = i32_at(bytes, 16);
    let prio = i32_at(bytes, 20);
    let irq = i32_at(bytes, 16);
    let vector = u32_at(bytes, 16);
    let timer = u64_at(bytes, 16);
    let function = u64_at(bytes, 16);
    let vector_name = VECTOR_NAMES.get(u32_at(bytes, 16) as usize).copied();
    let kind = match kind_bits & !TIME_LOWER_BOUND {
        1 => RawKind::Switch {
            prev_pid: i32_at(bytes, 16),
            prev_prio: i32_at(bytes, 20),
            next_pid: i32_at(bytes, 24),
            next_prio: i32_at(bytes, 28),
            prev_state: flags,
            prev_comm: comm_at(bytes, 32),
            next_comm: comm_at(bytes, 48),
        },
        // sched_waking and sched_wakeup: the `wake` member.
        kind @ (2 | 3) => {
            let target_cpu = i32_at(bytes, 24);
            let comm = comm_at(bytes, 28);
            if kind == 2 {
                RawKind::Waking {
                    pid,
                    prio,
                    target_cpu,
                    comm,
                }
            } else {
                RawKind::Wakeup {
                    pid,
                    prio,
                    target_cpu,
                    comm,
                }
            }
        }
        4 => RawKind::Migrate {
            pid,
            prio,
            orig_cpu: i32_at(bytes, 24),
            dest_cpu: i32_at(bytes, 28),
        },
        5 => RawKind::IrqEntry {
            irq,
            name: comm_at(bytes, 20),
        },
        6 => RawKind::IrqExit { irq },
        7 => RawKind::SoftirqEntry { vector },
        8 => RawKind::SoftirqExit { vector },
        9 => RawKind::HrtimerEntry {
            timer,
            function: u64_at(bytes, 24),
            now_ns: u64_at(bytes, 32) as i64,
        },
        10 => RawKind::HrtimerExit { timer },
        11 => RawKind::WorkStart { function },
        12 => RawKind::WorkEnd { function },
        13 => RawKind::VectorEntry { name: vector_name? },
        14 => RawKind::VectorExit { name: vector_name? },
        _ => return None,
    };
    Some(RawEvent {
        timestamp_ns,
        pid: current_pid,
        time_lower_bound: kind_bits & TIME_LOWER_BOUND != 0,
        kind,
    })
}

/// The lowest latency (ns) bucket `index` of the kernel's histogram holds (the C
/// `histogram_bucket`: exact below 8 ns, then 8 buckets per power of two).
pub fn bucket_lower_bound_ns(index: usize) -> u64 {
    if index < 8 {
        return index as u64;
    }
    let msb = (index / 8 + 2) as u32;
    let sub = (index % 8) as u64;
    (1u64 << msb) + (sub << (msb - 3))
}

/// The bucket the kernel puts `value` in (the C `histogram_bucket`), for tests and thresholds.
pub fn bucket_of(value: u64) -> usize {
    if value < 8 {
        return value as usize;
    }
    let msb = 63 - value.leading_zeros();
    let bucket = (msb as usize - 2) * 8 + ((value >> (msb - 3)) & 7) as usize;
    bucket.min(HISTOGRAM_BUCKETS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn event_bytes(timestamp: u64, pid: i32, kind: u16, payload: &[(usize, &[u8])]) -> Vec<u8> {
        let mut bytes = vec![0u8; EVENT_SIZE];
        bytes[0..8].copy_from_slice(&timestamp.to_ne_bytes());
        bytes[8..12].copy_from_slice(&pid.to_ne_bytes());
        bytes[12..14].copy_from_slice(&kind.to_ne_bytes());
        for (offset, value) in payload {
            bytes[*offset..*offset + value.len()].copy_from_slice(value);
        }
        bytes
    }

    fn episode_bytes(next: u64, events: &[(u64, Vec<u8>)]) -> Vec<u8> {
        let mut bytes = vec![0u8; HEADER_SIZE + WINDOW_EVENTS * EVENT_SIZE];
        bytes[0..4].copy_from_slice(&RECORD_EPISODE.to_ne_bytes());
        bytes[4..8].copy_from_slice(&1u32.to_ne_bytes());
        bytes[8..12].copy_from_slice(&4242u32.to_ne_bytes());
        bytes[16..24].copy_from_slice(&1_000u64.to_ne_bytes());
        bytes[48..56].copy_from_slice(&next.to_ne_bytes());
        bytes[64..68].copy_from_slice(&77i32.to_ne_bytes());
        bytes[72..76].copy_from_slice(b"spin");
        bytes[88..92].copy_from_slice(&1u32.to_ne_bytes());
        bytes[96..104].copy_from_slice(&900u64.to_ne_bytes());
        bytes[104..112].copy_from_slice(&3u64.to_ne_bytes());
        bytes[112..116].copy_from_slice(&7u32.to_ne_bytes());
        for (slot, event) in events {
            let offset = HEADER_SIZE + *slot as usize * EVENT_SIZE;
            bytes[offset..offset + EVENT_SIZE].copy_from_slice(event);
        }
        bytes
    }

    #[test]
    fn an_episode_decodes_its_header_and_window_in_time_order() {
        let switch = event_bytes(
            1_500,
            77,
            1,
            &[
                (16, &77i32.to_ne_bytes()),
                (20, &120i32.to_ne_bytes()),
                (24, &4242i32.to_ne_bytes()),
                (28, &0i32.to_ne_bytes()),
                (32, b"spin"),
                (48, b"rtlab-timer"),
            ],
        );
        let softirq = event_bytes(1_100, 77, 7, &[(16, &3u32.to_ne_bytes())]);
        let bytes = episode_bytes(2, &[(0, softirq), (1, switch)]);
        let Record::Episode(episode) = decode_record(&bytes).expect("decodes") else {
            panic!("an episode")
        };
        assert_eq!(episode.wakeup.tid, 4242);
        assert_eq!(episode.interrupted.pid, 77);
        assert_eq!(&episode.interrupted.comm[..4], b"spin");
        assert_eq!(
            episode.open_contexts,
            vec![ContextEntry {
                entered_ns: 900,
                key: 3,
                kind: 7
            }]
        );
        assert!(!episode.window_wrapped);
        assert_eq!(episode.events.len(), 2);
        assert_eq!(episode.events[0].kind, RawKind::SoftirqEntry { vector: 3 });
        match &episode.events[1].kind {
            RawKind::Switch {
                next_pid,
                next_comm,
                ..
            } => {
                assert_eq!(*next_pid, 4242);
                assert_eq!(&next_comm[..11], b"rtlab-timer");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_wrapped_window_starts_at_the_oldest_event() {
        let events: Vec<(u64, Vec<u8>)> = (0..WINDOW_EVENTS as u64)
            .map(|slot| {
                // Sequence numbers 1..=1024 wrote slots 1..1023 and 0 (the newest, 1024).
                let sequence = if slot == 0 { 1024 } else { slot };
                (slot, event_bytes(10 + sequence, 1, 8, &[]))
            })
            .collect();
        let Record::Episode(episode) =
            decode_record(&episode_bytes(1025, &events)).expect("decodes")
        else {
            panic!("an episode")
        };
        assert!(episode.window_wrapped);
        assert_eq!(
            episode.events.first().map(|event| event.timestamp_ns),
            Some(11)
        );
        assert_eq!(
            episode.events.last().map(|event| event.timestamp_ns),
            Some(1034)
        );
    }

    /// A tail record: the header's count, then that many events in sequence order.
    fn tail_bytes(events: &[Vec<u8>]) -> Vec<u8> {
        let mut bytes = episode_bytes(100, &[]);
        bytes.truncate(HEADER_SIZE);
        bytes[0..4].copy_from_slice(&RECORD_EPISODE_TAIL.to_ne_bytes());
        bytes[92..96].copy_from_slice(&(events.len() as u32).to_ne_bytes());
        for event in events {
            bytes.extend_from_slice(event);
        }
        // The rest of the fixed-size record is unused.
        bytes.resize(HEADER_SIZE + 64 * EVENT_SIZE, 0xee);
        bytes
    }

    #[test]
    fn a_tail_episode_decodes_its_count_of_events_and_their_time_bounds() {
        let switch = event_bytes(1_000, 77, 1, &[(24, &4242i32.to_ne_bytes())]);
        // A waking of an unmeasured task while nothing was pending: its time is a lower bound.
        let waking = event_bytes(
            1_000,
            77,
            2 | TIME_LOWER_BOUND,
            &[(16, &99i32.to_ne_bytes())],
        );
        let exit = event_bytes(1_200, 77, 8, &[(16, &3u32.to_ne_bytes())]);
        let Record::Episode(episode) =
            decode_record(&tail_bytes(&[switch, waking, exit])).expect("decodes")
        else {
            panic!("an episode")
        };
        assert_eq!(episode.wakeup.tid, 4242);
        assert!(!episode.window_wrapped);
        assert_eq!(episode.events.len(), 3);
        assert!(!episode.events[0].time_lower_bound);
        assert!(episode.events[1].time_lower_bound);
        assert!(matches!(
            episode.events[1].kind,
            RawKind::Waking { pid: 99, .. }
        ));
        assert_eq!(episode.events[2].kind, RawKind::SoftirqExit { vector: 3 });
    }

    #[test]
    fn a_tail_longer_than_its_record_is_an_error() {
        let mut bytes = tail_bytes(&[]);
        bytes[92..96].copy_from_slice(&65u32.to_ne_bytes());
        assert_eq!(decode_record(&bytes), Err(RecordError::Short(bytes.len())));
        bytes[92..96].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(decode_record(&bytes).is_err());
    }

    #[test]
    fn short_and_unknown_records_are_errors() {
        assert_eq!(decode_record(&[1, 0]), Err(RecordError::Short(2)));
        assert_eq!(
            decode_record(&RECORD_EPISODE.to_ne_bytes()),
            Err(RecordError::Short(4))
        );
        assert_eq!(
            decode_record(&9u32.to_ne_bytes()),
            Err(RecordError::UnknownType(9))
        );
        let mut sample = vec![0u8; SAMPLE_SIZE];
        sample[0..4].copy_from_slice(&RECORD_SAMPLE.to_ne_bytes());
        sample[16..24].copy_from_slice(&100u64.to_ne_bytes());
        sample[24..32].copy_from_slice(&130u64.to_ne_bytes());
        sample[32..40].copy_from_slice(&190u64.to_ne_bytes());
        let Ok(Record::Sample(sample)) = decode_record(&sample) else {
            panic!("a sample")
        };
        assert_eq!(sample.irq_latency_ns(), Some(30));
        assert_eq!(sample.thread_latency_ns(), Some(60));
        assert_eq!(sample.latency_ns(), 90);
    }

    proptest! {
        #[test]
        fn decoding_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_record(&bytes);
        }

        #[test]
        fn a_value_is_at_least_its_buckets_lower_bound(value in 0u64..1u64 << 40) {
            let bucket = bucket_of(value);
            prop_assert!(bucket_lower_bound_ns(bucket) <= value);
            if bucket + 1 < HISTOGRAM_BUCKETS {
                prop_assert!(value < bucket_lower_bound_ns(bucket + 1));
            }
        }
    }
}
