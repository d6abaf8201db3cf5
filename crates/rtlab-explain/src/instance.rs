//! The one way rtlab sets up a private tracefs instance, for every tracefs recorder: the explain
//! recorder (`recorder/`), `rtlab trace record`'s (`app_recorder.rs`) and `reserve --verify`'s
//! (`supply.rs`).
//!
//! [`InstanceBuilder::build`] opens (or mounts) tracefs, removes the instances a killed rtlab left
//! behind (`instances/rtlab-<pid>…` of a dead pid), creates `instances/rtlab-<pid>[-suffix]`
//! (with task-name recording off around its `mkdir` when asked, putting back first what a killed
//! rtlab left changed), reads the ring-buffer page layout, stamps events with CLOCK_MONOTONIC
//! (`trace_clock` = `mono`, the probe's clock), sizes the rings (only the CPUs asked for, the
//! others masked off), reads each event's `format`, writes its filter and enables it, and opens
//! each CPU's `trace_pipe_raw`. Tracing stays off until [`TraceInstance::start_tracing`], so the
//! caller can finish its own set-up first. Dropping the [`TraceInstance`] closes the readers,
//! switches tracing off and removes the instance (on errors and panics too); after a SIGKILL the
//! next rtlab's `build` removes it.

use crate::error::TraceError;
use crate::format::{parse_event_format, parse_header_event, parse_header_page, EventFormat};
use crate::page::{LostEvents, PageDecoder};
use rtlab_sys::tracefs::{self, Instance, RawPipe, Tracefs};

/// One event to record, or only to decode.
#[derive(Clone, Debug)]
struct EventRequest {
    system: String,
    event: String,
    /// Missing on this kernel: an error when required, skipped otherwise.
    required: bool,
    /// False: only its format is read (e.g. `ftrace:print`, which `trace_marker` writes anyway).
    enable: bool,
    filter: Option<String>,
}

/// How to set up a private instance; [`InstanceBuilder::build`] does it.
#[derive(Clone, Debug)]
pub struct InstanceBuilder {
    name_suffix: Option<String>,
    comm_recording_off: bool,
    buffer_size_kb: usize,
    only_cpus: Vec<usize>,
    events: Vec<EventRequest>,
    /// User-space probes to add (in rtlab's own group) and record: (event, file, file offset,
    /// at the function's return).
    uprobes: Vec<UprobeRequest>,
}

impl InstanceBuilder {
    /// An instance `instances/rtlab-<pid>` with a ring of `buffer_size_kb` KiB per CPU and no
    /// events yet.
    pub fn new(buffer_size_kb: usize) -> InstanceBuilder {
        InstanceBuilder {
            name_suffix: None,
            comm_recording_off: false,
            buffer_size_kb,
            only_cpus: Vec::new(),
            events: Vec::new(),
            uprobes: Vec::new(),
        }
    }

    /// Adds the user-space probe `rtlab_<pid>/<event>` at `offset` in the ELF file `binary`
    /// (`uprobe_events`, global: removed again when the instance goes, and by the next rtlab
    /// after a SIGKILL) and records it, in this instance only.
    pub fn uprobe(
        self,
        event: &str,
        binary: &std::path::Path,
        offset: u64,
        at_return: bool,
    ) -> InstanceBuilder {
        self.filtered_uprobe(event, binary, offset, at_return, "", None)
    }

    /// As [`InstanceBuilder::uprobe`], the probe also fetching `fetch_args` (the kernel's
    /// syntax, `flags=%si:s32`) and recorded only where `filter` over them holds (the kernel
    /// drops the others).
    pub fn filtered_uprobe(
        mut self,
        event: &str,
        binary: &std::path::Path,
        offset: u64,
        at_return: bool,
        fetch_args: &str,
        filter: Option<&str>,
    ) -> InstanceBuilder {
        self.uprobes.push(UprobeRequest {
            event: event.to_owned(),
            binary: binary.to_path_buf(),
            offset,
            at_return,
            fetch_args: fetch_args.to_owned(),
        });
        let group = rtlab_sys::uprobe_events::own_group();
        self.request(&group, event, true, true, filter.map(str::to_owned))
    }

