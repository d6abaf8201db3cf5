//! The fields rtlab reads from each tracepoint (named in rtlab-core's table,
//! `rtlab_core::tracepoints`), resolved against the kernel's `format` files into offsets, sizes
//! and layouts.
//!
//! Both payload decoders use it: the explain recorder's (`event.rs`, [`crate::EventDecoder`]) and
//! `rtlab trace`'s (`rtlab-trace`'s `decode.rs`, over live rings and trace.dat files). Each
//! decodes the tracepoints its analysis needs and reads a field by its position in
//! [`Tracepoint::fields`]. Payloads are untrusted: every read is bounds-checked and returns `None`
//! rather than panic. Values are in the byte order of the machine that recorded them, which is
//! this machine's (trace.dat files are read only when little-endian, on little-endian machines).

use crate::format::{EventFormat, FieldLayout};

/// The tracepoints and their fields are rtlab-core's table (`rtlab_core::tracepoints`), here
/// under the names the decoders have always used.
pub use rtlab_core::tracepoints::{Tracepoint, NAMED_VECTORS};

/// Where one field is in a payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldSlot {
    pub name: &'static str,
    pub offset: usize,
    pub size: usize,
    pub layout: FieldLayout,
    /// A `char` array, fixed or dynamic.
    pub is_string: bool,
}

impl FieldSlot {
    /// A fixed field that is no string but not 1, 2, 4 or 8 bytes either: no integer reads it.
    pub fn has_odd_size(&self) -> bool {
        self.layout == FieldLayout::Fixed && !self.is_string && !matches!(self.size, 1 | 2 | 4 | 8)
    }

    /// The field as a signed integer (1, 2, 4 or 8 bytes); None outside the payload.
    pub fn integer(&self, payload: &[u8]) -> Option<i64> {
        let bytes = payload.get(self.offset..self.offset.checked_add(self.size)?)?;
        Some(match self.size {
            1 => i64::from(bytes[0] as i8),
            2 => i64::from(i16::from_ne_bytes([bytes[0], bytes[1]])),
            4 => i64::from(i32::from_ne_bytes(bytes.try_into().ok()?)),
            8 => i64::from_ne_bytes(bytes.try_into().ok()?),
            _ => return None,
        })
    }

    /// The field as an unsigned integer of its size (an address, a vector number).
    pub fn unsigned(&self, payload: &[u8]) -> Option<u64> {
        let value = self.integer(payload)?;
        Some(match self.size {
            1 => u64::from(value as u8),
            2 => u64::from(value as u16),
            4 => u64::from(value as u32),
            _ => value as u64,
        })
    }

    /// The field's bytes: fixed, to the payload's end, or where a `__data_loc` / `__rel_loc`
    /// word points.
    pub fn bytes<'payload>(&self, payload: &'payload [u8]) -> Option<&'payload [u8]> {
        match self.layout {
            FieldLayout::Fixed => payload.get(self.offset..self.offset.checked_add(self.size)?),
            FieldLayout::Rest => payload.get(self.offset..),
            FieldLayout::DataLocation | FieldLayout::RelativeLocation => {
                let word = self.unsigned(payload)? as u32;
                let mut start = (word & 0xffff) as usize;
                if self.layout == FieldLayout::RelativeLocation {
                    start += self.offset + self.size;
                }
                let length = (word >> 16) as usize;
                payload.get(start..start.checked_add(length)?)
            }
        }
    }
}

/// A tracepoint's fields found in its format: the common ones and [`Tracepoint::fields`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TracepointLayout {
    pub tracepoint: Tracepoint,
    pub common_type: FieldSlot,
    pub common_pid: FieldSlot,
    /// In the order of [`Tracepoint::fields`].
    pub fields: Vec<FieldSlot>,
}

