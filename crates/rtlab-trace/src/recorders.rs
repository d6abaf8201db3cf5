//! The two recorders behind `rtlab trace record`, one interface: the eBPF recorder
//! (`rtlab-bpf`'s `apptrace.bpf.o`: filtered in the kernel, records already in the trace file's
//! layout) and the tracefs recorder (`rtlab-explain`'s private instance: every task's scheduler and
//! interrupt events, the futex calls filtered to the target's threads, raw payloads decoded
//! here). `Auto` takes BPF when it loads and says why when it does not.

use crate::app_recorder::AppRecorder;
use crate::cycle_marker::{CycleMarker, CYCLE_MARKER_EVENT, WORK_DONE_EVENT};
use crate::decode::PayloadDecoder;
use crate::model::Event;
use crate::record_error::RecordError;
use rtlab_bpf::AppBpfRecorder;
use std::collections::HashMap;
use std::time::Duration;

/// Which recorder `rtlab trace record` uses (`--recorder`); the reason `auto` took tracefs is in
/// the summary.
pub use rtlab_core::recorder::RecorderChoice;

/// Why `auto` records cycle markers through tracefs (the summary's "BPF not used" reason).
pub const MARKERS_TAKE_TRACEFS: &str = "with cycle markers the tracefs recorder is used: removing the BPF recorder's user-space probes at the end cost the probed program (JACK) an xrun or more in every recording measured; --recorder bpf to use it anyway";

/// Records stamped this long before a poll started may still be on their way into the BPF ring
/// buffer (it is filled in reservation order, stamped just before); later ones wait a poll.
const BPF_REORDER_MARGIN_NS: u64 = 2_000_000;

/// The shortest time between two reads of the BPF ring buffer.
const BPF_MIN_POLL: Duration = Duration::from_millis(20);

pub(crate) enum Backend {
    Bpf {
        recorder: Box<AppBpfRecorder>,
        lost_before: u64,
        /// The threads already in the kernel's target map.
        known: HashMap<u32, u32>,
    },
    Tracefs {
        recorder: Box<AppRecorder>,
        decoder: PayloadDecoder,
    },
}

impl Backend {
    /// Starts the chosen recorder for `threads` (tid → tgid) of processes `processes`; with
    /// `Auto`, also the reason BPF was not used.
    /// With a `cycle_marker`, both record it (BPF: a uprobe program; tracefs: a uprobe event).
    pub(crate) fn start(
        choice: RecorderChoice,
        ring_kb_per_cpu: u32,
        threads: &HashMap<u32, u32>,
        processes: &[u32],
        markers: &[&CycleMarker],
    ) -> Result<(Backend, Option<String>), RecordError> {
        let bpf = || -> Result<Backend, RecordError> {
            let n_cpus = rtlab_sys::cpu::online_cpus()
                .map(|cpus| cpus.len())
                .unwrap_or(1);
            let ring_bytes = ring_kb_per_cpu as usize * 1024 * n_cpus;
            // Every call of a marker's function: its argument filter (the `pipewire`
            // preset's, only the driver's own timer re-arms) is the tracefs recorder's.
            let probes: Vec<(&std::path::Path, Vec<u64>, bool)> = markers
                .iter()
                .map(|marker| {
                    let offsets = marker.points.iter().map(|(_, offset)| *offset).collect();
                    (marker.binary.as_path(), offsets, marker.at_return)
                })
                .collect();
            let recorder = AppBpfRecorder::start(ring_bytes, &probes)?;
            let mut backend = Backend::Bpf {
                recorder: Box::new(recorder),
                lost_before: 0,
                known: HashMap::new(),
            };
            backend.set_targets(threads, processes)?;
            Ok(backend)
        };
        match choice {
            RecorderChoice::Bpf => Ok((bpf()?, None)),
            RecorderChoice::Tracefs => {
                Ok((Self::tracefs(ring_kb_per_cpu, threads, markers)?, None))
            }
            // The BPF recorder's probes cost the probed program a glitch as they are removed
            // at the end (JACK: 1-5 xruns in every one of 8 recordings, none in 4 of the
            // tracefs recorder's, whose probe goes through uprobe_events; BENCHMARKS.md): with
            // markers, `auto` takes tracefs, and `--recorder bpf` still takes BPF.
            RecorderChoice::Auto if !markers.is_empty() => Ok((
                Self::tracefs(ring_kb_per_cpu, threads, markers)?,
                Some(MARKERS_TAKE_TRACEFS.to_owned()),
            )),
            RecorderChoice::Auto => match bpf() {
                Ok(backend) => Ok((backend, None)),
                Err(error) => Ok((
                    Self::tracefs(ring_kb_per_cpu, threads, markers)?,
                    Some(format!("the BPF recorder did not load: {error}")),
                )),
            },
        }
    }

