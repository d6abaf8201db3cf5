//! Analysis while recording, in bounded memory, for `rtlab trace watch`: the recording is cut
//! into windows of a few seconds and each window is analysed on its own as soon as it is
//! complete, so a day of watching holds one window's state at a time.
//!
//! Two pieces: [`LiveSink`], a `Write` that a recording (`record::record`) writes its rtlab trace
//! file into and that decodes the blocks back into events as they arrive, and
//! [`WindowedAnalyzer`], which feeds them to a fresh [`Analyzer`] per window and hands out each
//! window's [`TraceReport`]. What a new window's analyzer cannot learn from its own events (thread
//! names, policies and processes, recorded once when a thread appears) is carried over from the
//! windows before: a map bounded by [`THREADS_REMEMBERED`], pruned when threads exit.
//!
//! The price of windows: an activation that straddles a window's end is seen as two, and a
//! thread's period is detected anew in each window (a window of [`DEFAULT_WINDOW_NS`] holds
//! hundreds of a JACK period). Events reach the sink a block (16,384 events) at a time, so a
//! line is printed seconds after its miss, not microseconds.

use crate::analyze::report::{SourceInfo, TraceReport};
use crate::analyze::{AnalysisConfig, Analyzer};
use crate::file::{decode, MAGIC, RECORD_SIZE};
use crate::model::{Event, EventKind};
use rtlab_core::header::OutputHeader;
use std::collections::HashMap;
use std::io::{Read as _, Write};

/// Length of one analysis window.
pub const DEFAULT_WINDOW_NS: u64 = 2_000_000_000;
/// Threads whose name and policy are remembered across windows (the oldest are forgotten past
/// this; exited threads at once).
pub const THREADS_REMEMBERED: usize = 4096;

/// A recording analysed window by window.
pub struct WindowedAnalyzer {
    config: AnalysisConfig,
    window_ns: u64,
    header: OutputHeader,
    source: SourceInfo,
    recorded_events: Vec<String>,
    switches_filtered: bool,
    analyzer: Option<Analyzer>,
    window_start: Option<u64>,
    /// Per thread: its last `Name` and `ThreadInfo` (or `OtherPolicy`) events, and when it was
    /// last seen.
    remembered: HashMap<i32, Remembered>,
    n_windows: u64,
    n_events: u64,
}

#[derive(Clone, Copy, Debug)]
struct Remembered {
    name: Option<Event>,
    info: Option<Event>,
    last_seen: u64,
}

impl WindowedAnalyzer {
    pub fn new(
        config: AnalysisConfig,
        window_ns: u64,
        header: OutputHeader,
        source: SourceInfo,
    ) -> WindowedAnalyzer {
        WindowedAnalyzer {
            config,
            window_ns: window_ns.max(1),
            header,
            source,
            recorded_events: Vec::new(),
            switches_filtered: false,
            analyzer: None,
            window_start: None,
            remembered: HashMap::new(),
            n_windows: 0,
            n_events: 0,
        }
    }

    /// As [`Analyzer::declare_recorded`], for every window.
    pub fn declare_recorded(&mut self, events: &[String], switches_filtered: bool) {
        self.recorded_events = events.to_vec();
        self.switches_filtered = switches_filtered;
    }

    fn fresh_analyzer(&self, at_ns: u64) -> Analyzer {
        let mut analyzer = Analyzer::new(self.config);
        if !self.recorded_events.is_empty() {
            analyzer.declare_recorded(&self.recorded_events);
        }
        analyzer.declare_switches_filtered(self.switches_filtered);
        let mut carried: Vec<Event> = self
            .remembered
            .values()
            .flat_map(|remembered| [remembered.name, remembered.info])
            .flatten()
            .map(|event| Event {
                timestamp_ns: at_ns,
                ..event
            })
            .collect();
        carried.sort_by_key(|event| match event.kind {
            EventKind::Name { tid, .. }
            | EventKind::ThreadInfo { tid, .. }
            | EventKind::OtherPolicy { tid, .. } => tid,
            _ => 0,
        });
        for event in &carried {
            analyzer.push(event);
        }
        analyzer
    }

