//! Reader of trace-cmd's `trace.dat`, versions 6 and 7 (uncompressed, zstd or zlib), as
//! trace-cmd.dat.v6(5) and trace-cmd.dat.v7(5) describe them.
//!
//! Only what the analyses need is kept: the ring-buffer page layout (`header_page`,
//! `header_event`), the formats of the events `rtlab trace` reads (rtlab-core's table, `app_reads`), the saved command lines,
//! and where each CPU's pages are. The per-CPU page streams are then decoded a page (or, when
//! compressed, a chunk) at a time and merged by time, so memory stays at a page or chunk per CPU
//! however long the trace is. The file is untrusted input: every length and count is checked
//! against the file, and an error names the byte offset and the section it was reading.

use crate::decode::PayloadDecoder;
use crate::model::{Comm, Event, EventKind};
use rtlab_explain::format::{parse_event_format, parse_header_event, parse_header_page};
use rtlab_explain::page::{LostEvents, PageDecoder};
use std::collections::VecDeque;
use std::io::Read;
use thiserror::Error;

/// A malformed or unsupported trace.dat: where, in which section, and what.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("offset {offset} ({section}): {message}")]
pub struct DatError {
    pub offset: u64,
    pub section: String,
    pub message: String,
}

/// Positional reads from the file (or bytes) the trace is in. `Sync`: compressed chunks are read
/// and decompressed on one thread per CPU while the events are merged on the caller's.
pub trait DatSource: Sync {
    fn read_at(&self, offset: u64, buffer: &mut [u8]) -> std::io::Result<usize>;
    fn length(&self) -> u64;
}

impl DatSource for std::fs::File {
    fn read_at(&self, offset: u64, buffer: &mut [u8]) -> std::io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buffer, offset)
    }
    fn length(&self) -> u64 {
        self.metadata().map(|metadata| metadata.len()).unwrap_or(0)
    }
}

impl DatSource for [u8] {
    fn read_at(&self, offset: u64, buffer: &mut [u8]) -> std::io::Result<usize> {
        let start = (offset as usize).min(self.len());
        let length = buffer.len().min(self.len() - start);
        buffer[..length].copy_from_slice(&self[start..start + length]);
        Ok(length)
    }
    fn length(&self) -> u64 {
        self.len() as u64
    }
}

impl DatSource for Vec<u8> {
    fn read_at(&self, offset: u64, buffer: &mut [u8]) -> std::io::Result<usize> {
        self.as_slice().read_at(offset, buffer)
    }
    fn length(&self) -> u64 {
        self.len() as u64
    }
}

/// The file's first bytes: 0x17 0x08 0x44 "tracing".
pub const MAGIC: &[u8; 10] = b"\x17\x08\x44tracing";
/// Largest section, chunk or string accepted (a bound for hostile sizes).
const MAX_BLOCK: u64 = 256 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Zstd,
    Zlib,
}

fn decompress(compression: Compression, data: &[u8], expected: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(expected);
    match compression {
        Compression::None => return Ok(data.to_vec()),
        Compression::Zstd => {
            let mut decoder = ruzstd::decoding::StreamingDecoder::new(data)
                .map_err(|error| format!("zstd: {error}"))?;
            (&mut decoder)
                .take(expected as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|error| format!("zstd: {error}"))?;
        }
        Compression::Zlib => {
            flate2::read::ZlibDecoder::new(data)
                .take(expected as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|error| format!("zlib: {error}"))?;
        }
    }
    if out.len() != expected {
        return Err(format!(
            "decompressed to {} bytes, the header says {expected}",
            out.len()
        ));
    }
    Ok(out)
}

struct Cursor<'source, S: DatSource + ?Sized> {
    source: &'source S,
    position: u64,
    section: String,
}

impl<'source, S: DatSource + ?Sized> Cursor<'source, S> {
    fn new(source: &'source S, position: u64, section: &str) -> Self {
        Cursor {
            source,
            position,
            section: section.to_owned(),
        }
    }

