//! One entry point for every input `rtlab trace analyze` takes: an rtlab trace file or a
//! trace-cmd trace.dat, told apart by their first bytes.

use crate::analyze::report::{SourceInfo, TraceReport};
use crate::analyze::timeline::Timeline;
use crate::analyze::{AnalysisConfig, Analyzer};
use crate::file::{FileError, TraceFile};
use crate::model::Event;
use crate::tracedat::{Compression, DatError, TraceDat};
use rtlab_core::header::OutputHeader;
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SourceError {
    #[error("{path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    TraceDat { path: String, source: DatError },
    #[error("{path}: {source}")]
    File { path: String, source: FileError },
    #[error("{path}: neither an rtlab trace file nor a trace-cmd trace.dat (first bytes)")]
    Unknown { path: String },
}

/// An opened input.
#[derive(Debug)]
pub enum TraceSource {
    Rtlab {
        path: String,
        file: Box<TraceFile<std::io::BufReader<std::fs::File>>>,
    },
    TraceDat {
        path: String,
        dat: Box<TraceDat<std::fs::File>>,
    },
}

/// Counts of one pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassStats {
    pub n_events: u64,
    pub lost_events: u64,
    /// False when an rtlab file was cut short (rtlab killed while recording).
    pub complete: bool,
}

/// How late an event may come in an rtlab file and still be put in its place. The recorder
/// writes events in time order up to a margin behind its reads; an event whose CPU was stalled
/// (a hypervisor stall between the program's clock read and its ring-buffer write) longer than
/// that arrives after later ones.
pub const REORDER_WINDOW_NS: u64 = 250_000_000;

/// Puts the events of an rtlab file back in time order within [`REORDER_WINDOW_NS`] (file order
/// among equal times).
#[derive(Default)]
struct Reorder {
    held: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u64, Held)>>,
    newest: u64,
    sequence: u64,
}

/// An event ordered by nothing but the (time, sequence) beside it in the heap.
#[derive(Clone, Copy, Debug)]
struct Held(Event);

impl PartialEq for Held {
    fn eq(&self, _: &Held) -> bool {
        true
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Held) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, _: &Held) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl Reorder {
    fn push(&mut self, event: Event, visit: &mut impl FnMut(&Event)) {
        self.sequence += 1;
        self.newest = self.newest.max(event.timestamp_ns);
        self.held.push(std::cmp::Reverse((
            event.timestamp_ns,
            self.sequence,
            Held(event),
        )));
        let ready_before = self.newest.saturating_sub(REORDER_WINDOW_NS);
        while let Some(std::cmp::Reverse((time, _, _))) = self.held.peek() {
            if *time >= ready_before {
                break;
            }
            let std::cmp::Reverse((_, _, Held(event))) = self.held.pop().expect("peeked");
            visit(&event);
        }
    }

    fn finish(mut self, visit: &mut impl FnMut(&Event)) {
        while let Some(std::cmp::Reverse((_, _, Held(event)))) = self.held.pop() {
            visit(&event);
        }
    }
}

impl TraceSource {
    pub fn open(path: &Path) -> Result<TraceSource, SourceError> {
        let name = path.display().to_string();
        let open_error = |source| SourceError::Open {
            path: name.clone(),
            source,
        };
        let file = std::fs::File::open(path).map_err(open_error)?;
        let mut magic = [0u8; 10];
        let n = std::os::unix::fs::FileExt::read_at(&file, &mut magic, 0).map_err(open_error)?;
        if n >= 8 && &magic[..8] == crate::file::MAGIC {
            let file = TraceFile::open(std::io::BufReader::with_capacity(1 << 16, file)).map_err(
                |source| SourceError::File {
                    path: name.clone(),
                    source,
                },
            )?;
            return Ok(TraceSource::Rtlab {
                path: name,
                file: Box::new(file),
            });
        }
        if n == 10 && &magic == crate::tracedat::MAGIC {
            let dat = TraceDat::open(file).map_err(|source| SourceError::TraceDat {
                path: name.clone(),
                source,
            })?;
            return Ok(TraceSource::TraceDat {
                path: name,
                dat: Box::new(dat),
            });
        }
        Err(SourceError::Unknown { path: name })
    }