    /// Names the instance `instances/rtlab-<pid>-<suffix>` (one process, several instances).
    pub fn name_suffix(mut self, suffix: impl Into<String>) -> InstanceBuilder {
        self.name_suffix = Some(suffix.into());
        self
    }

    /// Creates the instance with the global `options/record-cmd` off around its `mkdir`
    /// (`Tracefs::create_instance_without_comm_recording`), putting back first what a killed rtlab
    /// left changed ([`TraceInstance::repaired_options`]).
    pub fn without_comm_recording(mut self) -> InstanceBuilder {
        self.comm_recording_off = true;
        self
    }

    /// Reads only these CPUs: they get the ring of `buffer_size_kb`, the others a minimal one and
    /// are masked off (`tracing_cpumask`). Empty: every online CPU, each with the full ring.
    pub fn only_cpus(mut self, cpus: &[usize]) -> InstanceBuilder {
        self.only_cpus = cpus.to_vec();
        self
    }

    /// Records `system:event`; when the kernel lacks it, an error if `required`, else skipped.
    pub fn event(self, system: &str, event: &str, required: bool) -> InstanceBuilder {
        self.request(system, event, required, true, None)
    }

    /// Records `system:event` (required) with a filter the kernel applies (`prev_pid == 12`).
    pub fn filtered_event(self, system: &str, event: &str, filter: &str) -> InstanceBuilder {
        self.request(system, event, true, true, Some(filter.to_owned()))
    }

    /// Reads the format of `system:event` when the kernel has it, without enabling the event.
    pub fn format_only(self, system: &str, event: &str) -> InstanceBuilder {
        self.request(system, event, false, false, None)
    }

    fn request(
        mut self,
        system: &str,
        event: &str,
        required: bool,
        enable: bool,
        filter: Option<String>,
    ) -> InstanceBuilder {
        self.events.push(EventRequest {
            system: system.to_owned(),
            event: event.to_owned(),
            required,
            enable,
            filter,
        });
        self
    }

    /// Sets the instance up as described in the module docs; tracing is still off.
    pub fn build(self) -> Result<TraceInstance, TraceError> {
        let tracefs = Tracefs::open()?;
        let mut removed_stale = tracefs.remove_stale_instances()?;
        // After the instances: a probe still enabled in a stale instance could not be removed.
        removed_stale.extend(rtlab_sys::uprobe_events::remove_stale(tracefs.root())?);
        // Added before the instance exists, so that on an error below the instance (declared
        // later) is removed first and the probe, no longer enabled anywhere, after it.
        let mut uprobes = Vec::new();
        for request in &self.uprobes {
            uprobes.push(UprobeGuard::add(tracefs.root(), request)?);
        }
        let name = match &self.name_suffix {
            None => format!("{}{}", tracefs::INSTANCE_PREFIX, std::process::id()),
            Some(suffix) => format!(
                "{}{}-{suffix}",
                tracefs::INSTANCE_PREFIX,
                std::process::id()
            ),
        };
        let (instance, repaired_options, comm_recording_off) = if self.comm_recording_off {
            let repaired = tracefs.repair_options();
            let (instance, off) = tracefs.create_instance_without_comm_recording(&name)?;
            (instance, repaired, off)
        } else {
            (tracefs.create_instance(&name)?, Vec::new(), false)
        };
        let page_decoder = page_decoder(&tracefs)?;
        instance.write("tracing_on", "0")?;
        instance.write("trace_clock", "mono")?;
        let ring = self.buffer_size_kb.to_string();
        if self.only_cpus.is_empty() {
            instance.write("buffer_size_kb", &ring)?;
        } else {
            // Only the CPUs read get a large ring; the others are masked off and stay minimal.
            instance.write("buffer_size_kb", "16")?;
            for cpu in &self.only_cpus {
                instance.write(&format!("per_cpu/cpu{cpu}/buffer_size_kb"), &ring)?;
            }
            instance.write("tracing_cpumask", &cpu_mask(&self.only_cpus))?;
        }
        let mut formats = Vec::new();
        let mut enabled = Vec::new();
        for request in &self.events {
            let (system, event) = (&request.system, &request.event);
            let directory = format!("events/{system}/{event}");
            let format_file = format!("{directory}/format");
            let present = if request.enable {
                instance.exists(&directory)
            } else {
                instance.exists(&format_file)
            };
            if !present {
                if request.required {
                    return Err(TraceError::MissingEvent(format!("{system}:{event}")));
                }
                continue;
            }
            let format =
                parse_event_format(system, &instance.read(&format_file)?).map_err(|source| {
                    TraceError::Format {
                        file: format_file.clone(),
                        source,
                    }
                })?;
            formats.push(format);
            if !request.enable {
                continue;
            }
            if let Some(filter) = &request.filter {
                instance.write(&format!("{directory}/filter"), filter)?;
            }
            instance.write(&format!("{directory}/enable"), "1")?;
            enabled.push(format!("{system}:{event}"));
        }
        let cpus = if self.only_cpus.is_empty() {
            rtlab_sys::cpu::online_cpus()?
        } else {
            self.only_cpus.clone()
        };
        let readers = cpus
            .iter()
            .map(|cpu| instance.open_cpu_raw(*cpu))
            .collect::<Result<Vec<_>, _>>()?;
        let page_size = tracefs::ring_page_size(&tracefs)
            .max(page_decoder.page.data_offset + page_decoder.page.data_size);
        Ok(TraceInstance {
            newest_by_cpu: vec![0; readers.len()],
            readers,
            page: vec![0; page_size],
            page_decoder,
            formats,
            enabled,
            removed_stale,
            repaired_options,
            comm_recording_off,
            instance,
            _uprobes: uprobes,
            tracefs,
        })
    }
}