    fn remember(&mut self, event: &Event) {
        let (tid, is_name) = match event.kind {
            EventKind::Name { tid, .. } => (tid, true),
            // The policy of another program's real-time thread is read once a recording: every
            // window names it by it ("qhog7 (SCHED_FIFO 95)", not the classes its priority
            // implies).
            EventKind::ThreadInfo { tid, .. } | EventKind::OtherPolicy { tid, .. } => (tid, false),
            EventKind::Exit { tid } => {
                self.remembered.remove(&tid);
                return;
            }
            _ => return,
        };
        if !self.remembered.contains_key(&tid) && self.remembered.len() >= THREADS_REMEMBERED {
            if let Some((&oldest, _)) = self
                .remembered
                .iter()
                .min_by_key(|(_, remembered)| remembered.last_seen)
            {
                self.remembered.remove(&oldest);
            }
        }
        let entry = self.remembered.entry(tid).or_insert(Remembered {
            name: None,
            info: None,
            last_seen: event.timestamp_ns,
        });
        entry.last_seen = event.timestamp_ns;
        if is_name {
            entry.name = Some(*event);
        } else {
            entry.info = Some(*event);
        }
    }

    /// Adds one event (in time order); returns the report of the window it closed, if any.
    pub fn push(&mut self, event: &Event) -> Option<TraceReport> {
        self.n_events += 1;
        let start = *self.window_start.get_or_insert(event.timestamp_ns);
        let mut closed = None;
        if event.timestamp_ns >= start.saturating_add(self.window_ns) {
            closed = self.close_window();
            self.window_start = Some(event.timestamp_ns);
        }
        if self.analyzer.is_none() {
            self.analyzer = Some(self.fresh_analyzer(event.timestamp_ns));
        }
        self.remember(event);
        self.analyzer.as_mut().expect("made above").push(event);
        closed
    }

    fn close_window(&mut self) -> Option<TraceReport> {
        let analyzer = self.analyzer.take()?;
        self.n_windows += 1;
        let (report, _) = analyzer.finish(self.header.clone(), self.source.clone(), 0);
        Some(report)
    }

    /// The report of the last, partial window.
    pub fn finish(&mut self) -> Option<TraceReport> {
        self.window_start = None;
        self.close_window()
    }

    /// Threads remembered across windows now (bounded by [`THREADS_REMEMBERED`]).
    pub fn threads_remembered(&self) -> usize {
        self.remembered.len()
    }

    /// Events in the open window (bounded by the window's length, not the watch's).
    pub fn events_in_window(&self) -> u64 {
        self.analyzer.as_ref().map_or(0, Analyzer::n_events)
    }

    pub fn n_windows(&self) -> u64 {
        self.n_windows
    }

    pub fn n_events(&self) -> u64 {
        self.n_events
    }
}

/// Where the rtlab trace file stream is in its framing.
enum Framing {
    Preamble,
    Blocks,
    Trailer,
}

/// A `Write` that decodes an rtlab trace file as it is written and hands each event to `visit`;
/// nothing is kept but the bytes of a block not yet complete.
pub struct LiveSink<F: FnMut(&Event)> {
    pending: Vec<u8>,
    framing: Framing,
    visit: F,
}

impl<F: FnMut(&Event)> LiveSink<F> {
    pub fn new(visit: F) -> LiveSink<F> {
        LiveSink {
            pending: Vec::new(),
            framing: Framing::Preamble,
            visit,
        }
    }

