//! When one thread ran, from `sched_switch` events of a private tracefs instance: the input of the
//! supply measurement (`rtlab reserve --verify`, the reservation benchmark).
//!
//! Only `sched_switch` is enabled, filtered in the kernel to switches into or out of the thread,
//! so the rings hold a few events per slice however busy the machine is. Times are CLOCK_MONOTONIC.

use crate::event::{EventDecoder, EventKind};
use crate::format::parse_event_format;
use crate::page::PageDecoder;
use crate::recorder::TraceError;
use rtlab_core::Nanos;
use rtlab_sys::tracefs::{self, Instance, RawPipe, Tracefs};
use std::time::Duration;

/// One switch of the watched thread: (time, `true` into it / `false` out of it, CPU).
pub type Switch = (u64, bool, u32);

/// What a recording found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadRuns {
    pub tid: u32,
    pub from: Nanos,
    pub to: Nanos,
    /// The intervals the thread was on a CPU, in time order, disjoint, inside `[from, to)`.
    pub runs: Vec<(Nanos, Nanos)>,
    pub n_switches: usize,
    /// Events the kernel dropped (a full ring): when non-zero the runs may be wrong.
    pub lost_events: u64,
}

/// Turns the thread's switches (any order) into run intervals inside `[from, to)`. A thread
/// whose first switch is *out* was running since `from`; one still in at the end runs to `to`.
/// After a migration the CPUs' stamps may disagree by a little: a switch in on another CPU ends
/// the run at once, and the late switch out on the old CPU is ignored, so runs never overlap.
pub fn runs_from_switches(switches: &mut [Switch], from: u64, to: u64) -> Vec<(Nanos, Nanos)> {
    switches.sort_unstable();
    let mut runs: Vec<(Nanos, Nanos)> = Vec::new();
    let mut running: Option<(u64, u32)> = match switches.first() {
        Some(&(_, false, cpu)) => Some((from, cpu)),
        _ => None,
    };
    let push = |start: u64, end: u64, runs: &mut Vec<(Nanos, Nanos)>| {
        let start = start.max(from);
        let end = end.min(to);
        if start >= end {
            return;
        }
        match runs.last_mut() {
            Some(last) if last.1 .0 >= start => last.1 = Nanos(last.1 .0.max(end)),
            _ => runs.push((Nanos(start), Nanos(end))),
        }
    };
    for &(time, into, cpu) in switches.iter() {
        match (into, running) {
            (true, None) => running = Some((time, cpu)),
            (true, Some((start, running_cpu))) if running_cpu != cpu => {
                push(start, time, &mut runs);
                running = Some((time, cpu));
            }
            (true, Some(_)) => {}
            (false, Some((start, running_cpu))) if running_cpu == cpu => {
                push(start, time, &mut runs);
                running = None;
            }
            (false, _) => {}
        }
    }
    if let Some((start, _)) = running {
        push(start, to, &mut runs);
    }
    runs
}

/// Most pages read from one CPU in one poll.
pub const MAX_PAGES_PER_POLL: usize = 4096;

/// A running recording of one thread's switches.
pub struct RunRecorder {
    tid: u32,
    readers: Vec<RawPipe>,
    instance: Instance,
    _tracefs: Tracefs,
    decoder: EventDecoder,
    page_decoder: PageDecoder,
    page: Vec<u8>,
    switches: Vec<Switch>,
    /// Per reader, the newest time stamp taken (a page repeating older events is not new).
    newest_by_cpu: Vec<u64>,
    lost_events: u64,
    from: u64,
}

impl std::fmt::Debug for RunRecorder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RunRecorder")
            .field("tid", &self.tid)
            .field("instance", &self.instance.path())
            .finish()
    }
}