/// A user-space probe to add (see [`InstanceBuilder::filtered_uprobe`]).
#[derive(Clone, Debug)]
struct UprobeRequest {
    event: String,
    binary: std::path::PathBuf,
    offset: u64,
    at_return: bool,
    fetch_args: String,
}

/// One of rtlab's user-space probes: removed from `uprobe_events` on drop.
#[derive(Debug)]
struct UprobeGuard {
    root: std::path::PathBuf,
    group: String,
    event: String,
}

impl UprobeGuard {
    fn add(root: &std::path::Path, request: &UprobeRequest) -> Result<UprobeGuard, TraceError> {
        let group = rtlab_sys::uprobe_events::own_group();
        rtlab_sys::uprobe_events::add(
            root,
            &group,
            &request.event,
            &request.binary,
            request.offset,
            request.at_return,
            &request.fetch_args,
        )?;
        Ok(UprobeGuard {
            root: root.to_path_buf(),
            group,
            event: request.event.clone(),
        })
    }
}

impl Drop for UprobeGuard {
    fn drop(&mut self) {
        let _ = rtlab_sys::uprobe_events::remove(&self.root, &self.group, &self.event);
    }
}

/// What one [`TraceInstance::drain_rings`] read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingsRead {
    pub n_pages: u64,
    pub n_records: u64,
    pub lost_events: u64,
}

/// A set-up instance and its per-CPU readers. Field order matters: the readers close before the
/// instance is removed, and the instance goes before a tracefs mount rtlab made.
pub struct TraceInstance {
    pub(crate) readers: Vec<RawPipe>,
    /// One ring-buffer page, to read into.
    pub(crate) page: Vec<u8>,
    pub(crate) page_decoder: PageDecoder,
    /// Per reader, the newest time stamp taken (a page repeating older events is not new).
    newest_by_cpu: Vec<u64>,
    formats: Vec<EventFormat>,
    enabled: Vec<String>,
    removed_stale: Vec<String>,
    repaired_options: Vec<String>,
    comm_recording_off: bool,
    instance: Instance,
    /// Dropped after the instance (no longer enabled anywhere), before a tracefs rtlab mounted.
    _uprobes: Vec<UprobeGuard>,
    tracefs: Tracefs,
}

impl std::fmt::Debug for TraceInstance {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TraceInstance")
            .field("instance", &self.instance.path())
            .field("enabled", &self.enabled)
            .finish()
    }
}

impl TraceInstance {
    /// Switches tracing on (`tracing_on` = 1).
    pub fn start_tracing(&self) -> Result<(), TraceError> {
        Ok(self.instance.write("tracing_on", "1")?)
    }

    /// Switches tracing off; the rings keep what they hold for a last read.
    pub fn stop_tracing(&self) -> Result<(), TraceError> {
        Ok(self.instance.write("tracing_on", "0")?)
    }