    fn tracefs(
        buffer_kb: u32,
        threads: &HashMap<u32, u32>,
        markers: &[&CycleMarker],
    ) -> Result<Backend, RecordError> {
        let initial: Vec<u32> = threads.keys().copied().collect();
        let recorder = AppRecorder::start(buffer_kb, Some(&initial), markers)?;
        let mut decoder = PayloadDecoder::default();
        let marker_group = rtlab_sys::uprobe_events::own_group();
        for format in recorder.formats() {
            if format.system == marker_group && format.name.starts_with(CYCLE_MARKER_EVENT) {
                decoder.add_marker(format, false)?;
            } else if format.system == marker_group && format.name.starts_with(WORK_DONE_EVENT) {
                decoder.add_marker(format, true)?;
            } else {
                decoder.add(format)?;
            }
        }
        Ok(Backend::Tracefs {
            recorder: Box::new(recorder),
            decoder,
        })
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            Backend::Bpf { .. } => "bpf",
            Backend::Tracefs { .. } => "tracefs",
        }
    }

    pub(crate) fn enabled_events(&self) -> Vec<String> {
        match self {
            Backend::Bpf { recorder, .. } => recorder.enabled_events().to_vec(),
            Backend::Tracefs { recorder, .. } => recorder.enabled_events().to_vec(),
        }
    }

    pub(crate) fn removed_stale_instances(&self) -> Vec<String> {
        match self {
            Backend::Bpf { .. } => Vec::new(),
            Backend::Tracefs { recorder, .. } => recorder.removed_stale_instances().to_vec(),
        }
    }

    /// The target's threads (tid → tgid) and processes changed: the kernel's filter follows.
    pub(crate) fn set_targets(
        &mut self,
        threads: &HashMap<u32, u32>,
        processes: &[u32],
    ) -> Result<(), RecordError> {
        match self {
            Backend::Bpf {
                recorder, known, ..
            } => {
                for &pid in processes {
                    recorder.add_process(pid)?;
                }
                for (&tid, &tgid) in threads {
                    if known.insert(tid, tgid).is_none() {
                        recorder.add_thread(tid, tgid)?;
                    }
                }
            }
            Backend::Tracefs { recorder, .. } => {
                let tids: Vec<u32> = threads.keys().copied().collect();
                recorder.set_futex_threads(&tids)?;
            }
        }
        Ok(())
    }

    /// Starts `command` for the recording; the BPF recorder follows it from its fork on.
    pub(crate) fn spawn(
        &mut self,
        command: &mut std::process::Command,
    ) -> Result<std::process::Child, RecordError> {
        let Backend::Bpf { recorder, .. } = self else {
            return command.spawn().map_err(RecordError::SpawnIo);
        };
        let tid = rtlab_sys::cpu::current_tid();
        recorder.follow_next_child_of(tid)?;
        let child = command.spawn();
        recorder.forget_spawner(tid);
        child.map_err(RecordError::SpawnIo)
    }

    /// Waits up to `timeout` before the next poll. BPF: until the programs wake us (a quarter of
    /// the ring waiting) — but at least [`BPF_MIN_POLL`], since a ring buffer also polls
    /// readable when a record came between the last drain and the wait. Tracefs just sleeps.
    pub(crate) fn wait(&self, timeout: Duration) {
        match self {
            Backend::Bpf { recorder, .. } => {
                let start = std::time::Instant::now();
                if rtlab_sys::ipc::poll_readable(&[recorder.ring_fd()], Some(timeout)).is_err() {
                    std::thread::sleep(timeout);
                }
                let floor = BPF_MIN_POLL.min(timeout);
                if let Some(rest) = floor.checked_sub(start.elapsed()) {
                    std::thread::sleep(rest);
                }
            }
            Backend::Tracefs { .. } => std::thread::sleep(timeout),
        }
    }

    /// Stops recording new events (the last poll still reads what is waiting).
    pub(crate) fn stop(&mut self) -> Result<(), RecordError> {
        match self {
            // The programs stay attached until drop; the last poll's cut keeps the file's end
            // where the stop was asked.
            Backend::Bpf { .. } => Ok(()),
            Backend::Tracefs { recorder, .. } => Ok(recorder.stop()?),
        }
    }

    /// Reads what is waiting into `pending`; returns the events lost since the last poll and
    /// the time before which every event has been read (`poll_start` for tracefs).
    pub(crate) fn poll(
        &mut self,
        pending: &mut Vec<Event>,
        poll_start: u64,
    ) -> Result<(u64, u64), RecordError> {
        match self {
            Backend::Bpf {
                recorder,
                lost_before,
                ..
            } => {
                let mut undecodable = None;
                let (_, wrong_size) = recorder.drain(|record| match crate::file::decode(record) {
                    Ok(event) => pending.push(event),
                    Err(message) => {
                        undecodable.get_or_insert(message);
                    }
                });
                if let Some(message) = undecodable {
                    return Err(RecordError::Record(message));
                }
                if wrong_size > 0 {
                    return Err(RecordError::Record(format!(
                        "{wrong_size} ring-buffer records of the wrong size"
                    )));
                }
                let lost = recorder.counters()?.lost;
                let new_lost = lost.saturating_sub(*lost_before);
                *lost_before = lost;
                Ok((new_lost, poll_start.saturating_sub(BPF_REORDER_MARGIN_NS)))
            }
            Backend::Tracefs { recorder, decoder } => {
                let mut decode_error = None;
                let outcome = recorder.poll(|cpu, time, payload| {
                    if decode_error.is_some() {
                        return;
                    }
                    if let Err(error) =
                        decoder.decode(cpu, time, payload, &mut |event| pending.push(event))
                    {
                        decode_error = Some(error);
                    }
                })?;
                if let Some(error) = decode_error {
                    return Err(error.into());
                }
                Ok((outcome.lost_events, poll_start))
            }
        }
    }
}
