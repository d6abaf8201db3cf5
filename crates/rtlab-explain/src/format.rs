//! Parsers for tracefs' self-description: `events/<system>/<event>/format`, `events/header_page`
//! and `events/header_event`.
//!
//! The binary ring buffer has no fixed layout: field offsets and sizes differ between kernels and
//! configurations, so the decoder reads them from these files instead of hard-coding them. Every
//! parser here treats its input as untrusted (it is fuzzed) and returns an error naming the line.

use thiserror::Error;

/// A malformed `format`, `header_page` or `header_event` file.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FormatError {
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
    #[error("missing '{0}'")]
    Missing(&'static str),
}

fn line_error(line: usize, message: impl Into<String>) -> FormatError {
    FormatError::Line {
        line,
        message: message.into(),
    }
}

/// How a field's bytes are laid out in the event payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldLayout {
    /// A fixed-size value (integer, pointer, or fixed array such as `char comm[16]`).
    Fixed,
    /// `__data_loc`: a u32 holding (length << 16 | offset) of bytes elsewhere in the payload.
    DataLocation,
    /// `__rel_loc`: like `__data_loc`, but the offset counts from the end of this field.
    RelativeLocation,
    /// A trailing array of size 0 (`char buf[]`): the bytes from `offset` to the payload's end.
    Rest,
}

/// One `field:` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The C type as written, e.g. `unsigned short`, `char[16]`, `__data_loc char[]`.
    pub type_text: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    pub layout: FieldLayout,
}

impl Field {
    /// True for `char` arrays (fixed or dynamic): the value is a NUL-terminated string.
    pub fn is_string(&self) -> bool {
        self.type_text.contains("char")
            && (self.type_text.contains('[') || self.layout != FieldLayout::Fixed)
    }
}

/// The description of one event: its numeric id and its fields (common fields included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    pub system: String,
    pub name: String,
    pub id: u16,
    pub fields: Vec<Field>,
}

impl EventFormat {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|field| field.name == name)
    }
}

/// Largest field offset or size accepted; a payload is at most one ring-buffer page.
const MAX_FIELD_EXTENT: usize = 1 << 20;

/// Parses one `field:` declaration (`unsigned short common_type`, `char comm[16]`,
/// `__data_loc char[] name`) into (type, name, is-array-of-size-zero).
fn split_declaration(declaration: &str) -> Option<(String, String)> {
    let declaration = declaration.trim();
    // The name is the last identifier, possibly followed by an array suffix.
    let (head, suffix) = match declaration.rfind('[') {
        Some(bracket) if declaration.ends_with(']') && !declaration[..bracket].ends_with(' ') => {
            let before = &declaration[..bracket];
            // `char[] name` style keeps the brackets on the type; `char name[16]` on the name.
            (before, &declaration[bracket..])
        }
        _ => (declaration, ""),
    };
    let name_start = head
        .char_indices()
        .rev()
        .find(|(_, character)| !(character.is_ascii_alphanumeric() || *character == '_'))
        .map(|(position, character)| position + character.len_utf8())
        .unwrap_or(0);
    let name = &head[name_start..];
    if name.is_empty()
        || name
            .chars()
            .next()
            .is_some_and(|first| first.is_ascii_digit())
    {
        return None;
    }
    let type_text = format!("{}{}", head[..name_start].trim(), suffix);
    if type_text.is_empty() {
        return None;
    }
    Some((type_text, name.to_owned()))
}

fn parse_attribute<'a>(part: &'a str, key: &str) -> Option<&'a str> {
    part.trim()
        .strip_prefix(key)?
        .strip_prefix(':')
        .map(str::trim)
}