    /// The instance's control files (filters, `trace_marker`).
    pub fn instance(&self) -> &Instance {
        &self.instance
    }

    pub fn path(&self) -> &std::path::Path {
        self.instance.path()
    }

    /// The formats read, in the order asked (events the kernel lacks left out).
    pub fn formats(&self) -> &[EventFormat] {
        &self.formats
    }

    /// `system:event` of every enabled event.
    pub fn enabled_events(&self) -> &[String] {
        &self.enabled
    }

    /// Instances (and user-space probes, `group/event`) of dead rtlab processes this start
    /// removed.
    pub fn removed_stale_instances(&self) -> &[String] {
        &self.removed_stale
    }

    /// Global options a killed rtlab had left changed and this start put back (`option=value`).
    pub fn repaired_options(&self) -> &[String] {
        &self.repaired_options
    }

    /// True when the instance does not copy task names on every switch.
    pub fn comm_recording_off(&self) -> bool {
        self.comm_recording_off
    }

    pub fn tracefs_mounted_by_us(&self) -> bool {
        self.tracefs.mounted_by_us()
    }

    /// The CPUs whose rings are read, in reader order.
    pub fn cpus(&self) -> Vec<usize> {
        self.readers.iter().map(RawPipe::cpu).collect()
    }

    /// Reads every CPU's ring, at most `max_pages_per_cpu` pages each and only records newer than
    /// the last taken from that CPU; `visit(cpu, time, payload)` for each.
    pub fn drain_rings(
        &mut self,
        max_pages_per_cpu: usize,
        mut visit: impl FnMut(u32, u64, &[u8]),
    ) -> Result<RingsRead, TraceError> {
        let mut outcome = RingsRead::default();
        for (index, reader) in self.readers.iter_mut().enumerate() {
            let cpu = reader.cpu() as u32;
            let read = drain_ring(
                reader,
                &mut self.page,
                &self.page_decoder,
                &mut self.newest_by_cpu[index],
                max_pages_per_cpu,
                |time, payload| visit(cpu, time, payload),
            )?;
            outcome.n_pages += read.n_pages;
            outcome.n_records += read.n_records;
            outcome.lost_events += read.lost_events;
        }
        Ok(outcome)
    }
}

/// Reads one CPU's ring until it hands back nothing newer than `newest` (a ring can keep handing
/// back its last page once tracing is off) or `max_pages` pages were read; `visit(time,
/// payload)` for each new record.
fn drain_ring(
    reader: &mut RawPipe,
    page: &mut [u8],
    page_decoder: &PageDecoder,
    newest: &mut u64,
    max_pages: usize,
    mut visit: impl FnMut(u64, &[u8]),
) -> Result<RingsRead, TraceError> {
    let cpu = reader.cpu();
    let mut outcome = RingsRead::default();
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

/// The ring-buffer page layout this kernel describes in tracefs (`events/header_page`,
/// `events/header_event`), for every reader of raw pages.
pub(crate) fn page_decoder(tracefs: &Tracefs) -> Result<PageDecoder, TraceError> {
    let read = |file: &str| -> Result<String, TraceError> { Ok(tracefs.read(file)?) };
    let format_error = |file: &str| {
        let file = file.to_owned();
        move |source| TraceError::Format { file, source }
    };
    Ok(PageDecoder {
        page: parse_header_page(&read("events/header_page")?)
            .map_err(format_error("events/header_page"))?,
        event: parse_header_event(&read("events/header_event")?)
            .map_err(format_error("events/header_event"))?,
    })
}

/// `tracing_cpumask`'s text for these CPUs: 32-bit hex words, highest first, comma-separated.
fn cpu_mask(cpus: &[usize]) -> String {
    let highest = cpus.iter().copied().max().unwrap_or(0);
    let mut words = vec![0u32; highest / 32 + 1];
    for cpu in cpus {
        words[cpu / 32] |= 1 << (cpu % 32);
    }
    words
        .iter()
        .rev()
        .map(|word| format!("{word:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_masks_are_hex_words() {
        assert_eq!(cpu_mask(&[0]), "00000001");
        assert_eq!(cpu_mask(&[1, 3]), "0000000a");
        assert_eq!(cpu_mask(&[0, 33]), "00000002,00000001");
    }
}