    fn error(&self, offset: u64, message: impl Into<String>) -> DatError {
        DatError {
            offset,
            section: self.section.clone(),
            message: message.into(),
        }
    }

    fn bytes(&mut self, length: u64) -> Result<Vec<u8>, DatError> {
        let at = self.position;
        if length > MAX_BLOCK || at.saturating_add(length) > self.source.length() {
            return Err(self.error(
                at,
                format!(
                    "{length} bytes wanted, the file ends at byte {}",
                    self.source.length()
                ),
            ));
        }
        let mut buffer = vec![0u8; length as usize];
        let read = self
            .source
            .read_at(at, &mut buffer)
            .map_err(|error| self.error(at, error.to_string()))?;
        if read != buffer.len() {
            return Err(self.error(at, "short read"));
        }
        self.position += length;
        Ok(buffer)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DatError> {
        Ok(self.bytes(N as u64)?.try_into().expect("length checked"))
    }
    fn u16(&mut self) -> Result<u16, DatError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, DatError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, DatError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn cstring(&mut self) -> Result<String, DatError> {
        let at = self.position;
        let mut text = Vec::new();
        loop {
            let [byte] = self.array::<1>()?;
            if byte == 0 {
                break;
            }
            text.push(byte);
            if text.len() > 4096 {
                return Err(self.error(at, "string without its NUL in 4096 bytes"));
            }
        }
        String::from_utf8(text).map_err(|_| self.error(at, "string is not UTF-8"))
    }

    fn text(&mut self, length: u64) -> Result<String, DatError> {
        let at = self.position;
        let bytes = self.bytes(length)?;
        String::from_utf8(bytes).map_err(|_| self.error(at, "text is not UTF-8"))
    }

    fn expect(&mut self, literal: &[u8]) -> Result<(), DatError> {
        let at = self.position;
        let found = self.bytes(literal.len() as u64)?;
        if found != literal {
            return Err(self.error(
                at,
                format!("expected {:?}", String::from_utf8_lossy(literal)),
            ));
        }
        Ok(())
    }
}

/// Where one CPU's pages are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuData {
    pub cpu: u32,
    pub offset: u64,
    pub size: u64,
}

/// What the header said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatInfo {
    pub version: u32,
    pub page_size: usize,
    pub compression: Compression,
    pub clock: Option<String>,
    pub buffer_name: String,
    pub cpus: Vec<CpuData>,
    /// Whether the data of each CPU is compressed in chunks (v7, a compressing trace-cmd).
    pub chunked: bool,
}

/// An opened trace.dat: header parsed, pages not yet read.
pub struct TraceDat<S: DatSource> {
    source: S,
    pub info: DatInfo,
    page_decoder: PageDecoder,
    decoder: PayloadDecoder,
    names: Vec<(i32, Comm)>,
}

impl<S: DatSource> std::fmt::Debug for TraceDat<S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TraceDat")
            .field("info", &self.info)
            .finish()
    }
}

/// Counts of a pass over the events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    pub n_pages: u64,
    pub n_records: u64,
    pub lost_events: u64,
}

fn is_used_format(system: &str, text: &str) -> bool {
    let name = text
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("name:"))
        .map(str::trim)
        .unwrap_or("");
    rtlab_core::tracepoints::row_named(system, name).is_some_and(|row| row.app_reads)
}

#[derive(Default)]
struct Header {
    page: Option<rtlab_explain::format::PageHeader>,
    event: Option<rtlab_explain::format::EventHeader>,
    decoder: PayloadDecoder,
    names: Vec<(i32, Comm)>,
}

fn read_header_info<S: DatSource + ?Sized>(
    cursor: &mut Cursor<'_, S>,
    header: &mut Header,
) -> Result<(), DatError> {
    cursor.expect(b"header_page\0")?;
    let size = cursor.u64()?;
    let at = cursor.position;
    let text = cursor.text(size)?;
    header.page = Some(
        parse_header_page(&text)
            .map_err(|error| cursor.error(at, format!("header_page: {error}")))?,
    );
    cursor.expect(b"header_event\0")?;
    let size = cursor.u64()?;
    let at = cursor.position;
    let text = cursor.text(size)?;
    header.event = Some(
        parse_header_event(&text)
            .map_err(|error| cursor.error(at, format!("header_event: {error}")))?,
    );
    Ok(())
}