/// Parses a `field:…;\toffset:…;\tsize:…;\tsigned:…;` line (the part after leading whitespace).
fn parse_field_line(text: &str, line: usize) -> Result<Field, FormatError> {
    let mut parts = text.split(';');
    let declaration = parts
        .next()
        .and_then(|part| parse_attribute(part, "field"))
        .ok_or_else(|| line_error(line, "expected 'field:'"))?;
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for part in parts {
        if let Some(value) = parse_attribute(part, "offset") {
            offset = Some(parse_number(value, line, "offset")?);
        } else if let Some(value) = parse_attribute(part, "size") {
            size = Some(parse_number(value, line, "size")?);
        } else if let Some(value) = parse_attribute(part, "signed") {
            signed = parse_number(value, line, "signed")? != 0;
        }
    }
    let offset = offset.ok_or_else(|| line_error(line, "field has no 'offset:'"))?;
    let size = size.ok_or_else(|| line_error(line, "field has no 'size:'"))?;
    if offset > MAX_FIELD_EXTENT || size > MAX_FIELD_EXTENT {
        return Err(line_error(
            line,
            format!("offset {offset} or size {size} is implausibly large"),
        ));
    }
    let (type_text, name) = split_declaration(declaration).ok_or_else(|| {
        line_error(
            line,
            format!("cannot read field declaration '{declaration}'"),
        )
    })?;
    let layout = if type_text.starts_with("__data_loc") {
        FieldLayout::DataLocation
    } else if type_text.starts_with("__rel_loc") {
        FieldLayout::RelativeLocation
    } else if size == 0 {
        FieldLayout::Rest
    } else {
        FieldLayout::Fixed
    };
    if matches!(
        layout,
        FieldLayout::DataLocation | FieldLayout::RelativeLocation
    ) && size != 4
    {
        return Err(line_error(
            line,
            format!("dynamic field '{name}' has size {size}, expected 4"),
        ));
    }
    Ok(Field {
        name,
        type_text,
        offset,
        size,
        signed,
        layout,
    })
}

fn parse_number(text: &str, line: usize, what: &str) -> Result<usize, FormatError> {
    text.trim()
        .parse::<usize>()
        .map_err(|_| line_error(line, format!("'{what}' is not a number: '{}'", text.trim())))
}

/// Parses an event's `format` file. `system` is the directory it came from (the file doesn't say).
pub fn parse_event_format(system: &str, text: &str) -> Result<EventFormat, FormatError> {
    let mut name = None;
    let mut id = None;
    let mut fields = Vec::new();
    for (index, raw_line) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw_line.trim();
        if let Some(value) = trimmed.strip_prefix("name:") {
            name = Some(value.trim().to_owned());
        } else if let Some(value) = trimmed.strip_prefix("ID:") {
            let value = value.trim();
            id = Some(value.parse::<u16>().map_err(|_| {
                line_error(
                    line,
                    format!("event ID '{value}' is not a number below 65536"),
                )
            })?);
        } else if trimmed.starts_with("field:") {
            fields.push(parse_field_line(trimmed, line)?);
        } else if trimmed.starts_with("print fmt:") {
            break;
        }
    }
    let name = name.ok_or(FormatError::Missing("name:"))?;
    let id = id.ok_or(FormatError::Missing("ID:"))?;
    if fields.is_empty() {
        return Err(FormatError::Missing("field:"));
    }
    Ok(EventFormat {
        system: system.to_owned(),
        name,
        id,
        fields,
    })
}

/// Layout of a ring-buffer page header (`events/header_page`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageHeader {
    pub timestamp_offset: usize,
    pub timestamp_size: usize,
    pub commit_offset: usize,
    /// 8 on 64-bit kernels (`local_t`), 4 on 32-bit ones.
    pub commit_size: usize,
    /// Where event data starts in the page.
    pub data_offset: usize,
    /// The largest number of data bytes a page can hold.
    pub data_size: usize,
}

