//! The trace event model: the few kernel events that say what a CPU was doing, decoded from raw
//! payloads with the offsets their `format` files give.
//!
//! Attribution needs to know, at every instant of a late wake-up, whether the CPU was in a hard
//! interrupt, a softirq, a timer callback or a task (and which). These events bracket exactly those
//! states; everything else the kernel can trace is left off to keep recording cheap.

use crate::fields::{FieldSlot, Tracepoint, TracepointLayout};
use crate::format::EventFormat;
use std::fmt;
use thiserror::Error;

/// A task's command name as the kernel stores it: up to 16 bytes, NUL-padded.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Comm([u8; 16]);

impl Comm {
    pub fn new(text: &str) -> Comm {
        let mut bytes = [0u8; 16];
        let length = text.len().min(15);
        bytes[..length].copy_from_slice(&text.as_bytes()[..length]);
        Comm(bytes)
    }

    /// From raw bytes, up to the first NUL (at most 16).
    pub fn from_bytes(raw: &[u8]) -> Comm {
        let mut bytes = [0u8; 16];
        let length = raw
            .iter()
            .position(|byte| *byte == 0)
            .unwrap_or(raw.len())
            .min(16);
        bytes[..length].copy_from_slice(&raw[..length]);
        Comm(bytes)
    }

    /// The 16 NUL-padded bytes.
    pub fn bytes(&self) -> &[u8; 16] {
        &self.0
    }

    pub fn as_str(&self) -> std::borrow::Cow<'_, str> {
        let length = self.0.iter().position(|byte| *byte == 0).unwrap_or(16);
        String::from_utf8_lossy(&self.0[..length])
    }
}

impl fmt::Display for Comm {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.as_str())
    }
}

impl fmt::Debug for Comm {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{:?}", self.as_str())
    }
}

/// What happened. Priorities are the kernel's `prio` (0..=99 real-time, lower is more urgent;
/// 100..=139 normal, 120 = nice 0; -1 deadline).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    Switch {
        prev_comm: Comm,
        prev_pid: i32,
        prev_prio: i32,
        prev_state: i64,
        next_comm: Comm,
        next_pid: i32,
        next_prio: i32,
    },
    Waking {
        comm: Comm,
        pid: i32,
        prio: i32,
        target_cpu: i32,
    },
    Wakeup {
        comm: Comm,
        pid: i32,
        prio: i32,
        target_cpu: i32,
    },
    Migrate {
        pid: i32,
        prio: i32,
        orig_cpu: i32,
        dest_cpu: i32,
    },
    IrqEntry {
        irq: i32,
        name: Box<str>,
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
    HrtimerStart {
        timer: u64,
        function: u64,
        expires_ns: i64,
    },
    HrtimerExpireEntry {
        timer: u64,
        now_ns: i64,
        function: u64,
    },
    HrtimerExpireExit {
        timer: u64,
    },
    WorkStart {
        function: u64,
    },
    WorkEnd {
        function: u64,
    },
    /// An x86 interrupt vector without an irq number (`irq_vectors:local_timer_entry`, …).
    VectorEntry {
        name: &'static str,
    },
    VectorExit {
        name: &'static str,
    },
    /// An inter-processor interrupt sent to `target_cpu` (None: a CPU mask).
    IpiSend {
        target_cpu: Option<u32>,
    },
    /// A `trace_marker` write.
    Marker {
        text: Box<str>,
    },
}

/// One decoded event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    pub timestamp_ns: u64,
    pub cpu: u32,
    /// The task that was current when the event fired (`common_pid`).
    pub pid: i32,
    pub kind: EventKind,
}

/// The softirq vector names, indexed by vector number.
pub const SOFTIRQ_NAMES: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

pub fn softirq_name(vector: u32) -> String {
    SOFTIRQ_NAMES
        .get(vector as usize)
        .map(|name| (*name).to_owned())
        .unwrap_or_else(|| format!("vector {vector}"))
}

/// Which trace events `rtlab run --explain` records.
///
/// Every event that fires between the probe's timer expiry and the probe reading its clock adds to
/// the latency being measured: in this project's VM about 0.3–0.7 µs each, on a wake-up median of
/// about 11 µs. The standard set therefore keeps one event on that path, `sched_waking` (it tells
/// when the timer fired, which splits timer lateness from scheduling), and otherwise only events that
/// fire when something else runs: switches, IRQs, softirqs, work items, IPIs and the interrupt
/// vectors other than the local timer. The full set adds the rest of the classic latency-tracing
/// set, which also names timer callbacks, at about twice the cost: `hrtimer_expire_entry/exit` (callbacks by symbol,
/// and the probe's own expiry), `hrtimer_start` (the requested expiry), `sched_wakeup`,
/// `sched_migrate_task` and the local timer vector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventSet {
    #[default]
    Standard,
    Full,
}