impl TracepointLayout {
    /// Finds the fields in `format`; the error is the name of a field the format lacks.
    pub fn resolve(
        tracepoint: Tracepoint,
        format: &EventFormat,
    ) -> Result<TracepointLayout, &'static str> {
        let slot = |name: &'static str| -> Result<FieldSlot, &'static str> {
            let field = format.field(name).ok_or(name)?;
            Ok(FieldSlot {
                name,
                offset: field.offset,
                size: field.size,
                layout: field.layout,
                is_string: field.is_string(),
            })
        };
        let common_pid = slot("common_pid")?;
        let common_type = slot("common_type")?;
        let fields = tracepoint
            .fields()
            .iter()
            .map(|name| slot(name))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TracepointLayout {
            tracepoint,
            common_type,
            common_pid,
            fields,
        })
    }

    /// The first field no integer reads ([`FieldSlot::has_odd_size`]), if any.
    pub fn odd_sized_field(&self) -> Option<&FieldSlot> {
        [&self.common_pid, &self.common_type]
            .into_iter()
            .chain(&self.fields)
            .find(|slot| slot.has_odd_size())
    }
}

/// A `format` with `tracepoint`'s fields (names: 16-byte arrays; `name` and `buf`: dynamic
/// strings; the rest 8-byte integers) and a payload that fills them: for the decoders' tests
/// that each decodes every tracepoint the table says it does.
pub fn example_event(tracepoint: Tracepoint, id: u16) -> Option<(EventFormat, Vec<u8>)> {
    let row = tracepoint.row()?;
    let mut text = format!("name: {}\nID: {id}\nformat:\n", row.name);
    text.push_str("\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n");
    text.push_str("\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n");
    let mut payload = id.to_ne_bytes().to_vec();
    payload.extend_from_slice(&[0, 0]);
    payload.extend_from_slice(&7i32.to_ne_bytes());
    let mut strings = Vec::new();
    for field in row.fields {
        let offset = payload.len();
        if field.ends_with("comm") {
            text.push_str(&format!(
                "\tfield:char {field}[16];\toffset:{offset};\tsize:16;\tsigned:0;\n"
            ));
            payload.extend_from_slice(b"task\0\0\0\0\0\0\0\0\0\0\0\0");
        } else if matches!(*field, "name" | "buf") {
            text.push_str(&format!(
                "\tfield:__data_loc char[] {field};\toffset:{offset};\tsize:4;\tsigned:0;\n"
            ));
            strings.push(offset);
            payload.extend_from_slice(&[0; 4]);
        } else {
            text.push_str(&format!(
                "\tfield:u64 {field};\toffset:{offset};\tsize:8;\tsigned:0;\n"
            ));
            payload.extend_from_slice(&3u64.to_ne_bytes());
        }
    }
    for offset in strings {
        let location = (2u32 << 16) | payload.len() as u32;
        payload[offset..offset + 4].copy_from_slice(&location.to_ne_bytes());
        payload.extend_from_slice(b"x\0");
    }
    text.push_str("\nprint fmt: \"x\"\n");
    let format = crate::format::parse_event_format(row.system, &text).ok()?;
    Some((format, payload))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::parse_event_format;

    const COMMON: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n";

    #[test]
    fn a_layout_names_the_missing_field_and_reads_untrusted_payloads_safely() {
        let text = format!("name: irq_handler_entry\nID: 7\nformat:\n{COMMON}\n\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n\nprint fmt: \"x\"\n");
        let format = parse_event_format("irq", &text).unwrap();
        let layout = TracepointLayout::resolve(Tracepoint::IrqHandlerEntry, &format).unwrap();
        assert!(layout.odd_sized_field().is_none());
        let mut payload = vec![7, 0, 0, 0];
        payload.extend_from_slice(&42i32.to_ne_bytes());
        payload.extend_from_slice(&11i32.to_ne_bytes());
        payload.extend_from_slice(&((4u32 << 16) | 16).to_ne_bytes());
        payload.extend_from_slice(b"eth\0");
        assert_eq!(layout.common_pid.integer(&payload), Some(42));
        assert_eq!(layout.fields[0].integer(&payload), Some(11));
        assert_eq!(layout.fields[1].bytes(&payload), Some(&b"eth\0"[..]));
        assert_eq!(layout.fields[1].bytes(&payload[..18]), None);
        let mut far = payload.clone();
        far[12..16].copy_from_slice(&(u32::MAX).to_ne_bytes());
        assert_eq!(layout.fields[1].bytes(&far), None);
        assert_eq!(
            TracepointLayout::resolve(Tracepoint::SchedSwitch, &format),
            Err("prev_comm")
        );
    }
}