/// Parses `events/header_page`.
pub fn parse_header_page(text: &str) -> Result<PageHeader, FormatError> {
    let mut timestamp = None;
    let mut commit = None;
    let mut data = None;
    for (index, raw_line) in text.lines().enumerate() {
        let trimmed = raw_line.trim();
        if !trimmed.starts_with("field:") {
            continue;
        }
        let field = parse_field_line(trimmed, index + 1)?;
        match field.name.as_str() {
            "timestamp" => timestamp = Some(field),
            "commit" => commit = Some(field),
            "data" => data = Some(field),
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(FormatError::Missing("field timestamp"))?;
    let commit = commit.ok_or(FormatError::Missing("field commit"))?;
    let data = data.ok_or(FormatError::Missing("field data"))?;
    if timestamp.size != 8 {
        return Err(FormatError::Line {
            line: 0,
            message: format!("page timestamp has size {}, expected 8", timestamp.size),
        });
    }
    if commit.size != 4 && commit.size != 8 {
        return Err(FormatError::Line {
            line: 0,
            message: format!("page commit has size {}, expected 4 or 8", commit.size),
        });
    }
    Ok(PageHeader {
        timestamp_offset: timestamp.offset,
        timestamp_size: timestamp.size,
        commit_offset: commit.offset,
        commit_size: commit.size,
        data_offset: data.offset,
        data_size: data.size,
    })
}

impl PageHeader {
    /// The layout of x86-64 and arm64 kernels (what `header_page` says there).
    pub const LINUX_64BIT: PageHeader = PageHeader {
        timestamp_offset: 0,
        timestamp_size: 8,
        commit_offset: 8,
        commit_size: 8,
        data_offset: 16,
        data_size: 4080,
    };
}

/// The event header encoding (`events/header_event`): bit widths and the special type values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventHeader {
    pub type_len_bits: u32,
    pub time_delta_bits: u32,
    pub padding_type: u32,
    pub time_extend_type: u32,
    pub time_stamp_type: u32,
    /// Largest type_len meaning "data of type_len × 4 bytes".
    pub data_max_type_len: u32,
}

impl EventHeader {
    /// The encoding every Linux since 2.6.30 uses.
    pub const LINUX: EventHeader = EventHeader {
        type_len_bits: 5,
        time_delta_bits: 27,
        padding_type: 29,
        time_extend_type: 30,
        time_stamp_type: 31,
        data_max_type_len: 28,
    };
}

/// Parses `events/header_event`.
pub fn parse_header_event(text: &str) -> Result<EventHeader, FormatError> {
    let mut header = EventHeader {
        type_len_bits: 0,
        time_delta_bits: 0,
        padding_type: 0,
        time_extend_type: 0,
        time_stamp_type: 0,
        data_max_type_len: 0,
    };
    let mut seen = [false; 6];
    for (index, raw_line) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw_line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let number_after = |separator: &str| -> Result<u32, FormatError> {
            let (_, rest) = trimmed
                .split_once(separator)
                .ok_or_else(|| line_error(line, format!("expected '{separator}'")))?;
            let digits: String = rest
                .trim()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits
                .parse::<u32>()
                .map_err(|_| line_error(line, format!("no number after '{separator}'")))
        };
        let key = trimmed
            .split(|character: char| character == ':' || character.is_whitespace())
            .next()
            .unwrap_or("");
        match key {
            "type_len" => {
                header.type_len_bits = number_after(":")?;
                seen[0] = true;
            }
            "time_delta" => {
                header.time_delta_bits = number_after(":")?;
                seen[1] = true;
            }
            "padding" => {
                header.padding_type = number_after("==")?;
                seen[2] = true;
            }
            "time_extend" => {
                header.time_extend_type = number_after("==")?;
                seen[3] = true;
            }
            "time_stamp" => {
                header.time_stamp_type = number_after("==")?;
                seen[4] = true;
            }
            "data" => {
                header.data_max_type_len = number_after("==")?;
                seen[5] = true;
            }
            _ => {}
        }
    }
    let names = [
        "type_len",
        "time_delta",
        "padding",
        "time_extend",
        "time_stamp",
        "data max type_len",
    ];
    if let Some(position) = seen.iter().position(|present| !present) {
        return Err(FormatError::Line {
            line: 0,
            message: format!("header_event has no '{}' line", names[position]),
        });
    }
    if header.type_len_bits + header.time_delta_bits != 32
        || header.type_len_bits == 0
        || header.type_len_bits > 8
    {
        return Err(FormatError::Line {
            line: 0,
            message: format!(
                "type_len {} + time_delta {} bits must make one 32-bit word",
                header.type_len_bits, header.time_delta_bits
            ),
        });
    }
    let type_limit = 1u32 << header.type_len_bits;
    for value in [
        header.padding_type,
        header.time_extend_type,
        header.time_stamp_type,
        header.data_max_type_len,
    ] {
        if value >= type_limit {
            return Err(FormatError::Line {
                line: 0,
                message: format!(
                    "type value {value} does not fit {} bits",
                    header.type_len_bits
                ),
            });
        }
    }
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHED_SWITCH: &str = "name: sched_switch\nID: 372\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:__data_loc char[] name;\toffset:28;\tsize:4;\tsigned:0;\n\tfield:char buf[];\toffset:32;\tsize:0;\tsigned:0;\n\nprint fmt: \"prev_comm=%s\"\n";

    #[test]
    fn parses_fields_of_every_layout() {
        let format = parse_event_format("sched", SCHED_SWITCH).unwrap();
        assert_eq!(format.id, 372);
        assert_eq!(format.name, "sched_switch");
        assert_eq!(format.fields.len(), 8);
        let comm = format.field("prev_comm").unwrap();
        assert_eq!(
            (comm.offset, comm.size, comm.layout),
            (8, 16, FieldLayout::Fixed)
        );
        assert!(comm.is_string());
        assert_eq!(comm.type_text, "char[16]");
        let pid = format.field("prev_pid").unwrap();
        assert!(pid.signed);
        assert_eq!(pid.type_text, "pid_t");
        let name = format.field("name").unwrap();
        assert_eq!(name.layout, FieldLayout::DataLocation);
        assert!(name.is_string());
        assert_eq!(format.field("buf").unwrap().layout, FieldLayout::Rest);
        assert_eq!(
            format.field("common_type").unwrap().type_text,
            "unsigned short"
        );
    }

    #[test]
    fn rejects_bad_numbers_and_missing_parts() {
        let bad_offset = SCHED_SWITCH.replace("offset:24", "offset:x");
        assert_eq!(
            parse_event_format("sched", &bad_offset),
            Err(FormatError::Line {
                line: 10,
                message: "'offset' is not a number: 'x'".into()
            })
        );
        assert_eq!(
            parse_event_format("sched", &SCHED_SWITCH.replace("ID: 372", "")),
            Err(FormatError::Missing("ID:"))
        );
        assert!(
            parse_event_format("sched", &SCHED_SWITCH.replace("ID: 372", "ID: 70000")).is_err()
        );
        assert!(parse_event_format("sched", "name: x\nID: 1\n").is_err());
        // Multi-byte characters in a declaration are an error or a name, never a panic.
        let unicode = "name: x\nID: 1\n\tfield:int \u{e9}\u{e9};\toffset:0;\tsize:4;\tsigned:1;\n\tfield:\u{1F600}[;\toffset:0;\tsize:4;\tsigned:1;\n";
        let _ = parse_event_format("sched", unicode);
    }

    #[test]
    fn parses_this_kernels_headers() {
        let page = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
        assert_eq!(parse_header_page(page).unwrap(), PageHeader::LINUX_64BIT);
        let event = "# compressed entry header\n\ttype_len    :    5 bits\n\ttime_delta  :   27 bits\n\tarray       :   32 bits\n\n\tpadding     : type == 29\n\ttime_extend : type == 30\n\ttime_stamp : type == 31\n\tdata max type_len  == 28\n";
        assert_eq!(parse_header_event(event).unwrap(), EventHeader::LINUX);
        assert!(parse_header_event(&event.replace("27 bits", "20 bits")).is_err());
        assert!(
            parse_header_page(&page.replace("size:8;\tsigned:1", "size:3;\tsigned:1")).is_err()
        );
    }
}