fn skip_ftrace_formats<S: DatSource + ?Sized>(cursor: &mut Cursor<'_, S>) -> Result<(), DatError> {
    let count = cursor.u32()?;
    for _ in 0..count {
        let size = cursor.u64()?;
        let at = cursor.position;
        if at.saturating_add(size) > cursor.source.length() {
            return Err(cursor.error(at, format!("format of {size} bytes runs past the file")));
        }
        cursor.position += size;
    }
    Ok(())
}

fn read_event_formats<S: DatSource + ?Sized>(
    cursor: &mut Cursor<'_, S>,
    header: &mut Header,
) -> Result<(), DatError> {
    let n_systems = cursor.u32()?;
    for _ in 0..n_systems {
        let system = cursor.cstring()?;
        let n_events = cursor.u32()?;
        for _ in 0..n_events {
            let size = cursor.u64()?;
            let at = cursor.position;
            if size > MAX_BLOCK || at.saturating_add(size) > cursor.source.length() {
                return Err(cursor.error(at, format!("format of {size} bytes runs past the file")));
            }
            // Peek at the name before reading the whole text: most formats are skipped.
            let peek = cursor.bytes(size.min(80))?;
            cursor.position = at;
            if !is_used_format(&system, &String::from_utf8_lossy(&peek)) {
                cursor.position = at + size;
                continue;
            }
            let text = cursor.text(size)?;
            let format = parse_event_format(&system, &text)
                .map_err(|error| cursor.error(at, format!("format of {system}: {error}")))?;
            header
                .decoder
                .add(&format)
                .map_err(|error| cursor.error(at, error.to_string()))?;
        }
    }
    Ok(())
}

fn parse_cmdlines(text: &str) -> Vec<(i32, Comm)> {
    text.lines()
        .filter_map(|line| {
            let (pid, comm) = line.split_once(' ')?;
            Some((pid.trim().parse().ok()?, Comm::new(comm.trim())))
        })
        .collect()
}

fn skip_sized32<S: DatSource + ?Sized>(cursor: &mut Cursor<'_, S>) -> Result<(), DatError> {
    let size = u64::from(cursor.u32()?);
    let at = cursor.position;
    if at.saturating_add(size) > cursor.source.length() {
        return Err(cursor.error(at, format!("block of {size} bytes runs past the file")));
    }
    cursor.position += size;
    Ok(())
}

fn read_cmdlines<S: DatSource + ?Sized>(
    cursor: &mut Cursor<'_, S>,
    header: &mut Header,
) -> Result<(), DatError> {
    let size = cursor.u64()?;
    let text = cursor.bytes(size)?;
    header.names = parse_cmdlines(&String::from_utf8_lossy(&text));
    Ok(())
}