    pub fn info(&self) -> SourceInfo {
        match self {
            TraceSource::Rtlab { path, file } => SourceInfo {
                path: path.clone(),
                format: format!("rtlab trace file v{}", crate::file::VERSION),
                clock: Some(file.header.clock.clone()),
            },
            TraceSource::TraceDat { path, dat } => SourceInfo {
                path: path.clone(),
                format: format!(
                    "trace.dat v{}{}",
                    dat.info.version,
                    match dat.info.compression {
                        Compression::None => "",
                        Compression::Zstd => " zstd",
                        Compression::Zlib => " zlib",
                    }
                ),
                clock: dat.info.clock.clone(),
            },
        }
    }

    /// The events (`system:event`) the recording enabled, when the source lists them (an rtlab
    /// file's header does; a trace.dat keeps formats, which may cover more than was enabled).
    pub fn recorded_events(&self) -> Option<&[String]> {
        match self {
            TraceSource::Rtlab { file, .. } => Some(&file.header.events),
            TraceSource::TraceDat { .. } => None,
        }
    }

    /// Whether the recorder kept only the switches around the target's threads (rtlab's BPF
    /// recorder), so that switches missing between others are by design, not a gap.
    pub fn switches_filtered(&self) -> bool {
        match self {
            TraceSource::Rtlab { file, .. } => file.header.recorder.as_deref() == Some("bpf"),
            TraceSource::TraceDat { .. } => false,
        }
    }

    /// Every event, in time order.
    pub fn for_each_event(
        &mut self,
        mut visit: impl FnMut(&Event),
    ) -> Result<PassStats, SourceError> {
        match self {
            TraceSource::Rtlab { path, file } => {
                let mut reorder = Reorder::default();
                let summary = file
                    .for_each_event(|event| reorder.push(*event, &mut visit))
                    .map_err(|source| SourceError::File {
                        path: path.clone(),
                        source,
                    })?;
                reorder.finish(&mut visit);
                Ok(PassStats {
                    n_events: summary.n_events,
                    lost_events: summary.trailer.as_ref().map(|t| t.lost_events).unwrap_or(0),
                    complete: summary.trailer.is_some(),
                })
            }
            TraceSource::TraceDat { path, dat } => {
                let stats =
                    dat.for_each_event(&mut visit)
                        .map_err(|source| SourceError::TraceDat {
                            path: path.clone(),
                            source,
                        })?;
                Ok(PassStats {
                    n_events: stats.n_records,
                    lost_events: stats.lost_events,
                    complete: true,
                })
            }
        }
    }
}

/// Opens `path` and runs every analysis over it.
pub fn analyze_path(
    path: &Path,
    config: AnalysisConfig,
    header: OutputHeader,
) -> Result<(TraceReport, Option<Timeline>), SourceError> {
    let mut source = TraceSource::open(path)?;
    let info = source.info();
    let mut analyzer = Analyzer::new(config);
    if let Some(events) = source.recorded_events() {
        analyzer.declare_recorded(events);
    }
    analyzer.declare_switches_filtered(source.switches_filtered());
    let stats = source.for_each_event(|event| analyzer.push(event))?;
    let (mut report, timeline) = analyzer.finish(header, info, stats.lost_events);
    if !stats.complete {
        report.warnings.push(
            "the recording was cut short (its trailer is missing): analysed up to the last complete block"
                .to_owned(),
        );
    }
    Ok((report, timeline))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EventKind;

    fn at(time_ns: u64, cpu: u32) -> Event {
        Event {
            timestamp_ns: time_ns,
            cpu,
            kind: EventKind::IrqEntry { irq: cpu as i32 },
        }
    }

    #[test]
    fn late_events_are_put_back_in_time_order_within_the_window() {
        const MS: u64 = 1_000_000;
        // CPU 1's event at 10 ms arrives after CPU 0's up to 12 ms (a stalled vCPU); the one at
        // 5 ms of CPU 2 arrives after everything up to 400 ms: beyond the window, it is visited
        // where it came.
        let arrivals = [
            at(11 * MS, 0),
            at(12 * MS, 0),
            at(10 * MS, 1),
            at(12 * MS, 1),
            at(400 * MS, 0),
            at(5 * MS, 2),
            at(401 * MS, 0),
        ];
        let mut order = Vec::new();
        let mut reorder = Reorder::default();
        for event in arrivals {
            reorder.push(event, &mut |event: &Event| {
                order.push((event.timestamp_ns / MS, event.cpu))
            });
        }
        reorder.finish(&mut |event: &Event| order.push((event.timestamp_ns / MS, event.cpu)));
        assert_eq!(
            order,
            [
                (10, 1),
                (11, 0),
                (12, 0),
                (12, 1),
                (5, 2),
                (400, 0),
                (401, 0)
            ]
        );
    }
}