impl RunRecorder {
    /// Creates the instance (`instances/rtlab-<pid>-runs-<tid>`), enables the filtered
    /// `sched_switch` and starts tracing.
    pub fn start(tid: u32) -> Result<RunRecorder, TraceError> {
        let tracefs = Tracefs::open()?;
        tracefs.remove_stale_instances()?;
        let name = format!(
            "{}{}-runs-{tid}",
            tracefs::INSTANCE_PREFIX,
            std::process::id()
        );
        let instance = tracefs.create_instance(&name)?;
        let page_decoder = crate::recorder::page_decoder(&tracefs)?;
        instance.write("tracing_on", "0")?;
        instance.write("trace_clock", "mono")?;
        instance.write("buffer_size_kb", "2048")?;
        let directory = "events/sched/sched_switch";
        if !instance.exists(directory) {
            return Err(TraceError::MissingEvent("sched:sched_switch".into()));
        }
        let format_file = format!("{directory}/format");
        let format =
            parse_event_format("sched", &instance.read(&format_file)?).map_err(|source| {
                TraceError::Format {
                    file: format_file.clone(),
                    source,
                }
            })?;
        let mut decoder = EventDecoder::default();
        decoder.add(&format)?;
        instance.write(
            &format!("{directory}/filter"),
            &format!("prev_pid == {tid} || next_pid == {tid}"),
        )?;
        instance.write(&format!("{directory}/enable"), "1")?;
        let readers = rtlab_sys::cpu::online_cpus()?
            .into_iter()
            .map(|cpu| instance.open_cpu_raw(cpu))
            .collect::<Result<Vec<_>, _>>()?;
        let page_size = tracefs::ring_page_size(&tracefs)
            .max(page_decoder.page.data_offset + page_decoder.page.data_size);
        instance.write("tracing_on", "1")?;
        let newest_by_cpu = vec![0; readers.len()];
        Ok(RunRecorder {
            tid,
            readers,
            instance,
            _tracefs: tracefs,
            decoder,
            page_decoder,
            page: vec![0; page_size],
            switches: Vec::new(),
            newest_by_cpu,
            lost_events: 0,
            from: rtlab_sys::clock::monotonic_ns(),
        })
    }

    /// Reads everything the rings hold now.
    pub fn poll(&mut self) -> Result<(), TraceError> {
        let tid = self.tid as i32;
        for (index, reader) in self.readers.iter_mut().enumerate() {
            let cpu = reader.cpu() as u32;
            let decoder = &self.decoder;
            let switches = &mut self.switches;
            let read = crate::app_recorder::drain_ring(
                reader,
                &mut self.page,
                &self.page_decoder,
                &mut self.newest_by_cpu[index],
                MAX_PAGES_PER_POLL,
                |time, payload| {
                    if let Ok(Some(event)) = decoder.decode(cpu, time, payload) {
                        if let EventKind::Switch {
                            prev_pid, next_pid, ..
                        } = event.kind
                        {
                            if prev_pid == tid {
                                switches.push((event.timestamp_ns, false, cpu));
                            }
                            if next_pid == tid {
                                switches.push((event.timestamp_ns, true, cpu));
                            }
                        }
                    }
                },
            )?;
            self.lost_events += read.lost_events;
        }
        Ok(())
    }

    /// Stops tracing, reads the rest, and returns the runs between the start and now.
    pub fn finish(mut self) -> Result<ThreadRuns, TraceError> {
        let to = rtlab_sys::clock::monotonic_ns();
        self.instance.write("tracing_on", "0")?;
        self.poll()?;
        let n_switches = self.switches.len();
        let runs = runs_from_switches(&mut self.switches, self.from, to);
        Ok(ThreadRuns {
            tid: self.tid,
            from: Nanos(self.from),
            to: Nanos(to),
            runs,
            n_switches,
            lost_events: self.lost_events,
        })
    }
}

/// Records when thread `tid` ran over the next `duration` (polling the rings every 100 ms).
///
/// The calling thread does the polling: under real-time load it must itself be real-time (rtlab's
/// benchmark runs it at SCHED_FIFO 97 with SCHED_FLAG_RESET_ON_FORK), or it only gets to read when
/// the load pauses; the rings (2 MiB per CPU, about 30,000 switches) hold what it has not read yet,
/// and a loss is counted in [`ThreadRuns::lost_events`].
pub fn record_thread_runs(tid: u32, duration: Duration) -> Result<ThreadRuns, TraceError> {
    let mut recorder = RunRecorder::start(tid)?;
    let end = std::time::Instant::now() + duration;
    loop {
        let now = std::time::Instant::now();
        if now >= end {
            break;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(100)));
        recorder.poll()?;
    }
    recorder.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_become_runs() {
        let mut switches = vec![(30, true, 0), (10, true, 0), (20, false, 0), (45, false, 0)];
        assert_eq!(
            runs_from_switches(&mut switches, 0, 100),
            vec![(Nanos(10), Nanos(20)), (Nanos(30), Nanos(45))]
        );
    }

    #[test]
    fn running_at_both_edges_and_clipped() {
        let mut switches = vec![(5, false, 1), (50, true, 1)];
        assert_eq!(
            runs_from_switches(&mut switches, 0, 60),
            vec![(Nanos(0), Nanos(5)), (Nanos(50), Nanos(60))]
        );
        assert!(runs_from_switches(&mut [], 0, 60).is_empty());
    }

    #[test]
    fn a_migration_with_skewed_stamps_never_overlaps_or_loses_the_new_run() {
        // Out on CPU 0 stamped 20, in on CPU 1 stamped 19.
        let mut switches = vec![(10, true, 0), (20, false, 0), (19, true, 1), (30, false, 1)];
        assert_eq!(
            runs_from_switches(&mut switches, 0, 100),
            vec![(Nanos(10), Nanos(30))]
        );
    }
}