impl<S: DatSource> TraceDat<S> {
    /// Parses the header and finds the CPUs' data.
    pub fn open(source: S) -> Result<TraceDat<S>, DatError> {
        let mut cursor = Cursor::new(&source, 0, "file header");
        cursor.expect(MAGIC)?;
        let version_at = cursor.position;
        let version_text = cursor.cstring()?;
        let version: u32 = version_text.parse().map_err(|_| {
            cursor.error(
                version_at,
                format!("version {version_text:?} is not a number"),
            )
        })?;
        let [endian] = cursor.array::<1>()?;
        if endian != 0 {
            return Err(cursor.error(version_at, "big-endian traces are not supported"));
        }
        let [_long_size] = cursor.array::<1>()?;
        let page_size_at = cursor.position;
        let page_size = cursor.u32()? as usize;
        if !(64..=(1 << 20)).contains(&page_size) {
            return Err(cursor.error(page_size_at, format!("page size {page_size}")));
        }
        let mut header = Header::default();
        let info = match version {
            6 => Self::open_v6(&mut cursor, &mut header, page_size)?,
            7 => Self::open_v7(&mut cursor, &mut header, page_size)?,
            other => return Err(cursor.error(version_at, format!("version {other} is not 6 or 7"))),
        };
        let missing = |what: &str| DatError {
            offset: 0,
            section: "header info".into(),
            message: format!("no {what}"),
        };
        let page_decoder = PageDecoder {
            page: header.page.ok_or_else(|| missing("header_page"))?,
            event: header.event.ok_or_else(|| missing("header_event"))?,
        };
        if page_decoder.page.data_offset >= page_size {
            return Err(missing("page data inside the page size"));
        }
        for cpu in &info.cpus {
            if cpu.offset.saturating_add(cpu.size) > source.length() {
                return Err(DatError {
                    offset: cpu.offset,
                    section: format!("cpu {} data", cpu.cpu),
                    message: format!("{} bytes run past the end of the file", cpu.size),
                });
            }
        }
        Ok(TraceDat {
            info,
            page_decoder,
            decoder: header.decoder,
            names: header.names,
            source,
        })
    }

