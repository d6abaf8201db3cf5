//! When one thread ran, from `sched_switch` events of a private tracefs instance: the input of the
//! supply measurement (`rtlab reserve --verify`, the reservation benchmark).
//!
//! Only `sched_switch` is enabled, filtered in the kernel to switches into or out of the thread,
//! so the rings hold a few events per slice however busy the machine is. Times are CLOCK_MONOTONIC.

use crate::error::TraceError;
use crate::event::{EventDecoder, EventKind};
use crate::instance::{InstanceBuilder, TraceInstance};
use rtlab_core::Nanos;
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
    trace: TraceInstance,
    decoder: EventDecoder,
    switches: Vec<Switch>,
    lost_events: u64,
    from: u64,
}

impl std::fmt::Debug for RunRecorder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RunRecorder")
            .field("tid", &self.tid)
            .field("instance", &self.trace.path())
            .finish()
    }
}

impl RunRecorder {
    /// Creates the instance (`instances/rtlab-<pid>-runs-<tid>`), enables the filtered
    /// `sched_switch` and starts tracing.
    pub fn start(tid: u32) -> Result<RunRecorder, TraceError> {
        let trace = InstanceBuilder::new(2048)
            .name_suffix(format!("runs-{tid}"))
            .filtered_event(
                "sched",
                "sched_switch",
                &format!("prev_pid == {tid} || next_pid == {tid}"),
            )
            .build()?;
        let mut decoder = EventDecoder::default();
        for format in trace.formats() {
            decoder.add(format)?;
        }
        trace.start_tracing()?;
        Ok(RunRecorder {
            tid,
            trace,
            decoder,
            switches: Vec::new(),
            lost_events: 0,
            from: rtlab_sys::clock::monotonic_ns(),
        })
    }

    /// Reads everything the rings hold now.
    pub fn poll(&mut self) -> Result<(), TraceError> {
        let tid = self.tid as i32;
        let decoder = &self.decoder;
        let switches = &mut self.switches;
        let read = self
            .trace
            .drain_rings(MAX_PAGES_PER_POLL, |cpu, time, payload| {
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
            })?;
        self.lost_events += read.lost_events;
        Ok(())
    }

    /// Stops tracing, reads the rest, and returns the runs between the start and now.
    pub fn finish(mut self) -> Result<ThreadRuns, TraceError> {
        let to = rtlab_sys::clock::monotonic_ns();
        self.trace.stop_tracing()?;
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
