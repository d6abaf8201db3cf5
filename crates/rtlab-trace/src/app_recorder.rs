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

use crate::format::{parse_event_format, EventFormat};
use crate::page::{LostEvents, PageDecoder};
use crate::recorder::TraceError;
use rtlab_sys::tracefs::{self, Instance, RawPipe, Tracefs};

/// The events recorded, as (system, event, required).
pub const APP_EVENTS: &[(&str, &str, bool)] = &[
    ("sched", "sched_switch", true),
    ("sched", "sched_waking", true),
    ("sched", "sched_wakeup_new", false),
    ("sched", "sched_process_fork", false),
    ("sched", "sched_process_exit", false),
    ("sched", "sched_migrate_task", false),
    ("sched", "sched_pi_setprio", false),
    ("syscalls", "sys_enter_futex", false),
    ("syscalls", "sys_exit_futex", false),
    ("irq", "irq_handler_entry", false),
    ("irq", "irq_handler_exit", false),
    ("irq", "softirq_entry", false),
    ("irq", "softirq_exit", false),
    ("irq_vectors", "local_timer_entry", false),
    ("irq_vectors", "local_timer_exit", false),
    ("irq_vectors", "reschedule_entry", false),
    ("irq_vectors", "reschedule_exit", false),
];

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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AppPoll {
    pub n_pages: u64,
    pub n_records: u64,
    pub lost_events: u64,
}

/// Reads one CPU's ring until it hands back nothing newer than `newest` (a ring can keep handing
/// back its last page once tracing is off) or `max_pages` pages were read; `visit(time,
/// payload)` for each new record. Shared by every tracefs recorder that reads raw pages.
pub(crate) fn drain_ring(
    reader: &mut RawPipe,
    page: &mut [u8],
    page_decoder: &PageDecoder,
    newest: &mut u64,
    max_pages: usize,
    mut visit: impl FnMut(u64, &[u8]),
) -> Result<AppPoll, TraceError> {
    let cpu = reader.cpu();
    let mut outcome = AppPoll::default();
    for _ in 0..max_pages {
        let Some(length) = reader.read_page(page)? else {
            break;
        };
        outcome.n_pages += 1;
        let mut fresh = 0u64;
        let summary = page_decoder
            .decode(&page[..length], |record| {
                if record.timestamp_ns < *newest {
                    return;
                }
                *newest = record.timestamp_ns;
                fresh += 1;
                visit(record.timestamp_ns, record.payload);
            })
            .map_err(|source| TraceError::Page { cpu, source })?;
        outcome.n_records += fresh;
        match summary.lost_events {
            Some(LostEvents::Counted(count)) => outcome.lost_events += count,
            Some(LostEvents::Unknown) => outcome.lost_events += 1,
            None => {}
        }
        if fresh == 0 {
            break;
        }
    }
    Ok(outcome)
}

/// A running recording.
pub struct AppRecorder {
    readers: Vec<RawPipe>,
    instance: Instance,
    _tracefs: Tracefs,
    page_decoder: PageDecoder,
    page: Vec<u8>,
    formats: Vec<EventFormat>,
    enabled: Vec<String>,
    newest_by_cpu: Vec<u64>,
    removed_stale: Vec<String>,
    futex_filter: Option<Vec<u32>>,
}

impl std::fmt::Debug for AppRecorder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("AppRecorder")
            .field("instance", &self.instance.path())
            .field("enabled", &self.enabled)
            .finish()
    }
}

impl AppRecorder {
    /// Creates the instance with a ring of `buffer_kb` KiB per CPU, enables [`APP_EVENTS`] (the
    /// futex syscalls filtered to `futex_threads` when given) and starts tracing on the
    /// CLOCK_MONOTONIC clock.
    pub fn start(buffer_kb: u32, futex_threads: Option<&[u32]>) -> Result<AppRecorder, TraceError> {
        let tracefs = Tracefs::open()?;
        let removed_stale = tracefs.remove_stale_instances()?;
        let name = format!(
            "{}{}-apptrace",
            tracefs::INSTANCE_PREFIX,
            std::process::id()
        );
        let instance = tracefs.create_instance(&name)?;
        let page_decoder = crate::recorder::page_decoder(&tracefs)?;
        instance.write("tracing_on", "0")?;
        instance.write("trace_clock", "mono")?;
        instance.write("buffer_size_kb", &buffer_kb.to_string())?;
        let mut formats = Vec::new();
        let mut enabled = Vec::new();
        for (system, event, required) in APP_EVENTS {
            let directory = format!("events/{system}/{event}");
            if !instance.exists(&directory) {
                if *required {
                    return Err(TraceError::MissingEvent(format!("{system}:{event}")));
                }
                continue;
            }
            let format_file = format!("{directory}/format");
            let format =
                parse_event_format(system, &instance.read(&format_file)?).map_err(|source| {
                    TraceError::Format {
                        file: format_file.clone(),
                        source,
                    }
                })?;
            instance.write(&format!("{directory}/enable"), "1")?;
            formats.push(format);
            enabled.push(format!("{system}:{event}"));
        }
        let readers = rtlab_sys::cpu::online_cpus()?
            .into_iter()
            .map(|cpu| instance.open_cpu_raw(cpu))
            .collect::<Result<Vec<_>, _>>()?;
        let page_size = tracefs::ring_page_size(&tracefs)
            .max(page_decoder.page.data_offset + page_decoder.page.data_size);
        let newest_by_cpu = vec![0; readers.len()];
        let mut recorder = AppRecorder {
            readers,
            instance,
            _tracefs: tracefs,
            page_decoder,
            page: vec![0; page_size],
            formats,
            enabled,
            newest_by_cpu,
            removed_stale,
            futex_filter: None,
        };
        if let Some(threads) = futex_threads {
            recorder.set_futex_threads(threads)?;
        }
        recorder.instance.write("tracing_on", "1")?;
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
            if self.instance.exists(event) {
                self.instance.write(&format!("{event}/filter"), &filter)?;
            }
        }
        self.futex_filter = Some(sorted);
        Ok(())
    }

    /// The formats of the enabled events, to decode the payloads with.
    pub fn formats(&self) -> &[EventFormat] {
        &self.formats
    }

    /// `system:event` of every enabled event.
    pub fn enabled_events(&self) -> &[String] {
        &self.enabled
    }

    /// Instances of killed rtlab processes this start removed.
    pub fn removed_stale_instances(&self) -> &[String] {
        &self.removed_stale
    }

    pub fn instance_path(&self) -> &std::path::Path {
        self.instance.path()
    }

    /// Reads what the rings hold now; `visit(cpu, time, payload)` for each record.
    pub fn poll(&mut self, mut visit: impl FnMut(u32, u64, &[u8])) -> Result<AppPoll, TraceError> {
        let mut outcome = AppPoll::default();
        for (index, reader) in self.readers.iter_mut().enumerate() {
            let cpu = reader.cpu() as u32;
            let read = drain_ring(
                reader,
                &mut self.page,
                &self.page_decoder,
                &mut self.newest_by_cpu[index],
                MAX_PAGES_PER_POLL,
                |time, payload| visit(cpu, time, payload),
            )?;
            outcome.n_pages += read.n_pages;
            outcome.n_records += read.n_records;
            outcome.lost_events += read.lost_events;
        }
        Ok(outcome)
    }

    /// Stops tracing (the rings keep what they hold for a last [`AppRecorder::poll`]).
    pub fn stop(&mut self) -> Result<(), TraceError> {
        self.instance.write("tracing_on", "0")?;
        Ok(())
    }
}