    fn open_v6(
        cursor: &mut Cursor<'_, S>,
        header: &mut Header,
        page_size: usize,
    ) -> Result<DatInfo, DatError> {
        cursor.section = "header info".into();
        read_header_info(cursor, header)?;
        cursor.section = "ftrace event formats".into();
        skip_ftrace_formats(cursor)?;
        cursor.section = "event formats".into();
        read_event_formats(cursor, header)?;
        cursor.section = "kallsyms".into();
        skip_sized32(cursor)?;
        cursor.section = "printk formats".into();
        skip_sized32(cursor)?;
        cursor.section = "cmdlines".into();
        read_cmdlines(cursor, header)?;
        cursor.section = "cpu count".into();
        let n_cpus = cursor.u32()?;
        if n_cpus > 8192 {
            return Err(cursor.error(cursor.position - 4, format!("{n_cpus} CPUs")));
        }
        let mut clock = None;
        let mut instances: Vec<(u64, String)> = Vec::new();
        loop {
            let at = cursor.position;
            let label = cursor.bytes(10)?;
            match &label[..] {
                b"options  \0" => {
                    cursor.section = "options".into();
                    loop {
                        let id = cursor.u16()?;
                        if id == 0 {
                            break;
                        }
                        let size = u64::from(cursor.u32()?);
                        let data = cursor.bytes(size)?;
                        if id == 4 {
                            clock =
                                Some(String::from_utf8_lossy(&data).trim_matches('\0').to_owned());
                        }
                        if id == 3 && data.len() > 8 {
                            // An instance's buffer: its own flyrecord header at this offset.
                            let offset =
                                u64::from_le_bytes(data[0..8].try_into().expect("8 bytes"));
                            let name = String::from_utf8_lossy(&data[8..])
                                .trim_matches('\0')
                                .to_owned();
                            instances.push((offset, name));
                        }
                    }
                }
                b"flyrecord\0" => break,
                b"latency  \0" => {
                    return Err(cursor.error(at, "a latency (text) trace has no per-CPU events"))
                }
                _ => return Err(cursor.error(at, "expected options, flyrecord or latency")),
            }
        }
        cursor.section = "flyrecord".into();
        let read_cpus = |cursor: &mut Cursor<'_, S>| -> Result<Vec<CpuData>, DatError> {
            (0..n_cpus)
                .map(|cpu| {
                    let offset = cursor.u64()?;
                    let size = cursor.u64()?;
                    Ok(CpuData { cpu, offset, size })
                })
                .collect()
        };
        let total = |cpus: &[CpuData]| cpus.iter().map(|cpu| cpu.size).sum::<u64>();
        let mut cpus = read_cpus(cursor)?;
        let mut buffer_name = String::new();
        // The instance with the most data when the top buffer is empty (`trace-cmd extract -B`).
        for (offset, name) in instances {
            cursor.position = offset;
            cursor.section = format!("buffer {name:?}");
            cursor.expect(b"flyrecord\0")?;
            let instance_cpus = read_cpus(cursor)?;
            if total(&instance_cpus) > total(&cpus) {
                cpus = instance_cpus;
                buffer_name = name;
            }
        }
        Ok(DatInfo {
            version: 6,
            page_size,
            compression: Compression::None,
            clock: clock.map(|text| selected_clock(&text)),
            buffer_name,
            cpus,
            chunked: false,
        })
    }

    /// Reads the section at `offset`: its header and its (decompressed) content.
    fn section(
        source: &S,
        offset: u64,
        compression: Compression,
        name: &str,
    ) -> Result<(u16, Vec<u8>), DatError> {
        let mut cursor = Cursor::new(source, offset, name);
        let id = cursor.u16()?;
        let flags = cursor.u16()?;
        let _description = cursor.u32()?;
        let size = cursor.u64()?;
        if flags & 1 == 0 {
            return Ok((id, cursor.bytes(size)?));
        }
        let at = cursor.position;
        let compressed_size = u64::from(cursor.u32()?);
        let uncompressed_size = u64::from(cursor.u32()?);
        if uncompressed_size > MAX_BLOCK {
            return Err(cursor.error(at, format!("section of {uncompressed_size} bytes")));
        }
        let data = cursor.bytes(compressed_size)?;
        let content = decompress(compression, &data, uncompressed_size as usize)
            .map_err(|message| cursor.error(at, message))?;
        Ok((id, content))
    }

    fn open_v7(
        cursor: &mut Cursor<'_, S>,
        header: &mut Header,
        page_size: usize,
    ) -> Result<DatInfo, DatError> {
        let at = cursor.position;
        let algorithm = cursor.cstring()?;
        let _algorithm_version = cursor.cstring()?;
        let compression = match algorithm.as_str() {
            "none" => Compression::None,
            "zstd" => Compression::Zstd,
            "zlib" => Compression::Zlib,
            other => {
                return Err(cursor.error(at, format!("compression {other:?} is not supported")))
            }
        };
        let mut next_options = cursor.u64()?;
        let source = cursor.source;
        let mut buffers: Vec<(String, String, Vec<CpuData>, u64)> = Vec::new();
        let mut seen_options = 0;
        while next_options != 0 {
            seen_options += 1;
            if seen_options > 64 {
                return Err(cursor.error(next_options, "more than 64 options sections"));
            }
            let options_at = next_options;
            let (id, content) = Self::section(source, options_at, compression, "options")?;
            if id != 0 {
                return Err(cursor.error(
                    options_at,
                    format!("section id {id} where options were expected"),
                ));
            }
            let mut options = Cursor::new(&content[..], 0, "options");
            let option_error = |message: String| DatError {
                offset: options_at,
                section: "options".into(),
                message,
            };
            loop {
                let id = options.u16().map_err(|error| option_error(error.message))?;
                let size = u64::from(options.u32().map_err(|error| option_error(error.message))?);
                let data = options
                    .bytes(size)
                    .map_err(|error| option_error(error.message))?;
                let mut option = Cursor::new(&data[..], 0, "option");
                let mut offset_option = || {
                    option.u64().map_err(|_| {
                        option_error(format!("option {id} of {size} bytes, 8 expected"))
                    })
                };
                match id {
                    0 => {
                        next_options = offset_option()?;
                        break;
                    }
                    3 => {
                        let parse = |option: &mut Cursor<'_, [u8]>| -> Result<_, DatError> {
                            let offset = option.u64()?;
                            let name = option.cstring()?;
                            let clock = option.cstring()?;
                            // trace-cmd 3.1 writes the buffer's page size before the CPU
                            // count; earlier writers do not: the option's length tells which.
                            let mut count = option.u32()?;
                            let rest = option.source.length() - option.position;
                            if rest != u64::from(count) * 20 {
                                count = option.u32()?;
                            }
                            if count > 8192 {
                                return Err(option.error(0, format!("{count} CPUs")));
                            }
                            let mut cpus = Vec::new();
                            for _ in 0..count {
                                let cpu = option.u32()?;
                                let offset = option.u64()?;
                                let size = option.u64()?;
                                cpus.push(CpuData { cpu, offset, size });
                            }
                            Ok((name, clock, cpus, offset))
                        };
                        buffers.push(parse(&mut option).map_err(|error| {
                            option_error(format!("buffer option: {}", error.message))
                        })?);
                    }
                    16 => {
                        let at = offset_option()?;
                        let (_, content) = Self::section(source, at, compression, "header info")?;
                        let mut inner = Cursor::new(&content[..], 0, "header info");
                        read_header_info(&mut inner, header)
                            .map_err(|error| relocate(error, at))?;
                    }
                    18 => {
                        let at = offset_option()?;
                        let (_, content) = Self::section(source, at, compression, "event formats")?;
                        let mut inner = Cursor::new(&content[..], 0, "event formats");
                        read_event_formats(&mut inner, header)
                            .map_err(|error| relocate(error, at))?;
                    }
                    21 => {
                        let at = offset_option()?;
                        let (_, content) = Self::section(source, at, compression, "cmdlines")?;
                        let mut inner = Cursor::new(&content[..], 0, "cmdlines");
                        read_cmdlines(&mut inner, header).map_err(|error| relocate(error, at))?;
                    }
                    _ => {}
                }
            }
        }
        // The instance with the most data (the top instance, unless only an instance was kept).
        let (buffer_name, clock, cpus, buffer_offset) = buffers
            .into_iter()
            .max_by_key(|(_, _, cpus, _)| cpus.iter().map(|cpu| cpu.size).sum::<u64>())
            .ok_or_else(|| cursor.error(0, "no BUFFER option: the file holds no flyrecord data"))?;
        // The flyrecord section's header says whether its data is compressed.
        let mut section = Cursor::new(source, buffer_offset, "flyrecord section");
        let _id = section.u16()?;
        let flags = section.u16()?;
        Ok(DatInfo {
            version: 7,
            page_size,
            compression,
            clock: Some(clock),
            buffer_name,
            cpus,
            chunked: flags & 1 != 0 && compression != Compression::None,
        })
    }

    /// Task names from the file's saved command lines.
    pub fn saved_names(&self) -> &[(i32, Comm)] {
        &self.names
    }

    /// Decodes every event in time order (CPUs merged), calling `visit` for each.
    pub fn for_each_event(&mut self, mut visit: impl FnMut(&Event)) -> Result<ReadStats, DatError> {
        let mut stats = ReadStats::default();
        for (tid, comm) in &self.names {
            visit(&Event {
                timestamp_ns: 0,
                cpu: 0,
                kind: EventKind::Name {
                    tid: *tid,
                    comm: *comm,
                },
            });
        }
        let chunked = self.info.chunked;
        let source = &self.source;
        let info = &self.info;
        let page_decoder = &self.page_decoder;
        let decoder = &mut self.decoder;
        std::thread::scope(|scope| -> Result<(), DatError> {
            let mut streams: Vec<CpuStream> = info
                .cpus
                .iter()
                .filter(|cpu| cpu.size > 0)
                .map(|cpu| {
                    let chunks = chunked.then(|| {
                        // Reading and decompressing runs ahead on its own thread, a few chunks
                        // at most (bounded memory); an error ends the stream with that error.
                        let (sender, receiver) = std::sync::mpsc::sync_channel(2);
                        let data = *cpu;
                        scope.spawn(move || {
                            let mut next_offset = data.offset;
                            let mut chunks_left = None;
                            loop {
                                let chunk = read_chunk(
                                    source,
                                    info,
                                    data,
                                    &mut next_offset,
                                    &mut chunks_left,
                                );
                                let stop = !matches!(chunk, Ok(Some(_)));
                                if let Some(chunk) = chunk.transpose() {
                                    if sender.send(chunk).is_err() {
                                        break;
                                    }
                                }
                                if stop {
                                    break;
                                }
                            }
                        });
                        receiver
                    });
                    CpuStream {
                        data: *cpu,
                        next_offset: cpu.offset,
                        chunks,
                        chunk: Vec::new(),
                        chunk_offset: 0,
                        chunk_position: 0,
                        events: VecDeque::new(),
                        done: false,
                    }
                })
                .collect();
            let mut context = StreamContext {
                source,
                info,
                page_decoder,
                decoder,
                stats: &mut stats,
                page: vec![0u8; info.page_size],
            };
            for stream in &mut streams {
                stream.fill(&mut context)?;
            }
            loop {
                let mut best: Option<(usize, u64)> = None;
                for (index, stream) in streams.iter().enumerate() {
                    if let Some(event) = stream.events.front() {
                        if best.is_none_or(|(_, time)| event.timestamp_ns < time) {
                            best = Some((index, event.timestamp_ns));
                        }
                    }
                }
                let Some((index, _)) = best else {
                    break;
                };
                let stream = &mut streams[index];
                let event = stream.events.pop_front().expect("front exists");
                visit(&event);
                if stream.events.is_empty() {
                    stream.fill(&mut context)?;
                }
            }
            Ok(())
        })?;
        Ok(stats)
    }
}