    fn malformed(message: impl Into<String>) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, message.into())
    }

    /// Decodes what is complete in `pending`.
    fn drain(&mut self) -> std::io::Result<()> {
        loop {
            match self.framing {
                Framing::Preamble => {
                    if self.pending.len() < 16 {
                        return Ok(());
                    }
                    if &self.pending[..8] != MAGIC {
                        return Err(Self::malformed("not an rtlab trace stream"));
                    }
                    let json_len =
                        u32::from_le_bytes(self.pending[12..16].try_into().expect("4")) as usize;
                    if self.pending.len() < 16 + json_len {
                        return Ok(());
                    }
                    self.pending.drain(..16 + json_len);
                    self.framing = Framing::Blocks;
                }
                Framing::Blocks => {
                    if self.pending.len() < 9 {
                        return Ok(());
                    }
                    match self.pending[0] {
                        b'C' => {}
                        b'E' => {
                            self.framing = Framing::Trailer;
                            continue;
                        }
                        other => return Err(Self::malformed(format!("unknown block tag {other}"))),
                    }
                    let compressed_len =
                        u32::from_le_bytes(self.pending[1..5].try_into().expect("4")) as usize;
                    let n_records =
                        u32::from_le_bytes(self.pending[5..9].try_into().expect("4")) as usize;
                    if self.pending.len() < 9 + compressed_len {
                        return Ok(());
                    }
                    let mut records = Vec::with_capacity(n_records * RECORD_SIZE);
                    flate2::read::DeflateDecoder::new(&self.pending[9..9 + compressed_len])
                        .read_to_end(&mut records)?;
                    if records.len() != n_records * RECORD_SIZE {
                        return Err(Self::malformed("a block's size does not match its count"));
                    }
                    for record in records.chunks_exact(RECORD_SIZE) {
                        let record: &[u8; RECORD_SIZE] = record.try_into().expect("chunk");
                        let event = decode(record).map_err(Self::malformed)?;
                        (self.visit)(&event);
                    }
                    self.pending.drain(..9 + compressed_len);
                }
                Framing::Trailer => {
                    self.pending.clear();
                    return Ok(());
                }
            }
        }
    }
}

