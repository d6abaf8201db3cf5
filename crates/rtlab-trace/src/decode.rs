//! Raw tracepoint payloads → [`Event`]s, with the field offsets the kernel's `format` files give.
//!
//! The same decoder serves the live recorder and the trace.dat reader, so both produce the same
//! event stream. It also follows task names: the first time a payload names a task (or names it
//! differently), an [`EventKind::Name`] goes out before the event. Payloads are untrusted: a field
//! outside the payload is an error, never a panic.

use crate::model::{Comm, Event, EventKind};
use rtlab_explain::fields::{FieldSlot, Tracepoint, TracepointLayout};
use rtlab_explain::format::{EventFormat, FieldLayout};
use rustc_hash::FxHashMap;
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("event {event}: field '{field}' is missing from its format")]
    MissingField { event: String, field: &'static str },
    #[error("event id {id}: payload of {length} bytes is too short for field '{field}'")]
    ShortPayload {
        id: u16,
        field: &'static str,
        length: usize,
    },
}

/// The `irq` number given to x86 vector events (they have none).
pub const VECTOR_IRQ: i32 = -1;

/// The tracepoints the analyses decode: those rtlab-core's table (`rtlab_core::tracepoints`)
/// marks `decoded_by.app` (not the timer, workqueue, IPI and marker events attribution reads),
/// and every x86 vector, known by name or not (an interrupt all the same).
fn decoded(tracepoint: Tracepoint) -> bool {
    match tracepoint.row() {
        Some(row) => row.decoded_by.app,
        None => matches!(
            tracepoint,
            Tracepoint::VectorEntry(None) | Tracepoint::VectorExit(None)
        ),
    }
}

/// Decodes payloads of the tracepoints it decodes (`decoded`) it was given formats for.
#[derive(Clone, Debug, Default)]
pub struct PayloadDecoder {
    readers: Vec<Option<TracepointLayout>>,
    type_slot: Option<FieldSlot>,
    /// Whether `sched_waking` is known: then `sched_wakeup` is redundant and skipped.
    has_waking: bool,
    names: FxHashMap<i32, Comm>,
    /// The markers' user-space probes: event id, where `common_pid` is, and whether it is a
    /// work-done marker (else a cycle marker).
    markers: Vec<(u16, FieldSlot, bool)>,
}

impl PayloadDecoder {
    /// Adds a format; formats of events the analyses do not use are ignored (`Ok(false)`).
    pub fn add(&mut self, format: &EventFormat) -> Result<bool, DecodeError> {
        let Some(tracepoint) =
            Tracepoint::of(&format.system, &format.name).filter(|tracepoint| decoded(*tracepoint))
        else {
            return Ok(false);
        };
        let layout = TracepointLayout::resolve(tracepoint, format).map_err(|field| {
            DecodeError::MissingField {
                event: format!("{}:{}", format.system, format.name),
                field,
            }
        })?;
        self.type_slot = Some(layout.common_type);
        let index = usize::from(format.id);
        if self.readers.len() <= index {
            self.readers.resize_with(index + 1, || None);
        }
        self.readers[index] = Some(layout);
        if tracepoint == Tracepoint::SchedWaking {
            self.has_waking = true;
        }
        Ok(true)
    }

    /// Adds the format of a marker's user-space probe (`rtlab_<pid>/cycle<N>`, `…/done<N>`):
    /// its records become [`EventKind::CycleMarker`] (or, `work_done`, [`EventKind::WorkDone`])
    /// of the thread that hit it.
    pub fn add_marker(&mut self, format: &EventFormat, work_done: bool) -> Result<(), DecodeError> {
        let field = format
            .field("common_pid")
            .ok_or_else(|| DecodeError::MissingField {
                event: format!("{}:{}", format.system, format.name),
                field: "common_pid",
            })?;
        self.markers.push((
            format.id,
            FieldSlot {
                name: "common_pid",
                offset: field.offset,
                size: field.size,
                layout: field.layout,
                is_string: false,
            },
            work_done,
        ));
        Ok(())
    }

    pub fn n_event_types(&self) -> usize {
        self.readers.iter().flatten().count()
    }