/// The selected clock in a `trace_clock` text (`local [global] mono`) or the name itself.
fn selected_clock(text: &str) -> String {
    text.split_whitespace()
        .find_map(|word| {
            word.strip_prefix('[')
                .and_then(|word| word.strip_suffix(']'))
        })
        .unwrap_or(text.trim())
        .to_owned()
}

/// An error inside a section's content, with the offset of the section in the file.
fn relocate(error: DatError, section_offset: u64) -> DatError {
    DatError {
        offset: section_offset,
        section: error.section,
        message: format!("at byte {} of the section: {}", error.offset, error.message),
    }
}

struct StreamContext<'a, S: DatSource> {
    source: &'a S,
    info: &'a DatInfo,
    page_decoder: &'a PageDecoder,
    decoder: &'a mut PayloadDecoder,
    stats: &'a mut ReadStats,
    page: Vec<u8>,
}

struct CpuStream {
    data: CpuData,
    next_offset: u64,
    /// Decompressed chunks (offset in the file, pages) from the CPU's reading thread.
    chunks: Option<std::sync::mpsc::Receiver<ChunkResult>>,
    chunk: Vec<u8>,
    chunk_offset: u64,
    chunk_position: usize,
    events: VecDeque<Event>,
    done: bool,
}

/// A decompressed chunk (its offset in the file, its pages) or why there is none.
type ChunkResult = Result<(u64, Vec<u8>), DatError>;

