//! The tracefs recorder behind `rtlab trace record`: a private instance with the scheduler,
//! futex-syscall and interrupt events an application's thread analysis needs, read as binary
//! pages and handed out as raw records (time, CPU, payload) with the formats to decode them.
//!
//! The instance is `instances/rtlab-<pid>-apptrace`: removed when the recorder is dropped (on
//! SIGINT too, since the CLI stops cleanly), and — when rtlab was SIGKILLed — by the next rtlab
//! that starts a recorder (`remove_stale_instances`, by the dead pid in the name). Nothing outside
//! the instance is touched. Scheduler and interrupt events are recorded for every task, so the
//! analyses see who preempted or woke the target; the futex syscalls, which every process makes,
//! are filtered in the kernel to the target's threads. (`rtlab trace record` prefers the eBPF
//! recorder of `rtlab-bpf`, `apptrace.bpf.c`, where it loads; this one needs only tracefs.)

use rtlab_explain::error::TraceError;
use rtlab_explain::format::EventFormat;
use rtlab_explain::instance::{InstanceBuilder, RingsRead, TraceInstance};

/// The events recorded, as (system, event, required): the rows of rtlab-core's table this
/// recorder enables (`rtlab_core::tracepoints::app_tracefs_events`).
pub fn app_events() -> Vec<(&'static str, &'static str, bool)> {
    rtlab_core::tracepoints::app_tracefs_events()
        .into_iter()
        .map(|(row, need)| {
            (
                row.system,
                row.name,
                need == rtlab_core::tracepoints::Need::Required,
            )
        })
        .collect()
}

/// The futex events, whose filter follows the target's threads.
const FUTEX_EVENTS: [&str; 2] = [
    "events/syscalls/sys_enter_futex",
    "events/syscalls/sys_exit_futex",
];

/// Most thread ids put in the futex filter; beyond it every task's futex calls are recorded.
pub const MAX_FILTERED_THREADS: usize = 200;

/// Most pages read from one CPU in one poll.
const MAX_PAGES_PER_POLL: usize = 4096;

/// What one poll read.
pub type AppPoll = RingsRead;

/// A running recording.
pub struct AppRecorder {
    trace: TraceInstance,
    futex_filter: Option<Vec<u32>>,
}

impl std::fmt::Debug for AppRecorder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("AppRecorder")
            .field("instance", &self.trace.path())
            .field("enabled", &self.trace.enabled_events())
            .finish()
    }
}

impl AppRecorder {
    /// Creates the instance with a ring of `buffer_kb` KiB per CPU, enables [`app_events`] (the
    /// futex syscalls filtered to `futex_threads` when given) and starts tracing on the
    /// CLOCK_MONOTONIC clock.
    /// With `markers` (cycle starts, work done), their user-space probes are recorded too:
    /// `rtlab_<pid>/cycle<N>` and `rtlab_<pid>/done<N>`.
    pub fn start(
        buffer_kb: u32,
        futex_threads: Option<&[u32]>,
        markers: &[&crate::cycle_marker::CycleMarker],
    ) -> Result<AppRecorder, TraceError> {
        let mut builder = InstanceBuilder::new(buffer_kb as usize).name_suffix("apptrace");
        for (system, event, required) in app_events() {
            builder = builder.event(system, event, required);
        }
        for marker in markers {
            let prefix = if marker.at_return {
                crate::cycle_marker::WORK_DONE_EVENT
            } else {
                crate::cycle_marker::CYCLE_MARKER_EVENT
            };
            for (index, (_, offset)) in marker.points.iter().enumerate() {
                builder = builder.filtered_uprobe(
                    &format!("{prefix}{index}"),
                    &marker.binary,
                    *offset,
                    marker.at_return,
                    marker.filter.map_or("", |filter| filter.fetch_args),
                    marker.filter.map(|filter| filter.condition),
                );
            }
        }
        let mut recorder = AppRecorder {
            trace: builder.build()?,
            futex_filter: None,
        };
        if let Some(threads) = futex_threads {
            recorder.set_futex_threads(threads)?;
        }
        recorder.trace.start_tracing()?;
        Ok(recorder)
    }

    /// Limits the futex events to these threads (re-written when the set changes; more than
    /// [`MAX_FILTERED_THREADS`] clears the filter).
    pub fn set_futex_threads(&mut self, threads: &[u32]) -> Result<(), TraceError> {
        let mut sorted = threads.to_vec();
        sorted.sort_unstable();
        if self.futex_filter.as_ref() == Some(&sorted) {
            return Ok(());
        }
        let filter = if sorted.len() > MAX_FILTERED_THREADS {
            "0".to_owned()
        } else if sorted.is_empty() {
            // No thread yet: nothing passes.
            "common_pid == -1".to_owned()
        } else {
            sorted
                .iter()
                .map(|tid| format!("common_pid == {tid}"))
                .collect::<Vec<_>>()
                .join(" || ")
        };
        for event in FUTEX_EVENTS {
            if self.trace.instance().exists(event) {
                self.trace
                    .instance()
                    .write(&format!("{event}/filter"), &filter)?;
            }
        }
        self.futex_filter = Some(sorted);
        Ok(())
    }

    /// The formats of the enabled events, to decode the payloads with.
    pub fn formats(&self) -> &[EventFormat] {
        self.trace.formats()
    }

    /// `system:event` of every enabled event.
    pub fn enabled_events(&self) -> &[String] {
        self.trace.enabled_events()
    }

    /// Instances of killed rtlab processes this start removed.
    pub fn removed_stale_instances(&self) -> &[String] {
        self.trace.removed_stale_instances()
    }

    pub fn instance_path(&self) -> &std::path::Path {
        self.trace.path()
    }

    /// Reads what the rings hold now; `visit(cpu, time, payload)` for each record.
    pub fn poll(&mut self, visit: impl FnMut(u32, u64, &[u8])) -> Result<AppPoll, TraceError> {
        self.trace.drain_rings(MAX_PAGES_PER_POLL, visit)
    }

    /// Stops tracing (the rings keep what they hold for a last [`AppRecorder::poll`]).
    pub fn stop(&mut self) -> Result<(), TraceError> {
        self.trace.stop_tracing()
    }
}