    fn note_name(&mut self, tid: i32, comm: Comm, timestamp_ns: u64, cpu: u32) -> Option<Event> {
        if tid <= 0 || comm.bytes()[0] == 0 {
            return None;
        }
        if self.names.get(&tid) == Some(&comm) {
            return None;
        }
        self.names.insert(tid, comm);
        Some(Event {
            timestamp_ns,
            cpu,
            kind: EventKind::Name { tid, comm },
        })
    }

    /// Decodes one payload; `emit` receives the event (after any name events it implies).
    /// Payloads of events without a format are skipped.
    pub fn decode(
        &mut self,
        cpu: u32,
        timestamp_ns: u64,
        payload: &[u8],
        emit: &mut impl FnMut(Event),
    ) -> Result<(), DecodeError> {
        let type_slot = self.type_slot.unwrap_or(FieldSlot {
            name: "common_type",
            offset: 0,
            size: 2,
            layout: FieldLayout::Fixed,
            is_string: false,
        });
        let id = type_slot
            .integer(payload)
            .ok_or(DecodeError::ShortPayload {
                id: 0,
                field: "common_type",
                length: payload.len(),
            })? as u16;
        if let Some(kind) = self.marker_kind(id, payload)? {
            emit(Event {
                timestamp_ns,
                cpu,
                kind,
            });
            return Ok(());
        }
        let Some(Some(reader)) = self.readers.get(usize::from(id)) else {
            return Ok(());
        };
        let Some((kind, names)) = decode_kind(reader, id, payload, self.has_waking)? else {
            return Ok(());
        };
        for (tid, comm) in names.into_iter().flatten() {
            if let Some(name_event) = self.note_name(tid, comm, timestamp_ns, cpu) {
                emit(name_event);
            }
        }
        emit(Event {
            timestamp_ns,
            cpu,
            kind,
        });
        Ok(())
    }

    /// The event of a marker's user-space probe, when `id` is one.
    fn marker_kind(&self, id: u16, payload: &[u8]) -> Result<Option<EventKind>, DecodeError> {
        let Some(&(_, pid_slot, work_done)) = self
            .markers
            .iter()
            .find(|(marker_id, _, _)| *marker_id == id)
        else {
            return Ok(None);
        };
        let tid = pid_slot.integer(payload).ok_or(DecodeError::ShortPayload {
            id,
            field: "common_pid",
            length: payload.len(),
        })? as i32;
        Ok(Some(if work_done {
            EventKind::WorkDone { tid }
        } else {
            EventKind::CycleMarker { tid }
        }))
    }
}

/// The tasks a payload names, (tid, command name): a switch names two.
type NamedTasks = [Option<(i32, Comm)>; 2];

/// Reads a payload's fields by their position in the table's `fields`, each error naming the
/// field.
struct Reader<'payload> {
    layout: &'payload TracepointLayout,
    payload: &'payload [u8],
    id: u16,
}

impl Reader<'_> {
    fn short(&self, field: &'static str) -> DecodeError {
        DecodeError::ShortPayload {
            id: self.id,
            field,
            length: self.payload.len(),
        }
    }

    fn int(&self, index: usize) -> Result<i64, DecodeError> {
        let slot = self.layout.fields[index];
        slot.integer(self.payload)
            .ok_or_else(|| self.short(slot.name))
    }

    fn int32(&self, index: usize) -> Result<i32, DecodeError> {
        Ok(self.int(index)? as i32)
    }

    fn comm(&self, index: usize) -> Result<Comm, DecodeError> {
        let slot = self.layout.fields[index];
        slot.bytes(self.payload)
            .map(Comm::from_bytes)
            .ok_or_else(|| self.short(slot.name))
    }

    /// The task that was current (`common_pid`).
    fn current(&self) -> Result<i32, DecodeError> {
        Ok(self
            .layout
            .common_pid
            .integer(self.payload)
            .ok_or_else(|| self.short("common_pid"))? as i32)
    }
}