/// Reads and decompresses the next chunk of one CPU's data: `Ok(None)` after the last one.
fn read_chunk<S: DatSource>(
    source: &S,
    info: &DatInfo,
    data: CpuData,
    next_offset: &mut u64,
    chunks_left: &mut Option<u32>,
) -> Result<Option<(u64, Vec<u8>)>, DatError> {
    let section = format!("cpu {} data", data.cpu);
    let end = data.offset + data.size;
    let mut cursor = Cursor::new(source, *next_offset, &section);
    let left = match *chunks_left {
        Some(left) => left,
        None => cursor.u32()?,
    };
    if left == 0 {
        return Ok(None);
    }
    *chunks_left = Some(left - 1);
    let at = cursor.position;
    let compressed = u64::from(cursor.u32()?);
    let uncompressed = u64::from(cursor.u32()?);
    // The CPU's size does not count the 4-byte chunk count before the chunks.
    if uncompressed > MAX_BLOCK || cursor.position + compressed > end + 4 {
        return Err(cursor.error(
            at,
            format!("chunk of {compressed} bytes ({uncompressed} uncompressed) runs past the CPU's data"),
        ));
    }
    let bytes = cursor.bytes(compressed)?;
    let pages = decompress(info.compression, &bytes, uncompressed as usize)
        .map_err(|message| cursor.error(at, message))?;
    *next_offset = cursor.position;
    Ok(Some((at, pages)))
}