impl<F: FnMut(&Event)> Write for LiveSink<F> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(bytes);
        self.drain()?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::report::Culprit;
    use crate::file::{FileHeader, FileTrailer, TraceFileWriter};
    use crate::model::Policy;

    const MS: u64 = 1_000_000;

    fn header() -> OutputHeader {
        OutputHeader {
            schema: crate::analyze::report::SCHEMA.into(),
            tool_version: "test".into(),
            cmdline: Vec::new(),
            started_at: "2026-01-01T00:00:00Z".into(),
            host: None,
        }
    }

    fn source() -> SourceInfo {
        SourceInfo {
            path: "live".into(),
            format: "live".into(),
            clock: None,
        }
    }

    fn switch(at: u64, cpu: u32, prev: i32, prev_state: u32, next: i32) -> Event {
        Event {
            timestamp_ns: at,
            cpu,
            kind: EventKind::Switch {
                prev_tid: prev,
                prev_prio: 120,
                prev_state,
                next_tid: next,
                next_prio: 120,
            },
        }
    }

    /// A periodic thread (tid 100): woken every 10 ms, runs 1 ms; every 50th activation a hog
    /// (tid 200) holds the CPU 15 ms first. Every 1,000th activation a short-lived thread is
    /// born and exits; every 29th a thread is born and never exits (so the remembered threads
    /// grow until the cap).
    fn synthetic(activations: u64, mut visit: impl FnMut(&Event)) {
        for n in 0..activations {
            let start = n * 10 * MS;
            let tid = 100;
            visit(&Event {
                timestamp_ns: start,
                cpu: 0,
                kind: EventKind::Waking {
                    tid,
                    prio: 20,
                    waker: 0,
                    target_cpu: 0,
                },
            });
            let delay = if n % 50 == 49 {
                visit(&switch(start + 1, 0, 0, 0, 200));
                visit(&switch(start + 15 * MS, 0, 200, 0, 0));
                15 * MS
            } else {
                0
            };
            visit(&switch(start + delay + 10, 0, 0, 0, tid));
            visit(&switch(start + delay + MS, 0, tid, 1, 0));
            if n % 29 == 0 || n % 1000 == 0 {
                let child = 10_000 + n as i32;
                visit(&Event {
                    timestamp_ns: start + 2 * MS,
                    cpu: 1,
                    kind: EventKind::ThreadInfo {
                        tid: child,
                        tgid: 1,
                        policy: Policy::Other,
                        priority: 0,
                    },
                });
                if n % 1000 == 0 {
                    visit(&Event {
                        timestamp_ns: start + 3 * MS,
                        cpu: 1,
                        kind: EventKind::Exit { tid: child },
                    });
                }
            }
        }
    }

    #[test]
    fn a_day_of_events_keeps_state_bounded_by_counts() {
        // 240,000 activations (40 minutes of a 10 ms period, a million events, 8,000 threads born): the state
        // is one window's and at most THREADS_REMEMBERED threads, whatever the length.
        let mut live = WindowedAnalyzer::new(
            AnalysisConfig::default(),
            DEFAULT_WINDOW_NS,
            header(),
            source(),
        );
        let mut late = 0u64;
        let mut largest_window = 0u64;
        let mut most_remembered = 0usize;
        synthetic(240_000, |event| {
            if let Some(report) = live.push(event) {
                late += report.late_activations_total;
            }
            largest_window = largest_window.max(live.events_in_window());
            most_remembered = most_remembered.max(live.threads_remembered());
        });
        if let Some(report) = live.finish() {
            late += report.late_activations_total;
        }
        // 2 s windows of 10 ms activations with at most 4 events each (+ thread events).
        assert!(
            largest_window <= 200 * 4 + 16 + 2 * THREADS_REMEMBERED as u64,
            "{largest_window}"
        );
        assert_eq!(most_remembered, THREADS_REMEMBERED);
        assert_eq!(live.n_windows(), 1_200 + 1);
        // Every 50th activation is late (15 ms of a 10 ms period): 4 in each 2 s window, of which
        // the analysis finds at least 3 (the last of a window has no next period to be late for).
        assert!(late >= 240_000 / 50 * 3 / 4, "{late}");
    }

    #[test]
    fn a_competitors_policy_read_once_names_it_in_every_window() {
        let mut live = WindowedAnalyzer::new(
            AnalysisConfig::default(),
            DEFAULT_WINDOW_NS,
            header(),
            source(),
        );
        let mut culprits = Vec::new();
        let mut see = |report: TraceReport| {
            for late in &report.late_activations {
                if let Some(Culprit::Thread {
                    tid: 200,
                    policy,
                    priority,
                    ..
                }) = &late.culprit
                {
                    culprits.push((policy.clone(), *priority));
                }
            }
        };
        // The recorder reads the policy of the competitor (tid 200, priority 95) when it first
        // sees it, once.
        if let Some(report) = live.push(&Event {
            timestamp_ns: 0,
            cpu: 0,
            kind: EventKind::OtherPolicy {
                tid: 200,
                policy: Policy::Fifo,
                priority: 95,
            },
        }) {
            see(report);
        }
        synthetic(1_000, |event| {
            if let Some(report) = live.push(event) {
                see(report);
            }
        });
        if let Some(report) = live.finish() {
            see(report);
        }
        assert!(live.n_windows() >= 5, "{}", live.n_windows());
        assert!(culprits.len() >= 10, "{culprits:?}");
        assert!(
            culprits
                .iter()
                .all(|(policy, priority)| policy == "SCHED_FIFO" && *priority == 95),
            "{culprits:?}"
        );
    }

    #[test]
    fn the_sink_decodes_what_the_writer_wrote_block_by_block() {
        let mut seen = Vec::new();
        let sink = LiveSink::new(|event: &Event| seen.push(*event));
        let file_header = FileHeader {
            header: header(),
            target: "test".into(),
            clock: "mono".into(),
            events: Vec::new(),
            recorder: None,
        };
        let mut writer = TraceFileWriter::new(sink, &file_header).unwrap();
        let mut written = Vec::new();
        synthetic(20_000, |event| {
            written.push(*event);
            writer.push(event).unwrap();
        });
        writer
            .finish(FileTrailer {
                n_events: 0,
                lost_events: 0,
                duration_ns: 0,
                interrupted: false,
            })
            .unwrap();
        assert_eq!(seen, written);
    }

    #[test]
    fn a_stream_that_is_not_a_trace_is_an_error() {
        let mut sink = LiveSink::new(|_: &Event| {});
        assert!(sink.write_all(b"NOTATRACE_______").is_err());
    }
}