/// A payload's event and the tasks it names; None for a `sched_wakeup` when `has_waking`
/// (`sched_waking` already told it) and for tracepoints `add` does not take.
fn decode_kind(
    layout: &TracepointLayout,
    id: u16,
    payload: &[u8],
    has_waking: bool,
) -> Result<Option<(EventKind, NamedTasks)>, DecodeError> {
    let read = Reader {
        layout,
        payload,
        id,
    };
    let current = read.current()?;
    let tracepoint = layout.tracepoint;
    let mut names: NamedTasks = [None, None];
    let kind = match tracepoint {
        Tracepoint::SchedSwitch => {
            let prev_tid = read.int32(1)?;
            let next_tid = read.int32(5)?;
            names = [
                Some((prev_tid, read.comm(0)?)),
                Some((next_tid, read.comm(4)?)),
            ];
            EventKind::Switch {
                prev_tid,
                prev_prio: read.int32(2)?,
                prev_state: read.int(3)? as u32,
                next_tid,
                next_prio: read.int32(6)?,
            }
        }
        Tracepoint::SchedWaking | Tracepoint::SchedWakeup => {
            if tracepoint == Tracepoint::SchedWakeup && has_waking {
                return Ok(None);
            }
            let tid = read.int32(1)?;
            names[0] = Some((tid, read.comm(0)?));
            EventKind::Waking {
                tid,
                prio: read.int32(2)?,
                waker: current,
                target_cpu: read.int32(3)?,
            }
        }
        Tracepoint::SchedWakeupNew => {
            let tid = read.int32(1)?;
            names[0] = Some((tid, read.comm(0)?));
            EventKind::WakeupNew {
                tid,
                prio: read.int32(2)?,
                waker: current,
            }
        }
        Tracepoint::SchedProcessFork => {
            let child = read.int32(2)?;
            names[0] = Some((child, read.comm(1)?));
            EventKind::Fork {
                parent: read.int32(0)?,
                child,
            }
        }
        Tracepoint::SchedPiSetprio => {
            let tid = read.int32(1)?;
            names[0] = Some((tid, read.comm(0)?));
            EventKind::PiSetprio {
                tid,
                old_prio: read.int32(2)?,
                new_prio: read.int32(3)?,
                by: current,
            }
        }
        _ => match decode_unnamed(&read, current)? {
            Some(kind) => kind,
            None => return Ok(None),
        },
    };
    Ok(Some((kind, names)))
}

/// The events that name no task.
fn decode_unnamed(read: &Reader<'_>, current: i32) -> Result<Option<EventKind>, DecodeError> {
    Ok(Some(match read.layout.tracepoint {
        Tracepoint::SchedProcessExit => EventKind::Exit {
            tid: read.int32(1)?,
        },
        Tracepoint::SchedMigrateTask => EventKind::Migrate {
            tid: read.int32(0)?,
            orig_cpu: read.int32(2)?,
            dest_cpu: read.int32(3)?,
        },
        Tracepoint::SysEnterFutex => EventKind::FutexEnter {
            tid: current,
            uaddr: read.int(0)? as u64,
            op: read.int(1)? as u32,
            value: read.int(2)? as u32,
        },
        Tracepoint::SysExitFutex => EventKind::FutexExit {
            tid: current,
            result: read.int(0)?,
        },
        Tracepoint::IrqHandlerEntry => EventKind::IrqEntry {
            irq: read.int32(0)?,
        },
        Tracepoint::IrqHandlerExit => EventKind::IrqExit {
            irq: read.int32(0)?,
        },
        Tracepoint::SoftirqEntry => EventKind::SoftirqEntry {
            vector: read.int(0)? as u32,
        },
        Tracepoint::SoftirqExit => EventKind::SoftirqExit {
            vector: read.int(0)? as u32,
        },
        Tracepoint::VectorEntry(_) => EventKind::IrqEntry { irq: VECTOR_IRQ },
        Tracepoint::VectorExit(_) => EventKind::IrqExit { irq: VECTOR_IRQ },
        // `add` takes no other tracepoint.
        _ => return Ok(None),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_every_tracepoint_the_table_gives_it_and_no_other() {
        for row in rtlab_core::tracepoints::TRACEPOINTS {
            let (format, payload) =
                rtlab_explain::fields::example_event(row.tracepoint, 9).unwrap();
            let mut decoder = PayloadDecoder::default();
            let added = decoder.add(&format).unwrap();
            assert_eq!(added, row.decoded_by.app, "{}", row.full_name());
            let mut events = Vec::new();
            decoder
                .decode(0, 1, &payload, &mut |event| events.push(event))
                .unwrap();
            let decoded = events
                .iter()
                .any(|event| !matches!(event.kind, EventKind::Name { .. }));
            assert_eq!(decoded, added, "{}", row.full_name());
        }
    }
}