impl CpuStream {
    fn section(&self) -> String {
        format!("cpu {} data", self.data.cpu)
    }

    fn error(&self, offset: u64, message: impl Into<String>) -> DatError {
        DatError {
            offset,
            section: self.section(),
            message: message.into(),
        }
    }

    /// Decodes pages until there is an event or the data ends.
    fn fill<S: DatSource>(&mut self, context: &mut StreamContext<'_, S>) -> Result<(), DatError> {
        let page_size = context.info.page_size;
        let end = self.data.offset + self.data.size;
        while self.events.is_empty() && !self.done {
            let page_offset;
            if context.info.chunked {
                if self.chunk_position + page_size > self.chunk.len() {
                    // Next chunk, from the reading thread.
                    match self.chunks.as_ref().and_then(|chunks| chunks.recv().ok()) {
                        Some(chunk) => {
                            let (at, pages) = chunk?;
                            self.chunk = pages;
                            self.chunk_offset = at;
                            self.chunk_position = 0;
                        }
                        None => self.done = true,
                    }
                    continue;
                }
                page_offset = self.chunk_offset;
                let start = self.chunk_position;
                context
                    .page
                    .copy_from_slice(&self.chunk[start..start + page_size]);
                self.chunk_position += page_size;
            } else {
                if self.next_offset + page_size as u64 > end {
                    self.done = true;
                    break;
                }
                page_offset = self.next_offset;
                let read = context
                    .source
                    .read_at(page_offset, &mut context.page)
                    .map_err(|error| self.error(page_offset, error.to_string()))?;
                if read != page_size {
                    return Err(self.error(page_offset, "short read"));
                }
                self.next_offset += page_size as u64;
            }
            context.stats.n_pages += 1;
            let cpu = self.data.cpu;
            let events = &mut self.events;
            let decoder = &mut *context.decoder;
            let mut payload_error = None;
            let mut n_records = 0u64;
            let summary = context
                .page_decoder
                .decode(&context.page, |record| {
                    n_records += 1;
                    if payload_error.is_some() {
                        return;
                    }
                    if let Err(error) =
                        decoder.decode(cpu, record.timestamp_ns, record.payload, &mut |event| {
                            events.push_back(event)
                        })
                    {
                        payload_error = Some(error);
                    }
                })
                .map_err(|error| {
                    self.error(
                        page_offset,
                        if context.info.chunked {
                            format!("a page of the chunk: {error}")
                        } else {
                            format!("page: {error}")
                        },
                    )
                })?;
            if let Some(error) = payload_error {
                return Err(self.error(page_offset, error.to_string()));
            }
            context.stats.n_records += n_records;
            match summary.lost_events {
                Some(LostEvents::Counted(count)) => context.stats.lost_events += count,
                Some(LostEvents::Unknown) => context.stats.lost_events += 1,
                None => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn zlib_and_zstd_blocks_decompress_and_a_wrong_size_is_an_error() {
        let data: Vec<u8> = (0..10_000u32)
            .flat_map(|value| (value % 251).to_le_bytes())
            .collect();
        let mut encoder =
            flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(&data).unwrap();
        let compressed = encoder.finish().unwrap();
        assert_eq!(
            decompress(Compression::Zlib, &compressed, data.len()).unwrap(),
            data
        );
        let error = decompress(Compression::Zlib, &compressed, data.len() - 1).unwrap_err();
        assert!(error.contains("the header says"), "{error}");
        assert!(decompress(Compression::Zstd, b"not zstd", 10)
            .unwrap_err()
            .starts_with("zstd"));
    }

    #[test]
    fn the_selected_clock_is_the_bracketed_one() {
        assert_eq!(selected_clock("local [global] mono"), "global");
        assert_eq!(selected_clock("mono"), "mono");
    }
}