impl EventSet {
    pub fn name(self) -> &'static str {
        match self {
            EventSet::Standard => "standard",
            EventSet::Full => "full",
        }
    }

    /// The flag's word read back (`standard`, `full`).
    pub fn from_name(word: &str) -> Option<EventSet> {
        [EventSet::Standard, EventSet::Full]
            .into_iter()
            .find(|set| set.name() == word)
    }

    /// The events to enable, as (system, event, required): the set's rows of rtlab-core's
    /// table (`rtlab_core::tracepoints::explain_tracefs_events`).
    pub fn events(self) -> Vec<(String, String, bool)> {
        rtlab_core::tracepoints::explain_tracefs_events(self == EventSet::Full)
            .into_iter()
            .map(|(row, need)| {
                (
                    row.system.to_owned(),
                    row.name.to_owned(),
                    need == rtlab_core::tracepoints::Need::Required,
                )
            })
            .collect()
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum EventError {
    #[error("event {system}:{event}: field '{field}' is missing")]
    MissingField {
        system: String,
        event: String,
        field: &'static str,
    },
    #[error("event {system}:{event}: field '{field}' has size {size}, expected {expected}")]
    FieldSize {
        system: String,
        event: String,
        field: &'static str,
        size: usize,
        expected: &'static str,
    },
    #[error("payload of {length} bytes is too short for field '{field}' of event id {id}")]
    ShortPayload {
        id: u16,
        field: String,
        length: usize,
    },
    #[error("payload of {0} bytes has no event type")]
    NoType(usize),
}

/// Reads the fields of one event, each error naming the field and the event id.
#[derive(Clone, Copy)]
struct Fields<'payload> {
    payload: &'payload [u8],
    id: u16,
}

impl<'payload> Fields<'payload> {
    fn short(&self, slot: &FieldSlot) -> EventError {
        EventError::ShortPayload {
            id: self.id,
            field: slot.name.to_owned(),
            length: self.payload.len(),
        }
    }

    fn integer(&self, slot: &FieldSlot) -> Result<i64, EventError> {
        slot.integer(self.payload).ok_or_else(|| self.short(slot))
    }

    fn unsigned(&self, slot: &FieldSlot) -> Result<u64, EventError> {
        slot.unsigned(self.payload).ok_or_else(|| self.short(slot))
    }

    fn bytes(&self, slot: &FieldSlot) -> Result<&'payload [u8], EventError> {
        slot.bytes(self.payload).ok_or_else(|| self.short(slot))
    }

    fn string(&self, slot: &FieldSlot) -> Result<Box<str>, EventError> {
        let bytes = self.bytes(slot)?;
        let end = bytes
            .iter()
            .position(|byte| *byte == 0)
            .unwrap_or(bytes.len());
        Ok(String::from_utf8_lossy(&bytes[..end]).into())
    }

    fn comm(&self, slot: &FieldSlot) -> Result<Comm, EventError> {
        Ok(Comm::from_bytes(self.bytes(slot)?))
    }
}

/// Turns raw payloads into [`TraceEvent`]s, for the events whose formats it was given.
#[derive(Clone, Debug, Default)]
pub struct EventDecoder {
    /// Indexed by event id (ids are small, dense numbers): a lookup per event must be cheap.
    readers: Vec<Option<TracepointLayout>>,
    type_field: Option<(usize, usize)>,
}

/// The tracepoints attribution decodes: those the table (`rtlab_core::tracepoints`) marks
/// `decoded_by.explain` (not the process, futex and priority-inheritance events `rtlab trace`
/// reads, nor vectors without a known name).
fn decoded(tracepoint: Tracepoint) -> bool {
    tracepoint.row().is_some_and(|row| row.decoded_by.explain)
}

/// The tracepoint of `format` when attribution decodes it.
fn decoded_tracepoint(format: &EventFormat) -> Option<Tracepoint> {
    Tracepoint::of(&format.system, &format.name).filter(|tracepoint| decoded(*tracepoint))
}

impl EventDecoder {
    /// Adds an event format. Events rtlab does not use are skipped (Ok(false)); a used event
    /// whose fields are missing or odd is an error naming the field.
    pub fn add(&mut self, format: &EventFormat) -> Result<bool, EventError> {
        let Some(tracepoint) = decoded_tracepoint(format) else {
            return Ok(false);
        };
        let layout = TracepointLayout::resolve(tracepoint, format).map_err(|field| {
            EventError::MissingField {
                system: format.system.clone(),
                event: format.name.clone(),
                field,
            }
        })?;
        if let Some(slot) = layout.odd_sized_field() {
            return Err(EventError::FieldSize {
                system: format.system.clone(),
                event: format.name.clone(),
                field: slot.name,
                size: slot.size,
                expected: "1, 2, 4 or 8",
            });
        }
        self.type_field = Some((layout.common_type.offset, layout.common_type.size));
        let index = usize::from(format.id);
        if self.readers.len() <= index {
            self.readers.resize_with(index + 1, || None);
        }
        self.readers[index] = Some(layout);
        Ok(true)
    }

    pub fn n_event_types(&self) -> usize {
        self.readers.iter().flatten().count()
    }

    /// Decodes one payload. `Ok(None)` for event types this decoder was not given.
    pub fn decode(
        &self,
        cpu: u32,
        timestamp_ns: u64,
        payload: &[u8],
    ) -> Result<Option<TraceEvent>, EventError> {
        let (type_offset, type_size) = self.type_field.unwrap_or((0, 2));
        let id = match type_size {
            2 => payload
                .get(type_offset..type_offset + 2)
                .map(|bytes| u16::from_ne_bytes([bytes[0], bytes[1]])),
            _ => None,
        }
        .ok_or(EventError::NoType(payload.len()))?;
        let Some(Some(reader)) = self.readers.get(usize::from(id)) else {
            return Ok(None);
        };
        let read = Fields { payload, id };
        let field = |index: usize| &reader.fields[index];
        let int =
            |index: usize| -> Result<i32, EventError> { Ok(read.integer(field(index))? as i32) };
        let address = |index: usize| read.unsigned(field(index));
        let kind = match reader.tracepoint {
            Tracepoint::SchedSwitch => EventKind::Switch {
                prev_comm: read.comm(field(0))?,
                prev_pid: int(1)?,
                prev_prio: int(2)?,
                prev_state: read.integer(field(3))?,
                next_comm: read.comm(field(4))?,
                next_pid: int(5)?,
                next_prio: int(6)?,
            },
            Tracepoint::SchedWaking => EventKind::Waking {
                comm: read.comm(field(0))?,
                pid: int(1)?,
                prio: int(2)?,
                target_cpu: int(3)?,
            },
            Tracepoint::SchedWakeup => EventKind::Wakeup {
                comm: read.comm(field(0))?,
                pid: int(1)?,
                prio: int(2)?,
                target_cpu: int(3)?,
            },
            Tracepoint::SchedMigrateTask => EventKind::Migrate {
                pid: int(0)?,
                prio: int(1)?,
                orig_cpu: int(2)?,
                dest_cpu: int(3)?,
            },
            Tracepoint::IrqHandlerEntry => EventKind::IrqEntry {
                irq: int(0)?,
                name: read.string(field(1))?,
            },
            Tracepoint::IrqHandlerExit => EventKind::IrqExit { irq: int(0)? },
            Tracepoint::SoftirqEntry => EventKind::SoftirqEntry {
                vector: address(0)? as u32,
            },
            Tracepoint::SoftirqExit => EventKind::SoftirqExit {
                vector: address(0)? as u32,
            },
            Tracepoint::HrtimerStart => EventKind::HrtimerStart {
                timer: address(0)?,
                function: address(1)?,
                expires_ns: read.integer(field(2))?,
            },
            Tracepoint::HrtimerExpireEntry => EventKind::HrtimerExpireEntry {
                timer: address(0)?,
                now_ns: read.integer(field(1))?,
                function: address(2)?,
            },
            Tracepoint::HrtimerExpireExit => EventKind::HrtimerExpireExit { timer: address(0)? },
            Tracepoint::WorkqueueExecuteStart => EventKind::WorkStart {
                function: address(0)?,
            },
            Tracepoint::WorkqueueExecuteEnd => EventKind::WorkEnd {
                function: address(0)?,
            },
            Tracepoint::VectorEntry(Some(name)) => EventKind::VectorEntry { name },
            Tracepoint::VectorExit(Some(name)) => EventKind::VectorExit { name },
            Tracepoint::IpiSendCpu => EventKind::IpiSend {
                target_cpu: Some(address(0)? as u32),
            },
            Tracepoint::IpiSendCpumask => EventKind::IpiSend { target_cpu: None },
            Tracepoint::Print => EventKind::Marker {
                text: read.string(field(0))?.trim_end_matches('\n').into(),
            },
            // `add` takes no other tracepoint.
            _ => return Ok(None),
        };
        Ok(Some(TraceEvent {
            timestamp_ns,
            cpu,
            pid: read.integer(&reader.common_pid)? as i32,
            kind,
        }))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::parse_event_format;

    #[test]
    fn the_full_set_adds_every_listed_event_and_the_standard_set_keeps_one_on_the_wake_path() {
        let names = |set: EventSet| -> Vec<String> {
            set.events()
                .into_iter()
                .map(|(system, event, _)| format!("{system}:{event}"))
                .collect()
        };
        let standard = names(EventSet::Standard);
        let full = names(EventSet::Full);
        for added in [
            "sched:sched_wakeup",
            "sched:sched_migrate_task",
            "timer:hrtimer_start",
            "timer:hrtimer_expire_entry",
            "timer:hrtimer_expire_exit",
            "irq_vectors:local_timer_entry",
            "irq_vectors:local_timer_exit",
        ] {
            assert!(full.contains(&added.to_owned()), "{added}");
            assert!(!standard.contains(&added.to_owned()), "{added}");
        }
        assert!(standard.iter().all(|event| full.contains(event)));
        // Every event either set enables is one the decoder understands.
        for event in &full {
            let (system, name) = event.split_once(':').unwrap();
            let format = parse_event_format(
                system,
                &format!("name: {name}\nID: 1\nformat:\n{COMMON}\nprint fmt: \"x\"\n"),
            )
            .unwrap();
            assert!(
                decoded_tracepoint(&format).is_some(),
                "{event} has no decoder"
            );
        }
    }

    #[test]
    fn decodes_every_tracepoint_the_table_gives_it_and_no_other() {
        for row in rtlab_core::tracepoints::TRACEPOINTS {
            let (format, payload) = crate::fields::example_event(row.tracepoint, 9).unwrap();
            let mut decoder = EventDecoder::default();
            let added = decoder.add(&format).unwrap();
            assert_eq!(added, row.decoded_by.explain, "{}", row.full_name());
            let event = decoder.decode(0, 1, &payload).unwrap();
            assert_eq!(event.is_some(), added, "{}", row.full_name());
        }
    }

    pub const COMMON: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n";

    pub fn irq_entry_format() -> EventFormat {
        let text = format!("name: irq_handler_entry\nID: 225\nformat:\n{COMMON}\n\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n\nprint fmt: \"irq=%d\"\n");
        parse_event_format("irq", &text).unwrap()
    }

    pub fn irq_entry_payload(pid: i32, irq: i32, name: &str) -> Vec<u8> {
        let mut payload = Vec::new();
        payload.extend_from_slice(&225u16.to_ne_bytes());
        payload.extend_from_slice(&[0, 0]);
        payload.extend_from_slice(&pid.to_ne_bytes());
        payload.extend_from_slice(&irq.to_ne_bytes());
        let location = ((name.len() as u32 + 1) << 16) | 16;
        payload.extend_from_slice(&location.to_ne_bytes());
        payload.extend_from_slice(name.as_bytes());
        payload.push(0);
        payload
    }

    #[test]
    fn decodes_dynamic_strings_and_rejects_short_payloads() {
        let mut decoder = EventDecoder::default();
        assert!(decoder.add(&irq_entry_format()).unwrap());
        let payload = irq_entry_payload(42, 11, "virtio0-input.0");
        let event = decoder.decode(1, 500, &payload).unwrap().unwrap();
        assert_eq!(event.pid, 42);
        assert_eq!(event.cpu, 1);
        assert_eq!(
            event.kind,
            EventKind::IrqEntry {
                irq: 11,
                name: "virtio0-input.0".into()
            }
        );
        assert!(decoder.decode(1, 500, &payload[..14]).is_err());
        let mut bad_location = payload.clone();
        bad_location[12..16].copy_from_slice(&((200u32 << 16) | 16).to_ne_bytes());
        assert!(decoder.decode(1, 500, &bad_location).is_err());
        let mut unknown = payload;
        unknown[0..2].copy_from_slice(&9u16.to_ne_bytes());
        assert_eq!(decoder.decode(1, 500, &unknown).unwrap(), None);
        assert!(decoder.decode(1, 500, &[1]).is_err());
    }

    #[test]
    fn comm_is_nul_terminated() {
        assert_eq!(Comm::from_bytes(b"spin\0garbage\0\0\0\0").as_str(), "spin");
        assert_eq!(
            Comm::new("a-very-long-thread-name").as_str(),
            "a-very-long-thr"
        );
        assert_eq!(softirq_name(3), "NET_RX");
        assert_eq!(softirq_name(12), "vector 12");
    }
}
